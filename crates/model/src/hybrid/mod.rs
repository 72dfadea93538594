//! Hybrid log-block mapping (BAST / FAST / KAST family), for 2008-2009
//! controllers that kept only a block-level map plus a few page-mapped
//! log blocks.
//!
//! - A *superblock* (psb `k`) is block `k` of every die; unit position `s`
//!   of a superblock is slot `s % upd` of dpage `s / upd`, and dpages are
//!   striped over the dies (`die = dpage % dies`), so one logical block
//!   written in order programs all dies in parallel.
//! - Logical block (lsb) `L` holds the units `L × S .. (L + 1) × S`. Its
//!   *data block* keeps unit `L × S + off` at position `off`.
//! - Writes go to *log blocks*, appended in arrival order. A write at
//!   offset 0 opens a *sequential* log for its lsb; other writes go to the
//!   lsb's current log, or to the shared random log, which takes writes
//!   for up to `log_associativity` lsbs (1 = BAST; more = write-combining).
//! - When a log is full, or the pool needs a log block, the oldest log is
//!   reclaimed: a full sequential log *switches* (it becomes the data
//!   block, the old one is erased), a sequential prefix gets the rest
//!   copied in (*partial merge*), anything else costs a *full merge* of
//!   every lsb with data in it: every unit of the lsb read from wherever it
//!   is and programmed, in order, into a new block; the old data block and
//!   the emptied log are erased.
//!
//! All of it is NAND work reserved on the die and channel timelines, so a
//! host write that needs a log block waits for the merges, and the write
//! buffer fills behind them. The mapping tables (l2p / p2l) and valid
//! counts are the page FTL's, so reads, TRIM, invariants and persistence
//! work unchanged; only placement and reclamation differ.

use std::collections::VecDeque;

use super::geo::Geo;
use super::ssd::{BlockState, Broken, NONE, Ssd};

mod merge;

/// One log block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Log {
    /// Its superblock.
    pub(crate) psb: u32,
    /// Next position to write.
    pub(crate) next: u32,
    /// Written in order from offset 0 for a single lsb so far.
    pub(crate) seq: bool,
    /// The lsbs it has taken writes for (at most the associativity).
    pub(crate) lsbs: Vec<u32>,
    /// Latest time data placed in its open dpage is at the controller.
    pub(crate) ready: u64,
}

/// Hybrid mapping state.
#[derive(Debug, Clone)]
pub(crate) struct Hybrid {
    /// Units per superblock.
    pub(crate) sb_units: u32,
    /// Logical blocks.
    pub(crate) lsbs: u32,
    /// lsb -> data superblock (NONE = none: all its units in logs or unmapped).
    pub(crate) data: Vec<u32>,
    pub(crate) data_count: u32,
    /// Log slots (None = unused).
    pub(crate) logs: Vec<Option<Log>>,
    /// Log slots in use, oldest first (the reclaim order).
    pub(crate) order: VecDeque<u32>,
    /// lsb -> the log slot that last took a write for it (NONE).
    pub(crate) log_of: Vec<u32>,
    /// The log slot taking random writes (NONE).
    pub(crate) rand_log: u32,
    /// Log blocks at most.
    pub(crate) max_logs: u32,
    /// Free superblocks holding stale data, erased on demand or when idle.
    pub(crate) dirty: Vec<bool>,
    pub(crate) dirty_count: u32,
    /// Logs written by the request in progress (scratch).
    touched: Vec<u32>,
    /// Scratch for merges.
    scratch: Vec<u32>,
}

impl Hybrid {
    pub(crate) fn new(g: &Geo) -> Hybrid {
        let sb_units = g.dies * g.units_per_block;
        let lsbs = g.logical_units.div_ceil(sb_units as u64) as u32;
        let spare = g.blocks_per_die.saturating_sub(lsbs + 1).max(1);
        let max_logs = if g.max_log_blocks > 0 {
            g.max_log_blocks.min(spare)
        } else {
            spare
        };
        Hybrid {
            sb_units,
            lsbs,
            data: vec![NONE; lsbs as usize],
            data_count: 0,
            logs: Vec::new(),
            order: VecDeque::new(),
            log_of: vec![NONE; lsbs as usize],
            rand_log: NONE,
            max_logs,
            dirty: vec![false; g.blocks_per_die as usize],
            dirty_count: 0,
            touched: Vec::new(),
            scratch: Vec::new(),
        }
    }

    fn log(&self, li: u32) -> Result<&Log, Broken> {
        self.logs
            .get(li as usize)
            .and_then(Option::as_ref)
            .ok_or(Broken("hybrid: log slot not in use"))
    }

    fn log_mut(&mut self, li: u32) -> Result<&mut Log, Broken> {
        self.logs
            .get_mut(li as usize)
            .and_then(Option::as_mut)
            .ok_or(Broken("hybrid: log slot not in use"))
    }
}

impl Ssd {
    fn hy(&self) -> &Hybrid {
        self.hy.as_deref().expect("hybrid mapping state")
    }

    fn hy_mut(&mut self) -> &mut Hybrid {
        self.hy.as_deref_mut().expect("hybrid mapping state")
    }

    /// Physical unit at position `s` of superblock `psb`.
    #[inline]
    pub(crate) fn hy_ppn(&self, psb: u32, s: u32) -> u64 {
        let g = &self.geo;
        let (dp, k) = g.split_dpage(s);
        let (die, page) = g.split_dies(dp);
        g.ppn(die * g.blocks_per_die + psb, page, k)
    }

    /// Superblock and position of physical unit `ppn`.
    #[inline]
    pub(crate) fn hy_pos(&self, ppn: u64) -> (u32, u32) {
        let g = &self.geo;
        let block = g.block_of_ppn(ppn);
        let die = g.die_of_block(block);
        let within = (ppn - block as u64 * g.units_per_block as u64) as u32;
        let (page, k) = g.split_dpage(within);
        (
            block % g.blocks_per_die,
            (page * g.dies + die) * g.units_per_dpage + k,
        )
    }

    /// Valid units in superblock `psb` (all dies).
    fn hy_valid(&self, psb: u32) -> u64 {
        (0..self.geo.dies)
            .map(|d| self.valid[(d * self.geo.blocks_per_die + psb) as usize] as u64)
            .sum()
    }

    // ------------------------------------------------------------ the pool

    /// Take a free superblock (erasing it first if it holds stale data).
    fn hy_alloc(&mut self, t: u64) -> Result<u32, Broken> {
        let bpd = self.geo.blocks_per_die;
        let Some(b0) = self.free[0].pop_front() else {
            return Err(Broken("hybrid: no free superblock"));
        };
        for d in 1..self.geo.dies as usize {
            if self.free[d].pop_front() != Some(d as u32 * bpd + b0) {
                return Err(Broken("hybrid: free lists out of step"));
            }
        }
        let psb = b0;
        if self.hy().dirty[psb as usize] {
            self.hy_erase(psb, t, false);
            // hy_erase put it back at the end of the pool: take it again.
            for d in 0..self.geo.dies as usize {
                if self.free[d].pop_back() != Some(d as u32 * bpd + psb) {
                    return Err(Broken("hybrid: free lists out of step"));
                }
            }
        }
        for d in 0..self.geo.dies {
            let b = d * bpd + psb;
            self.state[b as usize] = BlockState::Mapped as u8;
            self.last_write[b as usize] = t;
        }
        Ok(psb)
    }

    /// Erase superblock `psb` on every die (no earlier than `t`) and return
    /// it to the pool; with `lazy` it goes back unerased (erased when taken
    /// again, or in idle time).
    fn hy_erase(&mut self, psb: u32, t: u64, lazy: bool) {
        let bpd = self.geo.blocks_per_die;
        if lazy {
            for d in 0..self.geo.dies as usize {
                let b = d as u32 * bpd + psb;
                self.state[b as usize] = BlockState::Free as u8;
                self.free[d].push_back(b);
            }
            let h = self.hy_mut();
            if !h.dirty[psb as usize] {
                h.dirty[psb as usize] = true;
                h.dirty_count += 1;
            }
            return;
        }
        for d in 0..self.geo.dies as usize {
            let b = d as u32 * bpd + psb;
            let start = t.max(self.die_busy[d]);
            self.erase_block(d, b, start);
        }
        let h = self.hy_mut();
        if h.dirty[psb as usize] {
            h.dirty[psb as usize] = false;
            h.dirty_count -= 1;
        }
    }

    /// Idle time: erase free superblocks holding stale data, where every
    /// die is idle long enough before `now`.
    pub(super) fn hy_idle(&mut self, now: u64) {
        if self.hy().dirty_count == 0 {
            return;
        }
        let bpd = self.geo.blocks_per_die;
        let n = self.free[0].len();
        for i in 0..n {
            let Some(&b0) = self.free[0].get(i) else {
                break;
            };
            if !self.hy().dirty[b0 as usize] {
                continue;
            }
            let busy = self.die_busy.iter().copied().max().unwrap_or(0);
            if busy + self.geo.t_erase > now {
                break;
            }
            for d in 0..self.geo.dies as usize {
                let b = d as u32 * bpd + b0;
                self.erase_block_in_place(d, b, busy);
            }
            let h = self.hy_mut();
            h.dirty[b0 as usize] = false;
            h.dirty_count -= 1;
            self.raw.bg_gc_victims += 1;
        }
    }

    /// Erase a block that stays where it is in its die's free list.
    fn erase_block_in_place(&mut self, die: usize, b: u32, start: u64) {
        self.erase_block(die, b, start);
        // erase_block appended it to the pool; it was already there.
        self.free[die].pop_back();
    }

    // --------------------------------------------------------------- logs

    /// Open a log block for `lsb`, reclaiming the oldest logs as needed.
    fn hy_new_log(&mut self, t: u64, lsb: u32, seq: bool) -> Result<u32, Broken> {
        loop {
            let h = self.hy();
            // Keep a free superblock for every lsb without a data block
            // (its merge will need one) plus one.
            let reserve = (h.lsbs - h.data_count) as usize + 1;
            if (h.order.len() as u32) < h.max_logs && self.free[0].len() > reserve {
                break;
            }
            let Some(&victim) = h.order.front() else {
                return Err(Broken("hybrid: no log block to reclaim"));
            };
            self.hy_reclaim(victim, t)?;
        }
        let psb = self.hy_alloc(t)?;
        let h = self.hy_mut();
        let log = Log {
            psb,
            next: 0,
            seq,
            lsbs: vec![lsb],
            ready: 0,
        };
        let li = match h.logs.iter().position(Option::is_none) {
            Some(i) => {
                h.logs[i] = Some(log);
                i as u32
            }
            None => {
                h.logs.push(Some(log));
                (h.logs.len() - 1) as u32
            }
        };
        h.order.push_back(li);
        h.log_of[lsb as usize] = li;
        Ok(li)
    }

    /// Reclaim log `li`: switch, partial or full merges, then erase it.
    fn hy_reclaim(&mut self, li: u32, t: u64) -> Result<(), Broken> {
        let log = self.hy().log(li)?.clone();
        let s = self.hy().sb_units;
        let upd = self.geo.units_per_dpage;
        if log.seq
            && log.lsbs.len() == 1
            && log.next.is_multiple_of(upd)
            && self.hy_in_place(log.lsbs[0], log.psb, log.next)
        {
            let lsb = log.lsbs[0];
            if log.next < s {
                self.hy_fill_from(lsb, log.psb, log.next, t)?;
                self.raw.merges_partial += 1;
            } else {
                self.raw.merges_switch += 1;
            }
            self.hy_switch(li, lsb, t)?;
            return Ok(());
        }
        // Every lsb with data in this log: full merge.
        let mut lsbs = std::mem::take(&mut self.hy_mut().scratch);
        lsbs.clear();
        for pos in 0..log.next {
            if let Some(lpn) = self.lpn_at(self.hy_ppn(log.psb, pos)) {
                lsbs.push((lpn / s as u64) as u32);
            }
        }
        lsbs.sort_unstable();
        lsbs.dedup();
        for &lsb in &lsbs {
            self.hy_merge_full(lsb, t)?;
        }
        self.hy_mut().scratch = lsbs;
        if self.hy_valid(log.psb) != 0 {
            return Err(Broken("hybrid: data left in a merged log block"));
        }
        self.hy_drop_log(li)?;
        self.hy_erase(log.psb, t, false);
        Ok(())
    }

    /// Whether every live unit of `lsb` at offsets `..upto` is at its
    /// offset in superblock `psb` (a later write or merge may have moved
    /// some of them elsewhere).
    fn hy_in_place(&self, lsb: u32, psb: u32, upto: u32) -> bool {
        let base = lsb as u64 * self.hy().sb_units as u64;
        (0..upto).all(|o| {
            let lpn = base + o as u64;
            lpn >= self.geo.logical_units || {
                let e = self.l2p.get(lpn as usize);
                e == 0 || e - 1 == self.hy_ppn(psb, o)
            }
        })
    }

    /// Forget log slot `li` (its superblock is the caller's).
    fn hy_drop_log(&mut self, li: u32) -> Result<(), Broken> {
        let h = self.hy_mut();
        let log = h
            .logs
            .get_mut(li as usize)
            .and_then(Option::take)
            .ok_or(Broken("hybrid: log slot not in use"))?;
        for &l in &log.lsbs {
            if h.log_of[l as usize] == li {
                h.log_of[l as usize] = NONE;
            }
        }
        if let Some(i) = h.order.iter().position(|&x| x == li) {
            h.order.remove(i);
        }
        if h.rand_log == li {
            h.rand_log = NONE;
        }
        Ok(())
    }

    // -------------------------------------------------------------- writes

    /// The write path under hybrid mapping (see [`Ssd::write`]).
    pub(super) fn hy_write(&mut self, t: u64, offset: u64, len: u64) -> Result<u64, Broken> {
        let ub = self.geo.unit_bytes;
        let (first, last, link_start, link_end) = self.write_transfer(t, offset, len);
        let buffered = self.geo.buffer_units > 0;
        let mut done = link_end;
        self.hy_mut().touched.clear();
        for (i, lpn) in (first..=last).enumerate() {
            let mut ready = (link_start + self.geo.link_ns((i as u64 + 1) * ub)).min(link_end);
            let partial = (lpn == first && !offset.is_multiple_of(ub))
                || (lpn == last && !(offset + len).is_multiple_of(ub));
            if partial && self.l2p.get(lpn as usize) != 0 {
                self.raw.rmw_reads += 1;
                let (r, _) = self.read_group(ready, lpn, lpn);
                ready = ready.max(r);
            }
            if let Some(p) = self.hy_place(lpn, ready)?
                && !buffered
            {
                done = done.max(p);
            }
        }
        // Partly filled dpages are programmed at the end of the request
        // (padded); the log moves on to the next dpage.
        let touched = std::mem::take(&mut self.hy_mut().touched);
        for &li in &touched {
            let Some(log) = self.hy().logs.get(li as usize).and_then(Option::as_ref) else {
                continue;
            };
            let (psb, next, ready) = (log.psb, log.next, log.ready);
            let upd = self.geo.units_per_dpage;
            if !next.is_multiple_of(upd) {
                let p = self.hy_program(self.hy_ppn(psb, next), ready, next % upd);
                if !buffered {
                    done = done.max(p);
                }
                let s = self.hy().sb_units;
                let log = self.hy_mut().log_mut(li)?;
                log.next = (next / upd + 1) * upd;
                log.ready = 0;
                // The padded positions hold no unit at its offset: the log
                // can no longer switch or be completed by a partial merge.
                log.seq = false;
                if log.next >= s {
                    self.hy_reclaim(li, t)?;
                }
            }
        }
        self.hy_mut().touched = touched;
        Ok(done)
    }

    /// Place host unit `lpn` (data at the controller at `ready`) in a log
    /// block; returns the program completion if it filled a dpage.
    fn hy_place(&mut self, lpn: u64, ready: u64) -> Result<Option<u64>, Broken> {
        let s = self.hy().sb_units;
        let lsb = (lpn / s as u64) as u32;
        let off = (lpn % s as u64) as u32;
        let li = self.hy_pick_log(lsb, off, ready)?;
        let (psb, pos) = {
            let log = self.hy_mut().log_mut(li)?;
            let pos = log.next;
            if log.seq && pos != off {
                log.seq = false;
            }
            log.next += 1;
            log.ready = log.ready.max(ready);
            (log.psb, pos)
        };
        {
            let h = self.hy_mut();
            if !h.touched.contains(&li) {
                h.touched.push(li);
            }
        }
        let ppn = self.hy_ppn(psb, pos);
        self.unmap(lpn);
        self.map_unit(lpn, ppn, self.geo.block_of_ppn(ppn));
        let upd = self.geo.units_per_dpage;
        if (pos + 1).is_multiple_of(upd) {
            let ready = self.hy().log(li)?.ready;
            let done = self.hy_program(ppn, ready, upd);
            self.hy_mut().log_mut(li)?.ready = 0;
            if pos + 1 >= s {
                self.hy_reclaim(li, ready)?;
            }
            return Ok(Some(done));
        }
        Ok(None)
    }

    /// The log that takes a write of `lsb` at `off`.
    fn hy_pick_log(&mut self, lsb: u32, off: u32, t: u64) -> Result<u32, Broken> {
        let s = self.hy().sb_units;
        let cur = self.hy().log_of[lsb as usize];
        let cur_room = cur != NONE && self.hy().log(cur)?.next < s;
        if off == 0 {
            // The start of a logical block: a sequential stream may follow.
            let continuing = cur_room && {
                let l = self.hy().log(cur)?;
                l.seq && l.next == 0
            };
            if !continuing {
                return self.hy_new_log(t, lsb, true);
            }
            return Ok(cur);
        }
        if cur_room {
            return Ok(cur);
        }
        // The shared random log, if it has room and may take this lsb.
        let assoc = self.geo.log_assoc as usize;
        let r = self.hy().rand_log;
        if r != NONE {
            let l = self.hy().log(r)?;
            if l.next < s && l.lsbs.len() < assoc {
                let h = self.hy_mut();
                if let Some(Some(l)) = h.logs.get_mut(r as usize) {
                    l.lsbs.push(lsb);
                }
                h.log_of[lsb as usize] = r;
                return Ok(r);
            }
        }
        let li = self.hy_new_log(t, lsb, false)?;
        self.hy_mut().rand_log = li;
        Ok(li)
    }

    /// After a TRIM of `first..end`: data and log blocks left without valid
    /// data go back to the pool, to be erased on demand or when idle.
    pub(super) fn hy_trimmed(&mut self, _t: u64, first: u64, end: u64) -> Result<(), Broken> {
        let s = self.hy().sb_units as u64;
        let (l0, l1) = ((first / s) as u32, end.div_ceil(s) as u32);
        for lsb in l0..l1.min(self.hy().lsbs) {
            let d = self.hy().data[lsb as usize];
            if d != NONE && self.hy_valid(d) == 0 {
                let h = self.hy_mut();
                h.data[lsb as usize] = NONE;
                h.data_count -= 1;
                self.hy_erase(d, 0, true);
            }
        }
        let empty: Vec<u32> = self
            .hy()
            .order
            .iter()
            .copied()
            .filter(|&li| {
                self.hy()
                    .logs
                    .get(li as usize)
                    .and_then(Option::as_ref)
                    .is_some_and(|l| {
                        l.next.is_multiple_of(self.geo.units_per_dpage) && self.hy_valid(l.psb) == 0
                    })
            })
            .collect();
        for li in empty {
            let psb = self.hy().log(li)?.psb;
            self.hy_drop_log(li)?;
            self.hy_erase(psb, 0, true);
        }
        Ok(())
    }

    // ---------------------------------------------------------- invariants

    /// The hybrid structures agree with the block table and the mapping.
    pub(super) fn hy_check(&self) -> Result<(), String> {
        let Some(h) = self.hy.as_deref() else {
            return Ok(());
        };
        let g = &self.geo;
        let bpd = g.blocks_per_die;
        let mut owner = vec![NONE; bpd as usize];
        let mut data = 0;
        for (lsb, &psb) in h.data.iter().enumerate() {
            if psb == NONE {
                continue;
            }
            data += 1;
            if psb >= bpd || std::mem::replace(&mut owner[psb as usize], lsb as u32) != NONE {
                return Err(format!(
                    "lsb {lsb}: data superblock {psb} invalid or shared"
                ));
            }
        }
        if data != h.data_count {
            return Err(format!("{data} data blocks, counter {}", h.data_count));
        }
        let mut in_order = 0;
        for (li, l) in h.logs.iter().enumerate() {
            let Some(l) = l else { continue };
            in_order += 1;
            if !h.order.contains(&(li as u32)) {
                return Err(format!("log {li} not in the reclaim order"));
            }
            if l.psb >= bpd || std::mem::replace(&mut owner[l.psb as usize], u32::MAX - 1) != NONE {
                return Err(format!("log {li}: superblock {} invalid or shared", l.psb));
            }
            if l.next > h.sb_units {
                return Err(format!("log {li} written past its end"));
            }
            if let Some(p) = (l.next..h.sb_units).find(|&p| self.live.get(self.hy_ppn(l.psb, p))) {
                return Err(format!("log {li}: data after its write position at {p}"));
            }
        }
        if in_order != h.order.len() {
            return Err("reclaim order lists unused log slots".into());
        }
        for psb in 0..bpd {
            let used = owner[psb as usize] != NONE;
            for d in 0..g.dies {
                let b = (d * bpd + psb) as usize;
                let mapped = self.state[b] == BlockState::Mapped as u8;
                if used != mapped {
                    return Err(format!(
                        "block {b}: state {} but superblock in use {used}",
                        self.state[b]
                    ));
                }
            }
        }
        for d in 1..g.dies as usize {
            let a = self.free[0].iter().map(|&b| b % bpd);
            if !a.eq(self.free[d].iter().map(|&b| b % bpd)) {
                return Err(format!("free list of die {d} out of step with die 0"));
            }
        }
        // Every mapped unit sits in its data block at its offset, or in a log.
        let s = h.sb_units as u64;
        self.l2p.try_for_each_nonzero(|lpn, e| {
            let (psb, pos) = self.hy_pos(e - 1);
            let lsb = (lpn as u64 / s) as usize;
            let o = owner[psb as usize];
            if o == u32::MAX - 1 {
                return Ok(());
            }
            if o as usize != lsb || pos as u64 != lpn as u64 % s {
                return Err(format!(
                    "unit {lpn} at superblock {psb} position {pos}, not its place"
                ));
            }
            Ok(())
        })
    }
}
