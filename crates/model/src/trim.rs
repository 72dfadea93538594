//! TRIM: units unmapped at once, or (deferred release, `trim.deferred_release`)
//! cleared from the logical map at once and released later as the host
//! writes (`deferred_release.rs` keeps what is pending); the controller time a TRIM
//! costs; trimmed data dropped from the write buffer. See "TRIM and WRITE
//! ZEROES" in `docs/model.md`.

use super::log_blocks::MappingScheme;
use super::ssd::Ssd;
use super::types::{Broken, Count, NONE, Stream};

impl Ssd {
    /// A TRIM of `offset..offset + len` submitted at `t`: when it completes.
    pub(super) fn trim(&mut self, t: u64, offset: u64, len: u64) -> Result<u64, Broken> {
        self.tally.add(Count::HostTrimCmds, 1);
        self.tally.add(Count::HostTrimmedBytes, len);
        let ub = self.geo.unit_bytes;
        // Only whole mapping units are deallocated; partial units keep their data.
        let first = offset.div_ceil(ub);
        let end = ((offset + len) / ub).max(first);
        let units = end - first;
        self.map_trim(t, first, end);
        let freed = if self.geo.deferred_release {
            self.defer_release(first, end)
        } else {
            self.trim_now(t, first, end)?
        };
        // Controller work: per unit covered (the profile's historical
        // `host.trim_ns_per_unit`), per command, per range, and per unit
        // actually freed (its mapping-table update).
        let g = &self.geo;
        let work =
            units * g.trim_ns_per_unit + g.trim_cmd_ns + g.trim_range_ns + freed * g.trim_freed_ns;
        let free_at = self.timelines.ctrl_free().max(t) + work;
        self.timelines.set_ctrl_free(free_at);
        Ok(t + work)
    }

    /// Unmap `first..end` now; how many units were mapped.
    fn trim_now(&mut self, t: u64, first: u64, end: u64) -> Result<u64, Broken> {
        let before = self.mapping.mapped_units();
        for lpn in first..end {
            self.unmap(lpn);
        }
        let freed = before - self.mapping.mapped_units();
        if freed > 0 {
            if self.geo.trim_model {
                self.drop_trimmed_buffer();
            }
            if let MappingScheme::Hybrid(mut hybrid) = std::mem::take(&mut self.scheme) {
                let r = self.hybrid_trimmed(&mut hybrid, t, first, end);
                self.scheme = MappingScheme::Hybrid(hybrid);
                r?;
            }
        }
        Ok(freed)
    }

    /// Deferred release: clear the logical map of `first..end` now and
    /// queue the range for release; how many units were mapped.
    fn defer_release(&mut self, first: u64, end: u64) -> u64 {
        let mut newly = 0;
        for lpn in first..end {
            if self.mapping.is_mapped(lpn) && !self.release.is_pending(lpn) {
                self.release.set_pending(lpn);
                newly += 1;
            }
        }
        if newly > 0 {
            self.release.queue(first, end);
        }
        newly
    }

    /// Release up to `n` more trimmed units (with the credit left over from
    /// earlier writes), oldest TRIM first: each stops counting as valid.
    pub(super) fn release_pending(&mut self, n: f64) {
        self.release.earn(n);
        while let Some(next) = self.release.next_to_release() {
            if let Some(lpn) = next {
                self.unmap(lpn);
                self.release.spend();
            }
        }
        self.release.settle();
    }

    /// Trimmed data still in the write buffer is dropped, not programmed:
    /// if no unit of the host's open dpage is valid any more, the dpage
    /// is emptied (its slots are reused).
    fn drop_trimmed_buffer(&mut self) {
        let die = self.blocks.cursor() as usize;
        let wp = *self.blocks.wp(Stream::Host, die);
        if wp.block() == NONE || wp.slot() == 0 {
            return;
        }
        let live =
            (0..wp.slot()).any(|k| self.mapping.is_live(self.geo.ppn(wp.block(), wp.page(), k)));
        if !live {
            self.tally.add(Count::TrimDroppedUnits, wp.slot() as u64);
            self.blocks.drop_open_dpage(Stream::Host, die);
        }
    }
}
