//! A run's output directory, from [`BenchResults`] alone: `results.json`,
//! CSV of every time series, the SVG charts, `report.md` and a
//! self-contained `report.html`.
//!
//! Files written by [`write_outputs`] (`STEM` is the phase's name made safe
//! for a file name: ASCII letters, digits, `-`, `_` and `.`, other runs of
//! characters as one `_`, made unique within the run):
//!
//! | file | columns / content |
//! |---|---|
//! | `results.json` | the [`BenchResults`], pretty-printed (non-finite numbers as `null`) |
//! | `series-STEM.csv` | `t_s,read_bytes_s,write_bytes_s`: `t_s` is the end of each interval, from the phase's start |
//! | `surface-STEM.csv` | `offset,position,bytes_s` |
//! | `drive-samples.csv` | `t_s,phase,phase_name,waf,free_blocks,total_blocks,host_written_bytes,nand_bytes_programmed` |
//! | `sim-…` | the same CSV for the simulator's run, when one is attached |
//! | `*.svg` | the charts of [`super::chart::charts`] |
//! | `report.md`, `report.html` | what ran, key figures, charts, TRIM audit, expectations, simulator vs guest, phases |
//!
//! CSV cells of non-finite numbers are empty. Throughput in tables and
//! charts is in MB/s (10⁶ bytes/s, as the reviews and fio print it); sizes
//! are binary (KiB, MiB, GiB).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use super::chart::{self, Chart};
use super::results::{BenchResults, Mode, PhaseComparison, PhaseResult};

/// Writes everything a run produces into `dir` (created if missing) and
/// returns the paths written, in order. Any data renders: missing parts
/// leave out their file or section, never panic.
pub fn write_outputs(dir: &Path, r: &BenchResults) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let mut put = |name: &str, contents: &[u8]| -> io::Result<()> {
        let path = dir.join(name);
        std::fs::write(&path, contents)?;
        written.push(path);
        Ok(())
    };

    let json = serde_json::to_string_pretty(r).map_err(io::Error::other)?;
    put("results.json", json.as_bytes())?;

    let mut runs = vec![("", r)];
    if let Some(sim) = r.sim.as_deref() {
        runs.push(("sim-", sim));
    }
    for (prefix, run) in &runs {
        let stems = phase_stems(run);
        for (p, stem) in run.phases.iter().zip(&stems) {
            if let Some(s) = &p.series {
                put(
                    &format!("{prefix}series-{stem}.csv"),
                    series_csv(s).as_bytes(),
                )?;
            }
            if let Some(s) = &p.surface {
                put(
                    &format!("{prefix}surface-{stem}.csv"),
                    surface_csv(s).as_bytes(),
                )?;
            }
        }
        put(
            &format!("{prefix}drive-samples.csv"),
            samples_csv(run).as_bytes(),
        )?;
    }

    let charts = chart::charts(r);
    for c in &charts {
        put(&c.file_name, c.svg.as_bytes())?;
    }
    let doc = document(r, &charts);
    put("report.md", to_markdown(&doc).as_bytes())?;
    put(
        "report.html",
        to_html(&doc, &r.scenario, &charts).as_bytes(),
    )?;
    Ok(written)
}

/// Reads a run's `results.json`, given its file or the directory holding it.
pub fn read_results(path: &Path) -> io::Result<BenchResults> {
    let file = if path.is_dir() {
        path.join("results.json")
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file)?;
    serde_json::from_str(&text).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", file.display()),
        )
    })
}

// ---------------------------------------------------------------- files

/// A phase name as a file-name stem: ASCII letters, digits, `-`, `_`, `.`;
/// anything else becomes `_`; no leading dot; at most 64 characters.
pub(crate) fn file_stem(name: &str) -> String {
    let mut s = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
            s.push(c);
        } else if !s.ends_with('_') {
            s.push('_');
        }
    }
    let s: String = s
        .trim_matches(|c| c == '.' || c == '_')
        .chars()
        .take(64)
        .collect();
    if s.is_empty() { "phase".into() } else { s }
}

/// One stem per phase, unique even on case-insensitive file systems.
pub(crate) fn phase_stems(r: &BenchResults) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    r.phases
        .iter()
        .map(|p| {
            let base = file_stem(&p.name);
            let mut stem = base.clone();
            let mut n = 2;
            while !seen.insert(stem.to_ascii_lowercase()) {
                stem = format!("{base}-{n}");
                n += 1;
            }
            stem
        })
        .collect()
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        String::new()
    }
}

fn series_csv(s: &super::results::Series) -> String {
    let mut out = String::from("t_s,read_bytes_s,write_bytes_s\n");
    let n = s.read_bytes_s.len().max(s.write_bytes_s.len());
    for i in 0..n {
        let cell = |v: &Vec<f64>| v.get(i).map(|x| csv_num(*x)).unwrap_or_default();
        let _ = writeln!(
            out,
            "{},{},{}",
            csv_num((i + 1) as f64 * s.interval_s),
            cell(&s.read_bytes_s),
            cell(&s.write_bytes_s)
        );
    }
    out
}

fn surface_csv(s: &super::results::Surface) -> String {
    let mut out = String::from("offset,position,bytes_s\n");
    for p in &s.points {
        let _ = writeln!(
            out,
            "{},{},{}",
            p.offset,
            csv_num(p.position),
            csv_num(p.bytes_s)
        );
    }
    out
}

fn samples_csv(r: &BenchResults) -> String {
    let mut out = String::from(
        "t_s,phase,phase_name,waf,free_blocks,total_blocks,host_written_bytes,nand_bytes_programmed\n",
    );
    for s in &r.samples {
        let name = r.phases.get(s.phase).map(|p| p.name.as_str()).unwrap_or("");
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{}",
            csv_num(s.t_s),
            s.phase,
            csv_field(name),
            csv_num(s.waf),
            s.free_blocks,
            s.total_blocks,
            s.host_written_bytes,
            s.nand_bytes_programmed
        );
    }
    out
}

// ----------------------------------------------------------- formatting

/// `v` with `decimals` decimals and thousands separators; `n/a` when not finite.
pub(crate) fn fmt_num(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    let s = format!("{:.*}", decimals, v.abs());
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (s.as_str(), None),
    };
    let mut out = String::new();
    if v < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.push('-');
    }
    let digits = int.len();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (digits - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

/// A size in binary units: `512 B`, `128 KiB`, `1 GiB`, `74.5 GiB`.
pub(crate) fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = b as f64;
    let mut k = 0;
    while v >= 1024.0 && k < UNITS.len() - 1 {
        v /= 1024.0;
        k += 1;
    }
    let num = if k == 0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v < 10.0 {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else if v < 100.0 {
        let s = format!("{v:.1}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.0}")
    };
    format!("{num} {}", UNITS[k])
}

/// MB/s (10⁶ bytes/s) from bytes/s, without the unit.
pub(crate) fn fmt_mbs(bytes_s: f64) -> String {
    fmt_num(bytes_s / 1e6, 1)
}

/// A ratio, two decimals.
pub(crate) fn fmt_ratio(r: f64) -> String {
    fmt_num(r, 2)
}

/// A signed fraction as a percentage: `+6.8 %`.
pub(crate) fn fmt_pct(f: f64) -> String {
    if !f.is_finite() {
        return "n/a".into();
    }
    let sign = if f > 0.0 { "+" } else { "" };
    format!("{sign}{} %", fmt_num(f * 100.0, 1))
}

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
pub(crate) const KEY_METRICS: [(&str, &str); 4] = [
    ("write_bw", "Write MB/s"),
    ("read_bw", "Read MB/s"),
    ("write_iops", "Write IOPS"),
    ("read_iops", "Read IOPS"),
];

/// A key figure of a phase: its `metrics` entry, else fio's JSON (summed
/// over jobs), else for bandwidth the mean of its surface points.
pub(crate) fn key_value(p: &PhaseResult, key: &str) -> Option<f64> {
    if let Some(v) = p.metrics.get(key) {
        return Some(*v);
    }
    let (dir, field) = match key {
        "write_bw" => ("write", "bw_bytes"),
        "read_bw" => ("read", "bw_bytes"),
        "write_iops" => ("write", "iops"),
        "read_iops" => ("read", "iops"),
        _ => return None,
    };
    if let Some(jobs) = p
        .fio
        .as_ref()
        .and_then(|f| f.get("jobs"))
        .and_then(|j| j.as_array())
    {
        let vals: Vec<f64> = jobs
            .iter()
            .filter_map(|j| j.get(dir)?.get(field)?.as_f64())
            .collect();
        if !vals.is_empty() && vals.iter().any(|v| *v != 0.0) {
            return Some(vals.iter().sum());
        }
    }
    if field == "bw_bytes"
        && let Some(s) = &p.surface
        && s.op == dir
    {
        if let Some(v) = p.metrics.get("mean_bw") {
            return Some(*v);
        }
        let v: Vec<f64> = s
            .points
            .iter()
            .map(|p| p.bytes_s)
            .filter(|v| v.is_finite())
            .collect();
        if !v.is_empty() {
            return Some(v.iter().sum::<f64>() / v.len() as f64);
        }
    }
    None
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

fn key_cell(key: &str, v: Option<f64>) -> String {
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
        // A surface by its mean (as the runner compares it), anything else
        // by its key figures.
        let keys: Vec<&str> = if p.metrics.contains_key("mean_bw") && p.surface.is_some() {
            vec!["mean_bw"]
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
                });
            }
        }
    }
    out
}

/// Host bytes, NAND bytes and WAF of a phase from its counters.
fn phase_io(p: &PhaseResult) -> Option<(u64, u64, Option<f64>)> {
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

// ------------------------------------------------------------- document

/// Inline text.
enum Span {
    Text(String),
    Strong(String),
    Code(String),
}

#[derive(Clone, Copy, PartialEq)]
enum Col {
    Text,
    Num,
    /// PASS / FAIL, coloured in HTML.
    Status,
}

struct Table {
    cols: Vec<(String, Col)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(cols: &[(&str, Col)]) -> Table {
        Table {
            cols: cols.iter().map(|(h, c)| (h.to_string(), *c)).collect(),
            rows: Vec::new(),
        }
    }
}

enum Block {
    Heading(u8, String),
    Para(Vec<Span>),
    Table(Table),
    /// A chart: its file name and title.
    Chart {
        file: String,
        title: String,
    },
    List(Vec<Vec<Span>>),
}

fn text(s: impl Into<String>) -> Span {
    Span::Text(s.into())
}

fn status(passed: bool) -> String {
    if passed { "PASS" } else { "FAIL" }.into()
}

fn opt_str(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "—".into())
}

fn what_ran(r: &BenchResults) -> Table {
    let mut t = Table::new(&[("", Col::Text), ("", Col::Text)]);
    let mut row = |k: &str, v: String| t.rows.push(vec![k.to_string(), v]);
    row("Scenario", r.scenario.clone());
    row(
        "Mode",
        match r.mode {
            Mode::Guest => "guest (real fio in a QEMU guest)".into(),
            Mode::Sim => "simulator (model time)".into(),
        },
    );
    row("Profile", r.profile.clone());
    row(
        "Capacity",
        format!(
            "{} ({} bytes)",
            fmt_bytes(r.capacity),
            fmt_num(r.capacity as f64, 0)
        ),
    );
    if r.mode == Mode::Guest {
        row("Bus", r.bus.name().into());
        row("Accelerator", opt_str(&r.environment.accel));
        row("Guest kernel", opt_str(&r.environment.guest_kernel));
        row("QEMU", opt_str(&r.environment.qemu));
        row("fio", opt_str(&r.environment.fio));
    }
    row("vssd", r.environment.vssd.clone());
    row(
        "Host",
        format!("{} ({} CPUs)", r.environment.host, r.environment.host_cpus),
    );
    row("Started", fmt_unix(r.started_unix));
    row(
        "Phases",
        format!(
            "{} run ({})",
            r.phases.len(),
            r.phases
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    if let Some(sim) = r.sim.as_deref() {
        row(
            "Simulator run",
            format!(
                "{} phases, profile {}, {}, idle gaps replayed from the guest",
                sim.phases.len(),
                sim.profile,
                fmt_bytes(sim.capacity)
            ),
        );
    }
    t
}

fn key_table(r: &BenchResults) -> Option<Table> {
    let (present, rows) = key_figures(r);
    if rows.is_empty() {
        return None;
    }
    let mut cols = vec![
        ("Phase".to_string(), Col::Text),
        ("Workload".to_string(), Col::Text),
    ];
    for (_, head) in &present {
        cols.push((head.to_string(), Col::Num));
        cols.push(("× baseline".to_string(), Col::Num));
    }
    cols.push(("Baseline".to_string(), Col::Text));
    let mut t = Table {
        cols,
        rows: Vec::new(),
    };
    for row in rows {
        let mut cells = vec![row.phase, row.workload];
        for ((k, _), (v, ratio)) in present.iter().zip(&row.values) {
            cells.push(key_cell(k, *v));
            cells.push(ratio.map(fmt_ratio).unwrap_or_else(|| "—".into()));
        }
        cells.push(row.baseline.unwrap_or_else(|| "—".into()));
        t.rows.push(cells);
    }
    Some(t)
}

fn trim_table(r: &BenchResults) -> Option<Table> {
    let mut t = Table::new(&[
        ("Phase", Col::Text),
        ("Discards", Col::Num),
        ("Write-zeroes", Col::Num),
        ("Requested", Col::Num),
        ("Freed", Col::Num),
        ("Already unmapped", Col::Num),
        ("Freed / requested", Col::Num),
    ]);
    for p in &r.phases {
        let Some(a) = &p.trim else { continue };
        if p.kind != "trim" && a.discard_cmds == 0 && a.write_zeroes_cmds == 0 {
            continue;
        }
        let share = if a.requested_bytes > 0 {
            fmt_pct(a.freed_bytes as f64 / a.requested_bytes as f64).replace('+', "")
        } else {
            "—".into()
        };
        t.rows.push(vec![
            p.name.clone(),
            fmt_num(a.discard_cmds as f64, 0),
            fmt_num(a.write_zeroes_cmds as f64, 0),
            fmt_bytes(a.requested_bytes),
            fmt_bytes(a.freed_bytes),
            fmt_bytes(a.already_unmapped_bytes),
            share,
        ]);
    }
    (!t.rows.is_empty()).then_some(t)
}

fn expect_table(r: &BenchResults) -> Option<Table> {
    let mut t = Table::new(&[
        ("Result", Col::Status),
        ("Assertion", Col::Text),
        ("Values", Col::Text),
    ]);
    for e in &r.expects {
        t.rows
            .push(vec![status(e.passed), e.text.clone(), e.detail.clone()]);
    }
    (!t.rows.is_empty()).then_some(t)
}

fn comparison_table(r: &BenchResults) -> Option<Table> {
    let cmp = comparisons(r);
    if cmp.is_empty() {
        return None;
    }
    let mut t = Table::new(&[
        ("Phase", Col::Text),
        ("Metric", Col::Text),
        ("Guest", Col::Num),
        ("Simulator", Col::Num),
        ("Difference", Col::Num),
        ("Within tolerance", Col::Status),
    ]);
    for c in cmp {
        t.rows.push(vec![
            c.phase.clone(),
            c.metric.clone(),
            fmt_metric(&c.metric, c.guest),
            fmt_metric(&c.metric, c.sim),
            fmt_pct(c.difference),
            if c.guest_bound {
                "guest-bound".into()
            } else {
                status(c.within)
            },
        ]);
    }
    Some(t)
}

fn timing_table(r: &BenchResults, sim: &BenchResults) -> Table {
    let mut t = Table::new(&[
        ("Phase", Col::Text),
        ("Guest idle before (s)", Col::Num),
        ("Sim idle before (s)", Col::Num),
        ("Guest wall (s)", Col::Num),
        ("Sim model (s)", Col::Num),
    ]);
    for p in &r.phases {
        let s = sim.phase(&p.name);
        let f = |v: Option<f64>| v.map(|v| fmt_num(v, 1)).unwrap_or_else(|| "—".into());
        t.rows.push(vec![
            p.name.clone(),
            fmt_num(p.gap_before_s, 1),
            f(s.map(|s| s.gap_before_s)),
            fmt_num(p.wall_s, 1),
            f(s.map(|s| s.model_s)),
        ]);
    }
    t
}

fn phase_table(r: &BenchResults) -> Table {
    let mut t = Table::new(&[
        ("#", Col::Num),
        ("Phase", Col::Text),
        ("Kind", Col::Text),
        ("Idle before (s)", Col::Num),
        ("Wall (s)", Col::Num),
        ("Model (s)", Col::Num),
        ("Host written", Col::Num),
        ("NAND programmed", Col::Num),
        ("WAF", Col::Num),
        ("GC copies", Col::Num),
        ("Erases", Col::Num),
        ("Free blocks after", Col::Num),
    ]);
    for (i, p) in r.phases.iter().enumerate() {
        let io = phase_io(p);
        let dash = || "—".to_string();
        let delta = |f: fn(&crate::model::Counters) -> u64| -> String {
            match (&p.counters_before, &p.counters_after) {
                (Some(a), Some(b)) if f(b) >= f(a) => fmt_num((f(b) - f(a)) as f64, 0),
                _ => dash(),
            }
        };
        t.rows.push(vec![
            (i + 1).to_string(),
            p.name.clone(),
            p.kind.clone(),
            fmt_num(p.gap_before_s, 1),
            fmt_num(p.wall_s, 1),
            fmt_num(p.model_s, 1),
            io.map(|x| fmt_bytes(x.0)).unwrap_or_else(dash),
            io.map(|x| fmt_bytes(x.1)).unwrap_or_else(dash),
            io.and_then(|x| x.2).map(fmt_ratio).unwrap_or_else(dash),
            delta(|c| c.gc_copies),
            delta(|c| c.erases),
            p.counters_after
                .as_ref()
                .map(|c| {
                    format!(
                        "{} / {}",
                        fmt_num(c.free_blocks as f64, 0),
                        fmt_num(c.total_blocks as f64, 0)
                    )
                })
                .unwrap_or_else(dash),
        ]);
    }
    t
}

fn metrics_table(r: &BenchResults) -> Option<Table> {
    let mut t = Table::new(&[
        ("Phase", Col::Text),
        ("Metric", Col::Text),
        ("Value", Col::Num),
        ("Raw", Col::Num),
    ]);
    for p in &r.phases {
        for (k, v) in &p.metrics {
            t.rows.push(vec![
                p.name.clone(),
                k.clone(),
                fmt_metric(k, *v),
                if v.is_finite() {
                    format!("{v}")
                } else {
                    "n/a".into()
                },
            ]);
        }
    }
    (!t.rows.is_empty()).then_some(t)
}

fn verdict(r: &BenchResults) -> Vec<Span> {
    let failed = r.expects.iter().filter(|e| !e.passed).count();
    let mut v = Vec::new();
    if let Some(why) = &r.incomplete {
        v.push(Span::Strong("Incomplete:".into()));
        v.push(text(format!(
            " the run stopped early ({why}); the figures below are as far as it got. "
        )));
    }
    if r.expects.is_empty() {
        v.push(text("No expectations were stated."));
    } else if failed == 0 {
        v.push(Span::Strong("Passed:".into()));
        v.push(text(format!(" all {} expectations held.", r.expects.len())));
    } else {
        v.push(Span::Strong("Failed:".into()));
        v.push(text(format!(
            " {failed} of {} expectations did not hold.",
            r.expects.len()
        )));
    }
    v
}

fn document(r: &BenchResults, charts: &[Chart]) -> Vec<Block> {
    let mut d = vec![Block::Heading(1, format!("vssd bench: {}", r.scenario))];
    if !r.description.trim().is_empty() {
        d.push(Block::Para(vec![text(r.description.trim())]));
    }
    d.push(Block::Para(verdict(r)));
    d.push(Block::Heading(2, "What ran".into()));
    d.push(Block::Table(what_ran(r)));

    if let Some(t) = key_table(r) {
        d.push(Block::Heading(2, "Key figures".into()));
        d.push(Block::Para(vec![text(
            "Throughput in MB/s (10⁶ bytes/s). “× baseline” is the ratio to the phase named under Baseline: \
             among phases of the same workload, the one named like “fresh”, else the first.",
        )]));
        d.push(Block::Table(t));
    }

    let own: Vec<&Chart> = charts
        .iter()
        .filter(|c| !c.file_name.starts_with("sim-"))
        .collect();
    if !own.is_empty() {
        d.push(Block::Heading(2, "Charts".into()));
        for c in own {
            d.push(Block::Chart {
                file: c.file_name.clone(),
                title: c.title.clone(),
            });
        }
    }

    if let Some(t) = trim_table(r) {
        d.push(Block::Heading(2, "TRIM audit".into()));
        d.push(Block::Para(vec![text(
            "What the drive saw of each TRIM phase: commands, bytes they covered, and bytes that \
             were mapped and are now free (the rest was already unmapped).",
        )]));
        d.push(Block::Table(t));
    }

    if let Some(t) = expect_table(r) {
        d.push(Block::Heading(2, "Expectations".into()));
        d.push(Block::Table(t));
    }

    let cmp = comparison_table(r);
    if cmp.is_some() || r.sim.is_some() {
        d.push(Block::Heading(2, "Simulator vs guest".into()));
        if let Some(t) = cmp {
            d.push(Block::Para(vec![text(format!(
                "Difference = (simulator − guest) / guest; tolerance ±{}.",
                fmt_pct(r.tolerance).trim_start_matches('+')
            ))]));
            d.push(Block::Table(t));
            if comparisons(r).iter().any(|c| c.guest_bound) {
                d.push(Block::Para(vec![
                    Span::Strong("guest-bound:".into()),
                    text(
                        " the guest's requests reached the drive at under half the queue depth the \
                         simulator's did, so the emulated host, not the drive, set the guest's figure; \
                         not counted against the tolerance.",
                    ),
                ]));
            }
        } else {
            d.push(Block::Para(vec![text(
                "No phase has a figure in both runs to compare.",
            )]));
        }
        for c in charts
            .iter()
            .filter(|c| c.file_name.starts_with("sim-vs-guest"))
        {
            d.push(Block::Chart {
                file: c.file_name.clone(),
                title: c.title.clone(),
            });
        }
        if let Some(sim) = r.sim.as_deref() {
            d.push(Block::Para(vec![text(
                "Idle time before each phase (the guest's measured gaps, replayed in the simulator) and phase durations:",
            )]));
            d.push(Block::Table(timing_table(r, sim)));
            if let Some(t) = key_table(sim) {
                d.push(Block::Heading(3, "Simulator run: key figures".into()));
                d.push(Block::Table(t));
            }
            let sim_charts: Vec<&Chart> = charts
                .iter()
                .filter(|c| {
                    c.file_name.starts_with("sim-") && !c.file_name.starts_with("sim-vs-guest")
                })
                .collect();
            if !sim_charts.is_empty() {
                d.push(Block::Heading(3, "Simulator run: charts".into()));
                for c in sim_charts {
                    d.push(Block::Chart {
                        file: c.file_name.clone(),
                        title: c.title.clone(),
                    });
                }
            }
        }
    }

    d.push(Block::Heading(2, "Phases".into()));
    d.push(Block::Para(vec![text(
        "Drive counters over each phase (host bytes written, NAND bytes programmed, their ratio, \
         GC copies and erases) and free blocks at its end.",
    )]));
    d.push(Block::Table(phase_table(r)));

    if let Some(t) = metrics_table(r) {
        d.push(Block::Heading(2, "All metrics".into()));
        d.push(Block::Table(t));
    }

    d.push(Block::Heading(2, "Files".into()));
    let mut files = vec![vec![
        Span::Code("results.json".into()),
        text(": everything above, and fio's JSON per phase"),
    ]];
    let mut runs = vec![("", r)];
    if let Some(sim) = r.sim.as_deref() {
        runs.push(("sim-", sim));
    }
    for (prefix, run) in runs {
        let who = if prefix.is_empty() {
            ""
        } else {
            " (simulator)"
        };
        for (p, stem) in run.phases.iter().zip(phase_stems(run)) {
            if p.series.is_some() {
                files.push(vec![
                    Span::Code(format!("{prefix}series-{stem}.csv")),
                    text(format!(": {} throughput per interval{who}", p.name)),
                ]);
            }
            if p.surface.is_some() {
                files.push(vec![
                    Span::Code(format!("{prefix}surface-{stem}.csv")),
                    text(format!(": {} throughput by position{who}", p.name)),
                ]);
            }
        }
        files.push(vec![
            Span::Code(format!("{prefix}drive-samples.csv")),
            text(format!(": WAF and free blocks over time{who}")),
        ]);
    }
    d.push(Block::List(files));
    d
}

// ------------------------------------------------------------- markdown

pub(crate) fn md_escape(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '\\' | '*' | '`' | '[' | ']' | '<' | '|' => {
                out.push('\\');
                out.push(c);
            }
            // Inside a word (`write_bw`) an underscore is no emphasis.
            '_' => {
                let word = |j: Option<usize>| {
                    j.and_then(|j| chars.get(j))
                        .is_some_and(|c| c.is_alphanumeric())
                };
                if !(word(i.checked_sub(1)) && word(Some(i + 1))) {
                    out.push('\\');
                }
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            _ => out.push(c),
        }
    }
    out
}

fn md_spans(spans: &[Span]) -> String {
    spans
        .iter()
        .map(|s| match s {
            Span::Text(t) => md_escape(t),
            Span::Strong(t) => format!("**{}**", md_escape(t)),
            Span::Code(t) => format!("`{}`", t.replace('`', "'")),
        })
        .collect()
}

fn to_markdown(doc: &[Block]) -> String {
    let mut out = String::new();
    for b in doc {
        match b {
            Block::Heading(level, t) => {
                let _ = writeln!(out, "{} {}\n", "#".repeat(*level as usize), md_escape(t));
            }
            Block::Para(spans) => {
                let _ = writeln!(out, "{}\n", md_spans(spans));
            }
            Block::Table(t) => {
                let head: Vec<String> = t.cols.iter().map(|(h, _)| md_escape(h)).collect();
                let _ = writeln!(out, "| {} |", head.join(" | "));
                let sep: Vec<&str> = t
                    .cols
                    .iter()
                    .map(|(_, c)| if *c == Col::Num { "---:" } else { "---" })
                    .collect();
                let _ = writeln!(out, "| {} |", sep.join(" | "));
                for row in &t.rows {
                    let cells: Vec<String> = row.iter().map(|c| md_escape(c)).collect();
                    let _ = writeln!(out, "| {} |", cells.join(" | "));
                }
                out.push('\n');
            }
            Block::Chart { file, title } => {
                let _ = writeln!(out, "![{}]({file})\n", md_escape(title));
            }
            Block::List(items) => {
                for i in items {
                    let _ = writeln!(out, "- {}", md_spans(i));
                }
                out.push('\n');
            }
        }
    }
    out
}

// ----------------------------------------------------------------- html

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

fn html_spans(spans: &[Span]) -> String {
    spans
        .iter()
        .map(|s| match s {
            Span::Text(t) => html_escape(t),
            Span::Strong(t) => format!("<strong>{}</strong>", html_escape(t)),
            Span::Code(t) => format!("<code>{}</code>", html_escape(t)),
        })
        .collect()
}

const CSS: &str = "\
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;color:#222;background:#fff;margin:0}
main{max-width:980px;margin:0 auto;padding:24px 20px 48px}
h1{font-size:1.6em;margin:.2em 0 .6em}
h2{font-size:1.25em;margin:1.8em 0 .5em;padding-bottom:.2em;border-bottom:1px solid #ddd}
h3{font-size:1.05em;margin:1.4em 0 .4em}
table{border-collapse:collapse;margin:.6em 0 1em;font-size:.93em}
th,td{padding:4px 10px;border-bottom:1px solid #e4e4e4;text-align:left;vertical-align:top}
th{background:#f4f4f4;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.pass{color:#006b4f;font-weight:600}
td.fail{color:#b03a00;font-weight:600}
tbody tr:nth-child(even){background:#fafafa}
figure{margin:1em 0 1.6em}
figure svg{max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#666;font-size:.9em}
code{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:.92em;background:#f4f4f4;padding:0 3px;border-radius:3px}
.scroll{overflow-x:auto}
";

/// The SVG as an inline element: without an XML declaration, if any.
fn inline_svg(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => "",
    }
}

fn to_html(doc: &[Block], scenario: &str, charts: &[Chart]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>vssd bench: {}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n<main>\n",
        html_escape(scenario)
    );
    for b in doc {
        match b {
            Block::Heading(level, t) => {
                let _ = writeln!(out, "<h{level}>{}</h{level}>", html_escape(t));
            }
            Block::Para(spans) => {
                let _ = writeln!(out, "<p>{}</p>", html_spans(spans));
            }
            Block::Table(t) => {
                let class = |c: Col, cell: &str| match c {
                    Col::Num => " class=\"num\"",
                    Col::Status if cell == "PASS" => " class=\"pass\"",
                    Col::Status if cell == "FAIL" => " class=\"fail\"",
                    _ => "",
                };
                out.push_str("<div class=\"scroll\"><table>\n");
                if t.cols.iter().any(|(h, _)| !h.is_empty()) {
                    out.push_str("<thead><tr>");
                    for (h, c) in &t.cols {
                        let _ = write!(out, "<th{}>{}</th>", class(*c, ""), html_escape(h));
                    }
                    out.push_str("</tr></thead>\n");
                }
                out.push_str("<tbody>\n");
                for row in &t.rows {
                    out.push_str("<tr>");
                    for (i, cell) in row.iter().enumerate() {
                        let c = t.cols.get(i).map(|c| c.1).unwrap_or(Col::Text);
                        let _ = write!(out, "<td{}>{}</td>", class(c, cell), html_escape(cell));
                    }
                    out.push_str("</tr>\n");
                }
                out.push_str("</tbody></table></div>\n");
            }
            Block::Chart { file, .. } => {
                if let Some(c) = charts.iter().find(|c| &c.file_name == file) {
                    // The title is drawn in the chart; the label is for
                    // screen readers, the caption names the file.
                    let _ = writeln!(
                        out,
                        "<figure role=\"img\" aria-label=\"{}\">\n{}\n<figcaption><code>{}</code></figcaption>\n</figure>",
                        html_escape(&c.title),
                        inline_svg(&c.svg),
                        html_escape(&c.file_name)
                    );
                }
            }
            Block::List(items) => {
                out.push_str("<ul>\n");
                for i in items {
                    let _ = writeln!(out, "<li>{}</li>", html_spans(i));
                }
                out.push_str("</ul>\n");
            }
        }
    }
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::bench::results::{DriveSample, Series, Surface, SurfacePoint};
    use crate::kit::bench::testdata;
    use std::collections::BTreeSet;

    fn fixture_path() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bench-trim-recovery.json")
    }

    fn names(files: &[PathBuf]) -> BTreeSet<String> {
        files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    fn read(dir: &Path, name: &str) -> String {
        std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// Parses an SVG as XML; returns the texts it draws and how many
    /// line-like elements it has.
    fn svg_summary(svg: &str) -> (Vec<String>, usize) {
        let doc = roxmltree::Document::parse(svg).expect("SVG parses as XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        let texts = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(|t| t.trim().to_string()))
            .collect();
        let lines = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline") || n.has_tag_name("path"))
            .count();
        (texts, lines)
    }

    /// Regenerates the example fixture from the hand-built run:
    /// `cargo test --lib regenerate_bench_fixture -- --ignored`.
    #[test]
    #[ignore]
    fn regenerate_bench_fixture() {
        let json = serde_json::to_string_pretty(&testdata::trim_recovery()).unwrap();
        std::fs::create_dir_all(fixture_path().parent().unwrap()).unwrap();
        std::fs::write(fixture_path(), json + "\n").unwrap();
    }

    /// Writes the hand-built runs' reports under the target directory to
    /// look at: `cargo test --lib render_bench_examples -- --ignored`.
    #[test]
    #[ignore]
    fn render_bench_examples() {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
        for r in [testdata::trim_recovery(), testdata::used_state()] {
            let dir = target.join("bench-report-examples").join(&r.scenario);
            write_outputs(&dir, &r).unwrap();
            eprintln!("{}", dir.display());
        }
    }

    #[test]
    fn trim_recovery_with_sim_writes_every_file() {
        let r = testdata::trim_recovery();
        let dir = tempfile::tempdir().unwrap();
        let files = write_outputs(dir.path(), &r).unwrap();
        let expected: BTreeSet<String> = [
            "results.json",
            "surface-fresh.csv",
            "series-random.csv",
            "surface-used.csv",
            "surface-trimmed.csv",
            "drive-samples.csv",
            "sim-surface-fresh.csv",
            "sim-series-random.csv",
            "sim-surface-used.csv",
            "sim-surface-trimmed.csv",
            "sim-drive-samples.csv",
            "throughput.svg",
            "surface.svg",
            "drive.svg",
            "sim-vs-guest-throughput.svg",
            "sim-vs-guest-surface.svg",
            "sim-throughput.svg",
            "sim-surface.svg",
            "sim-drive.svg",
            "report.md",
            "report.html",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(names(&files), expected);
        for f in &files {
            assert!(f.starts_with(dir.path()));
            assert!(std::fs::metadata(f).unwrap().len() > 0, "{}", f.display());
        }
        // results.json reads back as the same run (floats to within
        // serde_json's parsing precision).
        let back = read_results(dir.path()).unwrap();
        let phases = |r: &BenchResults| r.phases.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
        assert_eq!(phases(&back), phases(&r));
        assert_eq!(back.samples.len(), r.samples.len());
        assert_eq!(back.expects, r.expects);
        assert_eq!(back.sim.as_ref().map(|s| s.phases.len()), Some(7));
    }

    #[test]
    fn svgs_parse_and_draw_the_phases() {
        let r = testdata::trim_recovery();
        let dir = tempfile::tempdir().unwrap();
        write_outputs(dir.path(), &r).unwrap();
        let (texts, lines) = svg_summary(&read(dir.path(), "surface.svg"));
        for want in [
            "fresh",
            "used",
            "trimmed",
            "Position (GiB)",
            "Write throughput (MB/s)",
        ] {
            assert!(
                texts.iter().any(|t| t == want),
                "surface.svg lacks {want:?}: {texts:?}"
            );
        }
        assert!(
            texts
                .iter()
                .any(|t| t.contains("sata-slc-2009") && t.contains("1 GiB"))
        );
        assert!(lines >= 3);
        let (texts, _) = svg_summary(&read(dir.path(), "throughput.svg"));
        assert!(texts.iter().any(|t| t == "random"));
        assert!(texts.iter().any(|t| t == "Time into the phase (s)"));
        let (texts, _) = svg_summary(&read(dir.path(), "drive.svg"));
        assert!(texts.iter().any(|t| t == "WAF"));
        assert!(texts.iter().any(|t| t.starts_with("Free blocks (of 4096)")));
        assert!(
            texts.iter().any(|t| t == "random"),
            "phase labels: {texts:?}"
        );
        let overlay = read(dir.path(), "sim-vs-guest-surface.svg");
        let (texts, _) = svg_summary(&overlay);
        for want in ["fresh", "used", "trimmed", "guest", "simulator"] {
            assert!(texts.iter().any(|t| t == want), "overlay lacks {want:?}");
        }
        let (texts, _) = svg_summary(&read(dir.path(), "sim-surface.svg"));
        assert!(texts.iter().any(|t| t.contains("simulator (model time)")));
    }

    #[test]
    fn csv_columns_and_rows() {
        let r = testdata::trim_recovery();
        let dir = tempfile::tempdir().unwrap();
        write_outputs(dir.path(), &r).unwrap();
        let series = read(dir.path(), "series-random.csv");
        let mut lines = series.lines();
        assert_eq!(lines.next(), Some("t_s,read_bytes_s,write_bytes_s"));
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        assert_eq!(rows.len(), 120);
        assert_eq!(rows[0][0], "1");
        assert_eq!(rows[0][1], "", "no reads: empty cells");
        let w: f64 = rows[0][2].parse().unwrap();
        assert_eq!(
            w,
            r.phase("random")
                .unwrap()
                .series
                .as_ref()
                .unwrap()
                .write_bytes_s[0]
        );

        let surface = read(dir.path(), "surface-used.csv");
        assert_eq!(surface.lines().next(), Some("offset,position,bytes_s"));
        assert_eq!(surface.lines().count(), 101);
        for l in surface.lines().skip(1) {
            let cells: Vec<f64> = l.split(',').map(|c| c.parse().unwrap()).collect();
            assert_eq!(cells.len(), 3);
            assert!((0.0..1.0).contains(&cells[1]));
        }
        let samples = read(dir.path(), "drive-samples.csv");
        assert_eq!(
            samples.lines().next(),
            Some(
                "t_s,phase,phase_name,waf,free_blocks,total_blocks,host_written_bytes,nand_bytes_programmed"
            )
        );
        assert_eq!(samples.lines().count(), r.samples.len() + 1);
        assert!(samples.lines().any(|l| l.contains(",random,")));
        let sim_samples = read(dir.path(), "sim-drive-samples.csv");
        assert_eq!(
            sim_samples.lines().count(),
            r.sim.as_ref().unwrap().samples.len() + 1
        );
    }

    #[test]
    fn markdown_has_the_key_tables() {
        let r = testdata::trim_recovery();
        let dir = tempfile::tempdir().unwrap();
        write_outputs(dir.path(), &r).unwrap();
        let md = read(dir.path(), "report.md");
        assert!(md.starts_with("# vssd bench: trim-recovery\n"));
        assert!(md.contains("**Passed:** all 2 expectations held."));
        assert!(md.contains("| Guest kernel | 6.1.0-27-amd64 |"));
        assert!(md.contains("| Accelerator | kvm |"));
        assert!(md.contains("| Bus | sata |"));
        // Key figures: used and trimmed against fresh.
        assert!(md.contains(
            "| Phase | Workload | Write MB/s | × baseline | Write IOPS | × baseline | Baseline |"
        ));
        let row = |name: &str| {
            md.lines()
                .find(|l| l.starts_with(&format!("| {name} | surface write 128 KiB |")))
                .unwrap_or_else(|| panic!("no key row for {name}"))
                .to_string()
        };
        let ratio = |line: &str| -> f64 { line.split(" | ").nth(3).unwrap().parse().unwrap() };
        assert_eq!(ratio(&row("fresh")), 1.0);
        assert!(ratio(&row("used")) < 0.5);
        assert!(ratio(&row("trimmed")) > 0.9);
        assert!(row("used").ends_with("| fresh |"));
        // TRIM audit.
        assert!(md.contains("## TRIM audit"));
        assert!(md.contains("| trim | 256 | 0 | 1 GiB | 993 MiB | 31 MiB | 97"));
        // Expectations.
        assert!(md.contains("| PASS | trimmed.mean_bw >= 0.9 \\* fresh.mean_bw |"));
        // Simulator vs guest.
        assert!(md.contains("## Simulator vs guest"));
        assert!(
            md.contains("| Phase | Metric | Guest | Simulator | Difference | Within tolerance |")
        );
        assert!(
            md.lines()
                .any(|l| l.starts_with("| trimmed | mean_bw |") && l.ends_with("| PASS |"))
        );
        assert!(md.contains("| Phase | Guest idle before (s) | Sim idle before (s) |"));
        // Charts linked.
        for c in [
            "throughput.svg",
            "surface.svg",
            "drive.svg",
            "sim-vs-guest-surface.svg",
            "sim-drive.svg",
        ] {
            assert!(md.contains(&format!("]({c})")), "{c} not linked");
        }
        // Every table row has as many cells as its header.
        let mut cols = 0;
        for l in md.lines() {
            if !l.starts_with('|') {
                cols = 0;
                continue;
            }
            let n = l.replace("\\|", "").matches('|').count();
            if cols == 0 {
                cols = n;
            }
            assert_eq!(n, cols, "{l}");
        }
    }

    #[test]
    fn html_is_self_contained() {
        let r = testdata::trim_recovery();
        let dir = tempfile::tempdir().unwrap();
        let files = write_outputs(dir.path(), &r).unwrap();
        let html = read(dir.path(), "report.html");
        let svgs = files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "svg"))
            .count();
        assert_eq!(html.matches("<svg").count(), svgs);
        assert!(!html.contains("<script"));
        assert!(!html.contains("<link"));
        assert!(!html.contains("src="));
        assert!(!html.contains("url("));
        // The only address is the SVG namespace.
        assert_eq!(
            html.matches("http").count(),
            html.matches("http://www.w3.org/2000/svg").count()
        );
        assert!(html.contains("<td class=\"pass\">PASS</td>"));
        assert!(html.contains("<h2>TRIM audit</h2>"));
        assert!(html.trim_end().ends_with("</html>"));
    }

    #[test]
    fn used_state_three_fio_phases_no_sim() {
        let r = testdata::used_state();
        let dir = tempfile::tempdir().unwrap();
        let files = names(&write_outputs(dir.path(), &r).unwrap());
        for f in [
            "series-fresh.csv",
            "series-random.csv",
            "series-used.csv",
            "throughput.svg",
            "drive.svg",
        ] {
            assert!(files.contains(f), "{f}");
        }
        assert!(
            !files
                .iter()
                .any(|f| f.starts_with("sim-") || f.starts_with("surface"))
        );
        let (texts, _) = svg_summary(&read(dir.path(), "throughput.svg"));
        for p in ["fresh", "random", "used"] {
            assert!(texts.iter().any(|t| t == p), "{p}");
        }
        let md = read(dir.path(), "report.md");
        assert!(!md.contains("## Simulator vs guest"));
        assert!(!md.contains("## TRIM audit"));
        // used vs fresh: same workload (fio write 1M); random alone.
        let used = md
            .lines()
            .find(|l| l.starts_with("| used | fio write 1M |"))
            .unwrap();
        assert!(used.ends_with("| fresh |"), "{used}");
        let random = md
            .lines()
            .find(|l| l.starts_with("| random | fio randwrite 4k |"))
            .unwrap();
        assert!(random.ends_with("| — |"), "{random}");
    }

    #[test]
    fn fixture_renders() {
        let r = read_results(&fixture_path()).expect("fixture parses");
        assert_eq!(r.scenario, "trim-recovery");
        assert!(r.sim.is_some());
        let dir = tempfile::tempdir().unwrap();
        let files = write_outputs(dir.path(), &r).unwrap();
        assert!(names(&files).contains("sim-vs-guest-surface.svg"));
    }

    #[test]
    fn unsafe_and_clashing_phase_names_stay_in_the_directory() {
        let mut r = testdata::used_state();
        let names_in = [
            "../../etc/passwd",
            "Fresh",
            "fresh",
            "",
            "дрос/сель",
            ".hidden",
        ];
        let template = r.phases[0].clone();
        r.phases = names_in
            .iter()
            .map(|n| PhaseResult {
                name: n.to_string(),
                ..template.clone()
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let files = write_outputs(dir.path(), &r).unwrap();
        for f in &files {
            assert_eq!(f.parent(), Some(dir.path()), "{}", f.display());
        }
        let series: Vec<String> = names(&files)
            .into_iter()
            .filter(|n| n.starts_with("series-"))
            .collect();
        assert_eq!(series.len(), names_in.len(), "{series:?}");
        assert_eq!(file_stem("../../etc/passwd"), "etc_passwd");
        assert_eq!(file_stem(".hidden"), "hidden");
        assert_eq!(file_stem(""), "phase");
        assert_eq!(file_stem("a b\tc"), "a_b_c");
    }

    #[test]
    fn degenerate_runs_do_not_panic() {
        let mut r = testdata::used_state();
        // Nothing at all.
        let mut empty = r.clone();
        empty.phases.clear();
        empty.samples.clear();
        empty.expects.clear();
        empty.capacity = 0;
        empty.incomplete = Some("guest did not boot".into());
        let dir = tempfile::tempdir().unwrap();
        let files = names(&write_outputs(dir.path(), &empty).unwrap());
        assert!(files.contains("report.md") && files.contains("drive-samples.csv"));
        assert!(!files.iter().any(|f| f.ends_with(".svg")));
        let md = read(dir.path(), "report.md");
        assert!(md.contains("**Incomplete:**"));

        // NaN, infinities, empty series and surfaces, a zero interval,
        // samples pointing past the phases, a sim with nothing in it.
        r.phases[0].series = Some(Series {
            interval_s: 0.0,
            read_bytes_s: vec![f64::NAN, f64::INFINITY],
            write_bytes_s: vec![],
        });
        r.phases[1].series = Some(Series::default());
        r.phases[2].metrics.insert("write_bw".into(), f64::NAN);
        r.phases[2].surface = Some(Surface {
            op: "weird".into(),
            block: 0,
            burst: 0,
            points: vec![SurfacePoint {
                offset: u64::MAX,
                position: f64::NAN,
                bytes_s: -1.0,
            }],
        });
        r.samples.push(DriveSample {
            t_s: f64::NAN,
            phase: 99,
            waf: f64::INFINITY,
            free_blocks: u64::MAX,
            total_blocks: 0,
            host_written_bytes: 0,
            nand_bytes_programmed: 0,
        });
        r.tolerance = f64::NAN;
        let mut sim = empty.clone();
        sim.mode = crate::kit::bench::results::Mode::Sim;
        r.sim = Some(Box::new(sim));
        let dir = tempfile::tempdir().unwrap();
        write_outputs(dir.path(), &r).unwrap();
        for f in std::fs::read_dir(dir.path()).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "svg") {
                svg_summary(&std::fs::read_to_string(&f).unwrap());
            }
        }
    }

    #[test]
    fn markdown_escapes() {
        assert_eq!(md_escape("write_bw"), "write_bw");
        assert_eq!(md_escape("_x_ a|b <i> *"), "\\_x\\_ a\\|b \\<i> \\*");
        assert_eq!(md_escape("a\nb"), "a b");
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_bytes(0), "0 B");
        assert_eq!(fmt_bytes(128 << 10), "128 KiB");
        assert_eq!(fmt_bytes(1 << 30), "1 GiB");
        assert_eq!(fmt_bytes(80_000_000_000), "74.5 GiB");
        assert_eq!(fmt_bytes(u64::MAX), "16 EiB");
        assert_eq!(fmt_num(1234567.891, 1), "1,234,567.9");
        assert_eq!(fmt_num(-0.01, 1), "0.0");
        assert_eq!(fmt_num(-1500.0, 0), "-1,500");
        assert_eq!(fmt_num(f64::NAN, 1), "n/a");
        assert_eq!(fmt_mbs(174e6), "174.0");
        assert_eq!(fmt_pct(0.068), "+6.8 %");
        assert_eq!(fmt_pct(-0.5), "-50.0 %");
        assert_eq!(fmt_metric("write_bw", 82e6), "82.0 MB/s");
        assert_eq!(fmt_metric("read_iops", 41523.4), "41,523 IOPS");
        assert_eq!(fmt_metric("write_bw_min", 28.6e6), "28.6 MB/s");
        assert_eq!(fmt_metric("iops_mean", 100.0), "100 IOPS");
        assert_eq!(fmt_metric("clat_mean_ns", 250_000.0), "250.0 µs");
        assert_eq!(fmt_metric("trimmed_bytes", 1073741824.0), "1 GiB");
        assert_eq!(fmt_metric("host_written", 1073741824.0), "1 GiB");
        assert_eq!(fmt_metric("write_clat_p99", 2_500_000.0), "2.50 ms");
        assert_eq!(fmt_unix(0), "1970-01-01 00:00 UTC");
        assert_eq!(fmt_unix(1_764_554_400), "2025-12-01 02:00 UTC");
        assert_eq!(fmt_unix(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn key_values_fall_back_to_fio_json_and_surface_points() {
        let r = testdata::trim_recovery();
        let mut random = r.phase("random").unwrap().clone();
        let bw = random.metrics.remove("write_bw").unwrap();
        assert!(
            !nonzero(key_value(&random, "read_bw")),
            "fio's 0 reads are no figure"
        );
        let from_fio = key_value(&random, "write_bw").unwrap();
        assert!((from_fio - bw).abs() <= 1.0, "{from_fio} vs {bw}");
        let mut fresh = r.phase("fresh").unwrap().clone();
        let bw = fresh.metrics["mean_bw"];
        assert_eq!(key_value(&fresh, "write_bw"), Some(bw));
        fresh.metrics.remove("mean_bw");
        assert!((key_value(&fresh, "write_bw").unwrap() - bw).abs() < 1e-3);
        assert_eq!(key_value(&fresh, "read_bw"), None);
    }

    #[test]
    fn comparisons_computed_when_the_run_has_none() {
        let mut r = testdata::trim_recovery();
        let given = r.comparison.clone();
        r.comparison.clear();
        let computed = comparisons(&r);
        for c in &given {
            let d = computed
                .iter()
                .find(|x| x.phase == c.phase && x.metric == c.metric)
                .unwrap();
            assert!((d.difference - c.difference).abs() < 1e-12);
            assert_eq!(d.within, c.within);
        }
    }

    mod prop {
        use super::*;
        use crate::kit::bench::results::{BenchResults, Mode};
        use proptest::prelude::*;

        fn num() -> impl Strategy<Value = f64> {
            prop_oneof![
                4 => 0.0..1e10f64,
                1 => Just(f64::NAN),
                1 => Just(f64::INFINITY),
                1 => Just(-1.0),
                1 => Just(0.0),
                1 => Just(1e300),
            ]
        }

        fn phase() -> impl Strategy<Value = PhaseResult> {
            (
                "[a-zA-Z0-9 ./_|*<>&\"é-]{0,12}",
                prop_oneof![Just("fio"), Just("surface"), Just("trim"), Just("idle")],
                proptest::option::of((
                    num(),
                    proptest::collection::vec(num(), 0..20),
                    proptest::collection::vec(num(), 0..20),
                )),
                proptest::option::of(proptest::collection::vec(
                    (any::<u64>(), num(), num()),
                    0..20,
                )),
                proptest::collection::btree_map("[a-z_]{1,10}", num(), 0..4),
                proptest::option::of((any::<u32>(), any::<u32>())),
            )
                .prop_map(|(name, kind, series, surface, metrics, trim)| {
                    let mut p = testdata::used_state().phases[0].clone();
                    p.name = name;
                    p.kind = kind.into();
                    p.fio = None;
                    p.metrics = metrics;
                    p.series = series.map(|(interval_s, r, w)| Series {
                        interval_s,
                        read_bytes_s: r,
                        write_bytes_s: w,
                    });
                    p.surface = surface.map(|pts| Surface {
                        op: "write".into(),
                        block: 131072,
                        burst: 1 << 20,
                        points: pts
                            .into_iter()
                            .map(|(offset, position, bytes_s)| SurfacePoint {
                                offset,
                                position,
                                bytes_s,
                            })
                            .collect(),
                    });
                    p.trim = trim.map(|(a, b)| crate::device::report::TrimReport {
                        discard_cmds: u64::from(a),
                        requested_bytes: u64::from(a) * 4096,
                        freed_bytes: u64::from(b) * 4096,
                        ..Default::default()
                    });
                    p
                })
        }

        fn run() -> impl Strategy<Value = BenchResults> {
            (
                proptest::collection::vec(phase(), 0..5),
                proptest::collection::vec(
                    (num(), 0usize..7, num(), any::<u16>(), any::<u16>()),
                    0..30,
                ),
                any::<u64>(),
                any::<bool>(),
            )
                .prop_map(|(phases, samples, capacity, sim)| {
                    let mut r = testdata::used_state();
                    r.phases = phases;
                    r.capacity = capacity;
                    r.samples = samples
                        .into_iter()
                        .map(|(t_s, phase, waf, free, total)| DriveSample {
                            t_s,
                            phase,
                            waf,
                            free_blocks: u64::from(free),
                            total_blocks: u64::from(total),
                            host_written_bytes: 0,
                            nand_bytes_programmed: 0,
                        })
                        .collect();
                    if sim {
                        let mut s = r.clone();
                        s.mode = Mode::Sim;
                        r.sim = Some(Box::new(s));
                    }
                    r
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(48))]
            #[test]
            fn any_run_renders(r in run(), other in run()) {
                let dir = tempfile::tempdir().unwrap();
                let files = write_outputs(dir.path(), &r).unwrap();
                for f in &files {
                    prop_assert_eq!(f.parent(), Some(dir.path()));
                    if f.extension().is_some_and(|e| e == "svg") {
                        svg_summary(&std::fs::read_to_string(f).unwrap());
                    }
                }
                let _ = crate::kit::bench::compare::compare(&r, &other);
            }
        }
    }
}
