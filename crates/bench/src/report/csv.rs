//! The CSV files of a run's directory.

use std::fmt::Write as _;

use super::super::results::{BenchResults, Series, Surface};

pub(super) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A number for a CSV cell: 12 significant digits at most (9 decimals at
/// most), trailing zeros dropped, so that a time of 3 × 0.2 s reads `0.6`,
/// not `0.6000000000000001`; non-finite numbers are empty cells.
pub(super) fn csv_num(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    let digits = if v == 0.0 {
        1
    } else {
        (v.abs().log10().floor() as i32 + 1).max(1)
    };
    let decimals = (12 - digits).clamp(0, 9) as usize;
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" { "0".into() } else { s }
}

pub(super) fn series_csv(s: &Series) -> String {
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

pub(super) fn surface_csv(s: &Surface) -> String {
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

pub(super) fn samples_csv(r: &BenchResults) -> String {
    // t_s: seconds of the drive's time since the run started.
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
