//! `vssd bench`: the published test protocols as scenarios, run in a real
//! guest on `vssd serve` and in the simulator, with charts, reports,
//! assertions for CI, and the two runs side by side.
//!
//! - [`scenario`]: scenario files (TOML) and the built-in ones;
//! - [`expr`]: `expect` assertions;
//! - [`guestrun`], [`simrun`]: the two ways of running a scenario;
//! - [`surface`]: HD Tune-style passes (`vssd surface` in the guest);
//! - [`metrics`], [`results`]: what a run produces;
//! - [`progress`]: bars and lines while it runs;
//! - [`report`], [`chart`], [`compare`]: what is written and drawn.

pub mod chart;
pub mod compare;
pub mod dilation;
pub mod expr;
pub mod guestrun;
pub mod metrics;
pub mod progress;
pub mod report;
pub mod results;
pub mod scenario;
pub mod simrun;
pub mod surface;

#[cfg(test)]
mod testdata;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{Args, Subcommand};

use self::progress::Progress;
use self::results::{BenchResults, ExpectResult, PhaseComparison};
use self::scenario::{BUILTIN, BUILTIN_JOBS, Overrides, PhaseKind, Scenario, ScenarioError};
use vssd_guest::bus::Bus;
use vssd_guest::serve::ServeProcessError;
use vssd_guest::{Accel, GuestError};
use vssd_profile::size::parse_size;

/// Errors of `vssd bench`.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The scenario is invalid.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The guest could not run.
    #[error(transparent)]
    Guest(#[from] GuestError),
    /// The daemon could not run.
    #[error(transparent)]
    Serve(#[from] ServeProcessError),
    /// A control request failed.
    #[error(transparent)]
    Ctl(#[from] vssd_ctl::CtlError),
    /// The simulator refused something.
    #[error("simulator: {0}")]
    Sim(String),
    /// Files.
    #[error("{0}")]
    Io(String),
    /// Printing failed.
    #[error("writing the output")]
    Output(#[source] vssd_common::cli_out::StdoutError),
    /// Expectations failed or the run did not complete.
    #[error("{0}")]
    Failed(String),
    /// Bad command line.
    #[error("{0}")]
    Usage(String),
}

/// `vssd bench` arguments.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// What to do.
    #[command(subcommand)]
    pub cmd: BenchCmd,
}

/// `vssd bench` subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// The built-in scenarios and job files.
    List,
    /// Print a built-in scenario (TOML to copy and edit) or job file.
    Show {
        /// Scenario or job file name.
        name: String,
    },
    /// Run a scenario in a guest (and in the simulator, side by side).
    Run(RunArgs),
    /// The key tables of two runs side by side (of the first and each of
    /// the others, with more); `--chart` draws their throughput in one
    /// chart.
    Compare {
        /// First run's output directory.
        a: PathBuf,
        /// Second run's output directory.
        b: PathBuf,
        /// More runs' output directories, each compared with the first.
        more: Vec<PathBuf>,
        /// Write one SVG chart of every run's throughput over time (one
        /// colour per run) to this file (it must not exist).
        #[arg(long, value_name = "FILE")]
        chart: Option<PathBuf>,
    },
}

/// Accelerator choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AccelArg {
    /// KVM if a probe boot works, else TCG.
    Auto,
    /// KVM.
    Kvm,
    /// TCG.
    Tcg,
}

/// `vssd bench run` arguments.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// A built-in scenario (`vssd bench list`) or a scenario file.
    pub scenario: String,
    /// Output directory (results, charts, reports).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Drive capacity instead of the scenario's (scales it: jobs are relative).
    #[arg(long, value_parser = parse_size)]
    pub capacity: Option<u64>,
    /// Drive profile instead of the scenario's.
    #[arg(long)]
    pub profile: Option<String>,
    /// The guest's bus instead of the scenario's.
    #[arg(long, value_enum)]
    pub bus: Option<Bus>,
    /// QEMU accelerator.
    #[arg(long, value_enum, default_value = "auto")]
    pub accel: AccelArg,
    /// Only the simulator (seconds instead of minutes).
    #[arg(long)]
    pub sim_only: bool,
    /// Also write the `expect` results as JUnit XML.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Give up on one guest boot after this many seconds.
    #[arg(long, default_value_t = 3600)]
    pub timeout: u64,
    /// Seed of the model's random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Time dilation of a guest run: the drive's clock runs K times slower
    /// than the wall clock (`vssd serve --time-scale K`) and every figure is
    /// converted back to the drive's time. `auto`: a short probe boot
    /// measures whether the guest reaches the drive's speed in the passes
    /// the expectations read, and picks K if it does not.
    #[arg(long, value_name = "auto|K", default_value = "auto")]
    pub time_scale: dilation::TimeScaleArg,
    /// Keep the daemon's trace of the guest run (every request the drive
    /// received) beside results.json, as trace.vssdtrace (`vssd trace
    /// info`, `vssd trace convert`, `vssd sim` with `read_iolog=`).
    #[arg(long)]
    pub trace: bool,
}

/// This host's name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The last `n` lines of `s`.
pub fn tail(s: &str, n: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(n)..].join("\n")
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

/// The throughput figure compared between guest and simulator for a phase.
/// Surfaces compare their median over positions, as the scenarios' own
/// checks do: under TCG a guest's first bursts of a run are slow while it
/// translates the I/O path, which pulls the mean of the first surface down
/// but not its median.
fn throughput_metric(r: &results::PhaseResult) -> Option<(&'static str, f64)> {
    let m = &r.metrics;
    match r.kind.as_str() {
        "surface" => m.get("median_bw").map(|v| ("median_bw", *v)),
        "fio" => {
            let w = m.get("write_bw").copied().unwrap_or(0.0);
            let rd = m.get("read_bw").copied().unwrap_or(0.0);
            if w >= rd && w > 0.0 {
                Some(("write_bw", w))
            } else if rd > 0.0 {
                Some(("read_bw", rd))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Guest vs simulator, phase by phase.
pub fn compare_runs(guest: &BenchResults, sim: &BenchResults, tol: f64) -> Vec<PhaseComparison> {
    guest
        .phases
        .iter()
        .filter_map(|g| {
            let (metric, gv) = throughput_metric(g)?;
            let sp = sim.phase(&g.name)?;
            let sv = *sp.metrics.get(metric)?;
            // Relative to the guest's figure (bytes/s: never below 1, so finite).
            let diff = (sv - gv) / gv.max(1.0);
            let qd = |p: &results::PhaseResult| p.metrics.get("drive_qd").copied();
            let guest_bound = matches!((qd(g), qd(sp)), (Some(a), Some(b)) if a < 0.5 * b);
            Some(PhaseComparison {
                phase: g.name.clone(),
                metric: metric.into(),
                guest: gv,
                sim: sv,
                difference: diff,
                within: diff.abs() <= tol,
                guest_bound,
                after_guest_bound: false,
                replayed: false,
                predicted: None,
            })
        })
        .collect()
}

/// Without a trace: fio phases the guest could not issue at the drive's
/// pace are simulated again at the guest's average rate, so that the
/// drive gets the same idle time within them; those and the phases after
/// them are reported, not counted.
fn pace_guest_bound(
    sc: &Scenario,
    seed: u64,
    g: &BenchResults,
    replay: &mut simrun::Replay,
    s: &mut BenchResults,
    mut cmp: Vec<PhaseComparison>,
    progress: &Progress,
) -> Result<Vec<PhaseComparison>, BenchError> {
    // fio phases the guest could not issue at the drive's pace:
    // replay the guest's pace, so that the drive gets the same idle
    // time within them and reaches the same state after them.
    replay.pacing = g
        .phases
        .iter()
        .map(|p| {
            let slow = cmp.iter().any(|c| c.phase == p.name && c.guest_bound);
            (slow && p.kind == "fio").then(|| {
                p.metrics.get("write_iops").copied().unwrap_or(0.0)
                    + p.metrics.get("read_iops").copied().unwrap_or(0.0)
            })
        })
        .collect();
    if replay.pacing.iter().any(Option::is_some) {
        progress.say("and once more at the guest's pace where the guest could not keep up");
        *s = simrun::run(sc, seed, Some(replay), &mut |_, _| {})?;
        cmp = compare_runs(g, s, sc.tolerance);
        let paced = |name: &str| {
            g.phases
                .iter()
                .position(|p| p.name == name)
                .and_then(|i| replay.pacing.get(i).copied().flatten())
                .is_some()
        };
        let mut previous_paced = false;
        for c in &mut cmp {
            if paced(&c.phase) {
                c.guest_bound = true;
            }
            c.after_guest_bound = previous_paced;
            previous_paced = paced(&c.phase);
        }
    }
    Ok(cmp)
}

/// Evaluate the scenario's `expect` phases on `r`. An assertion that
/// reads a throughput or latency figure of a phase the comparison marked
/// guest-bound is inconclusive: the emulated host, not the drive, set
/// that figure, so it neither passes nor fails.
pub fn evaluate(sc: &Scenario, r: &BenchResults) -> Vec<ExpectResult> {
    let get = |p: &str, m: &str| r.phase(p).and_then(|ph| ph.metrics.get(m)).copied();
    let guest_bound = |phase: &str, metric: &str| {
        r.comparison
            .iter()
            .any(|c| c.guest_bound && c.phase == phase)
            && sc
                .phases
                .iter()
                .find(|p| p.name == phase)
                .is_some_and(|p| p.kind.metrics().contains(&metric))
    };
    sc.phases
        .iter()
        .filter_map(|p| match &p.kind {
            PhaseKind::Expect { checks } => Some(checks),
            _ => None,
        })
        .flatten()
        .map(|a| {
            let (passed, detail) = a.check(&get);
            let mut bound: Vec<String> = a
                .refs()
                .into_iter()
                .filter(|(p, m)| guest_bound(p, m))
                .map(|(p, _)| p)
                .collect();
            bound.sort();
            bound.dedup();
            // The simulator does not lose data or run a filesystem: what
            // faults and power cuts did is a guest run's to measure.
            let mut unsimulated: Vec<String> = a
                .refs()
                .into_iter()
                .filter(|(p, m)| {
                    r.mode == results::Mode::Sim
                        && sc.phases.iter().any(|q| {
                            q.name == *p
                                && q.kind.guest_only_metrics()
                                && q.kind.metrics().contains(&m.as_str())
                        })
                })
                .map(|(p, _)| p)
                .collect();
            unsimulated.dedup();
            let inconclusive = if !unsimulated.is_empty() {
                Some(format!(
                    "inconclusive (not simulated): {} measured only in a guest run (the simulator has no data to lose and no filesystem)",
                    unsimulated.join(", ")
                ))
            } else {
                (!bound.is_empty()).then(|| {
                format!(
                    "inconclusive (guest-bound): the guest could not keep the drive busy in {} \
                     (its requests were in the drive at under half the simulator's queue depth), \
                     so the emulated host, not the drive, set the figure; run with KVM or a \
                     larger --time-scale",
                    bound.join(", ")
                )
                })
            };
            ExpectResult {
                text: a.text.clone(),
                passed: passed && inconclusive.is_none(),
                detail,
                inconclusive,
            }
        })
        .collect()
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The `expect` verdicts as JUnit XML: an inconclusive assertion is a
/// skipped test case whose message says why.
pub fn junit(r: &BenchResults) -> String {
    let failures =
        r.expects.iter().filter(|e| e.failed()).count() + usize::from(r.incomplete.is_some());
    let mut x = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"vssd bench {}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{}\">\n",
        xml_escape(&r.scenario),
        r.expects.len() + usize::from(r.incomplete.is_some()),
        r.inconclusive()
    );
    for e in &r.expects {
        x.push_str(&format!(
            "  <testcase classname=\"{}\" name=\"{}\"",
            xml_escape(&r.scenario),
            xml_escape(&e.text)
        ));
        match (e.verdict(), &e.inconclusive) {
            (results::Verdict::Pass, _) => x.push_str("/>\n"),
            (results::Verdict::Inconclusive, Some(why)) => x.push_str(&format!(
                ">\n    <skipped message=\"{}\"/>\n  </testcase>\n",
                xml_escape(&format!("{why} [{}]", e.detail))
            )),
            _ => x.push_str(&format!(
                ">\n    <failure message=\"{}\"/>\n  </testcase>\n",
                xml_escape(&e.detail)
            )),
        }
    }
    if let Some(why) = &r.incomplete {
        x.push_str(&format!(
            "  <testcase classname=\"{}\" name=\"run completes\">\n    <failure message=\"{}\"/>\n  </testcase>\n",
            xml_escape(&r.scenario),
            xml_escape(why)
        ));
    }
    x.push_str("</testsuite>\n");
    x
}

/// What power cuts lost and what fsck found, one line per `power-on`
/// (or `power-cut`, once powered off) and `fsck` phase of a guest run.
fn losses(r: &BenchResults) -> Vec<String> {
    let mut v = Vec::new();
    let m = |p: &results::PhaseResult, k: &str| p.metrics.get(k).copied();
    for p in &r.phases {
        match p.kind.as_str() {
            "power-on" => {
                if let (Some(n), Some(a), Some(b), Some(prot)) = (
                    m(p, "lost_writes"),
                    m(p, "lost_acked_writes"),
                    m(p, "lost_bytes"),
                    m(p, "protected"),
                ) {
                    v.push(format!(
                        "{}: the latest power cut lost {n} writes ({a} of them acknowledged, {} bytes){}",
                        p.name,
                        b,
                        if prot == 1.0 {
                            "; the drive has power-loss protection"
                        } else {
                            ""
                        }
                    ));
                }
            }
            "fsck" => {
                if let (Some(clean), Some(c), Some(i), Some(s)) = (
                    m(p, "fsck_clean"),
                    m(p, "files_checked"),
                    m(p, "files_intact"),
                    m(p, "synced_files_lost"),
                ) {
                    v.push(format!(
                        "{}: after the journal replay, e2fsck -n found it {}{}; {i} of {c} files written read back intact, {s} fsynced files lost",
                        p.name,
                        if clean == 1.0 { "clean" } else { "NOT clean" },
                        if m(p, "fsck_fixed") == Some(1.0) {
                            " (e2fsck -y repaired it)"
                        } else {
                            ""
                        },
                    ));
                }
            }
            _ => {}
        }
    }
    if !v.is_empty() {
        v.insert(0, String::new());
    }
    v
}

fn summary(r: &BenchResults) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} ({}): {} on a {} {} drive, {} bus",
        r.scenario,
        match r.mode {
            results::Mode::Guest => "guest",
            results::Mode::Sim => "simulator",
        },
        r.description,
        vssd_profile::size::format_size(r.capacity),
        r.profile,
        r.bus
    );
    if r.time_scale != 1.0 {
        let _ = writeln!(
            o,
            "time scale {}: the drive's clock ran {}× slower than the wall clock; every figure \
             below is converted back to the drive's time{}",
            r.time_scale,
            r.time_scale,
            r.time_scale_reason
                .as_deref()
                .map(|w| format!(" ({w})"))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(
        o,
        "{:<18} {:<13} {:>9} {:>12} {:>12} {:>7}",
        "phase", "kind", "time s", "figure", "MB/s", "WAF"
    );
    for p in &r.phases {
        let (metric, v) = throughput_metric(p).unwrap_or(("", 0.0));
        let _ = writeln!(
            o,
            "{:<18} {:<13} {:>9.1} {:>12} {:>12} {:>7}",
            p.name,
            p.kind,
            p.wall_s,
            metric,
            if metric.is_empty() {
                String::new()
            } else {
                format!("{:.1}", v / 1e6)
            },
            p.metrics
                .get("waf")
                .filter(|w| **w > 0.0)
                .map(|w| format!("{w:.2}"))
                .unwrap_or_default()
        );
    }
    for line in losses(r) {
        let _ = writeln!(o, "{line}");
    }
    if !r.comparison.is_empty() {
        let _ = writeln!(
            o,
            "\nguest vs simulator (tolerance {:.0} %{}):",
            r.tolerance * 100.0,
            if r.comparison.iter().any(|c| c.replayed) {
                "; sim: the daemon's trace of each phase replayed (does the daemon \
                 deliver when its model says?); predicted: the phase's own job run in \
                 the simulator (does the model predict the guest?), not counted"
            } else {
                ""
            }
        );
        for c in &r.comparison {
            let predicted = match (c.predicted, c.predicted_difference()) {
                (Some(p), Some(d)) => {
                    format!("  predicted {:>9.1} MB/s {:+6.1} %", p / 1e6, d * 100.0)
                }
                _ => String::new(),
            };
            let _ = writeln!(
                o,
                "  {:<18} {:<9} guest {:>9.1} MB/s  sim {:>9.1} MB/s  {:+6.1} %{predicted}{}",
                c.phase,
                c.metric,
                c.guest / 1e6,
                c.sim / 1e6,
                c.difference * 100.0,
                match c.verdict() {
                    "within" => "",
                    "guest-bound" =>
                        "  (guest-bound: the emulated host, not the drive, set the guest's figure)",
                    "after guest-bound" =>
                        "  (after guest-bound: it starts from the state the guest's bursts left)",
                    _ => "  (outside)",
                }
            );
        }
    }
    for e in &r.expects {
        let _ = writeln!(o, "{} {}  [{}]", e.label(), e.text, e.detail);
        if let Some(why) = &e.inconclusive {
            let _ = writeln!(o, "    {why}");
        }
    }
    if let Some(why) = &r.incomplete {
        let _ = writeln!(o, "INCOMPLETE: {why}");
    }
    o
}

/// Write `results.json`, the CSVs, the charts and the reports into `dir`.
fn write_outputs(dir: &std::path::Path, r: &BenchResults) -> Result<(), BenchError> {
    report::write_outputs(dir, r)
        .map(|_| ())
        .map_err(|e| BenchError::Io(format!("{}: {e}", dir.display())))
}

/// What a run of `sc` takes, as TOML comments for `bench show`: guest
/// boots, and the drive's own time per phase from the simulator (a guest
/// adds its boots and, under TCG, whatever it cannot keep up with).
fn show_estimate(sc: &Scenario) -> Result<String, BenchError> {
    let predicted = simrun::run(sc, 1, None, &mut |_, _| {})?;
    let boots = sc
        .segments()
        .iter()
        .filter(|r| !sc.phases[r.start].kind.host_side())
        .count();
    let total: f64 = predicted.phases.iter().map(|p| p.model_s).sum();
    let mut o = format!(
        "\n# Estimate (vssd bench show): {boots} guest boot{}, {:.0} s of drive time in all\n# (the simulator's figure; a guest adds ~10 s per boot under TCG, and more\n# where it cannot keep the drive busy). Per phase:\n",
        if boots == 1 { "" } else { "s" },
        total
    );
    for p in &predicted.phases {
        o.push_str(&format!("#   {:<20} {:>8.1} s\n", p.name, p.model_s));
    }
    Ok(o)
}

fn run_cmd(a: RunArgs) -> Result<(), BenchError> {
    let sc = Scenario::load(
        &a.scenario,
        &Overrides {
            capacity: a.capacity,
            profile: a.profile.clone(),
            bus: a.bus,
        },
    )?;
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
    // Bytes each phase moves, host reads and writes: the same in the guest
    // as in the simulator, whatever the guest's speed.
    let expected_bytes: Vec<u64> = predicted
        .phases
        .iter()
        .map(|p| match (&p.counters_before, &p.counters_after) {
            (Some(a), Some(b)) => (b.host_written_bytes + b.host_read_bytes)
                .saturating_sub(a.host_written_bytes + a.host_read_bytes),
            _ => 0,
        })
        .collect();
    if !a.sim_only {
        progress.plan(expected_bytes.iter().sum());
    }
    let mut r = if a.sim_only {
        predicted
    } else {
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
        let (time_scale, time_scale_reason) = match a.time_scale {
            dilation::TimeScaleArg::Fixed(k) => (k, None),
            dilation::TimeScaleArg::Auto => {
                let (guest_exe, _copy) = vssd_guest::guest_visible(&exe)?;
                // Its own daemon, with its sockets apart from the run's.
                let probe_dir = dir.path().join("probe");
                std::fs::create_dir(&probe_dir)
                    .map_err(|e| BenchError::Io(format!("{}: {e}", probe_dir.display())))?;
                let (k, why, _) = dilation::probe(
                    &sc,
                    &dilation::ProbeOptions {
                        exe: &exe,
                        guest_exe: &guest_exe.display().to_string(),
                        dir: &probe_dir,
                        accel,
                        timeout: Duration::from_secs(a.timeout),
                        seed: a.seed,
                    },
                    &progress,
                )?;
                progress.say(&format!("time scale {k} ({why})"));
                (k, Some(why))
            }
        };
        let opts = guestrun::GuestOptions {
            exe,
            dir: dir.path().to_path_buf(),
            timeout: Duration::from_secs(a.timeout),
            cancel: cancel.clone(),
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
            expected_bytes: expected_bytes.clone(),
            accel: Some(accel),
            time_scale,
        };
        let mut g = guestrun::run(&sc, &opts, &progress)?;
        g.time_scale_reason = time_scale_reason;
        let trace_path = opts.dir.join(guestrun::TRACE_FILE);
        if a.trace {
            let keep = a.out.join("trace.vssdtrace");
            std::fs::create_dir_all(&a.out)
                .and_then(|()| std::fs::copy(&trace_path, &keep))
                .map_err(|e| BenchError::Io(format!("{}: {e}", keep.display())))?;
        }
        if g.incomplete.is_none() {
            progress.say("simulating again with the guest's idle gaps between phases and bursts");
            let mut replay = simrun::Replay::of(&g);
            let mut s = simrun::run(&sc, a.seed, Some(&replay), &mut |_, _| {})?;
            let mut cmp = compare_runs(&g, &s, sc.tolerance);
            let traced = vssd_trace::open(&trace_path)
                .and_then(|r| vssd_trace::vssd::read(r, &trace_path.display().to_string()));
            match traced {
                Ok(f) if f.header.dropped == 0 && g.phases.iter().any(|p| p.trace_ns.is_some()) => {
                    // Every fio, surface and trim phase replayed request by
                    // request from the daemon's trace: the comparison no
                    // longer depends on whether the guest kept up. Whether
                    // it did (for the expectations) comes from the run at
                    // the drive's own pace above.
                    progress
                        .say("and replaying the daemon's trace of the guest run, phase by phase");
                    let bound: Vec<String> = cmp
                        .iter()
                        .filter(|c| c.guest_bound)
                        .map(|c| c.phase.clone())
                        .collect();
                    let traced = replay.clone().with_trace(&g, &f);
                    // The run from the job files (above) is the simulator's
                    // prediction; it is reported beside the replayed figure.
                    let predicted = std::mem::replace(
                        &mut s,
                        simrun::run(&sc, a.seed, Some(&traced), &mut |_, _| {})?,
                    );
                    cmp = compare_runs(&g, &s, sc.tolerance);
                    for c in &mut cmp {
                        c.predicted = predicted
                            .phase(&c.phase)
                            .and_then(|p| p.metrics.get(&c.metric))
                            .copied();
                        c.guest_bound = bound.contains(&c.phase);
                        c.replayed = g
                            .phases
                            .iter()
                            .position(|p| p.name == c.phase)
                            .and_then(|i| traced.trace.get(i))
                            .is_some_and(Option::is_some);
                    }
                }
                other => {
                    let why = match other {
                        Ok(f) if f.header.dropped > 0 => {
                            format!("{} requests were not recorded", f.header.dropped)
                        }
                        Ok(_) => "no phase has a trace window".to_string(),
                        Err(e) => e.to_string(),
                    };
                    progress.say(&format!(
                        "the daemon's trace cannot be replayed ({why}): comparing at the guest's average pace"
                    ));
                    cmp = pace_guest_bound(&sc, a.seed, &g, &mut replay, &mut s, cmp, &progress)?;
                }
            }
            g.comparison = cmp;
            g.sim = Some(Box::new(s));
        }
        g
    };
    r.expects = evaluate(&sc, &r);
    write_outputs(&a.out, &r)?;
    if let Some(j) = &a.junit {
        std::fs::write(j, junit(&r))
            .map_err(|e| BenchError::Io(format!("{}: {e}", j.display())))?;
    }
    let out = if a.json {
        serde_json::to_string_pretty(&r).unwrap_or_default() + "\n"
    } else {
        summary(&r) + &format!("\nresults in {}\n", a.out.display())
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
            "{} expectation(s) failed: {}",
            failed.len(),
            failed
                .iter()
                .map(|e| format!("{} [{}]", e.text, e.detail))
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }
    Ok(())
}

/// Run `vssd bench`.
pub fn run(args: BenchArgs) -> Result<(), BenchError> {
    match args.cmd {
        BenchCmd::List => {
            let mut t = String::from("scenarios:\n");
            for (n, text) in BUILTIN {
                let d = text
                    .lines()
                    .find_map(|l| l.strip_prefix("description = "))
                    .unwrap_or("")
                    .trim_matches('"');
                t.push_str(&format!("  {n:<22} {d}\n"));
            }
            t.push_str("job files (usable by name in any scenario):\n");
            for (n, text) in BUILTIN_JOBS {
                let d = text
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches(';')
                    .trim();
                t.push_str(&format!("  {n:<22} {d}\n"));
            }
            vssd_common::cli_out::print(&t).map_err(BenchError::Output)
        }
        BenchCmd::Show { name } => match scenario::builtin_text(&name) {
            Some(t) => {
                let mut text = t.to_string();
                // A scenario (not a job file): what running it takes.
                if let Ok(sc) = Scenario::load(&name, &Overrides::default()) {
                    text.push_str(&show_estimate(&sc)?);
                }
                vssd_common::cli_out::print(&text).map_err(BenchError::Output)
            }
            None => Err(BenchError::Usage(format!(
                "no built-in scenario or job file {name:?} (see vssd bench list)"
            ))),
        },
        BenchCmd::Run(a) => run_cmd(a),
        BenchCmd::Compare { a, b, more, chart } => {
            let mut dirs = vec![a, b];
            dirs.extend(more);
            let runs = dirs
                .iter()
                .map(|d| report::read_results(d).map_err(|e| BenchError::Io(e.to_string())))
                .collect::<Result<Vec<_>, _>>()?;
            if let Some(file) = &chart {
                let refs: Vec<&BenchResults> = runs.iter().collect();
                let c = chart::runs_throughput(&refs).ok_or_else(|| {
                    BenchError::Io(
                        "no run has a throughput series (fio phases) to chart".to_string(),
                    )
                })?;
                let mut f = vssd_device::files::create_new_private(file)
                    .map_err(|e| BenchError::Io(e.to_string()))?;
                std::io::Write::write_all(&mut f, c.svg.as_bytes())
                    .map_err(|e| BenchError::Io(format!("{}: {e}", file.display())))?;
            }
            let text = runs[1..]
                .iter()
                .map(|r| compare::compare(&runs[0], r))
                .collect::<Vec<_>>()
                .join("\n");
            vssd_common::cli_out::print(&text).map_err(BenchError::Output)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sim_only_trim_recovery_meets_its_expectations() {
        let sc = Scenario::load(
            "trim-recovery",
            &Overrides {
                capacity: Some(256 << 20),
                ..Overrides::default()
            },
        )
        .unwrap();
        let mut r = simrun::run(&sc, 1, None, &mut |_, _| {}).unwrap();
        r.expects = evaluate(&sc, &r);
        for e in &r.expects {
            assert!(e.passed, "{} [{}]", e.text, e.detail);
        }
        let x = junit(&r);
        assert!(x.contains("tests=\"3\" failures=\"0\""), "{x}");
    }

    #[test]
    fn an_expectation_on_a_guest_bound_phase_is_inconclusive_everywhere() {
        let sc = Scenario::load(
            "trim-recovery",
            &Overrides {
                capacity: Some(256 << 20),
                ..Overrides::default()
            },
        )
        .unwrap();
        let mut r = simrun::run(&sc, 1, None, &mut |_, _| {}).unwrap();
        // As a guest run's comparison would mark it: "used" guest-bound.
        let sim = r.clone();
        r.comparison = compare_runs(&r, &sim, sc.tolerance);
        for c in &mut r.comparison {
            c.guest_bound = c.phase == "used";
        }
        // And make the one that does not read "used" fail.
        r.phases
            .iter_mut()
            .find(|p| p.name == "trimmed")
            .unwrap()
            .metrics
            .insert("median_bw".into(), 1.0);
        r.expects = evaluate(&sc, &r);
        let v: Vec<_> = r.expects.iter().map(|e| e.verdict()).collect();
        assert_eq!(
            v,
            [
                results::Verdict::Inconclusive,
                results::Verdict::Fail,
                results::Verdict::Pass
            ],
            "{:?}",
            r.expects
        );
        assert!(
            r.expects[0]
                .inconclusive
                .as_deref()
                .unwrap()
                .contains("used")
        );
        assert!(!r.expects[0].passed && !r.expects[0].failed());
        assert_eq!(r.inconclusive(), 1);
        let x = junit(&r);
        assert!(
            x.contains("tests=\"3\" failures=\"1\" skipped=\"1\""),
            "{x}"
        );
        assert!(
            x.contains("<skipped message=\"inconclusive (guest-bound): the guest could not keep the drive busy in used"),
            "{x}"
        );
        assert_eq!(x.matches("<failure").count(), 1, "{x}");
        let text = summary(&r);
        assert!(
            text.contains("INCONCLUSIVE (guest-bound) used.median_bw < 0.8 * fresh.median_bw"),
            "{text}"
        );
        let dir = tempfile::tempdir().unwrap();
        write_outputs(dir.path(), &r).unwrap();
        let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
        assert!(
            html.contains("<td class=\"inconclusive\">INCONCLUSIVE (guest-bound)</td>"),
            "report.html"
        );
        // Without the failure, the run passes with one inconclusive.
        r.phases
            .iter_mut()
            .find(|p| p.name == "trimmed")
            .unwrap()
            .metrics
            .insert("median_bw".into(), 1e12);
        r.expects = evaluate(&sc, &r);
        assert!(r.passed());
        assert!(junit(&r).contains("failures=\"0\" skipped=\"1\""));
    }

    #[test]
    fn a_failing_expectation_is_reported_with_its_numbers() {
        let text = "name = \"t\"\n[drive]\nprofile = \"sata-mlc-2011\"\ncapacity = \"256M\"\n\
            [[phase]]\nname = \"fresh\"\nkind = \"surface\"\nop = \"write\"\npositions = 8\n\
            [[phase]]\nkind = \"expect\"\nchecks = [\"fresh.mean_bw > 1e12\"]\n";
        let sc = Scenario::parse(text, "t.toml", None, &Overrides::default()).unwrap();
        let mut r = simrun::run(&sc, 1, None, &mut |_, _| {}).unwrap();
        r.expects = evaluate(&sc, &r);
        assert!(!r.passed());
        assert!(
            r.expects[0].detail.contains("fresh.mean_bw = "),
            "{}",
            r.expects[0].detail
        );
        assert!(junit(&r).contains("<failure message="));
    }
}
