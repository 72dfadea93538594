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
    let report = s.report();
    s.stop_ok();
    assert_eq!(
        std::fs::metadata(&trace).unwrap().permissions().mode() & 0o777,
        0o600,
        "a file the daemon creates is private"
    );
    let f = read_trace(&trace);
    assert!(f.closed);
    assert_eq!(f.header.dropped, 0);
    assert_eq!(f.header.profile, "sata-mlc-2011");
    assert_eq!(st["records"].as_u64().unwrap(), f.records.len() as u64);
    // Every request the daemon counted is in the trace.
    for (op, kind) in [("read", vt::RecOp::Read), ("write", vt::RecOp::Write)] {
        let recs: Vec<_> = f.records.iter().filter(|r| r.op == kind).collect();
        assert_eq!(recs.len() as u64, report.ops[op].cmds, "{op} count");
        assert_eq!(
            recs.iter().map(|r| r.len).sum::<u64>(),
            report.ops[op].bytes,
            "{op} bytes"
        );
    }
    // What the daemon measured (drive time): bytes over first arrival to
    // last delivery, per direction.
    let first = f.records.iter().map(|r| r.arrival_ns).min().unwrap();
    let last = f.records.iter().map(|r| r.delivered_ns).max().unwrap();
    let depth = 8;
    let sim = sim_replay(dir.path(), &trace, "256M", &format!("iodepth={depth}"));
    for (op, kind) in [("read", vt::RecOp::Read), ("write", vt::RecOp::Write)] {
        let bytes: u64 = f
            .records
            .iter()
            .filter(|r| r.op == kind)
            .map(|r| r.len)
            .sum();
        let n = f.records.iter().filter(|r| r.op == kind).count() as u64;
        assert_eq!(
            sim[op]["total_ios"].as_u64().unwrap(),
            n,
            "{op}: replayed request count"
        );
        assert_eq!(
            sim[op]["io_bytes"].as_u64().unwrap(),
            bytes,
            "{op}: replayed bytes"
        );
        let daemon_bw = bytes as f64 / ((last - first) as f64 / 1e9);
        let sim_bw = sim[op]["bw_bytes"].as_f64().unwrap();
        let err = sim_bw / daemon_bw - 1.0;
        assert!(
            err.abs() < 0.05,
            "{op}: the replayed drive moves {sim_bw:.0} B/s, the daemon measured {daemon_bw:.0} B/s ({:+.1} %)",
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
            arrival_ns: i * 50_000,
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
        arrival_ns: 200 * 50_000,
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
    // fio trims only block devices (psync on a file skips them).
    assert!(j["trim"]["total_ios"].as_u64().unwrap() <= count(vt::RecOp::Discard));
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
    // 1 MiB holds 18,722 records: write more than that.
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
            arrival_ns: 10,
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
    version[8] = 2;
    let mut huge = good.clone();
    huge[40..48].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let cases: Vec<(std::path::PathBuf, &str)> = vec![
        (
            p("truncated", &truncated),
            "truncated: its header says 2 records",
        ),
        (
            p("version", &version),
            "trace format version 2; this vssd reads version 1",
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
