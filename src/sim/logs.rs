//! Logs collected while a job runs, in virtual time.

use super::jobfile::Dir;
use super::results::BwSample;

/// Bandwidth accumulation for one job.
#[derive(Debug)]
pub(crate) struct BwAcc {
    interval: u64,
    next_edge: u64,
    bytes: [u64; 3],
    dirs: &'static [Dir],
    bs: [u64; 3],
    pub(crate) samples: Vec<BwSample>,
}

impl BwAcc {
    /// A log of `interval_ns` intervals for the given directions and block sizes.
    pub(crate) fn new(interval_ns: u64, dirs: &'static [Dir], bs: [u64; 3]) -> BwAcc {
        BwAcc {
            interval: interval_ns,
            next_edge: interval_ns,
            bytes: [0; 3],
            dirs,
            bs,
            samples: Vec::new(),
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

    #[cold]
    fn roll(&mut self, rel: u64) {
        while rel >= self.next_edge {
            self.emit(self.next_edge, self.interval);
            self.next_edge += self.interval;
        }
    }

    fn emit(&mut self, edge: u64, dur: u64) {
        for &d in self.dirs {
            let b = std::mem::take(&mut self.bytes[d as usize]) as u128;
            let kib_s = (b * 1_000_000_000 / (dur as u128 * 1024)) as u64;
            self.samples.push(BwSample {
                msec: edge / 1_000_000,
                kib_s,
                dir: d,
                bs: self.bs[d as usize],
            });
        }
    }

    /// Close the log at `rel`: full intervals, then the partial last one if
    /// it is at least a millisecond long and saw I/O.
    pub(crate) fn finish(&mut self, rel: u64) {
        self.roll(rel);
        let start = self.next_edge - self.interval;
        let dur = rel - start;
        if dur >= 1_000_000 && self.bytes.iter().any(|&b| b > 0) {
            self.emit(rel, dur);
        }
    }
}
