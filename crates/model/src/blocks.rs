//! The block pool: per-block valid counts, erase counts, states and ages,
//! the valid-count buckets of full blocks (how GC finds victims), the free
//! lists, and the write points of each die with the host cursor.
//!
//! What is done with them (placing units, GC, erases) is the drive's
//! (`write_point.rs`, `gc.rs`); this module keeps them consistent: a full
//! block is always in the bucket of its valid count, a free block in its
//! die's free list.

use std::collections::VecDeque;

use super::geo::Geo;
use super::types::{BlockState, NONE, Stream};

/// An open block being filled dpage by dpage. Changed only by [`Blocks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WritePoint {
    /// Global block id, or NONE.
    block: u32,
    /// Next dpage to fill in the block.
    page: u32,
    /// Units already placed in that dpage.
    slot: u32,
    /// Latest time at which data placed in the open dpage is at the controller.
    ready_ns: u64,
    /// Data reduction: compressed size of the units in the open dpage, in
    /// 1/256 of a unit (0 without reduction).
    compressed_fill: u32,
    /// Units placed in the block so far (its slots used, with reduction).
    placed: u32,
}

impl WritePoint {
    pub(crate) const EMPTY: WritePoint = WritePoint {
        block: NONE,
        page: 0,
        slot: 0,
        ready_ns: 0,
        compressed_fill: 0,
        placed: 0,
    };

    /// A write point loaded from a saved state (its open dpage's data is
    /// ready at once).
    pub(crate) fn saved(
        block: u32,
        page: u32,
        slot: u32,
        compressed_fill: u32,
        placed: u32,
    ) -> WritePoint {
        WritePoint {
            block,
            page,
            slot,
            ready_ns: 0,
            compressed_fill,
            placed,
        }
    }

    /// Its block, or NONE.
    #[inline(always)]
    pub(crate) fn block(&self) -> u32 {
        self.block
    }

    /// Next dpage to fill in the block.
    #[inline(always)]
    pub(crate) fn page(&self) -> u32 {
        self.page
    }

    /// Units already placed in that dpage.
    #[inline(always)]
    pub(crate) fn slot(&self) -> u32 {
        self.slot
    }

    /// When the data placed in the open dpage is at the controller.
    #[inline(always)]
    pub(crate) fn ready_ns(&self) -> u64 {
        self.ready_ns
    }

    /// Compressed size of the units in the open dpage (data reduction).
    #[inline(always)]
    pub(crate) fn compressed_fill(&self) -> u32 {
        self.compressed_fill
    }

    /// Units placed in the block so far.
    #[inline(always)]
    pub(crate) fn placed(&self) -> u32 {
        self.placed
    }
}

/// The saved part of the block pool (see [`Blocks::restore`]).
pub(crate) struct SavedBlocks {
    pub(crate) erase_count: Vec<u32>,
    pub(crate) state: Vec<u8>,
    pub(crate) last_write: Vec<u64>,
    pub(crate) write_points: Vec<[WritePoint; 2]>,
    pub(crate) free: Vec<VecDeque<u32>>,
    pub(crate) cursor: u32,
}

/// Block table, buckets, free lists, write points.
#[derive(Debug, Clone)]
pub(crate) struct Blocks {
    /// Per block: valid units.
    valid: Vec<u32>,
    /// Per block: erase count.
    erase_count: Vec<u32>,
    /// Per block: [`BlockState`] as u8.
    state: Vec<u8>,
    /// Per block: time of the last program into it (cost-benefit age).
    last_write: Vec<u64>,
    /// Per block: intrusive list links for the valid-count buckets of full blocks.
    bucket_next: Vec<u32>,
    bucket_prev: Vec<u32>,
    /// Per die: bucket heads, indexed by valid count (0..=units_per_block).
    bucket_heads: Vec<Vec<u32>>,
    /// Full blocks holding no valid data (an erase alone frees them).
    empty_full: u64,
    /// Per die: erased blocks, oldest first (so wear rotates through all).
    free: Vec<VecDeque<u32>>,
    /// Per die: the write point of each [`Stream`].
    write_points: Vec<[WritePoint; 2]>,
    /// Die currently receiving host units.
    cursor: u32,
}

impl Blocks {
    /// Every block erased (retired ones aside), every write point empty.
    pub(crate) fn new(g: &Geo) -> Blocks {
        let nblocks = g.blocks();
        let mut state = vec![BlockState::Free as u8; nblocks];
        let free = (0..g.dies)
            .map(|d| {
                let b0 = d * g.blocks_per_die;
                let end = b0 + g.blocks_per_die;
                let first_retired = end - g.retired_on(d);
                for b in first_retired..end {
                    state[b as usize] = BlockState::Retired as u8;
                }
                (b0..first_retired).collect()
            })
            .collect();
        Blocks {
            valid: vec![0; nblocks],
            erase_count: vec![0; nblocks],
            state,
            last_write: vec![0; nblocks],
            bucket_next: vec![NONE; nblocks],
            bucket_prev: vec![NONE; nblocks],
            bucket_heads: vec![vec![NONE; g.units_per_block as usize + 1]; g.dies as usize],
            empty_full: 0,
            free,
            write_points: vec![[WritePoint::EMPTY; 2]; g.dies as usize],
            cursor: 0,
        }
    }

    /// Blocks in the drive (retired ones included).
    #[inline]
    pub(crate) fn count(&self) -> usize {
        self.valid.len()
    }

    // ------------------------------------------------------ block table

    /// Valid units in block `b`.
    #[inline(always)]
    pub(crate) fn valid(&self, b: u32) -> u32 {
        self.valid[b as usize]
    }

    /// One more valid unit in block `b` (not a full block).
    #[inline(always)]
    pub(crate) fn add_valid(&mut self, b: u32) {
        self.valid[b as usize] += 1;
    }

    /// One valid unit less in block `b`, which is not in a bucket (a
    /// victim, an open or a hybrid-mapped block).
    #[inline(always)]
    pub(crate) fn remove_valid(&mut self, b: u32) {
        self.valid[b as usize] -= 1;
    }

    /// One valid unit less in block `b`, moving it to its new bucket if full.
    #[inline(always)]
    pub(crate) fn invalidate(&mut self, g: &Geo, b: u32) {
        let full = self.state[b as usize] == BlockState::Full as u8;
        if full {
            self.bucket_remove(g, b);
        }
        self.valid[b as usize] -= 1;
        if full {
            self.bucket_insert(g, b);
        }
    }

    /// Whether block `b` is in state `s`.
    #[inline(always)]
    pub(crate) fn is(&self, b: u32, s: BlockState) -> bool {
        self.state[b as usize] == s as u8
    }

    /// Block `b`'s state as stored.
    #[inline]
    pub(crate) fn state_byte(&self, b: u32) -> u8 {
        self.state[b as usize]
    }

    /// Every block's state as stored.
    pub(crate) fn states(&self) -> &[u8] {
        &self.state
    }

    /// Put block `b` in state `s` (one outside the buckets and free lists:
    /// [`BlockState::Mapped`], or [`BlockState::Free`] before
    /// [`Blocks::push_free`]).
    #[inline]
    pub(crate) fn set_state(&mut self, b: u32, s: BlockState) {
        self.state[b as usize] = s as u8;
    }

    /// Erase count of block `b`.
    #[inline(always)]
    pub(crate) fn erase_count(&self, b: u32) -> u32 {
        self.erase_count[b as usize]
    }

    /// Every block's erase count.
    pub(crate) fn erase_counts(&self) -> &[u32] {
        &self.erase_count
    }

    /// Time of the last program into block `b`.
    #[inline(always)]
    pub(crate) fn last_write(&self, b: u32) -> u64 {
        self.last_write[b as usize]
    }

    /// Every block's last program time.
    pub(crate) fn last_writes(&self) -> &[u64] {
        &self.last_write
    }

    /// Block `b` was programmed (or taken into use) at `t`.
    #[inline(always)]
    pub(crate) fn set_last_write(&mut self, b: u32, t: u64) {
        self.last_write[b as usize] = t;
    }

    /// Block `b` of `die` is erased: counted, free, last in its die's pool.
    #[inline]
    pub(crate) fn erased(&mut self, die: usize, b: u32) {
        self.erase_count[b as usize] += 1;
        self.state[b as usize] = BlockState::Free as u8;
        self.free[die].push_back(b);
    }

    /// A secure erase erases every block in use: counts those erases (not
    /// retired, and not free and empty) and returns how many.
    pub(crate) fn count_secure_erase(&mut self) -> u64 {
        let mut n = 0;
        for b in 0..self.valid.len() {
            let st = self.state[b];
            if (st != BlockState::Free as u8 && st != BlockState::Retired as u8)
                || self.valid[b] > 0
            {
                self.erase_count[b] += 1;
                n += 1;
            }
        }
        n
    }

    /// Wear every block in service to at least `target` erases (a drive
    /// aged fast, its wear levelled); returns the erases added.
    pub(crate) fn age_to(&mut self, target: u32) -> u64 {
        let retired = BlockState::Retired as u8;
        let mut added = 0;
        for (e, &st) in self.erase_count.iter_mut().zip(&self.state) {
            if st != retired && *e < target {
                added += u64::from(target - *e);
                *e = target;
            }
        }
        added
    }

    /// Replace the erase counts (a secure erase keeps them).
    pub(crate) fn set_erase_counts(&mut self, counts: Vec<u32>) {
        self.erase_count = counts;
    }

    /// Take the erase counts out (see [`Blocks::set_erase_counts`]).
    pub(crate) fn take_erase_counts(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.erase_count)
    }

    /// Lowest, highest and sum of the erase counts of blocks in service
    /// (`u32::MAX`, 0, 0 if none).
    pub(crate) fn wear(&self) -> (u32, u32, u64) {
        let retired = BlockState::Retired as u8;
        let (mut mn, mut mx, mut sum) = (u32::MAX, 0u32, 0u64);
        for (&e, _) in self
            .erase_count
            .iter()
            .zip(&self.state)
            .filter(|(_, s)| **s != retired)
        {
            mn = mn.min(e);
            mx = mx.max(e);
            sum += e as u64;
        }
        (mn, mx, sum)
    }

    // ------------------------------------------------------------ buckets

    /// Recreate the valid-count buckets from the block table (after a load).
    pub(crate) fn rebuild_buckets(&mut self, g: &Geo) {
        for h in &mut self.bucket_heads {
            h.fill(NONE);
        }
        self.bucket_next.fill(NONE);
        self.bucket_prev.fill(NONE);
        self.empty_full = 0;
        for b in 0..self.valid.len() as u32 {
            if self.state[b as usize] == BlockState::Full as u8 {
                self.bucket_insert(g, b);
            }
        }
    }

    /// Put full block `b` in its die's bucket for its valid count.
    #[inline]
    fn bucket_insert(&mut self, g: &Geo, b: u32) {
        let die = g.die_of_block(b) as usize;
        let v = self.valid[b as usize] as usize;
        if v == 0 {
            self.empty_full += 1;
        }
        let head = self.bucket_heads[die][v];
        self.bucket_next[b as usize] = head;
        self.bucket_prev[b as usize] = NONE;
        if head != NONE {
            self.bucket_prev[head as usize] = b;
        }
        self.bucket_heads[die][v] = b;
    }

    /// Take full block `b` out of its bucket.
    #[inline]
    fn bucket_remove(&mut self, g: &Geo, b: u32) {
        let die = g.die_of_block(b) as usize;
        let v = self.valid[b as usize] as usize;
        if v == 0 {
            self.empty_full -= 1;
        }
        let (p, n) = (self.bucket_prev[b as usize], self.bucket_next[b as usize]);
        if p != NONE {
            self.bucket_next[p as usize] = n;
        } else {
            self.bucket_heads[die][v] = n;
        }
        if n != NONE {
            self.bucket_prev[n as usize] = p;
        }
        self.bucket_next[b as usize] = NONE;
        self.bucket_prev[b as usize] = NONE;
    }

    /// Full block `b` becomes a GC victim (out of its bucket).
    #[inline]
    pub(crate) fn make_victim(&mut self, g: &Geo, b: u32) {
        self.bucket_remove(g, b);
        self.state[b as usize] = BlockState::Victim as u8;
    }

    /// Full block `b` holding no valid data leaves its bucket to be erased.
    #[inline]
    pub(crate) fn take_empty(&mut self, g: &Geo, b: u32) {
        self.bucket_remove(g, b);
    }

    /// The first full block of `die` with `v` valid units (NONE).
    #[inline(always)]
    pub(crate) fn bucket_head(&self, die: usize, v: usize) -> u32 {
        self.bucket_heads[die][v]
    }

    /// The block after `b` in its bucket (NONE).
    #[inline(always)]
    pub(crate) fn bucket_next(&self, b: u32) -> u32 {
        self.bucket_next[b as usize]
    }

    /// Full blocks holding no valid data.
    #[inline]
    pub(crate) fn empty_full(&self) -> u64 {
        self.empty_full
    }

    // --------------------------------------------------------- free lists

    /// Free blocks of `die`.
    #[inline(always)]
    pub(crate) fn free_len(&self, die: usize) -> usize {
        self.free[die].len()
    }

    /// Free blocks, all dies.
    pub(crate) fn free_total(&self) -> u64 {
        self.free.iter().map(|f| f.len() as u64).sum()
    }

    /// The free list of `die`, oldest first.
    #[inline]
    pub(crate) fn free_list(&self, die: usize) -> &VecDeque<u32> {
        &self.free[die]
    }

    /// Take the oldest free block of `die`.
    #[inline]
    pub(crate) fn pop_free(&mut self, die: usize) -> Option<u32> {
        self.free[die].pop_front()
    }

    /// Take the newest free block of `die`.
    #[inline]
    pub(crate) fn pop_free_back(&mut self, die: usize) -> Option<u32> {
        self.free[die].pop_back()
    }

    /// Take block `b` out of `die`'s pool (it is retired); false if it is
    /// not there.
    pub(crate) fn take_free(&mut self, die: usize, b: u32) -> bool {
        match self.free[die].iter().position(|&x| x == b) {
            Some(i) => {
                self.free[die].remove(i);
                true
            }
            None => false,
        }
    }

    /// Block `b` (free, unerased) goes back to the end of `die`'s pool.
    #[inline]
    pub(crate) fn push_free(&mut self, die: usize, b: u32) {
        self.state[b as usize] = BlockState::Free as u8;
        self.free[die].push_back(b);
    }

    /// Valid counts and free lists, to compare in a test.
    #[cfg(test)]
    pub(crate) fn tables(&self) -> (&[u32], &[VecDeque<u32>]) {
        (&self.valid, &self.free)
    }

    /// The free lists, to change in a test.
    #[cfg(test)]
    pub(crate) fn free_list_mut(&mut self, die: usize) -> &mut VecDeque<u32> {
        &mut self.free[die]
    }

    // ------------------------------------------------------- write points

    /// The write point of `stream` on `die`.
    #[inline(always)]
    pub(crate) fn wp(&self, stream: Stream, die: usize) -> &WritePoint {
        &self.write_points[die][stream as usize]
    }

    /// A unit of compressed size `c` goes in the open dpage of `stream` on
    /// `die`, whose NAND page holds `cap`: whether the page is full then.
    #[inline(always)]
    pub(crate) fn fill_compressed(&mut self, stream: Stream, die: usize, c: u32, cap: u32) -> bool {
        let w = &mut self.write_points[die][stream as usize];
        w.compressed_fill += c;
        cap - w.compressed_fill.min(cap) < c
    }

    /// A unit, at the controller at `ready`, goes in the open dpage of
    /// `stream` on `die`: returns the units in it now.
    #[inline(always)]
    pub(crate) fn place(&mut self, stream: Stream, die: usize, ready: u64) -> u32 {
        let w = &mut self.write_points[die][stream as usize];
        w.slot += 1;
        w.placed += 1;
        w.ready_ns = w.ready_ns.max(ready);
        w.slot
    }

    /// The open dpage of `stream` on `die`, if it holds units, is to be
    /// programmed with its data ready no earlier than `t`; false if empty.
    #[inline]
    pub(crate) fn ready_partial(&mut self, stream: Stream, die: usize, t: u64) -> bool {
        let w = &mut self.write_points[die][stream as usize];
        if w.slot == 0 {
            return false;
        }
        w.ready_ns = w.ready_ns.max(t);
        true
    }

    /// The open dpage of `stream` on `die` is programmed: the write point
    /// moves to the next dpage, or, after the last of the block's `pages`,
    /// the block is closed (full, in its bucket) and the write point
    /// emptied: then returns the block and the units placed in it.
    #[inline]
    pub(crate) fn dpage_programmed(
        &mut self,
        g: &Geo,
        stream: Stream,
        die: usize,
        pages: u32,
    ) -> Option<(u32, u32)> {
        let wp = self.write_points[die][stream as usize];
        let mut next = wp;
        next.page += 1;
        next.slot = 0;
        next.ready_ns = 0;
        next.compressed_fill = 0;
        let closed = if next.page == pages {
            self.close(g, wp.block);
            next = WritePoint::EMPTY;
            Some((wp.block, wp.placed))
        } else {
            None
        };
        self.write_points[die][stream as usize] = next;
        closed
    }

    /// The units of the open dpage of `stream` on `die` are dropped (none
    /// of them is valid any more): its slots are reused.
    pub(crate) fn drop_open_dpage(&mut self, stream: Stream, die: usize) {
        let w = &mut self.write_points[die][stream as usize];
        w.placed -= w.slot;
        w.slot = 0;
        w.ready_ns = 0;
        w.compressed_fill = 0;
    }

    /// Every write point, die by die.
    pub(crate) fn write_points(&self) -> impl Iterator<Item = &WritePoint> {
        self.write_points.iter().flatten()
    }

    /// Die currently receiving host units.
    #[inline(always)]
    pub(crate) fn cursor(&self) -> u32 {
        self.cursor
    }

    /// Host units go to `die` next.
    #[inline]
    pub(crate) fn set_cursor(&mut self, die: u32) {
        self.cursor = die;
    }

    /// The host stream moves on to the next of `dies` dies.
    #[inline]
    pub(crate) fn next_host_die(&mut self, dies: u32) {
        self.cursor = (self.cursor + 1) % dies;
    }

    /// Make `b`, a free block of `die`, the open block of `stream` there.
    #[inline]
    pub(crate) fn open(&mut self, stream: Stream, die: usize, b: u32, now: u64) {
        self.state[b as usize] = BlockState::Open as u8;
        self.last_write[b as usize] = now;
        self.write_points[die][stream as usize] = WritePoint {
            block: b,
            ..WritePoint::EMPTY
        };
    }

    /// Open block `b` is fully programmed: full, in its bucket.
    #[inline]
    fn close(&mut self, g: &Geo, b: u32) {
        self.state[b as usize] = BlockState::Full as u8;
        self.bucket_insert(g, b);
    }

    /// Whether `ppn` lies in a dpage not yet programmed (an open write point).
    pub(crate) fn in_open_dpage(&self, g: &Geo, ppn: u64) -> bool {
        let block = g.block_of_ppn(ppn);
        if self.state[block as usize] != BlockState::Open as u8 {
            return false;
        }
        let die = g.die_of_block(block) as usize;
        let page = ((ppn % g.units_per_block as u64) / g.units_per_dpage as u64) as u32;
        self.write_points[die]
            .iter()
            .any(|wp| wp.block == block && wp.page == page)
    }

    // -------------------------------------------------- saving, checking

    /// Heap bytes of the tables.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.valid.len() * (4 + 4 + 1 + 8 + 4 + 4 + 4)
            + self.bucket_heads.iter().map(|h| h.len() * 4).sum::<usize>()
    }

    /// Take a loaded state (checked by [`Blocks::check`] afterwards); the
    /// valid counts are rebuilt from the mapping by the caller, then the
    /// buckets ([`Blocks::rebuild_buckets`]). Block ages are relative to
    /// the old run's clock: they restart at 0.
    pub(crate) fn restore(&mut self, saved: SavedBlocks) {
        let base = saved.last_write.iter().copied().max().unwrap_or(0);
        self.erase_count = saved.erase_count;
        self.state = saved.state;
        self.last_write = saved.last_write;
        for t in &mut self.last_write {
            *t = t.saturating_sub(base);
        }
        self.write_points = saved.write_points;
        self.free = saved.free;
        self.cursor = saved.cursor;
    }

    /// Every table has the geometry's size.
    pub(crate) fn check_shapes(&self, g: &Geo) -> Result<(), String> {
        let nblocks = self.valid.len();
        if nblocks != g.blocks()
            || self.state.len() != nblocks
            || self.erase_count.len() != nblocks
            || self.last_write.len() != nblocks
            || self.free.len() != g.dies as usize
            || self.write_points.len() != g.dies as usize
            || self.cursor >= g.dies
        {
            return Err("tables do not match the geometry".into());
        }
        Ok(())
    }

    /// The valid counts are `counted` (from the mapping).
    pub(crate) fn check_valid(&self, counted: &[u32]) -> Result<(), String> {
        if counted != self.valid {
            let b = (0..counted.len())
                .find(|&b| counted[b] != self.valid[b])
                .unwrap_or(0);
            return Err(format!(
                "block {b}: {} valid units counted, {} recorded",
                counted[b], self.valid[b]
            ));
        }
        Ok(())
    }

    /// Blocks, free lists, write points and buckets agree with each other
    /// and with the valid counts; `victims` blocks are being collected,
    /// `is_live` says which physical units hold data. Returns the blocks
    /// (free, open) for the caller's totals.
    pub(crate) fn check(
        &self,
        g: &Geo,
        victims: usize,
        is_live: impl Fn(u64) -> bool,
    ) -> Result<(usize, usize), String> {
        let nblocks = self.valid.len();
        if let Some(b) = (0..nblocks).find(|&b| BlockState::from_u8(self.state[b]).is_none()) {
            return Err(format!("block {b} has unknown state {}", self.state[b]));
        }
        if let Some(b) = (0..nblocks).find(|&b| self.valid[b] > g.units_per_block) {
            return Err(format!("block {b} has more valid units than it holds"));
        }
        let mut free = 0;
        let mut open = 0;
        let mut listed = vec![false; nblocks];
        let mut bucketed = 0usize;
        for d in 0..g.dies as usize {
            for &b in &self.free[d] {
                if b as usize >= nblocks || std::mem::replace(&mut listed[b as usize], true) {
                    return Err(format!(
                        "free list of die {d} holds block {b} twice or outside the drive"
                    ));
                }
                if self.state[b as usize] != BlockState::Free as u8 || self.valid[b as usize] != 0 {
                    return Err(format!(
                        "free list of die {d} holds block {b} that is not free/empty"
                    ));
                }
                if g.die_of_block(b) as usize != d {
                    return Err(format!(
                        "free list of die {d} holds block {b} of another die"
                    ));
                }
            }
            free += self.free[d].len();
            for wp in self.write_points[d] {
                if wp.block == NONE {
                    if wp.page != 0 || wp.slot != 0 {
                        return Err(format!(
                            "die {d}: write point without a block has a position"
                        ));
                    }
                    continue;
                }
                open += 1;
                if wp.block as usize >= nblocks
                    || g.die_of_block(wp.block) as usize != d
                    || wp.page >= g.pages_per_block
                    || wp.slot >= g.units_per_dpage
                {
                    return Err(format!("die {d}: write point outside the die's blocks"));
                }
                if self.state[wp.block as usize] != BlockState::Open as u8 {
                    return Err(format!("write point block {} is not open", wp.block));
                }
                // Units not written yet must be unwritten: the write point
                // would otherwise overwrite live mapping entries.
                let next = g.ppn(wp.block, wp.page, wp.slot);
                let end = g.ppn(wp.block + 1, 0, 0);
                if let Some(ppn) = (next..end).find(|&p| is_live(p)) {
                    return Err(format!(
                        "die {d}: unit {ppn} after the write point holds data"
                    ));
                }
            }
            for v in 0..self.bucket_heads[d].len() {
                let mut b = self.bucket_heads[d][v];
                while b != NONE {
                    bucketed += 1;
                    if b as usize >= nblocks
                        || bucketed > nblocks
                        || self.valid[b as usize] as usize != v
                        || self.state[b as usize] != BlockState::Full as u8
                        || g.die_of_block(b) as usize != d
                    {
                        return Err(format!(
                            "bucket {v} of die {d} holds block {b} (valid {:?})",
                            self.valid.get(b as usize)
                        ));
                    }
                    b = self.bucket_next[b as usize];
                }
            }
        }
        let states = |s: BlockState| self.state.iter().filter(|&&x| x == s as u8).count();
        if bucketed != states(BlockState::Full) {
            return Err(format!(
                "{bucketed} blocks in the valid-count buckets, {} full",
                states(BlockState::Full)
            ));
        }
        if states(BlockState::Free) != free {
            return Err(format!(
                "{} blocks marked free, {free} in free lists",
                states(BlockState::Free)
            ));
        }
        if states(BlockState::Open) != open {
            return Err(format!(
                "{} blocks marked open, {open} write points",
                states(BlockState::Open)
            ));
        }
        let empty = (0..self.valid.len())
            .filter(|&b| self.state[b] == BlockState::Full as u8 && self.valid[b] == 0)
            .count() as u64;
        if empty != self.empty_full {
            return Err(format!(
                "{empty} full blocks without valid data, counter says {}",
                self.empty_full
            ));
        }
        if states(BlockState::Victim) != victims {
            return Err(format!(
                "{} blocks marked victim, {victims} victims being collected",
                states(BlockState::Victim)
            ));
        }
        let retired = BlockState::Retired as u8;
        // Factory-retired blocks stay retired; any other retired block is a
        // grown bad block (`grown.rs`).
        if let Some(b) = (0..nblocks).find(|&b| g.is_retired(b as u32) && self.state[b] != retired)
        {
            return Err(format!(
                "block {b} is in service but the geometry says it is retired"
            ));
        }
        if let Some(b) = (0..nblocks).find(|&b| self.state[b] == retired && self.valid[b] != 0) {
            return Err(format!("retired block {b} holds data"));
        }
        Ok((free, open))
    }
}
