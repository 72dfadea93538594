#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! The command line as a user meets it: closed or full standard output,
//! unknown profiles, sizes. Runs the real binary; no guest, no timing.

use std::fs::OpenOptions;
use std::process::{Command, Output, Stdio};

fn vssd(args: &[&str], stdout: Stdio) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vssd"))
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// Standard output whose reader is already gone: every write fails with EPIPE.
fn closed_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer.into()
}

fn dev_full() -> Stdio {
    OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap()
        .into()
}

fn job(dir: &tempfile::TempDir) -> String {
    let p = dir.path().join("j.fio");
    std::fs::write(&p, "[j]\nrw=write\nbs=1m\nsize=64m\n").unwrap();
    p.to_str().unwrap().to_string()
}

/// Hardening 6: `vssd profiles | head -1` and friends end quietly with 0.
#[test]
fn closed_stdout_is_a_quiet_success() {
    let dir = tempfile::tempdir().unwrap();
    let j = job(&dir);
    for args in [
        vec!["profiles"],
        vec!["profiles", "show", "nvme-tlc"],
        vec!["sim", "--profile", "instant", &j],
        vec!["sim", "--profile", "instant", "--output-format", "json", &j],
    ] {
        let out = vssd(&args, closed_pipe());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {:?} {err}", out.status);
        assert!(
            !err.contains("panicked") && !err.contains("error"),
            "{args:?}: {err}"
        );
    }
}

/// Hardening 6: a full disk is an error that says so, with a failure status.
#[test]
fn full_stdout_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let j = job(&dir);
    for args in [
        vec!["profiles"],
        vec!["profiles", "show", "sata-mlc-2011"],
        vec!["sim", "--profile", "instant", &j],
    ] {
        let out = vssd(&args, dev_full());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("cannot write to standard output") && err.contains("No space left"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// An unknown profile gets a suggestion, and the file error is printed once.
#[test]
fn unknown_profile_suggests_and_says_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let j = job(&dir);
    for args in [
        vec!["sim", "--profile", "sata-mlc-201", &j],
        vec!["profiles", "show", "sata-mlc-201"],
    ] {
        let out = vssd(&args, Stdio::piped());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("did you mean \"sata-mlc-2011\"?"), "{err}");
        assert_eq!(err.matches("No such file").count(), 1, "{err}");
    }
}

/// `16GB` is decimal and `16G` binary, and the exact byte count is printed;
/// a capacity too small names the profile's minimum.
#[test]
fn capacities_are_exact_and_minimums_stated() {
    let show = |cap: &str| {
        let out = vssd(
            &["profiles", "show", "sata-mlc-2011", "--capacity", cap],
            Stdio::piped(),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(show("16GB").contains("(16000000000 bytes)"));
    assert!(show("16G").contains("16GiB (17179869184 bytes)"));
    assert!(show("16GiB").contains("16GiB (17179869184 bytes)"));
    let out = vssd(
        &["profiles", "show", "sata-mlc-2011", "--capacity", "1M"],
        Stdio::piped(),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.contains("too small") && err.contains("smallest capacity it scales to is"),
        "{err}"
    );
}

/// `--hmb`: a DRAM-less drive's Host Memory Buffer from the command line.
/// The SN580's 64 MB holds the translation pages of a 5 % span, its 2 MiB
/// of SRAM does not: random reads over the span are faster with it than
/// with a host that gives none (`--hmb 0`). A drive that keeps its whole
/// map in DRAM refuses it.
#[test]
fn hmb_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("hmb.fio");
    std::fs::write(
        &f,
        "[prep]\nrw=write\nbs=1m\niodepth=8\nsize=100%\n\
         [r]\nstonewall\nrw=randread\nbs=4k\niodepth=1\nsize=5%\nruntime=1\ntime_based\nnorandommap\n",
    )
    .unwrap();
    let iops = |hmb: &str| -> f64 {
        let o = vssd(
            &[
                "sim",
                "--profile",
                "wd-sn580-1tb",
                "--capacity",
                "4G",
                "--hmb",
                hmb,
                "--output-format",
                "json",
                f.to_str().unwrap(),
            ],
            Stdio::piped(),
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["jobname"] == "r")
            .unwrap()["read"]["iops"]
            .as_f64()
            .unwrap()
    };
    let (with, without) = (iops("64MB"), iops("0"));
    assert!(with > 1.5 * without, "with {with}, without {without}");
    let o = vssd(
        &[
            "sim",
            "--profile",
            "samsung-980pro-1tb",
            "--hmb",
            "0",
            f.to_str().unwrap(),
        ],
        Stdio::piped(),
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("DRAM-less"));
}
