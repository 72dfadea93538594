//! TRIM: units unmapped at once, or (deferred release, `trim.deferred_release`)
//! cleared from the logical map at once and released later as the host
//! writes; the controller time a TRIM costs; trimmed data dropped from the
//! write buffer. See "TRIM and WRITE ZEROES" in `docs/model.md`.

use super::ssd::{Broken, NONE, Ssd};
use super::write_point::Stream;

impl Ssd {
    /// A TRIM of `offset..offset + len` submitted at `t`: when it completes.
    pub(super) fn trim(&mut self, t: u64, offset: u64, len: u64) -> Result<u64, Broken> {
        self.raw.host_trim_cmds += 1;
        self.raw.host_trimmed_bytes += len;
        let ub = self.geo.unit_bytes;
        // Only whole mapping units are deallocated; partial units keep their data.
        let first = offset.div_ceil(ub);
        let end = ((offset + len) / ub).max(first);
        let units = end - first;
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
        self.ctrl_free = self.ctrl_free.max(t) + work;
        Ok(t + work)
    }

    /// Unmap `first..end` now; how many units were mapped.
    fn trim_now(&mut self, t: u64, first: u64, end: u64) -> Result<u64, Broken> {
        let before = self.mapped_units;
        for lpn in first..end {
            self.unmap(lpn);
        }
        let freed = before - self.mapped_units;
        if freed > 0 {
            if self.geo.trim_model {
                self.drop_trimmed_buffer();
            }
            if self.hy.is_some() {
                self.hy_trimmed(t, first, end)?;
            }
        }
        Ok(freed)
    }

    /// Deferred release: clear the logical map of `first..end` now and
    /// queue the range for release; how many units were mapped.
    fn defer_release(&mut self, first: u64, end: u64) -> u64 {
        let mut newly = 0;
        for lpn in first..end {
            if self.l2p.get(lpn as usize) != 0 && !self.is_pending(lpn) {
                self.set_pending(lpn);
                newly += 1;
            }
        }
        if newly > 0 {
            self.release_q.push_back((first, end));
        }
        newly
    }

    /// Whether `lpn` is trimmed but its flash not yet released.
    #[inline]
    pub(super) fn is_pending(&self, lpn: u64) -> bool {
        !self.pending.is_empty() && self.pending.get(lpn)
    }

    /// Mark mapped `lpn`, not pending yet, as trimmed but not released.
    #[inline]
    pub(super) fn set_pending(&mut self, lpn: u64) {
        self.pending.set(lpn);
        self.pending_units += 1;
    }

    /// Release up to `n` more trimmed units (with the credit left over from
    /// earlier writes), oldest TRIM first: each stops counting as valid.
    pub(super) fn release_pending(&mut self, n: f64) {
        self.release_credit += n;
        while self.release_credit >= 1.0 && self.pending_units > 0 {
            let Some(range) = self.release_q.front_mut() else {
                break;
            };
            if range.0 >= range.1 {
                self.release_q.pop_front();
                continue;
            }
            let lpn = range.0;
            range.0 += 1;
            if self.is_pending(lpn) {
                self.unmap(lpn);
                self.release_credit -= 1.0;
            }
        }
        if self.pending_units == 0 {
            // Nothing left to release: no credit is kept for later TRIMs.
            self.release_q.clear();
            self.release_credit = 0.0;
        }
    }

    /// Trimmed data still in the write buffer is dropped, not programmed:
    /// if no unit of the host's open dpage is valid any more, the dpage
    /// is emptied (its slots are reused).
    fn drop_trimmed_buffer(&mut self) {
        let die = self.cursor as usize;
        let wp = *self.wp(Stream::Host, die);
        if wp.block == NONE || wp.slot == 0 {
            return;
        }
        let live = (0..wp.slot).any(|k| self.live.get(self.geo.ppn(wp.block, wp.page, k)));
        if !live {
            self.raw.trim_dropped_units += wp.slot as u64;
            let w = self.wp_mut(Stream::Host, die);
            w.placed -= w.slot;
            w.slot = 0;
            w.ready_ns = 0;
            w.cfill = 0;
        }
    }
}
