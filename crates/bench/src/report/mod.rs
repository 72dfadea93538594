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
//! | `series-STEM.csv` | `t_s,read_bytes_s,write_bytes_s`: `t_s` is the end of each interval, drive-time seconds from the phase's start (intervals as long as fio's log entries are apart in drive time) |
//! | `surface-STEM.csv` | `offset,position,bytes_s` |
//! | `drive-samples.csv` | `t_s,phase,phase_name,waf,free_blocks,total_blocks,host_written_bytes,nand_bytes_programmed`: `t_s` in drive-time seconds since the run started |
//! | `sim-…` | the same CSV for the simulator's run, when one is attached |
//! | `*.svg` | the charts of [`super::chart::charts`] |
//! | `report.md`, `report.html` | what ran, key figures, charts, TRIM audit, expectations, simulator vs guest, phases |
//!
//! CSV cells of non-finite numbers are empty; numbers have 12 significant
//! digits at most, without float noise (`0.6`, not `0.6000000000000001`). Throughput in tables and
//! charts is in MB/s (10⁶ bytes/s, as the reviews and fio print it); sizes
//! are binary (KiB, MiB, GiB).

mod csv;
mod document;
mod figures;
mod render;
#[cfg(test)]
mod tests;

pub(crate) use figures::*;
pub(crate) use render::md_escape;

use std::io;
use std::path::{Path, PathBuf};

use super::chart;
use super::results::BenchResults;
use csv::{samples_csv, series_csv, surface_csv};
use document::document;
use render::{to_html, to_markdown};

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
