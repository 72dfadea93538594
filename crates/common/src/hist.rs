//! Completion-latency histogram: log-linear buckets, like fio's and
//! HdrHistogram's. Values below 2^[`SUB_BITS`] ns have a bucket each; above,
//! every power of two is split into 2^`SUB_BITS` equal buckets, so a bucket is
//! at most 1/64 (1.6 %) of its value wide. Fixed size, no allocation per sample.
//!
//! [`Histogram`] is the simulator's and the load generator's (one owner,
//! exact mean and deviation, fio's bins); [`AtomicHistogram`] has the same
//! buckets and is recorded from any thread (the device's latencies).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Linear sub-buckets per power of two: 2^6 = 64.
pub const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Largest value kept exactly in range (larger values are clamped): 2^44 ns ≈ 4.9 hours.
const MAX_BITS: u32 = 44;
const GROUPS: usize = (MAX_BITS - SUB_BITS + 1) as usize;
const BUCKETS: usize = (GROUPS + 1) * SUB as usize;

/// fio's number of latency histogram bins (29 groups of 64).
pub const FIO_PLAT_NR: usize = 29 * 64;

/// A latency histogram with exact count, min, max, mean and standard deviation.
///
/// The buckets are allocated at the first sample, so a direction a job never
/// uses costs no bucket memory. After the buckets, one counter per
/// [`FIO_LAT_EDGES`] edge counts the samples at or above that edge in the
/// bucket that straddles it, so fio's latency distribution is exact.
#[derive(Clone)]
pub struct Histogram {
    /// Empty until the first sample, then `BUCKETS` + `FIO_LAT_EDGES.len()` long.
    counts: Box<[u64]>,
    n: u64,
    min: u64,
    max: u64,
    sum: u128,
    sum_sq: u128,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("n", &self.n)
            .field("min", &self.min)
            .field("max", &self.max)
            .field("mean", &self.mean())
            .finish()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

#[inline]
fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let group = (msb - SUB_BITS + 1) as u64;
    let sub = (v >> (msb - SUB_BITS)) & (SUB - 1);
    (group * SUB + sub) as usize
}

/// The range `[lo, hi)` of values in bucket `i`.
const fn bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, i + 1);
    }
    let group = i / SUB;
    let sub = i % SUB;
    let shift = group - 1;
    let lo = (SUB + sub) << shift;
    (lo, lo + (1 << shift))
}

/// The edges of fio's latency distribution (`latency_ns`, `latency_us`,
/// `latency_ms` in its JSON; fio 3.33's `io_u_mark_latency`), in ns: 32
/// ranges `[edge[i-1], edge[i])`, the first from 0, the last open-ended
/// (`">=2000"` ms). JSON keys name a range by its upper edge in its unit.
pub const FIO_LAT_EDGES: [u64; 31] = [
    2,
    4,
    10,
    20,
    50,
    100,
    250,
    500,
    750,
    1_000,
    2_000,
    4_000,
    10_000,
    20_000,
    50_000,
    100_000,
    250_000,
    500_000,
    750_000,
    1_000_000,
    2_000_000,
    4_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    750_000_000,
    1_000_000_000,
    2_000_000_000,
];

/// Number of ranges of fio's latency distribution.
pub const FIO_LAT_NR: usize = FIO_LAT_EDGES.len() + 1;

const NO_EDGE: u8 = u8::MAX;

/// For each bucket, the index of the [`FIO_LAT_EDGES`] edge strictly inside
/// it (the bucket straddles two ranges of fio's distribution), or `NO_EDGE`.
/// A bucket holds at most one edge: buckets are narrower than the gaps.
static SPLIT: [u8; BUCKETS] = split_table();

const fn split_table() -> [u8; BUCKETS] {
    let mut t = [NO_EDGE; BUCKETS];
    let mut i = 0;
    while i < BUCKETS {
        let (lo, hi) = bucket_range(i);
        let mut e = 0;
        while e < FIO_LAT_EDGES.len() {
            if lo < FIO_LAT_EDGES[e] && FIO_LAT_EDGES[e] < hi {
                t[i] = e as u8;
            }
            e += 1;
        }
        i += 1;
    }
    t
}

impl Histogram {
    /// Empty.
    pub fn new() -> Histogram {
        Histogram {
            counts: Box::new([]),
            n: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
            sum_sq: 0,
        }
    }

    #[cold]
    fn allocate(&mut self) {
        self.counts = vec![0; BUCKETS + FIO_LAT_EDGES.len()].into_boxed_slice();
    }

    /// Heap memory held, bytes.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.counts)
    }

    /// Record one latency in ns.
    #[inline]
    pub fn record(&mut self, v: u64) {
        let v = v.min((1u64 << MAX_BITS) - 1);
        let b = bucket_of(v);
        match self.counts.get_mut(b) {
            Some(c) => *c += 1,
            None => {
                // Only before the first sample: every bucket index is in range.
                self.allocate();
                self.counts[b] += 1;
            }
        }
        // Rarely true: only the ~20 buckets that hold an edge of fio's ranges.
        let s = SPLIT[b];
        if s != NO_EDGE && v >= FIO_LAT_EDGES[s as usize] {
            self.counts[BUCKETS + s as usize] += 1;
        }
        self.n += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += v as u128;
        self.sum_sq += (v as u128) * (v as u128);
    }

    /// Add another histogram's samples.
    pub fn merge(&mut self, o: &Histogram) {
        if o.counts.is_empty() {
            return;
        }
        if self.counts.is_empty() {
            self.allocate();
        }
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
        self.n += o.n;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.sum += o.sum;
        self.sum_sq += o.sum_sq;
    }

    /// The counts in fio's histogram bins (`FIO_IO_U_PLAT_NR` = 1856 of
    /// them, fio 3.33's `plat_val_to_idx`): the buckets are the same below
    /// 2^34 ns; fio keeps anything longer in its last bin.
    pub fn fio_bins(&self) -> Vec<u64> {
        let mut bins = vec![0u64; FIO_PLAT_NR];
        for (i, &c) in self.buckets().iter().enumerate() {
            bins[i.min(FIO_PLAT_NR - 1)] += c;
        }
        bins
    }

    /// The histogram's buckets (empty before the first sample).
    fn buckets(&self) -> &[u64] {
        &self.counts[..self.counts.len().min(BUCKETS)]
    }

    /// Samples per range of fio's latency distribution ([`FIO_LAT_EDGES`]):
    /// exact, from the buckets and the edge counters.
    pub fn fio_lat_counts(&self) -> [u64; FIO_LAT_NR] {
        let mut out = [0u64; FIO_LAT_NR];
        for (i, &c) in self.buckets().iter().enumerate() {
            if c == 0 {
                continue;
            }
            let (lo, _) = bucket_range(i);
            let range = FIO_LAT_EDGES.partition_point(|&e| e <= lo);
            match SPLIT[i] {
                NO_EDGE => out[range] += c,
                s => {
                    let above = self.counts[BUCKETS + s as usize];
                    out[range] += c - above;
                    out[range + 1] += above;
                }
            }
        }
        out
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Smallest sample (0 when empty).
    pub fn min(&self) -> u64 {
        if self.n == 0 { 0 } else { self.min }
    }

    /// Largest sample.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Exact mean (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }

    /// Exact sample standard deviation, fio's (`calc_lat`: the sum of squared
    /// deviations over n − 1).
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let n = self.n as u128;
        let nf = self.n as f64;
        // n·Σx² − (Σx)² is exact in integers when it fits; divide once at the end.
        match (n.checked_mul(self.sum_sq), self.sum.checked_mul(self.sum)) {
            (Some(a), Some(b)) => (((a - b) as f64) / (nf * (nf - 1.0))).sqrt(),
            _ => {
                let mean = self.mean();
                ((self.sum_sq as f64 - nf * mean * mean) / (nf - 1.0))
                    .max(0.0)
                    .sqrt()
            }
        }
    }

    /// The value at percentile `p` (0..=100), as fio computes it: the first
    /// bucket whose cumulative count reaches `p`% of the samples, reported as
    /// the bucket's midpoint, clamped to the exact min and max.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let target = (p / 100.0 * self.n as f64).max(1.0);
        let mut cum = 0u64;
        for (i, &c) in self.buckets().iter().enumerate() {
            if c == 0 {
                continue;
            }
            cum += c;
            if cum as f64 >= target {
                let (lo, hi) = bucket_range(i);
                let mid = lo + (hi - lo - 1) / 2;
                return mid.clamp(self.min, self.max);
            }
        }
        self.max
    }
}

/// A histogram with [`Histogram`]'s buckets that any thread records into
/// with relaxed atomic adds: the device's latency and lateness, shared by
/// every queue and connection. Keeps the count, sum and maximum exactly.
pub struct AtomicHistogram {
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
    max: AtomicU64,
}

impl Default for AtomicHistogram {
    fn default() -> Self {
        AtomicHistogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }
}

impl std::fmt::Debug for AtomicHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AtomicHistogram")
            .field("count", &self.count())
            .field("max", &self.max())
            .finish()
    }
}

impl AtomicHistogram {
    /// Record one value in ns: two atomic adds (the count is the buckets'
    /// sum; the maximum is only written when it grows).
    pub fn record(&self, v: u64) {
        let b = bucket_of(v.min((1u64 << MAX_BITS) - 1));
        self.buckets[b].fetch_add(1, Relaxed);
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

    fn counts(&self) -> Vec<u64> {
        self.buckets.iter().map(|b| b.load(Relaxed)).collect()
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Relaxed)).sum()
    }

    /// Sum of the values recorded (for a mean).
    pub fn sum(&self) -> u64 {
        self.sum.load(Relaxed)
    }

    /// Largest value recorded (exact).
    pub fn max(&self) -> u64 {
        self.max.load(Relaxed)
    }

    /// Value at quantile `q` (0..=1): the upper bound of the bucket holding
    /// it (within 1.6 % above the true value), at most the maximum.
    pub fn quantile(&self, q: f64) -> u64 {
        let counts = self.counts();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return (bucket_range(i).1 - 1).min(self.max());
            }
        }
        self.max()
    }

    /// Coarse buckets for export: `(upper bound, count)` for the values up
    /// to 2^lo - 1, then each power of two up to 2^hi - 1 ns (bucket
    /// boundaries here, so the counts are exact), then `(u64::MAX, rest)`.
    /// Per bucket, not cumulative.
    pub fn pow2_buckets(&self, lo: u32, hi: u32) -> Vec<(u64, u64)> {
        let counts = self.counts();
        let mut out = Vec::new();
        let mut i = 0usize;
        for e in lo.max(1)..=hi.min(MAX_BITS) {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_are_contiguous() {
        let mut prev_hi = 0;
        for i in 0..BUCKETS {
            let (lo, hi) = bucket_range(i);
            assert_eq!(lo, prev_hi, "bucket {i}");
            assert!(hi > lo);
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(hi - 1), i);
            prev_hi = hi;
        }
    }

    /// The buckets are fio's: fio 3.33's `plat_val_to_idx`, written out.
    #[test]
    fn buckets_are_fios() {
        fn fio_idx(v: u64) -> usize {
            let msb = if v == 0 { 0 } else { 63 - v.leading_zeros() };
            if msb <= 6 {
                return v as usize;
            }
            let error_bits = msb - 6;
            let base = (error_bits + 1) << 6;
            let offset = 63 & (v >> error_bits) as u32;
            ((base + offset) as usize).min(FIO_PLAT_NR - 1)
        }
        for v in (0..5000).chain((12..44).flat_map(|b| [(1u64 << b) - 1, 1 << b, (1 << b) + 12345]))
        {
            let mut h = Histogram::new();
            h.record(v);
            let bins = h.fio_bins();
            assert_eq!(bins[fio_idx(v)], 1, "{v}");
        }
    }

    #[test]
    fn stats() {
        let mut h = Histogram::new();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        assert_eq!(h.count(), 1000);
        assert_eq!(h.min(), 1000);
        assert_eq!(h.max(), 1_000_000);
        assert!((h.mean() - 500_500.0).abs() < 1e-6);
        // Sample standard deviation (n − 1), as fio's: sqrt(1000·1001/12) µs.
        assert!((h.stddev() - 288_819.02).abs() < 1.0, "{}", h.stddev());
        let p50 = h.percentile(50.0) as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.02, "{p50}");
        let p99 = h.percentile(99.0) as f64;
        assert!((p99 - 990_000.0).abs() / 990_000.0 < 0.02, "{p99}");
        assert_eq!(h.percentile(100.0), 1_000_000);
        let mut g = Histogram::new();
        g.record(5);
        g.merge(&h);
        assert_eq!((g.count(), g.min()), (1001, 5));
        assert_eq!(Histogram::new().percentile(50.0), 0);
    }

    /// fio 3.33's `io_u_mark_latency`, written out: the range of a latency.
    fn fio_lat_range(ns: u64) -> usize {
        fn idx(v: u64) -> usize {
            [2, 4, 10, 20, 50, 100, 250, 500, 750]
                .iter()
                .filter(|&&e| v >= e)
                .count()
        }
        if ns < 1000 {
            idx(ns)
        } else if ns < 1_000_000 {
            10 + idx(ns / 1000)
        } else {
            let ms = ns / 1_000_000;
            20 + if ms >= 2000 {
                11
            } else if ms >= 1000 {
                10
            } else {
                idx(ms)
            }
        }
    }

    #[test]
    fn fio_lat_counts_at_every_edge() {
        let mut h = Histogram::new();
        let mut want = [0u64; FIO_LAT_NR];
        for &e in &FIO_LAT_EDGES {
            for v in [e - 1, e, e + 1, e + e / 3] {
                h.record(v);
                want[fio_lat_range(v)] += 1;
            }
        }
        h.record(1 << 50);
        want[FIO_LAT_NR - 1] += 1;
        assert_eq!(h.fio_lat_counts(), want);
        let mut g = Histogram::new();
        g.merge(&h);
        g.merge(&h);
        assert_eq!(g.fio_lat_counts(), want.map(|c| 2 * c));
        assert_eq!(g.fio_bins().iter().sum::<u64>(), g.count());
    }

    proptest! {
        /// fio's latency distribution is exact, whatever the samples.
        #[test]
        fn fio_lat_counts_are_exact(vals in proptest::collection::vec(0u64..1u64 << 36, 0..300)) {
            let mut h = Histogram::new();
            let mut want = [0u64; FIO_LAT_NR];
            for &v in &vals {
                h.record(v);
                want[fio_lat_range(v)] += 1;
            }
            prop_assert_eq!(h.fio_lat_counts(), want);
        }

        /// Percentiles are within one bucket (1/64) of the exact order statistic.
        #[test]
        fn percentile_error_is_bounded(mut vals in proptest::collection::vec(1u64..1u64 << 40, 1..400), p in 0.0f64..100.0) {
            let mut h = Histogram::new();
            for &v in &vals { h.record(v); }
            vals.sort_unstable();
            let rank = ((p / 100.0 * vals.len() as f64).max(1.0).ceil() as usize).min(vals.len());
            let exact = vals[rank - 1] as f64;
            let got = h.percentile(p) as f64;
            prop_assert!((got - exact).abs() <= exact / 32.0 + 1.0, "p{} exact {} got {}", p, exact, got);
        }
    }

    #[test]
    fn atomic_histogram_percentiles_and_export() {
        let h = AtomicHistogram::default();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        assert_eq!(h.count(), 1000);
        assert_eq!(h.max(), 1_000_000);
        assert_eq!(h.sum(), 500_500_000);
        let p50 = h.quantile(0.5);
        assert!((500_000..=508_000).contains(&p50), "{p50}");
        let p99 = h.quantile(0.99);
        assert!((990_000..=1_000_000).contains(&p99), "{p99}");
        let b = h.pow2_buckets(10, 20);
        assert_eq!(b.iter().map(|x| x.1).sum::<u64>(), 1000);
        assert_eq!(b[0], (1023, 1), "1000 ns is below 2^10");
        assert_eq!(b.last().map(|x| x.0), Some(u64::MAX));
        // Same buckets as the single-owner histogram.
        let mut one = Histogram::new();
        for v in 1..=1000u64 {
            one.record(v * 1000);
        }
        assert_eq!(one.count(), h.count());
        h.reset();
        assert_eq!(h.count(), 0);
        assert_eq!(h.quantile(0.5), 0);
        h.record(u64::MAX);
        assert_eq!(h.max(), u64::MAX);
        assert_eq!(h.quantile(1.0), (1u64 << MAX_BITS) - 1);
    }
}
