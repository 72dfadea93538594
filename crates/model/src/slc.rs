//! SLC cache (`[slc_cache]`): which blocks are (being) written in SLC
//! mode, and how many; how many host units the cache can take.

use super::geo::Geo;
use vssd_profile::{Profile, SlcMode, WhenFull};

/// Per block SLC mode (empty without a cache), and the count; the sizing
/// rule of a dynamic cache.
#[derive(Debug, Clone)]
pub(crate) struct SlcCache {
    slc_mode: Vec<bool>,
    slc_blocks: u64,
    /// Host units the cache always has room for (`static_size`).
    static_units: u64,
    /// Free user units the dynamic part needs per unit it holds
    /// (`free_per_byte`; 0: the rule by free NAND).
    free_per_unit: f64,
    /// Fold in the foreground when full (`when_full = "fold"`).
    fold_when_full: bool,
    /// Sense time of an SLC-mode page, ns (`t_read_us`; None: the NAND's).
    t_read: Option<u64>,
}

impl SlcCache {
    /// No block in SLC mode.
    pub(crate) fn new(g: &Geo, p: &Profile) -> SlcCache {
        let s = &p.slc_cache;
        SlcCache {
            slc_mode: if g.slc != SlcMode::Off {
                vec![false; g.blocks()]
            } else {
                Vec::new()
            },
            slc_blocks: 0,
            static_units: s.static_size.0 / g.unit_bytes,
            free_per_unit: s.free_per_byte,
            fold_when_full: s.when_full == WhenFull::Fold,
            t_read: (s.t_read_us > 0.0).then(|| (s.t_read_us * 1000.0).round() as u64),
        }
    }

    /// Sense time of an SLC-mode page, ns, where it differs from the NAND's.
    #[inline(always)]
    pub(crate) fn t_read(&self) -> Option<u64> {
        self.t_read
    }

    /// Whether the drive folds SLC blocks in the foreground when the
    /// cache is full (`when_full = "fold"`).
    #[inline]
    pub(crate) fn folds_when_full(&self) -> bool {
        self.fold_when_full
    }

    /// Host units in SLC-mode blocks now (their capacity, written or not).
    #[inline]
    pub(crate) fn held_units(&self, g: &Geo) -> u64 {
        self.slc_blocks * SlcCache::block_units(g)
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
    /// `mapped` units mapped: its size now ([`SlcCache::size_units`]) less
    /// what its blocks hold.
    pub(crate) fn free_units(&self, g: &Geo, mapped: u64) -> u64 {
        self.size_units(g, mapped)
            .saturating_sub(self.slc_blocks * SlcCache::block_units(g))
    }

    /// Host units the cache may hold now, with `mapped` units mapped. A
    /// static cache has its fixed size. A dynamic one has its static part
    /// and a dynamic part of at most `size − static_size`, limited by the
    /// free user capacity over `free_per_byte` where the profile sets it,
    /// else by what the NAND not holding mapped data (less the GC reserve)
    /// can hold in SLC mode.
    pub(crate) fn size_units(&self, g: &Geo, mapped: u64) -> u64 {
        match g.slc {
            SlcMode::Off => 0,
            SlcMode::Static => g.slc_units,
            SlcMode::Dynamic => {
                let dynamic = if self.free_per_unit > 0.0 {
                    let free = g.logical_units.saturating_sub(mapped);
                    (free as f64 / self.free_per_unit) as u64
                } else {
                    let reserve =
                        g.dies as u64 * (g.fg_threshold as u64 + 2) * g.units_per_block as u64;
                    let room = g.in_service_units.saturating_sub(mapped + reserve);
                    room / g.slc_bits as u64
                };
                self.static_units + g.slc_units.saturating_sub(self.static_units).min(dynamic)
            }
        }
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
