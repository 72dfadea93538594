//! Garbage collection and the free-block pool: victim selection (greedy
//! buckets, cost-benefit scan), GC steps (foreground, incremental,
//! background), erases in idle gaps. See "Garbage collection" in
//! `docs/model.md`.

use super::ssd::{BlockState, NONE, Ssd};
use super::write_point::Stream;
use vssd_profile::GcPolicy;
use vssd_profile::SlcMode;

impl Ssd {
    // ------------------------------------------------ valid-count buckets

    /// Recreate the valid-count buckets from the block table (after a load).
    pub(crate) fn rebuild_buckets(&mut self) {
        for h in &mut self.heads {
            h.fill(NONE);
        }
        self.bnext.fill(NONE);
        self.bprev.fill(NONE);
        self.empty_full = 0;
        for b in 0..self.valid.len() as u32 {
            if self.state[b as usize] == BlockState::Full as u8 {
                self.bucket_insert(b);
            }
        }
    }

    /// Put full block `b` in its die's bucket for its valid count.
    #[inline]
    pub(super) fn bucket_insert(&mut self, b: u32) {
        let die = self.geo.die_of_block(b) as usize;
        let v = self.valid[b as usize] as usize;
        if v == 0 {
            self.empty_full += 1;
        }
        let head = self.heads[die][v];
        self.bnext[b as usize] = head;
        self.bprev[b as usize] = NONE;
        if head != NONE {
            self.bprev[head as usize] = b;
        }
        self.heads[die][v] = b;
    }

    /// Take full block `b` out of its bucket.
    #[inline]
    pub(super) fn bucket_remove(&mut self, b: u32) {
        let die = self.geo.die_of_block(b) as usize;
        let v = self.valid[b as usize] as usize;
        if v == 0 {
            self.empty_full -= 1;
        }
        let (p, n) = (self.bprev[b as usize], self.bnext[b as usize]);
        if p != NONE {
            self.bnext[p as usize] = n;
        } else {
            self.heads[die][v] = n;
        }
        if n != NONE {
            self.bprev[n as usize] = p;
        }
        self.bnext[b as usize] = NONE;
        self.bprev[b as usize] = NONE;
    }

    // ----------------------------------------------------------- the pool

    /// Give the host write point of `die` a new block, running foreground GC
    /// first if the die's free pool is at its threshold. One free block is
    /// always kept for GC. Returns false if the die cannot take host data.
    pub(super) fn alloc_host_block(&mut self, die: usize, now: u64) -> bool {
        // Incremental GC (gc_keep_pace) normally holds the pool near the
        // threshold; if it fell behind, the host write waits for whole victims.
        let mut guard = self.geo.blocks_per_die;
        while self.free[die].len() < 2 && guard > 0 {
            guard -= 1;
            if !self.gc_one(die, now, true) {
                break;
            }
        }
        if self.free[die].len() < 2 {
            return false;
        }
        let Some(b) = self.free[die].pop_front() else {
            return false; // unreachable: two or more blocks checked above
        };
        if !self.slc_mode.is_empty() && self.slc_free_units() >= self.slc_block_units() {
            // The SLC cache has room: this host block runs in SLC mode.
            self.slc_mode[b as usize] = true;
            self.slc_blocks += 1;
        }
        self.open_block(Stream::Host, die, b, now);
        true
    }

    /// Units an SLC-mode block holds.
    #[inline]
    pub(super) fn slc_block_units(&self) -> u64 {
        (self.geo.units_per_block / self.geo.slc_bits) as u64
    }

    /// Host units the SLC cache can take now (0 without a cache). A static
    /// cache has its fixed size; a dynamic one also at most what the NAND
    /// not holding mapped data (less the GC reserve) can hold in SLC mode.
    pub(crate) fn slc_free_units(&self) -> u64 {
        let size = match self.geo.slc {
            SlcMode::Off => return 0,
            SlcMode::Static => self.geo.slc_units,
            SlcMode::Dynamic => {
                let reserve = self.geo.dies as u64
                    * (self.geo.fg_threshold as u64 + 2)
                    * self.geo.units_per_block as u64;
                let room = self
                    .geo
                    .in_service_units
                    .saturating_sub(self.mapped_units + reserve);
                self.geo.slc_units.min(room / self.geo.slc_bits as u64)
            }
        };
        size.saturating_sub(self.slc_blocks * self.slc_block_units())
    }

    /// Make sure the GC write point of `die` has an open block; false if it
    /// has none and the die has no free block to open.
    #[inline]
    fn ensure_gc_block(&mut self, die: usize, now: u64) -> bool {
        if self.wp(Stream::Gc, die).block != NONE {
            return true;
        }
        let Some(b) = self.free[die].pop_front() else {
            return false;
        };
        self.open_block(Stream::Gc, die, b, now);
        true
    }

    /// Erase block `b` of `die` starting at `start` and return it to the pool.
    pub(super) fn erase_block(&mut self, die: usize, b: u32, start: u64) {
        let t_erase = if self.geo.erase_growth > 0.0 {
            self.wear_scaled(self.geo.t_erase, self.geo.erase_growth, b)
        } else {
            self.geo.t_erase
        };
        self.occupy_die(die, start + t_erase);
        if !self.slc_mode.is_empty() && self.slc_mode[b as usize] {
            self.slc_mode[b as usize] = false;
            self.slc_blocks -= 1;
        }
        if !self.bcap.is_empty() {
            self.bcap[b as usize] = 0;
        }
        self.erase_count[b as usize] += 1;
        self.raw.erases += 1;
        self.state[b as usize] = BlockState::Free as u8;
        self.free[die].push_back(b);
    }

    // ------------------------------------------------------------- victims

    /// Choose a GC victim among the full blocks of `die` that have at least
    /// one invalid unit.
    fn select_victim(&self, die: usize, now: u64) -> Option<u32> {
        let upb = self.geo.units_per_block as usize;
        if !self.bcap.is_empty() {
            return self.select_victim_reduced(die, now);
        }
        match self.geo.policy {
            GcPolicy::Greedy => (0..upb).map(|v| self.heads[die][v]).find(|&h| h != NONE),
            GcPolicy::CostBenefit => {
                let mut best: Option<(f64, u32)> = None;
                for v in 0..upb {
                    let mut b = self.heads[die][v];
                    let u = v as f64 / upb as f64;
                    while b != NONE {
                        let age = now.saturating_sub(self.last_write[b as usize]) as f64 + 1.0;
                        let score = if v == 0 {
                            f64::INFINITY
                        } else {
                            age * (1.0 - u) / (2.0 * u)
                        };
                        if best.is_none_or(|(s, _)| score > s) {
                            best = Some((score, b));
                        }
                        b = self.bnext[b as usize];
                    }
                    if v == 0 && best.is_some() {
                        break;
                    }
                }
                best.map(|(_, b)| b)
            }
        }
    }

    /// [`Self::select_victim`] with data reduction: blocks hold different
    /// numbers of units (`bcap`), so a block is a candidate only if some of
    /// its slots are invalid, and its valid fraction is over its own slots.
    fn select_victim_reduced(&self, die: usize, now: u64) -> Option<u32> {
        let upb = self.geo.units_per_block as usize;
        let mut best: Option<(f64, u32)> = None;
        for v in 0..upb {
            let mut b = self.heads[die][v];
            while b != NONE {
                let cap = self.bcap[b as usize] as usize;
                if v < cap {
                    let u = v as f64 / cap as f64;
                    let score = match self.geo.policy {
                        GcPolicy::Greedy => 1.0 - u,
                        GcPolicy::CostBenefit => {
                            let age = now.saturating_sub(self.last_write[b as usize]) as f64 + 1.0;
                            if v == 0 {
                                f64::INFINITY
                            } else {
                                age * (1.0 - u) / (2.0 * u)
                            }
                        }
                    };
                    if best.is_none_or(|(s, _)| score > s) {
                        best = Some((score, b));
                    }
                    if self.geo.policy == GcPolicy::Greedy && v == 0 {
                        return best.map(|(_, b)| b);
                    }
                }
                b = self.bnext[b as usize];
            }
        }
        best.map(|(_, b)| b)
    }

    /// Pick the die's next GC victim and make it the collection in
    /// progress. False if there is none, or no room to copy its valid units.
    fn start_victim(&mut self, die: usize, t: u64, foreground: bool) -> bool {
        let Some(victim) = self.select_victim(die, t) else {
            return false;
        };
        let need = self.valid[victim as usize];
        if need as u64 > self.wp_room(Stream::Gc, die) && self.free[die].is_empty() {
            return false;
        }
        self.begin_victim(die, victim, foreground);
        true
    }

    /// Make full block `victim` of `die` the collection in progress.
    fn begin_victim(&mut self, die: usize, victim: u32, foreground: bool) {
        let need = self.valid[victim as usize];
        self.bucket_remove(victim);
        self.state[victim as usize] = BlockState::Victim as u8;
        let upb = if self.bcap.is_empty() {
            self.geo.units_per_block as f64
        } else {
            self.bcap[victim as usize].max(need + 1) as f64
        };
        self.gc_ratio[die] = need as f64 / (upb - need as f64);
        if foreground {
            self.raw.fg_gc_victims += 1;
        } else {
            self.raw.bg_gc_victims += 1;
        }
        self.gc_cur[die] = Some((victim, 0));
    }

    // --------------------------------------------------------------- steps

    /// Reclaim one victim block on `die` completely, starting no earlier
    /// than `t` (continuing the victim in progress, if any). False if there
    /// is nothing to reclaim.
    pub(super) fn gc_one(&mut self, die: usize, t: u64, foreground: bool) -> bool {
        self.gc_step(die, t, u64::MAX, foreground)
    }

    /// Work on the die's GC victim, starting no earlier than `t`: pick one
    /// if none is in progress, copy the valid units of its next pages to the
    /// die's GC write point until about `budget` units are copied, and erase
    /// it once empty. Copies and the erase occupy the die and its channel
    /// like host I/O. False if there is nothing to reclaim or no room to
    /// copy into.
    ///
    /// Room: `start_victim` only starts a victim whose valid units fit in
    /// the GC block or a free block, and the host leaves a die its last free
    /// block (`alloc_host_block`), so copies always find room — except after
    /// `host_die`'s last resort took a die's last block. Then the copying
    /// stops where it is, the victim stays in progress (its remaining units
    /// stay valid where they are), and GC on that die resumes once a block
    /// is free again: a pause, never a panic or a lost unit.
    fn gc_step(&mut self, die: usize, t: u64, budget: u64, foreground: bool) -> bool {
        if self.gc_cur[die].is_none() && !self.start_victim(die, t, foreground) {
            return false;
        }
        let Some((victim, first_page)) = self.gc_cur[die] else {
            return false;
        };
        // Pass 1: the valid units of the next pages, up to the budget (a
        // sequential scan of the reverse map).
        let upd = self.geo.units_per_dpage;
        let mut lpns = std::mem::take(&mut self.gc_lpns);
        let mut pages = std::mem::take(&mut self.gc_pages);
        lpns.clear();
        pages.clear();
        let mut page = first_page;
        while page < self.geo.pages_per_block && (lpns.len() as u64) < budget {
            let mut slots = 0u64;
            let before = lpns.len();
            for slot in 0..upd {
                if let Some(lpn) = self.lpn_at(self.geo.ppn(victim, page, slot)) {
                    lpns.push(lpn);
                    slots |= 1u64 << (slot / self.geo.units_per_page).min(63);
                }
            }
            if lpns.len() > before {
                pages.push((lpns.len() - before, slots.count_ones()));
            }
            page += 1;
        }
        // Their mapping entries are scattered: load them all first so the
        // cache misses overlap instead of stalling one by one below.
        self.l2p.warm(&lpns);
        // Pass 2: read each page, then program its units at the GC write point.
        let mut next = 0;
        let copies_before = self.raw.gc_copies;
        let mut stalled = false;
        'pages: for &(n, plane_pages) in &pages {
            self.raw.nand_pages_read += plane_pages as u64;
            let ready = self.nand_read(die, t, n as u64 * self.geo.unit_bytes);
            for &lpn in &lpns[next..next + n] {
                if !self.ensure_gc_block(die, ready) {
                    stalled = true;
                    break 'pages;
                }
                // ensure_gc_block just made sure the GC write point is open.
                self.place_on(Stream::Gc, die, lpn, ready);
                self.raw.gc_copies += 1;
                if !self.slc_mode.is_empty() && self.slc_mode[victim as usize] {
                    self.raw.slc_units_folded += 1;
                }
            }
            next += n;
        }
        let progress = !stalled || self.raw.gc_copies != copies_before;
        self.gc_lpns = lpns;
        self.gc_pages = pages;
        if self.valid[victim as usize] == 0 {
            // Every unit is copied (or was overwritten): reclaim the block.
            // After its last page this always holds, as a victim takes no
            // new data.
            self.gc_cur[die] = None;
            self.erase_block(die, victim, t.max(self.die_busy[die]));
        } else if stalled || page >= self.geo.pages_per_block {
            // No room to copy into (see above), or units left after the last
            // page, which cannot happen: resume with a scan from the start
            // of the block rather than erase valid data. Copied units are
            // no longer in it, so a rescan finds exactly the rest.
            self.gc_cur[die] = Some((victim, 0));
        } else {
            self.gc_cur[die] = Some((victim, page));
        }
        progress
    }

    /// Incremental foreground GC, run after each host dpage programmed on a
    /// die whose pool is low: copy about as many units as reclaiming space
    /// for that dpage costs with the current victim (u / (1 − u) per unit
    /// written), so GC keeps pace with host writes in small steps instead of
    /// stalling them for whole victims when the pool runs out.
    #[inline]
    pub(super) fn gc_keep_pace(&mut self, die: usize, t: u64) {
        if self.free[die].len() > self.geo.fg_threshold as usize {
            return;
        }
        if self.gc_cur[die].is_none() && !self.start_victim(die, t, true) {
            return;
        }
        let budget = (self.geo.units_per_dpage as f64 * self.gc_ratio[die])
            .ceil()
            .max(1.0) as u64;
        self.gc_step(die, t, budget, true);
    }

    // ------------------------------------------------------------ idle time

    /// A die with nothing to do erases blocks that hold no valid data (left by
    /// TRIM or overwrites), as long as the erase ends before `now`: such
    /// erases only use time the die would have spent idle, so they never
    /// delay host I/O. This is why a trimmed drive is soon back to fresh-like
    /// speed even without a long idle period.
    pub(super) fn erase_in_gaps(&mut self, now: u64) {
        if self.hy.is_some() {
            self.hy_idle(now);
            return;
        }
        if self.empty_full == 0 {
            return;
        }
        for die in 0..self.geo.dies as usize {
            loop {
                let b = self.heads[die][0];
                if b == NONE || self.die_busy[die] + self.geo.t_erase > now {
                    break;
                }
                self.bucket_remove(b);
                self.raw.bg_gc_victims += 1;
                self.erase_block(die, b, self.die_busy[die]);
            }
        }
    }

    /// Work a drive does when the host leaves it alone: once no host command
    /// has been outstanding for `bg_idle_ms`, program buffered data, erase
    /// blocks holding no valid data, and run GC on each die until it has
    /// `bg_target_blocks` free, all within the idle gap.
    pub(super) fn background(&mut self, now: u64) {
        if self.geo.bg_idle_ns == 0 || self.hy.is_some() {
            return;
        }
        let idle_start = self.last_host_done + self.geo.bg_idle_ns;
        if now <= idle_start {
            return;
        }
        self.program_partial(Stream::Host, self.cursor as usize, idle_start);
        let target = self.geo.bg_target as usize;
        for die in 0..self.geo.dies as usize {
            let mut guard = self.geo.blocks_per_die;
            // Blocks with no valid data left (after TRIM or overwrites) cost
            // only an erase: always reclaim those; copy-GC only up to the target.
            while (self.free[die].len() < target || self.heads[die][0] != NONE) && guard > 0 {
                guard -= 1;
                let t = idle_start.max(self.die_busy[die]);
                if t >= now || !self.gc_one(die, t, false) {
                    break;
                }
            }
        }
        if !self.slc_mode.is_empty() {
            self.fold_slc_idle(idle_start, now);
        }
        // The idle gap is used up; the next one starts after new host I/O.
        self.last_host_done = self.last_host_done.max(now - self.geo.bg_idle_ns);
    }
}

impl Ssd {
    /// Idle time recovers the SLC cache: full SLC-mode blocks are folded
    /// (their valid units copied into native blocks by GC, at the native
    /// program time) and erased, within the idle gap `idle_start..now`.
    fn fold_slc_idle(&mut self, idle_start: u64, now: u64) {
        for die in 0..self.geo.dies as usize {
            let b0 = die as u32 * self.geo.blocks_per_die;
            let mut guard = self.geo.blocks_per_die;
            while guard > 0 {
                guard -= 1;
                let t = idle_start.max(self.die_busy[die]);
                if t >= now {
                    break;
                }
                if self.gc_cur[die].is_none() {
                    let next = (b0..b0 + self.geo.blocks_per_die).find(|&b| {
                        self.slc_mode[b as usize]
                            && self.state[b as usize] == BlockState::Full as u8
                    });
                    let Some(b) = next else { break };
                    let need = self.valid[b as usize] as u64;
                    if need > self.wp_room(Stream::Gc, die) && self.free[die].is_empty() {
                        break;
                    }
                    self.begin_victim(die, b, false);
                }
                if !self.gc_one(die, t, false) {
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::proptests::tiny;
    use crate::{Op, Payload, Request, Ssd};

    #[test]
    fn gc_without_room_pauses_and_resumes() {
        // 4 dies x 12 blocks of 4 one-unit pages; half exported; no idle GC.
        let p = tiny("4KiB", "4KiB", 1, "0", "greedy", 0.0);
        let mut ssd = Ssd::new(&p, 1);
        let mut t = 0;
        let mut write = |ssd: &mut Ssd, offset| {
            let r = Request {
                op: Op::Write,
                offset,
                len: 4096,
                payload: Payload::Unknown,
            };
            t = ssd.submit(t, &r).unwrap().done_ns;
        };
        for u in 0..ssd.capacity() / 4096 {
            write(&mut ssd, u * 4096);
        }
        // Units go to the dies in turn, one per page: die 0's first block
        // holds units 0, 4, 8, 12. Overwrite two of them: that block keeps
        // two valid units, and the pools are still above the GC threshold.
        for u in [0, 8] {
            write(&mut ssd, u * 4096);
        }
        assert_eq!(ssd.counters().gc_copies, 0);
        let die = (0..4)
            .find(|&d| ssd.select_victim(d, t).is_some())
            .expect("a die with a victim");
        assert!(ssd.start_victim(die, t, true));
        let (victim, _) = ssd.gc_cur[die].unwrap();
        let valid = ssd.valid[victim as usize];
        assert!(valid > 0);
        // No free block and no open GC block: the copies have nowhere to go
        // (what host_die's last resort can leave behind).
        let pool = std::mem::take(&mut ssd.free[die]);
        assert!(!ssd.gc_one(die, t, true), "no progress is reported");
        assert_eq!(ssd.gc_cur[die], Some((victim, 0)), "victim kept");
        assert_eq!(ssd.valid[victim as usize], valid, "nothing moved or lost");
        // With a block back, the same victim is collected completely.
        ssd.free[die] = pool;
        assert!(ssd.gc_one(die, t, true));
        assert_eq!(ssd.gc_cur[die], None);
        assert_eq!(ssd.valid[victim as usize], 0);
        ssd.check_invariants().unwrap();
    }
}
