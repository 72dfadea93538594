//! FTL invariants: a full consistency check of the model state, used by
//! the property tests and after loading a saved state. Each mechanism
//! checks its own state; this adds what ties them together.

use super::log_blocks::MappingScheme;
use super::ssd::Ssd;
use super::types::{BlockState, Count};

impl Ssd {
    /// Check every FTL invariant; returns a description of the first broken one.
    /// Used by the property tests and after a load; cost is linear in the
    /// mapped units and the blocks (unmapped stretches are skipped fast).
    ///
    /// Whatever the state (e.g. one crafted to pass a checksum), this never
    /// panics, and a state it accepts cannot make the request path panic or
    /// corrupt the mapping.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.check_shapes()?;
        self.check_mapping()?;
        self.check_blocks()?;
        self.check_period()
    }

    /// The period mechanisms' state: hybrid structures, SLC and reduction
    /// per-block tables, deferred release.
    pub(super) fn check_period(&self) -> Result<(), String> {
        if let MappingScheme::Hybrid(hybrid) = &self.scheme {
            hybrid.check(&self.geo, &self.blocks, &self.mapping)?;
        }
        self.slc.check(|b| self.blocks.is(b, BlockState::Free))?;
        self.map_cache.check()?;
        self.reduction.check(
            |b| self.blocks.is(b, BlockState::Full),
            |b| self.blocks.valid(b),
        )?;
        self.release
            .check(&self.geo, |lpn| self.mapping.is_mapped(lpn))
    }

    /// Every table has the geometry's size.
    pub(super) fn check_shapes(&self) -> Result<(), String> {
        self.blocks.check_shapes(&self.geo)
    }

    /// The mapping table and the reverse map are exact inverses (on the
    /// live units: an entry of a unit not live is stale and ignored), and
    /// the per-block valid counts and the mapped-unit count match them. (A
    /// load rebuilds the reverse map and the counts from the mapping table,
    /// so this holds by construction there.)
    fn check_mapping(&self) -> Result<(), String> {
        let valid = self.mapping.check(&self.geo, self.blocks.count())?;
        self.blocks.check_valid(&valid)
    }

    /// Blocks, free lists, write points, buckets, GC in progress and
    /// counters agree with each other and with the valid counts. Reads the
    /// reverse map only after the write points.
    pub(super) fn check_blocks(&self) -> Result<(), String> {
        let g = &self.geo;
        let nblocks = self.blocks.count();
        let mapped = self.mapping.mapped_units();
        let in_progress = self.victims.in_progress();
        let (free, open) = self
            .blocks
            .check(g, in_progress, |p| self.mapping.is_live(p))?;
        self.victims.check(
            g.dies,
            nblocks,
            |b| self.blocks.is(b, BlockState::Victim),
            |b| g.die_of_block(b),
        )?;
        let states = |s: BlockState| {
            self.blocks
                .states()
                .iter()
                .filter(|&&x| x == s as u8)
                .count()
        };
        let mapped_blocks = states(BlockState::Mapped);
        if mapped_blocks > 0 && !self.scheme.is_hybrid() {
            return Err("hybrid-mapped blocks in a page-mapped drive".into());
        }
        if free
            + open
            + states(BlockState::Full)
            + in_progress
            + mapped_blocks
            + states(BlockState::Retired)
            != nblocks
        {
            return Err("free + open + full != total blocks".into());
        }
        let r = &self.tally;
        let open_units: u64 = self.blocks.write_points().map(|wp| wp.slot() as u64).sum();
        let prog_units = r.get(Count::NandBytesProgrammed) / g.unit_bytes
            * g.reduction_factor as u64
            + open_units;
        if prog_units < mapped {
            return Err(format!(
                "{mapped} units mapped but only {prog_units} programmed or buffered"
            ));
        }
        let erased: u64 = self.blocks.erase_counts().iter().map(|&e| e as u64).sum();
        if erased != r.get(Count::Erases) {
            return Err(format!(
                "erase counts sum to {erased}, erase counter says {}",
                r.get(Count::Erases)
            ));
        }
        Ok(())
    }
}
