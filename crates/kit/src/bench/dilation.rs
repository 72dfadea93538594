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
//! on an undilated drive runs a short surface pass of each request shape
//! the scenario's expectations read (surface phases as they are; fio
//! phases as bursts of the job's block size at its queue depth), and the
//! simulator runs the same passes on the same fresh drive. Where the guest
//! reaches less than [`GUEST_BOUND_RATIO`] of the drive's throughput, the
//! guest, not the drive, set its figure: `K` is then the ratio of the two
//! times [`HEADROOM`] (so the guest's own per-request time is at most
//! half of the dilated drive's), rounded up to a half.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use super::BenchError;
use super::metrics;
use super::progress::Progress;
use super::results::{DriveSample, PhaseResult, Surface};
use super::scenario::{PhaseKind, Scenario, SurfaceOp};
use super::surface::{self, Pass};
use crate::guest::{Accel, Guest};
use crate::serve::ServeProcess;
use vssd_common::clock::TimeScale;
use vssd_sim::Simulation;

/// The guest reaching less than this fraction of the drive's throughput
/// is guest-bound.
pub const GUEST_BOUND_RATIO: f64 = 0.9;

/// `K` = (drive ÷ guest throughput) × this: the dilated drive is then at
/// most half as fast as the guest's ceiling.
pub const HEADROOM: f64 = 2.0;

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
/// drive's time: durations ÷ `K`; bandwidth, IOPS and surface points × `K`;
/// completion latencies ÷ `K`. The drive's own figures (counters, the
/// daemon's modelled latencies) are already in its time. fio's raw JSON
/// (`r.fio`) is kept as fio wrote it, on the wall clock.
pub fn phase_to_drive_time(r: &mut PhaseResult, k: TimeScale) {
    if k.is_one() {
        return;
    }
    let k = k.factor();
    r.wall_s /= k;
    r.gap_before_s /= k;
    for (name, v) in r.metrics.iter_mut() {
        if name.ends_with("_bw") || name.ends_with("_iops") {
            *v *= k;
        } else if name.contains("_clat_") {
            *v /= k;
        }
    }
    if let Some(s) = &mut r.series {
        s.interval_s /= k;
        for v in s.read_bytes_s.iter_mut().chain(s.write_bytes_s.iter_mut()) {
            *v *= k;
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

/// What the probe found for one request shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeResult {
    /// The phase whose shape it is.
    pub phase: String,
    /// The shape.
    pub what: String,
    /// Median throughput the guest reached on the undilated drive, bytes/s.
    pub guest_bw: f64,
    /// Median throughput of the same pass in the simulator, bytes/s.
    pub drive_bw: f64,
}

/// `K` for what the probe measured, and a sentence saying why.
pub fn choose(probes: &[ProbeResult]) -> (TimeScale, String) {
    let worst = probes
        .iter()
        .filter(|p| p.guest_bw > 0.0 && p.drive_bw > 0.0)
        .max_by(|a, b| (a.drive_bw / a.guest_bw).total_cmp(&(b.drive_bw / b.guest_bw)));
    let Some(w) = worst else {
        return (
            TimeScale::ONE,
            "auto: nothing the expectations read could be probed".into(),
        );
    };
    let ratio = w.drive_bw / w.guest_bw;
    let measured = format!(
        "the guest reached {:.1} MB/s where the drive does {:.1} MB/s ({} of phase {})",
        w.guest_bw / 1e6,
        w.drive_bw / 1e6,
        w.what,
        w.phase
    );
    if ratio * GUEST_BOUND_RATIO <= 1.0 {
        return (
            TimeScale::ONE,
            format!("auto: {measured}: the guest keeps up, no dilation"),
        );
    }
    let k = ((ratio * HEADROOM) * 2.0).ceil() / 2.0;
    if k > AUTO_MAX {
        return (
            TimeScale::new(AUTO_MAX).unwrap_or(TimeScale::ONE),
            format!("auto: {measured}: K = {k} would be needed, {AUTO_MAX} is the most auto picks"),
        );
    }
    (
        TimeScale::new(k).unwrap_or(TimeScale::ONE),
        format!("auto: {measured}"),
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
        "{} {} KiB at QD {}",
        match p.op {
            SurfaceOp::Read => "reads",
            SurfaceOp::Write => "writes",
        },
        p.block / 1024,
        p.depth
    )
}

fn median(s: &Surface) -> f64 {
    let mut m = BTreeMap::new();
    metrics::surface(s, &mut m);
    m.get("median_bw").copied().unwrap_or(0.0)
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

/// Measure the scenario's probe passes in a guest on an undilated drive
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
    script.push_str("for f in /tmp/probe*.json; do\n  echo \"@@FILE $f\"\n  cat \"$f\"\n  echo\n  echo \"@@FILE-END\"\ndone\n");
    let args = [
        "--profile".to_string(),
        sc.profile_name.clone(),
        "--capacity".to_string(),
        sc.capacity.to_string(),
        "--memory".to_string(),
        "--realtime".to_string(),
    ];
    let run = {
        let serve = ServeProcess::start(o.exe, o.dir, sc.bus, 2, &args)?;
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
    let out = super::guestrun::files(&run.output);
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
            guest_bw: median(&guest),
            drive_bw: median(&model),
        });
    }
    let (k, why) = choose(&results);
    Ok((k, why, results))
}

#[cfg(test)]
mod tests {
    use super::super::results::{Series, SurfacePoint};
    use super::*;
    use crate::bench::scenario::Overrides;

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
        }
    }

    #[test]
    fn wall_clock_figures_come_back_in_drive_time() {
        let mut r = phase();
        phase_to_drive_time(&mut r, "4".parse().unwrap());
        assert_eq!(r.wall_s, 10.0);
        assert_eq!(r.gap_before_s, 2.0);
        assert_eq!(r.metrics["write_bw"], 200e6);
        assert_eq!(r.metrics["write_iops"], 1600.0);
        assert_eq!(r.metrics["write_clat_mean"], 1e6);
        assert_eq!(r.metrics["write_clat_p99"], 2e6);
        assert_eq!(r.metrics["median_bw"], 80e6);
        assert_eq!(r.metrics["waf"], 1.5, "a ratio of counters is not time");
        let s = r.series.as_ref().unwrap();
        assert_eq!(s.interval_s, 0.25);
        assert_eq!(s.write_bytes_s, vec![200e6, 240e6]);
        let sf = r.surface.as_ref().unwrap();
        assert_eq!(sf.points[0].bytes_s, 80e6);
        assert_eq!(sf.points[0].start_s, Some(0.5));
        assert_eq!(sf.lead_s, Some(0.1));
        // K = 1 changes nothing.
        let mut same = phase();
        phase_to_drive_time(&mut same, TimeScale::ONE);
        assert_eq!(same, phase());
    }

    #[test]
    fn k_follows_how_far_the_guest_fell_short() {
        let p = |g: f64, d: f64| ProbeResult {
            phase: "fresh".into(),
            what: "writes 128 KiB at QD 4".into(),
            guest_bw: g * 1e6,
            drive_bw: d * 1e6,
        };
        // Keeping up (within 10 %): no dilation.
        assert!(choose(&[p(250.0, 270.0)]).0.is_one());
        // A third of the drive's speed: K = 3 × 2.
        let (k, why) = choose(&[p(80.0, 240.0)]);
        assert_eq!(k.factor(), 6.0);
        assert!(
            why.contains("80.0 MB/s") && why.contains("240.0 MB/s"),
            "{why}"
        );
        // The worst shape decides, rounded up to a half.
        let (k, _) = choose(&[p(200.0, 240.0), p(100.0, 130.0)]);
        assert_eq!(k.factor(), 3.0);
        let (k, why) = choose(&[p(1.0, 500.0)]);
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
