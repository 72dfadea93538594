//! Power loss (`vssd ctl power-cut`): which acknowledged writes a cut
//! loses, and the undo record that takes the store back to what the drive
//! shows after the cut.
//!
//! A drive without power-loss protection loses what it acknowledged from
//! its write buffer but had not programmed: vssd keeps, for every write
//! (and write-zeroes that writes) not yet durable, its range, when it was
//! submitted and acknowledged, and the previous contents of its range. A
//! write is durable once its data and the data of every host write placed
//! before it are programmed ([`vssd_model::Ssd::durability`]): the FTL
//! commits mapping updates in order, so what a cut loses is always the
//! most recent writes, and a FLUSH (which programs everything buffered)
//! or a FUA write makes everything before it durable. On a cut, the lost
//! writes are undone newest first, so the store holds what was there
//! before them: the old data, as a drive whose mapping update never
//! happened shows it.
//!
//! A discard (or write-zeroes with unmap) is a mapping update that vssd
//! treats as durable at once: the parts of pending writes it covers are
//! no longer audited (their data is gone either way).
//!
//! The record is bounded ([`MAX_RECORDS`], [`MAX_UNDO_BYTES`]); a drive's
//! write buffer bounds what is pending, so the bounds are reached only
//! when writes stay in open dpages for long. Beyond them the oldest
//! pending writes are treated as durable and counted as `untracked`.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use vssd_model::Durability;

/// Most pending writes kept.
pub const MAX_RECORDS: usize = 1 << 16;
/// Most bytes of previous contents kept.
pub const MAX_UNDO_BYTES: u64 = 512 << 20;
/// Most writes `--after-writes` (and `--random`) may wait for.
pub const MAX_AFTER_WRITES: u64 = 1 << 40;

/// When a cut happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "when", rename_all = "kebab-case", deny_unknown_fields)]
pub enum CutTrigger {
    /// At once.
    Now,
    /// As the `writes`-th write from now arrives (it is executed, then the
    /// power goes at its submission, so it is never acknowledged).
    AfterWrites {
        /// 1 = the next write.
        writes: u64,
    },
    /// At `ms` of drive time from now (taking effect at the next request
    /// or the next second's sample, with what was durable at that time).
    AfterMs {
        /// Drive time, ms.
        ms: u64,
    },
    /// After a number of writes (1 ..= 1000) picked from `seed`.
    Random {
        /// The seed.
        seed: u64,
    },
}

/// A cut waiting for its moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "when", rename_all = "kebab-case")]
pub enum Armed {
    /// After this many more writes.
    AfterWrites {
        /// Writes still to come, the last one included.
        writes: u64,
    },
    /// At this drive time.
    At {
        /// Drive time, ns.
        model_ns: u64,
    },
}

/// One write a cut lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostWrite {
    /// Byte offset.
    pub offset: u64,
    /// Bytes.
    pub length: u64,
    /// Drive time it was submitted, ns.
    pub submitted_model_ns: u64,
    /// Drive time it was (or would have been) acknowledged, ns.
    pub acked_model_ns: u64,
    /// Whether it was acknowledged before the cut (otherwise its
    /// completion was still due when the power went).
    pub acknowledged: bool,
}

/// What a cut did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CutReport {
    /// Drive time of the cut, ns.
    pub model_ns: u64,
    /// What set it off.
    pub trigger: String,
    /// The drive had power-loss protection: nothing was lost.
    pub protected: bool,
    /// The writes lost, oldest first.
    pub lost: Vec<LostWrite>,
    /// Σ of their lengths.
    pub lost_bytes: u64,
    /// Writes that were pending when the cut came and survived it (their
    /// data was in NAND by then).
    pub survived: u64,
}

/// The power state and the audit, for `ctl fault list` and `ctl stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerReport {
    /// Power is on.
    pub powered: bool,
    /// A cut waiting for its moment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub armed: Option<Armed>,
    /// The preset's power-loss protection.
    pub power_loss_protection: bool,
    /// The preset's flushes are lies.
    pub flush_lies: bool,
    /// Cuts so far.
    pub cuts: u64,
    /// The latest cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_cut: Option<CutReport>,
    /// Writes acknowledged or in flight, not yet durable, now.
    pub pending_writes: u64,
    /// Bytes of previous contents held for them.
    pub pending_undo_bytes: u64,
    /// Pending writes dropped from the audit at its bounds (then treated
    /// as durable), since the daemon started.
    pub untracked_writes: u64,
}

impl Default for PowerReport {
    fn default() -> Self {
        PowerReport {
            powered: true,
            armed: None,
            power_loss_protection: false,
            flush_lies: false,
            cuts: 0,
            last_cut: None,
            pending_writes: 0,
            pending_undo_bytes: 0,
            untracked_writes: 0,
        }
    }
}

/// A write not yet durable.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub offset: u64,
    pub undo: Vec<u8>,
    pub submitted_ns: u64,
    pub acked_ns: u64,
    /// `placed` after its submission: it is programmed once every unit
    /// up to here is out of the open dpages.
    pub units_end: u64,
    /// When it is durable, once known.
    pub durable_ns: Option<u64>,
}

impl Record {
    fn len(&self) -> u64 {
        self.undo.len() as u64
    }
}

/// The audit of pending writes, kept under the model lock (so its order is
/// the model's).
#[derive(Debug, Default)]
pub(crate) struct PowerLog {
    pub records: VecDeque<Record>,
    /// The first `settled` records have their durable time (settling is
    /// in order, so [`Self::settle`] starts after them).
    settled: usize,
    pub undo_bytes: u64,
    pub untracked: u64,
    pub armed: Option<Armed>,
    /// A cut decided and not yet carried out: its drive time and trigger.
    pub pending_cut: Option<(u64, String)>,
    pub off: bool,
    pub cuts: u64,
    pub last_cut: Option<CutReport>,
}

impl PowerLog {
    /// With the model's `d` now: which pending writes are programmed, and
    /// when (each no earlier than its acknowledgement).
    pub fn settle(&mut self, d: Durability) {
        let programmed = d.placed.saturating_sub(d.open);
        for r in self.records.range_mut(self.settled..) {
            if r.units_end > programmed {
                // Placed in order: the later ones are not programmed either.
                break;
            }
            r.durable_ns = Some(d.programmed_by_ns.max(r.acked_ns));
            self.settled += 1;
        }
    }

    /// Forget every pending write (a secure erase).
    pub fn clear(&mut self) {
        self.records.clear();
        self.undo_bytes = 0;
        self.settled = 0;
    }

    /// Forget the writes durable by drive time `now`.
    pub fn retire(&mut self, now: u64) {
        while let Some(r) = self.records.front() {
            match r.durable_ns {
                Some(t) if t <= now => {
                    self.undo_bytes -= r.len();
                    self.records.pop_front();
                    self.settled -= 1;
                }
                _ => break,
            }
        }
    }

    /// Add a pending write; the oldest are dropped (counted) at the bounds.
    pub fn push(&mut self, r: Record) {
        self.undo_bytes += r.len();
        self.records.push_back(r);
        while self.records.len() > MAX_RECORDS || self.undo_bytes > MAX_UNDO_BYTES {
            let Some(old) = self.records.pop_front() else {
                break;
            };
            self.undo_bytes -= old.len();
            self.untracked += 1;
            self.settled = self.settled.saturating_sub(1);
        }
    }

    /// A discard of `offset..offset + len`: the parts of pending writes it
    /// covers leave the audit.
    pub fn clip(&mut self, offset: u64, len: u64) {
        let end = offset.saturating_add(len);
        if len == 0
            || !self
                .records
                .iter()
                .any(|r| r.offset < end && offset < r.offset + r.len())
        {
            return;
        }
        let mut out = VecDeque::with_capacity(self.records.len() + 1);
        for r in self.records.drain(..) {
            let (ro, re) = (r.offset, r.offset + r.len());
            if re <= offset || end <= ro {
                out.push_back(r);
                continue;
            }
            if ro < offset {
                let mut left = r.clone();
                left.undo.truncate((offset - ro) as usize);
                out.push_back(left);
            }
            if end < re {
                let mut right = r.clone();
                right.undo = r.undo[(end - ro) as usize..].to_vec();
                right.offset = end;
                out.push_back(right);
            }
        }
        self.records = out;
        self.undo_bytes = self.records.iter().map(Record::len).sum();
        self.settled = self
            .records
            .iter()
            .take_while(|r| r.durable_ns.is_some())
            .count();
    }

    /// The writes lost by a cut at `t` (after a final [`Self::settle`]),
    /// oldest first, and how many pending ones survived. The audit is
    /// emptied.
    pub fn take_lost(&mut self, t: u64) -> (Vec<Record>, u64) {
        let mut lost = Vec::new();
        let mut survived = 0;
        for r in self.records.drain(..) {
            match r.durable_ns {
                Some(d) if d <= t => survived += 1,
                _ => lost.push(r),
            }
        }
        self.undo_bytes = 0;
        self.settled = 0;
        (lost, survived)
    }
}

/// The report of the writes `lost` by a cut at `t`.
pub(crate) fn lost_writes(lost: &[Record], t: u64) -> Vec<LostWrite> {
    lost.iter()
        .map(|r| LostWrite {
            offset: r.offset,
            length: r.len(),
            submitted_model_ns: r.submitted_ns,
            acked_model_ns: r.acked_ns,
            acknowledged: r.acked_ns <= t && r.submitted_ns < t,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(offset: u64, len: usize, acked_ns: u64, units_end: u64) -> Record {
        Record {
            offset,
            undo: vec![offset as u8; len],
            submitted_ns: acked_ns.saturating_sub(10),
            acked_ns,
            units_end,
            durable_ns: None,
        }
    }

    #[test]
    fn writes_become_durable_in_order_once_out_of_the_open_dpage() {
        let mut log = PowerLog::default();
        log.push(rec(0, 4096, 100, 1));
        log.push(rec(4096, 4096, 200, 2));
        log.push(rec(8192, 4096, 300, 3));
        // Units 1..=2 are programmed by 1000, unit 3 waits in a dpage.
        log.settle(Durability {
            placed: 3,
            open: 1,
            programmed_by_ns: 1000,
        });
        let d: Vec<_> = log.records.iter().map(|r| r.durable_ns).collect();
        assert_eq!(d, [Some(1000), Some(1000), None]);
        // Settling again later gives the settled ones no new time.
        log.settle(Durability {
            placed: 3,
            open: 1,
            programmed_by_ns: 2000,
        });
        let d: Vec<_> = log.records.iter().map(|r| r.durable_ns).collect();
        assert_eq!(d, [Some(1000), Some(1000), None]);
        log.retire(999);
        assert_eq!(log.records.len(), 3);
        log.retire(1000);
        assert_eq!(log.records.len(), 1);
        assert_eq!(log.undo_bytes, 4096);
        let (lost, survived) = log.take_lost(5000);
        assert_eq!((lost.len(), survived), (1, 0));
        assert_eq!(lost[0].offset, 8192);
    }

    #[test]
    fn a_discard_splits_the_writes_it_covers() {
        let mut log = PowerLog::default();
        log.push(rec(0, 8192, 100, 2));
        log.clip(2048, 1024);
        let parts: Vec<_> = log.records.iter().map(|r| (r.offset, r.len())).collect();
        assert_eq!(parts, [(0, 2048), (3072, 5120)]);
        assert_eq!(log.undo_bytes, 7168);
        log.clip(0, 1 << 20);
        assert!(log.records.is_empty());
        assert_eq!(log.undo_bytes, 0);
    }

    #[test]
    fn the_audit_is_bounded() {
        let mut log = PowerLog::default();
        for i in 0..(MAX_RECORDS as u64 + 5) {
            log.push(rec(i * 512, 512, i, i + 1));
        }
        assert_eq!(log.records.len(), MAX_RECORDS);
        assert_eq!(log.untracked, 5);
        assert_eq!(log.records[0].offset, 5 * 512);
    }
}
