#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! `vssd sim`'s logs and steady-state options through the binary: file
//! names, formats and exit status as fio 3.33 has them. Virtual time only.

use std::path::Path;
use std::process::{Command, Output};

fn sim(dir: &Path, job: &str, extra: &[&str]) -> Output {
    std::fs::write(dir.join("j.fio"), job).unwrap();
    Command::new(env!("CARGO_BIN_EXE_vssd"))
        .current_dir(dir)
        .args(["sim", "--profile", "sata-mlc-2011", "--capacity", "1G"])
        .args(extra)
        .arg("j.fio")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

fn rows(path: &Path) -> Vec<Vec<u64>> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| l.split(", ").map(|x| x.parse().unwrap()).collect())
        .collect()
}

#[test]
fn every_log_is_written_with_fio_names_and_columns() {
    let dir = tempfile::tempdir().unwrap();
    let out = sim(
        dir.path(),
        "[w]\nrw=randwrite\nsize=256m\niodepth=8\nlog_avg_msec=200\nwrite_lat_log\nwrite_iops_log=io\nwrite_hist_log=h\nlog_hist_msec=250\nwrite_bw_log\n[r]\nrw=randread\nsize=64m\nnumjobs=2\nper_job_logs=0\nwrite_iops_log=shared\n",
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = dir.path();
    for name in [
        "w_lat.1.log",
        "w_clat.1.log",
        "w_slat.1.log",
        "io_iops.1.log",
        "w_bw.1.log",
    ] {
        let r = rows(&d.join(name));
        assert!(r.len() >= 3, "{name}: {r:?}");
        assert!(
            r.iter().all(|row| row.len() == 5 && row[2] == 1),
            "{name}: {r:?}"
        );
        assert!(
            r.windows(2).all(|w| w[0][0] < w[1][0]),
            "{name}: times increase"
        );
    }
    // Averaged latency entries: bs 0, mean clat in ns, slat 0.
    let clat = rows(&d.join("w_clat.1.log"));
    assert!(clat.iter().all(|r| r[1] > 10_000 && r[3] == 0), "{clat:?}");
    assert!(rows(&d.join("w_slat.1.log")).iter().all(|r| r[1] == 0));
    let hist = rows(&d.join("h_clat_hist.1.log"));
    assert!(
        !hist.is_empty()
            && hist
                .iter()
                .all(|r| r.len() == 3 + 1856 && r[1] == 1 && r[2] == 4096)
    );
    // per_job_logs=0: both clones of [r] in one file, no instance number.
    let shared = rows(&d.join("shared_iops.log"));
    assert!(shared.iter().all(|r| r[2] == 0));
    assert!(!d.join("shared_iops.2.log").exists() && !d.join("shared_iops.3.log").exists());
}

#[test]
fn steady_state_shows_in_both_reports() {
    let dir = tempfile::tempdir().unwrap();
    let job = "[steady]\nrw=randread\ntime_based\nruntime=300\nss=iops:5%\nss_dur=10\nss_ramp=2\n";
    let out = sim(dir.path(), job, &["--output-format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ss = &v["jobs"][0]["steadystate"];
    assert_eq!(ss["ss"], "iops:5.000000%");
    assert_eq!(ss["duration"], 10);
    assert_eq!(ss["attained"], 1);
    assert_eq!(ss["data"]["iops"].as_array().unwrap().len(), 10);
    // Reads of an unwritten drive are steady at once: stopped long before 300 s.
    assert!(
        v["jobs"][0]["job_runtime"].as_u64().unwrap() < 20_000,
        "{v}"
    );
    let out = sim(dir.path(), job, &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("steadystate  : attained=yes"), "{text}");
}

#[test]
fn max_latency_fails_the_run_after_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = sim(
        dir.path(),
        "[j]\nrw=randwrite\nsize=64m\nmax_latency=1us\n",
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("error=110"), "{text}");
    assert!(
        err.contains("job [j] ended with error 110") && err.contains("exceeds specified max"),
        "{err}"
    );
}
