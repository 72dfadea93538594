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

/// The drive's figures over a phase.
pub fn drive(p: &mut PhaseResult) {
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

/// Parse fio bandwidth logs (`msec, KiB/s, dir, bs, offset` lines, one
/// file per job) into per-interval totals.
pub fn series_from_logs(logs: &[String], interval_ms: u64) -> Series {
    let mut read: BTreeMap<u64, f64> = BTreeMap::new();
    let mut write: BTreeMap<u64, f64> = BTreeMap::new();
    for text in logs {
        for l in text.lines() {
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            if f.len() < 3 {
                continue;
            }
            let (Ok(ms), Ok(kib), Ok(dir)) =
                (f[0].parse::<u64>(), f[1].parse::<f64>(), f[2].parse::<u8>())
            else {
                continue;
            };
            let slot = ms.saturating_sub(1) / interval_ms.max(1);
            let target = if dir == 0 {
                &mut read
            } else if dir == 1 {
                &mut write
            } else {
                continue;
            };
            *target.entry(slot).or_default() += kib * 1024.0;
        }
    }
    let to_vec = |m: &BTreeMap<u64, f64>| -> Vec<f64> {
        let n = m.keys().max().map(|k| k + 1).unwrap_or(0);
        (0..n).map(|i| m.get(&i).copied().unwrap_or(0.0)).collect()
    };
    Series {
        interval_s: interval_ms as f64 / 1000.0,
        read_bytes_s: to_vec(&read),
        write_bytes_s: to_vec(&write),
    }
}

/// Counters difference as an audit-like TRIM report (the simulator's view).
pub fn counters_trim(a: &Counters, b: &Counters) -> u64 {
    b.host_trimmed_bytes.saturating_sub(a.host_trimmed_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            1000,
        );
        assert_eq!(s.write_bytes_s, vec![150.0 * 1024.0, 200.0 * 1024.0]);
        assert!(s.read_bytes_s.is_empty());
    }
}
