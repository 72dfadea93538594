//! A channel shared by several dies: transfers reserved ahead of time, with
//! gaps usable by later requests.
//!
//! The model schedules work ahead of time (a GC victim's copies are reserved
//! on its die when GC starts). With a plain "busy until" time, one die's
//! backlog would block its channel for every other die on it; real channels
//! interleave transfers, so a transfer takes the earliest gap that fits.
//!
//! Each die's own operations are sequential, so its transfers arrive in
//! time order: every die (lane) keeps an append-only list, and a new transfer
//! is placed at the earliest time that overlaps no other lane's transfer.

use std::collections::VecDeque;

/// Per-lane busy intervals `[start, end)`, each lane sorted.
#[derive(Debug, Clone)]
pub(crate) struct Channel {
    lanes: Vec<VecDeque<(u64, u64)>>,
}

impl Channel {
    /// A channel with `lanes` dies on it.
    pub(crate) fn new(lanes: usize) -> Channel {
        Channel {
            lanes: vec![VecDeque::new(); lanes],
        }
    }

    /// Reserve `dur` ns for `lane`, starting no earlier than `t` (which must
    /// not precede that lane's previous transfer), in the earliest gap left
    /// by the other lanes; returns the start.
    pub(crate) fn reserve(&mut self, lane: usize, t: u64, dur: u64) -> u64 {
        if dur == 0 {
            return t;
        }
        let mut s = t;
        // Per other lane, the index of its first interval that may still
        // overlap; intervals are sorted, so after the first binary search
        // each lane is only walked forward.
        let mut next = [usize::MAX; 64];
        loop {
            let mut moved = false;
            for (i, l) in self.lanes.iter().enumerate() {
                if i == lane {
                    continue;
                }
                // Fast path: that lane is done by s (the common case).
                match l.back() {
                    None => continue,
                    Some(&(_, e)) if e <= s => continue,
                    _ => {}
                }
                let k = &mut next[i];
                if *k == usize::MAX {
                    *k = first_ending_after(l, s);
                }
                while let Some(&(bs, be)) = l.get(*k) {
                    if be <= s {
                        *k += 1;
                    } else if bs < s + dur {
                        s = be;
                        moved = true;
                        *k += 1;
                    } else {
                        break;
                    }
                }
            }
            if !moved {
                break;
            }
        }
        let own = &mut self.lanes[lane];
        match own.back_mut() {
            Some(last) if last.1 == s => last.1 = s + dur,
            _ => own.push_back((s, s + dur)),
        }
        s
    }

    /// Forget transfers that end at or before `t` (nothing is scheduled before it).
    pub(crate) fn prune(&mut self, t: u64) {
        for l in &mut self.lanes {
            while let Some(&(_, e)) = l.front() {
                if e <= t {
                    l.pop_front();
                } else {
                    break;
                }
            }
        }
    }

    /// Number of reserved intervals (for memory accounting).
    pub(crate) fn len(&self) -> usize {
        self.lanes.iter().map(|l| l.len()).sum()
    }
}

/// Index of the first interval of `l` (sorted) that ends after `s`.
///
/// `VecDeque::partition_point` does the same, but the compiler may leave it
/// out of line; this runs once per lane per reservation.
#[inline(always)]
fn first_ending_after(l: &VecDeque<(u64, u64)>, s: u64) -> usize {
    let (a, b) = l.as_slices();
    match a.last() {
        Some(&(_, e)) if e <= s => a.len() + b.partition_point(|&(_, e)| e <= s),
        _ => a.partition_point(|&(_, e)| e <= s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_gaps_between_other_lanes() {
        let mut c = Channel::new(2);
        assert_eq!(c.reserve(0, 100, 10), 100);
        assert_eq!(c.reserve(0, 200, 10), 200);
        assert_eq!(
            c.reserve(1, 0, 10),
            0,
            "lane 1 uses the time before lane 0's backlog"
        );
        assert_eq!(c.reserve(1, 95, 10), 110, "overlap pushes it after");
        assert_eq!(c.reserve(1, 120, 85), 210, "gap 120..200 is too small");
        c.prune(150);
        assert_eq!(c.reserve(0, 300, 5), 300);
        assert!(c.len() <= 4, "{c:?}");
    }

    #[test]
    fn search_matches_partition_point_on_wrapped_deques() {
        // Pushes after pops make the deque wrap around its buffer.
        let mut l: VecDeque<(u64, u64)> = VecDeque::with_capacity(8);
        for round in 0..40u64 {
            l.push_back((round * 10, round * 10 + 5));
            if l.len() > 6 {
                l.pop_front();
            }
            for s in 0..round * 10 + 20 {
                assert_eq!(
                    first_ending_after(&l, s),
                    l.partition_point(|&(_, e)| e <= s)
                );
            }
        }
    }
}
