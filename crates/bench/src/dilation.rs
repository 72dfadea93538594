//! Time dilation for guest runs (`vssd bench run --time-scale auto|K`).
//!
//! A guest on an emulated CPU (TCG) can be too slow to keep a drive busy:
//! under TCG each AHCI request costs the guest about 1 ms, so a SATA-era
//! drive's fresh, used and trimmed states all come out at the guest's
//! speed. With `vssd serve --time-scale K` the drive model's clock runs
//! `K` times slower than the wall clock: the drive takes `K` times as long
//! in wall time, the guest keeps it busy, and whatever the guest measures
//! on the wall clock is converted back here to the drive's time (durations
//! ÷ `K`, bandwidth and IOPS × `K`, latencies ÷ `K`).
//!
//! `auto` measures whether that is needed: before the run, one guest boot
//! on a drive dilated by [`PROBE_SCALE`] runs a short surface pass of each
//! request shape the scenario's expectations read (surface phases as they
//! are; fio phases as bursts of the job's block size at its queue depth),
//! and the simulator runs the same passes on the same fresh drive. Per
//! burst, the guest's wall time less `PROBE_SCALE` × the drive's time is
//! the guest's own time `o` (submitting, completing, waking up: under TCG
//! a few ms per burst, which grows as the guest idles more between
//! completions and levels off from K ≈ 3; the probe measures it dilated
//! for that reason). `K` is the smallest scale at which `o` is at most
//! [`OWN_SHARE`] of the dilated drive's time per burst `T × K`:
//! `K = o / (OWN_SHARE × T)`, at least 1, rounded up to a half, at most
//! [`AUTO_MAX`]; the worst shape decides.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use super::BenchError;
use super::daemon;
use super::metrics;
use super::progress::Progress;
use super::results::{DriveSample, PhaseResult, Surface};
use super::scenario::{PhaseKind, Scenario, SurfaceOp};
use super::surface::{self, Pass};
use vssd_common::clock::TimeScale;
use vssd_guest::{Accel, Guest, console_files};
use vssd_sim::Simulation;

/// The time scale the probe runs at.
pub const PROBE_SCALE: f64 = 4.0;

/// The guest's own time per burst may be at most this share of the
/// dilated drive's.
pub const OWN_SHARE: f64 = 0.15;

/// The largest `K` `auto` picks (a larger one is named, not used).
pub const AUTO_MAX: f64 = 50.0;

/// Positions of a probe pass.
const PROBE_POSITIONS: u32 = 12;

/// `--time-scale`: `auto` or a fixed `K`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeScaleArg {
    /// Measure whether the guest can reach the drive's speed, and dilate
    /// time if it cannot.
    Auto,
    /// This `K` (1: none).
    Fixed(TimeScale),
}

impl FromStr for TimeScaleArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(Self::Auto);
        }
        s.parse::<TimeScale>()
            .map(Self::Fixed)
            .map_err(|e| format!("{e}, or auto"))
    }
}

/// Convert what a guest measured on the wall clock in phase `r` to the
/// drive's time: the phase's drive time `model_s` is its wall time ÷ `K`
/// (`wall_s` stays the wall clock's), the gap before it ÷ `K`;
/// bandwidth, IOPS and surface points × `K`; completion latencies ÷ `K`.
/// The throughput series is built in the drive's time from fio's logs
/// ([`metrics::series_from_logs`]). The drive's own figures (counters, the daemon's modelled latencies)
/// are already in its time. fio's raw JSON (`r.fio`) is kept as fio wrote
/// it, on the wall clock.
pub fn phase_to_drive_time(r: &mut PhaseResult, k: TimeScale) {
    r.model_s = r.wall_s / k.factor();
    if k.is_one() {
        return;
    }
    let k = k.factor();
    r.gap_before_s /= k;
    for (name, v) in r.metrics.iter_mut() {
        if name.ends_with("_bw") || name.ends_with("_iops") {
            *v *= k;
        } else if name.contains("_clat_") {
            *v /= k;
        }
    }
    if let Some(s) = &mut r.surface {
        for p in &mut s.points {
            p.bytes_s *= k;
            p.start_s = p.start_s.map(|t| t / k);
        }
        s.lead_s = s.lead_s.map(|t| t / k);
    }
}

/// Drive samples' times (wall clock since the run started) in the drive's time.
pub fn samples_to_drive_time(samples: &mut [DriveSample], k: TimeScale) {
    if k.is_one() {
        return;
    }
    for s in samples {
        s.t_s /= k.factor();
    }
}

/// Drive time an `idle` phase of `seconds` lets pass at once in a run
/// dilated by `k`: the guest sleeps `seconds` of wall time, which are
/// `seconds / K` of the drive's, and the drive idles the remaining
/// `seconds × (1 − 1/K)` at the phase's start (`ctl idle`), so that it
/// idles the phase's `seconds` of its own time in all. None at K = 1.
pub fn idle_fast_forward_ns(seconds: f64, k: TimeScale) -> Option<u64> {
    if k.is_one() || seconds.is_nan() || seconds <= 0.0 {
        return None;
    }
    Some((seconds * (1.0 - 1.0 / k.factor()) * 1e9) as u64)
}

/// What the probe found for one request shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeResult {
    /// The phase whose shape it is.
    pub phase: String,
    /// The shape.
    pub what: String,
    /// Median time of a burst in the guest on the drive dilated by
    /// [`PROBE_SCALE`], wall clock, s.
    pub guest_wall_s: f64,
    /// Median time of the same burst in the simulator (the drive's), s.
    pub drive_s: f64,
}

impl ProbeResult {
    /// The guest's own time per burst, wall clock, s.
    pub fn own_s(&self) -> f64 {
        (self.guest_wall_s - PROBE_SCALE * self.drive_s).max(0.0)
    }

    /// The scale at which that is [`OWN_SHARE`] of the dilated drive's time.
    pub fn needed(&self) -> f64 {
        self.own_s() / (OWN_SHARE * self.drive_s)
    }
}

/// `K` for what the probe measured, and a sentence saying why.
pub fn choose(probes: &[ProbeResult]) -> (TimeScale, String) {
    let worst = probes
        .iter()
        .filter(|p| p.guest_wall_s > 0.0 && p.drive_s > 0.0)
        .max_by(|a, b| a.needed().total_cmp(&b.needed()));
    let Some(w) = worst else {
        return (
            TimeScale::ONE,
            "auto: nothing the expectations read could be probed".into(),
        );
    };
    let measured = format!(
        "probe at K = {PROBE_SCALE}: a burst of {} (phase {}) took the guest {:.2} ms where the \
         drive takes {:.2} ms × {PROBE_SCALE}, {:.2} ms of the guest's own",
        w.what,
        w.phase,
        w.guest_wall_s * 1e3,
        w.drive_s * 1e3,
        w.own_s() * 1e3
    );
    let k = (w.needed() * 2.0).ceil() / 2.0;
    if k <= 1.0 {
        return (
            TimeScale::ONE,
            format!("auto: {measured}: the guest keeps up, no dilation"),
        );
    }
    if k > AUTO_MAX {
        return (
            TimeScale::new(AUTO_MAX).unwrap_or(TimeScale::ONE),
            format!("auto: {measured}: K = {k} would be needed, {AUTO_MAX} is the most auto picks"),
        );
    }
    (
        TimeScale::new(k).unwrap_or(TimeScale::ONE),
        format!(
            "auto: {measured}; at K = {k} that is at most {:.0} % of the drive's time",
            OWN_SHARE * 100.0
        ),
    )
}

/// The request shapes the scenario's expectations read: for each phase
/// an assertion reads a throughput or latency figure of, a short surface
/// pass (surface phases: their own; fio phases: bursts of the job's block
/// size at its queue depth).
pub fn probe_passes(sc: &Scenario) -> Vec<(String, Pass)> {
    let mut read: Vec<String> = sc
        .phases
        .iter()
        .filter_map(|p| match &p.kind {
            PhaseKind::Expect { checks } => Some(checks),
            _ => None,
        })
        .flatten()
        .flat_map(|a| a.refs())
        .filter(|(p, m)| {
            sc.phases
                .iter()
                .find(|x| &x.name == p)
                .is_some_and(|x| x.kind.metrics().contains(&m.as_str()))
        })
        .map(|(p, _)| p)
        .collect();
    read.sort();
    read.dedup();
    let mut out: Vec<(String, Pass)> = Vec::new();
    for name in read {
        let Some(p) = sc.phases.iter().find(|p| p.name == name) else {
            continue;
        };
        let pass = match &p.kind {
            PhaseKind::Surface {
                op,
                block,
                burst,
                depth,
                ..
            } => Pass {
                op: *op,
                block: *block,
                burst: *burst,
                positions: PROBE_POSITIONS,
                depth: *depth,
            },
            PhaseKind::Fio { text, .. } => {
                let Ok(jf) = vssd_sim::jobfile::parse(&super::scenario::job_for_sim(text), "probe")
                else {
                    continue;
                };
                let Some(j) = jf.jobs.first() else { continue };
                let write = j.rw_text.contains("write") || j.rw_text.contains("rw");
                let block = if write { j.bs[1] } else { j.bs[0] }.max(512);
                Pass {
                    op: if write {
                        SurfaceOp::Write
                    } else {
                        SurfaceOp::Read
                    },
                    block,
                    burst: (block * 64).clamp(1 << 20, 8 << 20),
                    positions: PROBE_POSITIONS,
                    depth: (j.iodepth.max(1) * j.numjobs.max(1)).min(64),
                }
            }
            _ => continue,
        };
        let same = |q: &Pass| {
            q.op == pass.op
                && q.block == pass.block
                && q.burst == pass.burst
                && q.depth == pass.depth
        };
        if !out.iter().any(|(_, q)| same(q)) {
            out.push((name, pass));
        }
    }
    out
}

fn describe(p: &Pass) -> String {
    format!(
        "{} KiB {} at QD {}",
        p.block / 1024,
        match p.op {
            SurfaceOp::Read => "reads",
            SurfaceOp::Write => "writes",
        },
        p.depth
    )
}

/// Median time of a burst of `s`, s (0 if none was measured).
fn median_burst_s(s: &Surface) -> f64 {
    let mut m = BTreeMap::new();
    metrics::surface(s, &mut m);
    match m.get("median_bw") {
        Some(&bw) if bw > 0.0 => s.burst as f64 / bw,
        _ => 0.0,
    }
}

/// Where and how to probe.
pub struct ProbeOptions<'a> {
    /// The vssd binary.
    pub exe: &'a std::path::Path,
    /// Its path as the guest sees it.
    pub guest_exe: &'a str,
    /// Scratch directory for the probe's daemon.
    pub dir: &'a std::path::Path,
    /// Accelerator.
    pub accel: Accel,
    /// Give up after this long.
    pub timeout: Duration,
    /// Seed of the model.
    pub seed: u64,
}

/// Measure the scenario's probe passes in a guest on a drive dilated by [`PROBE_SCALE`]
/// (its own `vssd serve`, stopped afterwards: the run starts from a new,
/// fresh drive) and in the simulator, and choose `K`.
pub fn probe(
    sc: &Scenario,
    o: &ProbeOptions<'_>,
    progress: &Progress,
) -> Result<(TimeScale, String, Vec<ProbeResult>), BenchError> {
    let passes = probe_passes(sc);
    if passes.is_empty() {
        let (k, why) = choose(&[]);
        return Ok((k, why, Vec::new()));
    }
    progress.say(&format!(
        "time scale auto: probing whether the guest keeps up with the drive ({})",
        passes
            .iter()
            .map(|(_, p)| describe(p))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let dev = sc.bus.guest_dev();
    let mut script = String::from("set -e\n");
    for (i, (_, p)) in passes.iter().enumerate() {
        script.push_str(&format!(
            "'{}' surface --device {dev} --op {} --block {} --burst {} --positions {} --depth {} --json > /tmp/probe{i}.json\n",
            o.guest_exe,
            match p.op {
                SurfaceOp::Read => "read",
                SurfaceOp::Write => "write",
            },
            p.block,
            p.burst,
            p.positions,
            p.depth
        ));
    }
    script.push_str(&console_files::print_command("/tmp/probe*.json"));
    let run = {
        let serve = daemon::start(sc, o.exe, o.dir, &PROBE_SCALE.to_string(), &[])?;
        Guest::new()
            .accel(o.accel)
            .disk(serve.disk())
            .run_script(&script, o.timeout)?
    };
    if run.exit_code != 0 {
        return Err(BenchError::Failed(format!(
            "the time-scale probe failed in the guest (exit {}):\n{}",
            run.exit_code,
            super::tail(&run.output, 20)
        )));
    }
    let out = console_files::read(&run.output);
    let mut results = Vec::new();
    for (i, (phase, pass)) in passes.iter().enumerate() {
        let guest = out
            .get(&format!("/tmp/probe{i}.json"))
            .and_then(|j| serde_json::from_str::<Surface>(j.trim()).ok())
            .ok_or_else(|| {
                BenchError::Failed(format!(
                    "the time-scale probe printed no result for {}",
                    describe(pass)
                ))
            })?;
        // The same pass on the same fresh drive, in the simulator.
        let mut sim = Simulation::new(&sc.profile, o.seed);
        let model =
            surface::run_model(&mut sim, pass, None).map_err(|e| BenchError::Sim(e.to_string()))?;
        results.push(ProbeResult {
            phase: phase.clone(),
            what: describe(pass),
            guest_wall_s: median_burst_s(&guest),
            drive_s: median_burst_s(&model),
        });
    }
    let (k, why) = choose(&results);
    Ok((k, why, results))
}

#[cfg(test)]
mod tests {
    use super::super::results::{Series, SurfacePoint};
    use super::*;
    use crate::scenario::Overrides;

    fn phase() -> PhaseResult {
        PhaseResult {
            name: "p".into(),
            kind: "fio".into(),
            wall_s: 40.0,
            model_s: 0.0,
            gap_before_s: 8.0,
            metrics: [
                ("write_bw".to_string(), 50e6),
                ("write_iops".to_string(), 400.0),
                ("write_clat_mean".to_string(), 4e6),
                ("write_clat_p99".to_string(), 8e6),
                ("waf".to_string(), 1.5),
                ("median_bw".to_string(), 20e6),
            ]
            .into_iter()
            .collect(),
            fio: None,
            series: Some(Series {
                interval_s: 1.0,
                read_bytes_s: vec![],
                write_bytes_s: vec![50e6, 60e6],
            }),
            surface: Some(Surface {
                op: "write".into(),
                block: 131072,
                burst: 1 << 20,
                points: vec![SurfacePoint {
                    offset: 0,
                    position: 0.0,
                    bytes_s: 20e6,
                    start_s: Some(2.0),
                }],
                started_uptime_s: None,
                lead_s: Some(0.4),
            }),
            trim: None,
            counters_before: None,
            counters_after: None,
            trace_ns: None,
        }
    }

    #[test]
    fn wall_clock_figures_come_back_in_drive_time() {
        let mut r = phase();
        phase_to_drive_time(&mut r, "4".parse().unwrap());
        assert_eq!(r.wall_s, 40.0, "the wall clock's");
        assert_eq!(r.model_s, 10.0, "the drive's");
        assert_eq!(r.gap_before_s, 2.0);
        assert_eq!(r.metrics["write_bw"], 200e6);
        assert_eq!(r.metrics["write_iops"], 1600.0);
        assert_eq!(r.metrics["write_clat_mean"], 1e6);
        assert_eq!(r.metrics["write_clat_p99"], 2e6);
        assert_eq!(r.metrics["median_bw"], 80e6);
        assert_eq!(r.metrics["waf"], 1.5, "a ratio of counters is not time");
        // The series is built in drive time from fio's logs, not here.
        assert_eq!(r.series, phase().series);
        let sf = r.surface.as_ref().unwrap();
        assert_eq!(sf.points[0].bytes_s, 80e6);
        assert_eq!(sf.points[0].start_s, Some(0.5));
        assert_eq!(sf.lead_s, Some(0.1));
        // K = 1 changes nothing but the drive time, the wall time.
        let mut same = phase();
        phase_to_drive_time(&mut same, TimeScale::ONE);
        assert_eq!(same.model_s, 40.0);
        same.model_s = 0.0;
        assert_eq!(same, phase());
    }

    #[test]
    fn k_hides_the_guests_own_time_behind_the_drives() {
        let p = |guest_ms: f64, drive_ms: f64| ProbeResult {
            phase: "fresh".into(),
            what: "1 MiB of 128 KiB writes at QD 4".into(),
            guest_wall_s: guest_ms / 1e3,
            drive_s: drive_ms / 1e3,
        };
        // The guest adds nothing to the dilated drive's 4 × 3.8 ms: K = 1.
        let (k, why) = choose(&[p(15.2, 3.8)]);
        assert!(k.is_one(), "{why}");
        assert!(why.contains("keeps up"), "{why}");
        // 0.2 ms of its own per burst of 4 ms: 0.2 / (0.15 × 4) < 1.
        assert!(choose(&[p(16.2, 4.0)]).0.is_one());
        // SATA under TCG: 4.8 ms of its own per 3.8 ms burst → 8.4 → 8.5.
        let (k, why) = choose(&[p(20.0, 3.8)]);
        assert_eq!(k.factor(), 8.5, "{why}");
        assert!(why.contains("20.00 ms") && why.contains("3.80 ms"), "{why}");
        // The worst shape decides, rounded up to a half.
        let (k, _) = choose(&[p(20.0, 3.8), p(4.5, 1.0)]);
        assert_eq!(k.factor(), 8.5);
        let (k, _) = choose(&[p(4.0, 0.9), p(4.5, 1.0)]);
        assert_eq!(k.factor(), 3.5);
        let (k, why) = choose(&[p(500.0, 1.0)]);
        assert_eq!(k.factor(), AUTO_MAX);
        assert!(why.contains("would be needed"), "{why}");
        assert!(choose(&[]).0.is_one());
    }

    #[test]
    fn the_probe_measures_what_the_expectations_read() {
        let sc = Scenario::load("trim-recovery", &Overrides::default()).unwrap();
        let passes = probe_passes(&sc);
        // fresh, used and trimmed share one shape; trim.trim_bytes is not
        // a figure the guest's speed sets.
        assert_eq!(passes.len(), 1, "{passes:?}");
        let (name, p) = &passes[0];
        assert_eq!(name, "fresh");
        assert_eq!((p.block, p.depth, p.op), (128 << 10, 4, SurfaceOp::Write));
        let sc = Scenario::load("used-state", &Overrides::default()).unwrap();
        assert!(!probe_passes(&sc).is_empty());
    }

    #[test]
    fn time_scale_argument() {
        assert_eq!("auto".parse::<TimeScaleArg>(), Ok(TimeScaleArg::Auto));
        assert_eq!(
            "2.5".parse::<TimeScaleArg>(),
            Ok(TimeScaleArg::Fixed(TimeScale::new(2.5).unwrap()))
        );
        assert!("0.5".parse::<TimeScaleArg>().is_err());
    }
}
