//! A scenario in a real guest: `vssd serve` for the scenario's bus, the
//! test guest booted once per run of consecutive guest-side phases (real
//! fio, `vssd surface`, blkdiscard / mkfs / fstrim, sleep), host-side
//! phases (secure erase, precondition) through the control socket between
//! boots. The drive is sampled every second; each phase's start and end
//! come back on the console with the guest's clock, so the idle gaps
//! between phases are measured too.
//!
//! - this module: the run, phase by phase, and the host-side phases;
//! - `boot`: one boot of consecutive guest-side phases, and what each
//!   measured;
//! - `script`: what the guest runs and prints back;
//! - `phase_metrics`: the fault, power and fsck phases' figures;
//! - `sampler`: the drive, every second.

mod boot;
mod phase_metrics;
mod sampler;
mod script;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::BenchError;
use super::daemon;
use super::dilation;
use super::metrics;
use super::progress::Progress;
use super::results::{BenchResults, Environment, Mode, PhaseResult};
use super::scenario::{PhaseKind, Scenario};
use super::simrun::unix_now;
use sampler::Sampler;
use vssd_common::clock::TimeScale;
use vssd_ctl::protocol::{CtlRequest, PreconditionResult};
use vssd_device::report::TrimReport;
use vssd_guest::serve::ServeProcess;
use vssd_guest::{Accel, ensure_image, guest_visible};
use vssd_model::Counters;

/// Options of a guest run.
pub struct GuestOptions {
    /// The vssd binary (it runs `serve`, and `surface` inside the guest).
    pub exe: std::path::PathBuf,
    /// Scratch directory for the daemon's sockets and logs.
    pub dir: std::path::PathBuf,
    /// Give up on one boot after this long.
    pub timeout: Duration,
    /// Set by Ctrl-C.
    pub cancel: Arc<AtomicBool>,
    /// Expected duration of each phase (from a simulator run), s.
    pub expected_s: Vec<f64>,
    /// Host bytes each phase moves (from the same simulator run).
    pub expected_bytes: Vec<u64>,
    /// Accelerator (None: detect).
    pub accel: Option<Accel>,
    /// Time dilation: `vssd serve --time-scale K`; every figure the guest
    /// measures on the wall clock is converted back to the drive's time.
    pub time_scale: TimeScale,
}

/// The drive at one moment, as the daemon reports it.
struct Snap {
    counters: Counters,
    trim: TrimReport,
    /// Sum of modelled latencies of completed requests, ns.
    modelled_ns: f64,
    /// Time the drive had at least one request in flight, ns of the
    /// daemon's (wall) clock.
    busy_ns: u64,
    at: Instant,
    /// The daemon's trace clock.
    trace_ns: Option<u64>,
}

fn snap(serve: &ServeProcess) -> Result<Snap, BenchError> {
    let r = serve.stats()?;
    Ok(Snap {
        trim: r.trim_total(),
        modelled_ns: r
            .ops
            .values()
            .map(|o| o.modelled.mean_ns * o.modelled.count as f64)
            .sum(),
        busy_ns: r.connection.depth.busy_ns,
        counters: r.counters,
        at: Instant::now(),
        trace_ns: serve.trace_now_ns()?,
    })
}

fn env(accel: Option<String>) -> Environment {
    let first_line = |prog: &str| -> Option<String> {
        let out = std::process::Command::new(prog)
            .arg("--version")
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .map(|l| l.trim().to_string())
    };
    Environment {
        vssd: env!("CARGO_PKG_VERSION").into(),
        qemu: first_line("qemu-system-x86_64"),
        fio: first_line("fio"),
        guest_kernel: ensure_image().ok().map(|i| i.kernel_release),
        accel,
        host: super::hostname(),
        host_cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
    }
}

/// The daemon's trace of a guest run, in the run's directory.
pub const TRACE_FILE: &str = "run.vssdtrace";

/// Run `sc` in guests. Partial results are returned with `incomplete`
/// set when the run stops early (Ctrl-C, a failing phase).
pub fn run(
    sc: &Scenario,
    o: &GuestOptions,
    progress: &Progress,
) -> Result<BenchResults, BenchError> {
    let image = ensure_image()?;
    let accel = match o.accel {
        Some(a) => a,
        None => vssd_guest::detect_accel(&image)?,
    };
    let serve = start_daemon(sc, o)?;
    let start = Instant::now();
    let sampler = Sampler::start(&serve, start, progress);
    // The guest runs this binary (`vssd surface`) from the host's root.
    let (guest_exe, _exe_copy) = guest_visible(&o.exe)?;
    let mut r = Run {
        sc,
        o,
        progress,
        serve: &serve,
        sampler: &sampler,
        accel,
        exe: guest_exe.display().to_string(),
        phases: Vec::new(),
        last_end: None,
    };
    let incomplete = r.phases()?;
    let phases = r.phases;
    let mut samples = sampler.stop();
    drop(serve);
    dilation::samples_to_drive_time(&mut samples, o.time_scale);
    Ok(BenchResults {
        scenario: sc.name.clone(),
        description: sc.description.clone(),
        mode: Mode::Guest,
        profile: sc.profile.name.clone(),
        capacity: sc.capacity,
        bus: sc.bus,
        started_unix: unix_now(),
        environment: env(Some(accel.name().into())),
        phases,
        samples,
        expects: Vec::new(),
        tolerance: sc.tolerance,
        comparison: Vec::new(),
        sim: None,
        incomplete,
        time_scale: o.time_scale.factor(),
        time_scale_reason: None,
        strict: false,
        duration_s: 0.0,
    })
}

/// `vssd serve` for the run: the scenario's drive, tracing every request.
fn start_daemon(sc: &Scenario, o: &GuestOptions) -> Result<ServeProcess, BenchError> {
    let trace = [
        "--trace".to_string(),
        o.dir.join(TRACE_FILE).display().to_string(),
    ];
    daemon::start(sc, &o.exe, &o.dir, &o.time_scale.to_string(), &trace)
}

/// A guest run under way: the scenario's phases so far.
struct Run<'a> {
    sc: &'a Scenario,
    o: &'a GuestOptions,
    progress: &'a Progress,
    serve: &'a ServeProcess,
    sampler: &'a Sampler,
    accel: Accel,
    /// The vssd binary, where the guest sees it.
    exe: String,
    /// Every phase run (or started) so far.
    phases: Vec<PhaseResult>,
    /// When the previous phase ended (host clock): the drive idles until
    /// the next one starts (guest boots, tool start-up), and the
    /// simulator replays these gaps.
    last_end: Option<Instant>,
}

impl Run<'_> {
    /// Every segment of the scenario in turn: a host-side phase, or a boot
    /// of consecutive guest-side ones. Why the run stopped early, if it did.
    fn phases(&mut self) -> Result<Option<String>, BenchError> {
        for seg in self.sc.segments() {
            if self.o.cancel.load(Ordering::SeqCst) {
                return Ok(Some("interrupted".into()));
            }
            let stopped = if self.sc.phases[seg.start].kind.host_side() {
                self.host_phase(seg.start)?
            } else {
                self.boot(seg)?
            };
            if stopped.is_some() {
                return Ok(stopped);
            }
        }
        Ok(None)
    }

    /// A fresh result for phase `i`, nothing measured yet.
    fn new_phase(&self, i: usize) -> PhaseResult {
        PhaseResult {
            name: self.sc.phases[i].name.clone(),
            kind: self.sc.phases[i].kind.name().into(),
            wall_s: 0.0,
            model_s: 0.0,
            gap_before_s: 0.0,
            metrics: BTreeMap::new(),
            fio: None,
            series: None,
            surface: None,
            trim: None,
            counters_before: None,
            counters_after: None,
            trace_ns: None,
        }
    }

    /// Phase `i` begins: the sampler and the progress display learn it.
    fn begin(&self, i: usize) {
        let p = &self.sc.phases[i];
        self.sampler.set_phase(i);
        self.progress.begin(
            i,
            &p.name,
            p.kind.name(),
            self.o.expected_s.get(i).copied(),
            self.o.expected_bytes.get(i).copied(),
        );
    }

    /// Host-side phase `i` (secure erase, precondition, power-on) through
    /// the control socket. Why the run stops, if it fails.
    fn host_phase(&mut self, i: usize) -> Result<Option<String>, BenchError> {
        let p = &self.sc.phases[i];
        self.begin(i);
        let before = snap(self.serve)?;
        let mut r = self.new_phase(i);
        let res = self.host_action(&p.kind, &mut r);
        let after = snap(self.serve)?;
        r.wall_s = after.at.duration_since(before.at).as_secs_f64();
        r.gap_before_s = self
            .last_end
            .map_or(0.0, |t| before.at.duration_since(t).as_secs_f64());
        self.last_end = Some(after.at);
        r.counters_before = Some(before.counters);
        r.counters_after = Some(after.counters);
        dilation::phase_to_drive_time(&mut r, self.o.time_scale);
        // A precondition's drive time is the model time it aged the
        // drive by, whatever its wall time.
        if let Ok(Some(model_s)) = res {
            r.model_s = model_s;
        }
        metrics::drive(&mut r);
        self.progress.end(i, &r);
        self.phases.push(r);
        Ok(res.err().map(|e| format!("phase {}: {e}", p.name)))
    }

    /// What a host-side phase of `kind` does to the drive; the model time
    /// it took, when the drive says (a precondition).
    fn host_action(
        &self,
        kind: &PhaseKind,
        r: &mut PhaseResult,
    ) -> Result<Option<f64>, BenchError> {
        match kind {
            PhaseKind::SecureErase => self.serve.secure_erase()?,
            PhaseKind::Precondition { steps } => {
                let mut c =
                    vssd_ctl::Client::connect(&self.serve.control, Duration::from_secs(60))?;
                let pr: PreconditionResult = c.call_typed(
                    &CtlRequest::Precondition {
                        steps: steps.clone(),
                        seed: 1,
                        progress: true,
                    },
                    &mut |l| {
                        self.progress.fraction(
                            l.progress.done_bytes as f64 / l.progress.total_bytes.max(1) as f64,
                        )
                    },
                )?;
                return Ok(Some(pr.model_time_ns as f64 / 1e9));
            }
            PhaseKind::PowerOn => {
                self.serve.power_on()?;
                phase_metrics::fault_metrics(kind, &self.serve.faults()?, &mut r.metrics);
            }
            _ => {}
        }
        Ok(None)
    }
}
