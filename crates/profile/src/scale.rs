//! `--capacity`: a profile scaled to another exported capacity, keeping
//! the spare area the FTL can use in proportion. See "Scale invariance" in
//! `docs/model.md`.

use super::{Bytes, MIN_BLOCKS_PER_DIE, MappingPolicy, Profile, ProfileError, SlcMode, invalid};
use crate::size::format_size;

impl Profile {
    /// Blocks on each die that hold no host data in steady state: the free
    /// blocks GC keeps (about `fg_threshold_blocks`) and the partly filled
    /// open host and GC blocks (about one); for hybrid mapping, the merge
    /// spare and the last, partial superblock.
    ///
    /// With an SLC cache, half a block less. That is measured, not
    /// derived: counted in the model, a die keeps about two blocks outside
    /// GC's spare with or without a cache, but without one a small drive
    /// (fewer, smaller blocks) has a higher write amplification at the same
    /// spare, which counting one block more makes up for; with a cache
    /// counting `fg_threshold_blocks + 1` left a scaled
    /// `nvme-tlc-slc-cache` 6-14 % below its full-size write amplification
    /// and `fg_threshold_blocks` 5-7 % above it from 4 GiB up; half-way,
    /// every size from 1 GiB to 64 GiB is within 3 % (see "Scale
    /// invariance" in docs/model.md).
    pub fn reserve_blocks_per_die(&self) -> f64 {
        match self.mapping.policy {
            MappingPolicy::Page if self.slc_cache.mode != SlcMode::Off => {
                self.gc.fg_threshold_blocks as f64 + 0.5
            }
            MappingPolicy::Page => self.gc.fg_threshold_blocks as f64 + 1.0,
            MappingPolicy::Hybrid => 2.0,
        }
    }

    /// Over-provisioning the FTL can use: (raw − exported − the reserve of
    /// [`Profile::reserve_blocks_per_die`]) / exported. `--capacity` keeps it.
    pub fn effective_op_ratio(&self) -> f64 {
        let reserve =
            self.dies() as f64 * self.reserve_blocks_per_die() * self.block_bytes() as f64;
        let e = self.geometry.exported_capacity.0 as f64;
        (self.in_service_capacity() as f64 - reserve - e) / e
    }

    /// Return a copy exporting `capacity` bytes: blocks per plane (and, on
    /// small drives, pages per block) scaled so the spare area the FTL can
    /// use keeps its share of the capacity, everything else unchanged.
    /// A capacity below the smallest the geometry scales to is refused with
    /// that minimum ([`ProfileError::CapacityTooSmall`]).
    pub fn with_capacity(&self, capacity: u64) -> Result<Profile, ProfileError> {
        let unit = self.geometry.mapping_unit.0;
        match self.scaled(capacity) {
            Err(e) if capacity.is_multiple_of(unit) && capacity > 0 => match self.min_capacity() {
                Some(minimum) if capacity < minimum => Err(ProfileError::CapacityTooSmall {
                    profile: self.name.clone(),
                    requested: capacity,
                    minimum,
                }),
                _ => Err(e),
            },
            r => r,
        }
    }

    /// The smallest capacity [`Profile::with_capacity`] accepts for this
    /// profile, if any (a multiple of the mapping unit).
    pub fn min_capacity(&self) -> Option<u64> {
        let unit = self.geometry.mapping_unit.0;
        let top = self.geometry.exported_capacity.0 / unit;
        if self.scaled(top * unit).is_err() {
            return None;
        }
        // Smallest number of units that scales; validity grows with capacity.
        let (mut lo, mut hi) = (1u64, top);
        if self.scaled(unit).is_ok() {
            return Some(unit);
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.scaled(mid * unit).is_ok() {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        // A whole number of MiB reads better, if it works too.
        let exact = hi * unit;
        let mib = exact.div_ceil(1 << 20) << 20;
        if mib.is_multiple_of(unit) && self.scaled(mib).is_ok() {
            Some(mib)
        } else {
            Some(exact)
        }
    }

    fn scaled(&self, capacity: u64) -> Result<Profile, ProfileError> {
        let origin = format!("{} (--capacity {})", self.name, format_size(capacity));
        let unit = self.geometry.mapping_unit.0;
        if capacity == 0 || !capacity.is_multiple_of(unit) {
            let below = capacity / unit * unit;
            let above = below.saturating_add(unit);
            let nearest = if below == 0 {
                format!("the smallest is {above} bytes")
            } else {
                format!(
                    "the nearest are {below} ({}) and {above} bytes ({})",
                    format_size(below),
                    format_size(above)
                )
            };
            return Err(invalid(
                &origin,
                "--capacity",
                capacity,
                &format!(
                    "must be a positive multiple of the mapping unit ({unit} bytes): {nearest}"
                ),
            ));
        }
        let mut p = self.clone();
        let g = &self.geometry;
        let per_page_row =
            g.channels as u64 * g.dies_per_channel as u64 * g.planes_per_die as u64 * g.page_size.0;
        // The spare area the FTL can use is the over-provisioning less a
        // fixed reserve of blocks on each die (free blocks kept for GC, open
        // blocks). Scaling keeps that usable spare in proportion to the
        // capacity and adds the reserve in the scaled block size on top, so
        // write amplification does not grow as the drive shrinks.
        let reserve_row = per_page_row as f64 * self.reserve_blocks_per_die();
        let usable = (self.in_service_capacity() as f64 - reserve_row * g.pages_per_block as f64)
            / self.geometry.exported_capacity.0 as f64;
        // Never less than validation asks for (fg_threshold_blocks + 2 per
        // die beyond the exported capacity), so every capacity with enough
        // blocks is valid and the smallest one is well defined.
        let valid_row = per_page_row * (self.gc.fg_threshold_blocks as u64 + 2);
        let want_raw = |ppb: u64| {
            (capacity as f64 * usable.max(1.0) + reserve_row * ppb as f64)
                .max((capacity + valid_row * ppb) as f64)
        };
        // On small capacities, halve the pages per block (down to 16) rather
        // than remove dies, so the drive keeps its parallelism, until each
        // die has MIN_BLOCKS_PER_DIE blocks. (More, smaller blocks would
        // lower write amplification: GC finds emptier victims.)
        let mut ppb = g.pages_per_block as u64;
        let blocks = |ppb: u64| {
            (want_raw(ppb) / (per_page_row * ppb) as f64)
                .ceil()
                .max(1.0) as u64
        };
        while blocks(ppb) < MIN_BLOCKS_PER_DIE && ppb >= 32 && ppb.is_multiple_of(2) {
            ppb /= 2;
        }
        let mut bpp = blocks(ppb);
        // Whole blocks on every die would round the spare up by up to a
        // block per die (3.5 % of the capacity at 1 GiB on a 16-die TLC
        // drive): retire the blocks beyond the exact figure, spread over
        // the dies, unless that leaves a die too few for GC.
        let dies = self.dies() as u64;
        let die_blocks = (want_raw(ppb) / (per_page_row / dies * ppb) as f64).ceil() as u64;
        let mut retired = (bpp * dies).saturating_sub(die_blocks);
        let gc_room = (capacity + valid_row * ppb).div_ceil(per_page_row * ppb);
        if bpp - retired.div_ceil(dies) < gc_room || self.mapping.policy == MappingPolicy::Hybrid {
            retired = 0; // a hybrid superblock spans every die
        }
        if let Some(bpp_hybrid) = self.hybrid_scaled_blocks(capacity, ppb, per_page_row) {
            bpp = bpp_hybrid.max(gc_room);
        }
        if bpp > u32::MAX as u64 {
            return Err(invalid(
                &origin,
                "--capacity",
                capacity,
                "too large for this geometry",
            ));
        }
        p.geometry.pages_per_block = ppb as u32;
        p.geometry.blocks_per_plane = bpp as u32;
        p.geometry.retired_blocks = retired as u32;
        // A block of fewer pages is erased in proportionally less time, so
        // erases keep their share of the drive's time per byte reclaimed
        // (else a used drive's GC-bound writes slow down by the erase).
        p.nand.t_erase_us = self.nand.t_erase_us * ppb as f64 / g.pages_per_block as f64;
        p.geometry.exported_capacity = Bytes(capacity);
        if p.slc_cache.mode != SlcMode::Off {
            // The SLC cache keeps its share of the drive.
            let share = capacity as f64 / self.geometry.exported_capacity.0 as f64;
            let unit = self.geometry.mapping_unit.0;
            let size = (self.slc_cache.size.0 as f64 * share) as u64 / unit * unit;
            p.slc_cache.size = Bytes(size.max(unit));
            if self.slc_cache.static_size.0 > 0 {
                let st = (self.slc_cache.static_size.0 as f64 * share) as u64 / unit * unit;
                p.slc_cache.static_size = Bytes(st.max(unit).min(p.slc_cache.size.0));
            }
        }
        if p.thermal.enabled() {
            // The thermal time constant shrinks with the drive, as the
            // protocols' durations do: the same share of the drive written
            // heats it as much.
            let share = capacity as f64 / self.geometry.exported_capacity.0 as f64;
            p.thermal.tau_s = (self.thermal.tau_s * share).max(0.001);
        }
        if p.mapping.hmb_bytes.0 > 0 {
            // The host memory buffer keeps its share of the map, as the
            // on-chip cache does (whole pages, at least one).
            let share = capacity as f64 / self.geometry.exported_capacity.0 as f64;
            let page = self.geometry.page_size.0;
            let pages = (self.mapping.hmb_bytes.0 as f64 * share / page as f64).round() as u64;
            p.mapping.hmb_bytes = Bytes(pages.max(1) * page);
        }
        if p.mapping.cache_bytes.0 > 0 {
            // The mapping cache keeps its share of the map: a smaller drive
            // has proportionally fewer translation pages, and as many of
            // them fit in the cache (whole pages, at least one).
            let share = capacity as f64 / self.geometry.exported_capacity.0 as f64;
            let page = self.geometry.page_size.0;
            let pages = (self.mapping.cache_bytes.0 as f64 * share / page as f64).round() as u64;
            p.mapping.cache_bytes = Bytes(pages.max(1) * page);
        }
        p.validate(&origin)?;
        Ok(p)
    }

    /// Under hybrid mapping with every spare superblock a log block
    /// (`max_log_blocks = 0`), the blocks per plane at `capacity` with
    /// `ppb` pages per block (`row`: bytes of one page on every plane of
    /// every die): the logical blocks, the merge spare, and the
    /// full-size drive's ratio of log blocks to logical blocks, rounded to
    /// the nearest whole block.
    ///
    /// A hybrid map's write amplification under random writes is steep in
    /// that ratio, and on a small drive the log blocks are a small integer
    /// (about 19 at 1 GiB on `solidata-k5-64`), so the spare-area rule used
    /// for page mapping (which rounds the blocks up, and counts a partial
    /// last logical block that a small drive does not have) would give it
    /// a log block or two too many: 20 instead of 18.7, WA 48.8 instead of
    /// about 62.
    fn hybrid_scaled_blocks(&self, capacity: u64, ppb: u64, row: u64) -> Option<u64> {
        if self.mapping.policy != MappingPolicy::Hybrid || self.mapping.max_log_blocks != 0 {
            return None;
        }
        let g = &self.geometry;
        let full_lsbs = g
            .exported_capacity
            .0
            .div_ceil(row * g.pages_per_block as u64);
        let full_logs = (g.blocks_per_plane as u64).checked_sub(full_lsbs + 1)?;
        let ratio = full_logs as f64 / full_lsbs as f64;
        let lsbs = capacity.div_ceil(row * ppb);
        let logs = ((ratio * lsbs as f64).round() as u64).max(1);
        Some(lsbs + 1 + logs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets;

    #[test]
    fn smaller_blocks_erase_in_proportionally_less_time() {
        let full = Profile::load("nvme-tlc").unwrap();
        for cap in [1u64 << 30, 4 << 30] {
            let p = full.with_capacity(cap).unwrap();
            let ratio = p.geometry.pages_per_block as f64 / full.geometry.pages_per_block as f64;
            assert!(ratio < 1.0, "{cap}: blocks are smaller");
            assert!((p.nand.t_erase_us - full.nand.t_erase_us * ratio).abs() < 1e-9);
        }
        let same = full
            .with_capacity(full.geometry.exported_capacity.0)
            .unwrap();
        assert_eq!(same.nand.t_erase_us, full.nand.t_erase_us);
    }

    #[test]
    fn a_capacity_off_the_unit_names_the_nearest_valid_ones() {
        let e = Profile::load_with_capacity("sata-mlc-2011", Some(1_000_000_000))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the nearest are 999997440 (953.67MiB) and 1000001536 bytes"),
            "{e}"
        );
        let e = Profile::load_with_capacity("sata-mlc-2011", Some(100))
            .unwrap_err()
            .to_string();
        assert!(e.contains("the smallest is 4096 bytes"), "{e}");
    }

    #[test]
    fn capacity_override_keeps_op() {
        let p = Profile::load("sata-mlc-2011").unwrap();
        for cap in [512u64 << 20, 1 << 30, 4 << 30, 16 << 30] {
            let q = p.with_capacity(cap).unwrap();
            assert_eq!(q.geometry.exported_capacity.0, cap);
            assert!(
                (q.effective_op_ratio() - p.effective_op_ratio()).abs() < 0.01,
                "{} vs {}",
                q.effective_op_ratio(),
                p.effective_op_ratio()
            );
            assert!(q.op_ratio() >= p.op_ratio() - 0.005);
            assert!(q.geometry.blocks_per_plane as u64 >= MIN_BLOCKS_PER_DIE);
            assert_eq!(q.dies(), p.dies(), "parallelism kept");
        }
    }

    #[test]
    fn scaled_spare_is_exact_to_one_block_of_the_drive() {
        for name in presets::NAMES {
            let p = Profile::load(name).unwrap();
            for cap in [1u64 << 30, 4 << 30] {
                let q = p
                    .with_capacity(cap)
                    .unwrap_or_else(|e| panic!("{name} {cap}: {e}"));
                let g = &q.geometry;
                let hybrid = q.mapping.policy == MappingPolicy::Hybrid;
                assert!(g.retired_blocks < q.dies(), "{name} {cap}: {g:?}");
                assert!(
                    !hybrid || g.retired_blocks == 0,
                    "{name}: hybrid retires none"
                );
                if hybrid {
                    continue;
                }
                // The spare the FTL can use is the full-size share, plus
                // less than one block of the whole drive (not one per die).
                let extra = (q.effective_op_ratio() - p.effective_op_ratio()) * cap as f64;
                assert!(
                    extra >= -1.0 && extra < q.block_bytes() as f64,
                    "{name} {cap}: {extra} bytes beyond the exact spare, block {}",
                    q.block_bytes()
                );
            }
        }
    }

    #[test]
    fn too_small_capacity_states_the_minimum() {
        for name in presets::NAMES {
            let p = Profile::load(name).unwrap();
            let min = p.min_capacity().unwrap();
            assert!(p.with_capacity(min).is_ok(), "{name}: {min}");
            // The minimum is tight to a MiB, and every smaller capacity says it.
            for small in [p.geometry.mapping_unit.0, min - (1 << 20)] {
                match p.with_capacity(small) {
                    Err(ProfileError::CapacityTooSmall { minimum, .. }) => assert_eq!(minimum, min),
                    r => panic!("{name}: {small}: {r:?}"),
                }
            }
        }
        let e = Profile::load("sata-mlc-2011")
            .unwrap()
            .with_capacity(1 << 20);
        let msg = e.unwrap_err().to_string();
        assert!(
            msg.contains("1048576 bytes") && msg.contains("smallest"),
            "{msg}"
        );
    }
}
