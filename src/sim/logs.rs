//! Logs collected while a job runs, in virtual time.
//!
//! Memory is bounded by what is logged: a job keeps its bandwidth series only
//! when it is to be written (or a library caller asks for it); otherwise only
//! the running statistics of the samples ([`SampleStats`]) are kept, for the
//! report's `bw_min`/`bw_max`/`bw_mean`/`bw_dev`/`bw_samples`. As in fio, an
//! interval in which a direction completed nothing has no entry, so a long
//! pause (`thinktime`, a stalled drive) costs nothing.

use super::jobfile::Dir;
use super::results::BwSample;

/// Count, min, max, mean and standard deviation of a series of samples,
/// without keeping the samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleStats {
    n: u64,
    min: u64,
    max: u64,
    sum: u128,
    sum_sq: u128,
}

impl SampleStats {
    /// Add one sample.
    pub fn add(&mut self, v: u64) {
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.n += 1;
        self.sum += v as u128;
        self.sum_sq += (v as u128) * (v as u128);
    }

    /// Add another series' samples.
    pub fn merge(&mut self, o: &SampleStats) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 || o.min < self.min {
            self.min = o.min;
        }
        self.max = self.max.max(o.max);
        self.n += o.n;
        self.sum += o.sum;
        self.sum_sq += o.sum_sq;
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Smallest sample (0 when empty).
    pub fn min(&self) -> u64 {
        self.min
    }

    /// Largest sample (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Mean (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }

    /// Population standard deviation (0 with fewer than two samples).
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let n = self.n as u128;
        match (n.checked_mul(self.sum_sq), self.sum.checked_mul(self.sum)) {
            (Some(a), Some(b)) => ((a.saturating_sub(b)) as f64 / (n as f64 * n as f64)).sqrt(),
            _ => {
                let m = self.mean();
                (self.sum_sq as f64 / self.n as f64 - m * m).max(0.0).sqrt()
            }
        }
    }
}

/// Bandwidth accumulation for one job.
#[derive(Debug)]
pub(crate) struct BwAcc {
    interval: u64,
    next_edge: u64,
    bytes: [u64; 3],
    dirs: &'static [Dir],
    bs: [u64; 3],
    keep: bool,
    pub(crate) samples: Vec<BwSample>,
    pub(crate) stats: [SampleStats; 3],
}

impl BwAcc {
    /// A log of `interval_ns` intervals for the given directions and block
    /// sizes; `keep` keeps the series, not only its statistics.
    pub(crate) fn new(interval_ns: u64, dirs: &'static [Dir], bs: [u64; 3], keep: bool) -> BwAcc {
        BwAcc {
            interval: interval_ns,
            next_edge: interval_ns,
            bytes: [0; 3],
            dirs,
            bs,
            keep,
            samples: Vec::new(),
            stats: Default::default(),
        }
    }

    /// `len` bytes of direction `d` completed at `rel` ns after the stats start.
    #[inline]
    pub(crate) fn add(&mut self, rel: u64, d: usize, len: u64) {
        if rel >= self.next_edge {
            self.roll(rel);
        }
        self.bytes[d] += len;
    }

    /// Close the interval ending at `next_edge`; the intervals between it and
    /// `rel` saw no I/O and have no entry.
    #[cold]
    fn roll(&mut self, rel: u64) {
        self.emit(self.next_edge, self.interval);
        self.next_edge = (rel / self.interval + 1) * self.interval;
    }

    fn emit(&mut self, edge: u64, dur: u64) {
        for &d in self.dirs {
            let b = std::mem::take(&mut self.bytes[d as usize]) as u128;
            if b == 0 {
                continue;
            }
            let kib_s = (b * 1_000_000_000 / (dur as u128 * 1024)) as u64;
            self.stats[d as usize].add(kib_s);
            if self.keep {
                self.samples.push(BwSample {
                    msec: edge / 1_000_000,
                    kib_s,
                    dir: d,
                    bs: self.bs[d as usize],
                });
            }
        }
    }

    /// Close the log at `rel`: full intervals, then the partial last one if
    /// it is at least a millisecond long and saw I/O.
    pub(crate) fn finish(&mut self, rel: u64) {
        if rel >= self.next_edge {
            self.roll(rel);
        }
        let start = self.next_edge - self.interval;
        let dur = rel - start;
        if dur >= 1_000_000 && self.bytes.iter().any(|&b| b > 0) {
            self.emit(rel, dur);
        }
    }

    #[cfg(test)]
    /// Heap memory held, bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.samples.capacity() * std::mem::size_of::<BwSample>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_match_direct_computation() {
        let v = [5u64, 9, 1, 7, 7, 3];
        let mut s = SampleStats::default();
        for &x in &v {
            s.add(x);
        }
        let n = v.len() as f64;
        let mean = v.iter().sum::<u64>() as f64 / n;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        assert_eq!((s.count(), s.min(), s.max()), (6, 1, 9));
        assert!((s.mean() - mean).abs() < 1e-12);
        assert!((s.stddev() - var.sqrt()).abs() < 1e-12);
        let mut a = SampleStats::default();
        a.merge(&s);
        a.merge(&SampleStats::default());
        assert_eq!(a, s);
    }

    #[test]
    fn idle_intervals_have_no_entry_and_cost_nothing() {
        const S: u64 = 1_000_000_000;
        let mut b = BwAcc::new(S, &[Dir::Read], [4096, 0, 0], true);
        b.add(S / 2, 0, 4096);
        // A billion seconds later, one more I/O, then the end.
        b.add(S * 1_000_000_000, 0, 4096);
        b.finish(S * 1_000_000_000 + S / 2);
        let msecs: Vec<u64> = b.samples.iter().map(|s| s.msec).collect();
        assert_eq!(msecs, [1000, 1_000_000_000_500]);
        assert_eq!(b.stats[0].count(), 2);
    }
}
