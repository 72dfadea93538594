use super::state::JobState;
use super::*;
use crate::jobfile::parse;
use vssd_model::{Completion, Counters};

/// A stand-in drive: one server, fixed service time per request, or
/// fully parallel when `serial` is false. Records every request.
pub(super) struct Mock {
    cap: u64,
    lat: u64,
    serial: bool,
    busy_until: u64,
    pub(super) log: Vec<(u64, u64, Request)>,
}

impl Mock {
    pub(super) fn new(cap: u64, lat: u64, serial: bool) -> Mock {
        Mock {
            cap,
            lat,
            serial,
            busy_until: 0,
            log: Vec::new(),
        }
    }

    /// Most requests in flight at once.
    pub(super) fn max_in_flight(&self) -> usize {
        let mut ev: Vec<(u64, i32)> = Vec::new();
        for &(s, d, _) in &self.log {
            ev.push((s, 1));
            ev.push((d, -1));
        }
        ev.sort();
        let (mut cur, mut max) = (0i32, 0i32);
        for (_, x) in ev {
            cur += x;
            max = max.max(cur);
        }
        max as usize
    }
}

impl Target for Mock {
    fn capacity(&self) -> u64 {
        self.cap
    }
    fn submit(&mut self, now: u64, req: &Request) -> Result<Completion, ModelError> {
        if req.offset + req.len > self.cap {
            return Err(ModelError::OutOfRange {
                offset: req.offset,
                len: req.len,
                capacity: self.cap,
            });
        }
        let done = if self.serial {
            self.busy_until = self.busy_until.max(now) + self.lat;
            self.busy_until
        } else {
            now + self.lat
        };
        self.log.push((now, done, *req));
        Ok(Completion {
            submit_ns: now,
            done_ns: done,
        })
    }
}

const MIB: u64 = 1 << 20;

fn run(m: &mut Mock, text: &str) -> Vec<JobReport> {
    let jf = parse(text, "t.fio").unwrap();
    run_jobs(m, &jf.jobs, 1, 0, &mut |_| {}).unwrap().0
}

#[test]
fn keeps_iodepth_outstanding() {
    let mut m = Mock::new(64 * MIB, 100_000, false);
    let r = run(&mut m, "[j]\nrw=read\nbs=4k\nsize=1m\niodepth=4\n");
    assert_eq!(m.log.len(), 256);
    assert_eq!(m.max_in_flight(), 4);
    assert_eq!(r[0].runtime_ns(), 64 * 100_000);
    assert_eq!(r[0].dir[0].ios, 256);
    assert_eq!(r[0].dir[0].io_bytes, MIB);
    assert!((r[0].bw_bytes(Dir::Read) - MIB as f64 / 0.0064).abs() < 1.0);
    assert_eq!(r[0].dir[0].clat.mean(), 100_000.0);
}

#[test]
fn sequential_offsets_and_region() {
    let mut m = Mock::new(64 * MIB, 1000, false);
    run(&mut m, "[j]\nrw=write\nbs=128k\nsize=1m\noffset=1m\n");
    let offs: Vec<u64> = m.log.iter().map(|l| l.2.offset).collect();
    let want: Vec<u64> = (0..8).map(|i| MIB + i * 131072).collect();
    assert_eq!(offs, want);
    assert!(
        m.log
            .iter()
            .all(|l| l.2.op == Op::Write && l.2.len == 131072)
    );
}

#[test]
fn random_map_covers_each_block_once() {
    let mut m = Mock::new(64 * MIB, 1000, false);
    run(
        &mut m,
        "[j]\nrw=randwrite\nbs=4k\nsize=1m\noffset=2m\niodepth=8\n",
    );
    let mut offs: Vec<u64> = m.log.iter().map(|l| l.2.offset).collect();
    assert_eq!(offs.len(), 256);
    let sequential = offs.windows(2).filter(|w| w[1] == w[0] + 4096).count();
    assert!(sequential < 20, "{sequential} sequential pairs");
    offs.sort_unstable();
    let want: Vec<u64> = (0..256).map(|i| 2 * MIB + i * 4096).collect();
    assert_eq!(offs, want);

    let mut m = Mock::new(64 * MIB, 1000, false);
    run(&mut m, "[j]\nrw=randwrite\nbs=4k\nsize=1m\nnorandommap\n");
    let mut offs: Vec<u64> = m.log.iter().map(|l| l.2.offset).collect();
    offs.sort_unstable();
    offs.dedup();
    // 256 draws from 256 blocks: about 1 - 1/e of them distinct.
    assert!((130..200).contains(&offs.len()), "{}", offs.len());
}

#[test]
fn io_size_loops_and_number_ios_stops() {
    let mut m = Mock::new(64 * MIB, 1000, false);
    run(&mut m, "[j]\nrw=write\nbs=64k\nsize=128k\nio_size=512k\n");
    let offs: Vec<u64> = m.log.iter().map(|l| l.2.offset).collect();
    assert_eq!(offs, [0, 65536, 0, 65536, 0, 65536, 0, 65536]);
    let mut m = Mock::new(64 * MIB, 1000, false);
    run(&mut m, "[j]\nrw=randread\nnumber_ios=10\niodepth=3\n");
    assert_eq!(m.log.len(), 10);
    let mut m = Mock::new(64 * MIB, 1000, false);
    run(&mut m, "[j]\nrw=write\nbs=64k\nsize=128k\nloops=3\n");
    assert_eq!(m.log.len(), 6);
    let mut m = Mock::new(64 * MIB, 1000, false);
    run(&mut m, "[j]\nrw=write\nbs=64k\nsize=128k\nio_size=150%\n");
    assert_eq!(m.log.len(), 3);
}

#[test]
fn stonewall_startdelay_and_concurrency() {
    let mut m = Mock::new(64 * MIB, 1000, false);
    let r = run(
        &mut m,
        "[a]\nrw=read\nsize=40k\n[b]\nrw=write\nsize=40k\nstartdelay=1ms\n[c]\nstonewall\nrw=trim\nsize=40k\n",
    );
    assert_eq!(r.iter().map(|j| j.group).collect::<Vec<_>>(), [0, 0, 1]);
    assert_eq!(r[0].start_ns, 0);
    assert_eq!(r[1].start_ns, 1_000_000);
    // a and b overlap in time; c starts when both have ended.
    assert_eq!(r[0].end_ns, 10_000);
    assert_eq!(r[1].end_ns, 1_010_000);
    assert_eq!(r[2].start_ns, 1_010_000);
    let first_trim = m.log.iter().find(|l| l.2.op == Op::Trim).unwrap();
    assert_eq!(first_trim.0, 1_010_000);
}

#[test]
fn time_based_loops_until_runtime() {
    let mut m = Mock::new(64 * MIB, 1_000_000, false);
    let r = run(
        &mut m,
        "[j]\nrw=write\nbs=4k\nsize=8k\ntime_based\nruntime=100ms\n",
    );
    assert_eq!(m.log.len(), 100);
    assert_eq!(r[0].runtime_ns(), 100_000_000);
    assert!(m.log.iter().all(|l| l.2.offset < 8192));
}

#[test]
fn ramp_time_is_excluded() {
    let mut m = Mock::new(64 * MIB, 1_000_000, false);
    let r = run(
        &mut m,
        "[j]\nrw=read\ntime_based\nruntime=50ms\nramp_time=20ms\n",
    );
    // 20 I/Os issued in the ramp, 50 after; the last ramp I/O completes
    // exactly when statistics start, so it counts (fio resets its
    // statistics at that moment and counts later completions).
    assert_eq!(m.log.len(), 70);
    assert_eq!(r[0].dir[0].ios, 51);
    assert_eq!(r[0].stats_start_ns, 20_000_000);
    assert_eq!(r[0].runtime_ns(), 50_000_000);
}

#[test]
fn thinktime_drains_then_sleeps() {
    let mut m = Mock::new(64 * MIB, 1_000_000, false);
    let r = run(
        &mut m,
        "[j]\nrw=read\nnumber_ios=10\niodepth=2\nthinktime=1000\nthinktime_blocks=2\n",
    );
    // Pairs of I/Os (1 ms), then 1 ms of thinking: 5 pairs, 4 pauses.
    assert_eq!(m.log.len(), 10);
    assert_eq!(m.max_in_flight(), 2);
    assert_eq!(r[0].runtime_ns(), 9_000_000);
}

#[test]
fn bw_log_intervals() {
    // Serial 1 ms per 4 KiB: 100 I/Os per 100 ms interval = 4000 KiB/s.
    let mut m = Mock::new(64 * MIB, 1_000_000, true);
    let r = run(
        &mut m,
        "[j]\nrw=write\nbs=4k\nnumber_ios=1000\niodepth=4\nlog_avg_msec=100\n",
    );
    let log = &r[0].bw_log;
    assert_eq!(log.len(), 10, "{log:?}");
    assert_eq!(log[0].msec, 100);
    assert_eq!(log[9].msec, 1000);
    assert!(
        log[1..]
            .iter()
            .all(|s| s.kib_s == 4000 && s.dir == Dir::Write && s.bs == 4096),
        "{log:?}"
    );
}

#[test]
fn mixed_reads_and_writes() {
    let mut m = Mock::new(64 * MIB, 1000, false);
    let r = run(
        &mut m,
        "[j]\nrw=randrw\nrwmixread=70\nbs=4k,16k\nnumber_ios=10000\nio_size=1g\nbuffer_compress_percentage=40\n",
    );
    let reads = m.log.iter().filter(|l| l.2.op == Op::Read).count();
    assert!((6700..7300).contains(&reads), "{reads}");
    assert!(m.log.iter().all(|l| match l.2.op {
        Op::Read => l.2.len == 4096 && l.2.payload == Payload::Unknown,
        _ => l.2.len == 16384 && l.2.payload == Payload::Compressible { percent: 40 },
    }));
    assert_eq!(r[0].dirs, [Dir::Read, Dir::Write]);
    assert_eq!(r[0].dir[0].ios + r[0].dir[1].ios, 10000);
}

#[test]
fn whole_device_trim_is_one_request() {
    let mut m = Mock::new(64 * MIB, 1000, false);
    run(&mut m, "[j]\nrw=trim\nbs=64m\n");
    assert_eq!(m.log.len(), 1);
    assert_eq!(
        (m.log[0].2.offset, m.log[0].2.len, m.log[0].2.op),
        (0, 64 * MIB, Op::Trim)
    );
}

#[test]
fn numjobs_offsets_group_reporting_exitall() {
    let mut m = Mock::new(64 * MIB, 1000, false);
    let jf = parse(
        "[j]\nrw=write\nbs=4k\nsize=8k\nnumjobs=3\noffset_increment=1m\ngroup_reporting\n",
        "t",
    )
    .unwrap();
    let (reps, ops, _) = run_jobs(&mut m, &jf.jobs, 1, 0, &mut |_| {}).unwrap();
    assert_eq!(ops, 6);
    let mut offs: Vec<u64> = m.log.iter().map(|l| l.2.offset).collect();
    offs.sort_unstable();
    assert_eq!(offs, [0, 4096, MIB, MIB + 4096, 2 * MIB, 2 * MIB + 4096]);
    let rr = RunReport {
        profile: "mock".into(),
        capacity: m.cap,
        seed: 1,
        jobs: reps,
        counters: Counters::default(),
        sim_ops: ops,
        start_ns: 0,
        end_ns: 0,
        global_options: Vec::new(),
        epoch_s: 0,
    };
    let merged = rr.reported_jobs();
    assert_eq!(merged.len(), 1);
    assert_eq!((merged[0].jobs, merged[0].dir[1].ios), (3, 6));

    let mut m = Mock::new(64 * MIB, 1000, false);
    let r = run(
        &mut m,
        "[short]\nrw=read\nsize=4k\nexitall\n[long]\nrw=read\nsize=1m\n",
    );
    assert_eq!(r[1].dir[0].ios, 1);
}

#[test]
fn regions_outside_the_drive_are_errors() {
    let mut m = Mock::new(64 * MIB, 1000, false);
    for text in [
        "[j]\noffset=64m\n",
        "[j]\nbs=128m\nrw=write\n",
        "[j]\nsize=2k\n",
    ] {
        let jf = parse(text, "t").unwrap();
        let e = run_jobs(&mut m, &jf.jobs, 1, 0, &mut |_| {}).unwrap_err();
        assert!(matches!(e, SimError::Job { .. }), "{text}: {e}");
    }
    // A size beyond the end is clamped to the drive.
    let r = run(&mut m, "[j]\nrw=write\nbs=1m\noffset=60m\nsize=100m\n");
    assert_eq!(r[0].dir[1].io_bytes, 4 * MIB);
}

#[test]
fn seeds_decide_random_offsets() {
    let offsets = |seed: u64, text: &str| {
        let mut m = Mock::new(64 * MIB, 1000, false);
        let jf = parse(text, "t").unwrap();
        run_jobs(&mut m, &jf.jobs, seed, 0, &mut |_| {}).unwrap();
        m.log.iter().map(|l| l.2.offset).collect::<Vec<_>>()
    };
    let j = "[j]\nrw=randread\nnumber_ios=50\n";
    assert_eq!(offsets(1, j), offsets(1, j));
    assert_ne!(offsets(1, j), offsets(2, j));
    let j = "[j]\nrw=randread\nnumber_ios=50\nrandseed=9\n";
    assert_eq!(offsets(1, j), offsets(2, j));
}

#[test]
fn time_based_job_on_a_timeless_drive_is_an_error() {
    let mut m = Mock::new(64 * MIB, 0, false);
    let jf = parse("[j]\nrw=read\ntime_based\nruntime=1\n", "t").unwrap();
    let e = run_jobs(&mut m, &jf.jobs, 1, 0, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("stopped advancing"), "{e}");
    // Without time_based the job ends by size, even at zero latency.
    let r = run(&mut m, "[j]\nrw=read\nsize=1m\n");
    assert_eq!((r[0].dir[0].ios, r[0].runtime_ns()), (256, 0));
}

#[test]
fn end_fsync_flushes() {
    let mut m = Mock::new(64 * MIB, 1000, false);
    run(&mut m, "[j]\nrw=write\nsize=8k\nend_fsync=1\n");
    assert_eq!(m.log.last().unwrap().2.op, Op::Flush);
}
mod prop {
    use super::*;
    use proptest::prelude::{
        Just, Strategy, any, prop_assert, prop_assert_eq, prop_oneof, proptest,
    };

    fn job_text() -> impl Strategy<Value = String> {
        (
            prop_oneof![
                Just("read"),
                Just("write"),
                Just("trim"),
                Just("randread"),
                Just("randwrite"),
                Just("randtrim"),
                Just("rw"),
                Just("randrw")
            ],
            prop_oneof![Just("512"), Just("4k"), Just("64k"), Just("4k,16k")],
            (0u32..90, 1u32..=100),
            1u32..16,
            1u64..300,
            1u32..3,
            any::<bool>(),
            prop_oneof![Just(""), Just("thinktime=20\nthinktime_blocks=3\n")],
            any::<bool>(),
            // Logs, steady state and max_latency on the same paths.
            prop_oneof![
                Just(""),
                Just("log_avg_msec=1\nwrite_lat_log=l\nwrite_iops_log=i\nwrite_hist_log=h\nlog_hist_msec=1\n"),
                Just("ss=iops:50%\nss_dur=1\n"),
                Just("max_latency=100ms\n"),
            ],
        )
            .prop_map(|(rw, bs, (off, size), qd, n, numjobs, sw, think, nomap, extra)| {
                format!(
                    "[j]\nrw={rw}\nbs={bs}\noffset={off}%\nsize={size}%\niodepth={qd}\nnumber_ios={n}\nnumjobs={numjobs}\n{}{think}{}{extra}",
                    if sw { "stonewall\n" } else { "" },
                    if nomap { "norandommap\n" } else { "" }
                )
            })
    }

    proptest! {
        /// Whatever the jobs, every request lies inside the drive (the
        /// mock refuses others), every job ends, counts add up, and no job
        /// has more than its iodepth in flight.
        #[test]
        fn engine_invariants(texts in proptest::collection::vec(job_text(), 1..4), seed: u64) {
            let text: String = texts.concat();
            let jf = parse(&text, "p").unwrap();
            let mut m = Mock::new(8 * MIB, 5_000, true);
            let (reps, ops, end) = match run_jobs(&mut m, &jf.jobs, seed, 0, &mut |_| {}) {
                Ok(x) => x,
                Err(SimError::Job { .. }) => return Ok(()),
                Err(e) => panic!("{e}"),
            };
            prop_assert_eq!(ops as usize, m.log.len());
            let counted: u64 = reps.iter().flat_map(|r| r.dir.iter()).map(|d| d.ios).sum();
            prop_assert_eq!(counted, ops);
            let depth: u32 = jf.jobs.iter().map(|j| j.iodepth * j.numjobs).sum();
            prop_assert!(m.max_in_flight() <= depth as usize);
            for r in &reps {
                prop_assert!(r.end_ns <= end);
                let ios: u64 = r.dir.iter().map(|d| d.ios).sum();
                prop_assert!(ios >= 1);
            }
            let mut t = 0;
            for &(s, _, _) in &m.log {
                prop_assert!(s >= t, "submissions go back in time");
                t = s;
            }
        }
    }
}

/// Hardening 4: a pause of a billion seconds between three I/Os costs no
/// memory (it used to log one sample per second of virtual time).
#[test]
fn memory_is_bounded_by_what_is_logged() {
    let mut m = Mock::new(64 * MIB, 1000, false);
    let text = "[j]\nrw=read\nnumber_ios=3\nthinktime=1000000000s\n";
    let r = run(&mut m, text);
    assert_eq!(r[0].dir[0].ios, 3);
    // The library keeps the series: one entry per interval with I/O (the
    // third I/O's interval lasts 1 µs, too short to log).
    assert_eq!(r[0].bw_log.len(), 2, "{:?}", r[0].bw_log);
    assert_eq!(r[0].bw_stats[0].count(), 2);
    // One histogram (reads), three log entries.
    assert!(r[0].heap_bytes() <= 32 * 1024, "{}", r[0].heap_bytes());

    // Without a log to write, the plan keeps statistics only.
    let jf = parse(text, "t").unwrap();
    let plan = resolve(&jf.jobs, m.cap, 1).unwrap();
    let (r, _, _) = run_plan(&mut m, &plan, 0, &mut |_| {}).unwrap();
    assert!(r[0].bw_log.is_empty());
    assert_eq!(r[0].bw_stats[0].count(), 2);
}

/// Hardening 4: the largest number of instances allowed costs one
/// latency histogram each (for the directions they use), not three.
#[test]
fn many_instances_cost_one_histogram_each() {
    let mut m = Mock::new(64 * MIB, 1000, false);
    let jf = parse("[j]\nrw=read\nnumber_ios=1\nnumjobs=4096\n", "t").unwrap();
    let plan = resolve(&jf.jobs, m.cap, 1).unwrap();
    let states: Vec<JobState> = plan.jobs.iter().map(JobState::new).collect();
    let before: usize = states.iter().map(JobState::heap_bytes).sum();
    assert_eq!(before, 0, "nothing allocated before the first I/O");
    let (r, _, _) = run_plan(&mut m, &plan, 0, &mut |_| {}).unwrap();
    let total: usize = r.iter().map(JobReport::heap_bytes).sum();
    let one = vssd_common::hist::Histogram::new();
    let mut one = one;
    one.record(1);
    assert_eq!(total, 4096 * one.heap_bytes(), "{total}");
    assert!(total <= 100 << 20, "{total} bytes for 4096 instances");
}

fn log<'a>(r: &'a JobReport, kind: &str) -> &'a str {
    &r.logs
        .iter()
        .find(|l| l.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} log"))
        .text
}

/// Latency and IOPS logs: one entry per direction per `log_avg_msec`
/// window, in fio 3.33's format (averaged entries: bs 0, priority 0).
#[test]
fn latency_and_iops_logs_in_fio_format() {
    // 1 ms per I/O at QD 1: 100 completions per 100 ms window (the first
    // window has 99: its first I/O completes at 1 ms, the 100th at 100 ms,
    // which opens the next window).
    let mut m = Mock::new(64 * MIB, 1_000_000, false);
    let r = run(
        &mut m,
        "[j]\nrw=write\nnumber_ios=450\nlog_avg_msec=100\nwrite_lat_log=x\nwrite_iops_log=x\n",
    );
    let clat: Vec<&str> = log(&r[0], "clat").lines().collect();
    assert_eq!(
        clat,
        [
            "100, 1000000, 1, 0, 0",
            "200, 1000000, 1, 0, 0",
            "300, 1000000, 1, 0, 0",
            "400, 1000000, 1, 0, 0",
            "450, 1000000, 1, 0, 0"
        ]
    );
    assert_eq!(log(&r[0], "lat"), log(&r[0], "clat"));
    assert!(
        log(&r[0], "slat")
            .lines()
            .all(|l| l.ends_with(", 0, 1, 0, 0"))
    );
    let iops: Vec<&str> = log(&r[0], "iops").lines().collect();
    assert_eq!(
        iops,
        [
            "100, 990, 1, 0, 0",
            "200, 1000, 1, 0, 0",
            "300, 1000, 1, 0, 0",
            "400, 1000, 1, 0, 0",
            // The last, partial window: completions at 400..=450 ms.
            "450, 1020, 1, 0, 0"
        ]
    );
    let prefixes: Vec<&str> = r[0].logs.iter().map(|l| l.prefix.as_str()).collect();
    assert!(prefixes.iter().all(|&p| p == "x"));
    // log_offset adds fio's offset column (0 in averaged entries).
    let r = run(
        &mut m,
        "[j]\nrw=read\nnumber_ios=10\nwrite_iops_log\nlog_offset=1\n",
    );
    assert_eq!(log(&r[0], "iops"), "10, 1000, 0, 0, 0, 0\n");
    assert_eq!(
        r[0].logs[0].prefix, "j",
        "a bare option names the log after the job"
    );
}

/// The histogram log: every `log_hist_msec`, fio's 1856 bins gained since
/// the previous entry (`log_hist_coarseness` halves them per step).
#[test]
fn histogram_log_in_fio_format() {
    let mut m = Mock::new(64 * MIB, 1_000_000, false);
    let r = run(
        &mut m,
        "[j]\nrw=read\nnumber_ios=250\nwrite_hist_log=h\nlog_hist_msec=100\n",
    );
    let lines: Vec<&str> = log(&r[0], "clat_hist").lines().collect();
    // First sample at 1 ms; entries at the first completions 100 ms on.
    assert_eq!(lines.len(), 2, "{lines:?}");
    for (line, (msec, n)) in lines.iter().zip([(101, 101u64), (201, 100)]) {
        let v: Vec<u64> = line.split(", ").map(|x| x.parse().unwrap()).collect();
        assert_eq!((v[0], v[1], v[2]), (msec, 0, 4096), "{line}");
        assert_eq!(v.len(), 3 + 1856);
        assert_eq!(v[3..].iter().sum::<u64>(), n);
        assert_eq!(v[3..].iter().filter(|&&c| c > 0).count(), 1);
    }
    let r = run(
        &mut m,
        "[j]\nrw=read\nnumber_ios=150\nwrite_hist_log=h\nlog_hist_msec=100\nlog_hist_coarseness=3\n",
    );
    let line = log(&r[0], "clat_hist").lines().next().unwrap();
    assert_eq!(line.split(", ").count(), 3 + 1856 / 8);
    // Without log_hist_msec fio writes an empty file.
    let r = run(&mut m, "[j]\nrw=read\nnumber_ios=150\nwrite_hist_log=h\n");
    assert_eq!(log(&r[0], "clat_hist"), "");
}

/// Steady state: a drive that always takes the same time is steady after
/// one window; the job stops there instead of running to its runtime.
#[test]
fn steady_state_stops_the_job() {
    let mut m = Mock::new(64 * MIB, 1_000_000, false);
    let r = run(
        &mut m,
        "[j]\nrw=randwrite\ntime_based\nruntime=60\nss=iops:1%\nss_dur=5\nss_ramp=2\n",
    );
    let ss = r[0].steadystate.as_ref().unwrap();
    assert!(ss.attained, "{ss:?}");
    assert_eq!(ss.iops, [1000; 5]);
    assert_eq!(ss.bw, [4_096_000; 5]);
    assert_eq!(ss.ss, "iops:1.000000%");
    // Samples from seconds 2..=6, judged when second 6 closes: stopped at 7 s.
    assert_eq!(r[0].runtime_ns(), 7_000_000_000);
    // A slope of exactly 0 is never below a limit of 0: runs to the end.
    let r = run(
        &mut m,
        "[j]\nrw=randwrite\ntime_based\nruntime=10\nss=bw_slope:0\nss_dur=3\n",
    );
    let ss = r[0].steadystate.as_ref().unwrap();
    assert!(!ss.attained);
    assert_eq!(r[0].runtime_ns(), 10_000_000_000);
    // Steady state over a group_reporting group is refused.
    let jf = parse("[j]\nnumjobs=2\ngroup_reporting\nss_dur=5\n", "t").unwrap();
    let e = run_jobs(&mut m, &jf.jobs, 1, 0, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("steady state"), "{e}");
}

/// max_latency ends the job with fio's ETIMEDOUT (110).
#[test]
fn max_latency_ends_the_job_with_an_error() {
    let mut m = Mock::new(64 * MIB, 1_000_000, false);
    let r = run(
        &mut m,
        "[j]\nrw=read\nnumber_ios=100\niodepth=4\nmax_latency=500\n",
    );
    let e = r[0].error.as_ref().unwrap();
    assert_eq!(e.errno, 110);
    assert!(
        e.msg.contains("1000 usec exceeds specified max (500 usec)"),
        "{}",
        e.msg
    );
    assert_eq!(m.log.len(), 4, "stops issuing at the first late completion");
    let r = run(&mut m, "[j]\nrw=read\nnumber_ios=100\nmax_latency=10ms,1\n");
    assert!(r[0].error.is_none());
}

#[test]
fn rate_iops_and_rate_space_the_requests() {
    // A drive that takes 10 µs per request, paced to 1000 IOPS: 2000 I/Os
    // take about 2 s of virtual time, evenly spread.
    let mut m = Mock::new(1 << 30, 10_000, false);
    let r = run(
        &mut m,
        "[a]\nrw=randwrite\nbs=4k\nsize=8m\nnumber_ios=2000\niodepth=8\nrate_iops=1000\n",
    );
    let rt = r[0].runtime_ns();
    assert!((1_990_000_000..=2_010_000_000).contains(&rt), "{rt}");
    let starts: Vec<u64> = m.log.iter().map(|(s, _, _)| *s).collect();
    assert!(
        starts.windows(2).all(|w| w[1] - w[0] >= 999_000),
        "evenly spaced"
    );
    // `rate` in bytes/s: 4 MiB/s of 4 KiB writes = 1024 IOPS.
    let mut m = Mock::new(1 << 30, 10_000, false);
    let r = run(&mut m, "[a]\nrw=write\nbs=4k\nsize=4m\nrate=4m\n");
    let rt = r[0].runtime_ns();
    assert!((990_000_000..=1_010_000_000).contains(&rt), "{rt}");
    assert!(parse("[a]\nrate_iops=10,20\n", "x.fio").is_err());
}

/// Sampling takes the drive's counters at each step of virtual time
/// during a run and changes nothing in the run's results.
#[test]
fn sampling_steps_through_virtual_time_and_changes_no_result() {
    let p = vssd_profile::Profile::load_with_capacity("sata-mlc-2011", Some(256 << 20)).unwrap();
    let jf = parse("[w]\nrw=randwrite\nbs=4k\nsize=100%\niodepth=32\n", "t").unwrap();
    let mut plain = Simulation::new(&p, 3);
    let a = plain.run_file(&jf, &mut |_| {}).unwrap();
    let mut sampled = Simulation::new(&p, 3);
    sampled.set_sampling(Some(100_000_000));
    let b = sampled.run_file(&jf, &mut |_| {}).unwrap();
    assert_eq!(a.counters, b.counters);
    assert_eq!(a.end_ns, b.end_ns);
    let s = sampled.take_samples();
    let expect = (b.end_ns / 100_000_000) as usize;
    assert!(
        s.len() + 1 >= expect && s.len() <= expect,
        "{} vs {expect}",
        s.len()
    );
    assert!(s.windows(2).all(|w| w[1].0 == w[0].0 + 100_000_000));
    assert!(
        s.windows(2)
            .all(|w| w[1].1.host_written_bytes >= w[0].1.host_written_bytes)
    );
    assert!(s.last().unwrap().1.host_written_bytes < b.counters.host_written_bytes);
    assert!(sampled.take_samples().is_empty(), "taken once");
}
