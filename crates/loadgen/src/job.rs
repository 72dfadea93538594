//! What a load generator run does: the I/O pattern and its parameters.

use std::time::Duration;

use serde::Serialize;

/// The I/O pattern (fio's `rw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Uniformly random reads.
    Randread,
    /// Uniformly random writes.
    Randwrite,
    /// Uniformly random reads and writes (`--rwmixread` % reads).
    Randrw,
}

impl Rw {
    /// fio's name.
    pub fn name(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::Randread => "randread",
            Rw::Randwrite => "randwrite",
            Rw::Randrw => "randrw",
        }
    }

    /// Whether offsets are random.
    pub fn random(self) -> bool {
        matches!(self, Rw::Randread | Rw::Randwrite | Rw::Randrw)
    }

    /// Whether it writes at all.
    pub fn writes(self) -> bool {
        matches!(self, Rw::Write | Rw::Randwrite | Rw::Randrw)
    }

    /// Percentage of reads.
    pub fn read_percent(self, rwmixread: u8) -> u8 {
        match self {
            Rw::Read | Rw::Randread => 100,
            Rw::Write | Rw::Randwrite => 0,
            Rw::Randrw => rwmixread.min(100),
        }
    }
}

/// One run, all queues.
#[derive(Debug, Clone)]
pub struct Job {
    /// The pattern.
    pub rw: Rw,
    /// Reads in percent for `randrw`.
    pub rwmixread: u8,
    /// Block size, bytes (a multiple of 512).
    pub bs: u64,
    /// Requests in flight per queue.
    pub iodepth: u16,
    /// Queues, one thread each.
    pub queues: u16,
    /// Measured time.
    pub runtime: Duration,
    /// Time run before measuring.
    pub ramp: Duration,
    /// First byte of the region.
    pub offset: u64,
    /// Bytes of the region (split evenly between the queues).
    pub size: u64,
    /// Check data (see [`super::verify`]).
    pub verify: bool,
    /// Seed of the offsets and verify generations.
    pub seed: u64,
    /// Use indirect descriptors (when the backend offers them).
    pub indirect: bool,
    /// Requests per queue after which it stops (fio's `io_size` / bs).
    pub io_limit: Option<u64>,
}

impl Job {
    /// The byte range `[lo, hi)` of queue `q`: the region split evenly in
    /// whole blocks (fio's `offset_increment`), so queues never write the
    /// same block and `--verify` knows what each block holds.
    pub fn region(&self, q: u16) -> (u64, u64) {
        let blocks = self.size / self.bs;
        let per = blocks / u64::from(self.queues);
        let lo = self.offset + u64::from(q) * per * self.bs;
        (lo, lo + per * self.bs)
    }
}
