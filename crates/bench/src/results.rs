//! What a benchmark run produces (`results.json` in the output directory):
//! per phase, the guest's (or the simulator's) measurements and the drive's
//! counters; time series of the drive sampled during the run; `expect`
//! verdicts; and, when both exist, the simulator's run of the same scenario
//! beside the guest's. Charts and reports are drawn from this alone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use vssd_device::report::TrimReport;
use vssd_guest::bus::Bus;
use vssd_model::Counters;

/// Where a run happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Real fio (and our surface tool) in a QEMU guest on `vssd serve`.
    Guest,
    /// The same phases in the simulator, in model time.
    Sim,
}

/// Versions and environment of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    /// vssd's version.
    pub vssd: String,
    /// QEMU's version (guest runs).
    pub qemu: Option<String>,
    /// fio's version (guest runs).
    pub fio: Option<String>,
    /// Guest kernel release (guest runs).
    pub guest_kernel: Option<String>,
    /// `kvm` or `tcg` (guest runs).
    pub accel: Option<String>,
    /// Host name.
    pub host: String,
    /// Host CPUs.
    pub host_cpus: usize,
}

/// One point of a surface test: `bytes_s` measured at `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SurfacePoint {
    /// Byte offset of the measurement.
    pub offset: u64,
    /// Its position as a fraction of the capacity (0..1).
    pub position: f64,
    /// Throughput there, bytes/s.
    pub bytes_s: f64,
    /// When the burst started, seconds from the start of the pass: the
    /// idle time a guest left the drive between bursts, which the
    /// simulator replays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_s: Option<f64>,
}

/// An HD Tune-style pass: a burst of `burst` bytes in `block`-byte
/// requests at QD 1 at each of `points.len()` positions spread over the
/// drive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Surface {
    /// `read` or `write`.
    pub op: String,
    /// Request size, bytes.
    pub block: u64,
    /// Bytes per position.
    pub burst: u64,
    /// The measurements, by position.
    pub points: Vec<SurfacePoint>,
    /// When the pass started by the machine's boot clock (the clock of
    /// `/proc/uptime`), seconds: in a guest, set by `vssd surface`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_uptime_s: Option<f64>,
    /// Seconds from the start of the phase to the start of the pass (the
    /// program starting, idle time for the drive): set by a guest run and
    /// replayed by the simulator with the burst start times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead_s: Option<f64>,
}

/// Throughput over time (one sample per `interval_s`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Seconds between samples.
    pub interval_s: f64,
    /// Read bytes/s per interval (empty if the phase did not read).
    pub read_bytes_s: Vec<f64>,
    /// Write bytes/s per interval.
    pub write_bytes_s: Vec<f64>,
}

/// One phase's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    /// The phase's name (unique in the scenario; `expect` refers to it).
    pub name: String,
    /// `secure-erase`, `precondition`, `fio`, `trim`, `surface`, `idle`, `expect`.
    pub kind: String,
    /// Wall time the phase took, s (guest: as the guest measured it).
    pub wall_s: f64,
    /// Model time the phase took, s.
    pub model_s: f64,
    /// Idle time before the phase started (guest: measured; sim: replayed), s.
    pub gap_before_s: f64,
    /// Named figures `expect` can use (`write_bw`, `read_iops`, `mean_bw`,
    /// `waf`, ...), in base units (bytes/s, IOPS, ns, ratios).
    pub metrics: BTreeMap<String, f64>,
    /// fio's JSON output (fio phases).
    pub fio: Option<serde_json::Value>,
    /// Throughput over time (fio phases).
    pub series: Option<Series>,
    /// The surface measurement (surface phases).
    pub surface: Option<Surface>,
    /// What the drive's TRIM audit counted during the phase.
    pub trim: Option<TrimReport>,
    /// The drive's counters at the start and the end of the phase.
    pub counters_before: Option<Counters>,
    /// At the end.
    pub counters_after: Option<Counters>,
    /// Guest runs: when the phase began and ended on the daemon's trace
    /// clock (drive-time ns since the trace started), so the simulator can
    /// replay the phase's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_ns: Option<[u64; 2]>,
}

/// The drive, sampled about once a second during a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DriveSample {
    /// Seconds since the run started (wall time; sim: model time).
    pub t_s: f64,
    /// Phase running then (index into `phases`).
    pub phase: usize,
    /// Write amplification over the last interval (NaN-free: 0 when idle).
    pub waf: f64,
    /// Free blocks.
    pub free_blocks: u64,
    /// All blocks.
    pub total_blocks: u64,
    /// Host bytes written so far.
    pub host_written_bytes: u64,
    /// NAND bytes programmed so far.
    pub nand_bytes_programmed: u64,
}

/// One `expect` assertion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpectResult {
    /// As written in the scenario.
    pub text: String,
    /// Whether it held (false when inconclusive).
    pub passed: bool,
    /// Its sides with the values used, e.g. `trimmed.write_bw = 1.9e8 >= 0.9 × fresh.write_bw = 1.8e8`.
    pub detail: String,
    /// Neither passed nor failed, and why: a phase it reads was
    /// guest-bound (the emulated host, not the drive, set its figure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inconclusive: Option<String>,
    /// The run was strict (`bench run --strict`, or `strict = true` in the
    /// scenario): an inconclusive verdict fails it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
}

/// What an `expect` assertion came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It held.
    Pass,
    /// It did not.
    Fail,
    /// It read a guest-bound phase: no verdict.
    Inconclusive,
}

impl ExpectResult {
    /// Pass, fail or inconclusive.
    pub fn verdict(&self) -> Verdict {
        match (&self.inconclusive, self.passed) {
            (Some(_), _) => Verdict::Inconclusive,
            (None, true) => Verdict::Pass,
            (None, false) => Verdict::Fail,
        }
    }

    /// It failed: it did not hold, or it was inconclusive in a strict run.
    pub fn failed(&self) -> bool {
        match self.verdict() {
            Verdict::Pass => false,
            Verdict::Fail => true,
            Verdict::Inconclusive => self.strict,
        }
    }

    /// Inconclusive, and so failed, because the run was strict.
    pub fn strict_failure(&self) -> bool {
        self.strict && self.verdict() == Verdict::Inconclusive
    }

    /// `PASS`, `FAIL`, `INCONCLUSIVE (guest-bound)` or `INCONCLUSIVE (not
    /// simulated)`; in a strict run an inconclusive one is `FAIL (strict):
    /// INCONCLUSIVE (...)`.
    pub fn label(&self) -> &'static str {
        let not_simulated = self
            .inconclusive
            .as_deref()
            .is_some_and(|w| w.starts_with("inconclusive (not simulated)"));
        match (self.verdict(), not_simulated, self.strict) {
            (Verdict::Pass, ..) => "PASS",
            (Verdict::Fail, ..) => "FAIL",
            (Verdict::Inconclusive, true, false) => "INCONCLUSIVE (not simulated)",
            (Verdict::Inconclusive, false, false) => "INCONCLUSIVE (guest-bound)",
            (Verdict::Inconclusive, true, true) => "FAIL (strict): INCONCLUSIVE (not simulated)",
            (Verdict::Inconclusive, false, true) => "FAIL (strict): INCONCLUSIVE (guest-bound)",
        }
    }
}

/// Guest vs simulator, per phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseComparison {
    /// Phase name.
    pub phase: String,
    /// The metric compared (`write_bw`, `mean_bw`, ...).
    pub metric: String,
    /// Guest value.
    pub guest: f64,
    /// Simulator value.
    pub sim: f64,
    /// (sim − guest) / guest.
    pub difference: f64,
    /// Within the scenario's tolerance.
    pub within: bool,
    /// The guest could not keep the drive busy: its requests reached the
    /// drive at a fraction of the queue depth the simulator's did, so the
    /// emulated host (CPU emulation, interrupt delivery), not the drive,
    /// set the guest's figure. Not counted against the tolerance.
    #[serde(default)]
    pub guest_bound: bool,
    /// The drive state this phase started from was left by a guest-bound
    /// phase. The simulator replayed the guest's average rate there, not
    /// its bursts and stalls, so the write buffer and the garbage-collection
    /// backlog this phase starts with can differ. Reported, not counted
    /// against the tolerance.
    #[serde(default)]
    pub after_guest_bound: bool,
    /// The simulator replayed the daemon's trace of this phase request by
    /// request (arrival times, sizes, offsets): the drive got what the
    /// guest sent, bursts and stalls included, so the comparison counts
    /// whether or not the guest kept the drive busy.
    #[serde(default)]
    pub replayed: bool,
    /// With `replayed`: the simulator's prediction of the same figure, from
    /// the phase's own fio job or surface pass run in the simulator (with
    /// the guest's idle gaps between phases, without the trace). The
    /// replayed figure checks that the daemon delivered completions when
    /// its model said; this one checks the model and the job file against
    /// what the guest measured. Reported, not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<f64>,
}

impl PhaseComparison {
    /// (predicted − guest) / guest, with a prediction.
    pub fn predicted_difference(&self) -> Option<f64> {
        self.predicted
            .map(|p| (p - self.guest) / self.guest.max(1.0))
    }

    /// Counted against the tolerance: replayed request by request, or
    /// neither guest-bound nor starting from a guest-bound phase's state.
    pub fn counted(&self) -> bool {
        self.replayed || (!self.guest_bound && !self.after_guest_bound)
    }

    /// A word for the verdict: within, outside, guest-bound, after guest-bound.
    pub fn verdict(&self) -> &'static str {
        match (self.within, self.guest_bound, self.after_guest_bound) {
            (true, _, _) => "within",
            (false, _, _) if self.replayed => "outside",
            (false, true, _) => "guest-bound",
            (false, false, true) => "after guest-bound",
            (false, false, false) => "outside",
        }
    }
}

/// A whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResults {
    /// Scenario name.
    pub scenario: String,
    /// Its description.
    pub description: String,
    /// Guest or simulator.
    pub mode: Mode,
    /// Drive profile.
    pub profile: String,
    /// Capacity, bytes.
    pub capacity: u64,
    /// Bus (guest runs; the simulator has none).
    pub bus: Bus,
    /// When it started, Unix s.
    pub started_unix: u64,
    /// Versions.
    pub environment: Environment,
    /// Phases, in order (as far as the run got).
    pub phases: Vec<PhaseResult>,
    /// The drive over time.
    pub samples: Vec<DriveSample>,
    /// `expect` verdicts.
    pub expects: Vec<ExpectResult>,
    /// Tolerance for the guest/sim comparison (fraction).
    pub tolerance: f64,
    /// Guest vs simulator per phase (guest runs with a simulator run).
    pub comparison: Vec<PhaseComparison>,
    /// The simulator's run of the same scenario, with the guest's gaps replayed.
    pub sim: Option<Box<BenchResults>>,
    /// The run stopped early (Ctrl-C, a failure): why.
    pub incomplete: Option<String>,
    /// Time dilation `K` of a guest run (`bench run --time-scale`): the
    /// drive's clock ran `K` times slower than the wall clock, and every
    /// figure here (durations, bandwidth, IOPS, latency, surface points,
    /// time series) is converted back to the drive's time. 1: none.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub time_scale: f64,
    /// How `K` was chosen (`--time-scale auto`: what the probe measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_scale_reason: Option<String>,
    /// A strict run (`bench run --strict`, or the scenario's `strict =
    /// true`): an inconclusive expectation fails it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
    /// How long the whole run took on the wall clock (probe, boots and
    /// simulator runs included), s; 0 when unknown.
    #[serde(default)]
    pub duration_s: f64,
}

fn one() -> f64 {
    1.0
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
fn is_one(k: &f64) -> bool {
    *k == 1.0
}

impl BenchResults {
    /// A phase by name.
    pub fn phase(&self, name: &str) -> Option<&PhaseResult> {
        self.phases.iter().find(|p| p.name == name)
    }

    /// Whether the run completed and no `expect` failed (inconclusive
    /// ones neither pass nor fail, unless the run was strict: see
    /// [`Self::inconclusive`]).
    pub fn passed(&self) -> bool {
        self.incomplete.is_none() && !self.expects.iter().any(ExpectResult::failed)
    }

    /// The `expect` assertions that were inconclusive (not judged),
    /// strict run or not.
    pub fn inconclusive(&self) -> usize {
        self.expects
            .iter()
            .filter(|e| e.verdict() == Verdict::Inconclusive)
            .count()
    }

    /// One line on the expectations: how many held, failed and were not
    /// judged, e.g. `3 checks: 1 passed, 0 failed, 2 not judged
    /// (inconclusive)`, and with `strict`, that those failed the run.
    pub fn checks_line(&self) -> String {
        let n = self.expects.len();
        let count = |v: Verdict| self.expects.iter().filter(|e| e.verdict() == v).count();
        let (pass, fail, open) = (
            count(Verdict::Pass),
            count(Verdict::Fail),
            count(Verdict::Inconclusive),
        );
        let mut s = format!(
            "{n} check{}: {pass} passed, {fail} failed, {open} not judged (inconclusive)",
            if n == 1 { "" } else { "s" }
        );
        if open > 0 && self.strict {
            s.push_str(", which fails a strict run");
        } else if open > 0 {
            s.push_str("; --strict would fail the run on them");
        }
        s
    }
}
