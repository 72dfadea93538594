#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! Traces: capture in the daemon (`serve --trace`, `ctl trace`), replay in
//! the simulator (`read_iolog=`), conversion to fio's iolog replayed by
//! real fio, blkparse import, and hostile trace files.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use vssd::trace::vssd as vt;

mod common;

use common::serve::{Serve, VSSD};

fn vssd(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(VSSD).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn vssd_ok(args: &[&str]) -> String {
    let (ok, out, err) = vssd(args);
    assert!(ok, "vssd {args:?} failed: {err}");
    out
}

/// `vssd sim` of a job file on a 64 MiB `sata-mlc-2011`.
fn sim_64m(job: &Path) -> (bool, String, String) {
    vssd(&[
        "sim",
        "--profile",
        "sata-mlc-2011",
        "--capacity",
        "64M",
        job.to_str().unwrap(),
    ])
}

fn read_trace(p: &Path) -> vt::File {
    vt::read(
        std::io::BufReader::new(std::fs::File::open(p).unwrap()),
        "t",
    )
    .unwrap()
}

/// `vssd sim` of one replay job; returns the job's JSON.
fn sim_replay(dir: &Path, trace: &Path, capacity: &str, extra: &str) -> Value {
    let job = dir.join("replay.fio");
    std::fs::write(
        &job,
        format!("[replay]\nread_iolog={}\n{extra}\n", trace.display()),
    )
    .unwrap();
    let out = vssd_ok(&[
        "sim",
        "--profile",
        "sata-mlc-2011",
        "--capacity",
        capacity,
        job.to_str().unwrap(),
        "--output-format",
        "json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    v["jobs"][0].clone()
}

#[test]
fn a_loadgen_run_traced_by_the_daemon_replays_in_the_simulator_to_the_same_figures() {
    let dir = common::scratch_dir();
    let trace = dir.path().join("run.vssdtrace");
    let s = Serve::start(
        dir.path(),
        &[
            "--memory",
            "--profile",
            "sata-mlc-2011",
            "--capacity",
            "256M",
            "--trace",
            trace.to_str().unwrap(),
        ],
    );
    let lg = vssd_ok(&[
        "loadgen",
        "--socket",
        s.socket.to_str().unwrap(),
        "--rw",
        "randrw",
        "--bs",
        "4k",
        "--iodepth",
        "8",
        "--runtime",
        "1",
        "--json",
    ]);
    let _: Value = serde_json::from_str(&lg).unwrap();
    let st = vssd_ok(&[
        "ctl",
        "--control",
        s.control.to_str().unwrap(),
        "trace",
        "stop",
        "--json",
    ]);
    let st: Value = serde_json::from_str(&st).unwrap();
    // The daemon's own figures: bytes per direction, and the span from
    // the first request's submission to the last completion.
    let stats: Value = serde_json::from_str(&vssd_ok(&[
        "ctl",
        "--control",
        s.control.to_str().unwrap(),
        "stats",
        "--json",
    ]))
    .unwrap();
    s.stop_ok();
    assert_eq!(
        std::fs::metadata(&trace).unwrap().permissions().mode() & 0o777,
        0o600,
        "a file the daemon creates is private"
    );
    let f = read_trace(&trace);
    assert!(f.closed);
    assert_eq!(f.version, vt::VERSION);
    assert_eq!(f.header.dropped, 0);
    assert_eq!(f.header.profile, "sata-mlc-2011");
    assert_eq!(st["records"].as_u64().unwrap(), f.records.len() as u64);
    // Every request the daemon counted is in the trace, each received by
    // the frontend no later than the model took it.
    for (op, kind) in [("read", vt::RecOp::Read), ("write", vt::RecOp::Write)] {
        let recs: Vec<_> = f.records.iter().filter(|r| r.op == kind).collect();
        assert_eq!(
            recs.len() as u64,
            stats["ops"][op]["cmds"].as_u64().unwrap(),
            "{op} count"
        );
        assert_eq!(
            recs.iter().map(|r| r.len).sum::<u64>(),
            stats["ops"][op]["bytes"].as_u64().unwrap(),
            "{op} bytes"
        );
        assert!(recs.iter().all(|r| r.received_ns <= r.taken_ns));
    }
    let depth_report = &stats["connection"]["depth"];
    let span_s = (depth_report["last_ns"].as_u64().unwrap()
        - depth_report["first_ns"].as_u64().unwrap()) as f64
        / 1e9;
    assert!(span_s > 0.5, "{stats}");
    let depth = 8;
    let sim = sim_replay(dir.path(), &trace, "256M", &format!("iodepth={depth}"));
    for op in ["read", "write"] {
        let bytes = stats["ops"][op]["bytes"].as_u64().unwrap();
        assert_eq!(
            sim[op]["total_ios"].as_u64().unwrap(),
            stats["ops"][op]["cmds"].as_u64().unwrap(),
            "{op}: replayed request count"
        );
        assert_eq!(
            sim[op]["io_bytes"].as_u64().unwrap(),
            bytes,
            "{op}: replayed bytes"
        );
        let daemon_bw = bytes as f64 / span_s;
        let sim_bw = sim[op]["bw_bytes"].as_f64().unwrap();
        let err = sim_bw / daemon_bw - 1.0;
        assert!(
            err.abs() < 0.05,
            "{op}: the replayed drive moves {sim_bw:.0} B/s, the daemon's ctl stats say {daemon_bw:.0} B/s over {span_s:.3} s ({:+.1} %)",
            err * 100.0
        );
    }
}

#[test]
fn a_vssd_trace_converted_to_iolog_v3_is_replayed_by_real_fio() {
    common::require_program("fio");
    let dir = common::scratch_dir();
    // A known sequence, as a vssd trace: writes, reads, a flush, a trim.
    let trace = dir.path().join("known.vssdtrace");
    let mut recs = Vec::new();
    for i in 0..200u64 {
        let op = match i % 10 {
            0..=5 => vt::RecOp::Write,
            6..=8 => vt::RecOp::Read,
            _ => vt::RecOp::Flush,
        };
        let (offset, len) = if op == vt::RecOp::Flush {
            (0, 0)
        } else {
            ((i * 7919 % 4096) * 4096, 4096 * (1 + i % 4))
        };
        recs.push(vt::Record {
            received_ns: i * 50_000,
            taken_ns: i * 50_000,
            due_ns: i * 50_000 + 20_000,
            delivered_ns: i * 50_000 + 21_000,
            offset,
            len,
            conn: 1,
            frontend: 0,
            queue: 0,
            op,
            flags: 0,
            status: vt::status::OK,
            seq: 0,
        });
    }
    recs.push(vt::Record {
        op: vt::RecOp::Discard,
        offset: 0,
        len: 1 << 20,
        received_ns: 200 * 50_000,
        taken_ns: 200 * 50_000,
        due_ns: 200 * 50_000 + 30_000,
        delivered_ns: 200 * 50_000 + 31_000,
        ..recs[0]
    });
    let mut w = vt::Writer::new(
        std::io::BufWriter::new(std::fs::File::create(&trace).unwrap()),
        vt::Header {
            capacity: 64 << 20,
            logical_block: 512,
            time_scale_milli: 1000,
            profile: "sata-mlc-2011".into(),
            ..Default::default()
        },
    )
    .unwrap();
    w.write(&recs).unwrap();
    w.finish(0).unwrap();
    let iolog = dir.path().join("known.iolog");
    let out = vssd_ok(&[
        "trace",
        "convert",
        trace.to_str().unwrap(),
        iolog.to_str().unwrap(),
        "--to",
        "iolog3",
    ]);
    assert!(out.contains("201 requests"), "{out}");
    let text = std::fs::read_to_string(&iolog).unwrap();
    assert!(text.starts_with("fio version 3 iolog\n"));
    // Replay it with fio against a file.
    let target = dir.path().join("disk.img");
    std::fs::File::create(&target)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let fio = Command::new("fio")
        .args(["--name=replay", "--ioengine=psync", "--output-format=json"])
        .arg(format!("--read_iolog={}", iolog.display()))
        .arg(format!("--replay_redirect={}", target.display()))
        .output()
        .unwrap();
    assert!(
        fio.status.success(),
        "fio: {}",
        String::from_utf8_lossy(&fio.stderr)
    );
    let v: Value = serde_json::from_slice(&fio.stdout).unwrap();
    let j = &v["jobs"][0];
    let count = |k: vt::RecOp| recs.iter().filter(|r| r.op == k).count() as u64;
    assert_eq!(
        j["write"]["total_ios"].as_u64().unwrap(),
        count(vt::RecOp::Write)
    );
    assert_eq!(
        j["read"]["total_ios"].as_u64().unwrap(),
        count(vt::RecOp::Read)
    );
    // fio 3.33 (Debian 12's) does not replay an iolog's `trim` lines: it
    // drops each one as it reads the log, saying "bad ddir: 2" (its
    // read_iolog2 takes reads, writes, syncs and waits only); fio 3.34
    // and later replay them.
    let trims = count(vt::RecOp::Discard);
    assert_eq!(trims, 1);
    let stderr = String::from_utf8_lossy(&fio.stderr);
    if fio_version() <= (3, 33) {
        assert_eq!(j["trim"]["total_ios"].as_u64().unwrap(), 0);
        assert_eq!(
            stderr.matches("bad ddir: 2").count() as u64,
            trims,
            "{stderr}"
        );
    } else {
        assert_eq!(j["trim"]["total_ios"].as_u64().unwrap(), trims);
    }
    assert_eq!(
        j["sync"]["total_ios"].as_u64().unwrap(),
        count(vt::RecOp::Flush)
    );
    // The same iolog replays in the simulator to the same counts; so does
    // the vssd trace itself.
    for src in [&iolog, &trace] {
        let sim = sim_replay(dir.path(), src, "64M", "iodepth=4");
        assert_eq!(
            sim["write"]["total_ios"].as_u64().unwrap(),
            count(vt::RecOp::Write)
        );
        assert_eq!(
            sim["read"]["total_ios"].as_u64().unwrap(),
            count(vt::RecOp::Read)
        );
        assert_eq!(
            sim["trim"]["total_ios"].as_u64().unwrap(),
            count(vt::RecOp::Discard)
        );
    }
}

#[test]
fn a_blkparse_text_sample_imports_to_the_requests_it_describes() {
    let dir = common::scratch_dir();
    // blkparse's default output for a known sequence: for each request a
    // Q, G, D and C event; the summary at the end.
    let seq: &[(&str, u64, u64)] = &[
        ("W", 2048, 8),
        ("R", 0, 256),
        ("WS", 4096, 16),
        ("D", 8192, 2048),
    ];
    let mut text = String::new();
    let mut n = 0;
    for (i, (rwbs, sector, count)) in seq.iter().enumerate() {
        for (k, action) in ["Q", "G", "D", "C"].iter().enumerate() {
            n += 1;
            let t = i as f64 * 0.001 + k as f64 * 0.000_010;
            text.push_str(&format!(
                "  8,16   1 {n:>8} {t:>14.9} {:>5}  {action} {rwbs:>3} {sector} + {count} [fio]\n",
                4321
            ));
        }
    }
    text.push_str("  8,16   1        0     0.005000000     0  m   N cfq schedule dispatch\n\nCPU1 (8,16):\n Reads Queued:           1,      128KiB\n");
    let input = dir.path().join("sample.blkparse");
    std::fs::write(&input, text).unwrap();
    let out = dir.path().join("sample.iolog");
    vssd_ok(&[
        "trace",
        "convert",
        input.to_str().unwrap(),
        out.to_str().unwrap(),
        "--file-name",
        "/dev/sdb",
    ]);
    let got = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(
        lines,
        vec![
            "fio version 3 iolog",
            "1 /dev/sdb add",
            "1 /dev/sdb open",
            "1 /dev/sdb write 1048576 4096",
            "1001 /dev/sdb read 0 131072",
            "2001 /dev/sdb write 2097152 8192",
            "3001 /dev/sdb trim 4194304 1048576",
            "3001 /dev/sdb close",
        ]
    );
    let info = vssd_ok(&["trace", "info", input.to_str().unwrap(), "--event", "d"]);
    assert!(
        info.contains("blkparse text") && info.contains("requests: 4"),
        "{info}"
    );
}

#[test]
fn write_iolog_records_what_a_simulated_job_issued_and_replays_to_the_same_run() {
    let dir = common::scratch_dir();
    let log = dir.path().join("issued.iolog");
    let job = dir.path().join("gen.fio");
    std::fs::write(
        &job,
        format!(
            "[gen]\nrw=randrw\nbs=4k\niodepth=4\nsize=16m\nio_size=8m\nthinktime=100us\nwrite_iolog={}\n",
            log.display()
        ),
    )
    .unwrap();
    let out = vssd_ok(&[
        "sim",
        "--profile",
        "sata-mlc-2011",
        "--capacity",
        "64M",
        job.to_str().unwrap(),
        "--output-format",
        "json",
    ]);
    let generated: Value = serde_json::from_str(&out).unwrap();
    let generated = &generated["jobs"][0];
    let replay = sim_replay(dir.path(), &log, "64M", "iodepth=4");
    for d in ["read", "write"] {
        assert_eq!(replay[d]["total_ios"], generated[d]["total_ios"], "{d}");
        assert_eq!(replay[d]["io_bytes"], generated[d]["io_bytes"], "{d}");
    }
}

#[test]
fn ctl_trace_refuses_what_it_must_and_stops_at_its_size_limit() {
    let dir = common::scratch_dir();
    let s = Serve::start(
        dir.path(),
        &[
            "--memory",
            "--profile",
            "sata-mlc-2011",
            "--capacity",
            "64M",
        ],
    );
    let ctl = |args: &[&str]| {
        let mut a = vec!["ctl", "--control", s.control.to_str().unwrap(), "trace"];
        a.extend_from_slice(args);
        vssd(&a)
    };
    let existing = dir.path().join("exists");
    std::fs::write(&existing, b"keep me").unwrap();
    let (ok, _, err) = ctl(&["start", existing.to_str().unwrap()]);
    assert!(!ok && err.contains("File exists"), "{err}");
    assert_eq!(
        std::fs::read(&existing).unwrap(),
        b"keep me",
        "an existing file is never overwritten"
    );
    let (ok, _, err) = ctl(&[
        "start",
        dir.path().join("x").to_str().unwrap(),
        "--limit",
        "4k",
    ]);
    assert!(!ok && err.contains("too small"), "{err}");
    // A relative path is the client's: the file lands in its directory.
    let rel = Command::new(VSSD)
        .current_dir(dir.path())
        .args([
            "ctl",
            "--control",
            s.control.to_str().unwrap(),
            "trace",
            "start",
            "small.trace",
            "--limit",
            "1M",
        ])
        .output()
        .unwrap();
    assert!(
        rel.status.success(),
        "{}",
        String::from_utf8_lossy(&rel.stderr)
    );
    let (ok, _, err) = ctl(&["start", dir.path().join("y").to_str().unwrap()]);
    assert!(!ok && err.contains("already tracing"), "{err}");
    // 1 MiB holds 16,382 records: write more than that.
    let lg = vssd(&[
        "loadgen",
        "--socket",
        s.socket.to_str().unwrap(),
        "--rw",
        "randwrite",
        "--bs",
        "4k",
        "--iodepth",
        "16",
        "--io-size",
        "128M",
        "--size",
        "64M",
    ]);
    assert!(lg.0, "{}", lg.2);
    let (ok, out, _) = ctl(&["status", "--json"]);
    assert!(ok);
    let st: Value = serde_json::from_str(&out).unwrap();
    let (_, out, _) = ctl(&["stop", "--json"]);
    let fin: Value = serde_json::from_str(&out).unwrap();
    assert!(
        fin["ended"].as_str().unwrap().contains("size limit"),
        "{fin} (status before: {st})"
    );
    assert!(fin["dropped"].as_u64().unwrap() > 0);
    let f = read_trace(&dir.path().join("small.trace"));
    assert!(f.closed);
    assert!(
        std::fs::metadata(dir.path().join("small.trace"))
            .unwrap()
            .len()
            <= 1 << 20
    );
    assert_eq!(f.records.len() as u64, fin["records"].as_u64().unwrap());
    assert!(s.log_text().contains("reached its size limit"));
    s.stop_ok();
}

#[test]
fn hostile_trace_files_get_clear_errors() {
    let dir = common::scratch_dir();
    let p = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let good = {
        let mut w =
            vt::Writer::new(std::io::Cursor::new(Vec::new()), vt::Header::default()).unwrap();
        let r = vt::Record {
            received_ns: 10,
            taken_ns: 10,
            due_ns: 20,
            delivered_ns: 30,
            offset: 0,
            len: 4096,
            conn: 1,
            frontend: 0,
            queue: 0,
            op: vt::RecOp::Write,
            flags: 0,
            status: 0,
            seq: 0,
        };
        w.write(&[r, r]).unwrap();
        w.finish(0).unwrap().into_inner()
    };
    let mut truncated = good.clone();
    truncated.truncate(good.len() - 7);
    let mut version = good.clone();
    version[8] = 3;
    let mut huge = good.clone();
    huge[40..48].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let cases: Vec<(std::path::PathBuf, &str)> = vec![
        (
            p("truncated", &truncated),
            "truncated: its header says 2 records",
        ),
        (
            p("version", &version),
            "trace format version 3; this vssd reads versions 1 and 2",
        ),
        (
            p("huge", &huge),
            "its header says 1152921504606846976 records, the file holds 2",
        ),
        (
            p(
                "backwards.iolog",
                b"fio version 3 iolog\n5 f add\n100 f write 0 4096\n50 f write 4096 4096\n",
            ),
            "backwards.iolog:4: timestamp 50",
        ),
        (p("garbage", b"\x00\x01garbage"), "not a trace vssd reads"),
        (
            p("badline.iolog", b"fio version 2 iolog\nf add\nf write 0\n"),
            "badline.iolog:3: `write` needs an offset and a length",
        ),
    ];
    for (path, want) in &cases {
        let (ok, _, err) = vssd(&["trace", "info", path.to_str().unwrap()]);
        assert!(
            !ok && err.contains(want),
            "trace info {}: {err}",
            path.display()
        );
        assert!(!err.contains("panicked"), "{err}");
        // The simulator's read_iolog says the same, naming the job.
        let job = dir.path().join("j.fio");
        std::fs::write(&job, format!("[r]\nread_iolog={}\n", path.display())).unwrap();
        let (ok, _, err) = sim_64m(&job);
        assert!(
            !ok && err.contains("job [r]") && err.contains(want),
            "sim {}: {err}",
            path.display()
        );
    }
    // A request beyond the drive's end.
    let big = p(
        "big.iolog",
        b"fio version 2 iolog\nf add\nf write 1099511627776 4096\n",
    );
    let job = dir.path().join("j.fio");
    std::fs::write(&job, format!("[r]\nread_iolog={}\n", big.display())).unwrap();
    let (ok, _, err) = sim_64m(&job);
    assert!(
        !ok && err.contains("request 1") && err.contains("beyond the end of the drive"),
        "{err}"
    );
}

/// fio's version as (major, minor), e.g. (3, 33).
fn fio_version() -> (u32, u32) {
    let out = Command::new("fio").arg("--version").output().unwrap();
    let v = String::from_utf8_lossy(&out.stdout);
    let v = v.trim().trim_start_matches("fio-");
    let mut it = v.split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// One blktrace event (`struct blk_io_trace`, version 7, little-endian:
/// magic | version, sequence, time (ns), sector, bytes, action (category
/// << 16 | action), pid, device (major << 20 | minor), CPU, error, payload
/// length), then its payload.
fn blk_event(seq: u32, t_ns: u64, sector: u64, bytes: u32, action: u32, pdu: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(48 + pdu.len());
    b.extend_from_slice(&(0x6561_7400u32 | 7).to_le_bytes());
    b.extend_from_slice(&seq.to_le_bytes());
    b.extend_from_slice(&t_ns.to_le_bytes());
    b.extend_from_slice(&sector.to_le_bytes());
    b.extend_from_slice(&bytes.to_le_bytes());
    b.extend_from_slice(&action.to_le_bytes());
    b.extend_from_slice(&4242u32.to_le_bytes());
    b.extend_from_slice(&((8u32 << 20) | 16).to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&(pdu.len() as u16).to_le_bytes());
    b.extend_from_slice(pdu);
    b
}

/// A blktrace binary of a known sequence (queue, dispatch and completion
/// events, a process-name note) replays in `vssd sim` to its queued
/// requests; real blkparse, where installed, prints the same requests
/// from it that vssd's blkparse export does.
#[test]
fn a_blktrace_binary_replays_in_the_simulator_to_its_queued_requests() {
    let dir = common::scratch_dir();
    // Categories (<< 16) and actions of blktrace's API.
    const READ: u32 = 1 << 16;
    const WRITE: u32 = 2 << 16;
    const FLUSH: u32 = 4 << 16;
    const NOTIFY: u32 = 1 << 26;
    const DISCARD: u32 = 1 << 29;
    const FUA: u32 = 1 << 31;
    const QUEUE: u32 = 1;
    const ISSUE: u32 = 7;
    const COMPLETE: u32 = 8;
    let mut bin = blk_event(0, 0, 0, 0, NOTIFY | 1, b"fio\0");
    let mut seq = 1;
    let mut want = [0u64; 4]; // reads, writes, trims, flushes
    let mut want_bytes = [0u64; 3];
    for i in 0..60u64 {
        let t = 1_000 + i * 200_000;
        let (cat, sector, bytes) = match i % 6 {
            0..=2 => (WRITE | if i % 12 == 0 { FUA } else { 0 }, i * 64, 4096),
            3 | 4 => (READ, 8192 + i * 16, 8192),
            _ if i % 12 == 5 => (WRITE | DISCARD, 65536, 1 << 20),
            _ => (WRITE | FLUSH, 0, 0),
        };
        let k = if cat & DISCARD != 0 {
            2
        } else if cat & FLUSH != 0 {
            3
        } else if cat & READ != 0 {
            0
        } else {
            1
        };
        want[k] += 1;
        if k < 3 {
            want_bytes[k] += u64::from(bytes);
        }
        for (dt, act) in [(0, QUEUE), (1_500, ISSUE), (90_000, COMPLETE)] {
            bin.extend(blk_event(seq, t + dt, sector, bytes, cat | act, b""));
            seq += 1;
        }
    }
    // blkparse's naming: NAME.blktrace.CPU.
    let input = dir.path().join("known.blktrace.0");
    std::fs::write(&input, &bin).unwrap();
    let info = vssd_ok(&["trace", "info", input.to_str().unwrap()]);
    assert!(
        info.contains("blktrace binary") && info.contains("requests: 60"),
        "{info}"
    );
    let sim = sim_replay(dir.path(), &input, "64M", "iodepth=4");
    for (k, d) in ["read", "write", "trim"].iter().enumerate() {
        assert_eq!(sim[d]["total_ios"].as_u64().unwrap(), want[k], "{d}");
        assert_eq!(sim[d]["io_bytes"].as_u64().unwrap(), want_bytes[k], "{d}");
    }
    assert_eq!(
        sim["sync"]["total_ios"].as_u64().unwrap(),
        want[3],
        "flushes"
    );
    assert!(want.iter().all(|&n| n > 0));
    // The same requests as blkparse text (vssd's export), read back.
    let text = dir.path().join("known.txt");
    vssd_ok(&[
        "trace",
        "convert",
        input.to_str().unwrap(),
        text.to_str().unwrap(),
        "--to",
        "blkparse",
        "--device",
        "8,16",
    ]);
    let iolog = |src: &Path, name: &str| {
        let out = dir.path().join(name);
        vssd_ok(&[
            "trace",
            "convert",
            src.to_str().unwrap(),
            out.to_str().unwrap(),
        ]);
        std::fs::read_to_string(out).unwrap()
    };
    let from_bin = iolog(&input, "bin.iolog");
    assert_eq!(from_bin, iolog(&text, "text.iolog"));
    assert_eq!(from_bin.lines().count(), 60 + 4);
    // Real blkparse on the binary prints the queue events as vssd's export
    // does (time, action, RWBS, sectors); it names the process and the
    // pid, which vssd does not know.
    common::require_program("blkparse");
    let real = Command::new("blkparse")
        .current_dir(dir.path())
        .args(["-i", "known"])
        .output()
        .unwrap();
    assert!(real.status.success());
    let fields = |s: &str| -> Vec<String> {
        s.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() >= 7 && f[5] == "Q").then(|| {
                    let tail = if f[7] == "[(null)]" || f[7].starts_with('[') {
                        String::new()
                    } else {
                        f[7..10].join(" ")
                    };
                    format!("{} {} {} {tail}", f[3], f[5], f[6])
                })
            })
            .collect()
    };
    let real = fields(&String::from_utf8_lossy(&real.stdout));
    assert_eq!(real.len(), 60);
    assert_eq!(real, fields(&std::fs::read_to_string(&text).unwrap()));
}

/// fio's replay options at the command line: `replay_redirect` puts a
/// trace of two devices on the one drive, `replay_scale` divides offsets,
/// `replay_align` rounds them down, `replay_time_scale` and
/// `replay_no_stall` change the pace (seen in what `write_iolog=`
/// records of the replay: offsets, and issue times in µs).
#[test]
fn replay_options_change_what_is_replayed_as_fio_defines_them() {
    let dir = common::scratch_dir();
    // 20 reads of 4 KiB, 10 ms apart, alternating between two devices, at
    // 8 MiB steps + 10240 (512-aligned, not 4096-aligned): up to 152 MiB.
    let mut log = String::from("fio version 3 iolog\n1 /dev/a add\n1 /dev/b add\n");
    let offset = |i: u64| i * (8 << 20) + 10240;
    for i in 0..20u64 {
        let dev = if i % 2 == 0 { "/dev/a" } else { "/dev/b" };
        log += &format!("{} {dev} read {} 4096\n", 1 + i * 10_000, offset(i));
    }
    let trace = dir.path().join("two.iolog");
    std::fs::write(&trace, log).unwrap();
    let run = |opts: &str| -> Result<Vec<(u64, u64)>, String> {
        let issued = dir.path().join("issued.iolog");
        let _ = std::fs::remove_file(&issued);
        let job = dir.path().join("opts.fio");
        std::fs::write(
            &job,
            format!(
                "[r]\nread_iolog={}\niodepth=1\nwrite_iolog={}\n{opts}\n",
                trace.display(),
                issued.display()
            ),
        )
        .unwrap();
        let (ok, _, err) = sim_64m(&job);
        if !ok {
            return Err(err);
        }
        Ok(std::fs::read_to_string(&issued)
            .unwrap()
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 5 && f[2] == "read")
                    .then(|| (f[0].parse().unwrap(), f[3].parse().unwrap()))
            })
            .collect())
    };
    let gaps = |v: &[(u64, u64)]| -> Vec<u64> { v.windows(2).map(|w| w[1].0 - w[0].0).collect() };
    let e = run("").unwrap_err();
    assert!(
        e.contains("2 files or devices") && e.contains("replay_redirect"),
        "{e}"
    );
    let e = run("replay_redirect=/dev/x").unwrap_err();
    assert!(e.contains("beyond the end of the drive"), "{e}");
    // Offsets divided by 4: within the 64 MiB drive, 512-aligned.
    let scaled = run("replay_redirect=/dev/x\nreplay_scale=4").unwrap();
    assert_eq!(scaled.len(), 20);
    for (i, &(_, o)) in scaled.iter().enumerate() {
        assert_eq!(o, offset(i as u64) / 4);
    }
    // At the recorded pace: 10 ms apart (the drive answers in far less).
    assert!(gaps(&scaled).iter().all(|&g| g == 10_000), "{scaled:?}");
    // Then rounded down to 4 KiB.
    let aligned = run("replay_redirect=/dev/x\nreplay_scale=4\nreplay_align=4096").unwrap();
    for (i, &(_, o)) in aligned.iter().enumerate() {
        assert_eq!(o, (offset(i as u64) / 4) & !4095);
        assert_ne!(o, offset(i as u64) / 4);
    }
    // Twice as fast, and as fast as the drive allows.
    let fast = run("replay_redirect=/dev/x\nreplay_scale=4\nreplay_time_scale=200").unwrap();
    assert!(gaps(&fast).iter().all(|&g| g == 5_000), "{fast:?}");
    let nostall = run("replay_redirect=/dev/x\nreplay_scale=4\nreplay_no_stall=1").unwrap();
    assert_eq!(nostall.len(), 20);
    assert!(gaps(&nostall).iter().all(|&g| g < 1_000), "{nostall:?}");
}

/// vssd -> blkparse text -> vssd and vssd -> iolog v2 -> vssd give the
/// same requests; blkparse keeps the ns times, iolog v2's waits the ms.
#[test]
fn conversions_round_trip_to_the_same_requests() {
    let dir = common::scratch_dir();
    let trace = dir.path().join("src.vssdtrace");
    let mut recs = Vec::new();
    for i in 0..300u64 {
        let (op, offset, len) = match i % 5 {
            0 | 1 => (vt::RecOp::Write, i * 8192, 4096 * (1 + i % 3)),
            2 | 3 => (vt::RecOp::Read, i * 4096, 512 * (1 + i % 16)),
            _ if i % 10 == 4 => (vt::RecOp::Discard, i << 16, 1 << 16),
            _ => (vt::RecOp::Flush, 0, 0),
        };
        let received = 3_000 + i * 1_234_567;
        recs.push(vt::Record {
            received_ns: received,
            taken_ns: received + 700,
            due_ns: received + 50_000,
            delivered_ns: received + 52_000,
            offset,
            len,
            conn: 1,
            frontend: 0,
            queue: (i % 2) as u16,
            op,
            flags: u8::from(i % 25 == 0 && op == vt::RecOp::Write) * vt::FLAG_FUA,
            status: vt::status::OK,
            seq: i + 1,
        });
    }
    let mut w = vt::Writer::new(
        std::io::BufWriter::new(std::fs::File::create(&trace).unwrap()),
        vt::Header::default(),
    )
    .unwrap();
    w.write(&recs).unwrap();
    w.finish(0).unwrap();
    let via = |to: &str| -> Vec<vt::Record> {
        let mid = dir.path().join(format!("mid.{to}"));
        let back = dir.path().join(format!("back-{to}.vssdtrace"));
        vssd_ok(&[
            "trace",
            "convert",
            trace.to_str().unwrap(),
            mid.to_str().unwrap(),
            "--to",
            to,
        ]);
        vssd_ok(&[
            "trace",
            "convert",
            mid.to_str().unwrap(),
            back.to_str().unwrap(),
            "--to",
            "vssd",
        ]);
        read_trace(&back).records
    };
    let shape = |r: &vt::Record| (r.op, r.offset, r.len, r.flags & vt::FLAG_FUA);
    let first = recs[0].received_ns;
    let blk = via("blkparse");
    assert_eq!(blk.len(), recs.len());
    for (a, b) in recs.iter().zip(&blk) {
        assert_eq!(shape(a), shape(b));
        assert_eq!(b.received_ns, a.received_ns - first, "ns kept");
    }
    let v2 = via("iolog2");
    assert_eq!(v2.len(), recs.len());
    for (a, b) in recs.iter().zip(&v2) {
        // iolog has no FUA.
        assert_eq!((a.op, a.offset, a.len), (b.op, b.offset, b.len));
        assert_eq!(
            b.received_ns,
            (a.received_ns - first) / 1_000_000 * 1_000_000,
            "to the ms"
        );
    }
}
