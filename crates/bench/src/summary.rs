//! What `vssd bench run` prints at the end: each phase's figure and WAF,
//! what power cuts lost and fsck found, guest against simulator, the
//! verdicts.

use crate::results::{BenchResults, Mode, PhaseResult};
use crate::sim_vs_guest::throughput_metric;

/// What power cuts lost and what fsck found, one line per `power-on`
/// (or `power-cut`, once powered off) and `fsck` phase of a guest run.
fn losses(r: &BenchResults) -> Vec<String> {
    let mut v = Vec::new();
    let m = |p: &PhaseResult, k: &str| p.metrics.get(k).copied();
    for p in &r.phases {
        match p.kind.as_str() {
            "power-on" => {
                if let (Some(n), Some(a), Some(b), Some(prot)) = (
                    m(p, "lost_writes"),
                    m(p, "lost_acked_writes"),
                    m(p, "lost_bytes"),
                    m(p, "protected"),
                ) {
                    v.push(format!(
                        "{}: the latest power cut lost {n} writes ({a} of them acknowledged, {} bytes){}",
                        p.name,
                        b,
                        if prot == 1.0 {
                            "; the drive has power-loss protection"
                        } else {
                            ""
                        }
                    ));
                }
            }
            "fsck" => {
                if let (Some(clean), Some(c), Some(i), Some(s)) = (
                    m(p, "fsck_clean"),
                    m(p, "files_checked"),
                    m(p, "files_intact"),
                    m(p, "synced_files_lost"),
                ) {
                    v.push(format!(
                        "{}: after the journal replay, e2fsck -n found it {}{}; {i} of {c} files written read back intact, {s} fsynced files lost",
                        p.name,
                        if clean == 1.0 { "clean" } else { "NOT clean" },
                        if m(p, "fsck_fixed") == Some(1.0) {
                            " (e2fsck -y repaired it)"
                        } else {
                            ""
                        },
                    ));
                }
            }
            _ => {}
        }
    }
    if !v.is_empty() {
        v.insert(0, String::new());
    }
    v
}

pub(crate) fn summary(r: &BenchResults) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} ({}): {} on a {} {} drive, {} bus",
        r.scenario,
        match r.mode {
            Mode::Guest => "guest",
            Mode::Sim => "simulator",
        },
        r.description,
        vssd_profile::size::format_size(r.capacity),
        r.profile,
        r.bus
    );
    if r.time_scale != 1.0 {
        let _ = writeln!(
            o,
            "time scale {}: the drive's clock ran {}× slower than the wall clock; every figure \
             below is converted back to the drive's time{}",
            r.time_scale,
            r.time_scale,
            r.time_scale_reason
                .as_deref()
                .map(|w| format!(" ({w})"))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(
        o,
        "{:<18} {:<13} {:>9} {:>9} {:>12} {:>12} {:>7}",
        "phase", "kind", "drive s", "wall s", "figure", "MB/s", "WAF"
    );
    for p in &r.phases {
        let (metric, v) = throughput_metric(p).unwrap_or(("", 0.0));
        let _ = writeln!(
            o,
            "{:<18} {:<13} {:>9.1} {:>9.1} {:>12} {:>12} {:>7}",
            p.name,
            p.kind,
            p.model_s,
            p.wall_s,
            metric,
            if metric.is_empty() {
                String::new()
            } else {
                format!("{:.1}", v / 1e6)
            },
            p.metrics
                .get("waf")
                .filter(|w| **w > 0.0)
                .map(|w| format!("{w:.2}"))
                .unwrap_or_default()
        );
    }
    for line in losses(r) {
        let _ = writeln!(o, "{line}");
    }
    if !r.comparison.is_empty() {
        let _ = writeln!(
            o,
            "\nguest vs simulator (tolerance {:.0} %{}):",
            r.tolerance * 100.0,
            if r.comparison.iter().any(|c| c.replayed) {
                "; sim: the daemon's trace of each phase replayed (does the daemon \
                 deliver when its model says?); predicted: the phase's own job run in \
                 the simulator (does the model predict the guest?), not counted"
            } else {
                ""
            }
        );
        for c in &r.comparison {
            let predicted = match (c.predicted, c.predicted_difference()) {
                (Some(p), Some(d)) => {
                    format!("  predicted {:>9.1} MB/s {:+6.1} %", p / 1e6, d * 100.0)
                }
                _ => String::new(),
            };
            let _ = writeln!(
                o,
                "  {:<18} {:<9} guest {:>9.1} MB/s  sim {:>9.1} MB/s  {:+6.1} %{predicted}{}",
                c.phase,
                c.metric,
                c.guest / 1e6,
                c.sim / 1e6,
                c.difference * 100.0,
                match c.verdict() {
                    "within" => "",
                    "guest-bound" =>
                        "  (guest-bound: the emulated host, not the drive, set the guest's figure)",
                    "after guest-bound" =>
                        "  (after guest-bound: it starts from the state the guest's bursts left)",
                    _ => "  (outside)",
                }
            );
        }
    }
    for e in &r.expects {
        let _ = writeln!(o, "{} {}  [{}]", e.label(), e.text, e.detail);
        if let Some(why) = &e.inconclusive {
            let _ = writeln!(o, "    {why}");
        }
    }
    if !r.expects.is_empty() {
        let _ = writeln!(o, "{}", r.checks_line());
    }
    if let Some(why) = &r.incomplete {
        let _ = writeln!(o, "INCOMPLETE: {why}");
    }
    o
}
