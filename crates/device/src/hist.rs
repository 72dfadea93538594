//! Lock-free latency histograms.
//!
//! Log-linear buckets: 16 sub-buckets per power of two, so a reported
//! percentile (the upper bound of the bucket holding it) is within 6.25 %
//! of the true value; values below 32 ns are exact. Recording is a few
//! relaxed atomic adds, safe from any thread.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
const LINEAR: usize = 2 * SUB; // values below 32 get one bucket each
const BUCKETS: usize = LINEAR + (64 - (SUB_BITS as usize + 1)) * SUB;

/// A histogram of nanosecond values.
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }
}

fn bucket_of(v: u64) -> usize {
    if v < LINEAR as u64 {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= SUB_BITS + 1
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
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
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
    /// Record one value: two atomic adds (the count is the buckets' sum;
    /// the maximum is only written when it grows).
    pub fn record(&self, v: u64) {
        self.buckets[bucket_of(v)].fetch_add(1, Relaxed);
        self.sum.fetch_add(v, Relaxed);
        if v > self.max.load(Relaxed) {
            self.max.fetch_max(v, Relaxed);
        }
    }

    /// Forget everything.
    pub fn reset(&self) {
        for b in self.buckets.iter() {
            b.store(0, Relaxed);
        }
        self.sum.store(0, Relaxed);
        self.max.store(0, Relaxed);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Relaxed)).sum()
    }

    /// Coarse buckets for export: `(upper bound, count)` for the values up
    /// to 2^lo - 1, then each power of two up to 2^hi - 1 ns (bucket
    /// boundaries here, so the counts are exact), then `(u64::MAX, rest)`.
    /// Per bucket, not cumulative.
    pub fn pow2_buckets(&self, lo: u32, hi: u32) -> Vec<(u64, u64)> {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let mut out = Vec::new();
        let mut i = 0usize;
        for e in lo.max(1)..=hi.min(63) {
            // Values below 2^e: the buckets up to the one holding 2^e - 1.
            let bound = (1u64 << e) - 1;
            let last = bucket_of(bound);
            let mut n = 0;
            while i <= last {
                n += counts[i];
                i += 1;
            }
            out.push((bound, n));
        }
        out.push((u64::MAX, counts[i..].iter().sum()));
        out
    }

    /// Sum of the values recorded (for a mean).
    pub fn sum(&self) -> u64 {
        self.sum.load(Relaxed)
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
        let count = self.count();
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
            // Precision: the bucket's upper bound is within 6.25 % of v.
            if v >= LINEAR as u64 {
                assert!((bucket_high(b) - v) as f64 <= v as f64 / 16.0);
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
        let b = h.pow2_buckets(10, 20);
        assert_eq!(b.iter().map(|x| x.1).sum::<u64>(), 1000);
        assert_eq!(b[0], (1023, 1), "1000 ns is below 2^10");
        assert_eq!(b.last().unwrap().0, u64::MAX);
        h.reset();
        assert_eq!(h.summary().count, 0);
        assert_eq!(h.quantile(0.5), 0);
    }
}
