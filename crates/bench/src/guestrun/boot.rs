//! One boot of the test guest for consecutive guest-side phases: the
//! script runs them, the host follows each phase's start and end on the
//! console (snapshotting the drive, sending the phase's faults), stops the
//! machine when the drive's power goes, and then turns what the guest
//! printed into each phase's result.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use super::phase_metrics::{fault_metrics, fsck_metrics};
use super::script::{bad_files, guest_metrics, script};
use super::{Run, Snap, snap};
use crate::BenchError;
use crate::dilation;
use crate::metrics;
use crate::results::{PhaseResult, Surface};
use crate::scenario::{FaultAction, PhaseKind};
use vssd_ctl::protocol::{CtlRequest, FaultReport};
use vssd_guest::serve::ServeProcess;
use vssd_guest::{Guest, GuestRun, console_files};

/// What the host saw of a boot's phases while the guest ran them.
#[derive(Default)]
struct Marks {
    /// The drive at each phase's start (`true`) and end (`false`).
    snaps: BTreeMap<(usize, bool), Snap>,
    /// The guest's clock (uptime, s) at each phase's start and end.
    times: BTreeMap<(usize, bool), f64>,
    /// The fault registry at the end of each fault and power-cut phase.
    reports: BTreeMap<usize, FaultReport>,
    /// A control request that failed.
    failed: Option<String>,
}

/// What the guest printed: its tools' output files and its `@@METRIC`s.
struct Printed<'a> {
    /// The script's whole output.
    output: &'a str,
    /// Path → contents.
    files: BTreeMap<String, String>,
    /// (phase, name) → value.
    metrics: BTreeMap<(usize, String), f64>,
}

impl Run<'_> {
    /// Guest-side phases `seg` in one boot. Why the run stops, if it does.
    pub(super) fn boot(&mut self, seg: Range<usize>) -> Result<Option<String>, BenchError> {
        let mut marks = Marks::default();
        // When the drive's power goes, the machine goes with it: the boot
        // ends there (a guest would otherwise wait on a disk that is gone).
        let watch = self
            .sc
            .phases
            .iter()
            .any(|p| matches!(p.kind, PhaseKind::PowerCut { .. }))
            .then(|| PowerWatch::start(self.serve));
        self.progress.booting(seg.start, seg.end.saturating_sub(1));
        let never = Arc::new(AtomicBool::new(false));
        let power_lost = watch.as_ref().map_or(never, |w| w.lost.clone());
        let run = Guest::new()
            .accel(self.accel)
            .disk(self.serve.disk())
            .cancel_on(self.o.cancel.clone())
            .power_loss_on(power_lost)
            .run_script_streaming(
                &script(self.sc, seg.clone(), &self.exe, self.o.time_scale.factor()),
                self.o.timeout,
                |line| self.on_line(line, &mut marks),
            );
        if let Some(w) = watch {
            w.stop();
        }
        let run = match run {
            Ok(r) => r,
            Err(e) => {
                return Ok(Some(if self.o.cancel.load(Ordering::SeqCst) {
                    "interrupted".into()
                } else {
                    format!("guest: {e}")
                }));
            }
        };
        let mut incomplete = marks.failed.take().map(|e| format!("control socket: {e}"));
        let printed = Printed {
            output: &run.output,
            files: console_files::read(&run.output),
            metrics: guest_metrics(&run.output),
        };
        // The power took the machine down: the phase it was in ends there.
        let lost_at = if run.powered_off {
            Some(snap(self.serve)?)
        } else {
            None
        };
        for i in seg {
            if !self.boot_phase(i, &marks, &printed, lost_at.as_ref()) {
                return Ok(Some(incomplete.unwrap_or_else(|| {
                    format!(
                        "phase {} did not finish (guest exit {}):\n{}",
                        self.sc.phases[i].name,
                        run.exit_code,
                        crate::tail(&run.output, 30)
                    )
                })));
            }
        }
        if run.exit_code != 0 && !run.powered_off {
            incomplete.get_or_insert_with(|| failed_script(&run));
        }
        Ok(incomplete)
    }

    /// A line of the guest's output as it appears: at a phase's start or
    /// end, snapshot the drive, note the guest's clock, and do what the
    /// phase asks of the host there.
    fn on_line(&self, line: &str, marks: &mut Marks) {
        let (begin, rest) = if let Some(r) = line.strip_prefix("@@PHASE-BEGIN ") {
            (true, r)
        } else if let Some(r) = line.strip_prefix("@@PHASE-END ") {
            (false, r)
        } else {
            return;
        };
        let mut it = rest.split_whitespace();
        let (Some(Ok(i)), Some(Ok(up))) = (
            it.next().map(str::parse::<usize>),
            it.next().map(str::parse::<f64>),
        ) else {
            return;
        };
        match snap(self.serve) {
            Ok(s) => {
                marks.snaps.insert((i, begin), s);
            }
            Err(e) => marks.failed = Some(e.to_string()),
        }
        marks.times.insert((i, begin), up);
        let Some(p) = self.sc.phases.get(i) else {
            return;
        };
        // Dilated idle: the guest sleeps the phase's seconds of wall time
        // (seconds / K of the drive's); the rest of the drive's idle time
        // passes at once.
        if let (true, PhaseKind::Idle { seconds }) = (begin, &p.kind)
            && let Some(ns) = dilation::idle_fast_forward_ns(*seconds, self.o.time_scale)
            && let Err(e) = self.serve.idle(ns)
        {
            marks.failed = Some(e.to_string());
        }
        let sent = match (begin, &p.kind) {
            (true, PhaseKind::Fault { action }) => match action {
                FaultAction::Add(spec) => self.serve.fault_add(spec.clone()),
                FaultAction::Clear(id) => self.serve.fault_clear(*id),
            },
            (true, PhaseKind::PowerCut { trigger }) => self.serve.power_cut(*trigger),
            (false, PhaseKind::Fault { .. } | PhaseKind::PowerCut { .. }) => {
                self.serve.faults().map(|f| {
                    marks.reports.insert(i, f);
                })
            }
            _ => Ok(()),
        };
        if let Err(e) = sent {
            marks.failed = Some(format!("phase {}: {e}", p.name));
        }
        if begin {
            self.begin(i);
        } else {
            self.progress.done(i);
        }
    }

    /// Phase `i` of a finished boot, from what the host saw and the guest
    /// printed; `lost_at`: the drive when the power took the machine down.
    /// False if the phase did not finish (the run stops there).
    fn boot_phase(
        &mut self,
        i: usize,
        marks: &Marks,
        printed: &Printed<'_>,
        lost_at: Option<&Snap>,
    ) -> bool {
        let mut r = self.new_phase(i);
        let began = marks.snaps.get(&(i, true));
        let end = match (marks.snaps.get(&(i, false)), lost_at, began) {
            (Some(e), _, _) => Some(e),
            (None, Some(l), Some(_)) => {
                r.metrics.insert("power_lost".into(), 1.0);
                Some(l)
            }
            _ => None,
        };
        if lost_at.is_some() && began.is_none() {
            // Never started: the machine was off.
            r.metrics.insert("not_run".into(), 1.0);
            self.progress.end(i, &r);
            self.phases.push(r);
            return true;
        }
        let (Some(b), Some(e)) = (began, end) else {
            return false;
        };
        // Duration by the guest's clock (no console latency in it).
        r.wall_s = match (marks.times.get(&(i, true)), marks.times.get(&(i, false))) {
            (Some(t0), Some(t1)) => t1 - t0,
            _ => e.at.duration_since(b.at).as_secs_f64(),
        };
        r.gap_before_s = self
            .last_end
            .map_or(0.0, |t| b.at.saturating_duration_since(t).as_secs_f64());
        self.last_end = Some(e.at);
        r.counters_before = Some(b.counters.clone());
        r.counters_after = Some(e.counters.clone());
        r.trace_ns = b.trace_ns.zip(e.trace_ns).map(|(x, y)| [x, y]);
        self.measured(i, &mut r, b, e, marks, printed);
        // Everything measured on the wall clock, in the drive's time.
        dilation::phase_to_drive_time(&mut r, self.o.time_scale);
        if let PhaseKind::Idle { seconds } = &self.sc.phases[i].kind
            && let Some(ns) = dilation::idle_fast_forward_ns(*seconds, self.o.time_scale)
        {
            // The drive idled that much more than the guest slept.
            r.model_s += ns as f64 / 1e9;
        }
        if let Some(qd) = drive_qd(&r, b, e) {
            r.metrics.insert("drive_qd".into(), qd);
        }
        drive_side(&mut r, b, e, self.o.time_scale.factor());
        metrics::drive(&mut r);
        self.progress.end(i, &r);
        self.phases.push(r);
        true
    }

    /// The figures of phase `i`'s kind: its tool's output, the TRIM audit,
    /// the fault registry, the files written or checked.
    fn measured(
        &self,
        i: usize,
        r: &mut PhaseResult,
        b: &Snap,
        e: &Snap,
        marks: &Marks,
        printed: &Printed<'_>,
    ) {
        let out = &printed.files;
        match &self.sc.phases[i].kind {
            PhaseKind::Fio { .. } => {
                if let Some(j) = out.get(&format!("/tmp/fio{i}.json")) {
                    let start = j.find('{').unwrap_or(0);
                    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&j[start..]) {
                        metrics::fio(&v, &mut r.metrics);
                        r.fio = Some(v);
                    }
                }
                let logs: Vec<String> = out
                    .iter()
                    .filter(|(k, _)| k.starts_with(&format!("/tmp/bw{i}_bw")))
                    .map(|(_, v)| v.clone())
                    .collect();
                r.series = Some(metrics::series_from_logs(&logs, self.o.time_scale.factor()));
            }
            PhaseKind::Surface { .. } => {
                if let Some(j) = out.get(&format!("/tmp/surface{i}.json"))
                    && let Ok(mut s) = serde_json::from_str::<Surface>(j.trim())
                {
                    // The program's start-up before its first burst: idle
                    // time for the drive, which the simulator replays.
                    // Both clocks are the guest's boot clock.
                    s.lead_s = match (marks.times.get(&(i, true)), s.started_uptime_s) {
                        (Some(t0), Some(t)) if t >= *t0 => Some(t - t0),
                        _ => None,
                    };
                    metrics::surface(&s, &mut r.metrics);
                    r.surface = Some(s);
                }
            }
            PhaseKind::Trim { .. } => {
                let t = e.trim.since(&b.trim);
                r.metrics
                    .insert("trim_bytes".into(), t.requested_bytes as f64);
                r.metrics.insert("freed_bytes".into(), t.freed_bytes as f64);
                r.metrics.insert(
                    "trim_cmds".into(),
                    (t.discard_cmds + t.write_zeroes_cmds) as f64,
                );
                r.trim = Some(t);
            }
            PhaseKind::Fault { .. } | PhaseKind::PowerCut { .. } => {
                if let Some(f) = marks.reports.get(&i) {
                    fault_metrics(&self.sc.phases[i].kind, f, &mut r.metrics);
                }
            }
            PhaseKind::Files { .. } => {
                if let Some(n) = printed.metrics.get(&(i, "files_written".to_string())) {
                    r.metrics.insert("files_written".into(), *n);
                }
            }
            PhaseKind::Fsck { sets } => {
                let get = |n: &str| printed.metrics.get(&(i, n.to_string())).copied();
                if let (Some(fix), Some(check), Some(replayed), Some(mounted)) = (
                    get("fsck_fix_exit"),
                    get("fsck_check_exit"),
                    get("replayed"),
                    get("mounted"),
                ) {
                    fsck_metrics(
                        sets,
                        &self.phases,
                        self.sc,
                        fix,
                        check,
                        replayed,
                        mounted,
                        &bad_files(printed.output, i),
                        &mut r.metrics,
                    );
                }
            }
            _ => {}
        }
    }
}

/// Little's law: requests in the drive on average over phase `r`, from
/// the daemon's modelled latencies (in the drive's time already) between
/// snapshots `b` and `e` — over a surface pass's bursts, the time the
/// simulator's figure (its depth) stands for; over the whole phase
/// otherwise.
fn drive_qd(r: &PhaseResult, b: &Snap, e: &Snap) -> Option<f64> {
    let busy_s = r
        .surface
        .as_ref()
        .map(|s| {
            s.points
                .iter()
                .filter(|q| q.bytes_s > 0.0)
                .map(|q| s.burst as f64 / q.bytes_s)
                .sum::<f64>()
        })
        .unwrap_or(r.model_s);
    (busy_s > 0.0).then(|| (e.modelled_ns - b.modelled_ns).max(0.0) / (busy_s * 1e9))
}

/// The drive's side of phase `r` between snapshots `b` and `e`: the
/// share of the phase's wall time it had a request of the guest's in
/// flight (`drive_busy`), and the host bytes it moved per second of that
/// busy time, in its own time (`drive_bw`): its speed whatever the
/// guest's pace, since the time the drive waited for the guest is not
/// in it. A busy host that starves the guest leaves the drive idle more
/// (`drive_busy` falls) but does not change what the drive did while it
/// had requests.
fn drive_side(r: &mut PhaseResult, b: &Snap, e: &Snap, k: f64) {
    let busy_s = e.busy_ns.saturating_sub(b.busy_ns) as f64 / 1e9;
    let wall_s = e.at.duration_since(b.at).as_secs_f64();
    let (Some(cb), Some(ce)) = (&r.counters_before, &r.counters_after) else {
        return;
    };
    let bytes = (ce.host_written_bytes + ce.host_read_bytes)
        .saturating_sub(cb.host_written_bytes + cb.host_read_bytes);
    if busy_s <= 0.0 || bytes == 0 || wall_s <= 0.0 {
        return;
    }
    r.metrics
        .insert("drive_busy".into(), (busy_s / wall_s).min(1.0));
    r.metrics
        .insert("drive_bw".into(), bytes as f64 / (busy_s / k.max(1.0)));
}

/// Why a run whose guest script failed stops.
fn failed_script(run: &GuestRun) -> String {
    format!(
        "the guest script failed (exit {}):\n{}",
        run.exit_code,
        crate::tail(&run.output, 30)
    )
}

/// A thread that watches the drive's power during a boot and raises
/// `lost` when it goes.
struct PowerWatch {
    lost: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl PowerWatch {
    fn start(serve: &ServeProcess) -> PowerWatch {
        let lost = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let thread = {
            let (control, lost, done) = (serve.control.clone(), lost.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    let off = vssd_ctl::request(&control, &CtlRequest::FaultList)
                        .ok()
                        .and_then(|v| v["power"]["powered"].as_bool())
                        == Some(false);
                    if off {
                        lost.store(true, Ordering::SeqCst);
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        PowerWatch { lost, done, thread }
    }

    fn stop(self) {
        self.done.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}
