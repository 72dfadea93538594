#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! `vssd sim --output-format json` is a drop-in for fio 3.33's
//! `--output-format=json`: the same job file runs in real fio (on a small
//! file in a temporary directory, psync, well under a second per job) and
//! in the simulator, and every key fio writes must be in the simulator's
//! JSON, at the same place and of the same JSON type, except the documented
//! differences (docs/sim.md, "JSON keys"). Needs fio 3.33 (the version the
//! test guest runs): scripts/install-deps.sh installs it. No timing is
//! asserted.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Keys fio writes that the simulator leaves out (docs/sim.md): the host's
/// disk statistics have no meaning in model time.
const FIO_ONLY: &[&str] = &["/disk_util"];

/// Keys only the simulator writes (docs/sim.md): the drive's counters, and
/// how many instances a `group_reporting` entry merges.
const SIM_ONLY: &[&str] = &["/vssd", "/jobs[]/jobs"];

/// Exercises every key fio 3.33 writes for a job that the simulator can run:
/// global and job options (an alias, a size unit, repeats of nothing),
/// `desc`, a bandwidth log, `group_reporting` of a mixed job, total-latency
/// percentiles, `continue_on_error` (`total_err`, `first_error`) and steady
/// state.
const JOB: &str = "; vssd's JSON key check: the same file runs in fio and in vssd sim
[global]
filename=data
ioengine=psync
size=16M
description=key check
kb_base=1024

[seq-write]
rw=write
bs=64k
runtime=300ms
time_based
write_bw_log=seq
log_avg_msec=100

[mixed]
stonewall
readwrite=randrw
rwmixread=70
bs=4k
numjobs=2
group_reporting
runtime=400ms
time_based
lat_percentiles=1
percentile_list=50:99:99.9

[reads]
stonewall
rw=randread
blocksize=8k
number_ios=500
continue_on_error=io
ss=iops:50%
ss_dur=1
";

fn fio_version() -> String {
    let out = Command::new("fio").arg("--version").output();
    let out = out.expect("fio --version");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // fio may print notes before its JSON.
    let start = text.find('{').unwrap_or(0);
    serde_json::from_str(&text[start..])
        .unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

/// A JSON value's type as a typed reader sees it: integers and floats differ
/// (fio prints `%f` floats with a decimal point, integers without).
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Compare `sim` against `fio` below `path`; `pattern` is the path with
/// array indices as `[]`, for the lists of allowed differences.
fn compare(fio: &Value, sim: &Value, path: &str, pattern: &str, errors: &mut Vec<String>) {
    if kind(fio) != kind(sim) {
        errors.push(format!("{path}: fio has {}, vssd {}", kind(fio), kind(sim)));
        return;
    }
    match (fio, sim) {
        (Value::Object(f), Value::Object(s)) => {
            for (k, fv) in f {
                let (p, pat) = (format!("{path}/{k}"), format!("{pattern}/{k}"));
                match s.get(k) {
                    Some(sv) => compare(fv, sv, &p, &pat, errors),
                    None if FIO_ONLY.contains(&pat.as_str()) => {}
                    None => errors.push(format!("{p}: missing in vssd's JSON")),
                }
            }
            for k in s.keys().filter(|k| !f.contains_key(*k)) {
                let pat = format!("{pattern}/{k}");
                if !SIM_ONLY.contains(&pat.as_str()) {
                    errors.push(format!("{path}/{k}: only in vssd's JSON"));
                }
            }
        }
        (Value::Array(f), Value::Array(s)) => {
            if f.len() != s.len() {
                errors.push(format!(
                    "{path}: fio has {} entries, vssd {}",
                    f.len(),
                    s.len()
                ));
            }
            for (i, (fv, sv)) in f.iter().zip(s).enumerate() {
                compare(
                    fv,
                    sv,
                    &format!("{path}[{i}]"),
                    &format!("{pattern}[]"),
                    errors,
                );
            }
        }
        _ => {}
    }
}

#[test]
fn sim_json_has_every_key_fio_writes() {
    common::require_program("fio");
    let version = fio_version();
    assert_eq!(
        version, "fio-3.33",
        "this test compares with fio 3.33, the version the test guest runs; found {version}"
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("keys.fio"), JOB).unwrap();

    let out = Command::new("fio")
        .current_dir(d)
        .args(["--output-format=json", "--output=fio.json", "keys.fio"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fio failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_vssd"))
        .current_dir(d)
        .args(["sim", "--profile", "sata-mlc-2011", "--capacity", "1G"])
        .args([
            "--output-format",
            "json",
            "--output",
            "sim.json",
            "keys.fio",
        ])
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "vssd sim failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (fio, sim) = (
        read_json(&d.join("fio.json")),
        read_json(&d.join("sim.json")),
    );

    let mut errors = Vec::new();
    compare(&fio, &sim, "", "", &mut errors);
    assert!(
        errors.is_empty(),
        "vssd's JSON differs from fio's:\n{}",
        errors.join("\n")
    );

    // The options are fio's own text, not normalised values.
    assert_eq!(sim["global options"], fio["global options"]);
    let names = |v: &Value| -> Vec<String> {
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["jobname"].to_string())
            .collect()
    };
    assert_eq!(names(&sim), names(&fio));
    for (f, s) in fio["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .zip(sim["jobs"].as_array().unwrap())
    {
        assert_eq!(s["job options"], f["job options"], "{}", f["jobname"]);
        assert_eq!(s["desc"], f["desc"]);
        for d in ["read", "write", "trim"] {
            let active = |v: &Value| v[d]["io_bytes"].as_u64().unwrap() > 0;
            assert_eq!(active(s), active(f), "{} {d}", f["jobname"]);
        }
    }
    // Conditional keys really were exercised.
    let jobs = sim["jobs"].as_array().unwrap();
    assert!(jobs[1]["read"]["lat_ns"]["percentile"]["99.000000"].is_u64());
    assert!(jobs[2]["total_err"].is_u64() && jobs[2]["steadystate"].is_object());
}
