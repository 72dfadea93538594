//! The power-loss audit: every write not yet durable, with the previous
//! contents of its range, and what a cut at a given time does to them
//! ([`plan_cut`]). Kept under the model lock, so its order is the model's.

use std::collections::{BTreeMap, VecDeque};

use vssd_model::Durability;

use super::{Classes, LossCause, LostWrite, MAX_RECORDS, MAX_UNDO_BYTES};

/// True with probability `p` (`p` ≤ 0: never, without drawing).
fn chance(rng: &mut vssd_common::rng::Rng, p: f64) -> bool {
    p > 0.0 && ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
}

/// A write not yet durable (or durable within the mapping-loss window).
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
pub(crate) struct Audit {
    records: VecDeque<Record>,
    /// The first `settled` records have their durable time (settling is
    /// in order, so [`Self::settle`] starts after them).
    settled: usize,
    undo_bytes: u64,
    untracked: u64,
}

impl Audit {
    /// Writes not yet durable (or kept for the mapping-loss window).
    pub fn pending(&self) -> u64 {
        self.records.len() as u64
    }

    /// Whether no write is pending.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Bytes of previous contents held.
    pub fn undo_bytes(&self) -> u64 {
        self.undo_bytes
    }

    /// Pending writes dropped at the bounds (or never recorded).
    pub fn untracked(&self) -> u64 {
        self.untracked
    }

    /// A write beyond the audit's bounds was not recorded.
    pub fn count_untracked(&mut self) {
        self.untracked += 1;
    }

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

    /// Forget the writes durable by drive time `now` − `keep_ns`.
    pub fn retire(&mut self, now: u64, keep_ns: u64) {
        while let Some(r) = self.records.front() {
            match r.durable_ns {
                Some(t) if t.saturating_add(keep_ns) <= now => {
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
            if old.durable_ns.is_none() {
                self.untracked += 1;
            }
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

    /// Take every record out (a cut, after a final [`Self::settle`]).
    pub fn take_all(&mut self) -> Vec<Record> {
        self.undo_bytes = 0;
        self.settled = 0;
        self.records.drain(..).collect()
    }
}

/// What a cut does to the store and what it reports.
#[derive(Debug, Default)]
pub(crate) struct CutPlan {
    /// `(offset, previous contents)` to write back, in this order.
    pub restores: Vec<(u64, Vec<u8>)>,
    /// The lost ranges, oldest write first.
    pub lost: Vec<LostWrite>,
    /// Writes of the audit that survived (durable since the last request,
    /// or within the mapping-loss window, or programmed out of order).
    pub survived: u64,
    /// Of those, the ones programmed out of order (the unserializable class).
    pub reordered: u64,
    /// The mapping updates of the window were lost.
    pub mapping_lost: bool,
}

/// Sector ranges `[start, end)`, disjoint, merged when they touch.
#[derive(Debug, Default)]
struct Ranges(BTreeMap<u64, u64>);

impl Ranges {
    fn add(&mut self, mut s: u64, mut e: u64) {
        if s >= e {
            return;
        }
        // Merge with every range that overlaps or touches [s, e).
        let touching: Vec<(u64, u64)> = self
            .0
            .range(..=e)
            .rev()
            .take_while(|&(_, &re)| re >= s)
            .map(|(&rs, &re)| (rs, re))
            .collect();
        for (rs, re) in touching {
            self.0.remove(&rs);
            s = s.min(rs);
            e = e.max(re);
        }
        self.0.insert(s, e);
    }

    /// The parts of `[s, e)` not covered.
    fn uncovered(&self, s: u64, e: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = s;
        let first = self.0.range(..s).next_back().map(|(&rs, &re)| (rs, re));
        let later = self.0.range(s..e).map(|(&rs, &re)| (rs, re));
        for (rs, re) in first.into_iter().chain(later) {
            if re <= at {
                continue;
            }
            if rs > at {
                out.push((at, rs.min(e)));
            }
            at = at.max(re);
            if at >= e {
                break;
            }
        }
        if at < e {
            out.push((at, e));
        }
        out
    }
}

/// Decide what a cut at drive time `t` does to `records` (every write of
/// the audit, oldest first, settled): which are lost and why, drawing the
/// preset's failure classes from `rng`, and the contents to write back so
/// that every lost range reads what was there before it and every
/// surviving range keeps its data.
pub(crate) fn plan_cut(
    records: Vec<Record>,
    t: u64,
    classes: Classes,
    rng: &mut vssd_common::rng::Rng,
) -> CutPlan {
    #[derive(Clone, Copy)]
    enum Fate {
        /// Survives whole; `pending` if it was not durable at the cut.
        Kept { pending: bool },
        /// Lost whole.
        Lost(LossCause),
        /// Its first `kept` bytes survive, the rest is lost.
        Shorn { kept: u64 },
    }
    let mut plan = CutPlan {
        mapping_lost: chance(rng, classes.mapping),
        ..CutPlan::default()
    };
    let window = classes.window_ms.saturating_mul(1_000_000);
    let fates: Vec<Fate> = records
        .iter()
        .map(|r| match r.durable_ns {
            Some(d) if d <= t => {
                if plan.mapping_lost && d.saturating_add(window) > t {
                    Fate::Lost(LossCause::Mapping)
                } else {
                    Fate::Kept { pending: false }
                }
            }
            _ if chance(rng, classes.unserializable) => Fate::Kept { pending: true },
            _ => {
                let sectors = r.len() / SECTOR;
                if sectors >= 2 && chance(rng, classes.shorn) {
                    Fate::Shorn {
                        kept: (1 + rng.below(sectors - 1)) * SECTOR,
                    }
                } else {
                    Fate::Lost(LossCause::Unprogrammed)
                }
            }
        })
        .collect();
    // Newest first: a lost range goes back to what was there before it,
    // except where a newer write survives (the unserializable case) or a
    // newer shorn write kept its first sectors.
    let mut covered = Ranges::default();
    for (r, fate) in records.iter().zip(&fates).rev() {
        let end = r.offset + r.len();
        let (lost_from, keep_to) = match *fate {
            Fate::Kept { .. } => (end, end),
            Fate::Lost(_) => (r.offset, r.offset),
            Fate::Shorn { kept } => (r.offset + kept, r.offset + kept),
        };
        for (s, e) in covered.uncovered(lost_from, end) {
            let at = (s - r.offset) as usize..(e - r.offset) as usize;
            plan.restores.push((s, r.undo[at].to_vec()));
        }
        covered.add(r.offset, keep_to);
    }
    let mut lost_pending = false;
    for (r, fate) in records.iter().zip(&fates) {
        let entry = |offset: u64, length: u64, cause| LostWrite {
            offset,
            length,
            submitted_model_ns: r.submitted_ns,
            acked_model_ns: r.acked_ns,
            acknowledged: r.acked_ns <= t && r.submitted_ns < t,
            cause,
            shorn_from: (cause == LossCause::Shorn).then_some([r.offset, r.len()]),
        };
        match *fate {
            Fate::Kept { pending } => {
                plan.survived += 1;
                if pending && lost_pending {
                    plan.reordered += 1;
                }
            }
            Fate::Lost(cause) => {
                lost_pending |= cause == LossCause::Unprogrammed;
                plan.lost.push(entry(r.offset, r.len(), cause));
            }
            Fate::Shorn { kept } => {
                lost_pending = true;
                plan.lost
                    .push(entry(r.offset + kept, r.len() - kept, LossCause::Shorn));
            }
        }
    }
    plan
}

/// Sector size of the audit's ranges.
const SECTOR: u64 = 512;

#[cfg(test)]
mod tests {
    use super::*;
    use vssd_common::rng::Rng;

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
        let mut log = Audit::default();
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
        log.retire(999, 0);
        assert_eq!(log.records.len(), 3);
        // With a mapping-loss window durable writes stay until it is over.
        log.retire(1000, 500);
        assert_eq!(log.records.len(), 3);
        log.retire(1000, 0);
        assert_eq!(log.records.len(), 1);
        assert_eq!(log.undo_bytes, 4096);
        let plan = plan_cut(log.take_all(), 5000, Classes::default(), &mut Rng::new(1));
        assert_eq!((plan.lost.len(), plan.survived), (1, 0));
        assert_eq!(plan.lost[0].offset, 8192);
        assert_eq!(plan.lost[0].cause, LossCause::Unprogrammed);
        assert_eq!(plan.restores.len(), 1);
        assert_eq!(plan.restores[0].0, 8192);
        assert!(plan.restores[0].1 == vec![8192u64 as u8; 4096]);
    }

    /// The store after `plan`'s restores over `img`.
    fn restored(mut img: Vec<u8>, plan: &CutPlan) -> Vec<u8> {
        for (o, d) in &plan.restores {
            img[*o as usize..*o as usize + d.len()].copy_from_slice(d);
        }
        img
    }

    /// Writes of `(offset, len, byte)` in order on a zeroed image: the
    /// records (each keeping what it overwrote) and the image after them.
    fn written(ws: &[(u64, usize, u8)], durable: &[Option<u64>]) -> (Vec<Record>, Vec<u8>) {
        let mut img = vec![0u8; 1 << 16];
        let mut recs = Vec::new();
        for (i, &(o, n, b)) in ws.iter().enumerate() {
            let at = o as usize..o as usize + n;
            recs.push(Record {
                offset: o,
                undo: img[at.clone()].to_vec(),
                submitted_ns: 10 * i as u64,
                acked_ns: 10 * i as u64 + 5,
                units_end: i as u64 + 1,
                durable_ns: durable[i],
            });
            img[at].fill(b);
        }
        (recs, img)
    }

    /// The image after replaying only `keep(i, sector)` of the writes.
    fn replay(ws: &[(u64, usize, u8)], keep: impl Fn(usize, u64) -> bool) -> Vec<u8> {
        let mut img = vec![0u8; 1 << 16];
        for (i, &(o, n, b)) in ws.iter().enumerate() {
            for s in (o..o + n as u64).step_by(512) {
                if keep(i, s) {
                    img[s as usize..s as usize + 512].fill(b);
                }
            }
        }
        img
    }

    #[test]
    fn failure_classes_lose_what_they_say_and_the_store_agrees() {
        // Overlapping writes; the first two durable (at 12 and 22), the
        // rest pending at the cut (t = 100).
        let ws = [
            (0, 8192, 1),
            (4096, 8192, 2),
            (2048, 4096, 3),
            (8192, 16384, 4),
            (0, 1024, 5),
            (20480, 4096, 6),
        ];
        let durable = [Some(12), Some(22), None, None, None, None];
        let all = Classes {
            shorn: 0.5,
            unserializable: 0.3,
            mapping: 0.5,
            window_ms: 1,
        };
        let (mut shorn, mut reordered, mut mapping) = (0, 0, 0);
        for seed in 0..200 {
            let (recs, img) = written(&ws, &durable);
            let plan = plan_cut(recs, 100, all, &mut Rng::new(seed));
            // The same seed, the same cut.
            let (again, _) = written(&ws, &durable);
            let twice = plan_cut(again, 100, all, &mut Rng::new(seed));
            assert_eq!(plan.lost, twice.lost);
            // Each write keeps or loses the sectors the report says, and
            // the store equals the replay of what was kept.
            let lost_at = |i: usize, s: u64| {
                plan.lost.iter().any(|l| {
                    let whole = l.shorn_from.unwrap_or([l.offset, l.length]);
                    whole[0] == ws[i].0
                        && whole[1] == ws[i].1 as u64
                        && l.submitted_model_ns == 10 * i as u64
                        && l.offset <= s
                        && s < l.offset + l.length
                })
            };
            assert!(
                restored(img, &plan) == replay(&ws, |i, s| !lost_at(i, s)),
                "seed {seed}: {:?}",
                plan.lost
            );
            for l in &plan.lost {
                match l.cause {
                    // Only the window's durable writes lose their mapping.
                    LossCause::Mapping => {
                        assert!(plan.mapping_lost && l.submitted_model_ns < 20);
                        mapping += 1;
                    }
                    LossCause::Shorn => {
                        let [o, n] = l.shorn_from.unwrap();
                        assert!(l.offset > o && l.offset + l.length == o + n);
                        assert_eq!(l.offset % 512, 0);
                        shorn += 1;
                    }
                    LossCause::Unprogrammed => assert!(l.submitted_model_ns >= 20),
                }
            }
            reordered += plan.reordered;
        }
        // Every class showed up.
        assert!(shorn > 0 && reordered > 0 && mapping > 0);
        // Off, a cut loses exactly the pending writes, the latest ones.
        let (recs, img) = written(&ws, &durable);
        let plan = plan_cut(recs, 100, Classes::default(), &mut Rng::new(9));
        let lost: Vec<_> = plan
            .lost
            .iter()
            .map(|l| l.submitted_model_ns / 10)
            .collect();
        assert_eq!(lost, [2, 3, 4, 5]);
        assert!(plan.lost.iter().all(|l| l.cause == LossCause::Unprogrammed));
        assert!(restored(img, &plan) == replay(&ws, |i, _| i < 2));
    }

    #[test]
    fn ranges_merge_and_leave_the_gaps() {
        let mut r = Ranges::default();
        r.add(10, 20);
        r.add(30, 40);
        assert_eq!(r.uncovered(0, 50), [(0, 10), (20, 30), (40, 50)]);
        assert_eq!(r.uncovered(12, 18), []);
        assert_eq!(r.uncovered(15, 35), [(20, 30)]);
        r.add(20, 30);
        assert_eq!(r.0.len(), 1);
        assert_eq!(r.uncovered(0, 50), [(0, 10), (40, 50)]);
    }

    #[test]
    fn a_discard_splits_the_writes_it_covers() {
        let mut log = Audit::default();
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
        let mut log = Audit::default();
        for i in 0..(MAX_RECORDS as u64 + 5) {
            log.push(rec(i * 512, 512, i, i + 1));
        }
        assert_eq!(log.records.len(), MAX_RECORDS);
        assert_eq!(log.untracked, 5);
        assert_eq!(log.records[0].offset, 5 * 512);
    }
}
