//! Deferred release (`trim.deferred_release`): per logical unit, a bit set
//! while it is trimmed but its flash not yet released (it stays mapped, so
//! GC copies it, but reads as unmapped); how many; the TRIM ranges to
//! release, oldest first; and the release credit host writes have earned.

use std::collections::VecDeque;

use super::geo::Geo;
use super::packed::Bitmap;

/// Trimmed units not released yet (empty without deferred release).
#[derive(Debug, Clone)]
pub(crate) struct DeferredRelease {
    pending: Bitmap,
    pending_units: u64,
    release_queue: VecDeque<(u64, u64)>,
    release_credit: f64,
}

impl DeferredRelease {
    /// Nothing pending.
    pub(crate) fn new(g: &Geo) -> DeferredRelease {
        DeferredRelease {
            pending: if g.deferred_release {
                Bitmap::new(g.logical_units)
            } else {
                Bitmap::default()
            },
            pending_units: 0,
            release_queue: VecDeque::new(),
            release_credit: 0.0,
        }
    }

    /// Whether `lpn` is trimmed but its flash not yet released.
    #[inline(always)]
    pub(crate) fn is_pending(&self, lpn: u64) -> bool {
        !self.pending.is_empty() && self.pending.get(lpn)
    }

    /// Units pending release.
    #[inline(always)]
    pub(crate) fn pending_units(&self) -> u64 {
        self.pending_units
    }

    /// Mark mapped `lpn`, not pending yet, as trimmed but not released.
    #[inline]
    pub(crate) fn set_pending(&mut self, lpn: u64) {
        self.pending.set(lpn);
        self.pending_units += 1;
    }

    /// `lpn` is unmapped: it is no longer pending.
    #[inline(always)]
    pub(crate) fn unmapped(&mut self, lpn: u64) {
        if self.is_pending(lpn) {
            self.pending.clear(lpn);
            self.pending_units -= 1;
        }
    }

    /// Queue `first..end` for release.
    pub(crate) fn queue(&mut self, first: u64, end: u64) {
        self.release_queue.push_back((first, end));
    }

    /// Host writes earned `n` more units of release.
    #[inline]
    pub(crate) fn earn(&mut self, n: f64) {
        self.release_credit += n;
    }

    /// While credit is left and units are pending: the next unit of the
    /// oldest TRIM range to release, if it is still pending (the caller
    /// then unmaps it and [spends](DeferredRelease::spend) the credit).
    /// `Some(None)`: a unit no longer pending, passed over.
    #[inline]
    pub(crate) fn next_to_release(&mut self) -> Option<Option<u64>> {
        while self.release_credit >= 1.0 && self.pending_units > 0 {
            let range = self.release_queue.front_mut()?;
            if range.0 >= range.1 {
                self.release_queue.pop_front();
                continue;
            }
            let lpn = range.0;
            range.0 += 1;
            return Some(self.is_pending(lpn).then_some(lpn));
        }
        None
    }

    /// A unit was released.
    #[inline]
    pub(crate) fn spend(&mut self) {
        self.release_credit -= 1.0;
    }

    /// After releasing: with nothing left to release, no credit is kept
    /// for later TRIMs.
    #[inline]
    pub(crate) fn settle(&mut self) {
        if self.pending_units == 0 {
            self.release_queue.clear();
            self.release_credit = 0.0;
        }
    }

    /// Heap bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.pending.heap_bytes() + self.release_queue.capacity() * 16
    }

    /// Bits, ranges and credit, to save.
    pub(crate) fn saved(&self) -> (&[u64], &VecDeque<(u64, u64)>, f64) {
        (
            self.pending.words(),
            &self.release_queue,
            self.release_credit,
        )
    }

    /// Take loaded bits (as many words as the bitmap's), ranges and credit.
    pub(crate) fn restore(
        &mut self,
        words: &[u64],
        queue: VecDeque<(u64, u64)>,
        credit: f64,
    ) -> Result<(), &'static str> {
        if words.len() != self.pending.words().len() {
            return Err("pending-release bits of the wrong size");
        }
        self.pending.words_mut().copy_from_slice(words);
        self.pending_units = self.pending.count_ones();
        self.release_queue = queue;
        self.release_credit = credit;
        Ok(())
    }

    /// The pending bits name mapped units only (`mapped(lpn)`), their
    /// count is the counter's, and the release ranges lie in the drive.
    pub(crate) fn check(&self, g: &Geo, mapped: impl Fn(u64) -> bool) -> Result<(), String> {
        let want = if g.deferred_release {
            g.logical_units.div_ceil(64) as usize
        } else {
            0
        };
        if self.pending.words().len() != want {
            return Err(format!(
                "{} words of pending-release bits, {want} expected",
                self.pending.words().len()
            ));
        }
        let mut n = 0u64;
        for lpn in self.pending.iter_ones() {
            if lpn >= g.logical_units || !mapped(lpn) {
                return Err(format!("unit {lpn} pending release but not mapped"));
            }
            n += 1;
        }
        if n != self.pending_units {
            return Err(format!(
                "{n} units pending release, counter says {}",
                self.pending_units
            ));
        }
        if let Some(&(lo, hi)) = self
            .release_queue
            .iter()
            .find(|&&(lo, hi)| lo > hi || hi > g.logical_units)
        {
            return Err(format!("release range {lo}..{hi} outside the drive"));
        }
        if !(self.release_credit.is_finite() && self.release_credit >= 0.0) {
            return Err(format!("release credit {}", self.release_credit));
        }
        Ok(())
    }

    /// Same bits, ranges and credit (a saved and loaded drive).
    #[cfg(test)]
    pub(crate) fn same_as(&self, other: &DeferredRelease) -> bool {
        self.pending == other.pending
            && self.release_queue == other.release_queue
            && self.release_credit == other.release_credit
    }
}
