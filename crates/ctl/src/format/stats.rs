//! The `ctl stats` text: the drive, its frontends and connections, the
//! flash's counters, latencies, lateness.

use std::fmt::Write as _;

use super::faults::fault_counters;
use super::{dur, pct, plural, size_exact};
use crate::protocol::{FaultReport, StatsReport};
use vssd_device::OpKind;
use vssd_device::hist::Summary;
use vssd_device::stats::{DepthReport, IoReport, TrimReport};
use vssd_profile::size::format_size;

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

/// The `ctl stats` text: the drive, its frontends and connections, the
/// flash's counters, latencies per operation, lateness and faults.
pub fn stats(r: &StatsReport) -> String {
    let mut o = String::new();
    drive(&mut o, r);
    frontends(&mut o, r);
    flash(&mut o, r);
    latency(&mut o, r);
    let _ = writeln!(o, "\n{}", lateness(&r.lateness));
    let f = &r.faults;
    if !f.active.is_empty() || *f != FaultReport::default() {
        let _ = writeln!(o, "\n{}", fault_counters(f));
    }
    o
}

/// What the drive is, where its data is, and what state it is in.
fn drive(o: &mut String, r: &StatsReport) {
    let d = &r.drive;
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
}

/// Each frontend, its requests, TRIM and depth, and its connections.
fn frontends(o: &mut String, r: &StatsReport) {
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
}

/// The flash: host and NAND traffic, write amplification, GC, free
/// blocks, mapping, wear, and the period mechanisms the drive has.
fn flash(o: &mut String, r: &StatsReport) {
    let d = &r.drive;
    let c = &r.counters;
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
    if let Some(t) = c.temperature_c {
        let _ = writeln!(
            o,
            "  temperature    {t:.1} °C (peak {:.1} °C); throttle step {}{}",
            c.temperature_peak_c.unwrap_or(t),
            c.throttle_level,
            if c.throttle1_entries + c.throttle2_entries > 0 {
                format!(
                    " (entered {} / {} times, {:.1} / {:.1} s in steps 1 / 2+)",
                    c.throttle1_entries,
                    c.throttle2_entries,
                    c.throttle1_ns as f64 / 1e9,
                    c.throttle2_ns as f64 / 1e9
                )
            } else {
                String::new()
            }
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
}

/// Latency per operation, modelled and delivered.
fn latency(o: &mut String, r: &StatsReport) {
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
