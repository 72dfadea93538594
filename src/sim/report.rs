//! Reports: fio-like text, fio-shaped JSON, and fio-format bandwidth logs.
//!
//! The JSON holds only virtual-time figures, so the same seed gives the same
//! bytes; wall-clock figures are printed by the caller elsewhere.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;
use serde::ser::SerializeMap;

use crate::model::Counters;

use super::engine::{JobReport, RunReport, SsReport};
use super::hist::Histogram;
use super::jobfile::Dir;

/// Percentile values, serialised as an ordered map `{"1.000000": v, ...}` like fio.
struct Percentiles(Vec<(f64, u64)>);

impl Serialize for Percentiles {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (p, v) in &self.0 {
            m.serialize_entry(&format!("{p:.6}"), v)?;
        }
        m.end()
    }
}

#[derive(Serialize)]
struct JsonLat {
    min: u64,
    max: u64,
    mean: f64,
    stddev: f64,
    #[serde(rename = "N")]
    n: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    percentile: Option<Percentiles>,
}

impl JsonLat {
    fn from_hist(h: &Histogram, pcts: Option<&[f64]>) -> JsonLat {
        JsonLat {
            min: h.min(),
            max: h.max(),
            mean: round3(h.mean()),
            stddev: round3(h.stddev()),
            n: h.count(),
            percentile: pcts
                .filter(|_| h.count() > 0)
                .map(|ps| Percentiles(ps.iter().map(|&p| (p, h.percentile(p))).collect())),
        }
    }

    fn zero() -> JsonLat {
        JsonLat {
            min: 0,
            max: 0,
            mean: 0.0,
            stddev: 0.0,
            n: 0,
            percentile: None,
        }
    }
}

#[derive(Serialize)]
struct JsonDir {
    io_bytes: u64,
    io_kbytes: u64,
    bw_bytes: u64,
    bw: u64,
    iops: f64,
    runtime: u64,
    total_ios: u64,
    short_ios: u64,
    drop_ios: u64,
    slat_ns: JsonLat,
    clat_ns: JsonLat,
    lat_ns: JsonLat,
    bw_min: u64,
    bw_max: u64,
    bw_agg: f64,
    bw_mean: f64,
    bw_dev: f64,
    bw_samples: u64,
}

/// Summary of a job's bandwidth samples for one direction, KiB/s:
/// (min, max, mean, stddev, count).
fn bw_sample_stats(j: &JobReport, d: Dir) -> (u64, u64, f64, f64, u64) {
    let s = &j.bw_stats[d as usize];
    (
        s.min(),
        s.max(),
        round3(s.mean()),
        round3(s.stddev()),
        s.count(),
    )
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn runtime_ms(j: &JobReport) -> u64 {
    (j.runtime_ns() + 500_000) / 1_000_000
}

impl JsonDir {
    fn new(j: &JobReport, d: Dir) -> JsonDir {
        let r = &j.dir[d as usize];
        let (bw_min, bw_max, bw_mean, bw_dev, bw_samples) = bw_sample_stats(j, d);
        let active = j.dirs.contains(&d) && r.ios > 0;
        JsonDir {
            io_bytes: r.io_bytes,
            io_kbytes: r.io_bytes / 1024,
            bw_bytes: j.bw_bytes(d).round() as u64,
            bw: (j.bw_bytes(d) / 1024.0).round() as u64,
            iops: round3(j.iops(d)),
            runtime: if active { runtime_ms(j) } else { 0 },
            total_ios: r.ios,
            short_ios: 0,
            drop_ios: 0,
            slat_ns: JsonLat::zero(),
            clat_ns: JsonLat::from_hist(&r.clat, Some(&j.percentiles)),
            lat_ns: JsonLat::from_hist(&r.clat, None),
            bw_min,
            bw_max,
            bw_agg: if active { 100.0 } else { 0.0 },
            bw_mean,
            bw_dev,
            bw_samples,
        }
    }
}

#[derive(Serialize)]
struct JsonJobOptions {
    rw: String,
    bs: String,
    iodepth: String,
}

#[derive(Serialize)]
struct JsonJob {
    jobname: String,
    groupid: usize,
    error: i32,
    #[serde(rename = "job options")]
    job_options: JsonJobOptions,
    read: JsonDir,
    write: JsonDir,
    trim: JsonDir,
    job_runtime: u64,
    /// Jobs merged into this entry (fio's group_reporting).
    #[serde(skip_serializing_if = "is_one")]
    jobs: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    steadystate: Option<JsonSs>,
}

#[derive(Serialize)]
struct JsonSsData {
    bw_mean: u64,
    iops_mean: u64,
    iops: Vec<u64>,
    bw: Vec<u64>,
}

/// fio's `steadystate` object.
#[derive(Serialize)]
struct JsonSs {
    ss: String,
    duration: u64,
    attained: u32,
    criterion: String,
    max_deviation: f64,
    slope: f64,
    data: JsonSsData,
}

impl JsonSs {
    fn new(s: &SsReport) -> JsonSs {
        JsonSs {
            ss: s.ss.clone(),
            duration: s.duration,
            attained: s.attained as u32,
            criterion: format!("{:.6}{}", s.criterion, if s.pct { "%" } else { "" }),
            max_deviation: finite(s.max_deviation),
            slope: finite(s.slope),
            data: JsonSsData {
                bw_mean: s.bw_mean(),
                iops_mean: s.iops_mean(),
                iops: s.iops.clone(),
                bw: s.bw.clone(),
            },
        }
    }
}

/// JSON has no NaN: 0 instead (fio prints what its printf makes of it).
fn finite(v: f64) -> f64 {
    if v.is_finite() { v } else { 0.0 }
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

#[derive(Serialize)]
struct JsonVssd<'a> {
    profile: &'a str,
    capacity: u64,
    seed: u64,
    sim_ops: u64,
    virtual_start_ns: u64,
    virtual_end_ns: u64,
    #[serde(flatten)]
    counters: &'a Counters,
}

#[derive(Serialize)]
struct JsonOut<'a> {
    #[serde(rename = "fio version")]
    fio_version: String,
    jobs: Vec<JsonJob>,
    vssd: JsonVssd<'a>,
}

fn bs_text(j: &JobReport) -> String {
    let v: Vec<String> = j
        .dirs
        .iter()
        .map(|&d| crate::size::format_size(j.bs[d as usize]))
        .collect();
    v.join(",")
}

/// fio-shaped JSON (pretty-printed, newline-terminated).
pub fn json(r: &RunReport) -> String {
    let jobs = r
        .reported_jobs()
        .iter()
        .map(|j| JsonJob {
            jobname: j.name.clone(),
            groupid: j.group,
            job_options: JsonJobOptions {
                rw: j.rw.clone(),
                bs: bs_text(j),
                iodepth: j.iodepth.to_string(),
            },
            read: JsonDir::new(j, Dir::Read),
            write: JsonDir::new(j, Dir::Write),
            trim: JsonDir::new(j, Dir::Trim),
            job_runtime: runtime_ms(j),
            jobs: j.jobs,
            error: j.error.as_ref().map_or(0, |e| e.errno),
            steadystate: j.steadystate.as_ref().map(JsonSs::new),
        })
        .collect();
    let out = JsonOut {
        fio_version: format!("vssd-sim-{}", env!("CARGO_PKG_VERSION")),
        jobs,
        vssd: JsonVssd {
            profile: &r.profile,
            capacity: r.capacity,
            seed: r.seed,
            sim_ops: r.sim_ops,
            virtual_start_ns: r.start_ns,
            virtual_end_ns: r.end_ns,
            counters: &r.counters,
        },
    };
    let mut s = serde_json::to_string_pretty(&out).expect("report serialises");
    s.push('\n');
    s
}

/// A number with a binary unit, three or four significant digits: `167MiB`.
fn bin(v: f64) -> String {
    unit(v, 1024.0, &["B", "KiB", "MiB", "GiB", "TiB", "PiB"])
}

/// A number with a decimal unit: `175MB`.
fn dec(v: f64) -> String {
    unit(v, 1000.0, &["B", "kB", "MB", "GB", "TB", "PB"])
}

fn unit(mut v: f64, base: f64, names: &[&str]) -> String {
    let mut i = 0;
    while v >= 10_000.0 && i + 1 < names.len() {
        v /= base;
        i += 1;
    }
    if i == 0 || v >= 100.0 {
        format!("{v:.0}{}", names[i])
    } else if v >= 10.0 {
        format!("{v:.1}{}", names[i])
    } else {
        format!("{v:.2}{}", names[i])
    }
}

fn iops_text(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1}k", v / 1000.0)
    } else {
        format!("{v:.0}")
    }
}

fn dir_text(out: &mut String, j: &JobReport, d: Dir) {
    let r = &j.dir[d as usize];
    let rt = runtime_ms(j);
    let bw = j.bw_bytes(d);
    let _ = writeln!(
        out,
        "  {}: IOPS={}, BW={}/s ({}/s)({}/{}msec)",
        d.name(),
        iops_text(j.iops(d)),
        bin(bw),
        dec(bw),
        bin(r.io_bytes as f64),
        rt
    );
    let h = &r.clat;
    if h.count() == 0 {
        return;
    }
    let us = |ns: f64| ns / 1000.0;
    let _ = writeln!(
        out,
        "    clat (usec): min={:.0}, max={:.0}, avg={:.2}, stdev={:.2}",
        us(h.min() as f64),
        us(h.max() as f64),
        us(h.mean()),
        us(h.stddev())
    );
    let _ = writeln!(out, "    clat percentiles (usec):");
    let cells: Vec<String> = j
        .percentiles
        .iter()
        .map(|&p| format!("{p:5.2}th=[{:>7.0}]", us(h.percentile(p) as f64)))
        .collect();
    for row in cells.chunks(4) {
        let _ = writeln!(out, "     | {}", row.join(", "));
    }
    let (mn, mx, mean, dev, n) = bw_sample_stats(j, d);
    if n > 0 {
        let _ = writeln!(
            out,
            "   bw (  KiB/s): min={mn}, max={mx}, avg={mean:.2}, stdev={dev:.2}, samples={n}"
        );
    }
}

/// fio-like readable summary (virtual-time figures and model counters).
pub fn normal(r: &RunReport) -> String {
    let mut out = String::new();
    let jobs = r.reported_jobs();
    for j in &jobs {
        let _ = writeln!(
            out,
            "{}: (groupid={}, jobs={}): rw={}, bs={}, iodepth={}",
            j.name,
            j.group,
            j.jobs,
            j.rw,
            bs_text(j),
            j.iodepth
        );
        if let Some(e) = &j.error {
            let _ = writeln!(out, "  error={}: {}", e.errno, e.msg);
        }
        for &d in &j.dirs {
            dir_text(&mut out, j, d);
        }
        if let Some(s) = &j.steadystate {
            let bw = s.bw_mean() as f64;
            let _ = writeln!(
                out,
                "  steadystate  : attained={}, bw={}/s ({}/s), iops={}, {}{}={:.3}{}",
                if s.attained { "yes" } else { "no" },
                bin(bw),
                dec(bw),
                iops_text(s.iops_mean() as f64),
                if s.iops_based { "iops" } else { "bw" },
                if s.slope_based { " slope" } else { " mean dev" },
                s.criterion,
                if s.pct { "%" } else { "" }
            );
        }
        let _ = writeln!(
            out,
            "  started at {:.3} s, ran {:.3} s (virtual)",
            (j.start_ns - r.start_ns) as f64 / 1e9,
            j.runtime_ns() as f64 / 1e9
        );
        out.push('\n');
    }
    let groups = jobs.iter().map(|j| j.group).max().map_or(0, |g| g + 1);
    for g in 0..groups {
        let _ = writeln!(out, "Run status group {g} (all jobs):");
        let members: Vec<&JobReport> = jobs.iter().map(|j| &**j).filter(|j| j.group == g).collect();
        for d in Dir::ALL {
            let io: u64 = members.iter().map(|j| j.dir[d as usize].io_bytes).sum();
            if io == 0 {
                continue;
            }
            let start = members.iter().map(|j| j.stats_start_ns).min().unwrap_or(0);
            let end = members.iter().map(|j| j.end_ns).max().unwrap_or(0);
            let span = end.saturating_sub(start).max(1);
            let bw = io as f64 * 1e9 / span as f64;
            let rts: Vec<u64> = members
                .iter()
                .filter(|j| j.dir[d as usize].ios > 0)
                .map(|j| runtime_ms(j))
                .collect();
            let _ = writeln!(
                out,
                "  {:>5}: bw={}/s ({}/s), io={} ({}), run={}-{}msec",
                d.name().to_uppercase(),
                bin(bw),
                dec(bw),
                bin(io as f64),
                dec(io as f64),
                rts.iter().min().unwrap_or(&0),
                rts.iter().max().unwrap_or(&0)
            );
        }
    }
    let c = &r.counters;
    let _ = writeln!(
        out,
        "\nDrive: profile {}, {} exported, seed {}",
        r.profile,
        crate::size::describe_size(r.capacity),
        r.seed
    );
    let _ = writeln!(
        out,
        "  host: read {}, written {}, trimmed {} ({} / {} / {} commands, {} flushes)",
        bin(c.host_read_bytes as f64),
        bin(c.host_written_bytes as f64),
        bin(c.host_trimmed_bytes as f64),
        c.host_read_cmds,
        c.host_write_cmds,
        c.host_trim_cmds,
        c.host_flush_cmds
    );
    let _ = writeln!(
        out,
        "  nand: {} pages read, {} pages programmed ({}), {} erases",
        c.nand_pages_read,
        c.nand_pages_programmed,
        bin(c.nand_bytes_programmed as f64),
        c.erases
    );
    let _ = writeln!(
        out,
        "  gc: {} copies, {} victims ({} foreground, {} background), {} read-modify-writes",
        c.gc_copies, c.gc_victims, c.fg_gc_victims, c.bg_gc_victims, c.rmw_reads
    );
    let _ = writeln!(
        out,
        "  write amplification {:.3}; free blocks {}/{}; mapped units {}/{}; erase count min/avg/max {}/{:.2}/{}",
        c.write_amplification,
        c.free_blocks,
        c.total_blocks,
        c.mapped_units,
        c.total_units,
        c.erase_count_min,
        c.erase_count_avg,
        c.erase_count_max
    );
    let _ = writeln!(
        out,
        "  simulated {} requests in {:.3} s of virtual time",
        r.sim_ops,
        (r.end_ns - r.start_ns) as f64 / 1e9
    );
    out
}

/// Write fio-format bandwidth logs: for each job instance with a prefix
/// (`override_prefix`, else the job's `write_bw_log`), `PREFIX_bw.N.log`
/// with lines `msec, KiB/s, direction, bs, priority`. Returns the files
/// written. See [`super::logfiles::write_logs`] for every log.
pub fn write_bw_logs(
    r: &RunReport,
    override_prefix: Option<&str>,
) -> Result<Vec<PathBuf>, (PathBuf, std::io::Error)> {
    super::logfiles::write_logs(r, override_prefix, true, false)
}

#[cfg(test)]
mod tests {
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
        use crate::sim::engine::{FixedLatency, run_jobs};
        let jf = crate::sim::jobfile::parse(text, "t.fio").unwrap();
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
}
