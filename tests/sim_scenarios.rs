#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! Scenario tests of `vssd sim` (issue 2): fio job files from `tests/jobs/`
//! run against `sata-mlc-2011` at a reduced capacity, through the library
//! API and through the real binary. All figures are virtual-time figures
//! from the model; nothing here depends on wall-clock time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use vssd::profile::{Bytes, Profile};
use vssd::sim::{Dir, JobFile, JobReport, JobSpec, RunReport, Simulation, report};

const PROFILE: &str = "sata-mlc-2011";
const CAP: u64 = 4 << 30;
const MB: f64 = 1e6;

fn job_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/jobs")
        .join(name)
}

fn jobs(name: &str) -> Vec<JobSpec> {
    let jf = JobFile::load(&[job_path(name)]).unwrap();
    assert!(jf.warnings.is_empty(), "{name}: {:?}", jf.warnings);
    jf.jobs
}

fn profile() -> Profile {
    Profile::load_with_capacity(PROFILE, Some(CAP)).unwrap()
}

fn job<'a>(r: &'a RunReport, name: &str) -> &'a JobReport {
    r.jobs
        .iter()
        .find(|j| j.name == name)
        .unwrap_or_else(|| panic!("no job {name}"))
}

fn mean(v: &[f64]) -> f64 {
    assert!(!v.is_empty());
    v.iter().sum::<f64>() / v.len() as f64
}

/// Write amplification between two runs: NAND bytes programmed per host byte written.
fn wa_between(before: &RunReport, after: &RunReport) -> f64 {
    let nand = after.counters.nand_bytes_programmed - before.counters.nand_bytes_programmed;
    let host = after.counters.host_written_bytes - before.counters.host_written_bytes;
    nand as f64 / host as f64
}

fn mbs(v: &[f64]) -> Vec<String> {
    v.iter().map(|x| format!("{:.0}", x / MB)).collect()
}

/// One drive aged once and shared by the scenarios that start from it:
/// a fresh sequential fill, then random 4 KiB writes over 1.5x the capacity.
struct Aged {
    fill: RunReport,
    random: RunReport,
    sim: Simulation,
}

fn age(profile: &Profile) -> Aged {
    let mut sim = Simulation::new(profile, 1);
    let fill = sim.run(&jobs("seq-write.fio")).unwrap();
    let random = sim.run(&jobs("random-4k-1.5x.fio")).unwrap();
    Aged { fill, random, sim }
}

fn aged() -> &'static Aged {
    static AGED: OnceLock<Aged> = OnceLock::new();
    AGED.get_or_init(|| age(&profile()))
}

/// Scenario 1: fresh 128 KiB sequential write bandwidth is within 10 % of
/// what the profile's parameters predict.
#[test]
fn s1_fresh_sequential_write_matches_prediction() {
    let a = aged();
    let j = &a.fill.jobs[0];
    assert_eq!(j.dir[Dir::Write as usize].io_bytes, CAP);
    let bw = j.bw_bytes(Dir::Write);
    let predicted = profile().predict().seq_write_bytes_s;
    eprintln!(
        "fresh seq write {:.1} MB/s, predicted {:.1} MB/s",
        bw / MB,
        predicted / MB
    );
    assert!(
        (bw / predicted - 1.0).abs() < 0.10,
        "fresh sequential write {:.1} MB/s is not within 10 % of the predicted {:.1} MB/s",
        bw / MB,
        predicted / MB
    );
}

/// Scenario 2: after random writes over 1.5x the capacity, sequential write
/// bandwidth in its first seconds is well below fresh, and returns toward
/// fresh as sequential writing continues over the whole drive: it rises
/// through the first pass, and a second pass runs at fresh speed.
#[test]
fn s2_used_drive_is_slow_then_recovers() {
    let a = aged();
    let fresh = a.fill.jobs[0].bw_bytes(Dir::Write);
    let random = &a.random.jobs[0];
    assert!(random.dir[Dir::Write as usize].io_bytes >= CAP * 3 / 2);
    let mut sim = a.sim.clone();
    let r = sim.run(&jobs("seq-write.fio")).unwrap();
    assert_eq!(r.jobs[0].dir[Dir::Write as usize].io_bytes, CAP);
    let s = r.jobs[0].bw_series(Dir::Write);
    eprintln!(
        "fresh {:.1} MB/s; first pass after random writes, per second (MB/s): {:?}",
        fresh / MB,
        mbs(&s)
    );
    assert!(s.len() >= 20, "too few intervals: {}", s.len());
    let first3 = mean(&s[..3]);
    let tenth = s.len() / 10;
    let first_tenth = mean(&s[..tenth]);
    let last_tenth = mean(&s[s.len() - tenth..]);
    let half = s.len() / 2;
    let (first_half, second_half) = (mean(&s[..half]), mean(&s[half..]));
    eprintln!(
        "first 3 s {:.1}, first tenth {:.1}, last tenth {:.1}, halves {:.1} / {:.1} MB/s",
        first3 / MB,
        first_tenth / MB,
        last_tenth / MB,
        first_half / MB,
        second_half / MB
    );
    // (0.3: since --capacity keeps the usable spare area, the 4 GiB drive
    // behaves like the full-size one, whose first seconds include the
    // write buffer filling at link speed.)
    assert!(
        first3 < 0.3 * fresh,
        "first seconds {:.1} MB/s are not well below fresh {:.1} MB/s",
        first3 / MB,
        fresh / MB
    );
    assert!(
        second_half > first_half && last_tenth > 2.0 * first_tenth,
        "bandwidth does not rise toward fresh through the pass: tenths {:.1} -> {:.1} MB/s",
        first_tenth / MB,
        last_tenth / MB
    );
    let again = sim.run(&jobs("seq-write.fio")).unwrap();
    let bw2 = again.jobs[0].bw_bytes(Dir::Write);
    eprintln!("second pass {:.1} MB/s", bw2 / MB);
    assert!(
        (bw2 / fresh - 1.0).abs() < 0.10,
        "a second sequential pass ({:.1} MB/s) is not back at fresh ({:.1} MB/s)",
        bw2 / MB,
        fresh / MB
    );
}

/// Scenario 3: after a whole-device TRIM, sequential write bandwidth is back
/// within 5 % of fresh from the first second.
#[test]
fn s3_trim_restores_fresh_performance() {
    let a = aged();
    let fresh = a.fill.jobs[0].bw_series(Dir::Write);
    let mut sim = a.sim.clone();
    let t = sim.run(&jobs("trim-all.fio")).unwrap();
    assert_eq!(t.jobs[0].dir[Dir::Trim as usize].io_bytes, CAP);
    let r = sim.run(&jobs("seq-write.fio")).unwrap();
    let s = r.jobs[0].bw_series(Dir::Write);
    eprintln!("fresh (MB/s):      {:?}", mbs(&fresh));
    eprintln!("after TRIM (MB/s): {:?}", mbs(&s));
    // Whole intervals only (the last entry may be a partial one).
    let n = fresh.len().min(s.len()) - 1;
    assert!(n >= 10);
    for i in 0..n {
        assert!(
            (s[i] / fresh[i] - 1.0).abs() < 0.05,
            "second {}: {:.1} MB/s after TRIM vs {:.1} MB/s fresh",
            i + 1,
            s[i] / MB,
            fresh[i] / MB
        );
    }
    let (bw, bw_fresh) = (
        r.jobs[0].bw_bytes(Dir::Write),
        a.fill.jobs[0].bw_bytes(Dir::Write),
    );
    assert!((bw / bw_fresh - 1.0).abs() < 0.05, "{bw} vs {bw_fresh}");
}

/// Scenario 4: write amplification ≈ 1 for pure sequential writes, > 1 for
/// random writes, and larger with less over-provisioning.
#[test]
fn s4_write_amplification_depends_on_pattern_and_op() {
    let a = aged();
    let wa_seq = a.fill.counters.write_amplification;
    let wa_rand = wa_between(&a.fill, &a.random);

    // The same NAND exporting less: more over-provisioning.
    let base = profile();
    let mut more_op = base.clone();
    more_op.name = "sata-mlc-2011-more-op".into();
    more_op.geometry.exported_capacity = Bytes(CAP / 8 * 7);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("more-op.toml");
    std::fs::write(&path, more_op.to_toml()).unwrap();
    let more_op = Profile::load(path.to_str().unwrap()).unwrap();
    assert!(more_op.op_ratio() > base.op_ratio() + 0.1);
    assert_eq!(more_op.raw_capacity(), base.raw_capacity());
    let b = age(&more_op);
    let wa_rand_more_op = wa_between(&b.fill, &b.random);
    eprintln!(
        "WA: sequential {wa_seq:.3}; random {wa_rand:.3} at {:.1} % OP, {wa_rand_more_op:.3} at {:.1} % OP",
        base.op_ratio() * 100.0,
        more_op.op_ratio() * 100.0
    );
    assert!((wa_seq - 1.0).abs() < 0.02, "sequential WA {wa_seq}");
    assert!(wa_rand > 1.5, "random WA {wa_rand}");
    assert!(
        wa_rand_more_op > 1.0,
        "random WA with more OP {wa_rand_more_op}"
    );
    assert!(
        wa_rand > wa_rand_more_op * 1.1,
        "random WA {wa_rand:.3} with less OP is not larger than {wa_rand_more_op:.3} with more"
    );
}

/// Scenario 5: reads of trimmed ranges are faster than reads of written ranges.
#[test]
fn s5_reads_of_trimmed_ranges_are_faster() {
    let mut sim = Simulation::new(&profile(), 1);
    let r = sim.run(&jobs("read-trimmed-vs-written.fio")).unwrap();
    let w = job(&r, "read-written");
    let t = job(&r, "read-trimmed");
    let (lw, lt) = (w.dir[0].clat.mean(), t.dir[0].clat.mean());
    eprintln!(
        "QD1 4 KiB random reads: written {:.1} µs ({:.0} IOPS), trimmed {:.1} µs ({:.0} IOPS)",
        lw / 1e3,
        w.iops(Dir::Read),
        lt / 1e3,
        t.iops(Dir::Read)
    );
    assert_eq!((w.dir[0].ios, t.dir[0].ios), (4000, 4000));
    assert!(lt < lw * 0.8, "trimmed reads {lt} ns vs written {lw} ns");
    assert!(t.iops(Dir::Read) > w.iops(Dir::Read) * 1.2);
    assert!(t.dir[0].clat.percentile(99.0) < w.dir[0].clat.percentile(50.0));
}

fn vssd(args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_vssd"))
        .args(args)
        .output()
        .expect("run vssd");
    assert!(
        out.status.success(),
        "vssd {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Scenario 6: two runs with the same seed produce byte-identical JSON
/// (through the binary), and another seed produces different JSON.
#[test]
fn s6_same_seed_same_json_through_the_binary() {
    let jobfile = job_path("mixed-determinism.fio");
    let jf = jobfile.to_str().unwrap();
    let run = |seed: &str| {
        vssd(&[
            "sim",
            "--profile",
            PROFILE,
            "--capacity",
            "4G",
            "--output-format",
            "json",
            "--seed",
            seed,
            jf,
        ])
        .stdout
    };
    let a = run("7");
    let b = run("7");
    assert!(!a.is_empty());
    assert!(a == b, "two runs with --seed 7 differ");
    assert!(run("8") != a, "--seed 8 gives the same JSON as --seed 7");

    let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
    let jobs = v["jobs"].as_array().unwrap();
    let names: Vec<&str> = jobs
        .iter()
        .map(|j| j["jobname"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["seq-fill", "mixed", "mixed", "random-reads", "trims"]
    );
    let mixed = &jobs[1];
    for d in ["read", "write"] {
        let x = &mixed[d];
        assert!(x["io_bytes"].as_u64().unwrap() > 0, "{d}");
        assert!(x["bw_bytes"].as_u64().unwrap() > 0);
        assert!(x["iops"].as_f64().unwrap() > 0.0);
        assert!(x["runtime"].as_u64().unwrap() > 0);
        let c = &x["clat_ns"];
        assert!(c["mean"].as_f64().unwrap() > 0.0);
        let p = &c["percentile"];
        assert!(p["50.000000"].as_u64().unwrap() <= p["99.000000"].as_u64().unwrap());
        assert!(p["99.900000"].as_u64().unwrap() <= c["max"].as_u64().unwrap());
    }
    let reads = mixed["read"]["total_ios"].as_u64().unwrap();
    let writes = mixed["write"]["total_ios"].as_u64().unwrap();
    assert_eq!(reads + writes, 6000);
    assert!(jobs[4]["trim"]["io_bytes"].as_u64().unwrap() == 500 * 65536);
    let vs = &v["vssd"];
    assert_eq!(vs["profile"], PROFILE);
    assert_eq!(vs["capacity"].as_u64(), Some(CAP));
    assert!(vs["sim_ops"].as_u64().unwrap() > 20_000);
    assert!(vs["host_written_bytes"].as_u64().unwrap() >= CAP / 2);
    // Data still in the write buffer is not programmed yet, so WA may be below 1.
    assert!(vs["write_amplification"].as_f64().unwrap() > 0.5);
    assert!(vs["erase_count_max"].is_u64());
}

/// The library gives the same JSON twice too (no hidden global state).
#[test]
fn s6_same_seed_same_json_through_the_library() {
    let run = || {
        let mut sim = Simulation::new(&profile(), 3);
        report::json(&sim.run(&jobs("mixed-determinism.fio")).unwrap())
    };
    assert_eq!(run(), run());
}

/// `--bw-log` writes fio-format logs, one file per job instance; the normal
/// report shows the model counters and the simulation speed.
#[test]
fn bw_logs_and_normal_report_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let jobfile = dir.path().join("two.fio");
    std::fs::write(
        &jobfile,
        "[global]\nfilename=/dev/vdb\nsize=1g\n[w]\nrw=write\nbs=128k\niodepth=32\nlog_avg_msec=500\n[r]\nrw=randread\niodepth=4\ntime_based\nruntime=2\nuid=1\n",
    )
    .unwrap();
    let prefix = dir.path().join("run");
    let out = vssd(&[
        "sim",
        "--profile",
        PROFILE,
        "--capacity",
        "4G",
        "--bw-log",
        prefix.to_str().unwrap(),
        jobfile.to_str().unwrap(),
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`uid` is not simulated"),
        "no warning for an option fio has and the simulator ignores: {err}"
    );
    for want in [
        "w: (groupid=0",
        "r: (groupid=0",
        "write: IOPS=",
        "read: IOPS=",
        "clat percentiles",
        "write amplification",
        "simulated ops per wall second",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    let log1 = std::fs::read_to_string(dir.path().join("run_bw.1.log")).unwrap();
    let log2 = std::fs::read_to_string(dir.path().join("run_bw.2.log")).unwrap();
    let rows: Vec<Vec<u64>> = log1
        .lines()
        .map(|l| l.split(", ").map(|x| x.parse().unwrap()).collect())
        .collect();
    assert!(rows.len() >= 4, "{log1}");
    for (i, row) in rows.iter().enumerate().take(rows.len() - 1) {
        assert_eq!(row.len(), 5);
        assert_eq!(
            (row[0], row[2], row[3], row[4]),
            (500 * (i as u64 + 1), 1, 131072, 0)
        );
        assert!(row[1] > 10_000, "{row:?}");
    }
    // The time-based reader logs two 1-second intervals of direction 0.
    let lines: Vec<&str> = log2.lines().collect();
    assert!(
        lines.len() >= 2 && lines[0].starts_with("1000, ") && lines[1].starts_with("2000, "),
        "{log2}"
    );
    assert!(lines.iter().all(|l| l.split(", ").nth(2) == Some("0")));
}

/// A job the simulator cannot honour is an error naming the key and line.
#[test]
fn unsupported_options_fail_with_key_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let jobfile = dir.path().join("bad.fio");
    std::fs::write(&jobfile, "[j]\nrw=randwrite\nbssplit=4k/50:64k/50\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vssd"))
        .args([
            "sim",
            "--profile",
            PROFILE,
            "--capacity",
            "4G",
            jobfile.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.fio:3") && err.contains("bssplit"),
        "{err}"
    );
}
