//! The mapping tables' primitives, which every placement, copy and TRIM
//! goes through: the forward map (`l2p`), the reverse map (`p2l`), the
//! live bitmap saying which physical units hold current data (`p2l` is
//! read only there: an overwrite clears the bit and leaves the entry
//! stale), and the per-block valid counts with their GC buckets.

use super::ssd::{BlockState, Ssd};

impl Ssd {
    /// Map physical unit `ppn` to `lpn` in the reverse map (and mark it live).
    #[inline]
    pub(super) fn set_live(&mut self, ppn: u64, lpn: u64) {
        self.live.set(ppn);
        self.p2l.set(ppn as usize, lpn + 1);
    }

    /// The lpn physical unit `ppn` holds, if it is live.
    #[inline]
    pub(super) fn lpn_at(&self, ppn: u64) -> Option<u64> {
        self.live.get(ppn).then(|| self.p2l.get(ppn as usize) - 1)
    }

    /// Same live units, holding the same lpns (stale entries aside).
    #[cfg(test)]
    pub(super) fn same_reverse_map(&self, other: &Ssd) -> bool {
        let n = self.geo.physical_units;
        self.live == other.live
            && (0..n)
                .all(|p| !self.live.get(p) || self.p2l.get(p as usize) == other.p2l.get(p as usize))
    }

    /// Map unmapped `lpn` to the unwritten physical unit `ppn` of `block`.
    #[inline]
    pub(super) fn map_unit(&mut self, lpn: u64, ppn: u64, block: u32) {
        self.l2p.set(lpn as usize, ppn + 1);
        self.set_live(ppn, lpn);
        self.valid[block as usize] += 1;
        self.mapped_units += 1;
    }

    /// Remove the mapping of `lpn`, if any, invalidating its physical unit.
    #[inline]
    pub(super) fn unmap(&mut self, lpn: u64) {
        let e = self.l2p.get(lpn as usize);
        if e == 0 {
            return;
        }
        let ppn = e - 1;
        if self.is_pending(lpn) {
            self.pending.clear(lpn);
            self.pending_units -= 1;
        }
        self.l2p.set(lpn as usize, 0);
        self.live.clear(ppn);
        self.mapped_units -= 1;
        let b = self.geo.block_of_ppn(ppn);
        let full = self.state[b as usize] == BlockState::Full as u8;
        if full {
            self.bucket_remove(b);
        }
        self.valid[b as usize] -= 1;
        if full {
            self.bucket_insert(b);
        }
    }
}
