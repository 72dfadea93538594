//! `vssd bench run`: the scenario in the simulator (its prediction, and
//! the whole run with `--sim-only`), then in a guest with the time scale
//! it needs, the simulator again beside the guest, the verdicts, and the
//! outputs.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::progress::Progress;
use crate::results::{BenchResults, ExpectResult};
use crate::scenario::{Overrides, PhaseKind, Scenario};
use crate::sim_vs_guest::compare_with_sim;
use crate::summary::summary;
use crate::verdict::{evaluate, junit};
use crate::{AccelArg, BenchError, RunArgs, dilation, guestrun, report, simrun, tail};
use vssd_common::clock::TimeScale;
use vssd_guest::Accel;

/// Run `vssd bench run`.
pub(crate) fn run_cmd(a: RunArgs) -> Result<(), BenchError> {
    let sc = Scenario::load(
        &a.scenario,
        &Overrides {
            capacity: a.capacity,
            profile: a.profile.clone(),
            bus: a.bus,
        },
    )?;
    let started = std::time::Instant::now();
    let cancel = catch_interrupt();
    let progress = Progress::new(sc.phases.len(), a.json);
    progress.say(&format!(
        "{}: {} phases, {} on a {} drive ({} bytes), {} bus",
        sc.name,
        sc.phases.len(),
        sc.profile.name,
        vssd_profile::size::format_size(sc.capacity),
        sc.capacity,
        sc.bus
    ));
    // The simulator first: it predicts each phase's duration.
    progress.say("simulating the scenario (model time)");
    let predicted = simrun::run(&sc, a.seed, None, &mut |_, _| {})?;
    let mut r = if a.sim_only {
        predicted
    } else {
        guest_run(&a, &sc, &predicted, cancel, &progress)?
    };
    r.strict = (a.strict || sc.strict) && !a.no_strict;
    r.duration_s = started.elapsed().as_secs_f64();
    r.expects = evaluate(&sc, &r);
    finish(&a, &r)
}

/// Bytes each phase of the simulator's run moves, host reads and writes:
/// the same in the guest as in the simulator, whatever the guest's speed.
fn phase_bytes(predicted: &BenchResults) -> Vec<u64> {
    predicted
        .phases
        .iter()
        .map(|p| match (&p.counters_before, &p.counters_after) {
            (Some(a), Some(b)) => (b.host_written_bytes + b.host_read_bytes)
                .saturating_sub(a.host_written_bytes + a.host_read_bytes),
            _ => 0,
        })
        .collect()
}

/// The scenario in a guest, and the simulator beside it: the run's
/// results with the comparison and the simulator's run attached.
fn guest_run(
    a: &RunArgs,
    sc: &Scenario,
    predicted: &BenchResults,
    cancel: Arc<AtomicBool>,
    progress: &Progress,
) -> Result<BenchResults, BenchError> {
    let expected_bytes = phase_bytes(predicted);
    progress.plan(expected_bytes.iter().sum());
    let dir = tempfile::Builder::new()
        .prefix("vssd-bench-")
        .tempdir()
        .map_err(|e| BenchError::Io(format!("scratch directory: {e}")))?;
    let exe = std::env::current_exe().map_err(|e| BenchError::Io(e.to_string()))?;
    let accel = match a.accel {
        AccelArg::Auto => vssd_guest::detect_accel(&vssd_guest::ensure_image()?)?,
        AccelArg::Kvm => Accel::Kvm,
        AccelArg::Tcg => Accel::Tcg,
    };
    let (time_scale, time_scale_reason) = time_scale(a, sc, &exe, dir.path(), accel, progress)?;
    let opts = guestrun::GuestOptions {
        exe,
        dir: dir.path().to_path_buf(),
        timeout: Duration::from_secs(a.timeout),
        cancel,
        // Wall time: the drive's time × K (idle phases: their seconds,
        // the rest passes at once).
        expected_s: predicted
            .phases
            .iter()
            .zip(&sc.phases)
            .map(|(p, ph)| match ph.kind {
                PhaseKind::Idle { .. } => p.model_s,
                _ => p.model_s * time_scale.factor(),
            })
            .collect(),
        expected_bytes,
        accel: Some(accel),
        time_scale,
    };
    let mut g = guestrun::run(sc, &opts, progress)?;
    g.time_scale_reason = time_scale_reason;
    let trace_path = opts.dir.join(guestrun::TRACE_FILE);
    if a.trace {
        let keep = a.out.join("trace.vssdtrace");
        std::fs::create_dir_all(&a.out)
            .and_then(|()| std::fs::copy(&trace_path, &keep))
            .map_err(|e| BenchError::Io(format!("{}: {e}", keep.display())))?;
    }
    if g.incomplete.is_none() {
        let (cmp, s) = compare_with_sim(sc, a.seed, &g, &trace_path, progress)?;
        g.comparison = cmp;
        g.sim = Some(Box::new(s));
    }
    Ok(g)
}

/// The run's time scale `K`, and why when `auto` chose it: a probe boot
/// on a daemon of its own, its sockets in `dir/probe`.
fn time_scale(
    a: &RunArgs,
    sc: &Scenario,
    exe: &Path,
    dir: &Path,
    accel: Accel,
    progress: &Progress,
) -> Result<(TimeScale, Option<String>), BenchError> {
    match a.time_scale {
        dilation::TimeScaleArg::Fixed(k) => Ok((k, None)),
        dilation::TimeScaleArg::Auto => {
            let (guest_exe, _copy) = vssd_guest::guest_visible(exe)?;
            // Its own daemon, with its sockets apart from the run's.
            let probe_dir = dir.join("probe");
            std::fs::create_dir(&probe_dir)
                .map_err(|e| BenchError::Io(format!("{}: {e}", probe_dir.display())))?;
            let (k, why, _) = dilation::probe(
                sc,
                &dilation::ProbeOptions {
                    exe,
                    guest_exe: &guest_exe.display().to_string(),
                    dir: &probe_dir,
                    accel,
                    timeout: Duration::from_secs(a.timeout),
                    seed: a.seed,
                },
                progress,
            )?;
            progress.say(&format!("time scale {k} ({why})"));
            Ok((k, Some(why)))
        }
    }
}

/// The outputs of run `r` (files, JUnit, what is printed) and its
/// verdict: an error if it did not complete or an expectation failed.
fn finish(a: &RunArgs, r: &BenchResults) -> Result<(), BenchError> {
    write_outputs(&a.out, r)?;
    if let Some(j) = &a.junit {
        std::fs::write(j, junit(r)).map_err(|e| BenchError::Io(format!("{}: {e}", j.display())))?;
    }
    let out = if a.json {
        serde_json::to_string_pretty(r).unwrap_or_default() + "\n"
    } else {
        summary(r) + &format!("\nresults in {}\n", a.out.display())
    };
    vssd_common::cli_out::print(&out).map_err(BenchError::Output)?;
    if let Some(why) = &r.incomplete {
        return Err(BenchError::Failed(format!(
            "the run did not complete: {}",
            tail(why, 5)
        )));
    }
    let failed: Vec<&ExpectResult> = r.expects.iter().filter(|e| e.failed()).collect();
    if !failed.is_empty() {
        return Err(BenchError::Failed(format!(
            "{} expectation(s) failed{}: {}",
            failed.len(),
            if failed.iter().any(|e| e.strict_failure()) {
                " (strict: inconclusive ones fail)"
            } else {
                ""
            },
            failed
                .iter()
                .map(|e| match &e.inconclusive {
                    Some(why) => format!("{} [{}] {why}", e.text, e.detail),
                    None => format!("{} [{}]", e.text, e.detail),
                })
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }
    Ok(())
}

/// Write `results.json`, the CSVs, the charts and the reports into `dir`.
fn write_outputs(dir: &Path, r: &BenchResults) -> Result<(), BenchError> {
    report::write_outputs(dir, r)
        .map(|_| ())
        .map_err(|e| BenchError::Io(format!("{}: {e}", dir.display())))
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Ctrl-C stops the run cleanly (QEMU and the daemon stopped, partial
/// results written); a second one exits at once.
fn catch_interrupt() -> Arc<AtomicBool> {
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    std::thread::spawn(move || {
        loop {
            if INTERRUPTED.load(Ordering::SeqCst) {
                f.store(true, Ordering::SeqCst);
                // SAFETY: restores the default action for a second Ctrl-C.
                unsafe {
                    libc::signal(libc::SIGINT, libc::SIG_DFL);
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    flag
}
