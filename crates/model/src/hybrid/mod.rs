//! Hybrid log-block mapping (BAST / FAST / KAST family), for 2008-2009
//! controllers that kept only a block-level map plus a few page-mapped
//! log blocks. Its state is `log_blocks.rs`'s; this is what the drive does
//! with it.
//!
//! - A *superblock* (physical superblock `k`) is block `k` of every die;
//!   unit position `s` of a superblock is slot `s % upd` of dpage
//!   `s / upd`, and dpages are striped over the dies (`die = dpage % dies`),
//!   so one logical block written in order programs all dies in parallel.
//! - Logical (super)block `L` holds the units `L × S .. (L + 1) × S`. Its
//!   *data block* keeps unit `L × S + off` at position `off`.
//! - Writes go to *log blocks*, appended in arrival order. A write at
//!   offset 0 opens a *sequential* log for its logical block; other writes
//!   go to the logical block's current log, or to the shared random log,
//!   which takes writes for up to `log_associativity` logical blocks (1 =
//!   BAST; more = write-combining).
//! - When a log is full, or the pool needs a log block, the oldest log is
//!   merged: a full sequential log *switches* (it becomes the data
//!   block, the old one is erased), a sequential prefix gets the rest
//!   copied in (*partial merge*), anything else costs a *full merge* of
//!   every logical block with data in it: every unit of the logical block
//!   read from wherever it is and programmed, in order, into a new block;
//!   the old data block and the emptied log are erased.
//!
//! All of it is NAND work reserved on the die and channel timelines, so a
//! host write that needs a log block waits for the merges, and the write
//! buffer fills behind them. The mapping tables and valid counts are the
//! page FTL's, so reads, TRIM, invariants and persistence work unchanged;
//! only placement and reclamation differ.
//!
//! The functions here take the hybrid state as `hybrid`: the caller takes it
//! out of [`MappingScheme::Hybrid`] for the request and puts it back.

use super::log_blocks::{Hybrid, MappingScheme, unit_of};
use super::ssd::Ssd;
use super::types::{BlockState, Broken, Count, NONE};

mod merge;

impl Ssd {
    /// Physical unit at position `pos` of superblock `physical_sb`.
    #[inline(always)]
    fn sb_unit(&self, physical_sb: u32, pos: u32) -> u64 {
        unit_of(&self.geo, physical_sb, pos)
    }

    /// Valid units in superblock `physical_sb` (all dies).
    fn sb_valid(&self, physical_sb: u32) -> u64 {
        (0..self.geo.dies)
            .map(|d| self.blocks.valid(d * self.geo.blocks_per_die + physical_sb) as u64)
            .sum()
    }

    // ------------------------------------------------------------ the pool

    /// Take a free superblock (erasing it first if it holds stale data).
    fn take_superblock(&mut self, hybrid: &mut Hybrid, t: u64) -> Result<u32, Broken> {
        let bpd = self.geo.blocks_per_die;
        let Some(b0) = self.blocks.pop_free(0) else {
            return Err(Broken("hybrid: no free superblock"));
        };
        for d in 1..self.geo.dies as usize {
            if self.blocks.pop_free(d) != Some(d as u32 * bpd + b0) {
                return Err(Broken("hybrid: free lists out of step"));
            }
        }
        let physical_sb = b0;
        if hybrid.is_dirty(physical_sb) {
            self.erase_superblock(hybrid, physical_sb, t, false);
            // erase_superblock put it back at the end of the pool: take it again.
            for d in 0..self.geo.dies as usize {
                if self.blocks.pop_free_back(d) != Some(d as u32 * bpd + physical_sb) {
                    return Err(Broken("hybrid: free lists out of step"));
                }
            }
        }
        for d in 0..self.geo.dies {
            let b = d * bpd + physical_sb;
            self.blocks.set_state(b, BlockState::Mapped);
            self.blocks.set_last_write(b, t);
        }
        Ok(physical_sb)
    }

    /// Erase superblock `physical_sb` on every die (no earlier than `t`)
    /// and return it to the pool; with `lazy` it goes back unerased (erased
    /// when taken again, or in idle time).
    fn erase_superblock(&mut self, hybrid: &mut Hybrid, physical_sb: u32, t: u64, lazy: bool) {
        let bpd = self.geo.blocks_per_die;
        if lazy {
            for d in 0..self.geo.dies as usize {
                let b = d as u32 * bpd + physical_sb;
                self.blocks.push_free(d, b);
            }
            hybrid.set_dirty(physical_sb);
            return;
        }
        for d in 0..self.geo.dies as usize {
            let b = d as u32 * bpd + physical_sb;
            let start = t.max(self.timelines.die_busy(d));
            self.erase_block(d, b, start);
        }
        hybrid.set_clean(physical_sb);
    }

    /// Idle time: erase free superblocks holding stale data, where every
    /// die is idle long enough before `now`.
    pub(super) fn hybrid_idle(&mut self, now: u64) {
        let MappingScheme::Hybrid(mut hybrid) = std::mem::take(&mut self.scheme) else {
            return;
        };
        self.erase_stale_superblocks(&mut hybrid, now);
        self.scheme = MappingScheme::Hybrid(hybrid);
    }

    fn erase_stale_superblocks(&mut self, hybrid: &mut Hybrid, now: u64) {
        if hybrid.dirty_count() == 0 {
            return;
        }
        let bpd = self.geo.blocks_per_die;
        let n = self.blocks.free_len(0);
        for i in 0..n {
            let Some(&b0) = self.blocks.free_list(0).get(i) else {
                break;
            };
            if !hybrid.is_dirty(b0) {
                continue;
            }
            let busy = self.timelines.busiest_die();
            if busy + self.geo.t_erase > now {
                break;
            }
            for d in 0..self.geo.dies as usize {
                let b = d as u32 * bpd + b0;
                self.erase_block_in_place(d, b, busy);
            }
            hybrid.set_clean(b0);
            self.tally.add(Count::BgGcVictims, 1);
        }
    }

    /// Erase a block that stays where it is in its die's free list.
    fn erase_block_in_place(&mut self, die: usize, b: u32, start: u64) {
        self.erase_block(die, b, start);
        // erase_block appended it to the pool; it was already there.
        self.blocks.pop_free_back(die);
    }

    // --------------------------------------------------------------- logs

    /// Open a log block for `logical_sb`, merging the oldest logs as needed.
    fn open_log(
        &mut self,
        hybrid: &mut Hybrid,
        t: u64,
        logical_sb: u32,
        seq: bool,
    ) -> Result<u32, Broken> {
        loop {
            // Keep a free superblock for every logical block without a data
            // block (its merge will need one) plus one.
            if hybrid.below_max_logs() && self.blocks.free_len(0) > hybrid.reserve() {
                break;
            }
            let Some(victim) = hybrid.oldest_log() else {
                return Err(Broken("hybrid: no log block to merge"));
            };
            self.merge_log(hybrid, victim, t)?;
        }
        let physical_sb = self.take_superblock(hybrid, t)?;
        Ok(hybrid.open_log(physical_sb, logical_sb, seq))
    }

    /// Merge log `li`: switch, partial or full merges, then erase it.
    fn merge_log(&mut self, hybrid: &mut Hybrid, li: u32, t: u64) -> Result<(), Broken> {
        let log = hybrid.log(li)?.clone();
        let s = hybrid.sb_units();
        let upd = self.geo.units_per_dpage;
        let (physical_sb, next) = (log.physical_sb(), log.next());
        if log.seq()
            && log.logical_sbs().len() == 1
            && next.is_multiple_of(upd)
            && self.in_place(hybrid, log.logical_sbs()[0], physical_sb, next)
        {
            let logical_sb = log.logical_sbs()[0];
            if next < s {
                self.merge_fill(hybrid, logical_sb, physical_sb, next, t)?;
                self.tally.add(Count::MergesPartial, 1);
            } else {
                self.tally.add(Count::MergesSwitch, 1);
            }
            self.switch_log(hybrid, li, logical_sb, t)?;
            return Ok(());
        }
        // Every logical block with data in this log: full merge.
        let mut logical_sbs = hybrid.take_scratch();
        for pos in 0..next {
            if let Some(lpn) = self.mapping.lpn_at(self.sb_unit(physical_sb, pos)) {
                logical_sbs.push((lpn / s as u64) as u32);
            }
        }
        logical_sbs.sort_unstable();
        logical_sbs.dedup();
        for &logical_sb in &logical_sbs {
            self.merge_full(hybrid, logical_sb, t)?;
        }
        hybrid.put_scratch(logical_sbs);
        if self.sb_valid(physical_sb) != 0 {
            return Err(Broken("hybrid: data left in a merged log block"));
        }
        hybrid.drop_log(li)?;
        self.erase_superblock(hybrid, physical_sb, t, false);
        Ok(())
    }

    /// Whether every live unit of `logical_sb` at offsets `..upto` is at
    /// its offset in superblock `physical_sb` (a later write or merge may
    /// have moved some of them elsewhere).
    fn in_place(&self, hybrid: &Hybrid, logical_sb: u32, physical_sb: u32, upto: u32) -> bool {
        let base = logical_sb as u64 * hybrid.sb_units() as u64;
        (0..upto).all(|o| {
            let lpn = base + o as u64;
            lpn >= self.geo.logical_units || {
                let e = self.mapping.entry(lpn);
                e == 0 || e - 1 == self.sb_unit(physical_sb, o)
            }
        })
    }

    // -------------------------------------------------------------- writes

    /// The write path under hybrid mapping (see [`Ssd::write`]).
    pub(super) fn hybrid_write(
        &mut self,
        hybrid: &mut Hybrid,
        t: u64,
        offset: u64,
        len: u64,
    ) -> Result<u64, Broken> {
        let ub = self.geo.unit_bytes;
        let (first, last, link_start, link_end) = self.write_transfer(t, offset, len);
        let buffered = self.geo.buffer_units > 0;
        let mut done = link_end;
        let touched = hybrid.take_touched();
        hybrid.put_touched(touched);
        for (i, lpn) in (first..=last).enumerate() {
            let mut ready = (link_start + self.geo.link_ns((i as u64 + 1) * ub)).min(link_end);
            let partial = (lpn == first && !offset.is_multiple_of(ub))
                || (lpn == last && !(offset + len).is_multiple_of(ub));
            if partial && self.mapping.is_mapped(lpn) {
                self.tally.add(Count::RmwReads, 1);
                let (r, _) = self.read_group(ready, lpn, lpn);
                ready = ready.max(r);
            }
            if let Some(p) = self.place_in_log(hybrid, lpn, ready)?
                && !buffered
            {
                done = done.max(p);
            }
        }
        // Partly filled dpages are programmed at the end of the request
        // (padded); the log moves on to the next dpage.
        let touched = hybrid.take_touched();
        for &li in &touched {
            let Some(log) = hybrid.log_if_used(li) else {
                continue;
            };
            let (physical_sb, next, ready) = (log.physical_sb(), log.next(), log.ready());
            let upd = self.geo.units_per_dpage;
            if !next.is_multiple_of(upd) {
                let p = self.hybrid_program(self.sb_unit(physical_sb, next), ready, next % upd);
                if !buffered {
                    done = done.max(p);
                }
                let s = hybrid.sb_units();
                if hybrid.log_mut(li)?.pad(upd) >= s {
                    self.merge_log(hybrid, li, t)?;
                }
            }
        }
        hybrid.put_touched(touched);
        Ok(done)
    }

    /// Place host unit `lpn` (data at the controller at `ready`) in a log
    /// block; returns the program completion if it filled a dpage.
    fn place_in_log(
        &mut self,
        hybrid: &mut Hybrid,
        lpn: u64,
        ready: u64,
    ) -> Result<Option<u64>, Broken> {
        self.host_units_placed += 1;
        let s = hybrid.sb_units();
        let logical_sb = (lpn / s as u64) as u32;
        let off = (lpn % s as u64) as u32;
        let li = self.pick_log(hybrid, logical_sb, off, ready)?;
        let (physical_sb, pos) = {
            let log = hybrid.log_mut(li)?;
            let pos = log.append(off, ready);
            (log.physical_sb(), pos)
        };
        hybrid.touch(li);
        let ppn = self.sb_unit(physical_sb, pos);
        self.unmap(lpn);
        self.map_unit(lpn, ppn, self.geo.block_of_ppn(ppn));
        let upd = self.geo.units_per_dpage;
        if (pos + 1).is_multiple_of(upd) {
            let ready = hybrid.log(li)?.ready();
            let done = self.hybrid_program(ppn, ready, upd);
            hybrid.log_mut(li)?.programmed();
            if pos + 1 >= s {
                self.merge_log(hybrid, li, ready)?;
            }
            return Ok(Some(done));
        }
        Ok(None)
    }

    /// The log that takes a write of `logical_sb` at `off`.
    fn pick_log(
        &mut self,
        hybrid: &mut Hybrid,
        logical_sb: u32,
        off: u32,
        t: u64,
    ) -> Result<u32, Broken> {
        let s = hybrid.sb_units();
        let cur = hybrid.log_of(logical_sb);
        let cur_room = cur != NONE && hybrid.log(cur)?.next() < s;
        if off == 0 {
            // The start of a logical block: a sequential stream may follow.
            let continuing = cur_room && {
                let l = hybrid.log(cur)?;
                l.seq() && l.next() == 0
            };
            if !continuing {
                return self.open_log(hybrid, t, logical_sb, true);
            }
            return Ok(cur);
        }
        if cur_room {
            return Ok(cur);
        }
        // The shared random log, if it has room and may take this logical block.
        let assoc = self.geo.log_assoc as usize;
        let r = hybrid.random_log();
        if r != NONE {
            let l = hybrid.log(r)?;
            if l.next() < s && l.logical_sbs().len() < assoc {
                hybrid.join_random(r, logical_sb);
                return Ok(r);
            }
        }
        let li = self.open_log(hybrid, t, logical_sb, false)?;
        hybrid.set_random_log(li);
        Ok(li)
    }

    /// After a TRIM of `first..end`: data and log blocks left without valid
    /// data go back to the pool, to be erased on demand or when idle.
    pub(super) fn hybrid_trimmed(
        &mut self,
        hybrid: &mut Hybrid,
        _t: u64,
        first: u64,
        end: u64,
    ) -> Result<(), Broken> {
        let s = hybrid.sb_units() as u64;
        let (l0, l1) = ((first / s) as u32, end.div_ceil(s) as u32);
        for logical_sb in l0..l1.min(hybrid.logical_sbs()) {
            let d = hybrid.data_of(logical_sb);
            if d != NONE && self.sb_valid(d) == 0 {
                hybrid.clear_data(logical_sb);
                self.erase_superblock(hybrid, d, 0, true);
            }
        }
        let upd = self.geo.units_per_dpage;
        let empty: Vec<u32> = hybrid
            .order()
            .filter(|&li| {
                hybrid.log_if_used(li).is_some_and(|l| {
                    l.next().is_multiple_of(upd) && self.sb_valid(l.physical_sb()) == 0
                })
            })
            .collect();
        for li in empty {
            let physical_sb = hybrid.log(li)?.physical_sb();
            hybrid.drop_log(li)?;
            self.erase_superblock(hybrid, physical_sb, 0, true);
        }
        Ok(())
    }
}
