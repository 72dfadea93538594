//! The SLC cache when it is full (`[slc_cache] when_full`): whether the
//! host block about to be opened runs in SLC mode, after folding one
//! SLC-mode block in the foreground where the drive does that. Folding in
//! idle time is GC's (`gc.rs`); what the cache holds and may hold is
//! `slc.rs`'s. See "SLC cache" in docs/model.md.

use super::slc::SlcCache;
use super::ssd::Ssd;
use super::types::{BlockState, NONE};

impl Ssd {
    /// Whether the host block about to be opened on `die` at `now` runs in
    /// SLC mode: the cache has room for a block; or, on a drive that folds
    /// when full, the cache is at its size and folding this die's oldest
    /// SLC-mode block in the foreground makes room. The fold's reads,
    /// native programs and erase are reserved on the die before the host
    /// block's programs, so the host waits for them: the rate "while the
    /// drive flushes SLC". Where a fuller drive's dynamic cache has shrunk
    /// below what it holds, the block is native and one SLC-mode block is
    /// folded with it, until the cache is within its size again.
    pub(super) fn slc_takes_block(&mut self, die: usize, now: u64) -> bool {
        let bu = SlcCache::block_units(&self.geo);
        if self.slc_free_units() >= bu {
            return true;
        }
        if !self.slc.folds_when_full() {
            return false;
        }
        let size = self.slc.size_units(&self.geo, self.mapping.mapped_units());
        if self.slc.held_units(&self.geo) > size {
            // The dynamic cache shrank below what it holds (a fuller
            // drive): host data goes direct, and the excess is folded a
            // block at a time with it.
            self.fold_oldest(die, now);
            return false;
        }
        if size < bu {
            return false;
        }
        if !self.fold_oldest(die, now) {
            return false;
        }
        self.slc_free_units() >= bu
    }

    /// Fold the oldest full SLC-mode block of `die` into native blocks, in
    /// the foreground (a GC victim copied whole and erased), from `now` on.
    /// False if the die has none, or GC is busy with another victim.
    fn fold_oldest(&mut self, die: usize, now: u64) -> bool {
        if self.victims.busy(die) {
            return false;
        }
        let b0 = die as u32 * self.geo.blocks_per_die;
        let mut best = NONE;
        let mut best_t = u64::MAX;
        for b in b0..b0 + self.geo.blocks_per_die {
            if self.slc.is_slc(b) && self.blocks.is(b, BlockState::Full) {
                let t = self.blocks.last_write(b);
                if t < best_t {
                    best_t = t;
                    best = b;
                }
            }
        }
        if best == NONE {
            return false;
        }
        self.begin_victim(die, best, true);
        self.gc_one(die, now, true)
    }
}
