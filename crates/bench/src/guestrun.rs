//! A scenario in a real guest: `vssd serve` for the scenario's bus, the
//! test guest booted once per run of consecutive guest-side phases (real
//! fio, `vssd surface`, blkdiscard / mkfs / fstrim, sleep), host-side
//! phases (secure erase, precondition) through the control socket between
//! boots. The drive is sampled every second; each phase's start and end
//! come back on the console with the guest's clock, so the idle gaps
//! between phases are measured too.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::BenchError;
use super::dilation;
use super::metrics;
use super::progress::Progress;
use super::results::{BenchResults, DriveSample, Environment, Mode, PhaseResult, Surface};
use super::scenario::{DEV_VAR, FS_MOUNT, FaultAction, PhaseKind, Scenario, SurfaceOp, TrimMethod};
use super::simrun::{sample, unix_now};
use vssd_common::clock::TimeScale;
use vssd_ctl::protocol::{CtlRequest, PreconditionResult};
use vssd_device::report::TrimReport;
use vssd_guest::serve::ServeProcess;
use vssd_guest::{Guest, console_files, ensure_image, guest_visible};
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
    pub accel: Option<vssd_guest::Accel>,
    /// Time dilation: `vssd serve --time-scale K`; every figure the guest
    /// measures on the wall clock is converted back to the drive's time.
    pub time_scale: TimeScale,
}

/// The guest script of phases `range`.
fn script(sc: &Scenario, range: std::ops::Range<usize>, exe: &str) -> String {
    let dev = sc.bus.guest_dev();
    let mut s = format!("set -e\nexport {DEV_VAR}={dev}\nup() {{ cut -d' ' -f1 /proc/uptime; }}\n");
    for i in range {
        let p = &sc.phases[i];
        s.push_str(&format!("echo \"@@PHASE-BEGIN {i} $(up)\"\n"));
        match &p.kind {
            PhaseKind::Fio { text, .. } => {
                s.push_str(&format!(
                    "cat > /tmp/job{i}.fio <<'VSSD_BENCH_JOB_END'\n{text}\nVSSD_BENCH_JOB_END\n\
                     fio --output-format=json --write_bw_log=/tmp/bw{i} --log_avg_msec=1000 /tmp/job{i}.fio > /tmp/fio{i}.json\n"
                ));
            }
            PhaseKind::Surface {
                op,
                block,
                burst,
                positions,
                depth,
            } => {
                let op = match op {
                    SurfaceOp::Read => "read",
                    SurfaceOp::Write => "write",
                };
                s.push_str(&format!(
                    "'{exe}' surface --device {dev} --op {op} --block {block} --burst {burst} --positions {positions} --depth {depth} --json > /tmp/surface{i}.json\n"
                ));
            }
            PhaseKind::Trim {
                method,
                fs,
                offset,
                length,
            } => match method {
                TrimMethod::Blkdiscard if *length > 0 => {
                    s.push_str(&format!("blkdiscard -o {offset} -l {length} {dev}\n"))
                }
                TrimMethod::Blkdiscard => s.push_str(&format!("blkdiscard -o {offset} {dev}\n")),
                TrimMethod::Mkfs => s.push_str(&format!("{} >/dev/null\n", fs.mkfs(&dev, true))),
                TrimMethod::Fstrim => s.push_str(&format!(
                    "{} >/dev/null\nmkdir -p /tmp/mnt{i}\nmount {dev} /tmp/mnt{i}\nfstrim -v /tmp/mnt{i}\numount /tmp/mnt{i}\n",
                    fs.mkfs(&dev, false)
                )),
            },
            // The phase's seconds of wall time; in a dilated run the host
            // lets the drive idle the rest of them at once (see
            // `dilation::idle_fast_forward_ns`).
            PhaseKind::Idle { seconds } => s.push_str(&format!("sleep {seconds}\n")),
            // The host sends the request when it reads the phase's start
            // line; the guest gives it a second to land.
            PhaseKind::Fault { .. } | PhaseKind::PowerCut { .. } => s.push_str("sleep 1\n"),
            PhaseKind::Files {
                mkfs,
                mount_options,
                count,
                size,
                fsync,
            } => {
                if *mkfs {
                    s.push_str(&format!(
                        "mountpoint -q {FS_MOUNT} && umount {FS_MOUNT}\nmkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 {dev} >/dev/null\n"
                    ));
                }
                let conv = if *fsync { " conv=fsync" } else { "" };
                // A write that fails (the power went) ends the phase, not
                // the script.
                // The count is printed after each file: if the machine
                // loses its power mid-phase, the last one printed stands.
                s.push_str(&format!(
                    "mkdir -p {FS_MOUNT}\nmountpoint -q {FS_MOUNT} || mount -o {mount_options} {dev} {FS_MOUNT}\n\
                     echo \"@@METRIC {i} files_written 0\"\n\
                     for j in $(seq 1 {count}); do\n  \
                     {pattern} | head -c {size} | dd of={FS_MOUNT}/p{i}-f$j bs=64k iflag=fullblock{conv} 2>/dev/null || break\n  \
                     echo \"@@METRIC {i} files_written $j\"\ndone\n",
                    pattern = file_pattern(i),
                ));
            }
            PhaseKind::Fsck { sets } => {
                // The kernel replays the journal (mount, umount), then a
                // read-only e2fsck judges what the drive kept: only then a
                // repairing pass (if needed) so the files can be read.
                s.push_str(&format!(
                    "mountpoint -q {FS_MOUNT} && umount {FS_MOUNT}\nmkdir -p {FS_MOUNT}\n\
                     if mount {dev} {FS_MOUNT} 2>/dev/null; then umount {FS_MOUNT}; r=1; else r=0; fi\necho \"@@METRIC {i} replayed $r\"\n\
                     e2fsck -fn {dev} >/tmp/fsck{i}.txt 2>&1 && r=0 || r=$?\necho \"@@METRIC {i} fsck_check_exit $r\"\n\
                     if [ $r -ne 0 ]; then e2fsck -fy {dev} >/dev/null 2>&1 && r=0 || r=$?; fi\necho \"@@METRIC {i} fsck_fix_exit $r\"\n\
                     if mount -o ro {dev} {FS_MOUNT}; then\n  echo \"@@METRIC {i} mounted 1\"\n"
                ));
                for set in sets {
                    let (p, count, size) = (set.phase, set.count, set.size);
                    s.push_str(&format!(
                        "  for j in $(seq 1 {count}); do\n    f={FS_MOUNT}/p{p}-f$j\n    \
                         if [ ! -e $f ]; then echo \"@@FSBAD {i} {p} $j missing\"\n    \
                         elif ! {pattern} | head -c {size} | cmp -s - $f; then echo \"@@FSBAD {i} {p} $j damaged\"; fi\n  done\n",
                        pattern = file_pattern(p),
                    ));
                }
                s.push_str(&format!(
                    "  umount {FS_MOUNT}\nelse\n  echo \"@@METRIC {i} mounted 0\"\nfi\n"
                ));
            }
            _ => {}
        }
        s.push_str(&format!("echo \"@@PHASE-END {i} $(up)\"\n"));
    }
    // The results, after the timed part.
    s.push_str(&console_files::print_command(
        "/tmp/fsck*.txt /tmp/fio*.json /tmp/surface*.json /tmp/bw*_bw*.log",
    ));
    s
}

/// The shell pipeline that prints the contents of file `$j` of the
/// `files` phase `phase` (and more: the caller cuts it to size), so the
/// `fsck` phase can tell an intact file from a damaged one without
/// keeping a copy.
fn file_pattern(phase: usize) -> String {
    format!("yes \"vssd bench phase {phase} file $j\"")
}

/// `@@METRIC PHASE NAME VALUE` lines the guest printed: (phase, name) → value.
fn guest_metrics(output: &str) -> BTreeMap<(usize, String), f64> {
    output
        .lines()
        .filter_map(|l| {
            let mut it = l.strip_prefix("@@METRIC ")?.split_whitespace();
            let i = it.next()?.parse().ok()?;
            let name = it.next()?.to_string();
            let v = it.next()?.parse().ok()?;
            Some(((i, name), v))
        })
        .collect()
}

/// Files an `fsck` phase found missing or damaged: `@@FSBAD PHASE SET J WHAT`
/// → (set's phase, file number).
fn bad_files(output: &str, phase: usize) -> Vec<(usize, u32)> {
    output
        .lines()
        .filter_map(|l| {
            let mut it = l.strip_prefix("@@FSBAD ")?.split_whitespace();
            let i: usize = it.next()?.parse().ok()?;
            let p = it.next()?.parse().ok()?;
            let j = it.next()?.parse().ok()?;
            (i == phase).then_some((p, j))
        })
        .collect()
}

/// The metrics of a `fault`, `power-cut` or `power-on` phase from the
/// fault registry and the power audit at its end.
pub(super) fn fault_metrics(
    kind: &PhaseKind,
    f: &vssd_ctl::protocol::FaultReport,
    m: &mut BTreeMap<String, f64>,
) {
    match kind {
        PhaseKind::Fault { .. } => {
            let c = &f.counters;
            m.insert("faults_active".into(), f.active.len() as f64);
            m.insert("read_errors_injected".into(), c.read_errors_injected as f64);
            m.insert(
                "write_errors_injected".into(),
                c.write_errors_injected as f64,
            );
            m.insert(
                "errors_injected".into(),
                (c.read_errors_injected + c.write_errors_injected) as f64,
            );
            m.insert("stalls_injected".into(), c.stalls_injected as f64);
        }
        PhaseKind::PowerCut { .. } | PhaseKind::PowerOn => {
            let p = &f.power;
            // A power-cut phase that armed a cut reports no losses (the
            // latest cut, if any, is an earlier one): its cut goes off
            // later, and the `power-on` after it reports what it lost.
            let cut = p.last_cut.as_ref().filter(|_| {
                !matches!(kind, PhaseKind::PowerCut { trigger } if *trigger != vssd_ctl::protocol::CutTrigger::Now)
            });
            m.insert("armed".into(), f64::from(u8::from(p.armed.is_some())));
            m.insert("powered".into(), f64::from(u8::from(p.powered)));
            m.insert("cuts".into(), p.cuts as f64);
            m.insert(
                "lost_writes".into(),
                cut.map_or(0.0, |c| c.lost.len() as f64),
            );
            m.insert(
                "lost_acked_writes".into(),
                cut.map_or(0.0, |c| {
                    c.lost.iter().filter(|w| w.acknowledged).count() as f64
                }),
            );
            m.insert(
                "lost_bytes".into(),
                cut.map_or(0.0, |c| c.lost_bytes as f64),
            );
            m.insert(
                "protected".into(),
                f64::from(u8::from(p.power_loss_protection)),
            );
            m.insert("pending_writes".into(), p.pending_writes as f64);
        }
        _ => {}
    }
}

/// An `fsck` phase's metrics: whether the filesystem was consistent as the
/// drive kept it (the journal replayed by a mount, then a read-only e2fsck
/// clean: `fsck_clean`), whether a repairing pass had to change something
/// (`fsck_fixed`), and how many of the files the earlier `files` phases
/// wrote (as far as each got before the power went) read back intact.
#[allow(clippy::too_many_arguments)]
fn fsck_metrics(
    sets: &[super::scenario::FileSet],
    done: &[PhaseResult],
    sc: &Scenario,
    fix_exit: f64,
    check_exit: f64,
    replayed: f64,
    mounted: f64,
    bad: &[(usize, u32)],
    m: &mut BTreeMap<String, f64>,
) {
    // The read-only check ran before any repair: exit 0 is clean as kept.
    m.insert("fsck_fixed".into(), f64::from(u8::from(fix_exit != 0.0)));
    m.insert(
        "fsck_clean".into(),
        f64::from(u8::from(
            check_exit == 0.0 && replayed == 1.0 && mounted == 1.0,
        )),
    );
    let (mut checked, mut intact, mut lost, mut synced_lost) = (0u64, 0u64, 0u64, 0u64);
    for set in sets {
        let written = sc
            .phases
            .get(set.phase)
            .and_then(|p| done.iter().find(|r| r.name == p.name))
            .and_then(|r| r.metrics.get("files_written"))
            .map_or(0, |n| *n as u32);
        for j in 1..=written.min(set.count) {
            checked += 1;
            // A filesystem that did not mount lost everything.
            if mounted != 1.0 || bad.contains(&(set.phase, j)) {
                lost += 1;
                if set.fsync {
                    synced_lost += 1;
                }
            } else {
                intact += 1;
            }
        }
    }
    m.insert("files_checked".into(), checked as f64);
    m.insert("files_intact".into(), intact as f64);
    m.insert("files_lost".into(), lost as f64);
    m.insert("synced_files_lost".into(), synced_lost as f64);
}

struct Snap {
    counters: Counters,
    trim: TrimReport,
    /// Sum of modelled latencies of completed requests, ns.
    modelled_ns: f64,
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
    let args = [
        "--profile".to_string(),
        sc.profile_name.clone(),
        "--capacity".to_string(),
        sc.capacity.to_string(),
        "--memory".to_string(),
        "--realtime".to_string(),
        "--time-scale".to_string(),
        o.time_scale.to_string(),
        "--trace".to_string(),
        o.dir.join(TRACE_FILE).display().to_string(),
    ];
    let serve = ServeProcess::start(&o.exe, &o.dir, sc.bus, 2, &args)?;
    let start = Instant::now();

    // The drive, every second.
    let phase_now = Arc::new(AtomicUsize::new(0));
    let samples: Arc<Mutex<Vec<DriveSample>>> = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (control, phase_now, samples, stop) = (
            serve.control.clone(),
            phase_now.clone(),
            samples.clone(),
            stop.clone(),
        );
        let bar = progress.clone();
        std::thread::spawn(move || {
            let mut last: Option<Counters> = None;
            while !stop.load(Ordering::SeqCst) {
                if let Ok(r) = vssd_ctl::stats(&control) {
                    let c = r.counters;
                    let prev = last.clone().unwrap_or_else(|| c.clone());
                    let s = sample(
                        phase_now.load(Ordering::SeqCst),
                        start.elapsed().as_secs_f64(),
                        &prev,
                        &c,
                    );
                    bar.rate(
                        (c.host_written_bytes + c.host_read_bytes)
                            .saturating_sub(prev.host_written_bytes + prev.host_read_bytes)
                            as f64,
                    );
                    samples.lock().unwrap_or_else(|e| e.into_inner()).push(s);
                    last = Some(c);
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };

    let mut phases: Vec<PhaseResult> = Vec::new();
    let mut incomplete = None;
    // When the previous phase ended (host clock): the drive idles until the
    // next one starts (guest boots, tool start-up), and the simulator
    // replays these gaps.
    let mut last_end: Option<Instant> = None;
    // The guest runs this binary (`vssd surface`) from the host's root.
    let (guest_exe, _exe_copy) = guest_visible(&o.exe)?;
    let exe = guest_exe.display().to_string();
    let new_phase = |i: usize| PhaseResult {
        name: sc.phases[i].name.clone(),
        kind: sc.phases[i].kind.name().into(),
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
    };
    'segments: for seg in sc.segments() {
        if o.cancel.load(Ordering::SeqCst) {
            incomplete = Some("interrupted".into());
            break;
        }
        let first = seg.start;
        if sc.phases[first].kind.host_side() {
            let p = &sc.phases[first];
            phase_now.store(first, Ordering::SeqCst);
            progress.begin(
                first,
                &p.name,
                p.kind.name(),
                o.expected_s.get(first).copied(),
                o.expected_bytes.get(first).copied(),
            );
            let before = snap(&serve)?;
            let mut r = new_phase(first);
            let res: Result<(), BenchError> = (|| {
                match &p.kind {
                    PhaseKind::SecureErase => serve.secure_erase()?,
                    PhaseKind::Precondition { steps } => {
                        let mut c =
                            vssd_ctl::Client::connect(&serve.control, Duration::from_secs(60))?;
                        let pr: PreconditionResult = c.call_typed(
                            &CtlRequest::Precondition {
                                steps: steps.clone(),
                                seed: 1,
                                progress: true,
                            },
                            &mut |l| {
                                progress.fraction(
                                    l.progress.done_bytes as f64
                                        / l.progress.total_bytes.max(1) as f64,
                                )
                            },
                        )?;
                        r.model_s = pr.model_time_ns as f64 / 1e9;
                    }
                    PhaseKind::PowerOn => {
                        serve.power_on()?;
                        fault_metrics(&p.kind, &serve.faults()?, &mut r.metrics);
                    }
                    _ => {}
                }
                Ok(())
            })();
            let after = snap(&serve)?;
            r.wall_s = after.at.duration_since(before.at).as_secs_f64();
            r.gap_before_s = last_end.map_or(0.0, |t| before.at.duration_since(t).as_secs_f64());
            last_end = Some(after.at);
            r.counters_before = Some(before.counters);
            r.counters_after = Some(after.counters);
            dilation::phase_to_drive_time(&mut r, o.time_scale);
            metrics::drive(&mut r);
            progress.end(first, &r);
            phases.push(r);
            if let Err(e) = res {
                incomplete = Some(format!("phase {}: {e}", p.name));
                break;
            }
            continue;
        }

        // Guest-side phases: one boot.
        let snaps: Mutex<BTreeMap<(usize, bool), Snap>> = Mutex::new(BTreeMap::new());
        let times: Mutex<BTreeMap<(usize, bool), f64>> = Mutex::new(BTreeMap::new());
        let failed: Mutex<Option<String>> = Mutex::new(None);
        // The fault registry at the end of each fault and power-cut phase.
        let reports: Mutex<BTreeMap<usize, vssd_ctl::protocol::FaultReport>> =
            Mutex::new(BTreeMap::new());
        let on_line = |line: &str| {
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
            match snap(&serve) {
                Ok(s) => {
                    snaps
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert((i, begin), s);
                }
                Err(e) => *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string()),
            }
            times
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert((i, begin), up);
            if let Some(p) = sc.phases.get(i) {
                // Dilated idle: the guest sleeps the phase's seconds of wall
                // time (seconds / K of the drive's); the rest of the drive's
                // idle time passes at once.
                if let (true, PhaseKind::Idle { seconds }) = (begin, &p.kind)
                    && let Some(ns) = dilation::idle_fast_forward_ns(*seconds, o.time_scale)
                    && let Err(e) = serve.idle(ns)
                {
                    *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
                }
                let sent = match (begin, &p.kind) {
                    (true, PhaseKind::Fault { action }) => match action {
                        FaultAction::Add(spec) => serve.fault_add(spec.clone()),
                        FaultAction::Clear(id) => serve.fault_clear(*id),
                    },
                    (true, PhaseKind::PowerCut { trigger }) => serve.power_cut(*trigger),
                    (false, PhaseKind::Fault { .. } | PhaseKind::PowerCut { .. }) => {
                        serve.faults().map(|f| {
                            reports
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .insert(i, f);
                        })
                    }
                    _ => Ok(()),
                };
                if let Err(e) = sent {
                    *failed.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(format!("phase {}: {e}", p.name));
                }
                if begin {
                    phase_now.store(i, Ordering::SeqCst);
                    progress.begin(
                        i,
                        &p.name,
                        p.kind.name(),
                        o.expected_s.get(i).copied(),
                        o.expected_bytes.get(i).copied(),
                    );
                } else {
                    progress.done(i);
                }
            }
        };
        // When the drive's power goes, the machine goes with it: the boot
        // ends there (a guest would otherwise wait on a disk that is gone).
        let power_lost = Arc::new(AtomicBool::new(false));
        let watch_done = Arc::new(AtomicBool::new(false));
        let watcher = sc
            .phases
            .iter()
            .any(|p| matches!(p.kind, PhaseKind::PowerCut { .. }))
            .then(|| {
                let (control, lost, done) = (
                    serve.control.clone(),
                    power_lost.clone(),
                    watch_done.clone(),
                );
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
            });
        let run = Guest::new()
            .accel(accel)
            .disk(serve.disk())
            .cancel_on(o.cancel.clone())
            .power_loss_on(power_lost.clone())
            .run_script_streaming(&script(sc, seg.clone(), &exe), o.timeout, on_line);
        watch_done.store(true, Ordering::SeqCst);
        if let Some(w) = watcher {
            let _ = w.join();
        }
        let run = match run {
            Ok(r) => r,
            Err(e) => {
                incomplete = Some(if o.cancel.load(Ordering::SeqCst) {
                    "interrupted".into()
                } else {
                    format!("guest: {e}")
                });
                break 'segments;
            }
        };
        if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            incomplete = Some(format!("control socket: {e}"));
        }
        let out = console_files::read(&run.output);
        let from_guest = guest_metrics(&run.output);
        let reports = reports.into_inner().unwrap_or_else(|e| e.into_inner());
        let snaps = snaps.into_inner().unwrap_or_else(|e| e.into_inner());
        let times = times.into_inner().unwrap_or_else(|e| e.into_inner());
        // The power took the machine down: the phase it was in ends there.
        let lost_at = if run.powered_off {
            Some(snap(&serve)?)
        } else {
            None
        };
        for i in seg.clone() {
            let mut r = new_phase(i);
            let end = match (snaps.get(&(i, false)), &lost_at, snaps.get(&(i, true))) {
                (Some(e), _, _) => Some(e),
                (None, Some(l), Some(_)) => {
                    r.metrics.insert("power_lost".into(), 1.0);
                    Some(l)
                }
                _ => None,
            };
            if lost_at.is_some() && !snaps.contains_key(&(i, true)) {
                // Never started: the machine was off.
                r.metrics.insert("not_run".into(), 1.0);
                progress.end(i, &r);
                phases.push(r);
                continue;
            }
            let (Some(b), Some(e)) = (snaps.get(&(i, true)), end) else {
                incomplete.get_or_insert_with(|| {
                    format!(
                        "phase {} did not finish (guest exit {}):\n{}",
                        sc.phases[i].name,
                        run.exit_code,
                        super::tail(&run.output, 30)
                    )
                });
                break 'segments;
            };
            // Duration by the guest's clock (no console latency in it).
            r.wall_s = match (times.get(&(i, true)), times.get(&(i, false))) {
                (Some(t0), Some(t1)) => t1 - t0,
                _ => e.at.duration_since(b.at).as_secs_f64(),
            };
            r.gap_before_s =
                last_end.map_or(0.0, |t| b.at.saturating_duration_since(t).as_secs_f64());
            last_end = Some(e.at);
            r.counters_before = Some(b.counters.clone());
            r.counters_after = Some(e.counters.clone());
            r.trace_ns = b.trace_ns.zip(e.trace_ns).map(|(x, y)| [x, y]);
            match &sc.phases[i].kind {
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
                    r.series = Some(metrics::series_from_logs(&logs, 1000));
                }
                PhaseKind::Surface { .. } => {
                    if let Some(j) = out.get(&format!("/tmp/surface{i}.json"))
                        && let Ok(mut s) = serde_json::from_str::<Surface>(j.trim())
                    {
                        // The program's start-up before its first burst:
                        // idle time for the drive, which the simulator
                        // replays. Both clocks are the guest's boot clock.
                        s.lead_s = match (times.get(&(i, true)), s.started_uptime_s) {
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
                    if let Some(f) = reports.get(&i) {
                        fault_metrics(&sc.phases[i].kind, f, &mut r.metrics);
                    }
                }
                PhaseKind::Files { .. } => {
                    if let Some(n) = from_guest.get(&(i, "files_written".to_string())) {
                        r.metrics.insert("files_written".into(), *n);
                    }
                }
                PhaseKind::Fsck { sets } => {
                    let get = |n: &str| from_guest.get(&(i, n.to_string())).copied();
                    if let (Some(fix), Some(check), Some(replayed), Some(mounted)) = (
                        get("fsck_fix_exit"),
                        get("fsck_check_exit"),
                        get("replayed"),
                        get("mounted"),
                    ) {
                        fsck_metrics(
                            sets,
                            &phases,
                            sc,
                            fix,
                            check,
                            replayed,
                            mounted,
                            &bad_files(&run.output, i),
                            &mut r.metrics,
                        );
                    }
                }
                _ => {}
            }
            // Everything measured on the wall clock, in the drive's time.
            dilation::phase_to_drive_time(&mut r, o.time_scale);
            if let PhaseKind::Idle { seconds } = &sc.phases[i].kind
                && let Some(ns) = dilation::idle_fast_forward_ns(*seconds, o.time_scale)
            {
                // The drive idled that much more than the guest slept.
                r.wall_s += ns as f64 / 1e9;
            }
            // Little's law: requests in the drive on average (the daemon's
            // modelled latencies are in the drive's time already) — over
            // a surface pass's bursts, the time the simulator's figure
            // (its depth) stands for; over the whole phase otherwise.
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
                .unwrap_or(r.wall_s);
            if busy_s > 0.0 {
                r.metrics.insert(
                    "drive_qd".into(),
                    (e.modelled_ns - b.modelled_ns).max(0.0) / (busy_s * 1e9),
                );
            }
            metrics::drive(&mut r);
            progress.end(i, &r);
            phases.push(r);
        }
        if run.exit_code != 0 && !run.powered_off {
            incomplete.get_or_insert_with(|| {
                format!(
                    "the guest script failed (exit {}):\n{}",
                    run.exit_code,
                    super::tail(&run.output, 30)
                )
            });
            break;
        }
        if incomplete.is_some() {
            break;
        }
    }
    stop.store(true, Ordering::SeqCst);
    let _ = sampler.join();
    drop(serve);
    let mut samples = Arc::try_unwrap(samples)
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .unwrap_or_default();
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
    })
}
