//! FTL invariants: a full consistency check of the model state, used by
//! the property tests and after loading a saved state.

use super::ssd::{BlockState, NONE, Ssd};

impl Ssd {
    /// Check every FTL invariant; returns a description of the first broken one.
    /// Used by the property tests; cost is linear in the drive size.
    pub fn check_invariants(&self) -> Result<(), String> {
        let g = &self.geo;
        let mut valid = vec![0u32; self.valid.len()];
        let mut mapped = 0u64;
        for lpn in 0..g.logical_units {
            let e = self.l2p.get(lpn as usize);
            if e == 0 {
                continue;
            }
            mapped += 1;
            let ppn = e - 1;
            if ppn >= g.physical_units {
                return Err(format!("lpn {lpn} maps outside NAND: {ppn}"));
            }
            if self.p2l.get(ppn as usize) != lpn + 1 {
                return Err(format!(
                    "lpn {lpn} -> ppn {ppn}, but ppn {ppn} -> {}",
                    self.p2l.get(ppn as usize) as i64 - 1
                ));
            }
            valid[g.block_of_ppn(ppn) as usize] += 1;
        }
        let mut reverse = 0u64;
        for ppn in 0..g.physical_units {
            let e = self.p2l.get(ppn as usize);
            if e != 0 {
                reverse += 1;
                if e > g.logical_units {
                    return Err(format!("ppn {ppn} claims lpn {} beyond the drive", e - 1));
                }
                if self.l2p.get((e - 1) as usize) != ppn + 1 {
                    return Err(format!(
                        "ppn {ppn} claims lpn {}, which maps elsewhere",
                        e - 1
                    ));
                }
            }
        }
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
        let mut free = 0;
        let mut open = 0;
        for d in 0..g.dies as usize {
            for &b in &self.free[d] {
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
                if wp.block != NONE {
                    open += 1;
                    if self.state[wp.block as usize] != BlockState::Open as u8 {
                        return Err(format!("write point block {} is not open", wp.block));
                    }
                }
            }
            for v in 0..self.heads[d].len() {
                let mut b = self.heads[d][v];
                while b != NONE {
                    if self.valid[b as usize] as usize != v
                        || self.state[b as usize] != BlockState::Full as u8
                    {
                        return Err(format!(
                            "bucket {v} of die {d} holds block {b} (valid {})",
                            self.valid[b as usize]
                        ));
                    }
                    b = self.bnext[b as usize];
                }
            }
        }
        let states = |s: BlockState| self.state.iter().filter(|&&x| x == s as u8).count();
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
                && (self.state[b as usize] != BlockState::Victim as u8
                    || g.die_of_block(b) as usize != d)
            {
                return Err(format!(
                    "die {d}: collection in progress on block {b} that is not its victim"
                ));
            }
        }
        if free + open + states(BlockState::Full) + in_progress != self.valid.len() {
            return Err("free + open + full != total blocks".into());
        }
        let r = &self.raw;
        let open_units: u64 = self.wps.iter().flatten().map(|wp| wp.slot as u64).sum();
        let prog_units = r.nand_bytes_programmed / g.unit_bytes + open_units;
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
