//! Preconditioning: ageing the drive without data by driving the same
//! `submit` path at QD 32 in model time (`vssd ctl precondition`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::ssd::Ssd;
use super::{Op, Payload, Precondition, Request};

impl Ssd {
    /// Age the drive without data, driving the same submit path at QD 32 in
    /// model time from `now_ns`. Returns the model time when the last request
    /// completes. Random offsets come from `seed`.
    pub fn precondition(&mut self, now_ns: u64, step: &Precondition, seed: u64) -> u64 {
        let cap = self.capacity();
        let mut q = QdDriver::new(now_ns.max(self.last_now), 32);
        match *step {
            Precondition::FillSequential { bs } => {
                let bs = clamp_bs(bs, cap);
                let mut off = 0;
                while off < cap {
                    let len = bs.min(cap - off);
                    q.issue(self, Op::Write, off, len);
                    off += len;
                }
            }
            Precondition::Random { bs, amount } => {
                let bs = clamp_bs(bs, cap);
                let slots = cap / bs;
                let mut rng = SplitMix64(seed);
                for _ in 0..amount.div_ceil(bs) {
                    let off = rng.below(slots) * bs;
                    q.issue(self, Op::Write, off, bs);
                }
            }
            Precondition::TrimAll => q.issue(self, Op::Trim, 0, cap),
        }
        q.finish()
    }
}

fn clamp_bs(bs: u64, cap: u64) -> u64 {
    (bs.max(512) / 512 * 512).min(cap).max(512)
}

/// Issues requests keeping at most `qd` outstanding, each next one at the
/// earliest completion — how fio drives a queue.
struct QdDriver {
    now: u64,
    qd: usize,
    inflight: BinaryHeap<Reverse<u64>>,
    end: u64,
}

impl QdDriver {
    fn new(now: u64, qd: usize) -> QdDriver {
        QdDriver {
            now,
            qd,
            inflight: BinaryHeap::new(),
            end: now,
        }
    }

    fn issue(&mut self, ssd: &mut Ssd, op: Op, offset: u64, len: u64) {
        if self.inflight.len() >= self.qd
            && let Some(Reverse(t)) = self.inflight.pop()
        {
            self.now = self.now.max(t);
        }
        let req = Request {
            op,
            offset,
            len,
            payload: Payload::Unknown,
        };
        if let Ok(c) = ssd.submit(self.now, &req) {
            self.inflight.push(Reverse(c.done_ns));
            self.end = self.end.max(c.done_ns);
        }
    }

    fn finish(self) -> u64 {
        self.end
    }
}

/// SplitMix64: a tiny, fixed, seedable generator, so precondition results
/// never change with a dependency's version.
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by rejection-free multiply-shift.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}
