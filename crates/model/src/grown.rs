//! What the device's fault injection asks of the FTL: the wear of the
//! blocks a read touches (for the raw bit-error model), where a unit's data
//! is (programmed or still in an open dpage), and grown bad blocks: a block
//! that fails is retired from service the way factory bad blocks are
//! (`geometry.retired_blocks`, [`BlockState::Retired`]), after GC has
//! moved its valid data out, so the spare shrinks and GC runs with one
//! block less.
//!
//! Factory-retired blocks are the last ones of each die (the geometry says
//! which); a grown bad block is any other block in the retired state. Both
//! are saved in the state file as block states, so a restarted drive keeps
//! its grown bad blocks, and a secure erase keeps them too.

use super::ssd::Ssd;
use super::types::{BlockState, Stream};

/// Why a block could not be retired.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetireError {
    /// No such block.
    #[error("block {0} does not exist")]
    NoSuchBlock(u32),
    /// It is retired already.
    #[error("block {0} is retired already")]
    AlreadyRetired(u32),
    /// Hybrid (log-block) mapping keeps blocks in superblocks: not modelled.
    #[error("grown bad blocks are modelled for page-mapped drives only")]
    Hybrid,
    /// Retiring it would leave its die too few blocks for its share of the
    /// data and GC's reserve: the drive has run out of spare blocks.
    #[error("no spare block left on die {die}: retiring another would leave too few for the data")]
    NoSpare {
        /// The die.
        die: u32,
    },
    /// It is being written (a write point) or its data cannot be moved now
    /// (no room on its die); another block may be retired instead.
    #[error("block {0} is busy (being written, or its data cannot be moved now)")]
    Busy(u32),
}

impl Ssd {
    /// Blocks in the drive, retired ones included.
    pub fn block_count(&self) -> u32 {
        self.blocks.count() as u32
    }

    /// Blocks retired in service (grown bad blocks), not counting the
    /// factory-retired ones of the geometry.
    pub fn grown_bad_blocks(&self) -> u64 {
        self.retired_blocks() as u64 - u64::from(self.geo.retired)
    }

    /// Block erases so far (cheap: a counter).
    pub fn erases(&self) -> u64 {
        self.tally.get(super::types::Count::Erases)
    }

    /// The spare left, percent of what the drive had without grown bad
    /// blocks: blocks in service beyond those the exported capacity needs.
    pub fn spare_percent(&self) -> f64 {
        let g = &self.geo;
        let need = g.logical_units.div_ceil(u64::from(g.units_per_block));
        let first = (self.blocks.count() as u64).saturating_sub(u64::from(g.retired));
        let now = (self.blocks.count() - self.retired_blocks()) as u64;
        if first <= need {
            return 0.0;
        }
        now.saturating_sub(need) as f64 / (first - need) as f64 * 100.0
    }

    /// Blocks out of service: factory-retired and grown bad blocks.
    pub(crate) fn retired_blocks(&self) -> usize {
        let retired = BlockState::Retired as u8;
        self.blocks
            .states()
            .iter()
            .filter(|&&s| s == retired)
            .count()
    }

    /// For each mapped unit `offset..offset+len` touches: its logical unit,
    /// the erase count of the block holding it, and when that block was last
    /// programmed (model time, ns). Unmapped units are read from no NAND.
    pub fn unit_wear(&self, offset: u64, len: u64, mut f: impl FnMut(u64, u32, u64)) {
        let ub = self.geo.unit_bytes;
        let end = offset.saturating_add(len).min(self.geo.capacity);
        if end <= offset {
            return;
        }
        for lpn in offset / ub..end.div_ceil(ub) {
            let e = self.mapping.entry(lpn);
            if e == 0 {
                continue;
            }
            let b = self.geo.block_of_ppn(e - 1);
            f(lpn, self.blocks.erase_count(b), self.blocks.last_write(b));
        }
    }

    /// Whether the data of the unit at byte `offset` is programmed: `None`
    /// if the unit is unmapped, `Some(false)` while it waits in an open
    /// dpage (a FLUSH, idle time or later writes program it), `Some(true)`
    /// once its dpage is programmed or under program (done by
    /// [`Ssd::durability`]'s `programmed_by_ns`). Worked out from where the
    /// unit is, not from the counters [`Ssd::durability`] uses, so a test
    /// can check one against the other.
    pub fn unit_programmed(&self, offset: u64) -> Option<bool> {
        self.unit_ppn(offset)
            .map(|ppn| !self.ppn_in_open_dpage(ppn))
    }

    /// The physical unit holding the data of the unit at byte `offset`
    /// (`None`: unmapped).
    pub fn unit_ppn(&self, offset: u64) -> Option<u64> {
        self.mapping
            .entry(offset / self.geo.unit_bytes)
            .checked_sub(1)
    }

    /// Whether physical unit `ppn` lies in a dpage a write point is still
    /// filling (its data waits in the write buffer, not programmed).
    pub fn ppn_in_open_dpage(&self, ppn: u64) -> bool {
        if self.scheme.is_hybrid() {
            // Hybrid mapping programs partly filled dpages at the end of
            // each request.
            return false;
        }
        let b = self.geo.block_of_ppn(ppn);
        let die = self.geo.die_of_block(b) as usize;
        [Stream::Host, Stream::Gc].iter().any(|&s| {
            let wp = self.blocks.wp(s, die);
            wp.block() == b
                && wp.slot() > 0
                && self.geo.dpage_of_ppn(ppn)
                    == self.geo.dpage_of_ppn(self.geo.ppn(b, wp.page(), 0))
        })
    }

    /// Retire block `b` as a grown bad block at model time `now_ns`: a free
    /// block leaves the pool; a full one is first collected (its valid
    /// units copied by GC, taking die and channel time as GC does, and the
    /// block erased), then leaves it. Refused, with the state untouched,
    /// for a block being written, one whose data cannot be moved now, and
    /// when its die would be left without spare blocks.
    pub fn retire_block(&mut self, now_ns: u64, b: u32) -> Result<(), RetireError> {
        if self.scheme.is_hybrid() {
            return Err(RetireError::Hybrid);
        }
        if b as usize >= self.blocks.count() {
            return Err(RetireError::NoSuchBlock(b));
        }
        let die = self.geo.die_of_block(b);
        match self.block_state(b) {
            Some(BlockState::Retired) => return Err(RetireError::AlreadyRetired(b)),
            Some(BlockState::Free | BlockState::Full | BlockState::Victim) => {}
            _ => return Err(RetireError::Busy(b)),
        }
        if !self.die_has_spare(die) {
            return Err(RetireError::NoSpare { die });
        }
        let d = die as usize;
        let now = now_ns.max(self.timelines.now());
        // The die keeps its pool above GC's threshold through this: moving
        // the block's data out takes free blocks, and GC needs one to copy
        // into (without one the die stalls). Collect other victims first
        // (GC may pick this block itself; then it is free already).
        let upb = u64::from(self.geo.units_per_block);
        let mut guard = self.geo.blocks_per_die;
        loop {
            let moving = match self.block_state(b) {
                Some(BlockState::Full | BlockState::Victim) => {
                    u64::from(self.blocks.valid(b)).div_ceil(upb) + 1
                }
                _ => 0,
            };
            let need = u64::from(self.geo.fg_threshold) + 2 + moving;
            if self.blocks.free_len(d) as u64 >= need && !self.victims.busy(d) {
                break;
            }
            if self.victims.busy(d) && self.victims.current(d).map(|(v, _)| v) == Some(b) {
                break;
            }
            guard = guard.saturating_sub(1);
            if guard == 0 || !self.gc_one(d, now, true) {
                return Err(RetireError::Busy(b));
            }
        }
        match self.block_state(b) {
            Some(BlockState::Free) => {}
            Some(BlockState::Full | BlockState::Victim) => {
                if self.block_state(b) == Some(BlockState::Full) {
                    self.begin_victim(d, b, true);
                }
                // Copies every valid unit, then erases the block into the pool.
                if !self.gc_one(d, now, true) || self.victims.busy(d) {
                    return Err(RetireError::Busy(b));
                }
            }
            _ => return Err(RetireError::Busy(b)),
        }
        if !self.blocks.take_free(d, b) {
            return Err(RetireError::Busy(b));
        }
        self.blocks.set_state(b, BlockState::Retired);
        // Back above the threshold, as before the block failed.
        let mut guard = self.geo.blocks_per_die;
        while self.blocks.free_len(d) <= self.geo.fg_threshold as usize && guard > 0 {
            guard -= 1;
            if !self.gc_one(d, now, true) {
                break;
            }
        }
        Ok(())
    }

    /// A block that fails its erase: the most worn free block of the drive
    /// (lowest id on a tie) is retired. `None` if no die has one to spare.
    pub fn retire_worn_free_block(&mut self) -> Option<u32> {
        let mut best: Option<(u32, u32)> = None;
        for d in 0..self.geo.dies {
            if !self.die_has_spare(d) {
                continue;
            }
            for &b in self.blocks.free_list(d as usize) {
                let e = self.blocks.erase_count(b);
                if best.is_none_or(|(be, bb)| e > be || (e == be && b < bb)) {
                    best = Some((e, b));
                }
            }
        }
        let (_, b) = best?;
        self.retire_block(0, b).ok().map(|()| b)
    }

    /// The state of block `b`.
    fn block_state(&self, b: u32) -> Option<BlockState> {
        BlockState::from_u8(self.blocks.state_byte(b))
    }

    /// Whether `die` can lose one more block: afterwards it keeps at least
    /// half the spare blocks it had (blocks in service beyond its share of
    /// the exported data), and never fewer than GC's floor
    /// (`fg_threshold_blocks` + 3; `gc.reserve_pct` does not count). Below that GC would copy nearly full
    /// blocks for every block it frees; a real drive reports its spare
    /// exhausted (read-only, or a warning at the spare threshold) well
    /// before. Half is vssd's choice, not a published figure.
    fn die_has_spare(&self, die: u32) -> bool {
        let g = &self.geo;
        let b0 = die * g.blocks_per_die;
        let retired = BlockState::Retired as u8;
        let (mut out, mut valid) = (0u64, 0u64);
        for b in b0..b0 + g.blocks_per_die {
            if self.blocks.state_byte(b) == retired {
                out += 1;
            }
            valid += u64::from(self.blocks.valid(b));
        }
        let in_service = u64::from(g.blocks_per_die) - out;
        let upb = u64::from(g.units_per_block);
        // The die's data is not always its even share: judge by both.
        let share = g.logical_units.div_ceil(u64::from(g.dies)).div_ceil(upb);
        let held = valid.div_ceil(upb);
        let first = u64::from(g.blocks_per_die - g.retired_on(die)).saturating_sub(share);
        // GC's own floor, without the reserve (a policy margin that
        // grown bad blocks may use up, as they use the spare).
        let floor = g.fg_threshold.saturating_sub(g.reserve);
        let keep = first.div_ceil(2).max(u64::from(floor) + 3);
        (in_service - 1).saturating_sub(share.max(held)) >= keep
    }
}

#[cfg(test)]
mod tests {
    use crate::proptests::tiny;
    use crate::{Op, Payload, Request, Ssd};

    fn write(ssd: &mut Ssd, t: &mut u64, offset: u64, len: u64) {
        let r = Request {
            op: Op::Write,
            offset,
            len,
            payload: Payload::Unknown,
        };
        *t = ssd.submit(*t, &r).unwrap().done_ns;
    }

    #[test]
    fn a_retired_block_moves_its_data_out_and_leaves_service() {
        let p = tiny("4KiB", "4KiB", 1, "64KiB", "greedy", 0.0);
        let mut ssd = Ssd::new(&p, 1);
        let mut t = 0;
        // Half the drive written: full blocks hold data.
        let half = ssd.capacity() / 2 / 4096;
        for u in 0..half {
            write(&mut ssd, &mut t, u * 4096, 4096);
        }
        let before = ssd.counters();
        let full = (0..ssd.block_count())
            .find(|&b| ssd.block_state(b) == Some(crate::types::BlockState::Full))
            .expect("a full block");
        let valid = ssd.blocks.valid(full);
        assert!(valid > 0);
        ssd.retire_block(t, full).unwrap();
        ssd.check_invariants().unwrap();
        let after = ssd.counters();
        assert_eq!(ssd.grown_bad_blocks(), 1);
        assert_eq!(after.grown_bad_blocks, 1);
        assert_eq!(after.total_blocks, before.total_blocks - 1);
        assert_eq!(after.gc_copies - before.gc_copies, u64::from(valid));
        assert_eq!(after.mapped_units, before.mapped_units, "no data lost");
        assert_eq!(
            ssd.retire_block(t, full),
            Err(super::RetireError::AlreadyRetired(full))
        );
        // A free one goes too; the drive goes on writing.
        let b = ssd.retire_worn_free_block().expect("a free block");
        assert_ne!(b, full);
        assert_eq!(ssd.grown_bad_blocks(), 2);
        for u in 0..half {
            write(&mut ssd, &mut t, u * 4096, 4096);
        }
        ssd.check_invariants().unwrap();
        // Saved and loaded, the drive keeps them; so does a secure erase.
        let mut buf = Vec::new();
        ssd.save(&mut buf).unwrap();
        let loaded = Ssd::load(&p, &buf[..]).unwrap();
        assert_eq!(loaded.grown_bad_blocks(), 2);
        loaded.check_invariants().unwrap();
        ssd.secure_erase();
        assert_eq!(ssd.grown_bad_blocks(), 2);
        ssd.check_invariants().unwrap();
    }

    #[test]
    fn retiring_stops_at_the_spare() {
        let p = tiny("4KiB", "4KiB", 1, "64KiB", "greedy", 0.0);
        let mut ssd = Ssd::new(&p, 1);
        let mut n = 0;
        while ssd.retire_worn_free_block().is_some() {
            n += 1;
            assert!(n < 10_000);
        }
        assert!(n > 0);
        ssd.check_invariants().unwrap();
        // The drive still takes its whole capacity.
        let mut t = 0;
        for u in 0..ssd.capacity() / 4096 {
            write(&mut ssd, &mut t, u * 4096, 4096);
        }
        for u in 0..ssd.capacity() / 4096 {
            write(&mut ssd, &mut t, u * 4096, 4096);
        }
        ssd.check_invariants().unwrap();
    }

    #[test]
    fn a_unit_in_an_open_dpage_is_not_programmed() {
        let p = tiny("4KiB", "4KiB", 2, "64KiB", "greedy", 0.0);
        let mut ssd = Ssd::new(&p, 1);
        let mut t = 0;
        assert_eq!(ssd.unit_programmed(0), None);
        write(&mut ssd, &mut t, 0, 4096);
        let d = ssd.durability();
        assert_eq!(ssd.unit_programmed(0), Some(d.open == 0));
        let mut wear = Vec::new();
        ssd.unit_wear(0, 8192, |lpn, e, _| wear.push((lpn, e)));
        assert_eq!(wear, [(0, 0)], "only the mapped unit");
    }
}

#[cfg(test)]
mod gc_tests {
    use crate::types::BlockState;
    use crate::{Precondition, Ssd};
    use vssd_profile::Profile;

    /// Write amplification of a random 4 KiB pass of twice the capacity,
    /// after retiring the blocks `pick` names (each time from the drive as
    /// it is then) until die 0 has no spare left.
    fn wa_after(pick: impl Fn(&Ssd) -> Option<u32>) -> (f64, u64) {
        let p = Profile::load_with_capacity("sata-mlc-2011", Some(256 << 20)).unwrap();
        let mut ssd = Ssd::new(&p, 1);
        let mut now = ssd.precondition(0, &Precondition::FillSequential { bs: 128 << 10 }, 1);
        now = ssd.precondition(
            now,
            &Precondition::Random {
                bs: 4096,
                amount: 256 << 20,
            },
            2,
        );
        for _ in 0..64 {
            let Some(b) = pick(&ssd) else { break };
            if matches!(
                ssd.retire_block(now, b),
                Err(super::RetireError::NoSpare { .. })
            ) {
                break;
            }
        }
        ssd.check_invariants().unwrap();
        let c0 = ssd.counters();
        ssd.precondition(
            now,
            &Precondition::Random {
                bs: 4096,
                amount: 512 << 20,
            },
            3,
        );
        ssd.check_invariants().unwrap();
        let c1 = ssd.counters();
        let wa = (c1.nand_bytes_programmed - c0.nand_bytes_programmed) as f64
            / (c1.host_written_bytes - c0.host_written_bytes) as f64;
        (wa, c1.grown_bad_blocks)
    }

    /// Taking a die's free blocks (it had no more than GC's threshold)
    /// must not stall it: GC refills the pool first, and the drive's write
    /// amplification rises only as its smaller spare explains (it once
    /// went from 7.5 to 55 when a die was left without a free block).
    #[test]
    fn grown_bad_blocks_raise_write_amplification_moderately() {
        let (base, none) = wa_after(|_| None);
        assert_eq!(none, 0);
        let die0 = |s: &Ssd, st: BlockState| {
            (0..s.geo.blocks_per_die).find(|&b| s.block_state(b) == Some(st))
        };
        let (free, n) = wa_after(|s| die0(s, BlockState::Free));
        let (full, m) = wa_after(|s| die0(s, BlockState::Full));
        assert!(n > 0 && m > 0, "{n} {m}");
        assert!(free >= base * 0.99 && free < base * 1.5, "{base} -> {free}");
        assert!(full >= base * 0.99 && full < base * 1.5, "{base} -> {full}");
    }
}
