//! Logs collected while a job runs, in virtual time.
//!
//! Memory is bounded by what is logged: a job keeps its bandwidth series only
//! when it is to be written (or a library caller asks for it); otherwise only
//! the running statistics of fio's bandwidth and IOPS samples
//! ([`SampleStats`]) are kept, for the report's `bw_*` and `iops_*` keys. As
//! in fio, an interval in which a direction completed nothing has no entry,
//! so a long pause (`thinktime`, a stalled drive) costs nothing.

use super::jobfile::{Dir, SteadyState};
use super::results::BwSample;

/// fio's running statistics of a series of samples (its `struct io_stat`):
/// count, min, max, and Welford's mean and sum of squared deviations, updated
/// exactly as fio's `add_stat_sample` does, without keeping the samples.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SampleStats {
    n: u64,
    min: u64,
    max: u64,
    mean: f64,
    s: f64,
}

impl SampleStats {
    /// Add one sample.
    pub fn add(&mut self, v: u64) {
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        let val = v as f64;
        let delta = val - self.mean;
        if delta != 0.0 {
            self.mean += delta / (self.n as f64 + 1.0);
            self.s += delta * (val - self.mean);
        }
        self.n += 1;
    }

    /// Add another job's statistics the way fio's `group_reporting` does for
    /// bandwidth and IOPS (`sum_stat(..., pure_sum=true)`): counts, minima,
    /// maxima, means and squared deviations are each added up, so the mean
    /// is the group's aggregate rate.
    pub fn sum_for_group(&mut self, o: &SampleStats) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *o;
            return;
        }
        self.n += o.n;
        self.min += o.min;
        self.max += o.max;
        self.mean += o.mean;
        self.s += o.s;
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
        self.mean
    }

    /// Sample standard deviation, fio's: sqrt(S / (n − 1)), 0 with fewer
    /// than two samples.
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        (self.s / (self.n as f64 - 1.0)).max(0.0).sqrt()
    }
}

/// What a window's counts feed: fio's bandwidth samples, its IOPS samples,
/// the bandwidth series (log).
const BW_STAT: u8 = 1;
const IOPS_STAT: u8 = 2;
const BW_LOG: u8 = 4;

/// Bytes per direction in the current window of one interval (the I/Os
/// follow: every I/O of a direction has the job's block size for it).
#[derive(Debug, Clone)]
struct Window {
    interval: u64,
    next_edge: u64,
    roles: u8,
    bytes: [u64; 3],
}

/// Where a window's closed intervals go.
#[derive(Debug)]
struct Sinks {
    /// Intervals ending at or after this (the job's `runtime`, from the
    /// stats start) are not sampled: fio's helper thread races the job's
    /// exit there and usually loses.
    stat_end: u64,
    dirs: &'static [Dir],
    bs: [u64; 3],
    samples: Vec<BwSample>,
    bw: [SampleStats; 3],
    iops: [SampleStats; 3],
}

impl Window {
    fn new(interval: u64, roles: u8) -> Window {
        Window {
            interval,
            next_edge: interval,
            roles,
            bytes: [0; 3],
        }
    }

    #[inline]
    fn add(&mut self, rel: u64, d: usize, len: u64, out: &mut Sinks) {
        if rel >= self.next_edge {
            self.roll(rel, out);
        }
        self.bytes[d] += len;
    }

    /// Close the interval ending at `next_edge`; the intervals between it and
    /// `rel` saw no I/O and have no entry.
    #[cold]
    fn roll(&mut self, rel: u64, out: &mut Sinks) {
        self.emit(self.next_edge, self.interval, true, out);
        self.next_edge = (rel / self.interval + 1) * self.interval;
    }

    /// Hand the window's counts on. `full`: a whole interval, which fio's
    /// statistics sample (its helper thread never samples a job's last,
    /// partial interval); otherwise only the bandwidth series gets it.
    fn emit(&mut self, edge: u64, dur: u64, full: bool, out: &mut Sinks) {
        let ms = (dur / 1_000_000).max(1);
        let full = full && edge < out.stat_end;
        for &d in out.dirs {
            let d = d as usize;
            let b = std::mem::take(&mut self.bytes[d]);
            if b == 0 {
                continue;
            }
            let n = b / out.bs[d].max(1);
            if full && self.roles & BW_STAT != 0 {
                // fio's `__add_samples`: KiB/s over whole milliseconds.
                out.bw[d].add(b * 1000 / ms / 1024);
            }
            if full && self.roles & IOPS_STAT != 0 {
                out.iops[d].add(n * 1000 / ms);
            }
            if self.roles & BW_LOG != 0 {
                let kib_s = (b as u128 * 1_000_000_000 / (dur as u128 * 1024)) as u64;
                out.samples.push(BwSample {
                    msec: edge / 1_000_000,
                    kib_s,
                    dir: Dir::ALL[d],
                    bs: out.bs[d],
                });
            }
        }
    }

    /// Close at `rel`: full intervals, then, for the series, the partial
    /// last one if it is at least a millisecond long and saw I/O.
    fn finish(&mut self, rel: u64, out: &mut Sinks) {
        if rel >= self.next_edge {
            self.roll(rel, out);
        }
        if self.roles & BW_LOG == 0 {
            return;
        }
        let start = self.next_edge - self.interval;
        let dur = rel - start;
        if dur >= 1_000_000 && self.bytes.iter().any(|&b| b > 0) {
            self.emit(rel, dur, false, out);
        }
    }
}

/// Bandwidth and IOPS accumulation for one job: fio's bandwidth samples
/// (every `bwavgtime`), IOPS samples (every `iopsavgtime`) and, when kept,
/// the bandwidth series (every `log_avg_msec`). Intervals that coincide
/// share one window, so usually one window does it all.
#[derive(Debug)]
pub(crate) struct BwAcc {
    main: Window,
    more: Vec<Window>,
    out: Sinks,
}

impl BwAcc {
    /// Windows of `bw_ns` (bandwidth samples), `iops_ns` (IOPS samples) and,
    /// if the series is kept, `log_ns`, for the given directions and block
    /// sizes. Each interval is whole milliseconds. `runtime_ns`: the job's
    /// runtime limit, where sampling ends.
    pub(crate) fn new(
        bw_ns: u64,
        iops_ns: u64,
        log_ns: Option<u64>,
        runtime_ns: Option<u64>,
        dirs: &'static [Dir],
        bs: [u64; 3],
    ) -> BwAcc {
        let mut main = Window::new(bw_ns, BW_STAT);
        // Allocated only when the intervals differ.
        let mut more: Vec<Window> = Vec::new();
        for (interval, role) in [(Some(iops_ns), IOPS_STAT), (log_ns, BW_LOG)] {
            let Some(interval) = interval else { continue };
            match std::iter::once(&mut main)
                .chain(more.iter_mut())
                .find(|w| w.interval == interval)
            {
                Some(w) => w.roles |= role,
                None => more.push(Window::new(interval, role)),
            }
        }
        BwAcc {
            main,
            more,
            out: Sinks {
                stat_end: runtime_ns.unwrap_or(u64::MAX),
                dirs,
                bs,
                samples: Vec::new(),
                bw: Default::default(),
                iops: Default::default(),
            },
        }
    }

    /// `len` bytes of direction `d` completed at `rel` ns after the stats start.
    #[inline]
    pub(crate) fn add(&mut self, rel: u64, d: usize, len: u64) {
        self.main.add(rel, d, len, &mut self.out);
        for w in &mut self.more {
            w.add(rel, d, len, &mut self.out);
        }
    }

    /// Close every window at the job's end `rel`.
    pub(crate) fn finish(&mut self, rel: u64) {
        self.main.finish(rel, &mut self.out);
        for w in &mut self.more {
            w.finish(rel, &mut self.out);
        }
    }

    /// The bandwidth series (empty unless kept), and the statistics of fio's
    /// bandwidth (KiB/s) and IOPS samples by direction.
    pub(crate) fn into_parts(self) -> (Vec<BwSample>, [SampleStats; 3], [SampleStats; 3]) {
        (self.out.samples, self.out.bw, self.out.iops)
    }

    #[cfg(test)]
    /// Heap memory held, bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.out.samples.capacity() * std::mem::size_of::<BwSample>()
            + self.more.capacity() * std::mem::size_of::<Window>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_follow_fio() {
        let v = [5u64, 9, 1, 7, 7, 3];
        let mut s = SampleStats::default();
        for &x in &v {
            s.add(x);
        }
        let n = v.len() as f64;
        let mean = v.iter().sum::<u64>() as f64 / n;
        // fio's calc_lat: sample variance, over n − 1.
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0);
        assert_eq!((s.count(), s.min(), s.max()), (6, 1, 9));
        assert!((s.mean() - mean).abs() < 1e-12);
        assert!((s.stddev() - var.sqrt()).abs() < 1e-12);
        // group_reporting adds everything up.
        let mut a = SampleStats::default();
        a.sum_for_group(&s);
        a.sum_for_group(&SampleStats::default());
        assert_eq!(a, s);
        a.sum_for_group(&s);
        assert_eq!((a.count(), a.min(), a.max()), (12, 2, 18));
        assert!((a.mean() - 2.0 * mean).abs() < 1e-12);
    }

    #[test]
    fn idle_intervals_have_no_entry_and_cost_nothing() {
        const S: u64 = 1_000_000_000;
        let mut b = BwAcc::new(S, S, Some(S), None, &[Dir::Read], [4096, 0, 0]);
        b.add(S / 2, 0, 4096);
        // A billion seconds later, one more I/O, then the end.
        b.add(S * 1_000_000_000, 0, 4096);
        b.finish(S * 1_000_000_000 + S / 2);
        let (samples, bw, iops) = b.into_parts();
        let msecs: Vec<u64> = samples.iter().map(|s| s.msec).collect();
        assert_eq!(msecs, [1000, 1_000_000_000_500]);
        // fio samples whole intervals only: the last, partial one is logged
        // but not in the statistics.
        assert_eq!((bw[0].count(), iops[0].count()), (1, 1));
        assert_eq!((bw[0].max(), iops[0].max()), (4, 1));
    }

    #[test]
    fn separate_windows_for_separate_intervals() {
        const MS: u64 = 1_000_000;
        // Bandwidth every 500 ms, IOPS every 250 ms, log every 1000 ms; one
        // 4 KiB write every 10 ms for 2.1 s.
        let mut b = BwAcc::new(
            500 * MS,
            250 * MS,
            Some(1000 * MS),
            None,
            &[Dir::Write],
            [0, 4096, 0],
        );
        for i in 1..=210 {
            b.add(i * 10 * MS, 1, 4096);
        }
        b.finish(2100 * MS);
        let (samples, bw, iops) = b.into_parts();
        assert_eq!(samples.len(), 3, "two full seconds and the partial tail");
        assert_eq!(bw[1].count(), 4);
        assert_eq!(iops[1].count(), 8);
        // 100 I/Os per second: 400 KiB/s, 100 IOPS (the first windows miss
        // the I/O at 0 ms, so they are a little lower).
        assert_eq!((bw[1].max(), iops[1].max()), (400, 100));
        assert_eq!((bw[1].min(), iops[1].min()), (392, 96));
    }

    #[test]
    fn no_sample_for_the_interval_that_ends_with_the_runtime() {
        const MS: u64 = 1_000_000;
        // runtime=2s: the I/O that completes just after it closes the fourth
        // window, which fio's helper thread usually finds the job gone for.
        let mut b = BwAcc::new(
            500 * MS,
            500 * MS,
            None,
            Some(2000 * MS),
            &[Dir::Read],
            [4096, 0, 0],
        );
        for i in 1..=201 {
            b.add(i * 10 * MS, 0, 4096);
        }
        b.finish(2010 * MS);
        let (_, bw, iops) = b.into_parts();
        assert_eq!((bw[0].count(), iops[0].count()), (3, 3));
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
    pub(crate) fn add(&mut self, rel: u64, d: usize, bs: u64, h: &vssd_common::hist::Histogram) {
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
