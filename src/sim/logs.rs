//! Logs collected while a job runs, in virtual time.
//!
//! Memory is bounded by what is logged: a job keeps its bandwidth series only
//! when it is to be written (or a library caller asks for it); otherwise only
//! the running statistics of the samples ([`SampleStats`]) are kept, for the
//! report's `bw_min`/`bw_max`/`bw_mean`/`bw_dev`/`bw_samples`. As in fio, an
//! interval in which a direction completed nothing has no entry, so a long
//! pause (`thinktime`, a stalled drive) costs nothing.

use super::jobfile::{Dir, SteadyState};
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

/// One line of a fio log (fio 3.33): `msec, value, direction, bs, [offset,] priority`.
/// Averaged entries have block size and offset 0, and priority is always 0.
fn log_line(out: &mut String, offset_col: bool, msec: u64, value: u64, dir: usize, bs: u64) {
    use std::fmt::Write as _;
    let _ = if offset_col {
        writeln!(out, "{msec}, {value}, {dir}, {bs}, 0, 0")
    } else {
        writeln!(out, "{msec}, {value}, {dir}, {bs}, 0")
    };
}

/// What the latency and IOPS logs of one job collect: per direction, the
/// I/Os and the sum of their latencies in the current `log_avg_msec` window.
#[derive(Debug)]
pub(crate) struct LatAcc {
    interval: u64,
    next_edge: u64,
    n: [u64; 3],
    sum_ns: [u128; 3],
    offset_col: bool,
    /// `_lat`, `_clat`, `_slat` texts when latency logs are written.
    pub(crate) lat: Option<[String; 3]>,
    /// `_iops` text when the IOPS log is written.
    pub(crate) iops: Option<String>,
}

impl LatAcc {
    pub(crate) fn new(interval_ns: u64, lat: bool, iops: bool, offset_col: bool) -> LatAcc {
        LatAcc {
            interval: interval_ns,
            next_edge: interval_ns,
            n: [0; 3],
            sum_ns: [0; 3],
            offset_col,
            lat: lat.then(Default::default),
            iops: iops.then(String::new),
        }
    }

    #[inline]
    pub(crate) fn add(&mut self, rel: u64, d: usize, lat_ns: u64) {
        if rel >= self.next_edge {
            self.emit(self.next_edge, self.interval);
            self.next_edge = (rel / self.interval + 1) * self.interval;
        }
        self.n[d] += 1;
        self.sum_ns[d] += lat_ns as u128;
    }

    fn emit(&mut self, edge: u64, dur: u64) {
        let msec = edge / 1_000_000;
        for d in 0..3 {
            let n = std::mem::take(&mut self.n[d]);
            let sum = std::mem::take(&mut self.sum_ns[d]);
            if n == 0 {
                continue;
            }
            if let Some([lat, clat, slat]) = self.lat.as_mut() {
                // fio logs the window's mean rounded to nearest; the simulator
                // has no submission latency, so total latency is completion latency.
                let mean = ((sum + n as u128 / 2) / n as u128) as u64;
                log_line(lat, self.offset_col, msec, mean, d, 0);
                log_line(clat, self.offset_col, msec, mean, d, 0);
                log_line(slat, self.offset_col, msec, 0, d, 0);
            }
            if let Some(iops) = self.iops.as_mut() {
                let v = (n as u128 * 1_000_000_000 / dur.max(1) as u128) as u64;
                log_line(iops, self.offset_col, msec, v, d, 0);
            }
        }
    }

    /// Close at the job's end `rel`: the last window is logged if it saw I/O
    /// (the IOPS entry only if it lasted at least a millisecond, like bandwidth).
    pub(crate) fn finish(&mut self, rel: u64) {
        if rel >= self.next_edge {
            self.emit(self.next_edge, self.interval);
            self.next_edge = (rel / self.interval + 1) * self.interval;
        }
        let dur = rel - (self.next_edge - self.interval);
        if dur < 1_000_000 {
            // Too short for a rate: latency entries only.
            let iops = self.iops.take();
            self.emit(rel, dur);
            self.iops = iops;
        } else {
            self.emit(rel, dur);
        }
    }
}

/// fio's completion-latency histogram log (`write_hist_log` with
/// `log_hist_msec`): at the first completion at least `log_hist_msec` after
/// the previous entry, one line with the bins gained since that entry.
#[derive(Debug)]
pub(crate) struct HistAcc {
    msec: u64,
    coarseness: u32,
    last: [Option<u64>; 3],
    prev: [Vec<u64>; 3],
    pub(crate) text: String,
}

impl HistAcc {
    pub(crate) fn new(msec: u64, coarseness: u32) -> HistAcc {
        HistAcc {
            msec,
            coarseness,
            last: [None; 3],
            prev: Default::default(),
            text: String::new(),
        }
    }

    /// A completion of direction `d` (block size `bs`) at `rel`; `h` is the
    /// direction's histogram with it already recorded.
    pub(crate) fn add(&mut self, rel: u64, d: usize, bs: u64, h: &super::hist::Histogram) {
        use std::fmt::Write as _;
        if self.msec == 0 {
            return;
        }
        let elapsed = rel / 1_000_000;
        let last = *self.last[d].get_or_insert(elapsed);
        let window = elapsed - last;
        if window < self.msec {
            return;
        }
        let bins = h.fio_bins();
        let prev = &mut self.prev[d];
        if prev.is_empty() {
            prev.resize(bins.len(), 0);
        }
        let _ = write!(self.text, "{elapsed}, {d}, {bs}");
        let stride = 1usize << self.coarseness;
        for (now, before) in bins.chunks(stride).zip(prev.chunks(stride)) {
            let gained: u64 = now.iter().sum::<u64>() - before.iter().sum::<u64>();
            let _ = write!(self.text, ", {gained}");
        }
        self.text.push('\n');
        *prev = bins;
        self.last[d] = Some(elapsed - (window - self.msec));
    }
}

/// fio's steady-state detection (`ss`, `ss_dur`, `ss_ramp`) for one job:
/// one IOPS and one bandwidth sample per second of virtual time (after the
/// ramp), a rolling window of `ss_dur` samples, and the criterion judged
/// each time a sample completes a full window.
#[derive(Debug, Clone)]
pub(crate) struct SsAcc {
    crit: SteadyState,
    dur: usize,
    /// First second (since the statistics started) whose sample counts.
    first_sec: u64,
    cur_sec: u64,
    ios: u64,
    bytes: u64,
    /// (IOPS, bytes/s), oldest first.
    window: std::collections::VecDeque<(u64, u64)>,
    pub(crate) attained: bool,
    pub(crate) criterion: f64,
    pub(crate) deviation: f64,
    pub(crate) slope: f64,
}

impl SsAcc {
    pub(crate) fn new(crit: SteadyState, dur_s: u64, ramp_ns: u64) -> SsAcc {
        SsAcc {
            crit,
            dur: dur_s as usize,
            first_sec: ramp_ns.div_ceil(1_000_000_000),
            cur_sec: 0,
            ios: 0,
            bytes: 0,
            window: std::collections::VecDeque::with_capacity(dur_s as usize),
            attained: false,
            criterion: 0.0,
            deviation: 0.0,
            slope: 0.0,
        }
    }

    /// An I/O of `len` bytes completed at `rel` ns after the statistics
    /// started; returns true when the job has reached steady state.
    pub(crate) fn add(&mut self, rel: u64, len: u64) -> bool {
        let sec = rel / 1_000_000_000;
        if sec > self.cur_sec && !self.attained {
            // Close the current second, then the empty ones up to `sec`
            // (at most a window's worth: older ones would fall out anyway).
            self.push(self.cur_sec, self.ios, self.bytes);
            let empty_from = (self.cur_sec + 1).max(sec.saturating_sub(self.dur as u64));
            for s in empty_from..sec {
                if self.attained {
                    break;
                }
                self.push(s, 0, 0);
            }
            self.cur_sec = sec;
            self.ios = 0;
            self.bytes = 0;
        }
        self.ios += 1;
        self.bytes += len;
        self.attained
    }

    fn push(&mut self, sec: u64, ios: u64, bytes: u64) {
        if sec < self.first_sec || self.attained {
            return;
        }
        if self.window.len() == self.dur {
            self.window.pop_front();
        }
        self.window.push_back((ios, bytes));
        if self.window.len() < self.dur {
            return;
        }
        let ys: Vec<f64> = self
            .window
            .iter()
            .map(|&(i, b)| if self.crit.kind.iops() { i } else { b } as f64)
            .collect();
        let n = ys.len() as f64;
        let mean = ys.iter().sum::<f64>() / n;
        let value = if self.crit.kind.slope() {
            let sx = n * (n - 1.0) / 2.0;
            let sxx = (n - 1.0) * n * (2.0 * n - 1.0) / 6.0;
            let sy: f64 = ys.iter().sum();
            let sxy: f64 = ys.iter().enumerate().map(|(x, y)| x as f64 * y).sum();
            self.slope = (sxy - sx * sy / n) / (sxx - sx * sx / n);
            self.slope
        } else {
            self.deviation = ys.iter().map(|y| (y - mean).abs()).fold(0.0, f64::max);
            self.deviation
        };
        self.criterion = if self.crit.pct {
            100.0 * value / mean
        } else {
            value
        };
        if self.criterion.abs() < self.crit.limit {
            self.attained = true;
        }
    }

    /// The window's samples, oldest first: (IOPS, bytes/s).
    pub(crate) fn samples(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.window.iter().copied()
    }
}
