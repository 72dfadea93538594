//! The mapping table cached in a small DRAM (`[mapping] cache_bytes`), as
//! a DFTL-style controller keeps it (Gupta, Kim and Urgaonkar, "DFTL: a
//! flash translation layer employing demand-based selective caching of
//! page-level address mappings", ASPLOS 2009): the whole page-level map
//! lives in NAND as *translation pages* (one NAND page of entries each,
//! `entry_bytes` per logical unit), and only as many of them as fit in the
//! cache are in DRAM. A request whose translation page is not cached waits
//! for it to be read from NAND; to make room, the least recently used page
//! is evicted, and written back first if a write, TRIM or GC copy changed
//! it. On a fresh drive translation pages do not exist yet: the first
//! access to one costs nothing to load.
//!
//! This state only decides *when* map traffic happens; what it costs on
//! the dies (reads and programs reserved on their timelines) is the
//! drive's, in `map_traffic.rs`. The forward map itself stays in `Mapping`. Replacement is CLOCK (second chance), the
//! usual constant-time approximation of LRU.

use super::geo::Geo;
use super::mapping::Mapping;
use super::packed::Bitmap;

/// What one access to a translation page costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Access {
    /// The page was not cached and exists in NAND: it must be read.
    pub(crate) read: bool,
    /// A dirty page was evicted to make room: it must be written back.
    pub(crate) write_back: Option<u32>,
}

/// One cached translation page.
#[derive(Debug, Clone, Copy)]
struct Slot {
    tpage: u32,
    referenced: bool,
    dirty: bool,
}

const NOT_CACHED: u32 = u32::MAX;

/// The translation pages in DRAM, and which exist in NAND.
#[derive(Debug, Clone, Default)]
pub(crate) struct MapCache {
    /// log2 of the logical units one translation page maps (0 with no cache).
    shift: u32,
    /// Translation pages the DRAM holds (0: the whole map is in DRAM).
    capacity: usize,
    /// Per translation page, its slot, or `NOT_CACHED`.
    slot_of: Vec<u32>,
    slots: Vec<Slot>,
    /// The CLOCK hand.
    hand: usize,
    /// Translation pages with a copy in NAND.
    stored: Bitmap,
}

impl MapCache {
    /// An empty cache for `g` (disabled when the profile caches the whole map).
    pub(crate) fn new(g: &Geo) -> MapCache {
        if g.map_cache_pages == 0 {
            return MapCache::default();
        }
        let tpages = g.logical_units.div_ceil(1 << g.map_tpage_shift);
        MapCache {
            shift: g.map_tpage_shift,
            capacity: g.map_cache_pages as usize,
            slot_of: vec![NOT_CACHED; tpages as usize],
            slots: Vec::with_capacity(g.map_cache_pages as usize),
            hand: 0,
            stored: Bitmap::new(tpages),
        }
    }

    /// Whether only part of the map is cached.
    #[inline(always)]
    pub(crate) fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// The translation page of `lpn`.
    #[inline(always)]
    pub(crate) fn tpage(&self, lpn: u64) -> u32 {
        (lpn >> self.shift) as u32
    }

    /// Logical units one translation page maps.
    pub(crate) fn units_per_tpage(&self) -> u64 {
        1 << self.shift
    }

    /// Translation pages cached now.
    #[cfg(test)]
    pub(crate) fn cached(&self) -> usize {
        self.slots.len()
    }

    /// Touch translation page `tp` (`dirty`: its entries change).
    #[inline]
    pub(crate) fn access(&mut self, tp: u32, dirty: bool) -> Access {
        let s = self.slot_of[tp as usize];
        if s != NOT_CACHED {
            let slot = &mut self.slots[s as usize];
            slot.referenced = true;
            slot.dirty |= dirty;
            return Access::default();
        }
        let read = self.stored.get(tp as u64);
        // A page comes in unreferenced: it earns its second chance by
        // being used again before the hand comes round.
        let new = Slot {
            tpage: tp,
            referenced: false,
            dirty,
        };
        if self.slots.len() < self.capacity {
            self.slot_of[tp as usize] = self.slots.len() as u32;
            self.slots.push(new);
            return Access {
                read,
                write_back: None,
            };
        }
        // CLOCK: the first slot not referenced since the hand last passed.
        loop {
            let slot = &mut self.slots[self.hand];
            if !slot.referenced {
                break;
            }
            slot.referenced = false;
            self.hand = (self.hand + 1) % self.slots.len();
        }
        let old = self.slots[self.hand];
        self.slot_of[old.tpage as usize] = NOT_CACHED;
        self.slot_of[tp as usize] = self.hand as u32;
        self.slots[self.hand] = new;
        self.hand = (self.hand + 1) % self.slots.len();
        let write_back = old.dirty.then(|| {
            self.stored.set(old.tpage as u64);
            old.tpage
        });
        Access { read, write_back }
    }

    /// Translation page `tp` maps nothing any more (every unit it covers
    /// was trimmed): the controller drops it, in DRAM and in NAND, and
    /// need not read it again.
    pub(crate) fn forget(&mut self, tp: u32) {
        self.stored.clear(tp as u64);
        let s = self.slot_of[tp as usize];
        if s != NOT_CACHED {
            // Kept in its slot, clean: an empty page costs nothing to hold.
            self.slots[s as usize].dirty = false;
        }
    }

    /// After a restart (a state loaded): nothing cached, and a translation
    /// page exists in NAND where any unit it covers is mapped (`mapped`
    /// says which pages those are).
    pub(crate) fn restore(&mut self, mapped: impl Iterator<Item = u32>) {
        for s in &self.slots {
            self.slot_of[s.tpage as usize] = NOT_CACHED;
        }
        self.slots.clear();
        self.hand = 0;
        for tp in mapped {
            self.stored.set(tp as u64);
        }
    }

    /// Heap bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slot_of.len() * 4
            + self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.stored.heap_bytes()
    }

    /// The cache's own consistency: slots and their index agree.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.slots.len() > self.capacity {
            return Err(format!(
                "map cache: {} pages cached, room for {}",
                self.slots.len(),
                self.capacity
            ));
        }
        for (i, s) in self.slots.iter().enumerate() {
            if self.slot_of.get(s.tpage as usize) != Some(&(i as u32)) {
                return Err(format!(
                    "map cache: slot {i} (page {}) not indexed",
                    s.tpage
                ));
            }
        }
        let indexed = self.slot_of.iter().filter(|&&s| s != NOT_CACHED).count();
        if indexed != self.slots.len() {
            return Err(format!(
                "map cache: {indexed} pages indexed, {} cached",
                self.slots.len()
            ));
        }
        Ok(())
    }
}

/// The translation pages (of `per` units each) that map at least one
/// unit: the ones a drive has in NAND.
pub(crate) fn mapped_tpages(mapping: &Mapping, per: u64) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    let _ = mapping
        .forward()
        .try_for_each_nonzero(|lpn, _| -> Result<(), ()> {
            let tp = (lpn as u64 / per) as u32;
            if out.last() != Some(&tp) {
                out.push(tp);
            }
            Ok(())
        });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(capacity: usize, tpages: u64) -> MapCache {
        MapCache {
            shift: 10,
            capacity,
            slot_of: vec![NOT_CACHED; tpages as usize],
            slots: Vec::new(),
            hand: 0,
            stored: Bitmap::new(tpages),
        }
    }

    #[test]
    fn pages_not_yet_in_nand_cost_nothing_to_load() {
        let mut c = cache(2, 8);
        assert_eq!(c.access(0, true), Access::default());
        assert_eq!(c.access(1, false), Access::default());
        // Full: page 0 (dirty) goes out and is written back; 2 was never stored.
        let a = c.access(2, false);
        assert_eq!(
            a,
            Access {
                read: false,
                write_back: Some(0)
            }
        );
        // Page 0 is in NAND now: bringing it back reads it; 1 (clean) leaves quietly.
        let a = c.access(0, false);
        assert_eq!(
            a,
            Access {
                read: true,
                write_back: None
            }
        );
        c.check().unwrap();
    }

    #[test]
    fn clock_keeps_the_recently_used_page() {
        let mut c = cache(2, 8);
        c.access(0, false);
        c.access(1, false);
        c.access(2, false); // evicts 0, the oldest page not used since
        c.access(1, false); // 1 referenced again
        c.access(3, false); // must evict 2, not 1
        assert_ne!(c.slot_of[1], NOT_CACHED);
        assert_eq!(c.slot_of[2], NOT_CACHED);
        assert_eq!(c.cached(), 2);
        c.check().unwrap();
    }

    #[test]
    fn forgotten_pages_are_not_read_again_and_restore_empties_the_cache() {
        let mut c = cache(1, 4);
        c.access(0, true);
        c.access(1, true); // 0 written back
        c.forget(0);
        assert!(!c.access(0, false).read);
        c.restore([3u32].into_iter());
        assert_eq!(c.cached(), 0);
        assert!(c.access(3, false).read);
        c.check().unwrap();
    }
}
