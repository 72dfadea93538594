//! Human-readable output of `vssd ctl`: counters grouped and labelled with
//! their units, tables aligned under their headers.

//!
//! [`stats`] (`ctl stats`), [`faults`] (injected faults and power cuts) and
//! [`smart`] (`ctl smart`) have their own modules; this one holds the
//! shared units and the short outputs: the TRIM log, preconditioning,
//! tracing.

mod faults;
mod smart;
mod stats;
#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::protocol::{PreconditionResult, Progress, Step, TrimRecord};
use vssd_common::eta::{Rate, fmt_duration};
use vssd_profile::size::format_size;

pub use faults::{fault, fault_count, faults, lost_writes, power, power_cut};
pub use smart::smart;
pub use stats::stats;

/// A duration in ns, with a unit that keeps 3 significant digits.
pub fn dur(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// `part` as a percentage of `whole` (`-` when `whole` is 0).
fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1} %", part as f64 * 100.0 / whole as f64)
    }
}

/// `1 command`, `2 commands`.
fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A size as [`format_size`] rounds it, with the exact bytes and 512-byte
/// sectors when the rounded figure is not exact (so `32.00MiB` requested
/// and `32.00MiB` freed cannot hide 5 KiB left mapped).
pub fn size_exact(bytes: u64) -> String {
    let s = format_size(bytes);
    if s.contains('.') {
        if bytes.is_multiple_of(512) {
            format!("{s} ({bytes} B, {} sectors)", bytes / 512)
        } else {
            format!("{s} ({bytes} B)")
        }
    } else {
        s
    }
}

/// Column headers of the TRIM log. Lengths are bytes (exact); `partial`
/// is what fell in mapping units the ranges only partly cover, which stay
/// mapped.
pub fn trim_header() -> String {
    format!(
        "{:>7} {:>12} {:<18} {:<30} {:>14} {:>12} {:>6} {:>12} {:>12} {:>9}\n",
        "seq",
        "model time",
        "kind",
        "source",
        "offset",
        "length",
        "ranges",
        "freed",
        "unmapped",
        "partial"
    )
}

/// One TRIM log record (several ranges: the first offset, the total length).
pub fn trim_record(r: &TrimRecord) -> String {
    let len: u64 = r.ranges.iter().map(|x| x.1).sum();
    let off = r.ranges.first().map(|x| x.0).unwrap_or(0);
    let partial = if r.kind == "write-zeroes" {
        0
    } else {
        len.saturating_sub(r.freed_bytes)
            .saturating_sub(r.already_unmapped_bytes)
    };
    format!(
        "{:>7} {:>12} {:<18} {:<30} {:>14} {:>12} {:>6} {:>12} {:>12} {:>9}\n",
        r.seq,
        format!("{:.6} s", r.model_ns as f64 / 1e9),
        r.kind,
        r.source,
        off,
        len,
        r.ranges.len(),
        r.freed_bytes,
        r.already_unmapped_bytes,
        partial,
    )
}

/// Short name of a precondition step.
pub fn step_name(s: &Step) -> String {
    match s {
        Step::TrimAll => "trim all".into(),
        Step::Wear { percent } => format!("wear to {percent} % of the rated cycles"),
        Step::FillSeq { bs } => format!("sequential fill, {} writes", format_size(*bs)),
        Step::Random { bs, amount } => {
            format!("random {} writes, {amount}", format_size(*bs))
        }
    }
}

/// A precondition's progress on a terminal: the bytes its steps have
/// written of their total (requests to the model, which ages the drive in
/// its own time, as fast as this host computes it), the wall time so far,
/// and an ETA from the rate measured over the last 3 s (none before a
/// second's worth: the steps run at different rates, a fill faster than
/// random writes, so a whole-run average would promise too little).
pub struct PreconditionBar {
    bar: ProgressBar,
    rate: Rate,
}

impl PreconditionBar {
    /// A bar for the steps `names`.
    pub fn new(names: &[String]) -> PreconditionBar {
        let bar = ProgressBar::new(1);
        if let Ok(s) = ProgressStyle::with_template(
            "{prefix} {wide_bar} {bytes}/{total_bytes} written [{elapsed} wall, {msg}]",
        ) {
            bar.set_style(s);
        }
        bar.set_prefix(names.join(", then "));
        bar.set_message(eta_text(None));
        PreconditionBar {
            bar,
            rate: Rate::new(Duration::from_secs(3)),
        }
    }

    /// Show `p`, reported now.
    pub fn update(&mut self, p: &Progress) {
        self.update_at(p, Instant::now());
    }

    fn update_at(&mut self, p: &Progress, at: Instant) {
        if self.bar.length() != Some(p.total_bytes) {
            self.bar.set_length(p.total_bytes);
        }
        let done = p.done_bytes.min(p.total_bytes);
        self.bar.set_position(done);
        self.rate.record(at, done as f64);
        self.bar
            .set_message(eta_text(self.rate.time_left((p.total_bytes - done) as f64)));
    }

    /// The bar's message and position now.
    #[cfg(test)]
    fn shown(&self) -> (String, u64) {
        (self.bar.message(), self.bar.position())
    }

    /// Done: the bar goes.
    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}

/// "ETA 12s" at a measured rate, "ETA: measuring" before one.
fn eta_text(left: Option<Duration>) -> String {
    match left {
        Some(d) => format!("ETA {}", fmt_duration(d)),
        None => "ETA: measuring".into(),
    }
}

/// The `ctl precondition` text.
pub fn precondition(r: &PreconditionResult) -> String {
    let c = &r.counters;
    format!(
        "{}: {} of model time; write amplification {:.2}, free blocks {} of {}\n",
        if r.cancelled {
            "precondition cancelled"
        } else {
            "preconditioned"
        },
        dur(r.model_time_ns as f64),
        c.write_amplification,
        c.free_blocks,
        c.total_blocks
    )
}

/// The `ctl trace` text.
pub fn trace_status(t: &crate::protocol::TraceStatus) -> String {
    let Some(path) = &t.path else {
        return "no trace taken since the daemon started\n".into();
    };
    let mut s = format!(
        "{} {path}: {} requests, {} bytes of {} allowed",
        if t.active { "tracing to" } else { "trace" },
        t.records,
        t.bytes,
        t.limit
    );
    if t.dropped > 0 {
        s.push_str(&format!(", {} requests not recorded", t.dropped));
    }
    if !t.active {
        s.push_str(" (closed)");
    }
    s.push('\n');
    if let Some(why) = &t.ended {
        s.push_str(&format!("ended by itself: {why}\n"));
    }
    s
}
