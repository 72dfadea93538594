//! Named figures of a phase (`expect` uses them): computed the same way
//! from a guest's fio JSON and from the simulator's, from surface points,
//! from the TRIM audit and from the drive's counters.

use std::collections::BTreeMap;

use serde_json::Value;

use super::results::{PhaseResult, Series, Surface};
use vssd_model::Counters;

/// Sum of `jobs[].DIR.KEY` in fio's JSON.
fn fio_sum(v: &Value, dir: &str, key: &str) -> f64 {
    v["jobs"]
        .as_array()
        .map(|jobs| {
            jobs.iter()
                .filter_map(|j| j[dir][key].as_f64())
                .sum::<f64>()
        })
        .unwrap_or(0.0)
}

/// Mean over jobs with I/O in `dir` of `jobs[].DIR.clat_ns.KEY`.
fn fio_clat(v: &Value, dir: &str, key: &str) -> Option<f64> {
    let jobs = v["jobs"].as_array()?;
    let vals: Vec<f64> = jobs
        .iter()
        .filter(|j| j[dir]["total_ios"].as_f64().unwrap_or(0.0) > 0.0)
        .filter_map(|j| match key {
            "mean" => j[dir]["clat_ns"]["mean"].as_f64(),
            p => j[dir]["clat_ns"]["percentile"][p].as_f64(),
        })
        .collect();
    if vals.is_empty() {
        None
    } else {
        Some(vals.iter().sum::<f64>() / vals.len() as f64)
    }
}

/// Requests in the drive on average over a fio run (Little's law over the
/// jobs' completion latency), as the simulator's JSON tells it.
pub fn fio_queue_depth(v: &Value) -> f64 {
    let Some(jobs) = v["jobs"].as_array() else {
        return 0.0;
    };
    jobs.iter()
        .map(|j| {
            ["read", "write", "trim"]
                .iter()
                .map(|d| {
                    j[*d]["iops"].as_f64().unwrap_or(0.0)
                        * j[*d]["clat_ns"]["mean"].as_f64().unwrap_or(0.0)
                        / 1e9
                })
                .sum::<f64>()
        })
        .sum()
}

/// Figures of a fio phase.
pub fn fio(v: &Value, m: &mut BTreeMap<String, f64>) {
    for dir in ["read", "write"] {
        m.insert(format!("{dir}_bw"), fio_sum(v, dir, "bw_bytes"));
        m.insert(format!("{dir}_iops"), fio_sum(v, dir, "iops"));
        if let Some(c) = fio_clat(v, dir, "mean") {
            m.insert(format!("{dir}_clat_mean"), c);
        }
        if let Some(c) = fio_clat(v, dir, "99.000000") {
            m.insert(format!("{dir}_clat_p99"), c);
        }
    }
}

/// Figures of a surface phase.
pub fn surface(s: &Surface, m: &mut BTreeMap<String, f64>) {
    let v: Vec<f64> = s.points.iter().map(|p| p.bytes_s).collect();
    if v.is_empty() {
        return;
    }
    m.insert("mean_bw".into(), v.iter().sum::<f64>() / v.len() as f64);
    m.insert(
        "min_bw".into(),
        v.iter().cloned().fold(f64::INFINITY, f64::min),
    );
    m.insert("max_bw".into(), v.iter().cloned().fold(0.0, f64::max));
    // The median: what a few positions slowed by the host (a stalled
    // emulator thread) cannot move, unlike the mean.
    let mut sorted = v.clone();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    m.insert("median_bw".into(), median);
    m.insert("first_bw".into(), v[0]);
    m.insert("last_bw".into(), v[v.len() - 1]);
}

/// A fio phase's writes fell below this share of their first window's
/// rate, and stayed below it on average: a drop (the corpus's rule,
/// `vssd validate`'s `write_gb_before_drop`).
pub const DROP_FRAC: f64 = 0.8;

/// Windows a phase's series is cut into to find its drop: the drop's
/// position is known to a fiftieth of the phase.
const DROP_WINDOWS: usize = 50;

/// Where a phase's write rate dropped for good (an SLC cache running
/// out): found by [`write_drop`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriteDrop {
    /// Seconds into the phase.
    pub at_s: f64,
    /// Bytes written before it.
    pub bytes: f64,
    /// Mean write rate before it, bytes/s.
    pub bw_before: f64,
    /// Mean write rate from it to the end, bytes/s.
    pub bw_after: f64,
}

/// The first window of the series' writes (a fiftieth of it, at least
/// one interval) below [`DROP_FRAC`] of the starting rate where the drop
/// lasts: the mean rate from it to the end is below that too, and so are
/// four of the five windows from it and three in four of all the windows
/// from it on (a window slowed by the host, with the drive fast again
/// after it, is no drop); `None` without one.
/// The starting rate is the median of the first five windows: the first
/// alone is faster than the drive (the write buffer taking the first
/// requests at once), and a log of few requests per interval alternates
/// between neighbouring counts.
pub fn write_drop(s: &Series) -> Option<WriteDrop> {
    let v = &s.write_bytes_s;
    let dt = s.interval_s;
    if v.len() < 4 || !(dt.is_finite() && dt > 0.0) {
        return None;
    }
    let k = (v.len() / DROP_WINDOWS).max(1);
    let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len().max(1) as f64;
    let w: Vec<f64> = v.chunks_exact(k).map(mean).collect();
    let mut head: Vec<f64> = w.iter().take(5).copied().collect();
    head.sort_by(f64::total_cmp);
    let limit = DROP_FRAC * head[head.len() / 2];
    let below = |ws: &[f64]| ws.iter().filter(|x| **x < limit).count();
    let lasts = |i: usize| {
        let next = &w[i..(i + 5).min(w.len())];
        w[i] < limit
            && 5 * below(next) >= 4 * next.len()
            && 4 * below(&w[i..]) >= 3 * (w.len() - i)
            && mean(&v[i * k..]) < limit
    };
    let at = (1..w.len()).find(|&i| lasts(i))? * k;
    Some(WriteDrop {
        at_s: at as f64 * dt,
        bytes: v[..at].iter().sum::<f64>() * dt,
        bw_before: mean(&v[..at]),
        bw_after: mean(&v[at..]),
    })
}

/// A fio phase's drop figures (none when its writes did not drop):
/// `write_drop_s`, `write_drop_bytes`, `write_bw_before_drop`,
/// `write_bw_after_drop`.
pub fn drop_figures(p: &mut PhaseResult) {
    let Some(d) = p.series.as_ref().and_then(write_drop) else {
        return;
    };
    let m = &mut p.metrics;
    m.insert("write_drop_s".into(), d.at_s);
    m.insert("write_drop_bytes".into(), d.bytes);
    m.insert("write_bw_before_drop".into(), d.bw_before);
    m.insert("write_bw_after_drop".into(), d.bw_after);
}

/// The drive's figures over a phase (and a fio phase's drop figures).
pub fn drive(p: &mut PhaseResult) {
    if p.kind == "fio" {
        drop_figures(p);
    }
    let (Some(a), Some(b)) = (&p.counters_before, &p.counters_after) else {
        return;
    };
    let host = b.host_written_bytes.saturating_sub(a.host_written_bytes);
    let nand = b
        .nand_bytes_programmed
        .saturating_sub(a.nand_bytes_programmed);
    let m = &mut p.metrics;
    m.insert("host_written".into(), host as f64);
    m.insert("nand_written".into(), nand as f64);
    m.insert(
        "waf".into(),
        if host > 0 {
            nand as f64 / host as f64
        } else {
            0.0
        },
    );
    m.insert("free_blocks".into(), b.free_blocks as f64);
    m.insert("wall_s".into(), p.wall_s);
    m.insert("model_s".into(), p.model_s);
}

/// One entry of a bandwidth log as the window it averages: from the
/// previous entry of its log and direction (or the job's start) to its
/// own time, drive-time seconds from the phase's start, at `bytes_s`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BwWindow {
    /// The window's start, s.
    pub start_s: f64,
    /// Its end (the entry's time), s.
    pub end_s: f64,
    /// Bytes/s over it.
    pub bytes_s: f64,
    /// A write (else a read).
    pub write: bool,
}

/// fio bandwidth logs (`msec, KiB/s, dir, bs, offset` lines, one file
/// per job, written with `log_avg_msec`) as windows in the drive's time:
/// each entry averages the bytes moved since the previous entry of its
/// log and direction (fio's own `bw_sample_time`), so it covers that
/// span; under time dilation `k` the wall-clock times are ÷ `k` and the
/// rates × `k`.
pub fn windows_from_logs(logs: &[String], k: f64) -> Vec<BwWindow> {
    let k = if k.is_finite() && k > 0.0 { k } else { 1.0 };
    let mut out = Vec::new();
    for text in logs {
        let mut last = [0.0f64; 2];
        for l in text.lines() {
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            if f.len() < 3 {
                continue;
            }
            let (Ok(ms), Ok(kib), Ok(dir)) = (
                f[0].parse::<u64>(),
                f[1].parse::<f64>(),
                f[2].parse::<usize>(),
            ) else {
                continue;
            };
            if dir > 1 {
                continue;
            }
            let end_s = ms as f64 / 1000.0 / k;
            let start_s = last[dir];
            last[dir] = end_s.max(start_s);
            out.push(BwWindow {
                start_s,
                end_s,
                bytes_s: kib * 1024.0 * k,
                write: dir == 1,
            });
        }
    }
    out
}

/// The nearest (by ratio) of 1, 2, 2.5 and 5 × 10ⁿ to `v`.
fn round_step(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let e = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * e)
        .min_by(|a, b| (a / v).ln().abs().total_cmp(&(b / v).ln().abs()))
        .unwrap_or(e)
}

/// Most bins a series gets: a longer phase gets wider ones.
const MAX_BINS: f64 = 2000.0;

/// Bandwidth windows binned into a series: bins about as wide as the
/// windows are long (their median, to the nearest 1, 2, 2.5 or 5 × 10ⁿ
/// s: the resolution the entries support), each window's bytes spread
/// evenly over the time it covers. A log's windows follow one another
/// without a gap, so every bin within the phase gets the rate of the
/// windows it overlaps: a steady phase draws a steady line wherever its
/// entries' times fall, and no bytes are lost or counted twice. Under
/// dilation the guest's entries come about 1 / K of the drive's seconds
/// apart; late or early entries (a busy host) move bytes between
/// neighbouring bins instead of leaving one empty and doubling the next.
pub fn series_from_windows(windows: &[BwWindow]) -> Series {
    let valid: Vec<&BwWindow> = windows
        .iter()
        .filter(|w| {
            w.start_s.is_finite()
                && w.end_s.is_finite()
                && w.bytes_s.is_finite()
                && w.end_s > w.start_s
                && w.start_s >= 0.0
        })
        .collect();
    let Some(end) = valid.iter().map(|w| w.end_s).reduce(f64::max) else {
        return Series {
            interval_s: 1.0,
            ..Series::default()
        };
    };
    let mut lengths: Vec<f64> = valid.iter().map(|w| w.end_s - w.start_s).collect();
    lengths.sort_by(f64::total_cmp);
    let median = lengths[lengths.len() / 2];
    let width = round_step(median.max(end / MAX_BINS));
    let n = ((end / width) - 1e-9).ceil().max(1.0) as usize;
    let (mut read, mut write) = (vec![0.0; n], vec![0.0; n]);
    for w in valid {
        let bins = if w.write { &mut write } else { &mut read };
        let first = (w.start_s / width).floor() as usize;
        let last = ((w.end_s / width).ceil() as usize).min(n);
        for (i, bin) in bins.iter_mut().enumerate().take(last).skip(first) {
            let (lo, hi) = (i as f64 * width, (i + 1) as f64 * width);
            let overlap = w.end_s.min(hi) - w.start_s.max(lo);
            if overlap > 0.0 {
                *bin += w.bytes_s * overlap / width;
            }
        }
    }
    // The last bin is cut short by the phase's end: its rate is over the
    // part of it that existed.
    let covered = (end - (n - 1) as f64 * width) / width;
    if covered > 0.0 && covered < 1.0 {
        for v in [&mut read, &mut write] {
            v[n - 1] /= covered;
        }
    }
    let active = |v: &[f64]| v.iter().any(|x| *x > 0.0);
    Series {
        interval_s: width,
        read_bytes_s: if active(&read) { read } else { Vec::new() },
        write_bytes_s: if active(&write) { write } else { Vec::new() },
    }
}

/// fio bandwidth logs in the drive's time (dilation `k`), binned as
/// [`series_from_windows`] does.
pub fn series_from_logs(logs: &[String], k: f64) -> Series {
    series_from_windows(&windows_from_logs(logs, k))
}

/// Counters difference as an audit-like TRIM report (the simulator's view).
pub fn counters_trim(a: &Counters, b: &Counters) -> u64 {
    b.host_trimmed_bytes.saturating_sub(a.host_trimmed_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache cliff: 100 intervals at 4 GB/s, then 50 at 1.5 with a
    /// host hiccup (one interval at 1) before it, and one early, with the
    /// long slow part after it: the drop is at the cliff, not a hiccup,
    /// with the bytes and rates on either side.
    #[test]
    fn a_write_drop_is_where_the_rate_falls_for_good() {
        let mut w = vec![4e9; 100];
        w[40] = 1e9;
        w[7] = 0.5e9;
        w.extend(vec![1.5e9; 100]);
        let s = Series {
            interval_s: 0.1,
            read_bytes_s: Vec::new(),
            write_bytes_s: w,
        };
        let d = write_drop(&s).unwrap();
        // Windows of 4 intervals: the cliff's window starts at 100.
        assert!((d.at_s - 10.0).abs() < 1e-9, "{d:?}");
        assert!((d.bytes - (100.0 * 4e9 - 6.5e9) * 0.1).abs() < 1.0, "{d:?}");
        assert!((d.bw_after / 1.5e9 - 1.0).abs() < 0.05, "{d:?}");
        // A steady line has none.
        let flat = Series {
            write_bytes_s: vec![4e9; 100],
            ..s.clone()
        };
        assert_eq!(write_drop(&flat), None);
    }

    #[test]
    fn fio_figures_and_logs() {
        let v: Value = serde_json::from_str(
            r#"{"jobs":[{"write":{"bw_bytes":100,"iops":2,"total_ios":5,"clat_ns":{"mean":10.0,"percentile":{"99.000000":20}}},"read":{"bw_bytes":0,"iops":0,"total_ios":0}},
                        {"write":{"bw_bytes":50,"iops":1,"total_ios":5,"clat_ns":{"mean":30.0,"percentile":{"99.000000":40}}},"read":{"bw_bytes":0,"iops":0,"total_ios":0}}]}"#,
        )
        .unwrap();
        let mut m = BTreeMap::new();
        fio(&v, &mut m);
        assert_eq!(m["write_bw"], 150.0);
        assert_eq!(m["write_iops"], 3.0);
        assert_eq!(m["write_clat_mean"], 20.0);
        assert_eq!(m["write_clat_p99"], 30.0);
        assert!(!m.contains_key("read_clat_mean"));
        let s = series_from_logs(
            &[
                "1000, 100, 1, 4096, 0\n2000, 200, 1, 4096, 0\n".into(),
                "1000, 50, 1, 4096, 0\n".into(),
            ],
            1.0,
        );
        assert_eq!(s.interval_s, 1.0);
        assert_eq!(s.write_bytes_s, vec![150.0 * 1024.0, 200.0 * 1024.0]);
        assert!(s.read_bytes_s.is_empty());
    }

    /// fio under TCG logs a little late or early: entries at 1000, 2001,
    /// 2999, 4002 ... ms. Binned by the entries' times, a steady 100 KiB/s
    /// came out as 100, 0, 200, 100 (the chart's drops to zero); spread
    /// over the windows they average, it stays 100 throughout.
    #[test]
    fn jittered_entries_draw_a_steady_line() {
        let times = [1000, 2001, 2999, 4002, 5000, 5999, 7003, 8000];
        let log: String = times
            .iter()
            .map(|t| format!("{t}, 100, 1, 131072, 0\n"))
            .collect();
        let s = series_from_logs(&[log], 1.0);
        assert_eq!(s.interval_s, 1.0);
        assert_eq!(s.write_bytes_s.len(), 8);
        for v in &s.write_bytes_s {
            assert!((v / 102_400.0 - 1.0).abs() < 0.01, "{:?}", s.write_bytes_s);
        }
        // The bytes are all there.
        let bytes: f64 = s.write_bytes_s.iter().sum::<f64>() * s.interval_s;
        assert!((bytes - 102_400.0 * 8.0).abs() < 1.0, "{bytes}");
    }

    /// Dilated by 5: fio's 1-second wall-clock entries are 0.2 s of the
    /// drive's, at 5 × the rate; bins of 0.2 s, no zero between busy
    /// ones, and the drive's bytes per second.
    #[test]
    fn dilated_entries_are_binned_in_drive_time() {
        let times = [1000, 2030, 2990, 4010, 5000, 6020];
        let log: String = times
            .iter()
            .map(|t| format!("{t}, 20000, 1, 131072, 0\n"))
            .collect();
        let s = series_from_logs(&[log], 5.0);
        assert!((s.interval_s - 0.2).abs() < 1e-12, "{}", s.interval_s);
        let v = &s.write_bytes_s;
        assert!(v.iter().all(|x| *x > 0.0), "{v:?}");
        let want = 20000.0 * 1024.0 * 5.0;
        for x in v {
            assert!((x / want - 1.0).abs() < 0.01, "{v:?}");
        }
        // A log with a read direction too gets both.
        let s = series_from_logs(
            &["1000, 10, 0, 4096, 0\n1000, 30, 1, 4096, 0\n".into()],
            1.0,
        );
        assert_eq!(s.read_bytes_s, vec![10.0 * 1024.0]);
        assert_eq!(s.write_bytes_s, vec![30.0 * 1024.0]);
        assert!(series_from_logs(&[], 1.0).write_bytes_s.is_empty());
    }
}
