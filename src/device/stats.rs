//! Lock-free latency histograms and per-operation statistics.
//!
//! Histograms use log-linear buckets (8 sub-buckets per power of two, so a
//! reported percentile is within 12.5 % of the true value); recording is a
//! couple of relaxed atomic adds, safe from any queue thread.

use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
const LINEAR: usize = 2 * SUB; // values below 16 get one bucket each
const BUCKETS: usize = LINEAR + (64 - (SUB_BITS as usize + 1)) * SUB;

/// A histogram of nanosecond values.
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum: AtomicU64,
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }
}

fn bucket_of(v: u64) -> usize {
    if v < LINEAR as u64 {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= 4
    let m = ((v >> (e - SUB_BITS)) as usize) & (SUB - 1);
    LINEAR + (e as usize - (SUB_BITS as usize + 1)) * SUB + m
}

/// Highest value that falls into bucket `b`.
fn bucket_high(b: usize) -> u64 {
    if b < LINEAR {
        return b as u64;
    }
    let e = (b - LINEAR) / SUB + SUB_BITS as usize + 1;
    let m = ((b - LINEAR) % SUB) as u64;
    let low = (1u64 << e) | (m << (e - SUB_BITS as usize));
    low.saturating_add((1u64 << (e - SUB_BITS as usize)) - 1)
}

/// Percentiles of a histogram, in ns.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Summary {
    /// Values recorded.
    pub count: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest value (exact).
    pub max_ns: u64,
}

impl Histogram {
    /// Record one value.
    pub fn record(&self, v: u64) {
        self.buckets[bucket_of(v)].fetch_add(1, Relaxed);
        self.count.fetch_add(1, Relaxed);
        self.sum.fetch_add(v, Relaxed);
        self.max.fetch_max(v, Relaxed);
    }

    /// Forget everything.
    pub fn reset(&self) {
        for b in self.buckets.iter() {
            b.store(0, Relaxed);
        }
        self.count.store(0, Relaxed);
        self.sum.store(0, Relaxed);
        self.max.store(0, Relaxed);
    }

    /// Value at quantile `q` (0..=1): the upper bound of the bucket holding it.
    pub fn quantile(&self, q: f64) -> u64 {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_high(i).min(self.max.load(Relaxed));
            }
        }
        self.max.load(Relaxed)
    }

    /// Count, mean and the usual percentiles.
    pub fn summary(&self) -> Summary {
        let count = self.count.load(Relaxed);
        Summary {
            count,
            mean_ns: if count == 0 {
                0.0
            } else {
                self.sum.load(Relaxed) as f64 / count as f64
            },
            p50_ns: self.quantile(0.50),
            p90_ns: self.quantile(0.90),
            p99_ns: self.quantile(0.99),
            p999_ns: self.quantile(0.999),
            max_ns: self.max.load(Relaxed),
        }
    }
}

/// Kinds of request, for statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// Read.
    Read = 0,
    /// Write.
    Write = 1,
    /// Discard / TRIM.
    Discard = 2,
    /// Write zeroes (either flavour).
    WriteZeroes = 3,
    /// Flush.
    Flush = 4,
    /// Anything answered without the drive (GET_ID, errors).
    Other = 5,
}

impl OpKind {
    /// All kinds, in index order.
    pub const ALL: [OpKind; 6] = [
        OpKind::Read,
        OpKind::Write,
        OpKind::Discard,
        OpKind::WriteZeroes,
        OpKind::Flush,
        OpKind::Other,
    ];

    /// Stable name used in JSON.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Discard => "discard",
            OpKind::WriteZeroes => "write_zeroes",
            OpKind::Flush => "flush",
            OpKind::Other => "other",
        }
    }
}

/// Statistics of one kind of request.
#[derive(Default)]
pub struct OpStats {
    /// Completed requests.
    pub cmds: AtomicU64,
    /// Bytes moved (or discarded/zeroed).
    pub bytes: AtomicU64,
    /// Requests answered with an error status.
    pub errors: AtomicU64,
    /// Modelled latency (drive completion − submission).
    pub modelled: Histogram,
    /// Latency as delivered to the guest (used-ring write − submission).
    pub delivered: Histogram,
}

/// Per-kind figures for `ctl stats`.
#[derive(Debug, Clone, Serialize)]
pub struct OpReport {
    /// Completed requests.
    pub cmds: u64,
    /// Bytes.
    pub bytes: u64,
    /// Errors.
    pub errors: u64,
    /// Modelled latency percentiles.
    pub modelled: Summary,
    /// Delivered latency percentiles.
    pub delivered: Summary,
}

/// Everything the device counts outside the model.
#[derive(Default)]
pub struct Stats {
    ops: [OpStats; 6],
    /// Delivered − modelled completion time, ns (0 when on time or early).
    pub lateness: Histogram,
    /// Requests handed to the device and not yet completed to the guest.
    pub in_flight: AtomicU64,
    /// A frontend is connected.
    pub connected: AtomicBool,
    /// Frontend connections accepted since start.
    pub connections: AtomicU64,
    /// Requests rejected by validation (bad descriptors, ranges, types).
    pub rejected: AtomicU64,
}

impl Stats {
    /// Statistics of `op`.
    pub fn op(&self, op: OpKind) -> &OpStats {
        &self.ops[op as usize]
    }

    /// Record a completion delivered at `delivered_ns` (all times in the daemon clock).
    pub fn complete(
        &self,
        op: OpKind,
        bytes: u64,
        ok: bool,
        submit_ns: u64,
        due_ns: u64,
        delivered_ns: u64,
    ) {
        let s = self.op(op);
        s.cmds.fetch_add(1, Relaxed);
        s.bytes.fetch_add(bytes, Relaxed);
        if !ok {
            s.errors.fetch_add(1, Relaxed);
        }
        s.modelled.record(due_ns.saturating_sub(submit_ns));
        s.delivered.record(delivered_ns.saturating_sub(submit_ns));
        self.lateness.record(delivered_ns.saturating_sub(due_ns));
    }

    /// Forget latency figures and counts (after a secure erase).
    pub fn reset(&self) {
        for s in &self.ops {
            s.cmds.store(0, Relaxed);
            s.bytes.store(0, Relaxed);
            s.errors.store(0, Relaxed);
            s.modelled.reset();
            s.delivered.reset();
        }
        self.lateness.reset();
        self.rejected.store(0, Relaxed);
    }

    /// Per-kind report, keyed by [`OpKind::name`].
    pub fn ops_report(&self) -> Vec<(&'static str, OpReport)> {
        OpKind::ALL
            .iter()
            .map(|&k| {
                let s = self.op(k);
                (
                    k.name(),
                    OpReport {
                        cmds: s.cmds.load(Relaxed),
                        bytes: s.bytes.load(Relaxed),
                        errors: s.errors.load(Relaxed),
                        modelled: s.modelled.summary(),
                        delivered: s.delivered.summary(),
                    },
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_cover_values() {
        let mut last = 0;
        for v in (0..100_000u64).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let b = bucket_of(v);
            assert!(b < BUCKETS);
            assert!(b >= last || v > 100_000);
            last = b;
            assert!(bucket_high(b) >= v, "v={v} b={b} high={}", bucket_high(b));
            // Precision: the bucket's upper bound is within 12.5 % of v.
            if v >= 16 {
                assert!((bucket_high(b) - v) as f64 <= v as f64 / 8.0);
            }
        }
    }

    #[test]
    fn percentiles() {
        let h = Histogram::default();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.max_ns, 1_000_000);
        assert!((450_000..=560_000).contains(&s.p50_ns), "{s:?}");
        assert!((980_000..=1_000_000).contains(&s.p99_ns), "{s:?}");
        h.reset();
        assert_eq!(h.summary().count, 0);
        assert_eq!(h.quantile(0.5), 0);
    }
}
