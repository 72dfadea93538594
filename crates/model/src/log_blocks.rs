//! Hybrid mapping's state (see `hybrid/mod.rs` for what is done with it):
//! which superblock is each logical block's data block, the log blocks
//! and their merge order, and the free superblocks holding stale data.
//! Also the mapping scheme a drive runs, page or hybrid.

use std::collections::VecDeque;

use super::blocks::Blocks;
use super::geo::Geo;
use super::mapping::Mapping;
use super::types::{BlockState, Broken, NONE};

/// How logical units are placed: page mapping (any unit anywhere, GC
/// collects), or hybrid log-block mapping with its state.
#[derive(Debug, Clone, Default)]
pub(crate) enum MappingScheme {
    /// Page mapping.
    #[default]
    Page,
    /// Hybrid log-block mapping.
    Hybrid(Box<Hybrid>),
}

impl MappingScheme {
    /// The scheme the geometry asks for, fresh.
    pub(crate) fn new(g: &Geo) -> MappingScheme {
        if g.hybrid {
            MappingScheme::Hybrid(Box::new(Hybrid::new(g)))
        } else {
            MappingScheme::Page
        }
    }

    /// Whether it is hybrid mapping.
    #[inline(always)]
    pub(crate) fn is_hybrid(&self) -> bool {
        matches!(self, MappingScheme::Hybrid(_))
    }
}

/// Physical unit at position `pos` of superblock `physical_sb`: position
/// `s` is slot `s % upd` of dpage `s / upd`, and dpages are striped over
/// the dies.
#[inline(always)]
pub(crate) fn unit_of(g: &Geo, physical_sb: u32, pos: u32) -> u64 {
    let (dp, k) = g.split_dpage(pos);
    let (die, page) = g.split_dies(dp);
    g.ppn(die * g.blocks_per_die + physical_sb, page, k)
}

/// Superblock and position of physical unit `ppn`.
#[inline]
pub(crate) fn position_of(g: &Geo, ppn: u64) -> (u32, u32) {
    let block = g.block_of_ppn(ppn);
    let die = g.die_of_block(block);
    let within = (ppn - block as u64 * g.units_per_block as u64) as u32;
    let (page, k) = g.split_dpage(within);
    (
        block % g.blocks_per_die,
        (page * g.dies + die) * g.units_per_dpage + k,
    )
}

/// One log block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Log {
    /// Its superblock.
    physical_sb: u32,
    /// Next position to write.
    next: u32,
    /// Written in order from offset 0 for a single logical block so far.
    seq: bool,
    /// The logical blocks it has taken writes for (at most the associativity).
    logical_sbs: Vec<u32>,
    /// Latest time data placed in its open dpage is at the controller.
    ready: u64,
}

impl Log {
    /// A log loaded from a saved state (its open dpage empty).
    pub(crate) fn restored(physical_sb: u32, next: u32, seq: bool, logical_sbs: Vec<u32>) -> Log {
        Log {
            physical_sb,
            next,
            seq,
            logical_sbs,
            ready: 0,
        }
    }

    /// Its superblock.
    #[inline(always)]
    pub(crate) fn physical_sb(&self) -> u32 {
        self.physical_sb
    }

    /// Next position to write.
    #[inline(always)]
    pub(crate) fn next(&self) -> u32 {
        self.next
    }

    /// Whether it holds one logical block's units in order from offset 0.
    #[inline(always)]
    pub(crate) fn seq(&self) -> bool {
        self.seq
    }

    /// The logical blocks it has taken writes for.
    #[inline(always)]
    pub(crate) fn logical_sbs(&self) -> &[u32] {
        &self.logical_sbs
    }

    /// When the data placed in its open dpage is at the controller.
    #[inline(always)]
    pub(crate) fn ready(&self) -> u64 {
        self.ready
    }

    /// Take the unit at offset `off` of its logical block, at the
    /// controller at `ready`: returns the position it goes to.
    #[inline]
    pub(crate) fn append(&mut self, off: u32, ready: u64) -> u32 {
        let pos = self.next;
        if self.seq && pos != off {
            self.seq = false;
        }
        self.next += 1;
        self.ready = self.ready.max(ready);
        pos
    }

    /// Its open dpage is programmed.
    #[inline]
    pub(crate) fn programmed(&mut self) {
        self.ready = 0;
    }

    /// Its open dpage is programmed padded: it moves on to the next dpage
    /// of `upd` units. The padded positions hold no unit at its offset, so
    /// it can no longer switch or be completed by a partial merge. Returns
    /// the next position.
    pub(crate) fn pad(&mut self, upd: u32) -> u32 {
        self.next = (self.next / upd + 1) * upd;
        self.ready = 0;
        self.seq = false;
        self.next
    }
}

/// Hybrid mapping state.
#[derive(Debug, Clone)]
pub(crate) struct Hybrid {
    /// Units per superblock.
    sb_units: u32,
    /// Logical blocks.
    logical_sbs: u32,
    /// Logical block -> data superblock (NONE = none: all its units in
    /// logs or unmapped).
    data: Vec<u32>,
    data_count: u32,
    /// Log slots (None = unused).
    logs: Vec<Option<Log>>,
    /// Log slots in use, oldest first (the merge order).
    order: VecDeque<u32>,
    /// Logical block -> the log slot that last took a write for it (NONE).
    log_of: Vec<u32>,
    /// The log slot taking random writes (NONE).
    random_log: u32,
    /// Log blocks at most.
    max_logs: u32,
    /// Free superblocks holding stale data, erased on demand or when idle.
    dirty: Vec<bool>,
    dirty_count: u32,
    /// Logs written by the request in progress (scratch).
    touched: Vec<u32>,
    /// Scratch for merges.
    scratch: Vec<u32>,
}

impl Hybrid {
    pub(crate) fn new(g: &Geo) -> Hybrid {
        let sb_units = g.dies * g.units_per_block;
        let logical_sbs = g.logical_units.div_ceil(sb_units as u64) as u32;
        let spare = g.blocks_per_die.saturating_sub(logical_sbs + 1).max(1);
        let max_logs = if g.max_log_blocks > 0 {
            g.max_log_blocks.min(spare)
        } else {
            spare
        };
        Hybrid {
            sb_units,
            logical_sbs,
            data: vec![NONE; logical_sbs as usize],
            data_count: 0,
            logs: Vec::new(),
            order: VecDeque::new(),
            log_of: vec![NONE; logical_sbs as usize],
            random_log: NONE,
            max_logs,
            dirty: vec![false; g.blocks_per_die as usize],
            dirty_count: 0,
            touched: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Units per superblock.
    #[inline(always)]
    pub(crate) fn sb_units(&self) -> u32 {
        self.sb_units
    }

    /// Logical blocks.
    #[inline]
    pub(crate) fn logical_sbs(&self) -> u32 {
        self.logical_sbs
    }

    // --------------------------------------------------------- data blocks

    /// The data superblock of `logical_sb` (NONE).
    #[inline(always)]
    pub(crate) fn data_of(&self, logical_sb: u32) -> u32 {
        self.data[logical_sb as usize]
    }

    /// Make `physical_sb` the data block of `logical_sb`; returns the one
    /// it replaces (NONE).
    pub(crate) fn set_data(&mut self, logical_sb: u32, physical_sb: u32) -> u32 {
        let old = std::mem::replace(&mut self.data[logical_sb as usize], physical_sb);
        if old == NONE {
            self.data_count += 1;
        }
        old
    }

    /// `logical_sb` has a data block no more.
    pub(crate) fn clear_data(&mut self, logical_sb: u32) {
        if std::mem::replace(&mut self.data[logical_sb as usize], NONE) != NONE {
            self.data_count -= 1;
        }
    }

    /// Free superblocks to keep: one for every logical block without a data
    /// block (its merge will need one) plus one.
    #[inline]
    pub(crate) fn reserve(&self) -> usize {
        (self.logical_sbs - self.data_count) as usize + 1
    }

    // ------------------------------------------------------- stale blocks

    /// Whether free superblock `physical_sb` holds stale data.
    #[inline]
    pub(crate) fn is_dirty(&self, physical_sb: u32) -> bool {
        self.dirty[physical_sb as usize]
    }

    /// Free superblocks holding stale data.
    #[inline]
    pub(crate) fn dirty_count(&self) -> u32 {
        self.dirty_count
    }

    /// Superblock `physical_sb` went back to the pool unerased.
    pub(crate) fn set_dirty(&mut self, physical_sb: u32) {
        if !self.dirty[physical_sb as usize] {
            self.dirty[physical_sb as usize] = true;
            self.dirty_count += 1;
        }
    }

    /// Superblock `physical_sb` is erased.
    pub(crate) fn set_clean(&mut self, physical_sb: u32) {
        if self.dirty[physical_sb as usize] {
            self.dirty[physical_sb as usize] = false;
            self.dirty_count -= 1;
        }
    }

    // ---------------------------------------------------------------- logs

    /// Log slot `li`.
    #[inline]
    pub(crate) fn log(&self, li: u32) -> Result<&Log, Broken> {
        self.logs
            .get(li as usize)
            .and_then(Option::as_ref)
            .ok_or(Broken("hybrid: log slot not in use"))
    }

    /// Log slot `li`, to write.
    #[inline]
    pub(crate) fn log_mut(&mut self, li: u32) -> Result<&mut Log, Broken> {
        self.logs
            .get_mut(li as usize)
            .and_then(Option::as_mut)
            .ok_or(Broken("hybrid: log slot not in use"))
    }

    /// Log slot `li`, if in use.
    #[inline]
    pub(crate) fn log_if_used(&self, li: u32) -> Option<&Log> {
        self.logs.get(li as usize).and_then(Option::as_ref)
    }

    /// Log blocks in use.
    #[inline]
    pub(crate) fn log_count(&self) -> usize {
        self.order.len()
    }

    /// Whether another log block may be opened.
    #[inline]
    pub(crate) fn below_max_logs(&self) -> bool {
        (self.order.len() as u32) < self.max_logs
    }

    /// The log to merge first.
    #[inline]
    pub(crate) fn oldest_log(&self) -> Option<u32> {
        self.order.front().copied()
    }

    /// The log slots in use, oldest first.
    pub(crate) fn order(&self) -> impl Iterator<Item = u32> + '_ {
        self.order.iter().copied()
    }

    /// The log that last took a write for `logical_sb` (NONE).
    #[inline]
    pub(crate) fn log_of(&self, logical_sb: u32) -> u32 {
        self.log_of[logical_sb as usize]
    }

    /// The log taking random writes (NONE).
    #[inline]
    pub(crate) fn random_log(&self) -> u32 {
        self.random_log
    }

    /// Log `li` takes random writes from now on.
    #[inline]
    pub(crate) fn set_random_log(&mut self, li: u32) {
        self.random_log = li;
    }

    /// Random log `li` takes writes for `logical_sb` too.
    pub(crate) fn join_random(&mut self, li: u32, logical_sb: u32) {
        if let Some(Some(l)) = self.logs.get_mut(li as usize) {
            l.logical_sbs.push(logical_sb);
        }
        self.log_of[logical_sb as usize] = li;
    }

    /// A new log in superblock `physical_sb` for `logical_sb`, newest in
    /// the merge order; returns its slot.
    pub(crate) fn open_log(&mut self, physical_sb: u32, logical_sb: u32, seq: bool) -> u32 {
        let log = Log {
            physical_sb,
            next: 0,
            seq,
            logical_sbs: vec![logical_sb],
            ready: 0,
        };
        let li = match self.logs.iter().position(Option::is_none) {
            Some(i) => {
                self.logs[i] = Some(log);
                i as u32
            }
            None => {
                self.logs.push(Some(log));
                (self.logs.len() - 1) as u32
            }
        };
        self.order.push_back(li);
        self.log_of[logical_sb as usize] = li;
        li
    }

    /// Forget log slot `li` (its superblock is the caller's); returns it.
    pub(crate) fn drop_log(&mut self, li: u32) -> Result<Log, Broken> {
        let log = self
            .logs
            .get_mut(li as usize)
            .and_then(Option::take)
            .ok_or(Broken("hybrid: log slot not in use"))?;
        for &l in &log.logical_sbs {
            if self.log_of[l as usize] == li {
                self.log_of[l as usize] = NONE;
            }
        }
        if let Some(i) = self.order.iter().position(|&x| x == li) {
            self.order.remove(i);
        }
        if self.random_log == li {
            self.random_log = NONE;
        }
        Ok(log)
    }

    /// The request in progress wrote log `li`.
    #[inline]
    pub(crate) fn touch(&mut self, li: u32) {
        if !self.touched.contains(&li) {
            self.touched.push(li);
        }
    }

    /// The logs written by the request in progress (give the list back
    /// with [`Hybrid::put_touched`]).
    pub(crate) fn take_touched(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.touched)
    }

    /// Keep the touched list (emptied) for the next request.
    pub(crate) fn put_touched(&mut self, mut touched: Vec<u32>) {
        touched.clear();
        self.touched = touched;
    }

    /// Scratch space for merges, emptied (give it back with
    /// [`Hybrid::put_scratch`]).
    pub(crate) fn take_scratch(&mut self) -> Vec<u32> {
        let mut s = std::mem::take(&mut self.scratch);
        s.clear();
        s
    }

    /// Keep the scratch space.
    pub(crate) fn put_scratch(&mut self, s: Vec<u32>) {
        self.scratch = s;
    }

    // ---------------------------------------------------- saving, loading

    /// Data blocks and stale flags, to save.
    pub(crate) fn saved_tables(&self) -> (&[u32], &[bool]) {
        (&self.data, &self.dirty)
    }

    /// Take loaded data blocks and stale flags (checked by the caller to
    /// lie in the drive, as many as these).
    pub(crate) fn restore_tables(&mut self, data: Vec<u32>, dirty: Vec<bool>) {
        self.data_count = data.iter().filter(|&&d| d != NONE).count() as u32;
        self.dirty_count = dirty.iter().filter(|&&x| x).count() as u32;
        self.data = data;
        self.dirty = dirty;
    }

    /// Take a loaded log, next in the merge order (its logical blocks
    /// checked by the caller to lie in the drive).
    pub(crate) fn restore_log(&mut self, log: Log, random: bool) {
        let li = self.logs.len() as u32;
        for &x in &log.logical_sbs {
            self.log_of[x as usize] = li;
        }
        self.logs.push(Some(log));
        self.order.push_back(li);
        if random {
            self.random_log = li;
        }
    }

    /// Same data blocks and number of logs (a saved and loaded drive).
    #[cfg(test)]
    pub(crate) fn same_as(&self, other: &Hybrid) -> bool {
        self.data == other.data && self.order.len() == other.order.len()
    }

    // ---------------------------------------------------------- invariants

    /// The hybrid structures agree with the block table and the mapping.
    pub(crate) fn check(&self, g: &Geo, blocks: &Blocks, mapping: &Mapping) -> Result<(), String> {
        let bpd = g.blocks_per_die;
        let mut owner = vec![NONE; bpd as usize];
        let mut data = 0;
        for (logical_sb, &physical_sb) in self.data.iter().enumerate() {
            if physical_sb == NONE {
                continue;
            }
            data += 1;
            if physical_sb >= bpd
                || std::mem::replace(&mut owner[physical_sb as usize], logical_sb as u32) != NONE
            {
                return Err(format!(
                    "logical block {logical_sb}: data superblock {physical_sb} invalid or shared"
                ));
            }
        }
        if data != self.data_count {
            return Err(format!("{data} data blocks, counter {}", self.data_count));
        }
        let mut in_order = 0;
        for (li, l) in self.logs.iter().enumerate() {
            let Some(l) = l else { continue };
            in_order += 1;
            if !self.order.contains(&(li as u32)) {
                return Err(format!("log {li} not in the merge order"));
            }
            if l.physical_sb >= bpd
                || std::mem::replace(&mut owner[l.physical_sb as usize], u32::MAX - 1) != NONE
            {
                return Err(format!(
                    "log {li}: superblock {} invalid or shared",
                    l.physical_sb
                ));
            }
            if l.next > self.sb_units {
                return Err(format!("log {li} written past its end"));
            }
            if let Some(p) =
                (l.next..self.sb_units).find(|&p| mapping.is_live(unit_of(g, l.physical_sb, p)))
            {
                return Err(format!("log {li}: data after its write position at {p}"));
            }
        }
        if in_order != self.order.len() {
            return Err("merge order lists unused log slots".into());
        }
        for physical_sb in 0..bpd {
            let used = owner[physical_sb as usize] != NONE;
            for d in 0..g.dies {
                let b = d * bpd + physical_sb;
                let mapped = blocks.is(b, BlockState::Mapped);
                if used != mapped {
                    return Err(format!(
                        "block {b}: state {} but superblock in use {used}",
                        blocks.state_byte(b)
                    ));
                }
            }
        }
        for d in 1..g.dies as usize {
            let a = blocks.free_list(0).iter().map(|&b| b % bpd);
            if !a.eq(blocks.free_list(d).iter().map(|&b| b % bpd)) {
                return Err(format!("free list of die {d} out of step with die 0"));
            }
        }
        // Every mapped unit sits in its data block at its offset, or in a log.
        let s = self.sb_units as u64;
        mapping.try_for_each_mapped(|lpn, e| {
            let (physical_sb, pos) = position_of(g, e - 1);
            let logical_sb = (lpn as u64 / s) as usize;
            let o = owner[physical_sb as usize];
            if o == u32::MAX - 1 {
                return Ok(());
            }
            if o as usize != logical_sb || pos as u64 != lpn as u64 % s {
                return Err(format!(
                    "unit {lpn} at superblock {physical_sb} position {pos}, not its place"
                ));
            }
            Ok(())
        })
    }
}
