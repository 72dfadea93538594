#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! `vssd serve` and `vssd ctl` without a guest: the control socket, startup
//! errors, clean shutdown on SIGTERM and the FTL state across restarts.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;
use vssd::ctl::protocol::{CtlRequest, Step};
use vssd::ctl::request;

mod common;

use common::serve::{Serve, VSSD};

fn raw_lines(control: &Path, lines: &str) -> Vec<Value> {
    let mut s = UnixStream::connect(control).unwrap();
    s.write_all(lines.as_bytes()).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    BufReader::new(s)
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect()
}

fn serve_fails(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(VSSD)
        .arg("serve")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    // 1: refused by vssd; 2: refused by the command-line parser.
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "expected failure for {args:?}, got {:?}",
        out.status
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn control_socket_and_state_lifecycle() {
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("state");
    let st_s = st.to_str().unwrap();
    let args = [
        "--profile",
        "instant",
        "--capacity",
        "1G",
        "--state-dir",
        st_s,
    ];
    let mut serve = Serve::start(dir.path(), &args);

    let mode = std::fs::metadata(&serve.control)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "control socket must be private");

    let s = serve.stats();
    assert_eq!(s["drive"]["capacity"], 1u64 << 30);
    assert_eq!(s["drive"]["profile"], "instant");
    assert_eq!(s["connection"]["connected"], false);
    assert_eq!(s["counters"]["host_written_bytes"], 0);
    assert!(s["lateness"]["count"].is_u64());

    // Malformed requests get error replies; the connection keeps working.
    let r = raw_lines(
        &serve.control,
        "nonsense\n{\"cmd\":\"format\"}\n\n{\"cmd\":\"stats\"}\n",
    );
    // (A blank line gets an error reply too: a client waiting for an answer
    // must not hang.)
    assert_eq!(r.len(), 4);
    assert_eq!(r[0]["ok"], false);
    assert!(r[0]["error"].as_str().unwrap().contains("malformed"));
    assert_eq!(r[1]["ok"], false);
    assert_eq!(r[2]["ok"], false);
    assert!(r[2]["error"].as_str().unwrap().contains("empty request"));
    assert_eq!(r[3]["ok"], true);
    let bad = request(
        &serve.control,
        &CtlRequest::Precondition {
            steps: vec![Step::Random {
                bs: 1000,
                amount: "1x".into(),
            }],
            seed: 1,
            progress: false,
        },
    );
    assert!(bad.is_err());

    // Precondition ages the drive in model time.
    let p = request(
        &serve.control,
        &CtlRequest::Precondition {
            steps: vec![
                Step::FillSeq { bs: 128 << 10 },
                Step::Random {
                    bs: 4096,
                    amount: "0.5x".into(),
                },
            ],
            seed: 7,
            progress: false,
        },
    )
    .expect("precondition");
    // `instant` models no time; the FTL work still happens (counters below).
    assert!(p["model_time_ns"].is_u64());
    let written = serve.stats()["counters"]["host_written_bytes"]
        .as_u64()
        .unwrap();
    assert!(written >= (1u64 << 30) + (1u64 << 29), "written {written}");

    // The human-readable table.
    let out = Command::new(VSSD)
        .arg("ctl")
        .arg("--control")
        .arg(&serve.control)
        .arg("stats")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("instant") && text.contains("lateness"),
        "{text}"
    );

    // A second daemon on the same sockets is refused clearly.
    let sock = dir.path().join("vhost.sock");
    let err = serve_fails(
        dir.path(),
        &[
            "--socket",
            sock.to_str().unwrap(),
            "--profile",
            "instant",
            "--memory",
        ],
    );
    assert!(err.contains("in use"), "{err}");

    // SIGTERM: clean exit, state saved.
    let (code, log) = serve.stop();
    assert_eq!(code, 0, "{log}");
    assert!(st.join("ftl.state").exists());
    assert!(
        !dir.path().join("ctl.sock").exists(),
        "control socket removed on exit"
    );

    // Restart: the FTL state is back.
    let mut serve = Serve::start(dir.path(), &args);
    assert_eq!(
        serve.stats()["counters"]["host_written_bytes"]
            .as_u64()
            .unwrap(),
        written
    );
    // Secure erase: back to a fresh drive.
    request(&serve.control, &CtlRequest::SecureErase).expect("secure erase");
    assert_eq!(serve.stats()["counters"]["mapped_units"], 0);
    let (code, log) = serve.stop();
    assert_eq!(code, 0, "{log}");

    // A damaged state file is refused, not silently reset.
    let f = st.join("ftl.state");
    let mut bytes = std::fs::read(&f).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&f, &bytes).unwrap();
    let err = serve_fails(
        dir.path(),
        &[
            "--socket",
            sock.to_str().unwrap(),
            "--profile",
            "instant",
            "--capacity",
            "1G",
            "--state-dir",
            st_s,
        ],
    );
    assert!(err.contains("cannot be loaded"), "{err}");
    assert_eq!(
        std::fs::read(&f).unwrap(),
        bytes,
        "the damaged file is left alone"
    );
}

#[test]
fn startup_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let sock = sock.to_str().unwrap();
    let err = serve_fails(
        dir.path(),
        &["--socket", sock, "--profile", "no-such-drive"],
    );
    assert!(err.contains("neither a built-in preset"), "{err}");
    let small = dir.path().join("small.img");
    std::fs::write(&small, vec![0u8; 4096]).unwrap();
    let err = serve_fails(
        dir.path(),
        &[
            "--socket",
            sock,
            "--profile",
            "instant",
            "--capacity",
            "1G",
            "--backing",
            small.to_str().unwrap(),
        ],
    );
    assert!(err.contains("smaller than the drive"), "{err}");
    let plain = dir.path().join("plain");
    std::fs::write(&plain, b"keep me").unwrap();
    let err = serve_fails(
        dir.path(),
        &[
            "--socket",
            plain.to_str().unwrap(),
            "--profile",
            "instant",
            "--memory",
        ],
    );
    assert!(err.contains("not a socket"), "{err}");
    assert_eq!(std::fs::read(&plain).unwrap(), b"keep me");

    // A socket directory every user may write to is refused unless sticky:
    // another user could swap the socket there.
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let in_open = open.join("s.sock");
    let err = serve_fails(
        dir.path(),
        &[
            "--socket",
            in_open.to_str().unwrap(),
            "--profile",
            "instant",
            "--memory",
        ],
    );
    assert!(
        err.contains("writable by every user and not sticky"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0, "nothing left");
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Hardening: one daemon per state dir; files private; sockets with an
/// explicit mode; no symlinks or other users' files written through.
#[test]
fn state_dir_locked_files_private_sockets_explicit() {
    use std::os::unix::fs::{MetadataExt, symlink};
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("state");
    let st_s = st.to_str().unwrap();
    // Even under umask 000 the sockets come out as asked.
    // SAFETY: umask only changes this test process's file-mode mask
    // (inherited by the daemon); restored below.
    let old = unsafe { libc::umask(0) };
    let mut serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "instant",
            "--capacity",
            "64M",
            "--state-dir",
            st_s,
        ],
    );
    // SAFETY: restores the previous mask.
    unsafe { libc::umask(old) };
    assert_eq!(mode(&serve.socket), 0o600, "vhost-user socket");
    assert_eq!(mode(&serve.control), 0o600, "control socket");
    // The private directories the sockets were bound in are gone.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(mode(&st), 0o700, "state dir created private");
    assert_eq!(mode(&st.join("disk.img")), 0o600, "backing file");

    // A second daemon on the same state dir is refused, naming the first.
    let other = dir.path().join("other.sock");
    let err = serve_fails(
        dir.path(),
        &[
            "--socket",
            other.to_str().unwrap(),
            "--profile",
            "instant",
            "--capacity",
            "64M",
            "--state-dir",
            st_s,
        ],
    );
    assert!(err.contains("in use by another vssd"), "{err}");
    assert!(err.contains("pid"), "{err}");

    // Two signals in a row: still a clean stop with the state saved.
    serve.signal(libc::SIGTERM);
    let (code, log) = serve.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(mode(&st.join("ftl.state")), 0o600, "state file");
    assert!(!st.join("ftl.tmp").exists());

    // Group access for the QEMU user: 0660 and the group.
    let gid = std::fs::metadata(dir.path()).unwrap().gid();
    let mut serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "instant",
            "--capacity",
            "64M",
            "--memory",
            "--socket-group",
            &gid.to_string(),
        ],
    );
    assert_eq!(mode(&serve.socket), 0o660);
    assert_eq!(std::fs::metadata(&serve.socket).unwrap().gid(), gid);
    assert_eq!(serve.stop().0, 0);
    let mut serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "instant",
            "--capacity",
            "64M",
            "--memory",
            "--socket-mode",
            "0640",
        ],
    );
    assert_eq!(mode(&serve.socket), 0o640);
    assert_eq!(serve.stop().0, 0);
    let sock = dir.path().join("x.sock");
    let sock = sock.to_str().unwrap();
    let err = serve_fails(
        dir.path(),
        &[
            "--socket",
            sock,
            "--profile",
            "instant",
            "--memory",
            "--socket-mode",
            "4777",
        ],
    );
    assert!(err.contains("octal permission mode"), "{err}");
    let err = serve_fails(
        dir.path(),
        &[
            "--socket",
            sock,
            "--profile",
            "instant",
            "--memory",
            "--socket-group",
            "no-such-group-vssd",
        ],
    );
    assert!(err.contains("no such group"), "{err}");

    // A backing path that is a symlink (say, planted in /tmp) is refused.
    let target = dir.path().join("target.img");
    let link = dir.path().join("link.img");
    symlink(&target, &link).unwrap();
    let err = serve_fails(
        dir.path(),
        &[
            "--socket",
            sock,
            "--profile",
            "instant",
            "--capacity",
            "64M",
            "--backing",
            link.to_str().unwrap(),
        ],
    );
    assert!(err.contains("symbolic link"), "{err}");
    assert!(!target.exists(), "nothing created through the link");

    // A state dir others can write to is refused.
    let open_dir = dir.path().join("open");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = serve_fails(
        dir.path(),
        &[
            "--socket",
            sock,
            "--profile",
            "instant",
            "--capacity",
            "64M",
            "--state-dir",
            open_dir.to_str().unwrap(),
        ],
    );
    assert!(err.contains("writable by other users"), "{err}");

    // A backing file that belongs to another user is refused (as root,
    // which is how the daemon usually runs and how CI runs).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let planted = dir.path().join("planted.img");
        std::fs::write(&planted, b"").unwrap();
        std::os::unix::fs::chown(&planted, Some(65534), None).unwrap();
        let err = serve_fails(
            dir.path(),
            &[
                "--socket",
                sock,
                "--profile",
                "instant",
                "--capacity",
                "64M",
                "--backing",
                planted.to_str().unwrap(),
            ],
        );
        assert!(err.contains("belongs to uid 65534"), "{err}");
    }

    // A socket in a missing directory: say which directory.
    let err = serve_fails(
        dir.path(),
        &[
            "--socket",
            "/nonexistent-vssd-dir/v.sock",
            "--profile",
            "instant",
            "--memory",
        ],
    );
    assert!(
        err.contains("directory /nonexistent-vssd-dir does not exist"),
        "{err}"
    );
}

/// `vssd ctl` pointed at the wrong socket says what it reached instead of
/// "connection reset by peer".
#[test]
fn ctl_at_a_data_socket_says_what_it_reached() {
    let dir = tempfile::tempdir().unwrap();
    let nbd = dir.path().join("nbd.sock");
    let s = Serve::start(
        dir.path(),
        &[
            "--profile",
            "instant",
            "--capacity",
            "64M",
            "--memory",
            "--nbd",
            &format!("unix:{}", nbd.display()),
        ],
    );
    for (path, what) in [(&nbd, "NBD server"), (&s.socket, "without a reply")] {
        let out = Command::new(VSSD)
            .args(["ctl", "--control"])
            .arg(path)
            .args(["stats", "--timeout", "5"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            err.contains("is not vssd's control socket") && err.contains(what),
            "{}: {err}",
            path.display()
        );
    }
    s.stop_ok();
}

/// A client connected but still negotiating (a VM started paused has
/// connected to the vhost-user socket but acknowledged no features; an NBD
/// client in its handshake) is shown as such, not as "waiting for a client".
#[test]
fn stats_show_clients_that_are_still_negotiating() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let nbd = dir.path().join("nbd.sock");
    let s = Serve::start(
        dir.path(),
        &[
            "--profile",
            "instant",
            "--capacity",
            "64M",
            "--memory",
            "--nbd",
            &format!("unix:{}", nbd.display()),
        ],
    );
    let stats_text = || {
        let out = Command::new(VSSD)
            .args(["ctl", "--control"])
            .arg(&s.control)
            .arg("stats")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let before = stats_text();
    assert_eq!(
        before.matches("waiting for a client").count(),
        2,
        "{before}"
    );
    let _vhost = UnixStream::connect(&s.socket).unwrap();
    let mut nbd_client = UnixStream::connect(&nbd).unwrap();
    let mut greeting = [0u8; 18];
    nbd_client.read_exact(&mut greeting).unwrap();
    let t = std::time::Instant::now();
    let during = loop {
        let text = stats_text();
        if text.matches("1 client connected, negotiating").count() == 2
            || t.elapsed() > std::time::Duration::from_secs(5)
        {
            break text;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(
        during.matches("1 client connected, negotiating").count(),
        2,
        "{during}"
    );
    assert_eq!(s.stats()["frontends"][0]["negotiating"], 1);
    drop(nbd_client);
    drop(_vhost);
    let t = std::time::Instant::now();
    while stats_text().matches("waiting for a client").count() < 2 {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{}",
            stats_text()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    s.stop_ok();
}

#[test]
fn a_dilated_daemon_says_so_and_idles_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let base = [
        "--profile",
        "sata-slc-2009",
        "--capacity",
        "64M",
        "--memory",
    ];
    // Undilated, nothing in the report says otherwise (the JSON as before).
    let plain = Serve::start(dir.path(), &base);
    assert!(
        plain.stats()["drive"].get("time_scale").is_none(),
        "{}",
        plain.stats()["drive"]
    );
    drop(plain);
    let mut args = base.to_vec();
    args.extend(["--time-scale", "2.5"]);
    let serve = Serve::start(dir.path(), &args);
    assert_eq!(serve.stats()["drive"]["time_scale"], 2.5);
    assert_eq!(serve.report().drive.time_scale, 2.5);
    let text = Command::new(VSSD)
        .args(["ctl", "--control"])
        .arg(&serve.control)
        .arg("stats")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("time scale   2.5: the drive's clock runs 2.5× slower"),
        "{text}"
    );
    assert!(
        serve
            .log_text()
            .contains("time dilation: the drive's clock runs 2.5× slower"),
        "{}",
        serve.log_text()
    );
    let r = raw_lines(&serve.control, "{\"cmd\":\"idle\",\"ns\":1000000000}\n");
    assert_eq!(r[0]["ok"], true, "{r:?}");
    assert_eq!(r[0]["result"]["model_ns"], 1_000_000_000u64);
    drop(serve);
    for bad in ["0.5", "2000", "slow"] {
        let err = serve_fails(
            dir.path(),
            &["--profile", "instant", "--memory", "--time-scale", bad],
        );
        assert!(err.contains("--time-scale"), "{bad}: {err}");
    }
}

/// `ctl smart`: the attributes of the preset's controller family (Crucial
/// m4: Marvell), each computed from the counters `ctl stats` shows.
#[test]
fn smart_attributes_come_from_the_counters() {
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "crucial-m4-128",
            "--capacity",
            "1G",
            "--memory",
        ],
    );
    request(
        &serve.control,
        &CtlRequest::Precondition {
            steps: vec![
                Step::FillSeq { bs: 128 << 10 },
                Step::Random {
                    bs: 4096,
                    amount: "1x".into(),
                },
            ],
            seed: 3,
            progress: false,
        },
    )
    .expect("precondition");
    let ctl = |args: &[&str]| {
        let out = Command::new(VSSD)
            .arg("ctl")
            .arg("--control")
            .arg(&serve.control)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let smart: Value = serde_json::from_str(&ctl(&["smart", "--json"])).unwrap();
    let c = serve.report().counters;
    assert_eq!(smart["set"], "marvell");
    assert_eq!(smart["identity"]["model"], "M4-CT128M4SSD2");
    let attr = |id: u64| {
        smart["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("no attribute {id}: {smart}"))
            .clone()
    };
    assert!(
        c.erase_count_avg > 0.0,
        "the precondition must have erased blocks"
    );
    assert_eq!(attr(173)["raw"], c.erase_count_avg.floor() as u64);
    assert_eq!(attr(246)["raw"], c.host_written_bytes / 512);
    let used = c.erase_count_avg / 3000.0 * 100.0;
    assert_eq!(attr(202)["raw"], used.floor() as u64);
    assert_eq!(attr(173)["value"], 100 - used.floor() as u64);
    let text = ctl(&["smart"]);
    assert!(text.contains("Device Model:     M4-CT128M4SSD2"), "{text}");
    assert!(text.contains("ID# ATTRIBUTE_NAME"), "{text}");
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("173 Wear_Leveling_Count"))
        .unwrap_or_else(|| panic!("no 173 row:\n{text}"));
    assert!(
        row.ends_with(&format!(" {}", c.erase_count_avg.floor() as u64)),
        "{row}"
    );
    serve.stop_ok();
}
