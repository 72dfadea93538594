#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! Injected faults (`vssd ctl fault ...`) through every frontend's error
//! path: a read error at one sector is EIO (NBD, via libnbd's nbdsh) and
//! VIRTIO_BLK_S_IOERR (vhost-user, via vssd's own driver) exactly there,
//! a write error writes nothing, stalls are in the modelled latency, and
//! hostile fault requests get one-line errors.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::scratch_dir;
use common::serve::{Serve, VSSD};
use vhost::VhostBackend as _;
use virtio_bindings::virtio_blk::{VIRTIO_BLK_S_IOERR, VIRTIO_BLK_S_OK};
use vssd::loadgen::blk::{self, BlkOp, Scratch};
use vssd::loadgen::{BlkDriver, DriverOptions};

const T: Duration = Duration::from_secs(20);
const OK: u8 = VIRTIO_BLK_S_OK as u8;
const IOERR: u8 = VIRTIO_BLK_S_IOERR as u8;

/// One raw request line over the control socket: the reply line.
fn raw_line(control: &Path, line: &str) -> String {
    use std::io::{BufRead, BufReader, Write};
    let mut s = std::os::unix::net::UnixStream::connect(control).unwrap();
    s.write_all(format!("{line}\n").as_bytes()).unwrap();
    let mut reply = String::new();
    BufReader::new(s).read_line(&mut reply).unwrap();
    reply
}

fn ctl(control: &Path, args: &[&str]) -> Output {
    Command::new(VSSD)
        .arg("ctl")
        .arg("--control")
        .arg(control)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `vssd ctl ARGS --json`, which must succeed: the parsed reply.
fn ctl_json(control: &Path, args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.push("--json");
    let out = ctl(control, &a);
    assert!(
        out.status.success(),
        "ctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Run nbdsh with `script` against `sock` (Debian's python3 for nbdsh).
fn nbdsh(sock: &Path, script: &str) -> String {
    let out = Command::new("nbdsh")
        .args(["-u", &format!("nbd+unix:///?socket={}", sock.display())])
        .args(["-c", script])
        .env("PATH", "/usr/bin:/bin:/usr/sbin:/sbin")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("nbdsh: {e} (install with scripts/install-deps.sh)"));
    assert!(
        out.status.success(),
        "nbdsh failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no {prefix} in {out}"))
}

/// A Python function `probe(off, n)` printing `OK`, `EIO` or the errno of
/// a read, and `same(off, n, byte)` checking what reads back.
/// `vssd serve` of a 64 MiB `preset` in memory with an NBD socket in
/// `dir`; the socket's path.
fn serve_nbd(dir: &Path, preset: &str) -> (Serve, std::path::PathBuf) {
    let sock = dir.join("nbd.sock");
    let serve = Serve::start_with(
        dir,
        &[
            "--profile",
            preset,
            "--capacity",
            "64M",
            "--memory",
            "--nbd",
            &format!("unix:{}", sock.display()),
        ],
        false,
    );
    (serve, sock)
}

const PROBES: &str = "import errno\n\
def probe(off, n):\n    try:\n        h.pread(n, off)\n        return 'OK'\n    except nbd.Error as e:\n        return 'EIO' if e.errno in (errno.EIO, 'EIO') else 'errno %s' % e.errno\n\
def wprobe(off, n, b):\n    try:\n        h.pwrite(bytes([b]) * n, off)\n        return 'OK'\n    except nbd.Error as e:\n        return 'EIO' if e.errno in (errno.EIO, 'EIO') else 'errno %s' % e.errno\n";

#[test]
fn nbd_read_error_is_eio_at_its_sector_and_nowhere_else() {
    let dir = scratch_dir();
    let (serve, sock) = serve_nbd(dir.path(), "sata-mlc-2011");
    nbdsh(&sock, "h.pwrite(b'\\x5a' * 65536, 0)\nh.flush()");
    // Sector 9 (bytes 4608..5120) cannot be read.
    let added = ctl_json(
        &serve.control,
        &[
            "fault",
            "add",
            "read-error",
            "--offset",
            "4608",
            "--length",
            "512",
        ],
    );
    let id = added["fault"]["id"].as_u64().unwrap();
    let script = format!(
        "{PROBES}\
         print('SECTORS', ' '.join(probe(s * 512, 512) for s in range(16)))\n\
         print('AROUND', probe(0, 4608), probe(5120, 60416), probe(4096, 4096), probe(0, 65536))\n\
         print('DATA', sorted(set(h.pread(4608, 0) + h.pread(60416, 5120))))\n\
         print('WRITE', wprobe(4608, 512, 0x11))\n"
    );
    let out = nbdsh(&sock, &script);
    let want: Vec<&str> = (0..16).map(|s| if s == 9 { "EIO" } else { "OK" }).collect();
    assert_eq!(line(&out, "SECTORS "), want.join(" "), "{out}");
    assert_eq!(line(&out, "AROUND "), "OK OK EIO EIO", "{out}");
    assert_eq!(line(&out, "DATA "), "[90]", "data outside is untouched");
    // A read error does not fail writes; the fault stays until cleared.
    assert_eq!(line(&out, "WRITE "), "OK");
    let list = ctl_json(&serve.control, &["fault", "list"]);
    assert_eq!(list["active"][0]["hits"], 3, "{list}");
    assert_eq!(list["counters"]["read_errors_injected"], 3, "{list}");
    // ctl stats and its text carry the same counters.
    let stats = serve.stats();
    assert_eq!(stats["faults"]["counters"]["read_errors_injected"], 3);
    let text = String::from_utf8(ctl(&serve.control, &["fault", "list"]).stdout).unwrap();
    assert!(
        text.contains("read-error") && text.contains("3 hits"),
        "{text}"
    );

    // A write error: the write fails and leaves the old data; neighbours
    // are written.
    ctl_json(&serve.control, &["fault", "clear", &id.to_string()]);
    ctl_json(
        &serve.control,
        &[
            "fault",
            "add",
            "write-error",
            "--offset",
            "32k",
            "--length",
            "4k",
        ],
    );
    let out = nbdsh(
        &sock,
        &format!(
            "{PROBES}\
             print('W', wprobe(28672, 4096, 0x22), wprobe(30720, 4096, 0x33), wprobe(36864, 4096, 0x44))\n\
             print('R', probe(0, 65536))\n\
             print('B', [sorted(set(h.pread(4096, o))) for o in (28672, 32768, 36864)])\n"
        ),
    );
    assert_eq!(line(&out, "W "), "OK EIO OK", "{out}");
    assert_eq!(line(&out, "R "), "OK", "reads are unaffected");
    assert_eq!(line(&out, "B "), "[[34], [90], [68]]", "{out}");
    // Write-zeroes over the range fails too.
    let out = nbdsh(
        &sock,
        "import errno\ntry:\n    h.zero(4096, 32768)\n    print('Z OK')\nexcept nbd.Error as e:\n    print('Z', e.errno in (errno.EIO, 'EIO'))\n",
    );
    assert_eq!(line(&out, "Z "), "True", "{out}");
    let list = ctl_json(&serve.control, &["fault", "list"]);
    assert_eq!(list["counters"]["write_errors_injected"], 2, "{list}");
    // Cleared, the range is writable again.
    let cleared = ctl_json(&serve.control, &["fault", "clear"]);
    assert_eq!(cleared["cleared"], 1);
    let out = nbdsh(
        &sock,
        &format!("{PROBES}print('W', wprobe(32768, 4096, 0x55))\n"),
    );
    assert_eq!(line(&out, "W "), "OK");
    serve.stop_ok();
}

#[test]
fn vhost_user_read_error_is_ioerr_at_its_sector_and_nowhere_else() {
    let dir = scratch_dir();
    let serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "sata-mlc-2011",
            "--capacity",
            "64M",
            "--memory",
        ],
    );
    let mut d = BlkDriver::connect(&serve.socket, &DriverOptions::default()).expect("connect");
    let s = Scratch::new(&mut d, 1 << 20).unwrap();
    let data = vec![0xA5u8; 64 << 10];
    let w = BlkOp::Write {
        sector: 0,
        data: data.clone(),
    };
    assert_eq!(blk::run(&mut d, 0, &s, &w, T).unwrap().status, OK);
    ctl_json(
        &serve.control,
        &[
            "fault",
            "add",
            "read-error",
            "--offset",
            "20480",
            "--length",
            "1024",
        ],
    );
    // Sectors 40 and 41 fail; every other sector reads back.
    for sector in 0..128u64 {
        let r = blk::run(&mut d, 0, &s, &BlkOp::Read { sector, len: 512 }, T).unwrap();
        if sector == 40 || sector == 41 {
            assert_eq!(r.status, IOERR, "sector {sector}");
        } else {
            assert_eq!(r.status, OK, "sector {sector}");
            assert!(r.data == data[..512], "sector {sector} data");
        }
    }
    let r = blk::run(
        &mut d,
        0,
        &s,
        &BlkOp::Read {
            sector: 0,
            len: 64 << 10,
        },
        T,
    )
    .unwrap();
    assert_eq!(r.status, IOERR, "a read spanning the range");
    let r = blk::run(
        &mut d,
        0,
        &s,
        &BlkOp::Read {
            sector: 42,
            len: 4096,
        },
        T,
    )
    .unwrap();
    assert!(r.status == OK && r.data == data[..4096]);
    let list = ctl_json(&serve.control, &["fault", "list"]);
    assert_eq!(list["counters"]["read_errors_injected"], 3, "{list}");
    let stats = serve.report();
    assert_eq!(
        stats.ops["read"].errors, 3,
        "the device counts them as failed reads"
    );

    // Write errors through vhost-user: IOERR, and the old data stays.
    ctl_json(
        &serve.control,
        &[
            "fault",
            "add",
            "write-error",
            "--offset",
            "0",
            "--length",
            "512",
        ],
    );
    let w = BlkOp::Write {
        sector: 0,
        data: vec![0x11; 4096],
    };
    assert_eq!(blk::run(&mut d, 0, &s, &w, T).unwrap().status, IOERR);
    ctl_json(&serve.control, &["fault", "clear"]);
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
    assert!(r.status == OK && r.data == data[..4096], "old data kept");
    drop(d);
    serve.stop_ok();
}

#[test]
fn stalls_are_in_the_modelled_latency() {
    let dir = scratch_dir();
    let serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "sata-mlc-2011",
            "--capacity",
            "64M",
            "--memory",
        ],
    );
    let mut d = BlkDriver::connect(&serve.socket, &DriverOptions::default()).expect("connect");
    let s = Scratch::new(&mut d, 4096).unwrap();
    let read = BlkOp::Read {
        sector: 0,
        len: 4096,
    };
    assert_eq!(blk::run(&mut d, 0, &s, &read, T).unwrap().status, OK);
    // The drive stalls 90 % of the time from one second on: reads go on
    // until one has arrived during a stall (which one is up to the clock;
    // the test checks what that one saw, not when it came).
    let added = ctl_json(
        &serve.control,
        &["fault", "add", "stall", "--ms", "900", "--every-ms", "1000"],
    );
    assert_eq!(added["fault"]["spec"]["kind"], "stall");
    let mut reads = 0;
    let r = loop {
        // Paced, so the loop spans the first stall (one second on).
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(blk::run(&mut d, 0, &s, &read, T).unwrap().status, OK);
        reads += 1;
        let r = serve.report();
        if r.faults.counters.stalled_commands > 0 {
            break r;
        }
        assert!(reads < 1000, "no read met a stall");
    };
    let c = &r.faults.counters;
    assert_eq!((c.stalls_injected, c.stalled_commands), (1, 1), "{c:?}");
    assert!(
        c.stall_wait_ns > 0 && c.stall_wait_ns <= 900_000_000,
        "{c:?}"
    );
    // What the read waited for is in its modelled latency (so not in the
    // lateness, which is delivered − modelled).
    assert!(
        r.ops["read"].modelled.max_ns >= c.stall_wait_ns,
        "modelled max {} ns, waited {} ns",
        r.ops["read"].modelled.max_ns,
        c.stall_wait_ns
    );
    assert_eq!(r.faults.active[0].hits, 1);
    drop(d);
    serve.stop_ok();
}

#[test]
fn hostile_fault_requests_get_one_line_errors() {
    let dir = scratch_dir();
    let serve = Serve::start_with(
        dir.path(),
        &[
            "--profile",
            "sata-mlc-2011",
            "--capacity",
            "64M",
            "--memory",
        ],
        true,
    );
    let c = &serve.control;
    for (args, says) in [
        (
            vec![
                "fault",
                "add",
                "read-error",
                "--offset",
                "64M",
                "--length",
                "512",
            ],
            "within the drive",
        ),
        (
            vec![
                "fault",
                "add",
                "read-error",
                "--offset",
                "0",
                "--length",
                "0",
            ],
            "non-empty multiple of 512",
        ),
        (
            vec![
                "fault",
                "add",
                "write-error",
                "--offset",
                "100",
                "--length",
                "512",
            ],
            "multiple of 512",
        ),
        (
            vec![
                "fault",
                "add",
                "read-error",
                "--offset",
                "18446744073709551104",
                "--length",
                "512",
            ],
            "within the drive",
        ),
        (vec!["fault", "add", "stall", "--ms", "0"], "between 1 and"),
        (
            vec!["fault", "add", "stall", "--ms", "10", "--every-ms", "5"],
            "more than --ms",
        ),
        (
            vec![
                "fault",
                "add",
                "stall",
                "--ms",
                "10",
                "--after-ms",
                "999999999999",
            ],
            "at most",
        ),
        (vec!["fault", "clear", "77"], "no fault with id 77"),
        // Near-continuous stalls are not a stall.
        (
            vec![
                "fault",
                "add",
                "stall",
                "--ms",
                "60000",
                "--every-ms",
                "60001",
            ],
            "of the time: at most 90 %",
        ),
        (
            vec!["fault", "add", "throttle", "--mb-s", "0"],
            "between 1 and 100000",
        ),
        (
            vec!["fault", "add", "throttle", "--mb-s", "100", "--for-ms", "0"],
            "--for-ms must be between 1",
        ),
        (
            vec!["fault", "add", "bad-block", "--count", "0"],
            "--count 0 must be between 1",
        ),
        (
            vec!["fault", "add", "media-wear", "--acceleration", "0.5"],
            "--acceleration 0.5 must be from 1",
        ),
        (
            vec!["fault", "add", "media-wear", "--acceleration", "inf"],
            "must be from 1",
        ),
        (
            vec!["fault", "add", "media-wear", "--retention-days=-1"],
            "must be from 0",
        ),
        (
            vec!["power-cut", "--restart-after", "0"],
            "--restart-after 0 s must be between",
        ),
        (
            vec!["power-cut", "--restart-after", "1e9"],
            "seconds from 0 to 86400",
        ),
        (vec!["power-cut", "--at", "nan"], "seconds from 0 to 86400"),
    ] {
        let out = ctl(c, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
    }
    // The registry is bounded.
    for i in 0..vssd::device::faults::MAX_FAULTS {
        let o = (i * 512).to_string();
        ctl_json(
            c,
            &[
                "fault",
                "add",
                "read-error",
                "--offset",
                &o,
                "--length",
                "512",
            ],
        );
    }
    let out = ctl(
        c,
        &[
            "fault",
            "add",
            "read-error",
            "--offset",
            "1M",
            "--length",
            "512",
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("clear some first"));
    // Malformed JSON over the socket: an error reply, the daemon serves on.
    for bad in [
        r#"{"cmd":"fault-add","fault":{"kind":"read-error","offset":0}}"#,
        r#"{"cmd":"fault-add","fault":{"kind":"stall","ms":18446744073709551615,"every_ms":1}}"#,
        r#"{"cmd":"fault-clear","id":"all"}"#,
    ] {
        let r = raw_line(c, bad);
        assert!(r.contains("\"ok\":false"), "{bad}: {r}");
    }
    let list = ctl_json(c, &["fault", "list"]);
    assert_eq!(
        list["active"].as_array().unwrap().len(),
        vssd::device::faults::MAX_FAULTS
    );
    serve.stop_ok();
}

/// nbdsh with `script` against `sock`: stdout, whether or not it succeeded.
fn nbdsh_any(sock: &Path, script: &str) -> (bool, String) {
    let out = Command::new("nbdsh")
        .args(["-u", &format!("nbd+unix:///?socket={}", sock.display())])
        .args(["-c", script])
        .env("PATH", "/usr/bin:/bin:/usr/sbin:/sbin")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The writes after the flush in the power-cut tests: `(offset, length,
/// byte)`. The third is 4 KiB, so it waits in an open dpage when the cut
/// comes: a drive without power-loss protection loses it although it was
/// acknowledged.
const AFTER_FLUSH: [(u64, u64, u8); 4] = [
    (2 << 20, 64 << 10, 0x22),
    ((2 << 20) + (64 << 10), 64 << 10, 0x23),
    ((2 << 20) + (128 << 10), 4 << 10, 0x24),
    ((2 << 20) + (192 << 10), 64 << 10, 0x25),
];

/// The lost writes of `ctl fault list --json`'s latest cut: `(offset,
/// length, acknowledged)`.
fn lost_writes(list: &serde_json::Value) -> Vec<(u64, u64, bool)> {
    list["power"]["last_cut"]["lost"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["offset"].as_u64().unwrap(),
                l["length"].as_u64().unwrap(),
                l["acknowledged"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// What sector `at` of the [`AFTER_FLUSH`] area must hold after the cut:
/// the write's byte unless the list says it was lost (then what the
/// flushed first write left: 0x11 below 1 MiB, else zeros); `None` where
/// either is right (the write the power went with, on a protected drive:
/// executed, never acknowledged).
fn expected_after_cut(at: u64, lost: &[(u64, u64, bool)], protected: bool) -> Option<u8> {
    let (i, &(_, _, byte)) = AFTER_FLUSH
        .iter()
        .enumerate()
        .find(|(_, (o, l, _))| *o <= at && at < o + l)?;
    if lost.iter().any(|&(o, l, _)| o <= at && at < o + l) {
        return Some(0);
    }
    if i == 3 {
        // Never acknowledged: lost without protection (listed), kept or
        // not with it.
        return if protected { None } else { Some(0) };
    }
    Some(byte)
}

/// Writes, a flush, more writes, a power cut with the fourth of them;
/// after power-on the flushed data reads back and each sector of the
/// unflushed writes holds what `ctl fault list` says: the old data where a
/// write was lost, the new data elsewhere. Without power-loss protection
/// (sata-mlc-2011) at least one acknowledged write is lost (the 4 KiB one
/// in an open dpage); with it (intel-320-120) none.
#[test]
fn nbd_power_cut_loses_exactly_what_ctl_says() {
    for (preset, protected) in [("sata-mlc-2011", false), ("intel-320-120", true)] {
        let dir = scratch_dir();
        let (serve, sock) = serve_nbd(dir.path(), preset);
        nbdsh(&sock, "h.pwrite(b'\\x11' * 1048576, 0)\nh.flush()");
        let armed = ctl_json(&serve.control, &["power-cut", "--after-writes", "4"]);
        assert_eq!(armed["armed"]["writes"], 4, "{armed}");
        // The power goes with the fourth write.
        let writes: Vec<String> = AFTER_FLUSH
            .iter()
            .map(|(o, l, b)| format!("({o}, {l}, {b})"))
            .collect();
        let (_, out) = nbdsh_any(
            &sock,
            &format!(
                "import sys\n\
                 for i, (o, n, b) in enumerate([{}]):\n    try:\n        h.pwrite(bytes([b]) * n, o)\n        print('W', i, 'OK')\n    except nbd.Error as e:\n        print('W', i, 'ERR')\n    sys.stdout.flush()\n",
                writes.join(", ")
            ),
        );
        let oks: Vec<&str> = out.lines().filter(|l| l.starts_with("W ")).collect();
        assert_eq!(
            oks,
            ["W 0 OK", "W 1 OK", "W 2 OK", "W 3 ERR"],
            "{preset}: {out}"
        );
        let list = ctl_json(&serve.control, &["faults"]);
        let power = &list["power"];
        assert_eq!(power["powered"], false, "{preset}: {list}");
        assert_eq!(power["power_loss_protection"], protected);
        // While the power is off, a new connection is closed at once.
        let (ok, _) = nbdsh_any(&sock, "h.pread(512, 0)");
        assert!(!ok, "{preset}: a connection while the power is off");
        let lost = lost_writes(&list);
        if protected {
            assert!(lost.is_empty(), "{preset}: {list}");
        } else {
            // The write the power went with is lost, never acknowledged,
            // and so is at least one acknowledged one.
            let (o3, l3, _) = AFTER_FLUSH[3];
            assert!(lost.contains(&(o3, l3, false)), "{list}");
            assert!(
                lost.iter().any(|l| l.2),
                "no acknowledged write lost: {list}"
            );
            let text =
                String::from_utf8(ctl(&serve.control, &["faults", "--lost"]).stdout).unwrap();
            assert_eq!(text.lines().count(), lost.len(), "{text}");
        }
        assert!(
            lost.iter().all(|&(o, _, _)| o >= 2 << 20),
            "{preset}: flushed data lost: {list}"
        );
        ctl_json(&serve.control, &["power-on"]);
        let out = nbdsh(
            &sock,
            "print('A', sorted(set(h.pread(1048576, 0))))\n\
             b = h.pread(256 * 1024, 2097152)\n\
             print('B', ' '.join(str(b[s * 512]) + ('' if len(set(b[s * 512:(s + 1) * 512])) == 1 else '!') for s in range(512)))\n",
        );
        assert_eq!(line(&out, "A "), "[17]", "{preset}: flushed data");
        let got: Vec<&str> = line(&out, "B ").split(' ').collect();
        for (s, got) in got.iter().enumerate() {
            let at = (2 << 20) + s as u64 * 512;
            let want = expected_after_cut(at, &lost, protected);
            if let Some(want) = want {
                assert_eq!(
                    *got,
                    want.to_string(),
                    "{preset}: sector {s} (lost {lost:?})"
                );
            } else if AFTER_FLUSH
                .iter()
                .all(|(o, l, _)| !(*o <= at && at < o + l))
            {
                assert_eq!(*got, "0", "{preset}: sector {s} was never written");
            }
        }
        serve.stop_ok();
    }
}

/// A cut armed with `--after-ms` goes off by itself at its drive time
/// (no request needed), `--restart-after` brings the power back, and NBD
/// takes connections again; `--at` in the past is refused with a line.
#[test]
fn timed_power_cut_and_automatic_power_on() {
    let dir = scratch_dir();
    let (serve, sock) = serve_nbd(dir.path(), "sata-mlc-2011");
    nbdsh(&sock, "h.pwrite(b'\\x33' * 65536, 0)\nh.flush()");
    let out = ctl(&serve.control, &["power-cut", "--at", "0.001"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not ahead") && err.trim().lines().count() == 1,
        "{err}"
    );
    let armed = ctl_json(
        &serve.control,
        &["power-cut", "--after-ms", "300", "--restart-after", "1.5"],
    );
    assert_eq!(armed["armed"]["when"], "at", "{armed}");
    let t0 = std::time::Instant::now();
    let list = loop {
        let l = ctl_json(&serve.control, &["faults"]);
        if l["power"]["powered"] == false {
            break l;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the cut never came: {l}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let cut = &list["power"]["last_cut"];
    assert!(
        cut["trigger"].as_str().unwrap().contains("--after-ms"),
        "{cut}"
    );
    let at = cut["model_ns"].as_u64().unwrap();
    assert_eq!(cut["restart_at_model_ns"], at + 1_500_000_000, "{cut}");
    loop {
        let l = ctl_json(&serve.control, &["faults"]);
        if l["power"]["powered"] == true {
            assert!(l["power"]["drive_time_ns"].as_u64().unwrap() >= at + 1_500_000_000);
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the power never came back: {l}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = nbdsh(&sock, "print('R', sorted(set(h.pread(65536, 0))))");
    assert_eq!(line(&out, "R "), "[51]");
    // --at in the drive's future goes off too.
    let now = ctl_json(&serve.control, &["faults"])["power"]["drive_time_ns"]
        .as_u64()
        .unwrap();
    let at = format!("{:.3}", (now + 200_000_000) as f64 / 1e9);
    ctl_json(&serve.control, &["power-cut", "--at", &at]);
    loop {
        let l = ctl_json(&serve.control, &["faults"]);
        if l["power"]["powered"] == false {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "--at never came: {l}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    serve.stop_ok();
}

/// `ctl precondition --wear 100` on a preset that goes read-only at end
/// of life (intel-320-120): writes fail with EIO, reads still return the
/// data; on one that keeps going (crucial-m4-128) writes go on; a preset
/// without rated cycles refuses to be aged.
#[test]
fn worn_out_intel_goes_read_only_and_others_keep_going() {
    for (preset, read_only) in [("intel-320-120", true), ("crucial-m4-128", false)] {
        let dir = scratch_dir();
        let (serve, sock) = serve_nbd(dir.path(), preset);
        nbdsh(&sock, "h.pwrite(b'\\x33' * 65536, 0)\nh.flush()");
        for bad in ["0", "1001", "nan", "-5"] {
            let out = ctl(&serve.control, &["precondition", &format!("--wear={bad}")]);
            assert!(!out.status.success(), "--wear {bad} accepted");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("(0, 1000]"), "--wear {bad}: {err}");
        }
        let half = ctl_json(&serve.control, &["precondition", "--wear", "50"]);
        assert!(half["counters"]["erase_count_min"].as_u64().unwrap() > 0);
        let list = ctl_json(&serve.control, &["fault", "list"]);
        assert_eq!(list["read_only"], false, "{preset} at 50 %");
        ctl_json(&serve.control, &["precondition", "--wear", "100"]);
        let smart = ctl_json(&serve.control, &["smart"]);
        assert!(smart["percent_used"].as_f64().unwrap() >= 100.0, "{smart}");
        let list = ctl_json(&serve.control, &["fault", "list"]);
        assert_eq!(list["read_only"], read_only, "{preset}: {list}");
        let out = nbdsh(
            &sock,
            &format!(
                "{PROBES}print('W', wprobe(65536, 4096, 0x44))\nprint('R', sorted(set(h.pread(65536, 0))))\n"
            ),
        );
        assert_eq!(
            line(&out, "W "),
            if read_only { "EIO" } else { "OK" },
            "{preset}"
        );
        assert_eq!(line(&out, "R "), "[51]", "{preset}: reads work");
        serve.stop_ok();
    }
    let dir = scratch_dir();
    let serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "sata-mlc-2011",
            "--capacity",
            "64M",
            "--memory",
        ],
    );
    let out = ctl(&serve.control, &["precondition", "--wear", "50"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no [wear] rated_pe_cycles"), "{err}");
    serve.stop_ok();
}

/// The same through vhost-user with vssd's own driver, on both presets: a
/// flushed write, a cut armed for the fourth of four more writes. The
/// power takes the connection with it: that write is never completed, the
/// daemon closes the connection and closes new ones at once until
/// power-on; then a new connection (as QEMU's reconnect makes) finds the
/// flushed data and each sector of the later writes as `ctl fault list`
/// says.
#[test]
fn vhost_user_power_cut_closes_the_connection_and_loses_exactly_what_ctl_says() {
    for (preset, protected) in [("sata-mlc-2011", false), ("intel-320-120", true)] {
        let dir = scratch_dir();
        let serve = Serve::start(
            dir.path(),
            &["--profile", preset, "--capacity", "64M", "--memory"],
        );
        let mut d = BlkDriver::connect(&serve.socket, &DriverOptions::default()).expect("connect");
        let s = Scratch::new(&mut d, 1 << 20).unwrap();
        let a = BlkOp::Write {
            sector: 0,
            data: vec![0x11; 1 << 20],
        };
        assert_eq!(blk::run(&mut d, 0, &s, &a, T).unwrap().status, OK);
        assert_eq!(
            blk::run(&mut d, 0, &s, &BlkOp::Flush, T).unwrap().status,
            OK
        );
        ctl_json(&serve.control, &["power-cut", "--after-writes", "4"]);
        for (i, &(o, l, b)) in AFTER_FLUSH.iter().enumerate() {
            let w = BlkOp::Write {
                sector: o / 512,
                data: vec![b; l as usize],
            };
            if i < 3 {
                assert_eq!(
                    blk::run(&mut d, 0, &s, &w, T).unwrap().status,
                    OK,
                    "{preset}: write {i}"
                );
            } else {
                // The power goes as it arrives: no completion, ever.
                let r = blk::run(&mut d, 0, &s, &w, Duration::from_secs(3));
                assert!(
                    r.is_err(),
                    "{preset}: the write the power went with completed: {r:?}"
                );
            }
        }
        // The connection is gone, and a new one is closed at once.
        assert!(
            d.frontend().get_features().is_err(),
            "{preset}: the connection survived the cut"
        );
        drop(d);
        assert!(
            BlkDriver::connect(&serve.socket, &DriverOptions::default()).is_err(),
            "{preset}: a connection while the power is off"
        );
        let list = ctl_json(&serve.control, &["fault", "list"]);
        let lost = lost_writes(&list);
        if protected {
            assert!(lost.is_empty(), "{preset}: {list}");
        } else {
            let (o3, l3, _) = AFTER_FLUSH[3];
            assert!(lost.contains(&(o3, l3, false)), "{list}");
            assert!(
                lost.iter().any(|l| l.2),
                "no acknowledged write lost: {list}"
            );
        }
        let stats = serve.report();
        assert!(
            stats.connection.abandoned >= 1,
            "{preset}: the dropped write is abandoned"
        );
        ctl_json(&serve.control, &["power-on"]);
        let mut d = BlkDriver::connect(&serve.socket, &DriverOptions::default())
            .expect("reconnect after power-on");
        let s = Scratch::new(&mut d, 1 << 20).unwrap();
        let r = blk::run(
            &mut d,
            0,
            &s,
            &BlkOp::Read {
                sector: 0,
                len: 1 << 20,
            },
            T,
        )
        .unwrap();
        assert!(
            r.status == OK && r.data.iter().all(|&b| b == 0x11),
            "{preset}: flushed data"
        );
        let r = blk::run(
            &mut d,
            0,
            &s,
            &BlkOp::Read {
                sector: 4096,
                len: 256 << 10,
            },
            T,
        )
        .unwrap();
        assert_eq!(r.status, OK);
        for (sec, chunk) in r.data.chunks(512).enumerate() {
            let at = (2 << 20) + sec as u64 * 512;
            let want = match expected_after_cut(at, &lost, protected) {
                Some(w) => w,
                None if AFTER_FLUSH.iter().any(|(o, l, _)| *o <= at && at < o + l) => continue,
                None => 0,
            };
            assert!(
                chunk.iter().all(|&b| b == want),
                "{preset}: sector {sec}: want {want:#x} (lost {lost:?})"
            );
        }
        drop(d);
        assert_eq!(serve.report().connection.connections, 2, "{preset}");
        serve.stop_ok();
    }
}

/// The state file keeps what wear and faults did to the NAND: a worn-out
/// Intel drive restarted from its state is read-only again (within the
/// daemon's once-a-second check), and grown bad blocks stay retired.
#[test]
fn a_worn_drive_restarted_from_its_state_is_read_only_again() {
    let dir = scratch_dir();
    let state = dir.path().join("state");
    let sock = dir.path().join("nbd.sock");
    let args = [
        "--profile",
        "intel-320-120",
        "--capacity",
        "64M",
        "--state-dir",
        state.to_str().unwrap(),
        "--nbd",
        &format!("unix:{}", sock.display()),
    ];
    let serve = Serve::start_with(dir.path(), &args, false);
    nbdsh(&sock, "h.pwrite(b'\\x44' * 65536, 0)\nh.flush()");
    let retired = ctl_json(
        &serve.control,
        &["fault", "add", "bad-block", "--count", "3"],
    );
    assert_eq!(retired["fault"]["hits"], 3, "{retired}");
    ctl_json(&serve.control, &["precondition", "--wear", "100"]);
    assert_eq!(ctl_json(&serve.control, &["faults"])["read_only"], true);
    serve.stop_ok();
    // Restarted from the saved state: no precondition, no fault.
    let serve = Serve::start_with(dir.path(), &args, false);
    let t0 = std::time::Instant::now();
    while ctl_json(&serve.control, &["faults"])["read_only"] != true {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "not read-only again"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = nbdsh(
        &sock,
        &format!(
            "{PROBES}print('W', wprobe(65536, 4096, 0x55))\nprint('R', sorted(set(h.pread(65536, 0))))\n"
        ),
    );
    assert_eq!(line(&out, "W "), "EIO", "writes fail");
    assert_eq!(line(&out, "R "), "[68]", "the data reads back");
    let stats = serve.stats();
    assert_eq!(
        stats["counters"]["grown_bad_blocks"], 3,
        "{}",
        stats["counters"]
    );
    let smart = ctl_json(&serve.control, &["smart"]);
    let a5 = smart["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == 5)
        .unwrap();
    assert_eq!(a5["raw"], 3, "{smart}");
    serve.stop_ok();
}

/// Wear-driven media errors through NBD: on a worn-out drive whose data
/// is a year old, `fault add media-wear` (accelerated) fails some reads
/// with EIO and not others; SMART's Reported_Uncorrect counts them; a
/// throttle shows in `ctl faults`.
#[test]
fn nbd_media_wear_fails_some_worn_reads_with_eio() {
    let dir = scratch_dir();
    let (serve, sock) = serve_nbd(dir.path(), "crucial-m4-128");
    nbdsh(&sock, "h.pwrite(b'\\x66' * 4194304, 0)\nh.flush()");
    ctl_json(&serve.control, &["precondition", "--wear", "100"]);
    ctl_json(
        &serve.control,
        &[
            "fault",
            "add",
            "media-wear",
            "--acceleration",
            "60",
            "--retention-days",
            "365",
        ],
    );
    let out = nbdsh(
        &sock,
        &format!(
            "{PROBES}r = [probe(u * 4096, 4096) for u in range(1024)]\nprint('EIO', r.count('EIO'), 'OK', r.count('OK'))\n"
        ),
    );
    let counts: Vec<u64> = line(&out, "EIO ")
        .split(' ')
        .filter_map(|x| x.parse().ok())
        .collect();
    assert!(counts[0] > 0 && counts[1] > 0, "{out}");
    assert_eq!(counts[0] + counts[1], 1024, "{out}");
    let list = ctl_json(&serve.control, &["faults"]);
    assert_eq!(list["counters"]["uncorrectable_reads"], counts[0], "{list}");
    let smart = ctl_json(&serve.control, &["smart"]);
    let a187 = smart["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == 187)
        .unwrap();
    assert_eq!(a187["raw"], counts[0], "{smart}");
    ctl_json(
        &serve.control,
        &["fault", "add", "throttle", "--mb-s", "900"],
    );
    let text = String::from_utf8(ctl(&serve.control, &["faults"]).stdout).unwrap();
    assert!(
        text.contains("throttle") && text.contains("900 MB/s") && text.contains("media-wear"),
        "{text}"
    );
    serve.stop_ok();
}
