//! The mapping tables, which every placement, copy and TRIM goes through:
//! the forward map (lpn -> ppn), the reverse map (ppn -> lpn), the live
//! bitmap saying which physical units hold current data (the reverse map
//! is read only there: an overwrite clears the bit and leaves the entry
//! stale), and the count of mapped units.
//!
//! The per-block valid counts that go with them are the block pool's
//! (`blocks.rs`); the drive keeps the two in step (`write_point.rs`).

use super::geo::Geo;
use super::packed::{Bitmap, PackedVec};

/// Forward and reverse maps, live bitmap, mapped-unit count.
#[derive(Debug, Clone)]
pub(crate) struct Mapping {
    /// lpn -> ppn + 1 (0 = unmapped).
    forward: PackedVec,
    /// ppn -> lpn + 1, meaningful only where `live` is set: an overwrite
    /// or TRIM clears the unit's `live` bit and leaves its entry stale.
    reverse: PackedVec,
    /// One bit per physical unit: set while it holds an lpn's current data.
    /// A host overwrite invalidates a unit at a random place on the NAND;
    /// clearing its bit here (1/26 of the reverse map's size, mostly in
    /// cache) instead of its reverse entry saves a cache miss per write.
    live: Bitmap,
    /// Logical units mapped.
    mapped_units: u64,
}

impl Mapping {
    /// Everything unmapped.
    pub(crate) fn new(g: &Geo) -> Mapping {
        Mapping {
            forward: PackedVec::new(g.logical_units as usize, g.physical_units),
            reverse: PackedVec::new(g.physical_units as usize, g.logical_units),
            live: Bitmap::new(g.physical_units),
            mapped_units: 0,
        }
    }

    /// The forward entry of `lpn`: its ppn + 1, or 0 if unmapped.
    #[inline(always)]
    pub(crate) fn entry(&self, lpn: u64) -> u64 {
        self.forward.get(lpn as usize)
    }

    /// Whether `lpn` is mapped (pending release included).
    #[inline(always)]
    pub(crate) fn is_mapped(&self, lpn: u64) -> bool {
        self.entry(lpn) != 0
    }

    /// Whether physical unit `ppn` holds current data.
    #[inline(always)]
    pub(crate) fn is_live(&self, ppn: u64) -> bool {
        self.live.get(ppn)
    }

    /// Logical units mapped.
    #[inline]
    pub(crate) fn mapped_units(&self) -> u64 {
        self.mapped_units
    }

    /// The forward map (for saving).
    pub(crate) fn forward(&self) -> &PackedVec {
        &self.forward
    }

    /// Map physical unit `ppn` to `lpn` in the reverse map (and mark it live).
    #[inline(always)]
    fn set_live(&mut self, ppn: u64, lpn: u64) {
        self.live.set(ppn);
        self.reverse.set(ppn as usize, lpn + 1);
    }

    /// The lpn physical unit `ppn` holds, if it is live.
    #[inline(always)]
    pub(crate) fn lpn_at(&self, ppn: u64) -> Option<u64> {
        self.live
            .get(ppn)
            .then(|| self.reverse.get(ppn as usize) - 1)
    }

    /// Same live units, holding the same lpns (stale entries aside), and
    /// the same forward map.
    #[cfg(test)]
    pub(crate) fn same_as(&self, other: &Mapping) -> bool {
        let n = self.reverse.len() as u64;
        self.forward == other.forward
            && self.live == other.live
            && (0..n).all(|p| {
                !self.live.get(p) || self.reverse.get(p as usize) == other.reverse.get(p as usize)
            })
    }

    /// Map unmapped `lpn` to the unwritten physical unit `ppn`.
    #[inline(always)]
    pub(crate) fn map(&mut self, lpn: u64, ppn: u64) {
        self.forward.set(lpn as usize, ppn + 1);
        self.set_live(ppn, lpn);
        self.mapped_units += 1;
    }

    /// Remove the mapping of `lpn` whose forward entry is `e` (non-zero),
    /// invalidating its physical unit; returns that unit.
    #[inline(always)]
    pub(crate) fn unmap_entry(&mut self, lpn: u64, e: u64) -> u64 {
        let ppn = e - 1;
        self.forward.set(lpn as usize, 0);
        self.live.clear(ppn);
        self.mapped_units -= 1;
        ppn
    }

    /// Move mapped `lpn` from physical unit `src` to the unwritten `dst`.
    #[inline(always)]
    pub(crate) fn relocate(&mut self, lpn: u64, src: u64, dst: u64) {
        self.live.clear(src);
        self.forward.set(lpn as usize, dst + 1);
        self.set_live(dst, lpn);
    }

    /// [`Mapping::relocate`] where the reverse entry of `dst` already
    /// names `lpn` (copied with its block, [`Mapping::copy_reverse_block`]).
    #[inline(always)]
    pub(crate) fn repoint(&mut self, lpn: u64, src: u64, dst: u64) {
        self.live.clear(src);
        self.forward.set(lpn as usize, dst + 1);
        self.live.set(dst);
    }

    /// Whether blocks of `units` units are whole words of the reverse map
    /// (so [`Mapping::copy_reverse_block`] can copy them).
    #[inline]
    pub(crate) fn reverse_word_aligned(&self, units: usize) -> bool {
        self.reverse.word_aligned(units)
    }

    /// Copy `n` reverse entries from `src` on to `dst` (word aligned).
    #[inline]
    pub(crate) fn copy_reverse_block(&mut self, src: usize, dst: usize, n: usize) {
        self.reverse.copy_aligned(src, dst, n);
    }

    /// Load the forward entries of `lpns` into the cache.
    #[inline]
    pub(crate) fn warm_forward(&self, lpns: &[u64]) {
        self.forward.warm(lpns);
    }

    /// Load reverse entries `start..start + n` into the cache.
    #[inline]
    pub(crate) fn warm_reverse(&self, start: usize, n: usize) {
        self.reverse.warm_range(start, n);
    }

    /// `f(lpn, entry)` for every mapped lpn, in order, up to the first error.
    pub(crate) fn try_for_each_mapped<E>(
        &self,
        f: impl FnMut(usize, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        self.forward.try_for_each_nonzero(f)
    }

    /// Heap bytes of the tables.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.forward.heap_bytes() + self.reverse.heap_bytes() + self.live.heap_bytes()
    }

    /// Take `forward` (a loaded forward map; the tables must be fresh) and
    /// rebuild the reverse map, live bits and count from it, looking only
    /// at the `chunks` of `chunk` entries that may hold mapped units.
    /// `on_unit(ppn)` is called for each mapped unit. Two units at one
    /// physical place, or one outside the NAND, is an error.
    pub(crate) fn restore(
        &mut self,
        forward: PackedVec,
        chunks: &[usize],
        chunk: usize,
        mut on_unit: impl FnMut(u64),
    ) -> Result<(), String> {
        self.forward = forward;
        let physical = self.reverse.len() as u64;
        let mut mapped = 0u64;
        for &c in chunks {
            let lo = c * chunk;
            for lpn in lo..(lo + chunk).min(self.forward.len()) {
                let e = self.forward.get(lpn);
                if e == 0 {
                    continue;
                }
                let ppn = e - 1;
                if ppn >= physical {
                    return Err(format!("unit {lpn} maps outside the NAND"));
                }
                if self.live.get(ppn) {
                    return Err(format!("two units map to physical unit {ppn}"));
                }
                self.set_live(ppn, lpn as u64);
                on_unit(ppn);
                mapped += 1;
            }
        }
        self.mapped_units = mapped;
        Ok(())
    }

    /// The forward and reverse maps are exact inverses (on the live units:
    /// an entry of a unit not live is stale and ignored), and the mapped
    /// count matches them. Returns the valid units counted per block.
    pub(crate) fn check(&self, g: &Geo, nblocks: usize) -> Result<Vec<u32>, String> {
        let mut valid = vec![0u32; nblocks];
        let mut mapped = 0u64;
        self.forward.try_for_each_nonzero(|lpn, e| {
            mapped += 1;
            let ppn = e - 1;
            if ppn >= g.physical_units {
                return Err(format!("lpn {lpn} maps outside NAND: {ppn}"));
            }
            if !self.live.get(ppn) {
                return Err(format!("lpn {lpn} -> ppn {ppn}, which is not live"));
            }
            if self.reverse.get(ppn as usize) != lpn as u64 + 1 {
                return Err(format!(
                    "lpn {lpn} -> ppn {ppn}, but ppn {ppn} -> {}",
                    self.reverse.get(ppn as usize) as i64 - 1
                ));
            }
            valid[g.block_of_ppn(ppn) as usize] += 1;
            Ok(())
        })?;
        // Every mapped lpn's unit is live and names it back, so distinct
        // lpns hold distinct units: no more live units than that means the
        // live set is exactly their image.
        let reverse = self.live.count_ones();
        if mapped != reverse || mapped != self.mapped_units {
            return Err(format!(
                "mapped {mapped}, reverse {reverse}, counter {}",
                self.mapped_units
            ));
        }
        Ok(valid)
    }
}
