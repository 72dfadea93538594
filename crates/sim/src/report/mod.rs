//! Reports: fio-like text, fio 3.33's JSON, and fio-format bandwidth logs.
//!
//! The JSON has fio 3.33's keys, in its order, with fio's definitions (see
//! `docs/sim.md` for every key: computed, neutral or omitted). It holds
//! only virtual-time figures, so the same seed gives the same bytes;
//! wall-clock figures are printed by the caller elsewhere.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;
use serde::ser::SerializeMap;

use vssd_model::Counters;

use super::engine::{JobReport, RunReport, SsReport};
use super::jobfile::Dir;
use super::logs::SampleStats;
use vssd_common::fio::Percentiles;
use vssd_common::hist::{FIO_LAT_NR, Histogram};

/// The fio version whose JSON this output follows (the value of its
/// `fio version` key); the simulator's own version is in `vssd.version`.
pub use vssd_common::fio::FIO_VERSION;

/// fio prints floats with `%f`: six decimals. JSON has no NaN: 0 instead.
fn f6(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1e6).round() / 1e6
    } else {
        0.0
    }
}

/// Options as fio prints them: an object whose keys may repeat (fio prints
/// an option given twice twice), in order.
struct OptList<'a>(&'a [(String, String)]);

impl OptList<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for OptList<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// A fixed-key distribution in percent (`iodepth_level`, `latency_us`, ...).
struct Dist {
    keys: &'static [&'static str],
    pct: Vec<f64>,
}

impl Serialize for Dist {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.keys.len()))?;
        for (k, v) in self.keys.iter().zip(&self.pct) {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

const DEPTH_KEYS: [&str; 7] = ["1", "2", "4", "8", "16", "32", ">=64"];
const BATCH_KEYS: [&str; 7] = ["0", "4", "8", "16", "32", "64", ">=64"];
const LAT_KEYS: [&str; 10] = [
    "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000",
];
const LAT_MS_KEYS: [&str; 12] = [
    "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000",
];

/// fio's `stat_calc_dist` (floor 0.1 % for a non-empty level) or
/// `stat_calc_lat` (floor 0.01 %): `counts` as percentages of `total`.
fn percentages(counts: &[u64], total: u64, floor: f64) -> Vec<f64> {
    counts
        .iter()
        .map(|&c| {
            if total == 0 {
                return 0.0;
            }
            let p = c as f64 * 100.0 / total as f64;
            f6(if p < floor && c > 0 { floor } else { p })
        })
        .collect()
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
    /// `pcts`: the percentiles to report, if this latency reports them
    /// (fio: only when it has samples).
    fn from_hist(h: &Histogram, pcts: Option<&[f64]>) -> JsonLat {
        JsonLat {
            min: h.min(),
            max: h.max(),
            mean: f6(h.mean()),
            stddev: f6(h.stddev()),
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

/// fio's per-direction object (`add_ddir_status_json`).
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
    iops_min: u64,
    iops_max: u64,
    iops_mean: f64,
    iops_stddev: f64,
    iops_samples: u64,
}

/// fio's `calc_lat` over bandwidth or IOPS samples: min, max, mean, stddev
/// (all 0 without samples).
fn sample_summary(s: &SampleStats) -> (u64, u64, f64, f64, u64) {
    (s.min(), s.max(), f6(s.mean()), f6(s.stddev()), s.count())
}

impl JsonDir {
    /// `agg`: the stonewall group's aggregate bandwidth in this direction,
    /// bytes/s (fio's `rs->agg`), for `bw_agg`.
    fn new(j: &JobReport, d: Dir, agg: u64) -> JsonDir {
        let r = &j.dir[d as usize];
        let runtime = j.runtime_ms(d);
        let (bw_bytes, iops) = if runtime > 0 {
            (j.bw_bytes(d).floor() as u64, f6(j.iops(d)))
        } else {
            (0, 0.0)
        };
        let (bw_min, bw_max, bw_mean, bw_dev, bw_samples) = sample_summary(&j.bw_stats[d as usize]);
        // fio's convert_agg_kbytes_percent: the job's mean (truncated) as a
        // share of the group's aggregate, at most 100.
        let bw_agg = if bw_samples == 0 {
            0.0
        } else if agg > 1024 {
            f6((bw_mean.trunc() * 100.0 / (agg as f64 / 1024.0)).min(100.0))
        } else {
            100.0
        };
        let (iops_min, iops_max, iops_mean, iops_stddev, iops_samples) =
            sample_summary(&j.iops_stats[d as usize]);
        let pcts = j.percentiles.as_slice();
        JsonDir {
            io_bytes: r.io_bytes,
            io_kbytes: r.io_bytes >> 10,
            bw_bytes,
            bw: bw_bytes / 1024,
            iops,
            runtime,
            total_ios: r.ios,
            short_ios: 0,
            drop_ios: 0,
            slat_ns: JsonLat::zero(),
            clat_ns: JsonLat::from_hist(&r.clat, j.clat_percentiles.then_some(pcts)),
            lat_ns: JsonLat::from_hist(&r.clat, j.lat_percentiles.then_some(pcts)),
            bw_min,
            bw_max,
            bw_agg,
            bw_mean,
            bw_dev,
            bw_samples,
            iops_min,
            iops_max,
            iops_mean,
            iops_stddev,
            iops_samples,
        }
    }
}

/// fio's `sync` object: a replay's flushes (an iolog's `sync` lines) are
/// counted; periodic syncs are refused and `end_fsync`'s flush is not
/// counted (fio counts neither). No latencies.
#[derive(Serialize)]
struct JsonSync {
    total_ios: u64,
    lat_ns: JsonLat,
}

#[derive(Serialize)]
struct JsonJob<'a> {
    jobname: &'a str,
    groupid: usize,
    error: i32,
    eta: u64,
    elapsed: u64,
    #[serde(rename = "job options", skip_serializing_if = "OptList::is_empty")]
    job_options: OptList<'a>,
    read: JsonDir,
    write: JsonDir,
    trim: JsonDir,
    sync: JsonSync,
    job_runtime: u64,
    usr_cpu: f64,
    sys_cpu: f64,
    ctx: u64,
    majf: u64,
    minf: u64,
    iodepth_level: Dist,
    iodepth_submit: Dist,
    iodepth_complete: Dist,
    latency_ns: Dist,
    latency_us: Dist,
    latency_ms: Dist,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_err: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_error: Option<i32>,
    latency_depth: u32,
    latency_target: u64,
    latency_percentile: f64,
    latency_window: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    desc: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    steadystate: Option<JsonSs>,
    /// Jobs merged into this entry (group_reporting); a vssd extension.
    #[serde(skip_serializing_if = "is_one")]
    jobs: u32,
}

impl<'a> JsonJob<'a> {
    /// `agg`: the group's aggregate bandwidth per direction; `elapsed`: the
    /// run's, whole seconds rounded up.
    fn new(j: &'a JobReport, agg: [u64; 3], elapsed: u64) -> JsonJob<'a> {
        let issued: u64 = j.depth_dist.iter().sum();
        let completed: u64 = j.dir.iter().map(|r| r.ios).sum();
        let mut lat = [0u64; FIO_LAT_NR];
        for r in &j.dir {
            for (a, b) in lat.iter_mut().zip(r.clat.fio_lat_counts()) {
                *a += b;
            }
        }
        // fio's percentages of the I/Os issued (its total_io_u).
        let lat = percentages(&lat, issued, 0.01);
        // One I/O per submission and one completion per reap (fio's
        // iodepth_batch=1 with one event handled at a time): the "4" level.
        let batch = |n: u64| Dist {
            keys: &BATCH_KEYS,
            pct: percentages(&[0, n, 0, 0, 0, 0, 0], n, 0.1),
        };
        let cont = j.continue_on_error;
        JsonJob {
            jobname: &j.name,
            groupid: j.group,
            error: j.error.as_ref().map_or(0, |e| e.errno),
            // fio's get_jobs_eta at the end: INT_MAX while under 3 s, then 0.
            eta: if elapsed >= 3 { 0 } else { i32::MAX as u64 },
            elapsed,
            job_options: OptList(&j.options),
            read: JsonDir::new(j, Dir::Read, agg[0]),
            write: JsonDir::new(j, Dir::Write, agg[1]),
            trim: JsonDir::new(j, Dir::Trim, agg[2]),
            sync: JsonSync {
                total_ios: j.sync_ios,
                lat_ns: JsonLat::zero(),
            },
            job_runtime: j.job_runtime_ms,
            usr_cpu: 0.0,
            sys_cpu: 0.0,
            ctx: 0,
            majf: 0,
            minf: 0,
            iodepth_level: Dist {
                keys: &DEPTH_KEYS,
                pct: percentages(&j.depth_dist, issued, 0.1),
            },
            iodepth_submit: batch(issued),
            iodepth_complete: batch(completed),
            latency_ns: Dist {
                keys: &LAT_KEYS,
                pct: lat[..10].to_vec(),
            },
            latency_us: Dist {
                keys: &LAT_KEYS,
                pct: lat[10..20].to_vec(),
            },
            latency_ms: Dist {
                keys: &LAT_MS_KEYS,
                pct: lat[20..].to_vec(),
            },
            total_err: cont.then_some(0),
            first_error: cont.then_some(0),
            latency_depth: j.iodepth,
            latency_target: 0,
            latency_percentile: 100.0,
            latency_window: 0,
            desc: j.description.as_deref().filter(|d| !d.is_empty()),
            steadystate: j.steadystate.as_ref().map(JsonSs::new),
            jobs: j.jobs,
        }
    }
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
        // fio prints its whole ring of `duration` samples, zeros where the
        // window has not filled yet, and averages over all of them.
        let dur = (s.duration as usize).max(s.iops.len());
        let pad = |v: &[u64]| {
            let mut v = v.to_vec();
            v.resize(dur, 0);
            v
        };
        let (iops, bw) = (pad(&s.iops), pad(&s.bw));
        let mean = |v: &[u64]| v.iter().sum::<u64>() / (v.len().max(1) as u64);
        JsonSs {
            ss: s.ss.clone(),
            duration: s.duration,
            attained: s.attained as u32,
            criterion: format!("{:.6}{}", s.criterion, if s.pct { "%" } else { "" }),
            max_deviation: f6(s.max_deviation),
            slope: f6(s.slope),
            data: JsonSsData {
                bw_mean: mean(&bw),
                iops_mean: mean(&iops),
                iops,
                bw,
            },
        }
    }
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

#[derive(Serialize)]
struct JsonVssd<'a> {
    version: String,
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
    fio_version: &'static str,
    timestamp: u64,
    timestamp_ms: u64,
    time: String,
    #[serde(rename = "global options", skip_serializing_if = "OptList::is_empty")]
    global_options: OptList<'a>,
    jobs: Vec<JsonJob<'a>>,
    vssd: JsonVssd<'a>,
}

/// `ctime`'s text for a Unix time, in UTC: `Thu Jan  1 00:00:00 1970`.
fn ctime_utc(unix_s: u64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {}",
        DAYS[((days + 4) % 7) as usize],
        MONTHS[(month - 1) as usize],
        day,
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        year
    )
}

fn bs_text(j: &JobReport) -> String {
    let v: Vec<String> = j
        .dirs
        .iter()
        .map(|&d| vssd_profile::size::format_size(j.bs[d as usize]))
        .collect();
    v.join(",")
}

/// Each stonewall group's aggregate bandwidth per direction, bytes/s, as
/// fio computes it (`rs->agg`): the group's bytes over its longest runtime
/// in whole ms.
fn group_aggregates(jobs: &[&JobReport]) -> Vec<[u64; 3]> {
    let groups = jobs.iter().map(|j| j.group + 1).max().unwrap_or(0);
    let mut bytes = vec![[0u64; 3]; groups];
    let mut max_run = vec![[0u64; 3]; groups];
    for j in jobs {
        for d in Dir::ALL {
            let rt = j.runtime_ms(d);
            if rt > 0 {
                bytes[j.group][d as usize] += j.dir[d as usize].io_bytes;
                max_run[j.group][d as usize] = max_run[j.group][d as usize].max(rt);
            }
        }
    }
    bytes
        .iter()
        .zip(&max_run)
        .map(|(b, m)| std::array::from_fn(|d| (b[d] * 1000).checked_div(m[d]).unwrap_or(0)))
        .collect()
}

/// fio 3.33's JSON (pretty-printed, newline-terminated), plus a `vssd`
/// object with the drive's counters.
pub fn json(r: &RunReport) -> String {
    let reported = r.reported_jobs();
    let refs: Vec<&JobReport> = reported.iter().map(|j| &**j).collect();
    let agg = group_aggregates(&refs);
    // fio's elapsed_sec: whole ms since the start, rounded up to seconds.
    let elapsed = (r.end_ns.saturating_sub(r.start_ns) / 1_000_000).div_ceil(1000);
    let jobs = refs
        .iter()
        .map(|j| JsonJob::new(j, agg[j.group], elapsed))
        .collect();
    // The report's time is the end of the run on the virtual clock.
    let now_ms = r.epoch_s.saturating_mul(1000) + r.end_ns / 1_000_000;
    let out = JsonOut {
        fio_version: FIO_VERSION,
        timestamp: now_ms / 1000,
        timestamp_ms: now_ms,
        time: ctime_utc(now_ms / 1000),
        global_options: OptList(&r.global_options),
        jobs,
        vssd: JsonVssd {
            version: format!("vssd-sim-{}", env!("CARGO_PKG_VERSION")),
            profile: &r.profile,
            capacity: r.capacity,
            seed: r.seed,
            sim_ops: r.sim_ops,
            virtual_start_ns: r.start_ns,
            virtual_end_ns: r.end_ns,
            counters: &r.counters,
        },
    };
    // Plain numbers, strings and maps with string keys: this does not fail;
    // if it ever did, the output says why instead of the process panicking.
    let mut s = serde_json::to_string_pretty(&out).unwrap_or_else(|e| {
        serde_json::json!({ "error": format!("the report could not be serialised: {e}") })
            .to_string()
    });
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
    let rt = j.runtime_ms(d);
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
    let (mn, mx, mean, dev, n) = sample_summary(&j.bw_stats[d as usize]);
    if n > 0 {
        let _ = writeln!(
            out,
            "   bw (  KiB/s): min={mn}, max={mx}, avg={mean:.2}, stdev={dev:.2}, samples={n}"
        );
    }
    let (mn, mx, mean, dev, n) = sample_summary(&j.iops_stats[d as usize]);
    if n > 0 {
        let _ = writeln!(
            out,
            "   iops        : min={mn}, max={mx}, avg={mean:.2}, stdev={dev:.2}, samples={n}"
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
                .map(|j| j.runtime_ms(d))
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
        vssd_profile::size::describe_size(r.capacity),
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
mod tests;
