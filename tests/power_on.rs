#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! `ctl power-on` answers once every listener listens again: a client
//! that connects as soon as the reply is in gets its device, cycle after
//! cycle (the vhost-user socket used to come back up to 20 ms later, and
//! such a connect was refused 7 times in 10).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};

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
