//! A resource shared by several dies (a channel): busy intervals reserved in
//! the future, with gaps usable by later requests.
//!
//! The model schedules work ahead of time (a GC victim's copies are reserved
//! on its die when GC starts). With a plain "busy until" time, one die's
//! backlog would block its channel for every other die on it; real channels
//! interleave transfers, so a transfer takes the earliest gap that fits.

use std::collections::VecDeque;

/// Busy intervals `[start, end)`, sorted, disjoint, merged when touching.
#[derive(Debug, Clone, Default)]
pub(crate) struct Timeline {
    busy: VecDeque<(u64, u64)>,
}

impl Timeline {
    /// Reserve `dur` ns starting no earlier than `t`, in the earliest gap
    /// that fits; returns the start.
    pub(crate) fn reserve(&mut self, t: u64, dur: u64) -> u64 {
        if dur == 0 {
            return t;
        }
        // First interval that ends after t.
        let mut i = self.busy.partition_point(|&(_, e)| e <= t);
        let mut s = t;
        while i < self.busy.len() {
            let (bs, be) = self.busy[i];
            if s + dur <= bs {
                break;
            }
            s = s.max(be);
            i += 1;
        }
        // Insert [s, s+dur) before index i, merging with neighbours.
        let e = s + dur;
        let merge_prev = i > 0 && self.busy[i - 1].1 == s;
        let merge_next = i < self.busy.len() && self.busy[i].0 == e;
        match (merge_prev, merge_next) {
            (true, true) => {
                self.busy[i - 1].1 = self.busy[i].1;
                self.busy.remove(i);
            }
            (true, false) => self.busy[i - 1].1 = e,
            (false, true) => self.busy[i].0 = s,
            (false, false) => self.busy.insert(i, (s, e)),
        }
        s
    }

    /// Forget intervals that end at or before `t` (nothing can be scheduled before it).
    pub(crate) fn prune(&mut self, t: u64) {
        while let Some(&(_, e)) = self.busy.front() {
            if e <= t {
                self.busy.pop_front();
            } else {
                break;
            }
        }
    }

    /// Number of reserved intervals (for memory accounting).
    pub(crate) fn len(&self) -> usize {
        self.busy.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_gaps_and_merges() {
        let mut t = Timeline::default();
        assert_eq!(t.reserve(100, 10), 100);
        assert_eq!(t.reserve(0, 10), 0);
        assert_eq!(t.reserve(0, 95), 110, "gap 10..100 is too small");
        assert_eq!(t.reserve(5, 5), 10);
        assert_eq!(t.reserve(0, 5), 15);
        t.prune(50);
        assert_eq!(t.reserve(50, 1), 50);
        assert!(t.len() <= 3, "{:?}", t);
    }
}
