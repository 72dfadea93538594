//! Tests of the parent module.

use super::*;

#[test]
fn units() {
    assert_eq!(bin(175e6), "167MiB");
    assert_eq!(dec(175e6), "175MB");
    assert_eq!(bin(4.0 * 1024.0 * 1024.0 * 1024.0), "4096MiB");
    assert_eq!(bin(512.0), "512B");
    assert_eq!(bin(20_000.0), "19.5KiB");
    assert_eq!(iops_text(35_123.0), "35.1k");
}

#[test]
fn percentile_keys_like_fio() {
    let p = Percentiles(vec![(1.0, 10), (99.9, 20)]);
    assert_eq!(
        serde_json::to_string(&p).unwrap(),
        r#"{"1.000000":10,"99.900000":20}"#
    );
}

fn run_text(text: &str) -> RunReport {
    use crate::engine::{FixedLatency, run_jobs};
    let jf = crate::jobfile::parse(text, "t.fio").unwrap();
    let mut dev = FixedLatency {
        capacity: 1 << 30,
        latency_ns: 100_000,
    };
    let (jobs, sim_ops, end_ns) = run_jobs(&mut dev, &jf.jobs, 1, 0, &mut |_| {}).unwrap();
    RunReport {
        profile: "fixed".into(),
        capacity: 1 << 30,
        seed: 1,
        jobs,
        counters: Counters::default(),
        sim_ops,
        start_ns: 0,
        end_ns,
        global_options: jf.global_options.clone(),
        epoch_s: 0,
    }
}

#[test]
fn json_and_text_follow_fio() {
    let r = run_text(
        "[a]\nrw=randwrite\nsize=1m\niodepth=2\n[b]\nstonewall\nrw=read\nsize=1m\nnumjobs=3\ngroup_reporting\n",
    );
    let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "group_reporting merges b's three clones");
    assert_eq!(jobs[0]["jobname"], "a");
    assert_eq!(jobs[0]["write"]["total_ios"], 256);
    assert_eq!(jobs[0]["write"]["io_kbytes"], 1024);
    // 256 I/Os, 2 at a time, 100 µs each: 12.8 ms, 20000 IOPS.
    assert_eq!(jobs[0]["write"]["runtime"], 13);
    assert_eq!(jobs[0]["write"]["iops"], 20000.0);
    assert_eq!(jobs[0]["write"]["bw_bytes"], 81_920_000);
    assert_eq!(
        jobs[0]["write"]["clat_ns"]["percentile"]["50.000000"],
        100_000
    );
    assert_eq!(jobs[0]["read"]["total_ios"], 0);
    assert!(jobs[0].get("jobs").is_none());
    assert_eq!(
        (jobs[1]["jobname"].as_str(), jobs[1]["groupid"].as_u64()),
        (Some("b"), Some(1))
    );
    assert_eq!(jobs[1]["jobs"], 3);
    assert_eq!(jobs[1]["read"]["total_ios"], 768);
    assert_eq!(v["vssd"]["sim_ops"], 1024);
    let text = normal(&r);
    assert!(
        text.contains("a: (groupid=0, jobs=1): rw=randwrite, bs=4KiB, iodepth=2"),
        "{text}"
    );
    assert!(text.contains("b: (groupid=1, jobs=3): rw=read"), "{text}");
    assert!(text.contains("Run status group 1 (all jobs):"), "{text}");
}

/// The keys fio 3.33 adds around the per-direction figures, with its
/// definitions (tests/fio_json.rs compares the key sets with real fio).
#[test]
fn fio_keys_and_their_values() {
    // 100 µs per I/O, 4 at a time, for 2.3 s: 500 ms samples of 40000 IOPS.
    let r = run_text(
        "[global]
ioengine=libaio
[a]
rw=randread
iodepth=4
time_based
runtime=2300ms
description=d
",
    );
    let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
    assert_eq!(v["fio version"], "fio-3.33");
    assert_eq!(v["global options"]["ioengine"], "libaio");
    let j = &v["jobs"][0];
    assert_eq!(j["job options"]["runtime"], "2300ms");
    assert!(
        j["job options"].get("time_based").is_none(),
        "bare flags are not printed"
    );
    assert_eq!(
        (j["elapsed"].as_u64(), j["eta"].as_u64()),
        (Some(3), Some(0))
    );
    assert_eq!(
        (j["job_runtime"].as_u64(), j["desc"].as_str()),
        (Some(2300), Some("d"))
    );
    let rd = &j["read"];
    // The last I/Os complete at 2300.000 ms (whole µs round up to ms, as
    // in fio's update_runtime).
    assert_eq!(rd["runtime"], 2300);
    assert_eq!(rd["bw_bytes"], 163_840_000);
    assert_eq!(rd["bw"], 160_000);
    // Four whole 500 ms windows (the first misses the I/Os of its first
    // 100 µs); the last 300 ms are not sampled. bw_agg: the mean
    // (159992 KiB/s) as a share of the group's 160000.
    assert_eq!(
        (rd["iops_samples"].as_u64(), rd["bw_samples"].as_u64()),
        (Some(4), Some(4))
    );
    assert_eq!(
        (rd["iops_min"].as_u64(), rd["iops_max"].as_u64()),
        (Some(39_992), Some(40_000))
    );
    assert_eq!(
        (rd["bw_max"].as_u64(), rd["bw_agg"].as_f64()),
        (Some(160_000), Some(99.995))
    );
    assert!(rd["lat_ns"].get("percentile").is_none() && rd["clat_ns"]["percentile"].is_object());
    // Three I/Os were issued with fewer than four in flight.
    let lvl = &j["iodepth_level"];
    assert_eq!(
        (lvl["1"].as_f64(), lvl["2"].as_f64()),
        (Some(0.1), Some(0.1))
    );
    assert!(lvl["4"].as_f64().unwrap() > 99.9);
    assert_eq!(j["iodepth_submit"]["4"], 100.0);
    // Every completion takes 100 µs: fio's [100, 250) µs range.
    assert_eq!(j["latency_us"]["250"], 100.0);
    assert_eq!(j["latency_ms"][">=2000"], 0.0);
    assert_eq!(j["latency_depth"], 4);
    assert_eq!(
        (j["usr_cpu"].as_f64(), j["ctx"].as_u64()),
        (Some(0.0), Some(0))
    );
    assert!(j.get("total_err").is_none());
    // The time is the virtual clock's, from the epoch.
    assert_eq!(
        (v["timestamp"].as_u64(), v["timestamp_ms"].as_u64()),
        (Some(2), Some(2300))
    );
    assert_eq!(v["time"], "Thu Jan  1 00:00:02 1970");
    let mut late = r.clone();
    late.epoch_s = 1_796_089_944;
    let v: serde_json::Value = serde_json::from_str(&json(&late)).unwrap();
    assert_eq!(v["time"], "Tue Dec  1 01:52:26 2026");
    assert_eq!(v["timestamp_ms"], 1_796_089_946_300u64);
}

/// group_reporting adds bandwidth and IOPS statistics up, as fio does.
#[test]
fn group_reporting_sums_rate_statistics() {
    let r = run_text(
        "[a]
rw=read
numjobs=2
group_reporting
time_based
runtime=1100ms
",
    );
    let one = &r.jobs[0].iops_stats[0];
    let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
    let rd = &v["jobs"][0]["read"];
    assert_eq!(rd["iops_samples"].as_u64(), Some(2 * one.count()));
    assert_eq!(rd["iops_min"].as_u64(), Some(2 * one.min()));
    assert_eq!(rd["iops_mean"].as_f64(), Some(f6(2.0 * one.mean())));
    assert_eq!(v["jobs"][0]["job_runtime"], 2200);
    assert_eq!(rd["runtime"], 1100);
}

#[test]
fn ctime_like_fio() {
    assert_eq!(ctime_utc(0), "Thu Jan  1 00:00:00 1970");
    assert_eq!(ctime_utc(951_782_400), "Tue Feb 29 00:00:00 2000");
    assert_eq!(ctime_utc(4_102_444_799), "Thu Dec 31 23:59:59 2099");
}

#[test]
fn job_bw_log_option_names_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("mine");
    let r = run_text(&format!(
        "[a]\nrw=write\nsize=1m\nlog_avg_msec=5\nwrite_bw_log={}\n[b]\nrw=read\nsize=4k\n",
        prefix.display()
    ));
    let files = write_bw_logs(&r, None).unwrap();
    assert_eq!(files, [dir.path().join("mine_bw.1.log")]);
    let log = std::fs::read_to_string(&files[0]).unwrap();
    // 4 KiB per 100 µs = 40000 KiB/s; the first 5 ms interval holds 49
    // completions (the first is at 100 µs), the next ones 50.
    assert!(
        log.starts_with("5, 39200, 1, 4096, 0\n10, 40000, 1, 4096, 0\n"),
        "{log}"
    );
    let files = write_bw_logs(&r, Some(dir.path().join("all").to_str().unwrap())).unwrap();
    assert_eq!(files.len(), 2);
}
