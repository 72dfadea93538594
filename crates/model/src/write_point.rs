//! Write points: where each write stream (host data, GC copies) of each die
//! places its next unit, and programming the dpage it fills.
//!
//! Both streams go through the same helpers here; they differ only in what
//! happens around them (the host stream moves the cursor to the next die and
//! paces GC; host programs hold write-buffer space until they complete).

use std::cmp::Reverse;

use super::ssd::{BlockState, NONE, Ssd};

/// Which write stream a unit belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Stream {
    /// Host data.
    Host = 0,
    /// Units copied by garbage collection.
    Gc = 1,
}

/// An open block being filled dpage by dpage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WritePoint {
    /// Global block id, or NONE.
    pub(crate) block: u32,
    /// Next dpage to fill in the block.
    pub(crate) page: u32,
    /// Units already placed in that dpage.
    pub(crate) slot: u32,
    /// Latest time at which data placed in the open dpage is at the controller.
    pub(crate) ready_ns: u64,
    /// Data reduction: compressed size of the units in the open dpage, in
    /// 1/256 of a unit (0 without reduction).
    pub(crate) cfill: u32,
    /// Units placed in the block so far (its slots used, with reduction).
    pub(crate) placed: u32,
}

impl WritePoint {
    pub(crate) const EMPTY: WritePoint = WritePoint {
        block: NONE,
        page: 0,
        slot: 0,
        ready_ns: 0,
        cfill: 0,
        placed: 0,
    };
}

impl Ssd {
    /// The write point of `stream` on `die`.
    #[inline]
    pub(crate) fn wp(&self, stream: Stream, die: usize) -> &WritePoint {
        &self.wps[die][stream as usize]
    }

    #[inline]
    pub(super) fn wp_mut(&mut self, stream: Stream, die: usize) -> &mut WritePoint {
        &mut self.wps[die][stream as usize]
    }

    /// Units that still fit in the block open for `stream` on `die` (0 if none is open).
    #[inline]
    pub(super) fn wp_room(&self, stream: Stream, die: usize) -> u64 {
        let wp = self.wp(stream, die);
        if wp.block == NONE {
            0
        } else {
            ((self.block_pages(wp.block) - wp.page) * self.geo.units_per_dpage - wp.slot) as u64
        }
    }

    /// Make `b`, a free block of `die`, the open block of `stream` there.
    pub(super) fn open_block(&mut self, stream: Stream, die: usize, b: u32, now: u64) {
        self.state[b as usize] = BlockState::Open as u8;
        self.last_write[b as usize] = now;
        *self.wp_mut(stream, die) = WritePoint {
            block: b,
            ..WritePoint::EMPTY
        };
    }

    fn close_block(&mut self, b: u32, placed: u32) {
        self.state[b as usize] = BlockState::Full as u8;
        if !self.bcap.is_empty() {
            self.bcap[b as usize] = placed;
        }
        self.bucket_insert(b);
    }

    /// Dpages block `b` takes: all of them, or 1/bits in SLC mode.
    #[inline]
    pub(crate) fn block_pages(&self, b: u32) -> u32 {
        if !self.slc_mode.is_empty() && self.slc_mode[b as usize] {
            self.geo.pages_per_block / self.geo.slc_bits
        } else {
            self.geo.pages_per_block
        }
    }

    /// Program time of a dpage of block `b`: SLC mode, and wear.
    #[inline]
    fn prog_time(&self, b: u32) -> u64 {
        let base = if !self.slc_mode.is_empty() && self.slc_mode[b as usize] {
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
        let wear = self.erase_count[b as usize] as f64 / self.geo.rated_pe.max(1) as f64;
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
        let wp = *self.wp(stream, die);
        debug_assert!(wp.block != NONE);
        let ppn = self.geo.ppn(wp.block, wp.page, wp.slot);
        // GC moves a unit trimmed but not yet released as it is; a host
        // write over it releases it (in `unmap`).
        let still_pending = stream == Stream::Gc && self.is_pending(lpn);
        self.unmap(lpn);
        self.map_unit(lpn, ppn, wp.block);
        if still_pending {
            self.set_pending(lpn);
        }
        if stream == Stream::Host && !self.slc_mode.is_empty() && self.slc_mode[wp.block as usize] {
            self.raw.slc_units_written += 1;
        }
        // Data reduction: the dpage is full when its compressed data fills
        // the NAND page (a page holds up to `vx` times its units).
        let full_c = self.geo.vx > 1 && {
            let c = self.csize[lpn as usize] as u32 + 1;
            let cap = self.geo.upd_phys * 256;
            let w = self.wp_mut(stream, die);
            w.cfill += c;
            cap - w.cfill.min(cap) < c
        };
        let wpm = self.wp_mut(stream, die);
        wpm.slot += 1;
        wpm.placed += 1;
        wpm.ready_ns = wpm.ready_ns.max(ready);
        if wpm.slot == self.geo.units_per_dpage || full_c {
            let done = self.program_open(stream, die);
            if stream == Stream::Host {
                self.next_host_die();
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
        let wp = self.wp_mut(stream, die);
        if wp.slot == 0 {
            return None;
        }
        wp.ready_ns = wp.ready_ns.max(t);
        let done = self.program_open(stream, die);
        if stream == Stream::Host {
            self.next_host_die();
        }
        done
    }

    /// The host stream moves on to the next die.
    #[inline]
    pub(super) fn next_host_die(&mut self) {
        self.cursor = (self.cursor + 1) % self.geo.dies;
    }

    /// Program the open dpage of a stream on `die`, padded if partial.
    /// Returns the program completion time, or None if nothing was pending.
    #[inline]
    pub(super) fn program_open(&mut self, stream: Stream, die: usize) -> Option<u64> {
        let wp = *self.wp(stream, die);
        if wp.block == NONE || wp.slot == 0 {
            return None;
        }
        let (ch, lane) = self.geo.channel_of(die);
        let dur = self.geo.chan_ns(self.geo.dpage_bytes);
        let xe = self.chan[ch].reserve(lane, wp.ready_ns.max(self.die_busy[die]), dur) + dur;
        let done = xe + self.prog_time(wp.block);
        self.occupy_die(die, done);
        self.raw.nand_pages_programmed += self.geo.planes as u64;
        self.raw.nand_bytes_programmed += self.geo.dpage_bytes;
        self.last_write[wp.block as usize] = done;
        if stream == Stream::Host && self.geo.buffer_units > 0 {
            self.buffer.push(Reverse((done, wp.slot)));
            self.buffered_units += wp.slot as u64;
            self.buffer_last_release = self.buffer_last_release.max(done);
        }
        let mut next = wp;
        next.page += 1;
        next.slot = 0;
        next.ready_ns = 0;
        next.cfill = 0;
        if next.page == self.block_pages(wp.block) {
            self.close_block(wp.block, wp.placed);
            next = WritePoint::EMPTY;
        }
        *self.wp_mut(stream, die) = next;
        Some(done)
    }

    /// Whether `ppn` lies in a dpage not yet programmed (an open write point).
    pub(super) fn in_open_dpage(&self, ppn: u64) -> bool {
        let block = self.geo.block_of_ppn(ppn);
        if self.state[block as usize] != BlockState::Open as u8 {
            return false;
        }
        let die = self.geo.die_of_block(block) as usize;
        let page =
            ((ppn % self.geo.units_per_block as u64) / self.geo.units_per_dpage as u64) as u32;
        self.wps[die]
            .iter()
            .any(|wp| wp.block == block && wp.page == page)
    }
}
