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
//!   reclaimed: a full sequential log *switches* (it becomes the data
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
//! The functions here take the hybrid state as `h`: the caller takes it
//! out of [`MappingScheme::Hybrid`] for the request and puts it back.

use super::log_blocks::{Hybrid, MappingScheme, unit_of};
use super::ssd::Ssd;
use super::types::{BlockState, Broken, NONE};

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
    fn take_superblock(&mut self, h: &mut Hybrid, t: u64) -> Result<u32, Broken> {
        let bpd = self.geo.blocks_per_die;
        let Some(b0) = self.blocks.pop_free(0) else {
            return Err(Broken("hybrid: no free superblock"));
        };
        for d in 1..self.geo.dies as usize {
            if self.blocks.pop_free(d) != Some(d as u32 * bpd + b0) {
                return Err(Broken("hybrid: free lists out of step"));
            }
        }
        let psb = b0;
        if h.is_dirty(psb) {
            self.erase_superblock(h, psb, t, false);
            // erase_superblock put it back at the end of the pool: take it again.
            for d in 0..self.geo.dies as usize {
                if self.blocks.pop_free_back(d) != Some(d as u32 * bpd + psb) {
                    return Err(Broken("hybrid: free lists out of step"));
                }
            }
        }
        for d in 0..self.geo.dies {
            let b = d * bpd + psb;
            self.blocks.set_state(b, BlockState::Mapped);
            self.blocks.set_last_write(b, t);
        }
        Ok(psb)
    }

    /// Erase superblock `physical_sb` on every die (no earlier than `t`)
    /// and return it to the pool; with `lazy` it goes back unerased (erased
    /// when taken again, or in idle time).
    fn erase_superblock(&mut self, h: &mut Hybrid, physical_sb: u32, t: u64, lazy: bool) {
        let bpd = self.geo.blocks_per_die;
        if lazy {
            for d in 0..self.geo.dies as usize {
                let b = d as u32 * bpd + physical_sb;
                self.blocks.push_free(d, b);
            }
            h.set_dirty(physical_sb);
            return;
        }
        for d in 0..self.geo.dies as usize {
            let b = d as u32 * bpd + physical_sb;
            let start = t.max(self.timelines.die_busy(d));
            self.erase_block(d, b, start);
        }
        h.set_clean(physical_sb);
    }

    /// Idle time: erase free superblocks holding stale data, where every
    /// die is idle long enough before `now`.
    pub(super) fn hybrid_idle(&mut self, now: u64) {
        let MappingScheme::Hybrid(mut h) = std::mem::take(&mut self.scheme) else {
            return;
        };
        self.erase_stale_superblocks(&mut h, now);
        self.scheme = MappingScheme::Hybrid(h);
    }

    fn erase_stale_superblocks(&mut self, h: &mut Hybrid, now: u64) {
        if h.dirty_count() == 0 {
            return;
        }
        let bpd = self.geo.blocks_per_die;
        let n = self.blocks.free_len(0);
        for i in 0..n {
            let Some(&b0) = self.blocks.free_list(0).get(i) else {
                break;
            };
            if !h.is_dirty(b0) {
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
            h.set_clean(b0);
            self.raw.bg_gc_victims += 1;
        }
    }

    /// Erase a block that stays where it is in its die's free list.
    fn erase_block_in_place(&mut self, die: usize, b: u32, start: u64) {
        self.erase_block(die, b, start);
        // erase_block appended it to the pool; it was already there.
        self.blocks.pop_free_back(die);
    }

    // --------------------------------------------------------------- logs

    /// Open a log block for `logical_sb`, reclaiming the oldest logs as needed.
    fn open_log(
        &mut self,
        h: &mut Hybrid,
        t: u64,
        logical_sb: u32,
        seq: bool,
    ) -> Result<u32, Broken> {
        loop {
            // Keep a free superblock for every logical block without a data
            // block (its merge will need one) plus one.
            if h.below_max_logs() && self.blocks.free_len(0) > h.reserve() {
                break;
            }
            let Some(victim) = h.oldest_log() else {
                return Err(Broken("hybrid: no log block to reclaim"));
            };
            self.reclaim_log(h, victim, t)?;
        }
        let psb = self.take_superblock(h, t)?;
        Ok(h.open_log(psb, logical_sb, seq))
    }

    /// Reclaim log `li`: switch, partial or full merges, then erase it.
    fn reclaim_log(&mut self, h: &mut Hybrid, li: u32, t: u64) -> Result<(), Broken> {
        let log = h.log(li)?.clone();
        let s = h.sb_units();
        let upd = self.geo.units_per_dpage;
        if log.seq
            && log.logical_sbs.len() == 1
            && log.next.is_multiple_of(upd)
            && self.in_place(h, log.logical_sbs[0], log.physical_sb, log.next)
        {
            let lsb = log.logical_sbs[0];
            if log.next < s {
                self.merge_fill(h, lsb, log.physical_sb, log.next, t)?;
                self.raw.merges_partial += 1;
            } else {
                self.raw.merges_switch += 1;
            }
            self.switch_log(h, li, lsb, t)?;
            return Ok(());
        }
        // Every logical block with data in this log: full merge.
        let mut lsbs = h.take_scratch();
        for pos in 0..log.next {
            if let Some(lpn) = self.mapping.lpn_at(self.sb_unit(log.physical_sb, pos)) {
                lsbs.push((lpn / s as u64) as u32);
            }
        }
        lsbs.sort_unstable();
        lsbs.dedup();
        for &lsb in &lsbs {
            self.merge_full(h, lsb, t)?;
        }
        h.put_scratch(lsbs);
        if self.sb_valid(log.physical_sb) != 0 {
            return Err(Broken("hybrid: data left in a merged log block"));
        }
        h.drop_log(li)?;
        self.erase_superblock(h, log.physical_sb, t, false);
        Ok(())
    }

    /// Whether every live unit of `logical_sb` at offsets `..upto` is at
    /// its offset in superblock `physical_sb` (a later write or merge may
    /// have moved some of them elsewhere).
    fn in_place(&self, h: &Hybrid, logical_sb: u32, physical_sb: u32, upto: u32) -> bool {
        let base = logical_sb as u64 * h.sb_units() as u64;
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
        h: &mut Hybrid,
        t: u64,
        offset: u64,
        len: u64,
    ) -> Result<u64, Broken> {
        let ub = self.geo.unit_bytes;
        let (first, last, link_start, link_end) = self.write_transfer(t, offset, len);
        let buffered = self.geo.buffer_units > 0;
        let mut done = link_end;
        let touched = h.take_touched();
        h.put_touched(touched);
        for (i, lpn) in (first..=last).enumerate() {
            let mut ready = (link_start + self.geo.link_ns((i as u64 + 1) * ub)).min(link_end);
            let partial = (lpn == first && !offset.is_multiple_of(ub))
                || (lpn == last && !(offset + len).is_multiple_of(ub));
            if partial && self.mapping.is_mapped(lpn) {
                self.raw.rmw_reads += 1;
                let (r, _) = self.read_group(ready, lpn, lpn);
                ready = ready.max(r);
            }
            if let Some(p) = self.place_in_log(h, lpn, ready)?
                && !buffered
            {
                done = done.max(p);
            }
        }
        // Partly filled dpages are programmed at the end of the request
        // (padded); the log moves on to the next dpage.
        let touched = h.take_touched();
        for &li in &touched {
            let Some(log) = h.log_if_used(li) else {
                continue;
            };
            let (psb, next, ready) = (log.physical_sb, log.next, log.ready);
            let upd = self.geo.units_per_dpage;
            if !next.is_multiple_of(upd) {
                let p = self.hybrid_program(self.sb_unit(psb, next), ready, next % upd);
                if !buffered {
                    done = done.max(p);
                }
                let s = h.sb_units();
                let log = h.log_mut(li)?;
                log.next = (next / upd + 1) * upd;
                log.ready = 0;
                // The padded positions hold no unit at its offset: the log
                // can no longer switch or be completed by a partial merge.
                log.seq = false;
                if log.next >= s {
                    self.reclaim_log(h, li, t)?;
                }
            }
        }
        h.put_touched(touched);
        Ok(done)
    }

    /// Place host unit `lpn` (data at the controller at `ready`) in a log
    /// block; returns the program completion if it filled a dpage.
    fn place_in_log(
        &mut self,
        h: &mut Hybrid,
        lpn: u64,
        ready: u64,
    ) -> Result<Option<u64>, Broken> {
        let s = h.sb_units();
        let lsb = (lpn / s as u64) as u32;
        let off = (lpn % s as u64) as u32;
        let li = self.pick_log(h, lsb, off, ready)?;
        let (psb, pos) = {
            let log = h.log_mut(li)?;
            let pos = log.next;
            if log.seq && pos != off {
                log.seq = false;
            }
            log.next += 1;
            log.ready = log.ready.max(ready);
            (log.physical_sb, pos)
        };
        h.touch(li);
        let ppn = self.sb_unit(psb, pos);
        self.unmap(lpn);
        self.map_unit(lpn, ppn, self.geo.block_of_ppn(ppn));
        let upd = self.geo.units_per_dpage;
        if (pos + 1).is_multiple_of(upd) {
            let ready = h.log(li)?.ready;
            let done = self.hybrid_program(ppn, ready, upd);
            h.log_mut(li)?.ready = 0;
            if pos + 1 >= s {
                self.reclaim_log(h, li, ready)?;
            }
            return Ok(Some(done));
        }
        Ok(None)
    }

    /// The log that takes a write of `logical_sb` at `off`.
    fn pick_log(
        &mut self,
        h: &mut Hybrid,
        logical_sb: u32,
        off: u32,
        t: u64,
    ) -> Result<u32, Broken> {
        let s = h.sb_units();
        let cur = h.log_of(logical_sb);
        let cur_room = cur != NONE && h.log(cur)?.next < s;
        if off == 0 {
            // The start of a logical block: a sequential stream may follow.
            let continuing = cur_room && {
                let l = h.log(cur)?;
                l.seq && l.next == 0
            };
            if !continuing {
                return self.open_log(h, t, logical_sb, true);
            }
            return Ok(cur);
        }
        if cur_room {
            return Ok(cur);
        }
        // The shared random log, if it has room and may take this logical block.
        let assoc = self.geo.log_assoc as usize;
        let r = h.random_log();
        if r != NONE {
            let l = h.log(r)?;
            if l.next < s && l.logical_sbs.len() < assoc {
                h.join_random(r, logical_sb);
                return Ok(r);
            }
        }
        let li = self.open_log(h, t, logical_sb, false)?;
        h.set_random_log(li);
        Ok(li)
    }

    /// After a TRIM of `first..end`: data and log blocks left without valid
    /// data go back to the pool, to be erased on demand or when idle.
    pub(super) fn hybrid_trimmed(
        &mut self,
        h: &mut Hybrid,
        _t: u64,
        first: u64,
        end: u64,
    ) -> Result<(), Broken> {
        let s = h.sb_units() as u64;
        let (l0, l1) = ((first / s) as u32, end.div_ceil(s) as u32);
        for lsb in l0..l1.min(h.logical_sbs()) {
            let d = h.data_of(lsb);
            if d != NONE && self.sb_valid(d) == 0 {
                h.clear_data(lsb);
                self.erase_superblock(h, d, 0, true);
            }
        }
        let upd = self.geo.units_per_dpage;
        let empty: Vec<u32> = h
            .order()
            .filter(|&li| {
                h.log_if_used(li).is_some_and(|l| {
                    l.next.is_multiple_of(upd) && self.sb_valid(l.physical_sb) == 0
                })
            })
            .collect();
        for li in empty {
            let psb = h.log(li)?.physical_sb;
            h.drop_log(li)?;
            self.erase_superblock(h, psb, 0, true);
        }
        Ok(())
    }
}
