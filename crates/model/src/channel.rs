//! A channel shared by several dies (or the host link): transfers reserved
//! ahead of time, with gaps usable by later requests.
//!
//! The model schedules work ahead of time (a GC victim's copies are reserved
//! on its die when GC starts). With a plain "busy until" time, one die's
//! backlog would block its channel for every other die on it; real channels
//! interleave transfers, so a transfer takes the earliest gap that fits.
//!
//! Each die's own operations are sequential, so its transfers arrive in
//! time order: a new transfer of a die (lane) starts no earlier than the
//! end of that lane's previous one, and is placed at the earliest time that
//! overlaps no other lane's transfer. As the lane's own transfers all end
//! by then, that is the earliest gap in the *union* of every lane's busy
//! intervals, which the channel keeps coalesced: a channel saturated by
//! merge or GC work is one long busy interval, so a search walks a few
//! gaps instead of every lane's transfer list. The per-lane lists are kept
//! only to forget old transfers exactly as per-lane bookkeeping would.

#[cfg(test)]
use std::collections::VecDeque;

/// A queue of intervals: a vector whose first `head` slots are forgotten.
///
/// Reservations are appended (or inserted near the end) and forgotten
/// from the front, like a `VecDeque`, but the live intervals are one
/// slice: indexing costs no wrap-around test, and searches run on a plain
/// slice. The forgotten prefix is dropped once it is as long as the live
/// part, so the memory stays proportional and each interval is moved at
/// most once per drop on average.
#[derive(Debug, Clone, Default)]
struct Deq {
    v: Vec<(u64, u64)>,
    head: usize,
}

impl Deq {
    #[inline(always)]
    fn live(&self) -> &[(u64, u64)] {
        &self.v[self.head..]
    }

    #[inline(always)]
    fn live_mut(&mut self) -> &mut [(u64, u64)] {
        &mut self.v[self.head..]
    }

    #[inline(always)]
    fn len(&self) -> usize {
        self.v.len() - self.head
    }

    #[inline(always)]
    fn get(&self, i: usize) -> Option<&(u64, u64)> {
        self.v.get(self.head + i)
    }

    #[inline(always)]
    fn front(&self) -> Option<&(u64, u64)> {
        self.v.get(self.head)
    }

    #[inline(always)]
    fn back(&self) -> Option<&(u64, u64)> {
        self.live().last()
    }

    #[inline(always)]
    fn back_mut(&mut self) -> Option<&mut (u64, u64)> {
        self.live_mut().last_mut()
    }

    #[inline(always)]
    fn push_back(&mut self, x: (u64, u64)) {
        self.v.push(x);
    }

    #[inline]
    fn insert(&mut self, i: usize, x: (u64, u64)) {
        self.v.insert(self.head + i, x);
    }

    #[inline]
    fn remove(&mut self, i: usize) {
        self.v.remove(self.head + i);
    }

    /// Forget the intervals that end at or before `t` (sorted, so a
    /// prefix); usually none, which costs one comparison.
    #[inline]
    fn forget_ending_by(&mut self, t: u64) {
        if self.front().is_some_and(|&(_, e)| e <= t) {
            let n = 1 + self.live()[1..]
                .iter()
                .take_while(|&&(_, e)| e <= t)
                .count();
            self.forget(n);
        }
    }

    /// Forget the first `n` live intervals.
    #[inline]
    fn forget(&mut self, n: usize) {
        self.head += n;
        if self.head == self.v.len() {
            self.v.clear();
            self.head = 0;
        } else if self.head >= 64 && self.head * 2 >= self.v.len() {
            self.v.drain(..self.head);
            self.head = 0;
        }
    }
}

impl PartialEq for Deq {
    fn eq(&self, other: &Deq) -> bool {
        self.live() == other.live()
    }
}

impl std::ops::Index<usize> for Deq {
    type Output = (u64, u64);
    #[inline(always)]
    fn index(&self, i: usize) -> &(u64, u64) {
        &self.v[self.head + i]
    }
}

impl std::ops::IndexMut<usize> for Deq {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut (u64, u64) {
        &mut self.v[self.head + i]
    }
}

/// Busy intervals `[start, end)` of a channel.
#[derive(Debug, Clone)]
pub(crate) struct Channel {
    /// Per lane, its transfers (sorted, touching ones coalesced).
    lanes: Vec<Deq>,
    /// The union of the lanes' intervals: sorted, disjoint, and no two
    /// touching (touching intervals are coalesced).
    busy: Deq,
}

impl Channel {
    /// A channel with `lanes` dies on it.
    pub(crate) fn new(lanes: usize) -> Channel {
        Channel {
            lanes: vec![Deq::default(); lanes],
            busy: Deq::default(),
        }
    }

    /// Reserve `dur` ns for `lane`, starting no earlier than `t` (which must
    /// not precede the end of that lane's previous transfer), in the
    /// earliest gap left by the other lanes; returns the start.
    pub(crate) fn reserve(&mut self, lane: usize, t: u64, dur: u64) -> u64 {
        if dur == 0 {
            return t;
        }
        let (s, i) = self.find(lane, t, dur);
        self.insert(lane, i, s, s + dur);
        s
    }

    /// [`Self::reserve`] for a transfer that may come before the lane's
    /// previous ones end (a die whose planes read independently, or the
    /// host link, whose transfers go when their data is ready): it takes
    /// the earliest gap in the union, which avoids the lane's own
    /// transfers too, and is filed in order among them.
    pub(crate) fn reserve_anywhere(&mut self, lane: usize, t: u64, dur: u64) -> u64 {
        if dur == 0 {
            return t;
        }
        let (s, i) = self.gap(t, dur);
        self.insert(lane, i, s, s + dur);
        s
    }

    /// `reserve(lane, t, d1)` and then, for the same lane, `reserve(lane,
    /// s1 + d1, d2)` (a read transfer and the program transfer right after
    /// it on the same die); returns both starts. When the second fits
    /// right after the first, which is the rule while a merge copies a
    /// unit within a die, both take one search and one insertion.
    #[inline]
    pub(crate) fn reserve_pair(&mut self, lane: usize, t: u64, d1: u64, d2: u64) -> (u64, u64) {
        if d1 == 0 || d2 == 0 {
            let s1 = self.reserve(lane, t, d1);
            return (s1, self.reserve(lane, s1 + d1, d2));
        }
        let (s1, i) = self.find(lane, t, d1);
        let e2 = s1 + d1 + d2;
        // Interval i is the first that starts at or after s1 + d1.
        if self.busy.get(i).is_none_or(|&(bs, _)| bs >= e2) {
            self.insert(lane, i, s1, e2);
            return (s1, s1 + d1);
        }
        self.insert(lane, i, s1, s1 + d1);
        (s1, self.reserve(lane, s1 + d1, d2))
    }

    /// The earliest start at or after `t` of a `dur` (> 0) transfer of
    /// `lane`, and the index of the first busy interval after it.
    #[inline]
    fn find(&self, lane: usize, t: u64, dur: u64) -> (u64, usize) {
        debug_assert!(
            self.lanes[lane].back().is_none_or(|&(_, e)| e <= t),
            "lane {lane}: transfer at {t} before the end of its previous one"
        );
        self.gap(t, dur)
    }

    /// The earliest start at or after `t` of a `dur` (> 0) transfer that
    /// overlaps no busy interval, and the index of the first one after it.
    #[inline]
    fn gap(&self, t: u64, dur: u64) -> (u64, usize) {
        // The first busy interval ending after t, then forward past every
        // one the transfer would overlap.
        let live = self.busy.live();
        let mut i = match live.last() {
            Some(&(_, e)) if e <= t => live.len(),
            // Within the last interval (the usual case while work queues
            // up behind a merge): right after it.
            Some(&(bs, e)) if bs <= t => return (e, live.len()),
            _ => first_ending_after(live, t),
        };
        let mut s = t;
        while let Some(&(bs, be)) = self.busy.get(i) {
            if bs < s + dur {
                s = be;
                i += 1;
            } else {
                break;
            }
        }
        (s, i)
    }

    /// Record `[s, e)` for `lane`, before busy interval `i` (interval
    /// i - 1 ends at or before s, interval i starts at or after e),
    /// coalescing with its neighbours.
    #[inline]
    fn insert(&mut self, lane: usize, i: usize, s: u64, e: u64) {
        let left = i > 0 && self.busy[i - 1].1 == s;
        let right = self.busy.get(i).is_some_and(|&(bs, _)| bs == e);
        match (left, right) {
            (true, true) => {
                self.busy[i - 1].1 = self.busy[i].1;
                self.busy.remove(i);
            }
            (true, false) => self.busy[i - 1].1 = e,
            (false, true) => self.busy[i].0 = s,
            (false, false) => self.busy.insert(i, (s, e)),
        }
        let own = &mut self.lanes[lane];
        match own.back_mut() {
            Some(last) if last.1 == s => last.1 = e,
            Some(last) if last.0 > s => {
                // Out of order (reserve_anywhere): keep the lane sorted.
                let at = own.live().partition_point(|&(ls, _)| ls < s);
                own.insert(at, (s, e));
            }
            _ => own.push_back((s, e)),
        }
    }

    /// Forget transfers that end at or before `t` (nothing is scheduled before it).
    #[inline]
    pub(crate) fn prune(&mut self, t: u64) {
        let mut first = u64::MAX;
        for l in &mut self.lanes {
            l.forget_ending_by(t);
            if let Some(&(s, _)) = l.front() {
                first = first.min(s);
            }
        }
        self.busy.forget_ending_by(t);
        // The transfers left all end after t, so before t the channel is
        // busy only from the earliest start among them: the part of the
        // first busy interval before that came from forgotten transfers.
        if let Some(front) = self.busy.live_mut().first_mut() {
            front.0 = front.0.max(first);
        }
    }

    /// Number of reserved intervals (for memory accounting).
    pub(crate) fn len(&self) -> usize {
        self.lanes.iter().map(|l| l.len()).sum::<usize>() + self.busy.len()
    }
}

/// Index of the first interval of `l` (sorted, disjoint) that ends after `s`.
///
/// Reservations mostly land at or near the end of what is already
/// scheduled (work queued behind merges and GC), so the search gallops
/// back from the end and only then bisects the last stretch.
#[inline(always)]
fn first_ending_after(l: &[(u64, u64)], s: u64) -> usize {
    let n = l.len();
    // Invariant: every interval from `hi` on ends after s.
    let mut hi = n;
    let mut step = 1;
    let lo = loop {
        if hi == 0 {
            return 0;
        }
        let probe = hi.saturating_sub(step);
        if l[probe].1 <= s {
            break probe + 1;
        }
        hi = probe;
        step *= 2;
    };
    // Interval lo - 1 ends at or before s; the answer is in lo..=hi.
    let (mut lo, mut hi) = (lo, hi);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if l[mid].1 <= s {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
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
        // Lane 0: 200..210, 300..305; lane 1: 210..295; the union:
        // 200..295, 300..305.
        assert_eq!(c.len(), 5, "{c:?}");
    }

    /// The per-lane search this channel replaced: each lane's list walked
    /// for overlaps until the start stops moving.
    #[derive(Clone, Default)]
    struct PerLane {
        lanes: Vec<VecDeque<(u64, u64)>>,
    }

    impl PerLane {
        fn reserve(&mut self, lane: usize, t: u64, dur: u64) -> u64 {
            if dur == 0 {
                return t;
            }
            let mut s = t;
            loop {
                let mut moved = false;
                for (i, l) in self.lanes.iter().enumerate() {
                    if i == lane {
                        continue;
                    }
                    for &(bs, be) in l {
                        if be > s && bs < s + dur {
                            s = be;
                            moved = true;
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

        fn prune(&mut self, t: u64) {
            for l in &mut self.lanes {
                l.retain(|&(_, e)| e > t);
            }
        }
    }

    proptest::proptest! {
        /// Out-of-order reservations (the host link, independently read
        /// planes) take the earliest gap at or after their time that no
        /// reservation of any lane overlaps, and the lane stays sorted.
        #[test]
        fn reserve_anywhere_takes_the_earliest_free_gap(
            steps in proptest::collection::vec((0usize..2, 0u64..500, 1u64..60), 1..200),
        ) {
            let mut c = Channel::new(2);
            let mut taken: Vec<(u64, u64)> = Vec::new();
            for (lane, t, dur) in steps {
                let s = c.reserve_anywhere(lane, t, dur);
                proptest::prop_assert!(s >= t);
                let overlaps = |a: u64| taken.iter().any(|&(bs, be)| bs < a + dur && a < be);
                proptest::prop_assert!(!overlaps(s), "{s}+{dur} overlaps {taken:?}");
                // No earlier start would have fitted: every candidate
                // start before s (t, or the end of an interval) overlaps.
                for a in std::iter::once(t).chain(taken.iter().map(|&(_, e)| e)) {
                    proptest::prop_assert!(a < t || a >= s || overlaps(a), "{a} fits before {s}");
                }
                taken.push((s, s + dur));
                let l = c.lanes[lane].live();
                proptest::prop_assert!(l.iter().zip(l.iter().skip(1)).all(|(x, y)| x.1 <= y.0));
            }
        }

        /// reserve_pair is reserve twice, in starts and in what is left
        /// reserved.
        #[test]
        fn pair_is_two_reservations(
            steps in proptest::collection::vec(
                (0usize..4, 0u64..400, 0u64..60, 0u64..60, 0u8..8), 1..300),
        ) {
            let mut a = Channel::new(4);
            let mut b = Channel::new(4);
            let mut lane_end = [0u64; 4];
            let mut now = 0u64;
            for (lane, delay, d1, d2, kind) in steps {
                if kind == 0 {
                    now += delay;
                    a.prune(now);
                    b.prune(now);
                    continue;
                }
                let t = lane_end[lane].max(now.saturating_sub(100)) + delay / 4;
                let (s1, s2, end) = if kind < 4 {
                    let (s1, s2) = a.reserve_pair(lane, t, d1, d2);
                    (s1, s2, s2 + d2)
                } else {
                    let s = a.reserve(lane, t, d1);
                    (s, s, s + d1)
                };
                let (r1, r2) = if kind < 4 {
                    let r1 = b.reserve(lane, t, d1);
                    (r1, b.reserve(lane, r1 + d1, d2))
                } else {
                    let r = b.reserve(lane, t, d1);
                    (r, r)
                };
                proptest::prop_assert_eq!((s1, s2), (r1, r2));
                proptest::prop_assert_eq!(&a.busy, &b.busy);
                proptest::prop_assert_eq!(&a.lanes, &b.lanes);
                lane_end[lane] = lane_end[lane].max(end).max(s1 + d1);
            }
        }

        /// Same starts as the per-lane search, through prunes and
        /// reservations before the prune time (idle-time work is scheduled
        /// in the past), as long as each lane's transfers come in order.
        #[test]
        fn union_search_matches_per_lane_search(
            steps in proptest::collection::vec(
                (0usize..4, 0u64..400, 0u64..60, 0u8..8), 1..300),
        ) {
            let mut c = Channel::new(4);
            let mut r = PerLane { lanes: vec![VecDeque::new(); 4] };
            let mut lane_end = [0u64; 4];
            let mut now = 0u64;
            for (lane, delay, dur, kind) in steps {
                if kind == 0 {
                    now += delay;
                    c.prune(now);
                    r.prune(now);
                    continue;
                }
                // Sometimes before `now` (as idle-time work is).
                let t = lane_end[lane].max(now.saturating_sub(100)) + delay / 4;
                let a = c.reserve(lane, t, dur);
                let b = r.reserve(lane, t, dur);
                proptest::prop_assert_eq!(a, b);
                if dur > 0 {
                    lane_end[lane] = a + dur;
                }
            }
        }
    }

    #[test]
    fn search_matches_partition_point_after_forgetting() {
        // Forgetting a prefix now and then drops it from the vector.
        for keep in [6, 100] {
            let mut l = Deq::default();
            for round in 0..300u64 {
                l.push_back((round * 10, round * 10 + 5));
                if l.len() > keep {
                    l.forget(1);
                }
                assert!(l.v.len() <= 2 * keep.max(64) + 2, "{}", l.v.len());
                for s in round.saturating_sub(110) * 10..round * 10 + 20 {
                    assert_eq!(
                        first_ending_after(l.live(), s),
                        l.live().partition_point(|&(_, e)| e <= s)
                    );
                }
            }
        }
    }
}
