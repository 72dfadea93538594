//! The guest run against the simulator, phase by phase: the simulator runs
//! the scenario again with the guest's idle gaps and bursts, and with the
//! daemon's trace of the guest run replayed request by request where it
//! has one (else at the guest's own pace where the guest could not keep
//! up); each phase's throughput is compared within the scenario's
//! tolerance.

use std::path::Path;

use crate::BenchError;
use crate::progress::Progress;
use crate::results::{BenchResults, PhaseComparison, PhaseResult};
use crate::scenario::Scenario;
use crate::simrun;

/// The simulator beside guest run `g` (whose daemon traced every request
/// into `trace`): the two compared phase by phase, the simulator's run
/// compared (with a trace, its replay), and with a trace the prediction
/// (the scenario's own jobs, with the guest's gaps) beside it.
pub(crate) struct SimBeside {
    /// Phase by phase.
    pub comparison: Vec<PhaseComparison>,
    /// The simulator's run compared.
    pub sim: BenchResults,
    /// The prediction, when `sim` is the trace's replay.
    pub predicted: Option<BenchResults>,
}

/// The simulator's run of `sc` beside guest run `g` (whose daemon traced
/// every request into `trace`), and the two compared phase by phase.
pub(crate) fn compare_with_sim(
    sc: &Scenario,
    seed: u64,
    g: &BenchResults,
    trace: &Path,
    progress: &Progress,
) -> Result<SimBeside, BenchError> {
    progress.say("simulating again with the guest's idle gaps between phases and bursts");
    let mut replay = simrun::Replay::of(g);
    let mut s = simrun::run(sc, seed, Some(&replay), &mut |_, _| {})?;
    let mut cmp = compare_runs(g, &s, sc.tolerance);
    let mut predicted = None;
    let traced = vssd_trace::open(trace)
        .and_then(|r| vssd_trace::vssd::read(r, &trace.display().to_string()));
    match traced {
        Ok(f) if f.header.dropped == 0 && g.phases.iter().any(|p| p.trace_ns.is_some()) => {
            progress.say("and replaying the daemon's trace of the guest run, phase by phase");
            let (c, p) = compare_replayed(sc, seed, g, &f, &replay, &mut s, &cmp)?;
            cmp = c;
            predicted = Some(p);
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
            cmp = pace_guest_bound(sc, seed, g, &mut replay, &mut s, cmp, progress)?;
        }
    }
    Ok(SimBeside {
        comparison: cmp,
        sim: s,
        predicted,
    })
}

/// Every fio, surface and trim phase replayed request by request from the
/// daemon's trace `f` of guest run `g`: the comparison no longer depends
/// on whether the guest kept up. Whether it did (for the expectations)
/// comes from `paced`, the comparison with the run at the drive's own
/// pace, whose simulator run `s` (the simulator's prediction from the job
/// files) is replaced by the replay and reported beside it (returned).
fn compare_replayed(
    sc: &Scenario,
    seed: u64,
    g: &BenchResults,
    f: &vssd_trace::vssd::File,
    replay: &simrun::Replay,
    s: &mut BenchResults,
    paced: &[PhaseComparison],
) -> Result<(Vec<PhaseComparison>, BenchResults), BenchError> {
    let bound: Vec<String> = paced
        .iter()
        .filter(|c| c.guest_bound)
        .map(|c| c.phase.clone())
        .collect();
    let traced = replay.clone().with_trace(g, f);
    let predicted = std::mem::replace(s, simrun::run(sc, seed, Some(&traced), &mut |_, _| {})?);
    let mut cmp = compare_runs(g, s, sc.tolerance);
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
    Ok((cmp, predicted))
}

/// The throughput figure compared between guest and simulator for a phase.
/// Surfaces compare their median over positions, as the scenarios' own
/// checks do: under TCG a guest's first bursts of a run are slow while it
/// translates the I/O path, which pulls the mean of the first surface down
/// but not its median.
pub(crate) fn throughput_metric(r: &PhaseResult) -> Option<(&'static str, f64)> {
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
            let qd = |p: &PhaseResult| p.metrics.get("drive_qd").copied();
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
