//! Hybrid mapping's reclamation work: switching a full sequential log in,
//! and merges (partial and full) that copy a logical block's units from
//! its data block and logs into a new block, reserved as NAND reads and
//! programs on the die and channel timelines.

use super::super::log_blocks::Hybrid;
use super::super::ssd::Ssd;
use super::super::types::{Broken, Count, NONE};

impl Ssd {
    /// Sequential log `li` of `logical_sb` holds every unit of `logical_sb` at its
    /// offset: it becomes the data block; the old one is erased.
    pub(super) fn switch_log(
        &mut self,
        hybrid: &mut Hybrid,
        li: u32,
        logical_sb: u32,
        t: u64,
    ) -> Result<(), Broken> {
        let physical_sb = hybrid.drop_log(li)?.physical_sb();
        self.set_data_block(
            hybrid,
            logical_sb,
            physical_sb,
            t,
            "hybrid: switched-out data block still holds data",
        )
    }

    /// Make `physical_sb` the data block of `logical_sb` and erase the one it replaces,
    /// which must hold no valid unit any more (`broken` says which
    /// reclamation left one behind).
    fn set_data_block(
        &mut self,
        hybrid: &mut Hybrid,
        logical_sb: u32,
        physical_sb: u32,
        t: u64,
        broken: &'static str,
    ) -> Result<(), Broken> {
        let old = hybrid.set_data(logical_sb, physical_sb);
        if old != NONE {
            if self.sb_valid(old) != 0 {
                return Err(Broken(broken));
            }
            self.erase_superblock(hybrid, old, t, false);
        }
        Ok(())
    }

    /// Copy the units of `logical_sb` at offsets `from..` into superblock `dst`
    /// at their offsets (from wherever they are now).
    ///
    /// The hot loop of every merge: it walks the destination one dpage at
    /// a time with the die and page kept as counters, so moving a unit
    /// costs no division.
    pub(super) fn merge_fill(
        &mut self,
        hybrid: &mut Hybrid,
        logical_sb: u32,
        dst: u32,
        from: u32,
        t: u64,
    ) -> Result<(), Broken> {
        let s = hybrid.sb_units();
        let upd = self.geo.units_per_dpage;
        let upb = self.geo.units_per_block as u64;
        let bpd = self.geo.blocks_per_die;
        let dies = self.geo.dies;
        let logical = self.geo.logical_units;
        let base = logical_sb as u64 * s as u64;
        self.merge_warm(hybrid, logical_sb, dst, from);
        // A full merge copies the reverse map of the data block, where each
        // unit sits at its offset as it will in `dst`, to `dst` wholesale
        // (entries of positions not live are stale in both, and ignored):
        // the copy loop then only repoints the units' forward entries and
        // live bits. `moved` is the data block when it did.
        let mut moved = NONE;
        let old = hybrid.data_of(logical_sb);
        if from == 0 && old != NONE && old != dst && self.mapping.reverse_word_aligned(upb as usize)
        {
            let upb = upb as usize;
            for d in 0..dies {
                let (bs, bd) = (d * bpd + old, d * bpd + dst);
                debug_assert_eq!(self.blocks.valid(bd), 0);
                self.mapping
                    .copy_reverse_block(bs as usize * upb, bd as usize * upb, upb);
            }
            moved = old;
        }
        let (dp0, _) = self.geo.split_dpage(from);
        let (mut die, mut page) = self.geo.split_dies(dp0);
        let mut off = from;
        // Offset of the first unit of the destination dpage of `off`.
        let mut dstart = dp0 * upd;
        // Channel time of the last read size seen (a float conversion
        // saved per copy: reads are almost always the same size).
        let mut read_ns = (u64::MAX, 0);
        while off < s {
            // One destination dpage at a time.
            let end = dstart + upd;
            let dst_block = die * bpd + dst;
            let dst_dpage = dst_block as u64 * upb + page as u64 * upd as u64;
            let mut ready = t;
            let mut n = 0u32;
            let mut last_src = u64::MAX;
            let mut src_units = 0u64;
            let mut src_die = 0usize;
            // Source dpages read for this destination dpage.
            let mut groups = 0u32;
            for o in off..end {
                let lpn = base + o as u64;
                if lpn >= logical {
                    break;
                }
                let e = self.mapping.entry(lpn);
                if e == 0 {
                    continue;
                }
                let src = e - 1;
                let sdp = self.geo.dpage_of_ppn(src);
                let src_block = self.geo.block_of_ppn(src);
                if sdp != last_src {
                    if src_units > 0 {
                        ready = ready.max(self.merge_read(src_die, t, src_units));
                    }
                    last_src = sdp;
                    src_units = 0;
                    src_die = self.geo.die_of_block(src_block) as usize;
                    groups += 1;
                }
                src_units += 1;
                let dst_ppn = dst_dpage + (o - dstart) as u64;
                if moved != NONE && src_block - src_die as u32 * bpd == moved {
                    // Its reverse entry was copied with the block's.
                    self.blocks.remove_valid(src_block);
                    self.mapping.repoint(lpn, src, dst_ppn);
                    self.blocks.add_valid(dst_block);
                } else {
                    self.merge_move(lpn, src, src_block, dst_ppn, dst_block);
                }
                n += 1;
            }
            if groups == 1 && src_die == die as usize {
                // One read, on the destination's own die: the usual copy
                // out of the old data block.
                if read_ns.0 != src_units {
                    read_ns = (src_units, self.geo.chan_ns(src_units * self.geo.unit_bytes));
                }
                self.merge_copy_within_die(dst_block, src_die, t, src_units, read_ns.1);
                self.tally.add(Count::MergeCopies, n as u64);
            } else if n == 0 && self.geo.whole_block_merges && (dstart as u64 + base) < logical {
                // Nothing written here, but the controller has no per-page
                // valid map: it reads the page where the logical block
                // has it (erased, on the destination's die) and programs
                // it anyway.
                let units = upd as u64;
                if read_ns.0 != units {
                    read_ns = (units, self.geo.chan_ns(units * self.geo.unit_bytes));
                }
                self.merge_copy_within_die(dst_block, die as usize, t, units, read_ns.1);
                self.tally.add(Count::MergeCopies, units);
            } else {
                if src_units > 0 {
                    ready = ready.max(self.merge_read(src_die, t, src_units));
                }
                if n > 0 {
                    self.hybrid_program_dpage(dst_block, die as usize, ready, 0);
                    self.tally.add(Count::MergeCopies, n as u64);
                }
            }
            off = end;
            dstart = end;
            die += 1;
            if die == dies {
                die = 0;
                page += 1;
            }
        }
        Ok(())
    }

    /// Bring into the cache what copying `logical_sb`'s units from offset `from`
    /// into `dst` will touch in the per-block tables, scattered over every
    /// die: the reverse map and valid counts of its data block (where most
    /// units come from) and of `dst`. The loads overlap, instead of one
    /// cache miss after another as the copy loop walks the dies.
    fn merge_warm(&self, hybrid: &Hybrid, logical_sb: u32, dst: u32, from: u32) {
        let g = &self.geo;
        let (page0, _) = g.split_dies(g.split_dpage(from).0);
        let upb = g.units_per_block as usize;
        let skip = page0 as usize * g.units_per_dpage as usize;
        let src = hybrid.data_of(logical_sb);
        let mut acc = 0u64;
        for d in 0..g.dies {
            for physical_sb in [src, dst] {
                if physical_sb == NONE {
                    continue;
                }
                let b = d * g.blocks_per_die + physical_sb;
                self.mapping
                    .warm_reverse(b as usize * upb + skip, upb - skip);
                acc ^= self.blocks.valid(b) as u64;
            }
            acc ^= self.blocks.last_write(d * g.blocks_per_die + dst);
        }
        std::hint::black_box(acc);
    }

    /// Read `units` units of one dpage on `die`; when they are at the controller.
    pub(super) fn merge_read(&mut self, die: usize, t: u64, units: u64) -> u64 {
        let pages = if units == 1 {
            1
        } else {
            units.div_ceil(self.geo.units_per_page as u64)
        };
        self.tally
            .add(Count::NandPagesRead, pages.min(self.geo.planes as u64));
        self.nand_read(die, t, units * self.geo.unit_bytes)
    }

    /// Move `lpn` from physical unit `src` (in block `src_block`) to `dst`
    /// (in block `dst_block`): a merge copy.
    #[inline]
    pub(super) fn merge_move(
        &mut self,
        lpn: u64,
        src: u64,
        src_block: u32,
        dst: u64,
        dst_block: u32,
    ) {
        self.mapping.relocate(lpn, src, dst);
        self.blocks.remove_valid(src_block);
        self.blocks.add_valid(dst_block);
    }

    /// Program the dpage holding `ppn`, its data ready at `ready`; `host`
    /// units of it are host data (held in the write buffer until done).
    pub(super) fn hybrid_program(&mut self, ppn: u64, ready: u64, host: u32) -> u64 {
        let block = self.geo.block_of_ppn(ppn);
        let die = self.geo.die_of_block(block) as usize;
        self.hybrid_program_dpage(block, die, ready, host)
    }

    /// [`Ssd::hybrid_program`] of a dpage of `block`, on `die`.
    pub(super) fn hybrid_program_dpage(
        &mut self,
        block: u32,
        die: usize,
        ready: u64,
        host: u32,
    ) -> u64 {
        let dur = self.geo.dpage_chan_ns;
        let xe = self.timelines.program_transfer(&self.geo, die, ready, dur);
        self.hybrid_programmed(block, die, xe, host)
    }

    /// Merge copy of `units` units of one dpage on `die` into a dpage of
    /// `block` on the same die: [`Ssd::merge_read`] at `t`, then
    /// [`Ssd::hybrid_program_dpage`] as soon as the data is at the controller,
    /// with both channel transfers reserved in one step. `d_read` is the
    /// read's channel time.
    #[inline]
    pub(super) fn merge_copy_within_die(
        &mut self,
        block: u32,
        die: usize,
        t: u64,
        units: u64,
        d_read: u64,
    ) -> u64 {
        let pages = if units == 1 {
            1
        } else {
            units.div_ceil(self.geo.units_per_page as u64)
        };
        self.tally
            .add(Count::NandPagesRead, pages.min(self.geo.planes as u64));
        let sensed = t.max(self.timelines.die_busy(die)) + self.geo.t_read;
        debug_assert_eq!(d_read, self.geo.chan_ns(units * self.geo.unit_bytes));
        let d_prog = self.geo.dpage_chan_ns;
        // The program starts when the read's data is at the controller
        // (the die is busy until then, and the read ends after t).
        let s_prog = self
            .timelines
            .copy_transfers(&self.geo, die, sensed, d_read, d_prog);
        self.hybrid_programmed(block, die, s_prog + d_prog, 0)
    }

    /// The program of a dpage of `block` on `die` whose transfer ends at
    /// `xe`: the die programs it, and `host` units of it are host data.
    #[inline]
    pub(super) fn hybrid_programmed(&mut self, block: u32, die: usize, xe: u64, host: u32) -> u64 {
        let t_prog = if self.geo.prog_growth > 0.0 {
            self.wear_scaled(self.geo.t_prog, self.geo.prog_growth, block)
        } else {
            self.geo.t_prog
        };
        let done = xe + t_prog;
        self.timelines.occupy_die(die, done);
        self.tally
            .add(Count::NandPagesProgrammed, self.geo.planes as u64);
        self.tally
            .add(Count::NandBytesProgrammed, self.geo.dpage_bytes);
        self.blocks.set_last_write(block, done);
        if host > 0 && self.geo.buffer_units > 0 {
            self.buffer.hold(done, host);
        }
        done
    }

    /// Full merge of `logical_sb`: every unit it has, wherever it is, programmed in
    /// order into a new superblock, which becomes its data block.
    pub(super) fn merge_full(
        &mut self,
        hybrid: &mut Hybrid,
        logical_sb: u32,
        t: u64,
    ) -> Result<(), Broken> {
        let dst = self.take_superblock(hybrid, t)?;
        self.merge_fill(hybrid, logical_sb, dst, 0, t)?;
        self.tally.add(Count::MergesFull, 1);
        self.set_data_block(
            hybrid,
            logical_sb,
            dst,
            t,
            "hybrid: merged-out data block still holds data",
        )
    }
}
