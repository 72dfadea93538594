//! Numbers as the report prints them, and the key figures it picks from a run.

use std::collections::BTreeMap;

use super::super::results::{BenchResults, PhaseComparison, PhaseResult};

pub(crate) use vssd_chart::numfmt::{fmt_bytes, fmt_mbs, fmt_num, fmt_pct, fmt_ratio};

/// A metric named like `results.json`'s (`write_bw`, `read_iops`,
/// `clat_mean_ns`, `waf`, ...), in the unit people read it in.
pub(crate) fn fmt_metric(name: &str, v: f64) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    let n = name.to_ascii_lowercase();
    if n.ends_with("_ns") || n.contains("clat") || n.contains("lat_") {
        if v >= 1e6 {
            format!("{} ms", fmt_num(v / 1e6, 2))
        } else {
            format!("{} µs", fmt_num(v / 1e3, 1))
        }
    } else if n.contains("iops") {
        format!("{} IOPS", fmt_num(v, 0))
    } else if n.contains("bw") || n.ends_with("bytes_s") {
        format!("{} MB/s", fmt_mbs(v))
    } else if (n.ends_with("_bytes") || n.ends_with("_written")) && v >= 0.0 && v < u64::MAX as f64
    {
        fmt_bytes(v as u64)
    } else if n.ends_with("_s") {
        format!("{} s", fmt_num(v, 1))
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        fmt_num(v, 0)
    } else {
        fmt_num(v, 3)
    }
}

/// Unix seconds as `YYYY-MM-DD HH:MM UTC`.
pub(crate) fn fmt_unix(t: u64) -> String {
    let days = (t / 86_400) as i64;
    let secs = t % 86_400;
    // Days to civil date (proleptic Gregorian), after Howard Hinnant.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        secs / 3600,
        secs % 3600 / 60
    )
}

// ---------------------------------------------------------- key figures

/// The figures the key-figures table shows, with their column headings.
/// A surface shows its median over positions (the statistic the
/// built-in checks and the guest-vs-simulator comparison use) and its
/// mean, each labelled.
pub(crate) const KEY_METRICS: [(&str, &str); 6] = [
    ("write_bw", "Write MB/s"),
    ("read_bw", "Read MB/s"),
    ("median_bw", "Surface median MB/s"),
    ("mean_bw", "Surface mean MB/s"),
    ("write_iops", "Write IOPS"),
    ("read_iops", "Read IOPS"),
];

/// A key figure of a phase: its `metrics` entry, else fio's JSON (summed
/// over jobs), else for a surface's median or mean, its points'.
pub(crate) fn key_value(p: &PhaseResult, key: &str) -> Option<f64> {
    if let Some(v) = p.metrics.get(key) {
        return Some(*v);
    }
    if matches!(key, "median_bw" | "mean_bw") {
        let s = p.surface.as_ref()?;
        let mut m = BTreeMap::new();
        crate::metrics::surface(s, &mut m);
        return m.get(key).copied();
    }
    let (dir, field) = match key {
        "write_bw" => ("write", "bw_bytes"),
        "read_bw" => ("read", "bw_bytes"),
        "write_iops" => ("write", "iops"),
        "read_iops" => ("read", "iops"),
        _ => return None,
    };
    let jobs = p.fio.as_ref()?.get("jobs")?.as_array()?;
    let vals: Vec<f64> = jobs
        .iter()
        .filter_map(|j| j.get(dir)?.get(field)?.as_f64())
        .collect();
    (!vals.is_empty() && vals.iter().any(|v| *v != 0.0)).then(|| vals.iter().sum())
}

/// What a phase did, for grouping comparable phases: `fio randwrite 4k`,
/// `surface write 128 KiB`, or its kind.
pub(crate) fn workload(p: &PhaseResult) -> String {
    if let Some(s) = &p.surface {
        return format!("surface {} {}", s.op, fmt_bytes(s.block));
    }
    if let Some(f) = &p.fio {
        let opt = |k: &str| -> Option<String> {
            let from = |v: Option<&serde_json::Value>| {
                v.and_then(|o| o.get(k)).and_then(|x| match x {
                    serde_json::Value::String(s) => Some(s.clone()),
                    serde_json::Value::Number(n) => Some(n.to_string()),
                    _ => None,
                })
            };
            let job = f
                .get("jobs")
                .and_then(|j| j.get(0))
                .and_then(|j| j.get("job options"));
            from(job).or_else(|| from(f.get("global options")))
        };
        let rw = opt("rw").or_else(|| opt("readwrite"));
        let bs = opt("bs").or_else(|| opt("blocksize"));
        let mut w = String::from("fio");
        for part in [rw, bs].into_iter().flatten() {
            w.push(' ');
            w.push_str(&part);
        }
        return w;
    }
    p.kind.clone()
}

/// A figure that says something: the runs record `read_bw` = 0 for
/// phases that only wrote.
pub(crate) fn nonzero(v: Option<f64>) -> bool {
    v.is_some_and(|v| v != 0.0)
}

/// One row of the key-figures table.
pub(crate) struct KeyRow {
    pub phase: String,
    pub workload: String,
    /// The phase the ratios are to (`None`: the only phase of its workload).
    pub baseline: Option<String>,
    /// Per present key metric: value and ratio to the baseline.
    pub values: Vec<(Option<f64>, Option<f64>)>,
}

/// The key figures of a run: the key metrics any phase has, and a row per
/// phase that has one. Ratios are to the baseline of the phase's workload
/// group: its phase named like "fresh", else its first.
pub(crate) fn key_figures(r: &BenchResults) -> (Vec<(&'static str, &'static str)>, Vec<KeyRow>) {
    let present: Vec<_> = KEY_METRICS
        .iter()
        .copied()
        .filter(|(k, _)| r.phases.iter().any(|p| nonzero(key_value(p, k))))
        .collect();
    let phases: Vec<&PhaseResult> = r
        .phases
        .iter()
        .filter(|p| present.iter().any(|(k, _)| nonzero(key_value(p, k))))
        .collect();
    let mut groups: BTreeMap<String, Vec<&PhaseResult>> = BTreeMap::new();
    for p in &phases {
        groups.entry(workload(p)).or_default().push(p);
    }
    let rows = phases
        .iter()
        .map(|p| {
            let w = workload(p);
            let group = &groups[&w];
            let base = (group.len() > 1).then(|| {
                group
                    .iter()
                    .find(|q| q.name.to_lowercase().contains("fresh"))
                    .unwrap_or(&group[0])
            });
            let values = present
                .iter()
                .map(|(k, _)| {
                    let v = key_value(p, k);
                    let ratio = base.and_then(|b| {
                        let bv = key_value(b, k)?;
                        let v = v?;
                        (bv.is_finite() && bv > 0.0 && v.is_finite()).then(|| v / bv)
                    });
                    (v, ratio)
                })
                .collect();
            KeyRow {
                phase: p.name.clone(),
                workload: w,
                baseline: base.map(|b| b.name.clone()),
                values,
            }
        })
        .collect();
    (present, rows)
}

pub(crate) fn key_cell(key: &str, v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(v) if key.ends_with("_bw") => fmt_mbs(v),
        Some(v) => fmt_num(v, 0),
    }
}

/// Guest vs simulator per phase: the run's own comparison, or when it has
/// none but a simulator run is attached, the key figures of the phases both
/// have, (sim − guest) / guest against the run's tolerance.
pub(crate) fn comparisons(r: &BenchResults) -> Vec<PhaseComparison> {
    if !r.comparison.is_empty() {
        return r.comparison.clone();
    }
    let Some(sim) = r.sim.as_deref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in &r.phases {
        let Some(s) = sim.phase(&p.name) else {
            continue;
        };
        // A surface by its median (as the runner compares it), anything
        // else by its key figures.
        let keys: Vec<&str> = if p.surface.is_some() {
            vec!["median_bw"]
        } else {
            KEY_METRICS.iter().map(|(k, _)| *k).collect()
        };
        for k in keys {
            let (g, v) = (key_value(p, k), key_value(s, k));
            if !nonzero(g) && !nonzero(v) {
                continue;
            }
            if let (Some(g), Some(v)) = (g, v) {
                let difference = (v - g) / g;
                out.push(PhaseComparison {
                    phase: p.name.clone(),
                    metric: k.to_string(),
                    guest: g,
                    sim: v,
                    difference,
                    within: difference.abs() <= r.tolerance,
                    guest_bound: false,
                    after_guest_bound: false,
                    replayed: false,
                    predicted: None,
                });
            }
        }
    }
    out
}

/// Host bytes, NAND bytes and WAF of a phase from its counters.
pub(crate) fn phase_io(p: &PhaseResult) -> Option<(u64, u64, Option<f64>)> {
    let (a, b) = (p.counters_before.as_ref()?, p.counters_after.as_ref()?);
    if b.host_written_bytes < a.host_written_bytes
        || b.nand_bytes_programmed < a.nand_bytes_programmed
    {
        return None; // counters were reset during the phase (secure erase)
    }
    let host = b.host_written_bytes - a.host_written_bytes;
    let nand = b.nand_bytes_programmed - a.nand_bytes_programmed;
    Some((host, nand, (host > 0).then(|| nand as f64 / host as f64)))
}
