#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! `vssd serve` driven by vssd's own vhost-user-blk driver (no guest):
//! requests and data, malformed requests, and a hostile frontend whose
//! memory table would make the daemon touch memory past the end of a file.

mod common;

use std::time::Duration;

use common::serve::Serve;
use common::{fd_count, rss_bytes, scratch_dir};
use virtio_bindings::virtio_blk::{VIRTIO_BLK_S_IOERR, VIRTIO_BLK_S_OK, VIRTIO_BLK_S_UNSUPP};
use vssd::loadgen::blk::{self, BlkOp, Scratch};
use vssd::loadgen::vring::Buf;
use vssd::loadgen::{BlkDriver, DriverOptions};

const T: Duration = Duration::from_secs(20);
const OK: u8 = VIRTIO_BLK_S_OK as u8;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[1] ^ seed)
        .collect()
}

#[test]
fn requests_data_and_errors_through_our_own_driver() {
    let dir = scratch_dir();
    let serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "sata-mlc-2011",
            "--capacity",
            "256M",
            "--memory",
            "--queues",
            "2",
        ],
    );
    let mut d = BlkDriver::connect(
        &serve.socket,
        &DriverOptions {
            queues: 2,
            ..DriverOptions::default()
        },
    )
    .expect("connect");
    assert_eq!(d.info().capacity, 256 << 20);
    assert_eq!(d.info().num_queues, 2);
    let s = Scratch::new(&mut d, 1 << 20).unwrap();

    // Write on one queue, read back on the other.
    let data = pattern(256 << 10, 7);
    let r = blk::run(
        &mut d,
        0,
        &s,
        &BlkOp::Write {
            sector: 2048,
            data: data.clone(),
        },
        T,
    )
    .unwrap();
    assert_eq!(r.status, OK);
    let r = blk::run(
        &mut d,
        1,
        &s,
        &BlkOp::Read {
            sector: 2048,
            len: 256 << 10,
        },
        T,
    )
    .unwrap();
    assert_eq!((r.status, r.used_len), (OK, (256 << 10) + 1));
    assert!(r.data == data, "data read back differs");

    // Discard the first 64 KiB of it: zeros there, data after.
    let r = blk::run(&mut d, 0, &s, &BlkOp::Discard(vec![(2048, 128)]), T).unwrap();
    assert_eq!(r.status, OK);
    let r = blk::run(
        &mut d,
        0,
        &s,
        &BlkOp::Read {
            sector: 2048,
            len: 128 << 10,
        },
        T,
    )
    .unwrap();
    assert!(r.data[..64 << 10].iter().all(|&b| b == 0));
    assert!(r.data[64 << 10..] == data[64 << 10..128 << 10]);

    // Serial, flush.
    let r = blk::run(&mut d, 0, &s, &BlkOp::GetId, T).unwrap();
    assert_eq!(r.status, OK);
    assert!(r.data.starts_with(b"VSSD"));
    assert_eq!(
        blk::run(&mut d, 1, &s, &BlkOp::Flush, T).unwrap().status,
        OK
    );

    // Malformed: unknown type, out of range, unaligned length, discard with
    // a flag, oversized discard segment. Each gets its status; nothing stops.
    let raw = |kind, sector, out: Vec<u8>, in_len| BlkOp::Raw {
        kind,
        sector,
        out,
        in_len,
    };
    let cap_sectors = (256u64 << 20) / 512;
    let seg = |sector: u64, n: u32, flags: u32| {
        let mut v = sector.to_le_bytes().to_vec();
        v.extend(n.to_le_bytes());
        v.extend(flags.to_le_bytes());
        v
    };
    let cases = [
        (raw(99, 0, vec![], 0), VIRTIO_BLK_S_UNSUPP),
        (
            BlkOp::Read {
                sector: cap_sectors - 1,
                len: 4096,
            },
            VIRTIO_BLK_S_IOERR,
        ),
        (
            BlkOp::Read {
                sector: u64::MAX - 2,
                len: 4096,
            },
            VIRTIO_BLK_S_IOERR,
        ),
        (raw(0, 0, vec![], 1000), VIRTIO_BLK_S_IOERR),
        (raw(11, 0, seg(0, 8, 1), 0), VIRTIO_BLK_S_UNSUPP),
        (raw(11, 0, seg(0, u32::MAX, 0), 0), VIRTIO_BLK_S_IOERR),
        (raw(11, 0, vec![1, 2, 3], 0), VIRTIO_BLK_S_IOERR),
    ];
    for (op, want) in &cases {
        let r = blk::run(&mut d, 0, &s, op, T).unwrap();
        assert_eq!(r.status, *want as u8, "{op:?}");
    }
    // Still serving, and the audit counted what it should.
    let r = blk::run(
        &mut d,
        1,
        &s,
        &BlkOp::Read {
            sector: 4096,
            len: 4096,
        },
        T,
    )
    .unwrap();
    assert_eq!(r.status, OK);
    let rep = serve.report();
    assert_eq!(rep.connection.rejected, cases.len() as u64);
    assert_eq!(rep.connection.in_flight, 0);
    let fe = &rep.frontends[0];
    assert_eq!(fe.kind, "vhost-user-blk");
    assert_eq!(
        fe.connections, 1,
        "one connection (no liveness probe counted)"
    );
    assert_eq!(fe.io.trim.discard_cmds, 1);
    assert_eq!(fe.io.trim.requested_bytes, 64 << 10);
    drop(d);
    serve.stop_ok();
}

/// Hardening: a memory table whose region is longer than the file behind
/// it (touching its end would be a SIGBUS) is refused; the daemon lives on
/// and serves the next frontend.
/// A new frontend connects after a hostile one and writes and reads back
/// 4 KiB at `sector`: the daemon is serving again.
fn next_frontend_round_trips(serve: &Serve, sector: u64, seed: u8) {
    let mut d = BlkDriver::connect(&serve.socket, &DriverOptions::default())
        .expect("the next frontend connects");
    let s = Scratch::new(&mut d, 4096).unwrap();
    let data = pattern(4096, seed);
    let w = BlkOp::Write {
        sector,
        data: data.clone(),
    };
    assert_eq!(blk::run(&mut d, 0, &s, &w, T).unwrap().status, OK);
    let r = blk::run(&mut d, 0, &s, &BlkOp::Read { sector, len: 4096 }, T).unwrap();
    assert!(r.status == OK && r.data == data);
}

#[test]
fn memory_region_past_the_end_of_its_file_is_refused() {
    let dir = scratch_dir();
    let mut serve = Serve::start(
        dir.path(),
        &["--profile", "instant", "--capacity", "64M", "--memory"],
    );
    let hostile = BlkDriver::connect(
        &serve.socket,
        &DriverOptions {
            mem_bytes: 8 << 20,
            declared_mem_bytes: Some(1 << 30),
            ..DriverOptions::default()
        },
    );
    match hostile {
        Err(e) => eprintln!("hostile frontend refused: {e}"),
        Ok(mut d) => {
            // If the refusal was not reported to it, requests must go unanswered
            // (never executed against the bad mapping), not crash the daemon.
            let s = Scratch::new(&mut d, 4096).unwrap();
            let r = blk::run(&mut d, 0, &s, &BlkOp::Flush, Duration::from_millis(500));
            assert!(r.is_err(), "a request was served on a refused memory table");
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(serve.alive(), "daemon died:\n{}", serve.log_text());
    assert!(
        serve.log_text().contains("past the end of its file"),
        "{}",
        serve.log_text()
    );
    next_frontend_round_trips(&serve, 8, 3);
    serve.stop_ok();
}

/// Hardening: `ctl precondition` runs in chunks: guest I/O is served while
/// it runs (a request completes before the precondition does), and closing
/// the client cancels it, keeping what was done.
#[test]
fn precondition_lets_io_through_and_can_be_cancelled() {
    use std::io::{BufRead, BufReader, Write};
    let dir = scratch_dir();
    let serve = Serve::start(
        dir.path(),
        &["--profile", "sata-mlc-2011", "--capacity", "1G", "--memory"],
    );
    // A long precondition (many capacities of random writes), with progress.
    let req = b"{\"cmd\":\"precondition\",\"steps\":[{\"step\":\"random\",\"bs\":4096,\"amount\":\"50x\"}],\"progress\":true}\n";
    let mut ctl = std::os::unix::net::UnixStream::connect(&serve.control).unwrap();
    ctl.write_all(req).unwrap();
    let mut lines = BufReader::new(ctl.try_clone().unwrap());
    let mut first = String::new();
    lines.read_line(&mut first).unwrap();
    assert!(
        first.contains("\"progress\""),
        "a progress line first: {first}"
    );

    // Meanwhile the drive serves I/O and ctl stats.
    let mut d = BlkDriver::connect(&serve.socket, &DriverOptions::default()).unwrap();
    let s = Scratch::new(&mut d, 4096).unwrap();
    let r = blk::run(
        &mut d,
        0,
        &s,
        &BlkOp::Write {
            sector: 0,
            data: pattern(4096, 1),
        },
        T,
    )
    .unwrap();
    assert_eq!(r.status, OK);
    let during = serve.report();
    let mut next = String::new();
    lines.read_line(&mut next).unwrap();
    assert!(
        next.contains("\"progress\""),
        "the precondition was still running after the write and a stats call: {next}"
    );
    // Cancel: close the connection.
    drop(lines);
    drop(ctl);
    let t = std::time::Instant::now();
    while !serve.log_text().contains("cancelled") {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no cancellation:\n{}",
            serve.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = serve.report();
    let written = after.counters.host_written_bytes;
    assert!(written >= during.counters.host_written_bytes);
    assert!(
        written < 50 << 30,
        "cancelled before the end: {written} bytes"
    );
    // Still serving.
    let r = blk::run(
        &mut d,
        0,
        &s,
        &BlkOp::Read {
            sector: 0,
            len: 4096,
        },
        T,
    )
    .unwrap();
    assert!(r.status == OK && r.data == pattern(4096, 1));
    drop(d);
    serve.stop_ok();
}

/// Hardening: a guest write the backing file cannot take (here: over the
/// process's file size limit, as on a full disk) fails with an I/O error
/// status, is logged at warn level, and the daemon keeps serving.
#[test]
fn backing_file_full_is_an_error_status_and_a_warning() {
    let dir = scratch_dir();
    let img = dir.path().join("disk.img");
    // Sized before the limit applies; writes past 16 MiB will fail.
    std::fs::File::create(&img)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let sock = dir.path().join("vhost.sock");
    let ctl = dir.path().join("ctl.sock");
    let log = dir.path().join("serve.log");
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f 32768; exec {} serve --socket {} --control {} --profile instant --capacity 64M --backing {}",
            common::serve::VSSD,
            sock.display(),
            ctl.display(),
            img.display()
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let t = std::time::Instant::now();
    while !sock.exists() || std::os::unix::net::UnixStream::connect(&ctl).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "daemon did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut d = BlkDriver::connect(&sock, &DriverOptions::default()).unwrap();
    let s = Scratch::new(&mut d, 4096).unwrap();
    let low = blk::run(
        &mut d,
        0,
        &s,
        &BlkOp::Write {
            sector: 8,
            data: pattern(4096, 2),
        },
        T,
    )
    .unwrap();
    assert_eq!(low.status, OK);
    let high_sector = (32u64 << 20) / 512;
    let high = blk::run(
        &mut d,
        0,
        &s,
        &BlkOp::Write {
            sector: high_sector,
            data: pattern(4096, 2),
        },
        T,
    )
    .unwrap();
    assert_eq!(high.status, VIRTIO_BLK_S_IOERR as u8);
    let r = blk::run(
        &mut d,
        0,
        &s,
        &BlkOp::Read {
            sector: 8,
            len: 4096,
        },
        T,
    )
    .unwrap();
    assert!(r.status == OK && r.data == pattern(4096, 2));
    drop(d);
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) };
    child.0.wait().unwrap();
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("WARN") && l.contains("Write of 4096 bytes failed")),
        "{log}"
    );
}

/// `vssd loadgen ARGS --json` against `socket`: (exit status, parsed report).
fn loadgen(socket: &std::path::Path, args: &[&str]) -> (bool, serde_json::Value) {
    let out = std::process::Command::new(common::serve::VSSD)
        .arg("loadgen")
        .arg("--socket")
        .arg(socket)
        .args(args)
        .arg("--json")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running vssd loadgen");
    let text = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "loadgen printed no JSON ({e}):\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.success(), v)
}

/// The load generator with `--verify` at QD 32 on 2 queues, mixed random
/// reads and writes, against a timed profile: every block read back is
/// what was last written there, no request fails, nothing is left in flight.
#[test]
fn loadgen_verifies_data_at_qd32_on_two_queues() {
    let dir = scratch_dir();
    let serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "sata-mlc-2011",
            "--capacity",
            "1G",
            "--memory",
            "--queues",
            "2",
        ],
    );
    for rw in ["randrw", "write"] {
        let (ok, r) = loadgen(
            &serve.socket,
            &[
                "--rw",
                rw,
                "--bs",
                "16k",
                "--iodepth",
                "32",
                "--queues",
                "2",
                "--runtime",
                "1.5",
                "--size",
                "32M",
                "--verify",
            ],
        );
        let j = &r["jobs"][0];
        assert!(ok, "{rw}: loadgen failed: {j:#}");
        assert_eq!(j["error"], 0, "{j:#}");
        assert_eq!(j["io_errors"], 0, "{j:#}");
        let v = &j["verify"];
        assert_eq!(v["errors"], 0, "{v:#}");
        assert!(v["pass_checked"].as_u64().unwrap() > 0, "{v:#}");
        assert!(j["write"]["total_ios"].as_u64().unwrap() > 0, "{j:#}");
        assert_eq!(r["backend"]["num_queues"], 2);
    }
    // A read-only pass of the same region checks the blocks by their headers.
    let (ok, r) = loadgen(
        &serve.socket,
        &[
            "--rw",
            "read",
            "--bs",
            "16k",
            "--iodepth",
            "32",
            "--queues",
            "2",
            "--runtime",
            "0.5",
            "--size",
            "32M",
            "--verify",
        ],
    );
    let v = &r["jobs"][0]["verify"];
    assert!(ok && v["errors"] == 0, "{v:#}");
    assert_eq!(v["unverifiable"], 0, "{v:#}");
    // A block copied elsewhere (misdirected write) is caught.
    let mut d = BlkDriver::connect(&serve.socket, &DriverOptions::default()).unwrap();
    let s = Scratch::new(&mut d, 16 << 10).unwrap();
    let a = blk::run(
        &mut d,
        0,
        &s,
        &BlkOp::Read {
            sector: 0,
            len: 16 << 10,
        },
        T,
    )
    .unwrap();
    let w = BlkOp::Write {
        sector: 32,
        data: a.data,
    };
    assert_eq!(blk::run(&mut d, 0, &s, &w, T).unwrap().status, OK);
    drop(d);
    let (ok, r) = loadgen(
        &serve.socket,
        &[
            "--rw",
            "read",
            "--bs",
            "16k",
            "--iodepth",
            "4",
            "--runtime",
            "0.5",
            "--size",
            "32M",
            "--verify",
        ],
    );
    let v = &r["jobs"][0]["verify"];
    assert!(!ok && v["errors"].as_u64().unwrap() > 0, "{v:#}");
    assert!(
        v["first_errors"][0]
            .as_str()
            .unwrap()
            .contains("block at 16384"),
        "{v:#}"
    );
    let rep = serve.report();
    assert_eq!(rep.connection.in_flight, 0);
    assert_eq!(rep.connection.rejected, 0);
    serve.stop_ok();
}

/// `loadgen --malformed`: out-of-range sectors, bad descriptor layouts,
/// unknown types, oversized segments each get their status, and the
/// daemon serves a valid request after each one.
#[test]
fn loadgen_malformed_requests_are_refused_and_the_daemon_keeps_serving() {
    let dir = scratch_dir();
    let mut serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "instant",
            "--capacity",
            "64M",
            "--memory",
            "--queues",
            "2",
        ],
    );
    let (ok, r) = loadgen(&serve.socket, &["--malformed", "--queues", "2"]);
    assert!(ok, "{r:#}");
    assert_eq!(r["passed"], true, "{r:#}");
    let cases = r["cases"].as_array().unwrap();
    assert!(cases.len() >= 20, "{r:#}");
    for c in cases {
        assert_eq!(c["ok"], true, "{c:#}");
        assert_eq!(c["still_serving"], true, "{c:#}");
        let want = match c["expected"].as_str().unwrap() {
            "unsupported" => Some(VIRTIO_BLK_S_UNSUPP as u64),
            "io_error" => Some(VIRTIO_BLK_S_IOERR as u64),
            _ => None,
        };
        if let Some(w) = want {
            assert_eq!(c["status"].as_u64(), Some(w), "{c:#}");
        }
    }
    assert!(serve.alive());
    let rep = serve.report();
    assert_eq!(rep.connection.in_flight, 0);
    assert!(
        rep.connection.rejected >= cases.len() as u64 - 5,
        "{:?}",
        rep.connection
    );
    serve.stop_ok();
}

/// A whole-disk discard on a file-backed drive: its holes are punched off
/// the request's path, yet the range reads as zeros at once, a write into
/// it afterwards is never undone by the late punching, and a FLUSH waits
/// for the punching (the file's blocks are freed by then).
#[test]
fn large_discard_reads_zeros_at_once_and_later_writes_survive() {
    use std::os::unix::fs::MetadataExt;
    let dir = scratch_dir();
    let img = dir.path().join("disk.img");
    let img_s = img.to_str().unwrap().to_string();
    let serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "sata-mlc-2011",
            "--capacity",
            "2G",
            "--backing",
            &img_s,
        ],
    );
    let (ok, r) = loadgen(
        &serve.socket,
        &[
            "--rw",
            "write",
            "--bs",
            "1M",
            "--iodepth",
            "8",
            "--runtime",
            "120",
            "--io-size",
            "1G",
        ],
    );
    assert!(ok, "{r:#}");
    let filled = std::fs::metadata(&img).unwrap().blocks() * 512;
    assert!(filled >= 1 << 30, "{filled}");

    let mut d = BlkDriver::connect(&serve.socket, &DriverOptions::default()).unwrap();
    let s = Scratch::new(&mut d, 2 << 20).unwrap();
    let gib = (1u64 << 30) / 512;
    let r = blk::run(
        &mut d,
        0,
        &s,
        &BlkOp::Discard(vec![(0, gib as u32), (gib, gib as u32)]),
        T,
    )
    .unwrap();
    assert_eq!(r.status, OK);
    for sector in [0u64, 8, 1 << 20, (1 << 21) - 8] {
        let r = blk::run(&mut d, 0, &s, &BlkOp::Read { sector, len: 4096 }, T).unwrap();
        assert_eq!(r.status, OK);
        assert!(r.data.iter().all(|&b| b == 0), "sector {sector} not zero");
    }
    let data = pattern(1 << 20, 9);
    let w = BlkOp::Write {
        sector: 1 << 20,
        data: data.clone(),
    };
    assert_eq!(blk::run(&mut d, 0, &s, &w, T).unwrap().status, OK);
    assert_eq!(
        blk::run(&mut d, 0, &s, &BlkOp::Flush, T).unwrap().status,
        OK
    );
    let r = blk::run(
        &mut d,
        0,
        &s,
        &BlkOp::Read {
            sector: (1 << 20) - 8,
            len: (1 << 20) + 8192,
        },
        T,
    );
    let r = r.unwrap();
    assert!(r.data[..4096].iter().all(|&b| b == 0));
    assert!(
        r.data[4096..4096 + (1 << 20)] == data[..],
        "the write was undone"
    );
    assert!(r.data[4096 + (1 << 20)..].iter().all(|&b| b == 0));
    let left = std::fs::metadata(&img).unwrap().blocks() * 512;
    assert!(
        left < 4 << 20,
        "{left} bytes still allocated after the flush"
    );
    drop(d);
    serve.stop_ok();
}

/// `serve --metrics`: Prometheus text over HTTP with the numbers of `ctl stats`.
#[test]
fn metrics_endpoint_serves_the_ctl_stats_numbers() {
    use std::io::{Read, Write};
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let dir = scratch_dir();
    let serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "instant",
            "--capacity",
            "64M",
            "--memory",
            "--metrics",
            &addr,
        ],
    );
    let (ok, _) = loadgen(
        &serve.socket,
        &["--rw", "randwrite", "--iodepth", "4", "--runtime", "0.3"],
    );
    assert!(ok);
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    let rep = serve.report();
    let line = format!(
        "vssd_host_written_bytes_total {}",
        rep.counters.host_written_bytes
    );
    assert!(text.contains(&line), "{line} not in\n{text}");
    assert!(text.contains("vssd_lateness_seconds_bucket"), "{text}");
    // SMART (instant: the generic set): LBAs written from the same counter.
    let smart = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("vssd_smart_attribute_raw{id=\"241\",name=\"Total_LBAs_Written\"} ")
        })
        .unwrap_or_else(|| panic!("no SMART attribute 241 in\n{text}"));
    let lbas: f64 = smart.trim().parse().unwrap();
    assert_eq!(lbas as u64, rep.counters.host_written_bytes / 512);
    assert!(
        text.contains("vssd_process_resident_memory_bytes"),
        "{text}"
    );
    // Anything else is a 404; a non-loopback address is refused at start.
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.write_all(b"GET /nope HTTP/1.1\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 404"), "{text}");
    serve.stop_ok();
    let out = std::process::Command::new(common::serve::VSSD)
        .args(["serve", "--profile", "instant", "--memory", "--socket"])
        .arg(dir.path().join("x.sock"))
        .args(["--metrics", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a loopback address"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// utime + stime of process `pid`, seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) start at ") ".
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5), 12 and 13 here.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks as f64 / hz
}

/// Open file descriptors of process `pid`.
/// Hardening: a frontend (or a guest kernel writing its own ring) that
/// publishes an available index more than a queue size ahead, with
/// EVENT_IDX, must not make the queue thread spin: the queue is marked
/// broken and logged once, the thread returns to its event loop, the
/// frontend's disconnect is seen, the next frontend is served and SIGTERM
/// still stops the daemon.
#[test]
fn avail_index_beyond_the_queue_size_does_not_spin() {
    let dir = scratch_dir();
    let mut serve = Serve::start(
        dir.path(),
        &["--profile", "instant", "--capacity", "64M", "--memory"],
    );
    let pid = serve.pid();
    let mut d = BlkDriver::connect(&serve.socket, &DriverOptions::default()).unwrap();
    assert!(d.queue(0).ring.event_idx(), "EVENT_IDX negotiated");
    // One good request first, so the queue thread is known to be running.
    let s = Scratch::new(&mut d, 4096).unwrap();
    assert_eq!(
        blk::run(&mut d, 0, &s, &BlkOp::Flush, T).unwrap().status,
        OK
    );
    let (_, avail, _) = d.queue(0).ring.addrs();
    let mut idx = [0u8; 2];
    d.read_mem(avail + 2, &mut idx).unwrap();
    let last = u16::from_le_bytes(idx);
    let size = d.queue(0).ring.size();
    std::thread::sleep(Duration::from_millis(100));
    let log_before = serve.log_text().lines().count();
    let cpu_before = cpu_seconds(pid);
    d.publish_raw_avail_idx(0, last.wrapping_add(size).wrapping_add(1))
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let cpu = cpu_seconds(pid) - cpu_before;
    let log = serve.log_text();
    let grown = log.lines().count() - log_before;
    assert!(
        cpu < 0.5,
        "{cpu:.2} s of CPU in 2 s after a bogus avail index"
    );
    assert!(
        grown <= 5,
        "the log grew by {grown} lines:\n{}",
        &log[log.len().saturating_sub(2000)..]
    );
    assert!(
        log.contains("available"),
        "the broken ring is logged:\n{log}"
    );
    drop(d);
    // The disconnect is seen: a second frontend connects and does I/O.
    let mut d = BlkDriver::connect(&serve.socket, &DriverOptions::default())
        .expect("the next frontend connects");
    let s = Scratch::new(&mut d, 4096).unwrap();
    let data = pattern(4096, 5);
    let w = BlkOp::Write {
        sector: 16,
        data: data.clone(),
    };
    assert_eq!(blk::run(&mut d, 0, &s, &w, T).unwrap().status, OK);
    let r = blk::run(
        &mut d,
        0,
        &s,
        &BlkOp::Read {
            sector: 16,
            len: 4096,
        },
        T,
    )
    .unwrap();
    assert!(r.status == OK && r.data == data);
    // Broken again on this connection, then SIGTERM: the daemon stops soon.
    let (_, avail, _) = d.queue(0).ring.addrs();
    d.read_mem(avail + 2, &mut idx).unwrap();
    let last = u16::from_le_bytes(idx);
    d.publish_raw_avail_idx(0, last.wrapping_add(size).wrapping_add(1))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let t = std::time::Instant::now();
    let (code, log) = serve.stop();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "SIGTERM took {:?}",
        t.elapsed()
    );
    assert_eq!(code, 0, "{log}");
    drop(d);
}

/// A frontend that shrinks its memfd after SET_MEM_TABLE makes the
/// daemon's next access to that memory fault (SIGBUS). The daemon must
/// survive it: that frontend's queues stop, and the next one is served.
#[test]
fn shrinking_the_shared_memory_does_not_kill_the_daemon() {
    let dir = scratch_dir();
    let mut serve = Serve::start(
        dir.path(),
        &["--profile", "instant", "--capacity", "64M", "--memory"],
    );
    let mut d = BlkDriver::connect(&serve.socket, &DriverOptions::default()).unwrap();
    let s = Scratch::new(&mut d, 4096).unwrap();
    assert_eq!(
        blk::run(&mut d, 0, &s, &BlkOp::Flush, T).unwrap().status,
        OK
    );
    // A request whose header lies past the cut: the backend faults reading it.
    let hdr_at = d.alloc(4096).unwrap();
    let mut hdr = [0u8; 16];
    hdr[0..4].copy_from_slice(&1u32.to_le_bytes()); // VIRTIO_BLK_T_OUT
    d.write_mem(hdr_at, &hdr).unwrap();
    let bufs = [
        Buf {
            addr: hdr_at,
            len: 16,
            write: false,
        },
        Buf {
            addr: hdr_at + 512,
            len: 512,
            write: false,
        },
        Buf {
            addr: hdr_at + 16,
            len: 1,
            write: true,
        },
    ];
    d.add(0, &bufs).unwrap();
    d.truncate_shared_memory(hdr_at).unwrap();
    d.kick(0).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(serve.alive(), "daemon died:\n{}", serve.log_text());
    assert!(
        serve.log_text().contains("shrank"),
        "the fault is logged:\n{}",
        serve.log_text()
    );
    // No completion for that request (its status byte is past the cut too).
    assert!(!d.queue(0).wait_call(Duration::from_millis(200)).unwrap());
    drop(d);
    next_frontend_round_trips(&serve, 24, 9);
    serve.stop_ok();
}

/// Soak: a daemon serving a VM for months sees any number of reconnects
/// (guest reboots, QEMU restarts, liveness probes). 5,000 vhost-user
/// connect-and-close cycles and 500 NBD handshakes abandoned half-way
/// leave its fd count where it was and its memory flat (a leak of one
/// eventfd per cycle, fixed before, exhausted 1,024 fds in 1,000 cycles).
#[test]
fn soak_reconnects_and_abandoned_handshakes_leave_fds_and_memory_flat() {
    use std::io::{Read, Write};
    let dir = scratch_dir();
    let nbd = dir.path().join("nbd.sock");
    let serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "instant",
            "--capacity",
            "64M",
            "--memory",
            "--queues",
            "2",
            "--nbd",
            &format!("unix:{}", nbd.display()),
        ],
    );
    let pid = serve.pid();
    let opts = DriverOptions {
        queues: 2,
        mem_bytes: 4 << 20,
        ..DriverOptions::default()
    };
    let cycle = || {
        let d = BlkDriver::connect(&serve.socket, &opts).expect("connect");
        drop(d);
    };
    let abandon = || {
        let mut s = std::os::unix::net::UnixStream::connect(&nbd).unwrap();
        let mut greeting = [0u8; 18];
        s.read_exact(&mut greeting).unwrap();
        // Client flags, then half an option header: gone mid-handshake.
        s.write_all(&3u32.to_be_bytes()).unwrap();
        s.write_all(b"IHAVE").unwrap();
    };
    // Warm up: the first connections open things that stay (lazily
    // started helper threads, allocator arenas).
    for _ in 0..200 {
        cycle();
    }
    for _ in 0..50 {
        abandon();
    }
    // The daemon notices each close asynchronously: wait until it is idle.
    let settle = || {
        let mut last = fd_count(pid);
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let now = fd_count(pid);
            if now == last {
                return (now, rss_bytes(pid) / 1024);
            }
            last = now;
        }
    };
    let (fds0, rss0) = settle();
    let t = std::time::Instant::now();
    for i in 0..5000 {
        cycle();
        if i % 10 == 0 {
            abandon();
        }
    }
    let (fds1, rss1) = settle();
    eprintln!(
        "5000 reconnects and 500 abandoned NBD handshakes in {:?}: fds {fds0} -> {fds1}, \
         RSS {rss0} -> {rss1} KiB",
        t.elapsed()
    );
    assert!(
        fds1 <= fds0 + 3,
        "fd count grew from {fds0} to {fds1} over 5,000 reconnects"
    );
    assert!(
        rss1 <= rss0 + 16 * 1024,
        "RSS grew from {rss0} to {rss1} KiB over 5,000 reconnects"
    );
    // Still serving both ways.
    cycle();
    let mut s = std::os::unix::net::UnixStream::connect(&nbd).unwrap();
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting).unwrap();
    assert_eq!(&greeting[..8], b"NBDMAGIC");
    serve.stop_ok();
}
