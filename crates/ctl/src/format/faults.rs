//! Injected faults and power cuts: `ctl faults`, `ctl power-cut`, and the
//! fault lines of `ctl stats`.

use std::fmt::Write as _;

use super::{dur, plural};
use crate::protocol::{FaultInfo, FaultReport, FaultSpec, PowerCutResult, PowerReport};
use vssd_device::power::{Armed, CutReport};

/// One fault as `ctl fault list` shows it.
pub fn fault(f: &FaultInfo) -> String {
    let what = match &f.spec {
        FaultSpec::ReadError { offset, length } | FaultSpec::WriteError { offset, length } => {
            format!(
                "{:<11} offset {offset} length {length} (sectors {}..{})",
                f.spec.kind(),
                offset / 512,
                (offset + length) / 512
            )
        }
        FaultSpec::Stall {
            ms,
            every_ms,
            after_ms,
        } => match every_ms {
            Some(e) => format!("{:<11} {ms} ms every {e} ms", "stall"),
            None => format!(
                "{:<11} {ms} ms once, {} ms after it was added",
                "stall",
                after_ms.unwrap_or(0)
            ),
        },
        FaultSpec::Throttle {
            mb_s,
            after_ms,
            for_ms,
        } => format!(
            "{:<11} {mb_s} MB/s from {} ms after it was added{}",
            "throttle",
            after_ms.unwrap_or(0),
            for_ms
                .map(|f| format!(", for {f} ms"))
                .unwrap_or_else(|| ", until cleared".into())
        ),
        FaultSpec::BadBlock { count } => {
            format!(
                "{:<11} {count} asked for (hits: blocks retired)",
                "bad-block"
            )
        }
        FaultSpec::MediaWear {
            acceleration,
            retention_days,
        } => format!(
            "{:<11} acceleration {acceleration}, data {retention_days} days older (hits: reads failed, blocks retired)",
            "media-wear"
        ),
    };
    format!(
        "{:>4}  {what}, {} so far",
        f.id,
        plural(f.hits, "hit", "hits")
    )
}

pub(super) fn fault_counters(r: &FaultReport) -> String {
    let c = &r.counters;
    let active = match r.active.len() {
        0 => "none active".to_string(),
        n => format!("{n} active"),
    };
    let nothing = c.read_errors_injected == 0
        && c.write_errors_injected == 0
        && c.stalls_injected == 0
        && c.throttled_commands == 0
        && c.uncorrectable_reads == 0
        && c.blocks_retired == 0;
    if nothing {
        return format!("faults       {active}; nothing injected so far");
    }
    let mut o = format!(
        "faults       {active}; injected: {}, {}, {} ({} held, waiting {} in all)",
        plural(c.read_errors_injected, "read error", "read errors"),
        plural(c.write_errors_injected, "write error", "write errors"),
        plural(c.stalls_injected, "stall", "stalls"),
        plural(c.stalled_commands, "command", "commands"),
        dur(c.stall_wait_ns as f64),
    );
    if c.throttled_commands > 0 {
        o.push_str(&format!(
            "; throttled {} (+{})",
            plural(c.throttled_commands, "command", "commands"),
            dur(c.throttle_delay_ns as f64)
        ));
    }
    if c.uncorrectable_reads > 0 || c.blocks_retired > 0 {
        o.push_str(&format!(
            "; {}, {} retired",
            plural(
                c.uncorrectable_reads,
                "uncorrectable read",
                "uncorrectable reads"
            ),
            plural(c.blocks_retired, "block", "blocks")
        ));
    }
    o
}

/// "1 fault", "3 faults".
pub fn fault_count(n: usize) -> String {
    plural(n as u64, "fault", "faults")
}

/// The `ctl fault list` text.
pub fn faults(r: &FaultReport) -> String {
    let mut o = String::new();
    for f in &r.active {
        let _ = writeln!(o, "{}", fault(f));
    }
    let _ = writeln!(o, "{}", fault_counters(r));
    let _ = write!(o, "{}", power(&r.power));
    if r.read_only {
        let _ = writeln!(
            o,
            "END OF LIFE  the drive is worn out and read-only: writes fail, reads work"
        );
    }
    o
}

fn armed(a: &Armed) -> String {
    match a {
        Armed::AfterWrites { writes } => format!(
            "armed: the power goes as the {} arrives",
            if *writes == 1 {
                "next write".to_string()
            } else {
                format!("{} write from now", ordinal(*writes))
            }
        ),
        Armed::At { model_ns } => format!(
            "armed: the power goes at drive time {}",
            dur(*model_ns as f64)
        ),
    }
}

/// "1st", "2nd", "3rd", "4th", "11th", "22nd".
pub(super) fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn cut(c: &CutReport) -> String {
    let mut extra = String::new();
    if c.reordered > 0 {
        extra.push_str(&format!(
            "; {} programmed out of order survived an earlier lost one",
            plural(c.reordered, "write", "writes")
        ));
    }
    if c.mapping_lost {
        extra.push_str("; the recent mapping updates were lost");
    }
    if let Some(r) = c.restart_at_model_ns {
        extra.push_str(&format!("; power back at drive time {}", dur(r as f64)));
    }
    format!(
        "cut at drive time {} ({}): {} lost ({} bytes), {} pending survived{}{extra}",
        dur(c.model_ns as f64),
        c.trigger,
        plural(c.lost.len() as u64, "write", "writes"),
        c.lost_bytes,
        plural(c.survived, "write", "writes"),
        if c.protected {
            " (power-loss protection)"
        } else {
            ""
        }
    )
}

/// The power part of `ctl fault list`.
pub fn power(p: &PowerReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "power        {}; drive time {}; {}{}; {}; {} ({} bytes kept to undo them)",
        if p.powered {
            "on"
        } else {
            "OFF (ctl power-on)"
        },
        dur(p.drive_time_ns as f64),
        if p.power_loss_protection {
            "power-loss protection"
        } else {
            "no power-loss protection"
        },
        if p.flush_lies { ", flushes lie" } else { "" },
        plural(p.cuts, "cut", "cuts"),
        plural(p.pending_writes, "pending write", "pending writes"),
        p.pending_undo_bytes
    );
    if let Some(a) = &p.armed {
        let restart = p
            .armed_restart_after_ms
            .map(|ms| format!(", back on {} later", dur(ms as f64 * 1e6)))
            .unwrap_or_default();
        let _ = writeln!(o, "             {}{restart}", armed(a));
    }
    let c = &p.classes;
    if c.shorn > 0.0 || c.unserializable > 0.0 || c.mapping > 0.0 {
        let _ = writeln!(
            o,
            "             failure classes (Zheng et al., FAST 2013): shorn writes {}, unserializable writes {}, lost mapping updates {} per cut (window {} ms)",
            c.shorn, c.unserializable, c.mapping, c.window_ms
        );
    }
    if let Some(c) = &p.last_cut {
        let _ = writeln!(o, "             {}", cut(c));
        let _ = write!(o, "{}", lost_writes(p));
    }
    if p.untracked_writes > 0 {
        let _ = writeln!(
            o,
            "             {} writes left the audit at its bounds (treated as durable)",
            p.untracked_writes
        );
    }
    o
}

/// The writes the latest cut lost: offset, length, when acknowledged.
pub fn lost_writes(p: &PowerReport) -> String {
    let mut o = String::new();
    if let Some(c) = &p.last_cut {
        for l in &c.lost {
            // A write the cut came before was never acknowledged: its
            // time is when it would have been.
            let _ = writeln!(
                o,
                "lost {:>14} {:>10}  {} {}{}",
                l.offset,
                l.length,
                if l.acknowledged {
                    "acknowledged at"
                } else {
                    "not acknowledged (due at"
                },
                dur(l.acked_model_ns as f64),
                if l.acknowledged {
                    loss_cause(l)
                } else {
                    format!("){}", loss_cause(l))
                }
            );
        }
    }
    o
}

/// Why a write was lost, for the text lists ("" for the plain case).
fn loss_cause(l: &vssd_device::power::LostWrite) -> String {
    use vssd_device::power::LossCause;
    match (l.cause, l.shorn_from) {
        (LossCause::Unprogrammed, _) => String::new(),
        (LossCause::Shorn, Some([o, n])) => {
            format!(
                " shorn: of the write {o}+{n} the first {} bytes survived",
                l.offset - o
            )
        }
        (LossCause::Shorn, None) => " shorn".into(),
        (LossCause::Mapping, _) => " mapping update lost (it was durable)".into(),
    }
}

/// The `ctl power-cut` text.
pub fn power_cut(r: &PowerCutResult) -> String {
    let mut o = String::new();
    if let Some(c) = &r.cut {
        let _ = writeln!(o, "power {}", cut(c));
        for l in &c.lost {
            let _ = writeln!(o, "  lost {}+{}{}", l.offset, l.length, loss_cause(l));
        }
    }
    if let Some(a) = &r.armed {
        let _ = writeln!(o, "power cut {}", armed(a));
    }
    o
}
