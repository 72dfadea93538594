#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! `vssd qemu-args` output is accepted by QEMU as printed: each bus's
//! arguments, pasted into a shell command line, start a QEMU (stopped with
//! `-S`, no guest boot) attached to a running `vssd serve`, and the
//! monitor's `info qtree` shows the preset's model, serial, firmware and
//! WWN on the emulated device.

mod common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::serve::{Serve, VSSD};
use common::{init_logging, require_program, scratch_dir};

const PROFILE: &str = "intel-x25m-g2";

fn qemu_args(args: &[&str]) -> String {
    let out = Command::new(VSSD)
        .arg("qemu-args")
        .args(args)
        .output()
        .expect("running vssd qemu-args");
    assert!(
        out.status.success(),
        "vssd qemu-args {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `qemu-system-x86_64 -S ... <printed args>` through `sh` (so the
/// shell quoting is exercised) and returns what the monitor answered to
/// `info qtree`.
fn qtree(dir: &std::path::Path, printed: &str) -> String {
    let script = dir.join("qemu.sh");
    std::fs::write(
        &script,
        format!(
            "exec qemu-system-x86_64 -nodefaults -no-user-config -S -display none \
             -accel tcg -monitor stdio -serial none \\\n{printed}"
        ),
    )
    .unwrap();
    let mut child = Command::new("sh")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting QEMU");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"info qtree\nquit\n")
        .unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("QEMU did not quit within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        status.success(),
        "QEMU refused the printed arguments ({status}):\n{printed}\n{err}"
    );
    out
}

#[test]
fn printed_arguments_start_qemu_with_the_presets_identity() {
    init_logging();
    require_program("qemu-system-x86_64");
    let dir = scratch_dir();
    let nbd = dir.path().join("nbd.sock");
    let nbd_arg = format!("unix:{}", nbd.display());
    let serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            PROFILE,
            "--capacity",
            "1G",
            "--memory",
            "--queues",
            "2",
            "--nbd",
            &nbd_arg,
        ],
    );
    let id = serve.report().drive.identity.expect("identity");
    assert_eq!(id.model, "INTEL SSDSA2M160G2GC");

    let sata = qtree(
        dir.path(),
        &qemu_args(&["--bus", "sata", "--profile", PROFILE, "--nbd", &nbd_arg]),
    );
    eprintln!("{sata}");
    for want in [
        "dev: ide-hd, id \"vssd0\"".to_string(),
        format!("model = \"{}\"", id.model),
        format!("serial = \"{}\"", id.serial),
        format!("ver = \"{}\"", id.firmware),
        format!("wwn = {} ({:#x})", id.wwn.unwrap(), id.wwn.unwrap()),
    ] {
        assert!(sata.contains(&want), "no {want:?} in info qtree");
    }

    let nvme = qtree(
        dir.path(),
        &qemu_args(&["--bus", "nvme", "--profile", PROFILE, "--nbd", &nbd_arg]),
    );
    assert!(nvme.contains("dev: nvme, id \"vssd0\""), "{nvme}");
    assert!(
        nvme.contains(&format!("serial = \"{}\"", id.serial)),
        "{nvme}"
    );

    let sock = serve.socket.display().to_string();
    let virtio = qtree(
        dir.path(),
        &qemu_args(&[
            "--bus",
            "virtio",
            "--profile",
            PROFILE,
            "--socket",
            &sock,
            "--queues",
            "2",
            "--mem",
            "256M",
        ]),
    );
    assert!(virtio.contains("dev: vhost-user-blk-pci"), "{virtio}");
    assert!(virtio.contains("num-queues = 2"), "{virtio}");
    serve.stop_ok();
}

/// Issue 30, defect 8: the serial went into an XML comment, and a serial
/// containing `--` ended the comment early, so the XML did not parse. The
/// `--libvirt` output of every bus is one XML document whatever the
/// serial, and nothing the user gave is inside a comment.
#[test]
fn libvirt_xml_stays_valid_whatever_the_serial() {
    let serial = "ab--cd-";
    for bus in [
        ["--bus", "virtio", "--socket", "/run/vssd.sock"],
        ["--bus", "sata", "--nbd", "/run/vssd-nbd.sock"],
        ["--bus", "nvme", "--nbd", "/run/vssd-nbd.sock"],
    ] {
        let mut a = vec!["--profile", PROFILE, "--serial", serial, "--libvirt"];
        a.extend(bus);
        let x = qemu_args(&a);
        // Even spliced into a document (what the old fragments needed).
        let spliced = format!("<r xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>{x}</r>");
        if let Err(e) = roxmltree::Document::parse(&spliced) {
            panic!("{bus:?}: {e}\n{x}");
        }
        let doc = roxmltree::Document::parse(&x).unwrap_or_else(|e| panic!("{bus:?}: {e}\n{x}"));
        for c in doc.descendants().filter(|n| n.is_comment()) {
            assert!(!c.text().unwrap_or("").contains(serial), "{x}");
        }
    }
}
