//! A phase replayed from the daemon's trace of a guest run: the recorded
//! requests at their recorded times (open loop; at most as many in flight
//! as the guest had), then idle to the end of the phase's window. The
//! phase's figures come from the replayed completions, computed as the
//! guest's tools compute theirs.

use vssd_device::TrimOutcome;
use vssd_device::report::TrimReport;
use vssd_model::{Op, Payload, Request};
use vssd_sim::Simulation;
use vssd_sim::engine::{ReplayEntry, ReplayKind};
use vssd_trace::vssd as vt;

use super::{PhaseTrace, SimRun, finish_trim, series_of};
use crate::BenchError;
use crate::metrics;
use crate::results::PhaseResult;
use crate::scenario::PhaseKind;

impl SimRun<'_> {
    /// Replay phase `name` of kind `kind` from its trace `pt`.
    pub(super) fn replay_phase(
        &mut self,
        name: &str,
        kind: &PhaseKind,
        pt: &PhaseTrace,
        r: &mut PhaseResult,
    ) -> Result<(), BenchError> {
        let sim = &mut self.sim;
        let t0 = sim.now_ns();
        r.metrics
            .insert("replayed_requests".into(), pt.records.len() as f64);
        if matches!(kind, PhaseKind::Trim { .. }) {
            replay_trims(sim, pt, r)
        } else {
            replay_requests(sim, self.sc.capacity, name, kind, pt, r)
        }
        .map_err(|e| BenchError::Sim(format!("phase {name}: replaying the trace: {e}")))?;
        // The rest of the phase's window: the guest's tool ending, idle.
        let spent = sim.now_ns() - t0;
        if pt.window_ns > spent {
            sim.idle(pt.window_ns - spent);
        }
        Ok(())
    }
}

/// The guest's discards, one after another at their arrival times.
fn replay_trims(sim: &mut Simulation, pt: &PhaseTrace, r: &mut PhaseResult) -> Result<(), String> {
    let t0 = sim.now_ns();
    let mut audit = TrimReport::default();
    let mut outcome = TrimOutcome::default();
    let mut now = t0;
    for rec in &pt.records {
        let Some(io) = rec.io() else { continue };
        let op = match io.op {
            vssd_trace::Op::Discard => Op::Trim,
            vssd_trace::Op::WriteZeroes { unmap } => Op::WriteZeroes { unmap },
            _ => continue,
        };
        now = now.max(t0 + rec.taken_ns);
        if op == Op::Trim || op == (Op::WriteZeroes { unmap: true }) {
            outcome.add_range(sim.ssd(), io.offset, io.len);
        }
        match op {
            Op::Trim => audit.discard_cmds += 1,
            _ => audit.write_zeroes_cmds += 1,
        }
        audit.requested_bytes += io.len;
        let c = sim
            .ssd_mut()
            .submit(
                now,
                &Request {
                    op,
                    offset: io.offset,
                    len: io.len,
                    payload: Payload::Unknown,
                },
            )
            .map_err(|e| e.to_string())?;
        now = now.max(c.done_ns);
    }
    finish_trim(sim, now, audit, outcome, r);
    Ok(())
}

/// The guest's reads and writes (a fio or surface phase), as the engine
/// replays a trace, then the phase's figures from their completions.
fn replay_requests(
    sim: &mut Simulation,
    capacity: u64,
    name: &str,
    kind: &PhaseKind,
    pt: &PhaseTrace,
    r: &mut PhaseResult,
) -> Result<(), String> {
    let trace = vssd_trace::Trace {
        files: vec!["vssd".into()],
        // At the times and in the order the daemon's model took them:
        // the replayed drive then sees exactly what the daemon's did.
        items: pt
            .records
            .iter()
            .filter_map(|r| {
                r.io().map(|io| vssd_trace::Io {
                    t_ns: Some(r.taken_ns),
                    ..io
                })
            })
            .map(vssd_trace::Item::Io)
            .collect(),
    };
    if trace.items.is_empty() {
        return Err("the trace holds no request of this phase".into());
    }
    let lead = trace.ios().next().and_then(|i| i.t_ns).unwrap_or(0);
    let resolved = vssd_sim::engine::resolve_replay(
        name,
        vssd_trace::Format::Vssd,
        &trace,
        &Default::default(),
        capacity,
    )?;
    let entries = resolved.entries.clone();
    let depth = max_in_flight(&pt.records).max(1);
    sim.idle(lead);
    let report = sim
        .run_replay(name, resolved, depth)
        .map_err(|e| e.to_string())?;
    let done = report
        .jobs
        .first()
        .map(|j| j.completions.as_slice())
        .unwrap_or(&[]);
    let replayed = Replayed {
        entries: &entries,
        done,
    };
    match kind {
        PhaseKind::Surface { .. } => surface_figures(pt, &replayed, r),
        _ => {
            let v: serde_json::Value =
                serde_json::from_str(&vssd_sim::report::json(&report)).unwrap_or_default();
            metrics::fio(&v, &mut r.metrics);
            fio_bandwidths(pt, &replayed, r);
            r.metrics
                .insert("drive_qd".into(), metrics::fio_queue_depth(&v));
            r.series = Some(series_of(&report));
            r.fio = Some(v);
            Ok(())
        }
    }
}

/// The replayed requests and when the replayed drive took and completed
/// each: (issue, end), ns.
struct Replayed<'a> {
    entries: &'a [ReplayEntry],
    done: &'a [(u64, u64)],
}

/// A surface phase's figures from the replay: each burst's throughput
/// over the replayed drive's part of it plus the guest's own.
fn surface_figures(pt: &PhaseTrace, rp: &Replayed<'_>, r: &mut PhaseResult) -> Result<(), String> {
    let Some(mut s) = pt.surface.clone() else {
        return Err("the guest's surface measurement is missing".into());
    };
    let mut busy_ns = 0.0;
    let mut in_drive_ns = 0.0;
    for q in &mut s.points {
        let (lo, hi) = (q.offset, q.offset + s.burst);
        let in_burst = |off: u64, len: u64| len > 0 && off >= lo && off < hi;
        // The replayed drive's part of the burst: its first issue to its
        // last completion.
        let mut first = u64::MAX;
        let mut last = 0;
        let mut bytes = 0;
        for (e, &(issue, end)) in rp.entries.iter().zip(rp.done) {
            if in_burst(e.offset, e.len) {
                first = first.min(issue);
                last = last.max(end);
                bytes += e.len;
                in_drive_ns += (end - issue) as f64;
            }
        }
        // The guest's own part, from the recording: its measured burst
        // time minus the span from the first request's arrival to the
        // last one's delivery (its timer starting before the first
        // request and stopping after the last completion), added to the
        // replayed span so both figures time the same thing.
        let (mut a, mut d) = (u64::MAX, 0);
        for rec in &pt.records {
            if in_burst(rec.offset, rec.len) {
                a = a.min(rec.taken_ns);
                d = d.max(rec.delivered_ns);
            }
        }
        let own_s = if q.bytes_s > 0.0 && d > a {
            (s.burst as f64 / q.bytes_s - (d - a) as f64 / 1e9).max(0.0)
        } else {
            0.0
        };
        q.bytes_s = if last > first {
            busy_ns += (last - first) as f64;
            bytes as f64 / ((last - first) as f64 / 1e9 + own_s)
        } else {
            0.0
        };
    }
    metrics::surface(&s, &mut r.metrics);
    if busy_ns > 0.0 {
        r.metrics.insert("drive_qd".into(), in_drive_ns / busy_ns);
    }
    r.surface = Some(s);
    Ok(())
}

/// A fio phase's read and write bandwidth from the replay. As for
/// surfaces: the guest's own time at the job's ends (fio starting its
/// clock before the first request and stopping it after the last
/// completion) is added to the replayed drive's span, so both bandwidths
/// time the same.
fn fio_bandwidths(pt: &PhaseTrace, rp: &Replayed<'_>, r: &mut PhaseResult) {
    for (dir, ops) in [
        ("read", &[vssd_trace::Op::Read][..]),
        ("write", &[vssd_trace::Op::Write][..]),
    ] {
        let key = format!("{dir}_bw");
        let guest_bw = pt.guest.get(&key).copied().unwrap_or(0.0);
        let recorded: Vec<vssd_trace::Io> = pt
            .records
            .iter()
            .filter_map(vt::Record::io)
            .filter(|io| ops.contains(&io.op))
            .collect();
        let bytes: u64 = recorded.iter().map(|io| io.len).sum();
        let a = pt
            .records
            .iter()
            .filter(|rec| rec.io().is_some_and(|io| ops.contains(&io.op)))
            .map(|rec| rec.taken_ns)
            .min();
        let d = pt
            .records
            .iter()
            .filter(|rec| rec.io().is_some_and(|io| ops.contains(&io.op)))
            .map(|rec| rec.delivered_ns)
            .max();
        let dir_of = |k: ReplayKind| match k {
            ReplayKind::Io(vssd_sim::Dir::Read) => Some("read"),
            ReplayKind::Io(vssd_sim::Dir::Write) | ReplayKind::WriteZeroes(_) => Some("write"),
            _ => None,
        };
        let mut span = (u64::MAX, 0u64);
        for (e, &(issue, end)) in rp.entries.iter().zip(rp.done) {
            if dir_of(e.kind) == Some(dir) {
                span = (span.0.min(issue), span.1.max(end));
            }
        }
        if let (Some(a), Some(d)) = (a, d)
            && guest_bw > 0.0
            && d > a
            && span.1 > span.0
            && bytes > 0
        {
            let own_s = (bytes as f64 / guest_bw - (d - a) as f64 / 1e9).max(0.0);
            let replayed = (span.1 - span.0) as f64 / 1e9 + own_s;
            r.metrics.insert(key, bytes as f64 / replayed);
        }
    }
}

/// Most requests in flight at once in `records` (arrival to delivery).
fn max_in_flight(records: &[vt::Record]) -> u32 {
    let mut ends: std::collections::BinaryHeap<std::cmp::Reverse<u64>> =
        std::collections::BinaryHeap::new();
    let mut most = 0;
    for r in records {
        while ends.peek().is_some_and(|e| e.0 <= r.taken_ns) {
            ends.pop();
        }
        ends.push(std::cmp::Reverse(r.delivered_ns));
        most = most.max(ends.len());
    }
    most as u32
}
