//! Preconditioning: ageing the drive without data by driving the same
//! `submit` path at QD 32 in model time (`vssd ctl precondition`).
//!
//! A [`PreconditionRun`] does it a bounded number of requests at a time, so
//! a daemon can release the model between chunks (guest I/O and control
//! requests go through), report progress and cancel. Chunks change nothing:
//! a run advanced one request at a time leaves exactly the state a single
//! call leaves.
//!
//! Every request is bounded so that one request is never a long stall: a
//! write is at most [`MAX_REQUEST_BYTES`], and TRIM-all is a series of
//! TRIMs of [`TRIM_PIECE_UNITS`] mapping units each (as an OS splits a
//! whole-device discard), each costing the model about as much work as a
//! few writes with GC. A single TRIM of a full 1 TiB drive would take the
//! model seconds.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::ssd::Ssd;
use super::{ModelError, Op, Payload, Precondition, Request};

/// Queue depth of preconditioning, as the published protocols use.
const QD: usize = 32;

/// Largest precondition write: a larger `bs` is clamped to it.
pub const MAX_REQUEST_BYTES: u64 = 16 << 20;

/// Mapping units per TRIM of a TRIM-all step (64 MiB with 4 KiB units).
pub const TRIM_PIECE_UNITS: u64 = 16384;

/// Where a [`PreconditionRun`] stands after [`PreconditionRun::advance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of the requests issued so far (all steps).
    pub done_bytes: u64,
    /// Bytes of all the requests the run issues.
    pub total_bytes: u64,
    /// Model time the run has reached: while running, when its next request
    /// is issued; once finished, when its last request completes. A caller
    /// that lets other requests through between chunks moves its model
    /// clock to at least this, as after a one-shot precondition.
    pub model_now_ns: u64,
    /// Every request is issued and the run's end time is final.
    pub finished: bool,
}

/// A resumable precondition: `steps` in order, step `i` drawing its random
/// offsets from `seed + i`, each step starting when the previous one's last
/// request completes (QD 32, the same `submit` path as the host).
///
/// Dropping a run part-way (cancel) leaves the drive aged as far as the run
/// went: every request issued is complete in the model.
#[derive(Debug, Clone)]
pub struct PreconditionRun {
    steps: Vec<Precondition>,
    seed: u64,
    cap: u64,
    trim_piece: u64,
    next_step: usize,
    cur: Option<StepRun>,
    /// Start of the next step: the end of the previous one.
    now: u64,
    done_bytes: u64,
    total_bytes: u64,
}

impl PreconditionRun {
    /// A run of `steps` on `ssd` from model time `now_ns`.
    pub fn new(ssd: &Ssd, now_ns: u64, steps: &[Precondition], seed: u64) -> PreconditionRun {
        let cap = ssd.capacity();
        let total_bytes = steps
            .iter()
            .map(|s| match *s {
                Precondition::FillSequential { .. } | Precondition::TrimAll => cap,
                Precondition::Random { bs, amount } => {
                    let bs = clamp_bs(bs, cap);
                    amount.div_ceil(bs).saturating_mul(bs)
                }
            })
            .fold(0u64, u64::saturating_add);
        PreconditionRun {
            steps: steps.to_vec(),
            seed,
            cap,
            trim_piece: TRIM_PIECE_UNITS * ssd.geo.unit_bytes,
            next_step: 0,
            cur: None,
            now: now_ns,
            done_bytes: 0,
            total_bytes,
        }
    }

    /// Issue at most `budget_ios` more requests (at least one) to `ssd`.
    ///
    /// An error is the model's ([`ModelError::Internal`]: the drive is
    /// damaged); the run stops there.
    pub fn advance(&mut self, ssd: &mut Ssd, budget_ios: u64) -> Result<Progress, ModelError> {
        let mut left = budget_ios.max(1);
        self.advance_while(ssd, || {
            left -= 1;
            left > 0
        })
    }

    /// Issue requests to `ssd` until `more()`, asked after each request,
    /// returns false (at least one request). A daemon can bound a chunk by
    /// its own clock this way; the model itself never reads one, and the
    /// result of the whole run does not depend on where chunks end.
    pub fn advance_while(
        &mut self,
        ssd: &mut Ssd,
        mut more: impl FnMut() -> bool,
    ) -> Result<Progress, ModelError> {
        let mut go = true;
        loop {
            if let Some(cur) = &self.cur
                && cur.exhausted()
            {
                self.now = cur.q.end.max(self.now);
                self.cur = None;
            }
            let cur = match &mut self.cur {
                Some(cur) => cur,
                None => {
                    let Some(&step) = self.steps.get(self.next_step) else {
                        break;
                    };
                    let seed = self.seed.wrapping_add(self.next_step as u64);
                    self.next_step += 1;
                    let start = self.now.max(ssd.timelines.now());
                    self.cur
                        .insert(StepRun::new(step, self.cap, self.trim_piece, seed, start))
                }
            };
            if !go {
                break;
            }
            if let Some((op, offset, len)) = cur.next_request() {
                cur.q.issue(ssd, op, offset, len)?;
                self.done_bytes += len;
                go = more();
            }
        }
        Ok(self.progress())
    }

    /// Where the run stands.
    pub fn progress(&self) -> Progress {
        let finished = self.cur.is_none() && self.next_step == self.steps.len();
        Progress {
            done_bytes: self.done_bytes,
            total_bytes: self.total_bytes,
            model_now_ns: match &self.cur {
                Some(cur) => cur.q.now,
                None => self.now,
            },
            finished,
        }
    }
}

/// One step in progress.
#[derive(Debug, Clone)]
struct StepRun {
    kind: StepKind,
    cap: u64,
    trim_piece: u64,
    q: QdDriver,
}

#[derive(Debug, Clone)]
enum StepKind {
    Fill {
        bs: u64,
        off: u64,
    },
    Random {
        bs: u64,
        slots: u64,
        left: u64,
        rng: SplitMix64,
    },
    Trim {
        off: u64,
    },
}

impl StepRun {
    fn new(step: Precondition, cap: u64, trim_piece: u64, seed: u64, start: u64) -> StepRun {
        let kind = match step {
            Precondition::FillSequential { bs } => StepKind::Fill {
                bs: clamp_bs(bs, cap),
                off: 0,
            },
            Precondition::Random { bs, amount } => {
                let bs = clamp_bs(bs, cap);
                StepKind::Random {
                    bs,
                    slots: cap / bs,
                    left: amount.div_ceil(bs),
                    rng: SplitMix64(seed),
                }
            }
            Precondition::TrimAll => StepKind::Trim { off: 0 },
        };
        StepRun {
            kind,
            cap,
            trim_piece,
            q: QdDriver::new(start, QD),
        }
    }

    fn exhausted(&self) -> bool {
        match self.kind {
            StepKind::Fill { off, .. } | StepKind::Trim { off } => off >= self.cap,
            StepKind::Random { left, .. } => left == 0,
        }
    }

    /// The step's next request, or None when it has issued them all.
    fn next_request(&mut self) -> Option<(Op, u64, u64)> {
        let cap = self.cap;
        match &mut self.kind {
            StepKind::Fill { bs, off } => {
                if *off >= cap {
                    return None;
                }
                let len = (*bs).min(cap - *off);
                let o = *off;
                *off += len;
                Some((Op::Write, o, len))
            }
            StepKind::Random {
                bs,
                slots,
                left,
                rng,
            } => {
                if *left == 0 {
                    return None;
                }
                *left -= 1;
                Some((Op::Write, rng.below(*slots) * *bs, *bs))
            }
            StepKind::Trim { off } => {
                if *off >= cap {
                    return None;
                }
                // Pieces start on unit boundaries, so together they unmap
                // exactly what one TRIM of the whole drive would.
                let len = self.trim_piece.min(cap - *off);
                let o = *off;
                *off += len;
                Some((Op::Trim, o, len))
            }
        }
    }
}

impl Ssd {
    /// Age the drive without data, driving the same submit path at QD 32 in
    /// model time from `now_ns`. Returns the model time when the last request
    /// completes. Random offsets come from `seed`.
    ///
    /// One step in one call: a [`PreconditionRun`] does the same in bounded
    /// chunks. Should the model find itself damaged ([`Ssd::damaged`]), the
    /// step stops there.
    pub fn precondition(&mut self, now_ns: u64, step: &Precondition, seed: u64) -> u64 {
        let mut run = PreconditionRun::new(self, now_ns, std::slice::from_ref(step), seed);
        match run.advance(self, u64::MAX) {
            Ok(p) => p.model_now_ns,
            Err(_) => run.progress().model_now_ns,
        }
    }
}

fn clamp_bs(bs: u64, cap: u64) -> u64 {
    // Whole sectors, at least one, at most the drive and MAX_REQUEST_BYTES.
    (bs.max(512) / 512 * 512).min(cap.clamp(512, MAX_REQUEST_BYTES))
}

/// Issues requests keeping at most `qd` outstanding, each next one at the
/// earliest completion — how fio drives a queue.
#[derive(Debug, Clone)]
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

    fn issue(&mut self, ssd: &mut Ssd, op: Op, offset: u64, len: u64) -> Result<(), ModelError> {
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
        let c = ssd.submit(self.now, &req)?;
        self.inflight.push(Reverse(c.done_ns));
        self.end = self.end.max(c.done_ns);
        Ok(())
    }
}

/// SplitMix64: a tiny, fixed, seedable generator, so precondition results
/// never change with a dependency's version.
#[derive(Debug, Clone)]
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proptests::tiny;

    fn steps(cap: u64) -> Vec<Precondition> {
        vec![
            Precondition::FillSequential { bs: 64 << 10 },
            Precondition::Random {
                bs: 4096,
                amount: cap * 3,
            },
            Precondition::TrimAll,
            Precondition::Random {
                bs: 16384,
                amount: cap + 5000,
            },
            Precondition::Random {
                bs: 4096,
                amount: 0,
            },
        ]
    }

    /// Everything the model holds, timelines and queues included.
    fn fingerprint(ssd: &Ssd) -> String {
        format!("{ssd:?}")
    }

    #[test]
    fn chunks_leave_exactly_the_state_of_one_call() {
        let p = tiny("8KiB", "4KiB", 2, "128KiB", "cost-benefit", 5.0);
        let fresh = Ssd::new(&p, 1);
        let cap = fresh.capacity();
        let steps = steps(cap);

        // What the daemon did before runs existed: one call per step.
        let mut old = fresh.clone();
        let mut now = 1_000;
        for (i, s) in steps.iter().enumerate() {
            now = old
                .precondition(now, s, 42u64.wrapping_add(i as u64))
                .max(now);
        }

        for budget in [1, 7, 1000, u64::MAX] {
            let mut ssd = fresh.clone();
            let mut run = PreconditionRun::new(&ssd, 1_000, &steps, 42);
            let mut last = run.progress();
            assert!(!last.finished);
            let mut calls = 0;
            while !last.finished {
                let p = run.advance(&mut ssd, budget).unwrap();
                assert!(p.done_bytes >= last.done_bytes);
                assert!(p.model_now_ns >= last.model_now_ns);
                assert!(p.done_bytes <= p.total_bytes);
                last = p;
                calls += 1;
            }
            assert_eq!(last.done_bytes, last.total_bytes);
            assert_eq!(last.model_now_ns, now, "budget {budget}");
            assert_eq!(ssd.counters(), old.counters(), "budget {budget}");
            assert_eq!(fingerprint(&ssd), fingerprint(&old), "budget {budget}");
            let (mut a, mut b) = (Vec::new(), Vec::new());
            ssd.save(&mut a).unwrap();
            old.save(&mut b).unwrap();
            assert_eq!(a, b);
            if budget == 1 {
                assert!(calls > 100, "{calls} calls");
            }
            // A finished run stays finished and issues nothing more.
            assert_eq!(run.advance(&mut ssd, 10).unwrap(), last);
        }
    }

    #[test]
    fn other_requests_between_chunks_and_cancel() {
        let p = tiny("4KiB", "4KiB", 1, "64KiB", "greedy", 1.0);
        let mut ssd = Ssd::new(&p, 1);
        let cap = ssd.capacity();
        let mut run = PreconditionRun::new(&ssd, 0, &steps(cap), 9);
        for i in 0..20u64 {
            let p = run.advance(&mut ssd, 16).unwrap();
            // A host request between chunks, at the run's clock.
            let r = Request {
                op: if i % 2 == 0 { Op::Read } else { Op::Write },
                offset: (i * 4096) % cap,
                len: 4096,
                payload: Payload::Unknown,
            };
            ssd.submit(p.model_now_ns, &r).unwrap();
        }
        let p = run.progress();
        assert!(!p.finished && p.done_bytes > 0);
        drop(run); // cancel: the drive keeps what was done
        ssd.check_invariants().unwrap();
        let c = ssd.counters();
        assert!(c.host_written_bytes + c.host_trimmed_bytes >= p.done_bytes);
    }

    #[test]
    fn a_damaged_model_stops_the_run() {
        let p = tiny("4KiB", "4KiB", 1, "64KiB", "greedy", 0.0);
        let mut ssd = Ssd::new(&p, 1);
        for d in 0..ssd.geo.dies as usize {
            ssd.blocks.free_list_mut(d).clear();
        }
        let cap = ssd.capacity();
        let mut run = PreconditionRun::new(&ssd, 0, &steps(cap), 9);
        let e = run.advance(&mut ssd, 100).unwrap_err();
        assert!(matches!(e, ModelError::Internal { .. }));
        assert!(!run.progress().finished);
        // The one-shot form returns, and the drive says it is damaged.
        ssd.precondition(0, &Precondition::FillSequential { bs: 4096 }, 1);
        assert!(ssd.damaged().is_some());
    }
}
