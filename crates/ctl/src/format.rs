//! Human-readable output of `vssd ctl`: counters grouped and labelled with
//! their units, tables aligned under their headers.

use std::fmt::Write as _;

use indicatif::{ProgressBar, ProgressStyle};

use super::protocol::{
    FaultInfo, FaultReport, FaultSpec, PowerCutResult, PowerReport, PreconditionResult, Progress,
    StatsReport, Step, TrimRecord,
};
use vssd_device::OpKind;
use vssd_device::hist::Summary;
use vssd_device::power::{Armed, CutReport};
use vssd_device::stats::{DepthReport, IoReport, TrimReport};
use vssd_profile::size::format_size;

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

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1} %", part as f64 * 100.0 / whole as f64)
    }
}

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

fn trim_line(t: &TrimReport) -> String {
    let partial = t
        .requested_bytes
        .saturating_sub(t.freed_bytes)
        .saturating_sub(t.already_unmapped_bytes);
    format!(
        "{} ({} requested): {} freed, {} already unmapped, {} in partly covered units left mapped; {}",
        plural(t.discard_cmds, "discard", "discards"),
        size_exact(t.requested_bytes),
        size_exact(t.freed_bytes),
        size_exact(t.already_unmapped_bytes),
        size_exact(partial),
        plural(t.write_zeroes_cmds, "write-zeroes", "write-zeroes"),
    )
}

fn io_line(io: &IoReport) -> String {
    let mut parts: Vec<String> = OpKind::ALL
        .iter()
        .filter_map(|k| {
            let c = io.ops.get(k.name())?;
            let mut s = format!("{} {}", k.name(), c.cmds);
            if c.bytes > 0 {
                let _ = write!(s, " ({})", format_size(c.bytes));
            }
            if c.errors > 0 {
                let _ = write!(s, " [{} failed]", c.errors);
            }
            Some(s)
        })
        .collect();
    if parts.is_empty() {
        parts.push("no requests".into());
    }
    if io.rejected > 0 {
        parts.push(format!("{} rejected", io.rejected));
    }
    if io.abandoned > 0 {
        parts.push(format!("{} abandoned", io.abandoned));
    }
    parts.join(", ")
}

/// `in flight 3 now, 16 at most, 15.8 on average while busy (12.0 s busy)`.
fn depth_line(d: &DepthReport) -> String {
    if d.max_in_flight == 0 {
        return "no requests yet".into();
    }
    format!(
        "{} now, {} at most, {:.1} on average while busy ({:.1} s busy)",
        d.in_flight,
        d.max_in_flight,
        d.mean_in_flight,
        d.busy_ns as f64 / 1e9
    )
}

/// The `ctl stats` text.
pub fn stats(r: &StatsReport) -> String {
    let mut o = String::new();
    let d = &r.drive;
    let c = &r.counters;
    let _ = writeln!(
        o,
        "drive        {}, {} ({} bytes), serial {}",
        d.profile,
        format_size(d.capacity),
        d.capacity,
        d.serial
    );
    if let Some(id) = &d.identity {
        let wwn = id
            .wwn
            .map(|w| format!(", WWN {w:#018x}"))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "identity     {}, firmware {}{wwn}, SMART set {}",
            id.model,
            id.firmware,
            id.smart.name()
        );
    }
    let _ = writeln!(
        o,
        "data         {}, {} allocated",
        d.backing.as_deref().unwrap_or("in memory"),
        format_size(d.allocated_bytes)
    );
    if d.model_bytes > 0 || d.rss_bytes > 0 {
        let _ = writeln!(
            o,
            "memory       model {}, daemon resident {}",
            format_size(d.model_bytes),
            format_size(d.rss_bytes)
        );
    }
    if d.time_scale != 1.0 {
        let _ = writeln!(
            o,
            "time scale   {}: the drive's clock runs {}× slower than the wall clock; \
             latencies and rates below are the drive's",
            d.time_scale, d.time_scale
        );
    }
    if let Some(why) = &d.stopped {
        let _ = writeln!(o, "STOPPED      {why}");
    }
    if !r.faults.power.powered {
        let _ = writeln!(
            o,
            "POWER OFF    after ctl power-cut; ctl power-on brings it back"
        );
    }
    if r.faults.read_only {
        let _ = writeln!(
            o,
            "END OF LIFE  worn out and read-only: writes fail, reads work"
        );
    }
    let conn = &r.connection;
    let _ = writeln!(
        o,
        "requests     {} in flight, {} rejected, {} abandoned",
        conn.in_flight, conn.rejected, conn.abandoned
    );
    let _ = writeln!(o, "in flight    {}", depth_line(&conn.depth));

    let _ = writeln!(o, "\nfrontends");
    if r.frontends.is_empty() {
        let _ = writeln!(o, "  (none)");
    }
    for f in &r.frontends {
        let state = match (f.open_connections, f.negotiating) {
            (0, 0) => "waiting for a client".to_string(),
            (0, n) => format!(
                "{} connected, negotiating (a paused VM stays here until it starts)",
                plural(n, "client", "clients")
            ),
            (n, 0) => format!("{} open", plural(n, "connection", "connections")),
            (n, k) => format!(
                "{} open, {} negotiating",
                plural(n, "connection", "connections"),
                k
            ),
        };
        let _ = writeln!(
            o,
            "  {} {}{}: {}, {} since start",
            f.kind,
            f.name,
            if f.info.is_empty() {
                String::new()
            } else {
                format!(" ({})", f.info)
            },
            state,
            plural(f.connections, "connection", "connections"),
        );
        let _ = writeln!(o, "    requests   {}", io_line(&f.io));
        let _ = writeln!(o, "    TRIM       {}", trim_line(&f.io.trim));
        let _ = writeln!(o, "    in flight  {}", depth_line(&f.io.depth));
        for cn in &f.conns {
            let t = &cn.io.trim;
            let dp = &cn.io.depth;
            let _ = writeln!(
                o,
                "    #{:<3} {} {}: {}{}{}",
                cn.id,
                cn.peer,
                if cn.open { "(open)" } else { "(closed)" },
                io_line(&cn.io),
                if t.discard_cmds + t.write_zeroes_cmds > 0 {
                    format!("; TRIM {}", trim_line(t))
                } else {
                    String::new()
                },
                if dp.max_in_flight > 0 {
                    format!(
                        "; in flight {} at most, {:.1} on average",
                        dp.max_in_flight, dp.mean_in_flight
                    )
                } else {
                    String::new()
                }
            );
        }
    }

    let unit = c.total_units.max(1);
    let unit_bytes = d.capacity / unit;
    let _ = writeln!(o, "\nflash");
    let _ = writeln!(
        o,
        "  host           read {} in {}, written {} in {}, trimmed {} in {}, {}",
        format_size(c.host_read_bytes),
        plural(c.host_read_cmds, "command", "commands"),
        format_size(c.host_written_bytes),
        plural(c.host_write_cmds, "command", "commands"),
        format_size(c.host_trimmed_bytes),
        plural(c.host_trim_cmds, "command", "commands"),
        plural(c.host_flush_cmds, "flush", "flushes"),
    );
    let _ = writeln!(
        o,
        "  NAND           {} programmed ({} pages), {} pages read, {} erased",
        format_size(c.nand_bytes_programmed),
        c.nand_pages_programmed,
        c.nand_pages_read,
        plural(c.erases, "block", "blocks"),
    );
    let recent = match &r.recent {
        Some(w) if w.host_written_bytes > 0 => format!(
            ", {:.2} over the last {:.0} s",
            w.write_amplification, w.seconds
        ),
        Some(w) => format!(", no host writes in the last {:.0} s", w.seconds),
        None => String::new(),
    };
    let _ = writeln!(
        o,
        "  write ampl.    {:.2} lifetime{}",
        c.write_amplification, recent
    );
    let _ = writeln!(
        o,
        "  GC             {} copied ({} units), {} reclaimed ({} foreground, {} background)",
        format_size(c.gc_copies.saturating_mul(unit_bytes)),
        c.gc_copies,
        plural(c.gc_victims, "block", "blocks"),
        c.fg_gc_victims,
        c.bg_gc_victims,
    );
    let _ = writeln!(
        o,
        "  free blocks    {} of {} ({})",
        c.free_blocks,
        c.total_blocks,
        pct(c.free_blocks, c.total_blocks)
    );
    let _ = writeln!(
        o,
        "  mapped         {} of {} ({})",
        format_size(c.mapped_units.saturating_mul(unit_bytes)),
        format_size(c.total_units.saturating_mul(unit_bytes)),
        pct(c.mapped_units, c.total_units)
    );
    let _ = writeln!(
        o,
        "  wear           erase count min {}, mean {:.2}, max {}{}",
        c.erase_count_min,
        c.erase_count_avg,
        c.erase_count_max,
        c.wear_percent_used
            .map(|w| format!("; percentage used {w:.1} %"))
            .unwrap_or_default()
    );
    if c.host_reduced_bytes > 0 {
        let _ = writeln!(
            o,
            "  reduction      host writes {} after data reduction ({} of what the host wrote)",
            format_size(c.host_reduced_bytes),
            pct(c.host_reduced_bytes, c.host_written_bytes)
        );
    }
    if c.merges_switch + c.merges_partial + c.merges_full > 0 {
        let _ = writeln!(
            o,
            "  merges         {} switch, {} partial, {} full; {} copied ({} units)",
            c.merges_switch,
            c.merges_partial,
            c.merges_full,
            format_size(c.merge_copies.saturating_mul(unit_bytes)),
            c.merge_copies
        );
    }
    if c.slc_units_written > 0 || c.slc_free_units > 0 {
        let _ = writeln!(
            o,
            "  SLC cache      {} free; {} written in SLC mode, {} folded",
            format_size(c.slc_free_units.saturating_mul(unit_bytes)),
            format_size(c.slc_units_written.saturating_mul(unit_bytes)),
            format_size(c.slc_units_folded.saturating_mul(unit_bytes))
        );
    }
    if c.trim_pending_units > 0 {
        let _ = writeln!(
            o,
            "  TRIM           {} trimmed but not yet released (still copied by GC)",
            format_size(c.trim_pending_units.saturating_mul(unit_bytes))
        );
    }
    if c.trim_dropped_units > 0 {
        let _ = writeln!(
            o,
            "  TRIM           {} dropped from the write buffer before programming",
            format_size(c.trim_dropped_units.saturating_mul(unit_bytes))
        );
    }
    let _ = writeln!(
        o,
        "  buffer         host writes waited {} in all for buffer space; {} read-modify-write reads",
        dur(c.buffer_stall_ns as f64),
        c.rmw_reads
    );

    let _ = writeln!(
        o,
        "\nlatency        modelled (drive)                  delivered (to the client)"
    );
    let _ = writeln!(
        o,
        "{:<13} {:>9} {:>10} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "op", "cmds", "bytes", "errors", "p50", "p99", "max", "p50", "p99", "max"
    );
    let mut any = false;
    for k in OpKind::ALL {
        let Some(op) = r.ops.get(k.name()) else {
            continue;
        };
        if op.cmds == 0 {
            continue;
        }
        any = true;
        let (m, g) = (&op.modelled, &op.delivered);
        let _ = writeln!(
            o,
            "{:<13} {:>9} {:>10} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            k.name(),
            op.cmds,
            format_size(op.bytes),
            op.errors,
            dur(m.p50_ns as f64),
            dur(m.p99_ns as f64),
            dur(m.max_ns as f64),
            dur(g.p50_ns as f64),
            dur(g.p99_ns as f64),
            dur(g.max_ns as f64),
        );
    }
    if !any {
        let _ = writeln!(o, "(no requests yet)");
    }
    let _ = writeln!(o, "\n{}", lateness(&r.lateness));
    let f = &r.faults;
    if !f.active.is_empty() || *f != FaultReport::default() {
        let _ = writeln!(o, "\n{}", fault_counters(f));
    }
    o
}

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

fn fault_counters(r: &FaultReport) -> String {
    let c = &r.counters;
    let mut o = format!(
        "faults       {} active; injected: {}, {}, {} ({} held, waiting {} in all)",
        r.active.len(),
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
    if r.active.is_empty() {
        let _ = writeln!(o, "no faults injected");
    }
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
            "armed: the power goes with the next {}",
            if *writes == 1 {
                "write".to_string()
            } else {
                format!("{writes} writes' last")
            }
        ),
        Armed::At { model_ns } => format!(
            "armed: the power goes at drive time {}",
            dur(*model_ns as f64)
        ),
    }
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
            let _ = writeln!(
                o,
                "lost {:>14} {:>10}  acked {}{}{}",
                l.offset,
                l.length,
                dur(l.acked_model_ns as f64),
                if l.acknowledged {
                    ""
                } else {
                    " (not yet acknowledged)"
                },
                loss_cause(l)
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

fn lateness(l: &Summary) -> String {
    format!(
        "lateness (delivered − modelled completion), {}:\n  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        plural(l.count, "completion", "completions"),
        dur(l.p50_ns as f64),
        dur(l.p90_ns as f64),
        dur(l.p99_ns as f64),
        dur(l.p999_ns as f64),
        dur(l.max_ns as f64),
    )
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

/// A progress bar for a precondition of `names` steps.
pub fn precondition_bar(names: &[String]) -> ProgressBar {
    let b = ProgressBar::new(1);
    if let Ok(s) = ProgressStyle::with_template(
        "{prefix} {wide_bar} {bytes}/{total_bytes} written in model time [{elapsed_precise}, eta {eta}]",
    ) {
        b.set_style(s);
    }
    b.set_prefix(names.join(", then "));
    b
}

/// Show `p` on `bar`.
pub fn update_bar(bar: &ProgressBar, p: &Progress) {
    if bar.length() != Some(p.total_bytes) {
        bar.set_length(p.total_bytes);
    }
    bar.set_position(p.done_bytes);
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

/// The `ctl smart` text: an information header, then the attributes in
/// `smartctl -A` style (or the NVMe health log fields as `smartctl -a`
/// prints them).
pub fn smart(r: &vssd_device::smart::SmartReport) -> String {
    let mut o = String::new();
    let id = &r.identity;
    let nvme = r.nvme.is_some();
    let mut field = |label: &str, v: &str| {
        let _ = writeln!(o, "{:<18}{v}", format!("{label}:"));
    };
    field(
        if nvme { "Model Number" } else { "Device Model" },
        &id.model,
    );
    field("Serial Number", &id.serial);
    if let Some(w) = id.wwn {
        let h = format!("{w:016x}");
        field(
            "LU WWN Device Id",
            &format!("{} {} {}", &h[..1], &h[1..7], &h[7..]),
        );
    }
    field("Firmware Version", &id.firmware);
    field(
        "SMART set",
        &format!(
            "{} (computed by vssd from the drive model's counters)",
            r.set.name()
        ),
    );
    o.push('\n');
    if let Some(n) = &r.nvme {
        let _ = writeln!(o, "SMART/Health Information (NVMe Log 0x02)");
        let used = n
            .percentage_used
            .map(|p| format!("{p}%"))
            .unwrap_or_else(|| "- (no rated P/E cycles in the profile)".into());
        let _ = writeln!(o, "Percentage Used:                    {used}");
        let du = |u: u64| format!("{} [{}]", group(u), format_size(u * 512_000));
        let _ = writeln!(
            o,
            "Data Units Read:                    {}",
            du(n.data_units_read)
        );
        let _ = writeln!(
            o,
            "Data Units Written:                 {}",
            du(n.data_units_written)
        );
        let _ = writeln!(
            o,
            "Host Read Commands:                 {}",
            group(n.host_read_commands)
        );
        let _ = writeln!(
            o,
            "Host Write Commands:                {}",
            group(n.host_write_commands)
        );
        let _ = writeln!(o, "Media and Data Integrity Errors:    {}", n.media_errors);
        return o;
    }
    let _ = writeln!(o, "ID# ATTRIBUTE_NAME            VALUE WORST RAW_VALUE");
    for a in &r.attributes {
        let v = a
            .value
            .map(|v| format!("{v:03}"))
            .unwrap_or_else(|| "---".into());
        let _ = writeln!(o, "{:>3} {:<25} {v:>5} {v:>5} {}", a.id, a.name, a.raw_text);
    }
    if let Some(p) = r.percent_used {
        let _ = writeln!(
            o,
            "\nrated life used: {p:.2} % (mean erase count over the rated P/E cycles)"
        );
    }
    o
}

/// `1234567` as `1,234,567` (smartctl's digit grouping).
fn group(v: u64) -> String {
    let d = v.to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
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

#[cfg(test)]
mod tests {
    use vssd_device::trimlog::TrimRecord;

    #[test]
    fn trim_sizes_are_exact_where_rounding_would_hide_a_difference() {
        // A 65,535-sector range (Windows' largest DSM range) that freed all
        // but its last, partly covered 4 KiB unit... and a bit more.
        let len = 65_535 * 512;
        assert_eq!(size_exact(len), "32.00MiB (33553920 B, 65535 sectors)");
        assert_eq!(size_exact(32 << 20), "32MiB");
        assert_eq!(size_exact(100), "100B");
        let r = TrimRecord {
            seq: 1,
            model_ns: 0,
            wall_unix_ms: 0,
            source: "nbd:vssd#1".into(),
            kind: "discard".into(),
            ranges: vec![(0, len)],
            freed_bytes: 33_550_336,
            already_unmapped_bytes: 0,
        };
        let line = trim_record(&r);
        assert!(
            line.contains(" 33553920 ")
                && line.contains(" 33550336 ")
                && line.trim_end().ends_with(" 3584"),
            "{line}"
        );
    }
    use super::*;
    use vssd_device::{DataLocation, Device, DeviceOptions};
    use vssd_profile::Profile;

    #[test]
    fn period_counters_show_in_the_text_only_when_the_drive_has_them() {
        let report = |preset: &str| {
            let dev = Device::open(DeviceOptions {
                profile: Profile::load_with_capacity(preset, Some(1 << 30)).unwrap(),
                data: DataLocation::Memory,
                state_file: None,
                seed: 1,
                time_scale: Default::default(),
            })
            .unwrap();
            stats(&dev.report())
        };
        let generic = report("sata-mlc-2011");
        assert!(!generic.contains("SLC cache") && !generic.contains("merges"));
        let slc = report("nvme-tlc-slc-cache");
        assert!(slc.contains("SLC cache"), "{slc}");
        assert!(slc.contains("percentage used"), "{slc}");
    }
}
