//! A scenario in the simulator: the same phases against the model in
//! virtual time, fio job files unchanged. With the idle gaps a guest run
//! measured between its phases replayed, the two compare like for like.

use std::collections::BTreeMap;

use super::BenchError;
use super::metrics;
use super::results::{BenchResults, DriveSample, Environment, Mode, PhaseResult};
use super::scenario::{PhaseKind, Scenario, TrimMethod, job_for_sim};
use super::surface;
use vssd_device::TrimOutcome;
use vssd_device::report::TrimReport;
use vssd_guest::bus::Bus;
use vssd_model::{Op, Payload, PreconditionRun, Request};
use vssd_sim::Simulation;
use vssd_sim::engine::ReplayKind;
use vssd_trace::vssd as vt;

/// Largest TRIM range the guest's block layer sends on `bus`: ATA ranges
/// hold 65535 sectors (QEMU passes each range on), virtio-blk's limit is
/// 1 GiB per segment, NVMe's 4 GiB.
pub fn trim_range(bus: Bus) -> u64 {
    match bus {
        Bus::Sata => 65535 * 512,
        Bus::Virtio => 1 << 30,
        Bus::Nvme => 4 << 30,
    }
}

/// The most requests QEMU's NBD client keeps in flight on one connection
/// (`MAX_NBD_REQUESTS` in QEMU's block/nbd.c), whatever the guest's AHCI
/// or NVMe queue depth: the deepest queue a drive on those buses sees.
pub const NBD_CLIENT_MAX_REQUESTS: u32 = 16;

/// The deepest queue the drive sees from `bus`, if the bus caps it.
pub fn bus_depth_cap(bus: Bus) -> Option<u32> {
    match bus {
        Bus::Virtio => None,
        Bus::Sata | Bus::Nvme => Some(NBD_CLIENT_MAX_REQUESTS),
    }
}

/// Cap each job's depth so that its instances together keep no more in
/// flight than `bus` lets reach the drive; the depth the drive then sees
/// (summed over the jobs), if any job was capped.
pub fn cap_depth(jobs: &mut vssd_sim::jobfile::JobFile, bus: Bus) -> Option<u32> {
    let cap = bus_depth_cap(bus)?;
    let mut capped = None;
    for j in &mut jobs.jobs {
        let n = j.numjobs.max(1);
        let most = (cap / n).max(1);
        if j.iodepth > most {
            j.iodepth = most;
            capped = Some(capped.unwrap_or(0u32).max(most * n));
        }
    }
    capped
}

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
    let mut phases: Vec<PhaseResult> = Vec::new();
    let mut samples = Vec::new();
    let start = sim.now_ns();
    // The counters of the previous sample: each sample's WAF covers the
    // interval since it.
    let mut prev = sim.ssd().counters();
    for (i, p) in sc.phases.iter().enumerate() {
        progress(i, &p.name);
        let gap = replay.and_then(|r| r.gaps.get(i).copied()).unwrap_or(0.0);
        if gap > 0.0 {
            sim.idle((gap * 1e9) as u64);
        }
        let before = sim.ssd().counters();
        let t0 = sim.now_ns();
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
            counters_before: Some(before.clone()),
            counters_after: None,
            trace_ns: None,
        };
        let model_err =
            |e: vssd_model::ModelError| BenchError::Sim(format!("phase {}: {e}", p.name));
        let traced = replay.and_then(|r| r.trace.get(i)).and_then(Option::as_ref);
        if let Some(pt) = traced {
            replay_phase(&mut sim, sc, &p.name, &p.kind, pt, &mut r)?;
            for (t, c) in sim.take_samples() {
                samples.push(sample(i, (t - start) as f64 / 1e9, &prev, &c));
                prev = c;
            }
        }
        match &p.kind {
            _ if traced.is_some() => {}
            PhaseKind::SecureErase => sim.ssd_mut().secure_erase(),
            PhaseKind::Precondition { steps } => {
                let steps = vssd_ctl::protocol::model_steps(steps, sc.capacity)
                    .map_err(|e| BenchError::Sim(format!("phase {}: {e}", p.name)))?;
                let now = sim.now_ns();
                let mut run = PreconditionRun::new(sim.ssd(), now, &steps, seed);
                // In chunks, to sample the drive on the way (the result
                // does not depend on where chunks end).
                let mut next = (now / SAMPLE_NS + 1) * SAMPLE_NS;
                let pr = loop {
                    let pr = run.advance(sim.ssd_mut(), 1 << 16).map_err(model_err)?;
                    if pr.finished {
                        break pr;
                    }
                    if pr.model_now_ns >= next {
                        let c = sim.ssd().counters();
                        samples.push(sample(i, (pr.model_now_ns - start) as f64 / 1e9, &prev, &c));
                        prev = c;
                        next = (pr.model_now_ns / SAMPLE_NS + 1) * SAMPLE_NS;
                    }
                };
                sim.idle(pr.model_now_ns.saturating_sub(now));
            }
            PhaseKind::Fio { origin, text } => {
                let mut text = with_bw_log(&job_for_sim(text));
                if let Some(iops) = replay.and_then(|r| r.pacing.get(i).copied().flatten()) {
                    let parsed = vssd_sim::jobfile::parse(&text, origin)
                        .map_err(|e| BenchError::Sim(e.to_string()))?;
                    let instances: u64 = parsed
                        .jobs
                        .iter()
                        .map(|j| u64::from(j.numjobs.max(1)))
                        .sum();
                    let per_job = (iops / instances.max(1) as f64).round().max(1.0) as u64;
                    text = format!("[global]\nrate_iops={per_job}\n{text}");
                    r.metrics
                        .insert("paced_iops".into(), (per_job * instances.max(1)) as f64);
                }
                let mut jobs = vssd_sim::jobfile::parse(&text, origin)
                    .map_err(|e| BenchError::Sim(e.to_string()))?;
                // The guest's requests reach a SATA or NVMe drive through
                // QEMU's NBD client, at most 16 at a time: the simulator
                // runs the drive at the depth the guest's drive saw.
                if let Some(qd) = cap_depth(&mut jobs, sc.bus) {
                    r.metrics.insert("bus_capped_qd".into(), f64::from(qd));
                }
                let report = sim
                    .run_file(&jobs, &mut |_| {})
                    .map_err(|e| BenchError::Sim(format!("phase {}: {e}", p.name)))?;
                for (t, c) in sim.take_samples() {
                    samples.push(sample(i, (t - start) as f64 / 1e9, &prev, &c));
                    prev = c;
                }
                let v: serde_json::Value =
                    serde_json::from_str(&vssd_sim::report::json(&report)).unwrap_or_default();
                metrics::fio(&v, &mut r.metrics);
                r.metrics
                    .insert("drive_qd".into(), metrics::fio_queue_depth(&v));
                r.series = Some(series_of(&report));
                r.fio = Some(v);
            }
            PhaseKind::Trim {
                method,
                offset,
                length,
                ..
            } => {
                let cap = sc.capacity;
                let (off, len) = match method {
                    TrimMethod::Blkdiscard if *length > 0 => (*offset, *length),
                    TrimMethod::Blkdiscard => (*offset, cap - offset),
                    // mkfs discards the whole device first; a fresh
                    // filesystem's fstrim trims (nearly) all of it too.
                    TrimMethod::Mkfs | TrimMethod::Fstrim => (0, cap),
                };
                let mut audit = TrimReport::default();
                let mut outcome = TrimOutcome::default();
                let step = trim_range(sc.bus);
                let mut now = sim.now_ns();
                let mut next = (now / SAMPLE_NS + 1) * SAMPLE_NS;
                let mut at = off;
                while at < off + len {
                    if now >= next {
                        let c = sim.ssd().counters();
                        samples.push(sample(i, (now - start) as f64 / 1e9, &prev, &c));
                        prev = c;
                        next = (now / SAMPLE_NS + 1) * SAMPLE_NS;
                    }
                    let n = step.min(off + len - at);
                    outcome.add_range(sim.ssd(), at, n);
                    audit.discard_cmds += 1;
                    audit.requested_bytes += n;
                    let c = sim
                        .ssd_mut()
                        .submit(
                            now,
                            &Request {
                                op: Op::Trim,
                                offset: at,
                                len: n,
                                payload: Payload::Unknown,
                            },
                        )
                        .map_err(model_err)?;
                    now = now.max(c.done_ns);
                    at += n;
                }
                finish_trim(&mut sim, now, audit, outcome, &mut r);
            }
            PhaseKind::Surface {
                op,
                block,
                burst,
                positions,
                depth,
            } => {
                let pass = surface::Pass {
                    op: *op,
                    block: *block,
                    burst: *burst,
                    positions: *positions,
                    depth: *depth,
                };
                let starts = replay
                    .and_then(|r| r.bursts.get(i))
                    .and_then(Option::as_deref);
                let (s, qd) = surface::run_model_qd(&mut sim, &pass, starts)
                    .map_err(|e| BenchError::Sim(format!("phase {}: {e}", p.name)))?;
                metrics::surface(&s, &mut r.metrics);
                // Requests in the drive during the bursts (at most `depth`).
                r.metrics.insert("drive_qd".into(), qd);
                r.surface = Some(s);
            }
            PhaseKind::Idle { seconds } => sim.idle((seconds * 1e9) as u64),
            // The model has no data to lose and no filesystem: faults,
            // power cuts and the files and fsck phases leave it as it is
            // (their metrics are a guest run's; see `evaluate`).
            PhaseKind::Expect { .. }
            | PhaseKind::Fault { .. }
            | PhaseKind::PowerCut { .. }
            | PhaseKind::PowerOn
            | PhaseKind::Files { .. }
            | PhaseKind::Fsck { .. } => {}
        }
        r.model_s = (sim.now_ns() - t0) as f64 / 1e9;
        r.wall_s = r.model_s;
        let after = sim.ssd().counters();
        samples.push(sample(
            i,
            (sim.now_ns() - start) as f64 / 1e9,
            &prev,
            &after,
        ));
        prev = after.clone();
        r.counters_after = Some(after);
        metrics::drive(&mut r);
        phases.push(r);
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
        samples,
        expects: Vec::new(),
        tolerance: sc.tolerance,
        comparison: Vec::new(),
        sim: None,
        incomplete: None,
        time_scale: 1.0,
        time_scale_reason: None,
    })
}

/// Replay phase `name` from the daemon's trace: the recorded requests at
/// their recorded times (open loop; at most as many in flight as the
/// guest had), then idle to the end of the phase's window. The phase's
/// figures come from the replayed completions, computed as the guest's
/// tools compute theirs.
fn replay_phase(
    sim: &mut Simulation,
    sc: &Scenario,
    name: &str,
    kind: &PhaseKind,
    pt: &PhaseTrace,
    r: &mut PhaseResult,
) -> Result<(), BenchError> {
    let err = |e: String| BenchError::Sim(format!("phase {name}: replaying the trace: {e}"));
    let t0 = sim.now_ns();
    r.metrics
        .insert("replayed_requests".into(), pt.records.len() as f64);
    if matches!(kind, PhaseKind::Trim { .. }) {
        // The guest's discards, one after another at their arrival times.
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
                .map_err(|e| err(e.to_string()))?;
            now = now.max(c.done_ns);
        }
        finish_trim(sim, now, audit, outcome, r);
    } else {
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
            return Err(err("the trace holds no request of this phase".into()));
        }
        let lead = trace.ios().next().and_then(|i| i.t_ns).unwrap_or(0);
        let resolved = vssd_sim::engine::resolve_replay(
            name,
            vssd_trace::Format::Vssd,
            &trace,
            &Default::default(),
            sc.capacity,
        )
        .map_err(err)?;
        let entries = resolved.entries.clone();
        let depth = max_in_flight(&pt.records).max(1);
        sim.idle(lead);
        let report = sim
            .run_replay(name, resolved, depth)
            .map_err(|e| err(e.to_string()))?;
        let done = report
            .jobs
            .first()
            .map(|j| j.completions.as_slice())
            .unwrap_or(&[]);
        let v: serde_json::Value =
            serde_json::from_str(&vssd_sim::report::json(&report)).unwrap_or_default();
        match kind {
            PhaseKind::Surface { .. } => {
                let Some(mut s) = pt.surface.clone() else {
                    return Err(err("the guest's surface measurement is missing".into()));
                };
                let mut busy_ns = 0.0;
                let mut in_drive_ns = 0.0;
                for q in &mut s.points {
                    let (lo, hi) = (q.offset, q.offset + s.burst);
                    let in_burst = |off: u64, len: u64| len > 0 && off >= lo && off < hi;
                    // The replayed drive's part of the burst: its first
                    // issue to its last completion.
                    let mut first = u64::MAX;
                    let mut last = 0;
                    let mut bytes = 0;
                    for (e, &(issue, end)) in entries.iter().zip(done) {
                        if in_burst(e.offset, e.len) {
                            first = first.min(issue);
                            last = last.max(end);
                            bytes += e.len;
                            in_drive_ns += (end - issue) as f64;
                        }
                    }
                    // The guest's own part, from the recording: its
                    // measured burst time minus the span from the first
                    // request's arrival to the last one's delivery (its
                    // timer starting before the first request and stopping
                    // after the last completion), added to the replayed
                    // span so both figures time the same thing.
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
            }
            _ => {
                metrics::fio(&v, &mut r.metrics);
                // As for surfaces: the guest's own time at the job's ends
                // (fio starting its clock before the first request and
                // stopping it after the last completion) is added to the
                // replayed drive's span, so both bandwidths time the same.
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
                        ReplayKind::Io(vssd_sim::Dir::Write) | ReplayKind::WriteZeroes(_) => {
                            Some("write")
                        }
                        _ => None,
                    };
                    let mut span = (u64::MAX, 0u64);
                    for (e, &(issue, end)) in entries.iter().zip(done) {
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
                r.metrics
                    .insert("drive_qd".into(), metrics::fio_queue_depth(&v));
                r.series = Some(series_of(&report));
                r.fio = Some(v);
            }
        }
    }
    // The rest of the phase's window: the guest's tool ending, idle.
    let spent = sim.now_ns() - t0;
    if pt.window_ns > spent {
        sim.idle(pt.window_ns - spent);
    }
    Ok(())
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

fn series_of(report: &vssd_sim::RunReport) -> super::results::Series {
    use vssd_sim::Dir;
    let mut read: BTreeMap<u64, f64> = BTreeMap::new();
    let mut write: BTreeMap<u64, f64> = BTreeMap::new();
    let base = report.start_ns;
    for j in &report.jobs {
        let offset_ms = j.start_ns.saturating_sub(base) / 1_000_000;
        for s in &j.bw_log {
            let slot = (offset_ms + s.msec).saturating_sub(1) / 1000;
            let b = s.kib_s as f64 * 1024.0;
            match s.dir {
                Dir::Read => *read.entry(slot).or_default() += b,
                Dir::Write => *write.entry(slot).or_default() += b,
                _ => {}
            }
        }
    }
    let to_vec = |m: &BTreeMap<u64, f64>| -> Vec<f64> {
        let n = m.keys().max().map(|k| k + 1).unwrap_or(0);
        (0..n).map(|i| m.get(&i).copied().unwrap_or(0.0)).collect()
    };
    super::results::Series {
        interval_s: 1.0,
        read_bytes_s: to_vec(&read),
        write_bytes_s: to_vec(&write),
    }
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

#[cfg(test)]
mod depth_tests {
    use super::*;

    #[test]
    fn nbd_buses_cap_the_simulated_depth_at_what_qemu_passes_on() {
        let text = "[a]\nrw=randwrite\nbs=4k\niodepth=32\nsize=1m\n\
                    [b]\nrw=randread\nbs=4k\niodepth=8\nnumjobs=4\nsize=1m\nstonewall\n\
                    [c]\nrw=read\nbs=128k\niodepth=4\nsize=1m\nstonewall\n";
        let parse = || vssd_sim::jobfile::parse(text, "t").unwrap();
        let mut j = parse();
        assert_eq!(cap_depth(&mut j, Bus::Virtio), None);
        assert_eq!(j, parse());
        for bus in [Bus::Sata, Bus::Nvme] {
            let mut j = parse();
            assert_eq!(cap_depth(&mut j, bus), Some(16));
            let depths: Vec<u32> = j.jobs.iter().map(|j| j.iodepth).collect();
            // 32 → 16; 4 instances of 8 → 4 each; 4 stays.
            assert_eq!(depths, [16, 4, 4]);
        }
        let mut shallow =
            vssd_sim::jobfile::parse("[c]\nrw=read\niodepth=16\nsize=1m\n", "t").unwrap();
        assert_eq!(cap_depth(&mut shallow, Bus::Sata), None);
    }
}
