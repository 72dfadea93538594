//! The host write path under page mapping, and FLUSH: the write buffer's
//! admission, the transfer over the link, choosing the die each host unit
//! goes to, and placing it (`write_point.rs`). Hybrid mapping places units
//! its own way (`hybrid/`); the admission and transfer are shared.

use super::Payload;
use super::log_blocks::MappingScheme;
use super::ssd::Ssd;
use super::types::{Broken, Count, NONE, Stream};

impl Ssd {
    /// A host write's first and last mapping units and its transfer over
    /// the link, which starts once the write buffer admits it: (first,
    /// last, link start, link end). Shared by both mapping schemes.
    pub(super) fn write_transfer(&mut self, t: u64, offset: u64, len: u64) -> (u64, u64, u64, u64) {
        let ub = self.geo.unit_bytes;
        let first = offset / ub;
        let last = (offset + len - 1) / ub;
        let admit = if self.geo.buffer_units > 0 {
            self.buffer_admit(t, last - first + 1)
        } else {
            t
        };
        let dur = self.thermal.link_ns(self.geo.link_ns(len), len, true);
        let link_start = self.timelines.link_transfer(admit, dur);
        let link_end = link_start + dur;
        (first, last, link_start, link_end)
    }

    /// A host write of `len` bytes at `offset` submitted at `t`: when it
    /// completes (its data in the write buffer, or in NAND without one).
    pub(super) fn write(
        &mut self,
        t: u64,
        offset: u64,
        len: u64,
        payload: Payload,
    ) -> Result<u64, Broken> {
        self.tally.add(Count::HostWriteCmds, 1);
        self.tally.add(Count::HostWrittenBytes, len);
        if len == 0 {
            return Ok(t);
        }
        if self.reduction.enabled() {
            let size = self.reduction.start_write(&self.geo, payload);
            self.tally
                .add(Count::HostReducedBytes, len * size as u64 / 256);
        }
        if let MappingScheme::Hybrid(mut hybrid) = std::mem::take(&mut self.scheme) {
            // The hybrid state is out of `scheme` while the write runs
            // (nothing on its path looks at the scheme), then back.
            let done = self.hybrid_write(&mut hybrid, t, offset, len);
            self.scheme = MappingScheme::Hybrid(hybrid);
            return done;
        }
        let ub = self.geo.unit_bytes;
        let (first, last, link_start, link_end) = self.write_transfer(t, offset, len);
        let buffered = self.geo.buffer_units > 0;
        let mut done = link_end;
        // The entries change: their translation pages are brought into the
        // map cache (where only part of the map fits). A buffered write is
        // acknowledged without waiting for that; the reads and write-backs
        // take die time the programs then wait for.
        let mapped = self.map_lookup(t, first, last, true);
        if !buffered {
            done = done.max(mapped);
        }
        for (i, lpn) in (first..=last).enumerate() {
            let mut ready = (link_start + self.geo.link_ns((i as u64 + 1) * ub)).min(link_end);
            let partial = (lpn == first && !offset.is_multiple_of(ub))
                || (lpn == last && !(offset + len).is_multiple_of(ub));
            if partial && self.mapping.is_mapped(lpn) && !self.release.is_pending(lpn) {
                // Sub-unit write: read the rest of the unit first.
                self.tally.add(Count::RmwReads, 1);
                let (r, _) = self.read_group(ready, lpn, lpn);
                ready = ready.max(r);
            }
            let programmed = self.place_host(lpn, ready)?;
            if !buffered && let Some(p) = programmed {
                // Without a buffer the command waits for its data to be in NAND.
                done = done.max(p);
            }
        }
        if self.release.pending_units() > 0 {
            self.release_pending((last - first + 1) as f64 * self.geo.release_rate);
        }
        if !buffered {
            // No write buffer: the command completes when its data is in NAND.
            let cursor = self.blocks.cursor() as usize;
            if let Some(p) = self.program_partial(Stream::Host, cursor, 0) {
                done = done.max(p);
            }
        }
        Ok(done)
    }

    /// Wait for room for `n` units in the write buffer; returns the admission time.
    pub(super) fn buffer_admit(&mut self, t: u64, n: u64) -> u64 {
        let cap = self.geo.buffer_units;
        let need = n.min(cap);
        let open = self
            .blocks
            .wp(Stream::Host, self.blocks.cursor() as usize)
            .slot() as u64;
        let (admit, stall) = self.buffer.admit(t, need, open, cap);
        self.tally.add(Count::BufferStallNs, stall);
        admit
    }

    /// Place one host unit; returns the program completion time if this
    /// filled a dpage (which is then programmed).
    fn place_host(&mut self, lpn: u64, ready: u64) -> Result<Option<u64>, Broken> {
        let die = self.host_die(ready)?;
        self.host_units_placed += 1;
        if self.reduction.enabled() {
            self.reduction.assign(lpn);
        }
        // host_die returned a die whose host write point holds an open block.
        Ok(self.place_on(Stream::Host, die, lpn, ready))
    }

    /// Before a new host dpage: dies normally take host dpages in turn, but
    /// a die whose queued work (typically foreground GC) runs well past the
    /// least busy die's is passed over for that one, as controllers dispatch
    /// writes to the dies that can take them. Without this one die's GC
    /// would hold up every host write striped behind it.
    fn steer_cursor(&mut self) {
        let c = self.blocks.cursor() as usize;
        let slack = 2 * (self.geo.t_prog + self.geo.chan_ns(self.geo.dpage_bytes));
        let (best, best_busy) = self.timelines.least_busy_die(c);
        if self.timelines.die_busy(c) > best_busy + slack {
            self.blocks.set_cursor(best as u32);
        }
    }

    /// Pick the die for the next host unit: the cursor die, unless it can no
    /// longer take data (full of valid data), in which case the next one that
    /// can. The die returned has an open host block.
    fn host_die(&mut self, now: u64) -> Result<usize, Broken> {
        if self
            .blocks
            .wp(Stream::Host, self.blocks.cursor() as usize)
            .slot()
            == 0
        {
            self.steer_cursor();
        }
        for _ in 0..self.geo.dies {
            let d = self.blocks.cursor() as usize;
            if self.blocks.wp(Stream::Host, d).block() != NONE || self.alloc_host_block(d, now) {
                return Ok(d);
            }
            self.blocks.next_host_die(self.geo.dies);
        }
        // Every die is at its reserve: take a reserve block anywhere (a die
        // whose GC then finds no block to copy into pauses it, see gc_step).
        // The capacity check in profile validation (room for
        // fg_threshold_blocks + 2 blocks per die beyond the exported units)
        // makes this unreachable in practice; it is here so no input can
        // wedge the model.
        for _ in 0..self.geo.dies {
            let d = self.blocks.cursor() as usize;
            if let Some(b) = self.blocks.pop_free(d) {
                self.blocks.open(Stream::Host, d, b, now);
                return Ok(d);
            }
            self.blocks.next_host_die(self.geo.dies);
        }
        // Not a single erased block on any die, and GC could collect none:
        // exported data exceeds the NAND, which validation rules out. Report
        // it instead of panicking while other queues share the model.
        Err(Broken("no free block on any die for host data"))
    }

    /// A FLUSH at `t`: the open dpages are programmed (padded); when they
    /// and everything in the write buffer are in NAND.
    pub(super) fn flush(&mut self, t: u64) -> u64 {
        self.tally.add(Count::HostFlushCmds, 1);
        let mut done = t;
        let cursor = self.blocks.cursor() as usize;
        if let Some(p) = self.program_partial(Stream::Host, cursor, t) {
            done = done.max(p);
        }
        for die in 0..self.geo.dies as usize {
            if let Some(p) = self.program_partial(Stream::Gc, die, t) {
                done = done.max(p);
            }
        }
        if self.geo.buffer_units > 0 {
            done = done.max(self.buffer.last_release());
        }
        done
    }
}
