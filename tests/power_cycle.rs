#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! Clients across power cycles: `ctl power-on` answers once every
//! listener listens again, so a client that connects as soon as the reply
//! is in gets its device, cycle after cycle (the vhost-user socket used to
//! come back up to 20 ms later, and such a connect was refused 7 times in
//! 10); and `vssd loadgen` ends with an error naming the cause soon after
//! its connection goes, by a power cut or a killed daemon (it used to
//! wait out its 30 s stall timeout, or forever).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::scratch_dir;
use common::serve::{Serve, VSSD};
use vssd::loadgen::{BlkDriver, DriverOptions};

fn ctl(control: &std::path::Path, args: &[&str]) {
    let out = Command::new(VSSD)
        .args(["ctl", "--control"])
        .arg(control)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_connect_right_after_power_on_gets_the_device() {
    let dir = scratch_dir();
    let nbd = format!("unix:{}", dir.path().join("nbd.sock").display());
    let serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "sata-mlc-2011",
            "--capacity",
            "64M",
            "--memory",
            "--nbd",
            &nbd,
        ],
    );
    for cycle in 0..10 {
        let d = BlkDriver::connect(&serve.socket, &DriverOptions::default());
        assert!(d.is_ok(), "cycle {cycle}: before the cut: {:?}", d.err());
        drop(d);
        ctl(&serve.control, &["power-cut"]);
        assert!(
            BlkDriver::connect(&serve.socket, &DriverOptions::default()).is_err(),
            "cycle {cycle}: a connection while the power is off"
        );
        // Power on over the control socket, and connect the moment the
        // reply is in: no wait, no retry.
        let mut c = UnixStream::connect(&serve.control).unwrap();
        c.write_all(b"{\"cmd\":\"power-on\"}\n").unwrap();
        let mut reply = String::new();
        BufReader::new(&c).read_line(&mut reply).unwrap();
        let s = UnixStream::connect(&serve.socket);
        assert!(reply.contains("\"ok\":true"), "cycle {cycle}: {reply}");
        assert!(
            s.is_ok(),
            "cycle {cycle}: connect right after power-on: {:?}",
            s.err()
        );
        drop(s);
    }
    serve.stop_ok();
}

/// `vssd loadgen` against `serve` for a long run: the child.
fn loadgen(serve: &Serve) -> std::process::Child {
    Command::new(VSSD)
        .args(["loadgen", "--socket"])
        .arg(&serve.socket)
        .args([
            "--rw",
            "randwrite",
            "--bs",
            "4k",
            "--iodepth",
            "8",
            "--runtime",
            "60",
            "--stall-timeout",
            "120",
            "--json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait for `child` to exit (at most `limit`): its status and stderr.
fn ends_within(mut child: std::process::Child, limit: Duration) -> (bool, String) {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            return (
                st.success(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            );
        }
        if t0.elapsed() > limit {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("loadgen still running {limit:?} after its connection went");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn loadgen_ends_with_the_cause_when_its_connection_goes() {
    // A power cut.
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
    let child = loadgen(&serve);
    std::thread::sleep(Duration::from_secs(1));
    ctl(&serve.control, &["power-cut"]);
    // Generous on a busy host: the point is that it ends, not when
    // (it used to run until its stall timeout, here 120 s).
    let (ok, err) = ends_within(child, Duration::from_secs(20));
    assert!(!ok, "loadgen succeeded across a power cut: {err}");
    assert!(err.contains("closed the vhost-user connection"), "{err}");
    ctl(&serve.control, &["power-on"]);
    serve.stop_ok();

    // The daemon killed.
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
    let child = loadgen(&serve);
    std::thread::sleep(Duration::from_secs(1));
    serve.signal(libc::SIGKILL);
    let (ok, err) = ends_within(child, Duration::from_secs(20));
    assert!(!ok, "loadgen succeeded without its daemon: {err}");
    assert!(err.contains("closed the vhost-user connection"), "{err}");
}
