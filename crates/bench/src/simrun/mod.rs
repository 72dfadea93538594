//! A scenario in the simulator: the same phases against the model in
//! virtual time, fio job files unchanged. With the idle gaps a guest run
//! measured between its phases replayed, the two compare like for like.

//!
//! - this module: the run, phase by phase, and what a guest run hands it
//!   to replay ([`Replay`]);
//! - `phases`: each phase kind from the scenario;
//! - `replay`: a phase replayed from the daemon's trace of a guest run;
//! - `bus`: what the guest's bus does to the requests (TRIM ranges, the
//!   NBD client's queue depth).

mod bus;
mod phases;
mod replay;

use std::collections::BTreeMap;

use super::BenchError;
use super::metrics;
use super::results::{BenchResults, DriveSample, Environment, Mode, PhaseResult};
use super::scenario::Scenario;
pub use bus::{NBD_CLIENT_MAX_REQUESTS, bus_depth_cap, cap_depth, trim_range};
use vssd_device::TrimOutcome;
use vssd_device::report::TrimReport;
use vssd_model::Counters;
use vssd_sim::Simulation;
use vssd_trace::vssd as vt;

/// Prepend the bandwidth-log settings both runs use: 1-second windows.
pub fn with_bw_log(text: &str) -> String {
    format!("[global]\nlog_avg_msec=1000\n{text}")
}

/// What a guest run measured that the simulator replays, so that the
/// drive gets the same idle time as in the guest (its background work
/// and its write buffer's draining depend on it). Indexed by phase.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Idle seconds before each phase.
    pub gaps: Vec<f64>,
    /// I/Os per second at which the guest issued a fio phase when it could
    /// not keep up with the drive; the simulator then issues them at that
    /// rate too (fio's `rate_iops`, split over the job's instances).
    pub pacing: Vec<Option<f64>>,
    /// When the guest started each burst of a surface phase (seconds from
    /// the start of the phase: the program's start-up, then the time
    /// between bursts); the simulator starts none earlier.
    pub bursts: Vec<Option<Vec<f64>>>,
    /// The daemon's trace of each phase (fio, surface and trim phases of a
    /// traced guest run): the simulator replays these requests at their
    /// recorded times instead of running the phase's own jobs.
    pub trace: Vec<Option<PhaseTrace>>,
}

/// One phase of a guest run as the daemon recorded it.
#[derive(Debug, Clone, Default)]
pub struct PhaseTrace {
    /// The phase's requests, arrival times from the phase's start (drive
    /// time), in arrival order.
    pub records: Vec<vt::Record>,
    /// The phase's length on the trace clock, ns.
    pub window_ns: u64,
    /// The guest's surface measurement (surface phases): its positions
    /// group the replayed requests into bursts.
    pub surface: Option<super::results::Surface>,
    /// The guest's figures of the phase (`read_bw`, `write_bw`, ...).
    pub guest: BTreeMap<String, f64>,
}

impl Replay {
    /// Add the trace of guest run `g` (read from `file`): every fio,
    /// surface and trim phase with a trace window gets its requests.
    pub fn with_trace(mut self, g: &BenchResults, file: &vt::File) -> Replay {
        self.trace = g
            .phases
            .iter()
            .map(|p| {
                let [b, e] = p.trace_ns?;
                if !matches!(p.kind.as_str(), "fio" | "surface" | "trim") || e < b {
                    return None;
                }
                let lo = file.records.partition_point(|r| r.taken_ns < b);
                let hi = file.records.partition_point(|r| r.taken_ns < e);
                let records = file.records[lo..hi]
                    .iter()
                    .map(|r| vt::Record {
                        received_ns: r.received_ns.saturating_sub(b),
                        taken_ns: r.taken_ns - b,
                        due_ns: r.due_ns.saturating_sub(b),
                        delivered_ns: r.delivered_ns.saturating_sub(b),
                        ..*r
                    })
                    .collect();
                Some(PhaseTrace {
                    records,
                    window_ns: e - b,
                    surface: p.surface.clone(),
                    guest: p.metrics.clone(),
                })
            })
            .collect();
        self
    }
}

impl Replay {
    /// The gaps and burst start times of guest run `g` (no pacing).
    pub fn of(g: &BenchResults) -> Replay {
        Replay {
            gaps: g.phases.iter().map(|p| p.gap_before_s).collect(),
            pacing: Vec::new(),
            trace: Vec::new(),
            bursts: g
                .phases
                .iter()
                .map(|p| {
                    let s = p.surface.as_ref()?;
                    let lead = s.lead_s.filter(|l| l.is_finite()).unwrap_or(0.0);
                    s.points
                        .iter()
                        .map(|q| q.start_s.map(|t| t + lead))
                        .collect::<Option<Vec<f64>>>()
                })
                .collect(),
        }
    }
}

/// Run `sc` in the simulator, with what a guest run measured replayed
/// (`replay`), else with only the scenario's own `idle` phases.
pub fn run(
    sc: &Scenario,
    seed: u64,
    replay: Option<&Replay>,
    progress: &mut dyn FnMut(usize, &str),
) -> Result<BenchResults, BenchError> {
    let mut sim = Simulation::new(&sc.profile, seed);
    sim.set_keep_bw_series(true);
    // The drive's state within phases too, about as often as a guest run
    // samples the daemon (once a second), in model time.
    sim.set_sampling(Some(SAMPLE_NS));
    let mut run = SimRun {
        sc,
        seed,
        start: sim.now_ns(),
        prev: sim.ssd().counters(),
        sim,
        samples: Vec::new(),
    };
    let mut phases: Vec<PhaseResult> = Vec::new();
    for (i, p) in sc.phases.iter().enumerate() {
        progress(i, &p.name);
        phases.push(run.phase(i, replay)?);
    }
    Ok(BenchResults {
        scenario: sc.name.clone(),
        description: sc.description.clone(),
        mode: Mode::Sim,
        profile: sc.profile.name.clone(),
        capacity: sc.capacity,
        bus: sc.bus,
        started_unix: unix_now(),
        environment: Environment {
            vssd: env!("CARGO_PKG_VERSION").into(),
            host: super::hostname(),
            host_cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            ..Environment::default()
        },
        phases,
        samples: run.samples,
        expects: Vec::new(),
        tolerance: sc.tolerance,
        comparison: Vec::new(),
        sim: None,
        incomplete: None,
        time_scale: 1.0,
        time_scale_reason: None,
        strict: false,
        duration_s: 0.0,
    })
}

/// A simulator run under way: the drive, and its samples so far.
struct SimRun<'a> {
    sc: &'a Scenario,
    seed: u64,
    sim: Simulation,
    /// The run's start, model time.
    start: u64,
    /// The counters of the previous sample: each sample's WAF covers the
    /// interval since it.
    prev: Counters,
    samples: Vec<DriveSample>,
}

impl SimRun<'_> {
    /// Phase `i`, after the idle time the guest had before it: replayed
    /// from the daemon's trace where `replay` has one, else as the
    /// scenario has it.
    fn phase(&mut self, i: usize, replay: Option<&Replay>) -> Result<PhaseResult, BenchError> {
        let p = &self.sc.phases[i];
        let gap = replay.and_then(|r| r.gaps.get(i).copied()).unwrap_or(0.0);
        if gap > 0.0 {
            self.sim.idle((gap * 1e9) as u64);
        }
        let before = self.sim.ssd().counters();
        let t0 = self.sim.now_ns();
        let mut r = PhaseResult {
            name: p.name.clone(),
            kind: p.kind.name().into(),
            wall_s: 0.0,
            model_s: 0.0,
            gap_before_s: gap,
            metrics: BTreeMap::new(),
            fio: None,
            series: None,
            surface: None,
            trim: None,
            counters_before: Some(before),
            counters_after: None,
            trace_ns: None,
        };
        match replay.and_then(|r| r.trace.get(i)).and_then(Option::as_ref) {
            Some(pt) => {
                self.replay_phase(&p.name, &p.kind, pt, &mut r)?;
                self.take_samples(i);
            }
            None => self.execute(i, replay, &mut r)?,
        }
        r.model_s = (self.sim.now_ns() - t0) as f64 / 1e9;
        r.wall_s = r.model_s;
        let after = self.sim.ssd().counters();
        self.record(i, self.sim.now_ns(), after.clone());
        r.counters_after = Some(after);
        metrics::drive(&mut r);
        Ok(r)
    }

    /// A drive sample in phase `i` at model time `t_ns`, counters `c`.
    fn record(&mut self, i: usize, t_ns: u64, c: Counters) {
        let t_s = (t_ns - self.start) as f64 / 1e9;
        self.samples.push(sample(i, t_s, &self.prev, &c));
        self.prev = c;
    }

    /// The samples the simulator took on its own (within fio jobs and
    /// replays), in phase `i`.
    fn take_samples(&mut self, i: usize) {
        for (t, c) in self.sim.take_samples() {
            self.record(i, t, c);
        }
    }
}

/// A TRIM phase's end: the drive's clock to `now` (when the last range
/// completed), the audit and its figures into the phase's result.
fn finish_trim(
    sim: &mut Simulation,
    now: u64,
    mut audit: TrimReport,
    outcome: TrimOutcome,
    r: &mut PhaseResult,
) {
    audit.freed_bytes = outcome.freed_bytes;
    audit.already_unmapped_bytes = outcome.already_unmapped_bytes;
    sim.idle(now.saturating_sub(sim.now_ns()));
    r.metrics
        .insert("trim_bytes".into(), audit.requested_bytes as f64);
    r.metrics
        .insert("freed_bytes".into(), audit.freed_bytes as f64);
    r.metrics.insert(
        "trim_cmds".into(),
        (audit.discard_cmds + audit.write_zeroes_cmds) as f64,
    );
    r.trim = Some(audit);
}

fn series_of(report: &vssd_sim::RunReport) -> super::results::Series {
    use vssd_sim::Dir;
    let base = report.start_ns;
    let mut windows = Vec::new();
    for j in &report.jobs {
        let offset_s = j.start_ns.saturating_sub(base) as f64 / 1e9;
        let mut last = [offset_s; 2];
        for s in &j.bw_log {
            let d = match s.dir {
                Dir::Read => 0,
                Dir::Write => 1,
                _ => continue,
            };
            let end_s = offset_s + s.msec as f64 / 1000.0;
            windows.push(metrics::BwWindow {
                start_s: last[d],
                end_s,
                bytes_s: s.kib_s as f64 * 1024.0,
                write: d == 1,
            });
            last[d] = end_s.max(last[d]);
        }
    }
    metrics::series_from_windows(&windows)
}

/// How often a simulator run samples the drive, model time.
const SAMPLE_NS: u64 = 1_000_000_000;

/// A drive sample from counters at the start and end of an interval.
pub fn sample(
    phase: usize,
    t_s: f64,
    a: &vssd_model::Counters,
    b: &vssd_model::Counters,
) -> DriveSample {
    let host = b.host_written_bytes.saturating_sub(a.host_written_bytes);
    let nand = b
        .nand_bytes_programmed
        .saturating_sub(a.nand_bytes_programmed);
    DriveSample {
        t_s,
        phase,
        waf: if host > 0 {
            nand as f64 / host as f64
        } else {
            0.0
        },
        free_blocks: b.free_blocks,
        total_blocks: b.total_blocks,
        host_written_bytes: b.host_written_bytes,
        nand_bytes_programmed: b.nand_bytes_programmed,
    }
}

/// Now, Unix seconds.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
