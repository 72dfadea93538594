//! SLC cache (`[slc_cache]`): which blocks are (being) written in SLC
//! mode, and how many; how many host units the cache can take.

use super::geo::Geo;
use vssd_profile::SlcMode;

/// Per block SLC mode (empty without a cache), and the count.
#[derive(Debug, Clone)]
pub(crate) struct SlcCache {
    slc_mode: Vec<bool>,
    slc_blocks: u64,
}

impl SlcCache {
    /// No block in SLC mode.
    pub(crate) fn new(g: &Geo) -> SlcCache {
        SlcCache {
            slc_mode: if g.slc != SlcMode::Off {
                vec![false; g.blocks()]
            } else {
                Vec::new()
            },
            slc_blocks: 0,
        }
    }

    /// Whether the drive has an SLC cache.
    #[inline(always)]
    pub(crate) fn enabled(&self) -> bool {
        !self.slc_mode.is_empty()
    }

    /// Whether block `b` is (being) written in SLC mode.
    #[inline(always)]
    pub(crate) fn is_slc(&self, b: u32) -> bool {
        !self.slc_mode.is_empty() && self.slc_mode[b as usize]
    }

    /// Block `b`, about to be opened, runs in SLC mode.
    #[inline]
    pub(crate) fn mark(&mut self, b: u32) {
        self.slc_mode[b as usize] = true;
        self.slc_blocks += 1;
    }

    /// Block `b` is erased: native again.
    #[inline]
    pub(crate) fn erase(&mut self, b: u32) {
        if self.is_slc(b) {
            self.slc_mode[b as usize] = false;
            self.slc_blocks -= 1;
        }
    }

    /// Units an SLC-mode block holds.
    #[inline]
    pub(crate) fn block_units(g: &Geo) -> u64 {
        (g.units_per_block / g.slc_bits) as u64
    }

    /// Host units the cache can take now (0 without a cache), with
    /// `mapped` units mapped. A static cache has its fixed size; a dynamic
    /// one also at most what the NAND not holding mapped data (less the GC
    /// reserve) can hold in SLC mode.
    pub(crate) fn free_units(&self, g: &Geo, mapped: u64) -> u64 {
        let size = match g.slc {
            SlcMode::Off => return 0,
            SlcMode::Static => g.slc_units,
            SlcMode::Dynamic => {
                let reserve =
                    g.dies as u64 * (g.fg_threshold as u64 + 2) * g.units_per_block as u64;
                let room = g.in_service_units.saturating_sub(mapped + reserve);
                g.slc_units.min(room / g.slc_bits as u64)
            }
        };
        size.saturating_sub(self.slc_blocks * SlcCache::block_units(g))
    }

    /// Per block flags, to save.
    pub(crate) fn flags(&self) -> &[bool] {
        &self.slc_mode
    }

    /// Take loaded flags (as many as blocks).
    pub(crate) fn restore(&mut self, flags: Vec<bool>) {
        self.slc_blocks = flags.iter().filter(|&&m| m).count() as u64;
        self.slc_mode = flags;
    }

    /// The count is right, and no free block (`free(b)`) is in SLC mode.
    pub(crate) fn check(&self, free: impl Fn(u32) -> bool) -> Result<(), String> {
        if self.slc_mode.is_empty() {
            return Ok(());
        }
        let n = self.slc_mode.iter().filter(|&&m| m).count() as u64;
        if n != self.slc_blocks {
            return Err(format!(
                "{n} blocks in SLC mode, counter {}",
                self.slc_blocks
            ));
        }
        if let Some(b) = (0..self.slc_mode.len()).find(|&b| self.slc_mode[b] && free(b as u32)) {
            return Err(format!("free block {b} marked SLC"));
        }
        Ok(())
    }
}
