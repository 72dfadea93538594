//! FTL invariants: a full consistency check of the model state, used by
//! the property tests and after loading a saved state.

use super::ssd::{BlockState, NONE, Ssd};

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
    /// per-block tables.
    pub(super) fn check_period(&self) -> Result<(), String> {
        self.hy_check()?;
        if !self.slc_mode.is_empty() {
            let n = self.slc_mode.iter().filter(|&&m| m).count() as u64;
            if n != self.slc_blocks {
                return Err(format!(
                    "{n} blocks in SLC mode, counter {}",
                    self.slc_blocks
                ));
            }
            if let Some(b) = (0..self.slc_mode.len())
                .find(|&b| self.slc_mode[b] && self.state[b] == BlockState::Free as u8)
            {
                return Err(format!("free block {b} marked SLC"));
            }
        }
        if !self.bcap.is_empty()
            && let Some(b) = (0..self.bcap.len())
                .find(|&b| self.state[b] == BlockState::Full as u8 && self.valid[b] > self.bcap[b])
        {
            return Err(format!("block {b}: more valid units than slots it took"));
        }
        self.check_pending()
    }

    /// Deferred release: the pending bits name mapped units only, their
    /// count is the counter's, and the release ranges lie in the drive.
    fn check_pending(&self) -> Result<(), String> {
        let g = &self.geo;
        let want = if g.deferred_release {
            g.logical_units.div_ceil(64) as usize
        } else {
            0
        };
        if self.pending.words().len() != want {
            return Err(format!(
                "{} words of pending-release bits, {want} expected",
                self.pending.words().len()
            ));
        }
        let mut n = 0u64;
        for lpn in self.pending.iter_ones() {
            if lpn >= g.logical_units || self.l2p.get(lpn as usize) == 0 {
                return Err(format!("unit {lpn} pending release but not mapped"));
            }
            n += 1;
        }
        if n != self.pending_units {
            return Err(format!(
                "{n} units pending release, counter says {}",
                self.pending_units
            ));
        }
        if let Some(&(lo, hi)) = self
            .release_q
            .iter()
            .find(|&&(lo, hi)| lo > hi || hi > g.logical_units)
        {
            return Err(format!("release range {lo}..{hi} outside the drive"));
        }
        if !(self.release_credit.is_finite() && self.release_credit >= 0.0) {
            return Err(format!("release credit {}", self.release_credit));
        }
        Ok(())
    }

    /// Every table has the geometry's size.
    pub(super) fn check_shapes(&self) -> Result<(), String> {
        let g = &self.geo;
        let nblocks = self.valid.len();
        if nblocks != g.blocks()
            || self.state.len() != nblocks
            || self.erase_count.len() != nblocks
            || self.last_write.len() != nblocks
            || self.free.len() != g.dies as usize
            || self.wps.len() != g.dies as usize
            || self.gc_cur.len() != g.dies as usize
            || self.cursor >= g.dies
        {
            return Err("tables do not match the geometry".into());
        }
        Ok(())
    }

    /// The mapping table and the reverse map are exact inverses (on the
    /// live units: an entry of a unit not live is stale and ignored), and
    /// the per-block valid counts and the mapped-unit count match them. (A
    /// load rebuilds the reverse map and the counts from the mapping table,
    /// so this holds by construction there.)
    fn check_mapping(&self) -> Result<(), String> {
        let g = &self.geo;
        let nblocks = self.valid.len();
        let mut valid = vec![0u32; nblocks];
        let mut mapped = 0u64;
        self.l2p.try_for_each_nonzero(|lpn, e| {
            mapped += 1;
            let ppn = e - 1;
            if ppn >= g.physical_units {
                return Err(format!("lpn {lpn} maps outside NAND: {ppn}"));
            }
            if !self.live.get(ppn) {
                return Err(format!("lpn {lpn} -> ppn {ppn}, which is not live"));
            }
            if self.p2l.get(ppn as usize) != lpn as u64 + 1 {
                return Err(format!(
                    "lpn {lpn} -> ppn {ppn}, but ppn {ppn} -> {}",
                    self.p2l.get(ppn as usize) as i64 - 1
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
        if valid != self.valid {
            let b = (0..valid.len())
                .find(|&b| valid[b] != self.valid[b])
                .unwrap_or(0);
            return Err(format!(
                "block {b}: {} valid units counted, {} recorded",
                valid[b], self.valid[b]
            ));
        }
        Ok(())
    }

    /// Blocks, free lists, write points, buckets, GC in progress and
    /// counters agree with each other and with the valid counts. Reads the
    /// reverse map only after the write points.
    pub(super) fn check_blocks(&self) -> Result<(), String> {
        let g = &self.geo;
        let nblocks = self.valid.len();
        let mapped = self.mapped_units;
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
            for wp in self.wps[d] {
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
                if let Some(ppn) = (next..end).find(|&p| self.live.get(p)) {
                    return Err(format!(
                        "die {d}: unit {ppn} after the write point holds data"
                    ));
                }
            }
            for v in 0..self.heads[d].len() {
                let mut b = self.heads[d][v];
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
                    b = self.bnext[b as usize];
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
        let in_progress = self.gc_cur.iter().flatten().count();
        if states(BlockState::Victim) != in_progress {
            return Err(format!(
                "{} blocks marked victim, {in_progress} collections in progress",
                states(BlockState::Victim)
            ));
        }
        for (d, cur) in self.gc_cur.iter().enumerate() {
            if let Some((b, _)) = *cur
                && (b as usize >= nblocks
                    || self.state[b as usize] != BlockState::Victim as u8
                    || g.die_of_block(b) as usize != d)
            {
                return Err(format!(
                    "die {d}: collection in progress on block {b} that is not its victim"
                ));
            }
        }
        let retired = BlockState::Retired as u8;
        if let Some(b) =
            (0..nblocks).find(|&b| (self.state[b] == retired) != g.is_retired(b as u32))
        {
            let (now, want) = if g.is_retired(b as u32) {
                ("in service", "retired")
            } else {
                ("retired", "in service")
            };
            return Err(format!(
                "block {b} is {now} but the geometry says it is {want}"
            ));
        }
        if let Some(b) = (0..nblocks).find(|&b| self.state[b] == retired && self.valid[b] != 0) {
            return Err(format!("retired block {b} holds data"));
        }
        let mapped_blocks = states(BlockState::Mapped);
        if mapped_blocks > 0 && self.hy.is_none() {
            return Err("hybrid-mapped blocks in a page-mapped drive".into());
        }
        if free
            + open
            + states(BlockState::Full)
            + in_progress
            + mapped_blocks
            + states(BlockState::Retired)
            != self.valid.len()
        {
            return Err("free + open + full != total blocks".into());
        }
        let r = &self.raw;
        let open_units: u64 = self.wps.iter().flatten().map(|wp| wp.slot as u64).sum();
        let prog_units = r.nand_bytes_programmed / g.unit_bytes * g.vx as u64 + open_units;
        if prog_units < mapped {
            return Err(format!(
                "{mapped} units mapped but only {prog_units} programmed or buffered"
            ));
        }
        let erased: u64 = self.erase_count.iter().map(|&e| e as u64).sum();
        if erased != r.erases {
            return Err(format!(
                "erase counts sum to {erased}, erase counter says {}",
                r.erases
            ));
        }
        Ok(())
    }
}
