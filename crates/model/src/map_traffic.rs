//! The drive's map traffic: what the mapping cache's decisions
//! (`map_cache.rs`) cost on the dies — reads of translation pages not
//! cached, write-backs of changed ones — for reads, writes, TRIM and GC
//! copies. Like `read.rs` or `gc.rs`, this module extends [`Ssd`]; the
//! cache itself knows nothing of the drive.

use super::ssd::Ssd;
use super::types::Count;

impl Ssd {
    /// The mapping entries of units `first..=last` are needed at `t`
    /// (`dirty`: they change). Every translation page of the range that is
    /// not cached is brought in (a NAND read, after a dirty page makes room
    /// by being written back); returns when all of them are in DRAM (`t`
    /// when they were, or when the whole map is in DRAM).
    pub(super) fn map_lookup(&mut self, t: u64, first: u64, last: u64, dirty: bool) -> u64 {
        if !self.map_cache.enabled() {
            return t;
        }
        let (a, b) = (self.map_cache.tpage(first), self.map_cache.tpage(last));
        let mut ready = t;
        for tp in a..=b {
            ready = ready.max(self.map_touch(t, tp, dirty));
        }
        ready
    }

    /// The entries of `lpns` change at `t` (GC moved them): their
    /// translation pages are brought in and marked changed. Consecutive
    /// units of one page cost one look-up.
    pub(super) fn map_update(&mut self, t: u64, lpns: &[u64]) {
        if !self.map_cache.enabled() {
            return;
        }
        let mut last = u32::MAX;
        for &lpn in lpns {
            let tp = self.map_cache.tpage(lpn);
            if tp != last {
                self.map_touch(t, tp, true);
                last = tp;
            }
        }
    }

    /// A TRIM of units `first..end` at `t`: translation pages it covers
    /// entirely are dropped (nothing to read: they map nothing now); the
    /// ones it covers in part are brought in and changed.
    pub(super) fn map_trim(&mut self, t: u64, first: u64, end: u64) {
        if !self.map_cache.enabled() || first >= end {
            return;
        }
        let per = self.map_cache.units_per_tpage();
        let (a, b) = (self.map_cache.tpage(first), self.map_cache.tpage(end - 1));
        for tp in a..=b {
            let lo = tp as u64 * per;
            let hi = (lo + per).min(self.geo.logical_units);
            if first <= lo && end >= hi {
                self.map_cache.forget(tp);
            } else {
                self.map_touch(t, tp, true);
            }
        }
    }

    /// One access to translation page `tp` at `t`; when it is in DRAM.
    fn map_touch(&mut self, t: u64, tp: u32, dirty: bool) -> u64 {
        let access = self.map_cache.access(tp, dirty);
        if let Some(old) = access.write_back {
            self.map_write_back(t, old);
        }
        if !access.read {
            return t;
        }
        self.tally.add(Count::MapReads, 1);
        self.tally.add(Count::NandPagesRead, 1);
        let die = tp as usize % self.geo.dies as usize;
        self.nand_read(die, t, self.geo.map_page_bytes)
    }

    /// Write translation page `tp` back to NAND from `t` on: one page
    /// programmed on its die (translation pages are spread over the dies
    /// by number). Their blocks are not modelled: the pages take die and
    /// channel time and count as NAND bytes programmed, not space.
    fn map_write_back(&mut self, t: u64, tp: u32) {
        let die = tp as usize % self.geo.dies as usize;
        let bytes = self.geo.map_page_bytes;
        let dur = self.geo.chan_ns(bytes);
        let xe = self.timelines.program_transfer(&self.geo, die, t, dur);
        self.timelines.occupy_die(die, xe + self.geo.t_prog);
        self.tally.add(Count::MapWrites, 1);
        self.tally.add(Count::NandPagesProgrammed, 1);
        self.tally.add(Count::NandBytesProgrammed, bytes);
    }
}
