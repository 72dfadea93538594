//! The read path: a host read's units grouped by physical dpage, each
//! group read on its die (the whole die, or one plane where the profile's
//! planes read independently), over its channel, then over the host link
//! in the earliest gap after its data is ready.

use super::ssd::Ssd;
use super::types::Count;

impl Ssd {
    /// A host read of `len` bytes at `offset`, submitted at `t`: when its
    /// last byte has crossed the host link.
    pub(super) fn read(&mut self, t: u64, offset: u64, len: u64) -> u64 {
        self.tally.add(Count::HostReadCmds, 1);
        self.tally.add(Count::HostReadBytes, len);
        if len == 0 {
            return t;
        }
        let ub = self.geo.unit_bytes;
        let first = offset / ub;
        let last = (offset + len - 1) / ub;
        // Read look-ahead: a read that continues the previous one (within
        // the look-ahead) was begun in NAND when that one arrived; its data
        // still crosses the link only after the command.
        let issued = t;
        let t = match self.look_ahead.take() {
            Some((end, from)) if end == offset && len <= self.geo.read_ahead => from.min(t),
            _ => t,
        };
        if self.geo.read_ahead > 0 {
            self.look_ahead = Some((offset + len, issued));
        }
        // Where the data is: the mapping entries first (a NAND read of
        // each translation page not cached, where only part of the map is).
        let t = self.map_lookup(t, first, last, false);
        let mut lpn = first;
        let mut done = issued;
        while lpn <= last {
            // Group consecutive units stored in the same dpage into one NAND read.
            let (ready, n) = self.read_group(t, lpn, last);
            let lo = (lpn * ub).max(offset);
            let hi = ((lpn + n) * ub).min(offset + len);
            let dur = self
                .thermal
                .link_ns(self.geo.link_ns(hi - lo), hi - lo, false);
            done = done.max(self.timelines.link_transfer(ready.max(issued), dur) + dur);
            lpn += n;
        }
        done
    }

    /// Read the units from `lpn` on that share one physical dpage (at most up
    /// to `last`); returns when their data is at the controller, and how many.
    pub(super) fn read_group(&mut self, t: u64, lpn: u64, last: u64) -> (u64, u64) {
        let e = self.mapping.entry(lpn);
        if e == 0 || self.release.is_pending(lpn) {
            // Unmapped (never written or trimmed): zeroes, no NAND access.
            return (t, 1);
        }
        let ppn = e - 1;
        let upd = self.geo.units_per_dpage as u64;
        let dpage = ppn / upd;
        let mut n = 1;
        let mut slots = 1u64 << ((ppn % upd) / self.geo.units_per_page as u64).min(63);
        while lpn + n <= last {
            let e2 = self.mapping.entry(lpn + n);
            if e2 == 0 || (e2 - 1) / upd != dpage || self.release.is_pending(lpn + n) {
                break;
            }
            slots |= 1u64 << (((e2 - 1) % upd) / self.geo.units_per_page as u64).min(63);
            n += 1;
        }
        if self.blocks.in_open_dpage(&self.geo, ppn) {
            // Still in the write buffer / controller SRAM.
            return (t, n);
        }
        // The controller issues each NAND read: data written at random
        // costs one operation per dpage its units sit in.
        let t = if self.geo.read_op_ns > 0 {
            let s = t.max(self.timelines.ctrl_free());
            self.timelines.set_ctrl_free(s + self.geo.read_op_ns);
            s + self.geo.read_op_ns
        } else {
            t
        };
        let block = self.geo.block_of_ppn(ppn);
        let die = self.geo.die_of_block(block) as usize;
        self.tally
            .add(Count::NandPagesRead, slots.count_ones() as u64);
        let bytes = n * self.geo.unit_bytes;
        let t_read = self.sense_time(block);
        if self.geo.plane_reads && slots.count_ones() == 1 {
            let plane = slots.trailing_zeros() as usize;
            return (
                self.timelines
                    .plane_read(&self.geo, die, plane, t, bytes, t_read),
                n,
            );
        }
        (
            self.timelines
                .nand_read_tr(&self.geo, die, t, bytes, t_read),
            n,
        )
    }

    /// A NAND read on `die` of `bytes` bytes, occupying the whole die;
    /// returns when the data has crossed the channel.
    #[inline]
    pub(super) fn nand_read(&mut self, die: usize, t: u64, bytes: u64) -> u64 {
        self.timelines.nand_read(&self.geo, die, t, bytes)
    }

    /// A NAND read of `bytes` bytes of `block` on `die`, at the block's
    /// sense time (faster in SLC mode where the profile says so).
    #[inline]
    pub(super) fn nand_read_block(&mut self, die: usize, block: u32, t: u64, bytes: u64) -> u64 {
        let t_read = self.sense_time(block);
        self.timelines
            .nand_read_tr(&self.geo, die, t, bytes, t_read)
    }

    /// Sense time of a page of `block`: `slc_cache.t_read_us` for an
    /// SLC-mode block where set, else the NAND's.
    #[inline(always)]
    fn sense_time(&self, block: u32) -> u64 {
        match self.slc.t_read() {
            Some(t) if self.slc.is_slc(block) => t,
            _ => self.geo.t_read,
        }
    }
}
