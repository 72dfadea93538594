//! Placing units: where each write stream (host data, GC copies) of each
//! die places its next unit, programming the dpage it fills, and the unit
//! mapping changes every placement, copy and TRIM goes through (the
//! mapping tables and the blocks' valid counts kept in step).
//!
//! Both streams go through the same helpers here; they differ only in what
//! happens around them (the host stream moves the cursor to the next die and
//! paces GC; host programs hold write-buffer space until they complete).

use super::ssd::Ssd;
use super::types::{Count, NONE, Stream};

impl Ssd {
    // -------------------------------------------------------- unit mapping

    /// Map unmapped `lpn` to the unwritten physical unit `ppn` of `block`.
    #[inline(always)]
    pub(super) fn map_unit(&mut self, lpn: u64, ppn: u64, block: u32) {
        self.mapping.map(lpn, ppn);
        self.blocks.add_valid(block);
    }

    /// Remove the mapping of `lpn`, if any, invalidating its physical unit.
    #[inline(always)]
    pub(super) fn unmap(&mut self, lpn: u64) {
        let e = self.mapping.entry(lpn);
        if e == 0 {
            return;
        }
        self.release.unmapped(lpn);
        let ppn = self.mapping.unmap_entry(lpn, e);
        let b = self.geo.block_of_ppn(ppn);
        self.blocks.invalidate(&self.geo, b);
    }

    // ------------------------------------------------------- write points

    /// Units that still fit in the block open for `stream` on `die` (0 if none is open).
    #[inline]
    pub(super) fn wp_room(&self, stream: Stream, die: usize) -> u64 {
        let wp = self.blocks.wp(stream, die);
        if wp.block() == NONE {
            0
        } else {
            ((self.block_pages(wp.block()) - wp.page()) * self.geo.units_per_dpage - wp.slot())
                as u64
        }
    }

    /// Dpages block `b` takes: all of them, or 1/bits in SLC mode.
    #[inline]
    pub(crate) fn block_pages(&self, b: u32) -> u32 {
        if self.slc.is_slc(b) {
            self.geo.pages_per_block / self.geo.slc_bits
        } else {
            self.geo.pages_per_block
        }
    }

    /// Program time of a dpage of block `b`: SLC mode, and wear.
    #[inline]
    fn prog_time(&self, b: u32) -> u64 {
        let base = if self.slc.is_slc(b) {
            self.geo.t_prog_slc
        } else {
            self.geo.t_prog
        };
        if self.geo.prog_growth > 0.0 {
            self.wear_scaled(base, self.geo.prog_growth, b)
        } else {
            base
        }
    }

    /// `base` grown by `growth` × (erase count / rated cycles) of block `b`.
    #[inline]
    pub(crate) fn wear_scaled(&self, base: u64, growth: f64, b: u32) -> u64 {
        let wear = self.blocks.erase_count(b) as f64 / self.geo.rated_pe.max(1) as f64;
        (base as f64 * (1.0 + growth * wear)).round() as u64
    }

    /// Place `lpn` at the write point of `stream` on `die`, data at the
    /// controller at `ready`; returns the program completion time if this
    /// filled the dpage (which is then programmed).
    ///
    /// The write point must hold a block: `host_die` (host) and
    /// `ensure_gc_block` (GC) open one first.
    // Inlined into its two callers, each with a constant stream, so the
    // per-stream branches fold away (place_on runs once per unit written).
    #[inline(always)]
    pub(super) fn place_on(
        &mut self,
        stream: Stream,
        die: usize,
        lpn: u64,
        ready: u64,
    ) -> Option<u64> {
        let wp = *self.blocks.wp(stream, die);
        debug_assert!(wp.block() != NONE);
        let ppn = self.geo.ppn(wp.block(), wp.page(), wp.slot());
        // GC moves a unit trimmed but not yet released as it is; a host
        // write over it releases it (in `unmap`).
        let still_pending = stream == Stream::Gc && self.release.is_pending(lpn);
        self.unmap(lpn);
        self.map_unit(lpn, ppn, wp.block());
        if still_pending {
            self.release.set_pending(lpn);
        }
        if stream == Stream::Host && self.slc.is_slc(wp.block()) {
            self.tally.add(Count::SlcUnitsWritten, 1);
        }
        // Data reduction: the dpage is full when its compressed data fills
        // the NAND page (a page holds up to `reduction_factor` times its units).
        let full_c = self.geo.reduction_factor > 1 && {
            let c = self.reduction.unit_size(lpn);
            let cap = self.geo.physical_units_per_dpage * 256;
            self.blocks.fill_compressed(stream, die, c, cap)
        };
        let slot = self.blocks.place(stream, die, ready);
        if slot == self.geo.units_per_dpage || full_c {
            let done = self.program_open(stream, die);
            if stream == Stream::Host {
                self.blocks.next_host_die(self.geo.dies);
                self.gc_keep_pace(die, ready);
            }
            done
        } else {
            None
        }
    }

    /// Program the partially filled dpage of `stream` on `die` (padded),
    /// its data ready no earlier than `t`. Returns the program completion
    /// time, or None if nothing was pending. Used by FLUSH and idle time.
    pub(super) fn program_partial(&mut self, stream: Stream, die: usize, t: u64) -> Option<u64> {
        if !self.blocks.ready_partial(stream, die, t) {
            return None;
        }
        let done = self.program_open(stream, die);
        if stream == Stream::Host {
            self.blocks.next_host_die(self.geo.dies);
        }
        done
    }

    /// Program the open dpage of a stream on `die`, padded if partial.
    /// Returns the program completion time, or None if nothing was pending.
    #[inline]
    pub(super) fn program_open(&mut self, stream: Stream, die: usize) -> Option<u64> {
        let wp = *self.blocks.wp(stream, die);
        if wp.block() == NONE || wp.slot() == 0 {
            return None;
        }
        let dur = self.geo.chan_ns(self.geo.dpage_bytes);
        let xe = self
            .timelines
            .program_transfer(&self.geo, die, wp.ready_ns(), dur);
        let done = xe + self.prog_time(wp.block());
        self.timelines.occupy_die(die, done);
        self.tally
            .add(Count::NandPagesProgrammed, self.geo.planes as u64);
        self.tally
            .add(Count::NandBytesProgrammed, self.geo.dpage_bytes);
        self.blocks.set_last_write(wp.block(), done);
        if stream == Stream::Host && self.geo.buffer_units > 0 {
            self.buffer.hold(done, wp.slot());
        }
        let pages = self.block_pages(wp.block());
        if let Some((block, placed)) = self.blocks.dpage_programmed(&self.geo, stream, die, pages) {
            self.reduction.close(block, placed);
        }
        Some(done)
    }
}
