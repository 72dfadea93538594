//! Garbage collection and the free-block pool: victim selection (greedy
//! buckets, cost-benefit scan), GC steps (foreground, incremental,
//! background), erases in idle gaps. The blocks are the pool's
//! (`blocks.rs`), the victims being collected `victims.rs`'s. See "Garbage
//! collection" in `docs/model.md`.

use super::ssd::Ssd;
use super::types::{BlockState, Count, NONE, Stream};
use vssd_profile::GcPolicy;

impl Ssd {
    // ----------------------------------------------------------- the pool

    /// Give the host write point of `die` a new block, running foreground GC
    /// first if the die's free pool is at its threshold. One free block is
    /// always kept for GC. Returns false if the die cannot take host data.
    pub(super) fn alloc_host_block(&mut self, die: usize, now: u64) -> bool {
        // Incremental GC (gc_keep_pace) normally holds the pool near the
        // threshold; if it fell behind, the host write waits for whole victims.
        let mut guard = self.geo.blocks_per_die;
        while self.blocks.free_len(die) < 2 && guard > 0 {
            guard -= 1;
            if !self.gc_one(die, now, true) {
                break;
            }
        }
        if self.blocks.free_len(die) < 2 {
            return false;
        }
        let Some(b) = self.blocks.pop_free(die) else {
            return false; // unreachable: two or more blocks checked above
        };
        if self.slc.enabled() && self.slc_takes_block(die, now) {
            // The SLC cache has room (`slc_fold.rs`): this host block runs
            // in SLC mode.
            self.slc.mark(b);
        }
        self.blocks.open(Stream::Host, die, b, now);
        true
    }

    /// Make sure the GC write point of `die` has an open block; false if it
    /// has none and the die has no free block to open.
    #[inline]
    fn ensure_gc_block(&mut self, die: usize, now: u64) -> bool {
        if self.blocks.wp(Stream::Gc, die).block() != NONE {
            return true;
        }
        let Some(b) = self.blocks.pop_free(die) else {
            return false;
        };
        self.blocks.open(Stream::Gc, die, b, now);
        true
    }

    /// Erase block `b` of `die` starting at `start` and return it to the pool.
    pub(super) fn erase_block(&mut self, die: usize, b: u32, start: u64) {
        let t_erase = if self.geo.erase_growth > 0.0 {
            self.wear_scaled(self.geo.t_erase, self.geo.erase_growth, b)
        } else {
            self.geo.t_erase
        };
        self.timelines.occupy_die(die, start + t_erase);
        self.slc.erase(b);
        self.reduction.erase(b);
        self.tally.add(Count::Erases, 1);
        self.blocks.erased(die, b);
    }

    // ------------------------------------------------------------- victims

    /// Choose a GC victim among the full blocks of `die` that have at least
    /// one invalid unit.
    fn select_victim(&self, die: usize, now: u64) -> Option<u32> {
        let upb = self.geo.units_per_block as usize;
        if self.reduction.enabled() {
            return self.select_victim_reduced(die, now);
        }
        let blocks = &self.blocks;
        match self.geo.policy {
            GcPolicy::Greedy => (0..upb)
                .map(|v| blocks.bucket_head(die, v))
                .find(|&h| h != NONE),
            GcPolicy::CostBenefit => {
                let mut best: Option<(f64, u32)> = None;
                for v in 0..upb {
                    let mut b = blocks.bucket_head(die, v);
                    let u = v as f64 / upb as f64;
                    while b != NONE {
                        let age = now.saturating_sub(blocks.last_write(b)) as f64 + 1.0;
                        let score = if v == 0 {
                            f64::INFINITY
                        } else {
                            age * (1.0 - u) / (2.0 * u)
                        };
                        if best.is_none_or(|(s, _)| score > s) {
                            best = Some((score, b));
                        }
                        b = blocks.bucket_next(b);
                    }
                    if v == 0 && best.is_some() {
                        break;
                    }
                }
                best.map(|(_, b)| b)
            }
        }
    }

    /// [`Self::select_victim`] with data reduction: blocks hold different
    /// numbers of units (their slots), so a block is a candidate only if
    /// some of its slots are invalid, and its valid fraction is over its
    /// own slots.
    fn select_victim_reduced(&self, die: usize, now: u64) -> Option<u32> {
        let upb = self.geo.units_per_block as usize;
        let blocks = &self.blocks;
        let mut best: Option<(f64, u32)> = None;
        for v in 0..upb {
            let mut b = blocks.bucket_head(die, v);
            while b != NONE {
                let cap = self.reduction.block_slots(b) as usize;
                if v < cap {
                    let u = v as f64 / cap as f64;
                    let score = match self.geo.policy {
                        GcPolicy::Greedy => 1.0 - u,
                        GcPolicy::CostBenefit => {
                            let age = now.saturating_sub(blocks.last_write(b)) as f64 + 1.0;
                            if v == 0 {
                                f64::INFINITY
                            } else {
                                age * (1.0 - u) / (2.0 * u)
                            }
                        }
                    };
                    if best.is_none_or(|(s, _)| score > s) {
                        best = Some((score, b));
                    }
                    if self.geo.policy == GcPolicy::Greedy && v == 0 {
                        return best.map(|(_, b)| b);
                    }
                }
                b = blocks.bucket_next(b);
            }
        }
        best.map(|(_, b)| b)
    }

    /// Pick the die's next GC victim and make it the victim in
    /// progress. False if there is none, or no room to copy its valid units.
    fn start_victim(&mut self, die: usize, t: u64, foreground: bool) -> bool {
        let Some(victim) = self.select_victim(die, t) else {
            return false;
        };
        let need = self.blocks.valid(victim);
        if need as u64 > self.wp_room(Stream::Gc, die) && self.blocks.free_len(die) == 0 {
            return false;
        }
        self.begin_victim(die, victim, foreground);
        true
    }

    /// Make full block `victim` of `die` the victim being collected.
    pub(super) fn begin_victim(&mut self, die: usize, victim: u32, foreground: bool) {
        let need = self.blocks.valid(victim);
        self.blocks.make_victim(&self.geo, victim);
        let upb = if !self.reduction.enabled() {
            self.geo.units_per_block as f64
        } else {
            self.reduction.block_slots(victim).max(need + 1) as f64
        };
        if foreground {
            self.tally.add(Count::FgGcVictims, 1);
        } else {
            self.tally.add(Count::BgGcVictims, 1);
        }
        self.victims
            .begin(die, victim, need as f64 / (upb - need as f64));
    }

    // --------------------------------------------------------------- steps

    /// Collect one victim block on `die` completely, starting no earlier
    /// than `t` (continuing the victim in progress, if any). False if there
    /// is nothing to collect.
    pub(super) fn gc_one(&mut self, die: usize, t: u64, foreground: bool) -> bool {
        self.gc_step(die, t, u64::MAX, foreground)
    }

    /// Work on the die's GC victim, starting no earlier than `t`: pick one
    /// if none is in progress, copy the valid units of its next pages to the
    /// die's GC write point until about `budget` units are copied, and erase
    /// it once empty. Copies and the erase occupy the die and its channel
    /// like host I/O. False if there is nothing to collect or no room to
    /// copy into.
    ///
    /// Room: `start_victim` only starts a victim whose valid units fit in
    /// the GC block or a free block, and the host leaves a die its last free
    /// block (`alloc_host_block`), so copies always find room — except after
    /// `host_die`'s last resort took a die's last block. Then the copying
    /// stops where it is, the victim stays in progress (its remaining units
    /// stay valid where they are), and GC on that die resumes once a block
    /// is free again: a pause, never a panic or a lost unit.
    fn gc_step(&mut self, die: usize, t: u64, budget: u64, foreground: bool) -> bool {
        if !self.victims.busy(die) && !self.start_victim(die, t, foreground) {
            return false;
        }
        let Some((victim, first_page)) = self.victims.current(die) else {
            return false;
        };
        // Pass 1: the valid units of the next pages, up to the budget (a
        // sequential scan of the reverse map).
        let upd = self.geo.units_per_dpage;
        let (mut lpns, mut pages) = self.victims.take_scratch();
        let mut page = first_page;
        while page < self.geo.pages_per_block && (lpns.len() as u64) < budget {
            let mut slots = 0u64;
            let before = lpns.len();
            for slot in 0..upd {
                if let Some(lpn) = self.mapping.lpn_at(self.geo.ppn(victim, page, slot)) {
                    lpns.push(lpn);
                    slots |= 1u64 << (slot / self.geo.units_per_page).min(63);
                }
            }
            if lpns.len() > before {
                pages.push((lpns.len() - before, slots.count_ones()));
            }
            page += 1;
        }
        // Their mapping entries are scattered: load them all first so the
        // cache misses overlap instead of stalling one by one below.
        self.mapping.warm_forward(&lpns);
        // Their entries change: the translation pages GC updates (where
        // only part of the map is cached).
        self.map_update(t, &lpns);
        // Pass 2: read each page, then program its units at the GC write point.
        let mut next = 0;
        let copies_before = self.tally.get(Count::GcCopies);
        let mut stalled = false;
        let folding = self.slc.is_slc(victim);
        'pages: for &(n, plane_pages) in &pages {
            self.tally.add(Count::NandPagesRead, plane_pages as u64);
            let ready = self.nand_read_block(die, victim, t, n as u64 * self.geo.unit_bytes);
            for &lpn in &lpns[next..next + n] {
                if !self.ensure_gc_block(die, ready) {
                    stalled = true;
                    break 'pages;
                }
                // ensure_gc_block just made sure the GC write point is open.
                self.place_on(Stream::Gc, die, lpn, ready);
                self.tally.add(Count::GcCopies, 1);
                if folding {
                    self.tally.add(Count::SlcUnitsFolded, 1);
                }
            }
            next += n;
        }
        let progress = !stalled || self.tally.get(Count::GcCopies) != copies_before;
        self.victims.put_scratch(lpns, pages);
        if self.blocks.valid(victim) == 0 {
            // Every unit is copied (or was overwritten): erase the block.
            // After its last page this always holds, as a victim takes no
            // new data.
            self.victims.finish(die);
            let start = t.max(self.timelines.die_busy(die));
            self.erase_block(die, victim, start);
        } else if stalled || page >= self.geo.pages_per_block {
            // No room to copy into (see above), or units left after the last
            // page, which cannot happen: resume with a scan from the start
            // of the block rather than erase valid data. Copied units are
            // no longer in it, so a rescan finds exactly the rest.
            self.victims.resume_at(die, victim, 0);
        } else {
            self.victims.resume_at(die, victim, page);
        }
        progress
    }

    /// Incremental foreground GC, run after each host dpage programmed on a
    /// die whose pool is low: copy about as many units as collecting space
    /// for that dpage costs with the current victim (u / (1 − u) per unit
    /// written), so GC keeps pace with host writes in small steps instead of
    /// stalling them for whole victims when the pool runs out.
    #[inline]
    pub(super) fn gc_keep_pace(&mut self, die: usize, t: u64) {
        if self.blocks.free_len(die) > self.geo.fg_threshold as usize {
            return;
        }
        if !self.victims.busy(die) && !self.start_victim(die, t, true) {
            return;
        }
        let budget = (self.geo.units_per_dpage as f64 * self.victims.ratio(die))
            .ceil()
            .max(1.0) as u64;
        self.gc_step(die, t, budget, true);
    }

    // ------------------------------------------------------------ idle time

    /// A die with nothing to do erases blocks that hold no valid data (left by
    /// TRIM or overwrites), as long as the erase ends before `now`: such
    /// erases only use time the die would have spent idle, so they never
    /// delay host I/O. This is why a trimmed drive is soon back to fresh-like
    /// speed even without a long idle period.
    pub(super) fn erase_in_gaps(&mut self, now: u64) {
        if self.scheme.is_hybrid() {
            self.hybrid_idle(now);
            return;
        }
        if self.blocks.empty_full() == 0 {
            return;
        }
        for die in 0..self.geo.dies as usize {
            loop {
                let b = self.blocks.bucket_head(die, 0);
                let busy = self.timelines.die_busy(die);
                if b == NONE || busy + self.geo.t_erase > now {
                    break;
                }
                self.blocks.take_empty(&self.geo, b);
                self.tally.add(Count::BgGcVictims, 1);
                self.erase_block(die, b, busy);
            }
        }
    }

    /// Work a drive does when the host leaves it alone: once no host command
    /// has been outstanding for `bg_idle_ms`, program buffered data, erase
    /// blocks holding no valid data, run GC on each die until it has
    /// `bg_target_blocks` free, then fold SLC-mode blocks, all within the
    /// idle gap.
    ///
    /// The dies work at once and dies on one channel share it, so the work
    /// is done in time order: always the step (one whole victim) that can
    /// start earliest, on whichever die. The outcome is then the same
    /// whether the gap is handled in one call (the next request) or in
    /// several (a monitor's [`Ssd::catch_up`] in between): a call stops
    /// before the first step that would start at or after `now`, and the
    /// next call picks up the same step. Done die by die instead, the dies
    /// handled first took the channels' free time and a read after the gap
    /// waited 10 ms longer than when the daemon's stats request had split
    /// the gap (found replaying a daemon's trace).
    pub(super) fn background(&mut self, now: u64) {
        if self.geo.bg_idle_ns == 0 || self.scheme.is_hybrid() {
            return;
        }
        let idle_start = self.timelines.last_host_done() + self.geo.bg_idle_ns;
        if now <= idle_start {
            return;
        }
        let cursor = self.blocks.cursor() as usize;
        self.program_partial(Stream::Host, cursor, idle_start);
        let dies = self.geo.dies as usize;
        // Per die: steps left (a bound, as before: at most a die's blocks
        // of GC and as many of folding), and whether it is done with GC
        // (then folding) or with everything.
        let mut guard = vec![(self.geo.blocks_per_die, self.geo.blocks_per_die); dies];
        let mut stage = vec![Stage::Gc; dies];
        loop {
            // The die whose next step starts earliest (lowest index on a tie).
            let mut best: Option<(u64, usize)> = None;
            for (die, st) in stage.iter().enumerate() {
                if *st == Stage::Done {
                    continue;
                }
                let t = idle_start
                    .max(self.timelines.die_busy(die))
                    .max(self.victims.rest_until(die));
                if t < now && best.is_none_or(|(bt, _)| t < bt) {
                    best = Some((t, die));
                }
            }
            let Some((t, die)) = best else { break };
            let worked = match stage[die] {
                Stage::Gc => {
                    let target = self.geo.bg_target as usize;
                    // Blocks with no valid data left (after TRIM or
                    // overwrites) cost only an erase: always collect those;
                    // copy-GC only up to the target.
                    let want = self.blocks.free_len(die) < target
                        || self.blocks.bucket_head(die, 0) != NONE;
                    want && guard[die].0 > 0 && {
                        guard[die].0 -= 1;
                        self.gc_one(die, t, false)
                    }
                }
                Stage::Fold => {
                    guard[die].1 > 0 && {
                        guard[die].1 -= 1;
                        self.fold_step(die, t)
                    }
                }
                Stage::Done => false,
            };
            if !worked {
                stage[die] = match stage[die] {
                    Stage::Gc if self.slc.enabled() => Stage::Fold,
                    _ => Stage::Done,
                };
            } else if self.geo.bg_duty < 1.0 {
                // Paced: rest for the step's time × (1 / duty − 1).
                let end = self.timelines.die_busy(die);
                let took = end.saturating_sub(t) as f64;
                let rest = (took * (1.0 / self.geo.bg_duty - 1.0)) as u64;
                self.victims.rest(die, end.saturating_add(rest));
            }
        }
        // The idle gap is used up; the next one starts after new host I/O.
        self.timelines.host_done(now - self.geo.bg_idle_ns);
    }

    /// One step of folding the SLC cache in idle time on `die`, starting at
    /// `t`: the next full SLC-mode block's valid units are copied into
    /// native blocks by GC (at the native program time) and the block
    /// erased. False if there is none to fold or no room.
    fn fold_step(&mut self, die: usize, t: u64) -> bool {
        if !self.victims.busy(die) {
            let b0 = die as u32 * self.geo.blocks_per_die;
            let next = (b0..b0 + self.geo.blocks_per_die)
                .find(|&b| self.slc.is_slc(b) && self.blocks.is(b, BlockState::Full));
            let Some(b) = next else { return false };
            let need = self.blocks.valid(b) as u64;
            if need > self.wp_room(Stream::Gc, die) && self.blocks.free_len(die) == 0 {
                return false;
            }
            self.begin_victim(die, b, false);
        }
        self.gc_one(die, t, false)
    }
}

/// Where a die is in its idle-time work ([`Ssd::background`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Gc,
    Fold,
    Done,
}

#[cfg(test)]
mod tests {
    use crate::proptests::tiny;
    use crate::{Op, Payload, Request, Ssd};

    #[test]
    fn gc_without_room_pauses_and_resumes() {
        // 4 dies x 12 blocks of 4 one-unit pages; half exported; no idle GC.
        let p = tiny("4KiB", "4KiB", 1, "0", "greedy", 0.0);
        let mut ssd = Ssd::new(&p, 1);
        let mut t = 0;
        let mut write = |ssd: &mut Ssd, offset| {
            let r = Request {
                op: Op::Write,
                offset,
                len: 4096,
                payload: Payload::Unknown,
            };
            t = ssd.submit(t, &r).unwrap().done_ns;
        };
        for u in 0..ssd.capacity() / 4096 {
            write(&mut ssd, u * 4096);
        }
        // Units go to the dies in turn, one per page: die 0's first block
        // holds units 0, 4, 8, 12. Overwrite two of them: that block keeps
        // two valid units, and the pools are still above the GC threshold.
        for u in [0, 8] {
            write(&mut ssd, u * 4096);
        }
        assert_eq!(ssd.counters().gc_copies, 0);
        let die = (0..4)
            .find(|&d| ssd.select_victim(d, t).is_some())
            .expect("a die with a victim");
        assert!(ssd.start_victim(die, t, true));
        let (victim, _) = ssd.victims.current(die).unwrap();
        let valid = ssd.blocks.valid(victim);
        assert!(valid > 0);
        // No free block and no open GC block: the copies have nowhere to go
        // (what host_die's last resort can leave behind).
        let pool = std::mem::take(ssd.blocks.free_list_mut(die));
        assert!(!ssd.gc_one(die, t, true), "no progress is reported");
        assert_eq!(ssd.victims.current(die), Some((victim, 0)), "victim kept");
        assert_eq!(ssd.blocks.valid(victim), valid, "nothing moved or lost");
        // With a block back, the same victim is collected completely.
        *ssd.blocks.free_list_mut(die) = pool;
        assert!(ssd.gc_one(die, t, true));
        assert_eq!(ssd.victims.current(die), None);
        assert_eq!(ssd.blocks.valid(victim), 0);
        ssd.check_invariants().unwrap();
    }
}
