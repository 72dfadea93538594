//! `vssd trace info`: what a trace holds: requests and bytes per kind,
//! span, arrivals; for a vssd trace also the drive, queue depth, latency
//! and what was not recorded.

use std::fmt::Write as _;
use std::path::Path;

use crate::vssd as vt;
use crate::{Format, Trace};
use vssd_profile::size::format_size;

/// The `info` text.
pub fn info(path: &Path, format: Format, trace: &Trace, v: Option<&vt::File>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {}",
        path.display(),
        match format {
            Format::Vssd => "vssd trace",
            Format::IologV2 => "fio iolog v2",
            Format::IologV3 => "fio iolog v3",
            Format::Blkparse => "blkparse text",
            Format::Blktrace => "blktrace binary",
        }
    );
    if let Some(v) = v {
        let h = &v.header;
        let _ = writeln!(
            s,
            "  drive: {} ({}), {}-byte logical blocks{}",
            if h.profile.is_empty() {
                "?"
            } else {
                &h.profile
            },
            format_size(h.capacity),
            h.logical_block,
            if h.time_scale_milli != 1000 {
                format!(", time scale {}", h.time_scale_milli as f64 / 1000.0)
            } else {
                String::new()
            }
        );
        if !v.closed {
            s.push_str(
                "  not closed (the daemon ended without stopping it): its whole records are read\n",
            );
        }
        if h.dropped > 0 {
            let _ = writeln!(s, "  {} requests were not recorded", h.dropped);
        }
    }
    if trace.files.len() > 1 {
        let _ = writeln!(s, "  files/devices: {}", trace.files.join(", "));
    }
    let mut per: Vec<(&'static str, u64, u64)> = Vec::new();
    let mut lo = u64::MAX;
    let mut hi = 0u64;
    let mut first_t = None;
    let mut last_t = None;
    let mut n = 0u64;
    for io in trace.ios() {
        n += 1;
        let name = io.op.name();
        match per.iter_mut().find(|p| p.0 == name) {
            Some(p) => {
                p.1 += 1;
                p.2 += io.len;
            }
            None => per.push((name, 1, io.len)),
        }
        if io.len > 0 {
            lo = lo.min(io.offset);
            hi = hi.max(io.offset + io.len);
        }
        if let Some(t) = io.t_ns {
            first_t.get_or_insert(t);
            last_t = Some(t);
        }
    }
    let _ = writeln!(s, "  requests: {n}");
    for (name, c, b) in &per {
        let _ = writeln!(s, "    {name:<13} {c:>10}  {}", format_size(*b));
    }
    if lo < hi {
        let _ = writeln!(s, "  span: {} .. {} ({})", lo, hi, format_size(hi - lo));
    }
    if let (Some(a), Some(b)) = (first_t, last_t) {
        let d = (b - a) as f64 / 1e9;
        let _ = write!(s, "  arrivals over {d:.3} s");
        if d > 0.0 {
            let _ = write!(s, " ({:.0} requests/s)", n as f64 / d);
        }
        s.push('\n');
    } else if n > 0 {
        s.push_str("  no times (replayed as fast as iodepth allows)\n");
    }
    if let Some(v) = v {
        // Queue depth (received to delivered), latency as the client saw
        // it, and how long requests waited for the model.
        let mut spans: Vec<(u64, u64)> = v
            .records
            .iter()
            .map(|r| (r.received_ns, r.delivered_ns))
            .collect();
        spans.sort_unstable();
        let mut ends: std::collections::BinaryHeap<std::cmp::Reverse<u64>> =
            std::collections::BinaryHeap::new();
        let mut max_depth = 0usize;
        for &(a, d) in &spans {
            while ends.peek().is_some_and(|e| e.0 <= a) {
                ends.pop();
            }
            ends.push(std::cmp::Reverse(d));
            max_depth = max_depth.max(ends.len());
        }
        let mut lat: Vec<u64> = spans.iter().map(|&(a, d)| d.saturating_sub(a)).collect();
        let mut wait: Vec<u64> = v
            .records
            .iter()
            .map(|r| r.taken_ns - r.received_ns)
            .collect();
        lat.sort_unstable();
        wait.sort_unstable();
        let pct = |xs: &[u64], q: f64| xs[((xs.len() - 1) as f64 * q) as usize] as f64 / 1e3;
        if !lat.is_empty() {
            let _ = writeln!(
                s,
                "  in flight at most {max_depth}; latency (received to delivered) p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
                pct(&lat, 0.5),
                pct(&lat, 0.99),
                pct(&lat, 1.0)
            );
            if v.version >= vt::VERSION {
                let _ = writeln!(
                    s,
                    "  received to taken by the model: p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
                    pct(&wait, 0.5),
                    pct(&wait, 0.99),
                    pct(&wait, 1.0)
                );
            }
        }
        if v.version < vt::VERSION {
            let _ = writeln!(
                s,
                "  format version {}: times are the model's (when it took each request), not the frontend's",
                v.version
            );
        }
        let failed = v
            .records
            .iter()
            .filter(|r| r.status != vt::status::OK)
            .count();
        if failed > 0 {
            let _ = writeln!(
                s,
                "  {failed} records did not complete OK (refused, failed or abandoned)"
            );
        }
    }
    s
}
