//! The drive: FTL state and resource timelines.
//!
//! Vocabulary used throughout:
//! - *unit*: a mapping unit (logical page), the granularity of the mapping table;
//! - *dpage*: a multi-plane page of one die (one page on each plane), the
//!   granularity of programs; it holds `units_per_dpage` units;
//! - *block*: the same erase block on every plane of one die, the granularity
//!   of erases and garbage collection; it holds `pages_per_block` dpages;
//! - *lpn* / *ppn*: logical / physical unit numbers. The tables store `x + 1`
//!   so that the zero-initialised state means "unmapped" / "invalid".

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::packed::PackedVec;
use super::timeline::Channel;
use super::*;
use crate::profile::GcPolicy;

pub(crate) const NONE: u32 = u32::MAX;

/// Block states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum BlockState {
    Free = 0,
    Open = 1,
    Full = 2,
    Victim = 3,
}

impl BlockState {
    pub(crate) fn from_u8(v: u8) -> Option<BlockState> {
        Some(match v {
            0 => BlockState::Free,
            1 => BlockState::Open,
            2 => BlockState::Full,
            3 => BlockState::Victim,
            _ => return None,
        })
    }
}

/// Which write stream a unit belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Host,
    Gc,
}

/// An open block being filled dpage by dpage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WritePoint {
    /// Global block id, or NONE.
    pub(crate) block: u32,
    /// Next dpage to fill in the block.
    pub(crate) page: u32,
    /// Units already placed in that dpage.
    pub(crate) slot: u32,
    /// Latest time at which data placed in the open dpage is at the controller.
    pub(crate) ready_ns: u64,
}

impl WritePoint {
    pub(crate) const EMPTY: WritePoint = WritePoint {
        block: NONE,
        page: 0,
        slot: 0,
        ready_ns: 0,
    };
}

/// Derived geometry and timing constants.
#[derive(Debug, Clone)]
pub(crate) struct Geo {
    pub(crate) dies: u32,
    pub(crate) channels: u32,
    pub(crate) planes: u32,
    pub(crate) blocks_per_die: u32,
    pub(crate) pages_per_block: u32,
    pub(crate) units_per_page: u32,
    pub(crate) units_per_dpage: u32,
    pub(crate) units_per_block: u32,
    pub(crate) unit_bytes: u64,
    pub(crate) dpage_bytes: u64,
    pub(crate) logical_units: u64,
    pub(crate) physical_units: u64,
    pub(crate) capacity: u64,
    t_read: u64,
    t_prog: u64,
    t_erase: u64,
    chan_ns_per_byte: f64,
    link_ns_per_byte: f64,
    cmd_ns: u64,
    trim_ns_per_unit: u64,
    queue_depth: usize,
    buffer_units: u64,
    fg_threshold: u32,
    bg_target: u32,
    bg_idle_ns: u64,
    policy: GcPolicy,
}

impl Geo {
    fn new(p: &Profile) -> Geo {
        let g = &p.geometry;
        let dies = g.channels * g.dies_per_channel;
        let units_per_page = (g.page_size.0 / g.mapping_unit.0) as u32;
        let units_per_dpage = units_per_page * g.planes_per_die;
        let units_per_block = units_per_dpage * g.pages_per_block;
        let blocks_per_die = g.blocks_per_plane;
        let physical_units = dies as u64 * blocks_per_die as u64 * units_per_block as u64;
        let us = |v: f64| (v * 1000.0).round() as u64;
        let per_byte = |mb_s: f64| {
            if mb_s > 0.0 && mb_s.is_finite() {
                1e3 / mb_s
            } else {
                0.0
            }
        };
        let link = p.link_bytes_s();
        Geo {
            dies,
            channels: g.channels,
            planes: g.planes_per_die,
            blocks_per_die,
            pages_per_block: g.pages_per_block,
            units_per_page,
            units_per_dpage,
            units_per_block,
            unit_bytes: g.mapping_unit.0,
            dpage_bytes: g.page_size.0 * g.planes_per_die as u64,
            logical_units: g.exported_capacity.0 / g.mapping_unit.0,
            physical_units,
            capacity: g.exported_capacity.0,
            t_read: us(p.nand.t_read_us),
            t_prog: us(p.nand.t_prog_us),
            t_erase: us(p.nand.t_erase_us),
            chan_ns_per_byte: per_byte(p.nand.channel_mb_s),
            link_ns_per_byte: if link.is_finite() { 1e9 / link } else { 0.0 },
            cmd_ns: p.host.command_overhead_ns,
            trim_ns_per_unit: p.host.trim_ns_per_unit,
            queue_depth: p.host.queue_depth as usize,
            buffer_units: p.buffer.size.0 / g.mapping_unit.0,
            fg_threshold: p.gc.fg_threshold_blocks,
            bg_target: p.gc.bg_target_blocks,
            bg_idle_ns: (p.gc.bg_idle_ms * 1e6).round() as u64,
            policy: p.gc.policy,
        }
    }

    #[inline]
    fn chan_ns(&self, bytes: u64) -> u64 {
        (bytes as f64 * self.chan_ns_per_byte) as u64
    }

    #[inline]
    fn link_ns(&self, bytes: u64) -> u64 {
        (bytes as f64 * self.link_ns_per_byte) as u64
    }

    #[inline]
    pub(crate) fn die_of_block(&self, block: u32) -> u32 {
        block / self.blocks_per_die
    }

    #[inline]
    pub(crate) fn block_of_ppn(&self, ppn: u64) -> u32 {
        (ppn / self.units_per_block as u64) as u32
    }

    #[inline]
    fn ppn(&self, block: u32, page: u32, slot: u32) -> u64 {
        block as u64 * self.units_per_block as u64
            + page as u64 * self.units_per_dpage as u64
            + slot as u64
    }
}

/// Raw counters kept by the model; [`Counters`] adds the derived figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Raw {
    pub(crate) host_read_bytes: u64,
    pub(crate) host_written_bytes: u64,
    pub(crate) host_trimmed_bytes: u64,
    pub(crate) host_read_cmds: u64,
    pub(crate) host_write_cmds: u64,
    pub(crate) host_trim_cmds: u64,
    pub(crate) host_flush_cmds: u64,
    pub(crate) nand_pages_read: u64,
    pub(crate) nand_pages_programmed: u64,
    pub(crate) nand_bytes_programmed: u64,
    pub(crate) erases: u64,
    pub(crate) gc_copies: u64,
    pub(crate) fg_gc_victims: u64,
    pub(crate) bg_gc_victims: u64,
    pub(crate) rmw_reads: u64,
    pub(crate) buffer_stall_ns: u64,
}

/// Errors loading a saved drive state.
#[derive(Debug, Error)]
pub enum PersistError {
    /// Reading the state failed.
    #[error("I/O error reading drive state: {0}")]
    Io(#[from] std::io::Error),
    /// Checksum, magic or structure is wrong.
    #[error("drive state is damaged: {0}")]
    Corrupt(String),
    /// Saved by a drive with another profile or geometry.
    #[error("drive state was saved with a different profile: {0}")]
    ProfileMismatch(String),
    /// Saved by another format version.
    #[error("drive state format version {found} is not supported (expected {expected})")]
    Version {
        /// Version in the file.
        found: u32,
        /// Version this build reads.
        expected: u32,
    },
}

/// One emulated SSD: FTL state plus timelines. See the module docs of
/// [`crate::model`].
#[derive(Debug, Clone)]
pub struct Ssd {
    pub(crate) profile: Profile,
    pub(crate) geo: Geo,
    /// lpn -> ppn + 1 (0 = unmapped).
    pub(crate) l2p: PackedVec,
    /// ppn -> lpn + 1 (0 = invalid or never written).
    pub(crate) p2l: PackedVec,
    /// Per block: valid units.
    pub(crate) valid: Vec<u32>,
    /// Per block: erase count.
    pub(crate) erase_count: Vec<u32>,
    /// Per block: [`BlockState`] as u8.
    pub(crate) state: Vec<u8>,
    /// Per block: time of the last program into it (cost-benefit age).
    pub(crate) last_write: Vec<u64>,
    /// Per block: intrusive list links for the valid-count buckets of full blocks.
    bnext: Vec<u32>,
    bprev: Vec<u32>,
    /// Per die: bucket heads, indexed by valid count (0..=units_per_block).
    heads: Vec<Vec<u32>>,
    /// Full blocks holding no valid data (reclaimable by an erase alone).
    empty_full: u64,
    /// Per die: erased blocks, oldest first (so wear rotates through all).
    pub(crate) free: Vec<VecDeque<u32>>,
    pub(crate) host_wp: Vec<WritePoint>,
    pub(crate) gc_wp: Vec<WritePoint>,
    /// Die currently receiving host units.
    pub(crate) cursor: u32,
    pub(crate) mapped_units: u64,
    // Timelines (ns).
    die_busy: Vec<u64>,
    chan: Vec<Channel>,
    link_free: u64,
    ctrl_free: u64,
    last_now: u64,
    /// Latest completion of any host command (idle detection).
    last_host_done: u64,
    /// Latest write-buffer admission (admission is in order).
    last_admit: u64,
    /// Completion times of outstanding commands (queue-depth limit).
    outstanding: BinaryHeap<Reverse<u64>>,
    /// Programs holding host data: (done time, units) — the write buffer's drain.
    buffer: BinaryHeap<Reverse<(u64, u32)>>,
    buffered_units: u64,
    buffer_last_release: u64,
    pub(crate) raw: Raw,
    pub(crate) seed: u64,
    /// Per die: the GC victim being collected and its next page.
    pub(crate) gc_cur: Vec<Option<(u32, u32)>>,
    /// Per die: valid / invalid units of the current victim when picked.
    gc_ratio: Vec<f64>,
    /// Scratch space reused by every GC victim (no allocation per victim).
    gc_lpns: Vec<u64>,
    gc_pages: Vec<(usize, u32)>,
}

impl Ssd {
    /// A fresh drive: everything erased and unmapped. `seed` is kept for
    /// [`Ssd::precondition`]; the model has no other randomness.
    pub fn new(profile: &Profile, seed: u64) -> Ssd {
        let geo = Geo::new(profile);
        let nblocks = (geo.dies * geo.blocks_per_die) as usize;
        let mut ssd = Ssd {
            profile: profile.clone(),
            l2p: PackedVec::new(geo.logical_units as usize, geo.physical_units),
            p2l: PackedVec::new(geo.physical_units as usize, geo.logical_units),
            valid: vec![0; nblocks],
            erase_count: vec![0; nblocks],
            state: vec![BlockState::Free as u8; nblocks],
            last_write: vec![0; nblocks],
            bnext: vec![NONE; nblocks],
            bprev: vec![NONE; nblocks],
            heads: vec![vec![NONE; geo.units_per_block as usize + 1]; geo.dies as usize],
            empty_full: 0,
            free: Vec::new(),
            host_wp: vec![WritePoint::EMPTY; geo.dies as usize],
            gc_wp: vec![WritePoint::EMPTY; geo.dies as usize],
            cursor: 0,
            mapped_units: 0,
            die_busy: vec![0; geo.dies as usize],
            chan: vec![Channel::new((geo.dies / geo.channels) as usize); geo.channels as usize],
            link_free: 0,
            ctrl_free: 0,
            last_now: 0,
            last_host_done: 0,
            last_admit: 0,
            outstanding: BinaryHeap::new(),
            buffer: BinaryHeap::new(),
            buffered_units: 0,
            buffer_last_release: 0,
            raw: Raw::default(),
            seed,
            gc_cur: vec![None; geo.dies as usize],
            gc_ratio: vec![0.0; geo.dies as usize],
            gc_lpns: Vec::new(),
            gc_pages: Vec::new(),
            geo,
        };
        ssd.free = (0..ssd.geo.dies)
            .map(|d| {
                let b0 = d * ssd.geo.blocks_per_die;
                (b0..b0 + ssd.geo.blocks_per_die).collect()
            })
            .collect();
        ssd
    }

    /// The profile this drive was built from.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Exported capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.geo.capacity
    }

    /// Heap bytes held by the model state (mapping tables, block table, queues).
    pub fn memory_bytes(&self) -> usize {
        let nblocks = self.valid.len();
        self.l2p.heap_bytes()
            + self.p2l.heap_bytes()
            + nblocks * (4 + 4 + 1 + 8 + 4 + 4 + 4)
            + self.heads.iter().map(|h| h.len() * 4).sum::<usize>()
            + self.outstanding.capacity() * 8
            + self.buffer.capacity() * 16
            + self.chan.iter().map(|c| c.len() * 16).sum::<usize>()
    }

    /// Counters, with derived figures (write amplification, wear) computed now.
    pub fn counters(&self) -> Counters {
        let r = &self.raw;
        let n = self.erase_count.len().max(1);
        let (mut mn, mut mx, mut sum) = (u32::MAX, 0u32, 0u64);
        for &e in &self.erase_count {
            mn = mn.min(e);
            mx = mx.max(e);
            sum += e as u64;
        }
        Counters {
            host_read_bytes: r.host_read_bytes,
            host_written_bytes: r.host_written_bytes,
            host_trimmed_bytes: r.host_trimmed_bytes,
            host_read_cmds: r.host_read_cmds,
            host_write_cmds: r.host_write_cmds,
            host_trim_cmds: r.host_trim_cmds,
            host_flush_cmds: r.host_flush_cmds,
            nand_pages_read: r.nand_pages_read,
            nand_pages_programmed: r.nand_pages_programmed,
            nand_bytes_programmed: r.nand_bytes_programmed,
            erases: r.erases,
            gc_copies: r.gc_copies,
            gc_victims: r.fg_gc_victims + r.bg_gc_victims,
            fg_gc_victims: r.fg_gc_victims,
            bg_gc_victims: r.bg_gc_victims,
            rmw_reads: r.rmw_reads,
            buffer_stall_ns: r.buffer_stall_ns,
            write_amplification: if r.host_written_bytes > 0 {
                r.nand_bytes_programmed as f64 / r.host_written_bytes as f64
            } else {
                0.0
            },
            free_blocks: self.free.iter().map(|f| f.len() as u64).sum(),
            total_blocks: self.valid.len() as u64,
            mapped_units: self.mapped_units,
            total_units: self.geo.logical_units,
            erase_count_min: if self.erase_count.is_empty() { 0 } else { mn },
            erase_count_avg: sum as f64 / n as f64,
            erase_count_max: mx,
        }
    }

    /// Submit a request at `now_ns` and return when it completes.
    ///
    /// `now_ns` is clamped to be non-decreasing. A bad request (misaligned,
    /// out of range) returns an error and leaves the state untouched.
    pub fn submit(&mut self, now_ns: u64, req: &Request) -> Result<Completion, ModelError> {
        self.check(req)?;
        let now = now_ns.max(self.last_now);
        self.last_now = now;
        for c in &mut self.chan {
            c.prune(now);
        }
        self.erase_in_gaps(now);
        self.background(now);

        // Queue-depth limit: a command beyond the drive's tags waits for one.
        while let Some(&Reverse(t)) = self.outstanding.peek() {
            if t <= now {
                self.outstanding.pop();
            } else {
                break;
            }
        }
        let mut start = now;
        if self.outstanding.len() >= self.geo.queue_depth
            && let Some(Reverse(t)) = self.outstanding.pop()
        {
            start = start.max(t);
        }
        // The controller handles one command at a time.
        start = start.max(self.ctrl_free);
        self.ctrl_free = start + self.geo.cmd_ns;
        let t = start + self.geo.cmd_ns;

        let done = match req.op {
            Op::Read => self.read(t, req.offset, req.len),
            Op::Write | Op::WriteZeroes { unmap: false } => self.write(t, req.offset, req.len),
            Op::Trim | Op::WriteZeroes { unmap: true } => self.trim(t, req.offset, req.len),
            Op::Flush => self.flush(t),
        };
        self.outstanding.push(Reverse(done));
        self.last_host_done = self.last_host_done.max(done);
        Ok(Completion {
            submit_ns: now,
            done_ns: done,
        })
    }

    fn check(&self, req: &Request) -> Result<(), ModelError> {
        if req.op == Op::Flush {
            return Ok(());
        }
        if !req.offset.is_multiple_of(512) || !req.len.is_multiple_of(512) {
            return Err(ModelError::Misaligned {
                offset: req.offset,
                len: req.len,
            });
        }
        match req.offset.checked_add(req.len) {
            Some(end) if end <= self.geo.capacity => Ok(()),
            _ => Err(ModelError::OutOfRange {
                offset: req.offset,
                len: req.len,
                capacity: self.geo.capacity,
            }),
        }
    }

    // ----------------------------------------------------------------- reads

    fn read(&mut self, t: u64, offset: u64, len: u64) -> u64 {
        self.raw.host_read_cmds += 1;
        self.raw.host_read_bytes += len;
        if len == 0 {
            return t;
        }
        let ub = self.geo.unit_bytes;
        let first = offset / ub;
        let last = (offset + len - 1) / ub;
        let mut lpn = first;
        let mut link = self.link_free.max(t);
        while lpn <= last {
            // Group consecutive units stored in the same dpage into one NAND read.
            let (ready, n) = self.read_group(t, lpn, last);
            let lo = (lpn * ub).max(offset);
            let hi = ((lpn + n) * ub).min(offset + len);
            link = link.max(ready) + self.geo.link_ns(hi - lo);
            lpn += n;
        }
        self.link_free = link;
        link
    }

    /// Read the units from `lpn` on that share one physical dpage (at most up
    /// to `last`); returns when their data is at the controller, and how many.
    fn read_group(&mut self, t: u64, lpn: u64, last: u64) -> (u64, u64) {
        let e = self.l2p.get(lpn as usize);
        if e == 0 {
            // Unmapped (never written or trimmed): zeroes, no NAND access.
            return (t, 1);
        }
        let ppn = e - 1;
        let upd = self.geo.units_per_dpage as u64;
        let dpage = ppn / upd;
        let mut n = 1;
        let mut slots = 1u64 << ((ppn % upd) / self.geo.units_per_page as u64).min(63);
        while lpn + n <= last {
            let e2 = self.l2p.get((lpn + n) as usize);
            if e2 == 0 || (e2 - 1) / upd != dpage {
                break;
            }
            slots |= 1u64 << (((e2 - 1) % upd) / self.geo.units_per_page as u64).min(63);
            n += 1;
        }
        if self.in_open_dpage(ppn) {
            // Still in the write buffer / controller SRAM.
            return (t, n);
        }
        let block = self.geo.block_of_ppn(ppn);
        let die = self.geo.die_of_block(block) as usize;
        self.raw.nand_pages_read += slots.count_ones() as u64;
        (self.nand_read(die, t, n * self.geo.unit_bytes), n)
    }

    /// Whether `ppn` lies in a dpage not yet programmed (an open write point).
    fn in_open_dpage(&self, ppn: u64) -> bool {
        let block = self.geo.block_of_ppn(ppn);
        if self.state[block as usize] != BlockState::Open as u8 {
            return false;
        }
        let die = self.geo.die_of_block(block) as usize;
        let page =
            ((ppn % self.geo.units_per_block as u64) / self.geo.units_per_dpage as u64) as u32;
        [self.host_wp[die], self.gc_wp[die]]
            .iter()
            .any(|wp| wp.block == block && wp.page == page)
    }

    /// A NAND read on `die` of `bytes` bytes; returns when the data has crossed the channel.
    fn nand_read(&mut self, die: usize, t: u64, bytes: u64) -> u64 {
        let ch = die % self.geo.channels as usize;
        let rs = t.max(self.die_busy[die]);
        let sensed = rs + self.geo.t_read;
        let dur = self.geo.chan_ns(bytes);
        let lane = die / self.geo.channels as usize;
        let xe = self.chan[ch].reserve(lane, sensed, dur) + dur;
        self.die_busy[die] = xe;
        xe
    }

    // ---------------------------------------------------------------- writes

    fn write(&mut self, t: u64, offset: u64, len: u64) -> u64 {
        self.raw.host_write_cmds += 1;
        self.raw.host_written_bytes += len;
        if len == 0 {
            return t;
        }
        let ub = self.geo.unit_bytes;
        let first = offset / ub;
        let last = (offset + len - 1) / ub;
        let n = last - first + 1;
        let buffered = self.geo.buffer_units > 0;
        let admit = if buffered { self.buffer_admit(t, n) } else { t };
        let link_start = admit.max(self.link_free);
        let link_end = link_start + self.geo.link_ns(len);
        self.link_free = link_end;
        let mut done = link_end;
        for (i, lpn) in (first..=last).enumerate() {
            let mut ready = (link_start + self.geo.link_ns((i as u64 + 1) * ub)).min(link_end);
            let partial = (lpn == first && !offset.is_multiple_of(ub))
                || (lpn == last && !(offset + len).is_multiple_of(ub));
            if partial && self.l2p.get(lpn as usize) != 0 {
                // Sub-unit write: read the rest of the unit first.
                self.raw.rmw_reads += 1;
                let (r, _) = self.read_group(ready, lpn, lpn);
                ready = ready.max(r);
            }
            let programmed = self.place_host(lpn, ready);
            if !buffered && let Some(p) = programmed {
                // Without a buffer the command waits for its data to be in NAND.
                done = done.max(p);
            }
        }
        if !buffered {
            // No write buffer: the command completes when its data is in NAND.
            if let Some(p) = self.program_open(Stream::Host, self.cursor as usize) {
                done = done.max(p);
                self.cursor = (self.cursor + 1) % self.geo.dies;
            }
        }
        done
    }

    /// Wait for room for `n` units in the write buffer; returns the admission time.
    fn buffer_admit(&mut self, t: u64, n: u64) -> u64 {
        let cap = self.geo.buffer_units;
        let need = n.min(cap);
        let open = self.host_wp[self.cursor as usize].slot as u64;
        let mut admit = t.max(self.last_admit);
        while let Some(&Reverse((done, units))) = self.buffer.peek() {
            if done <= admit || self.buffered_units + open + need > cap {
                self.buffer.pop();
                self.buffered_units -= units as u64;
                admit = admit.max(done);
            } else {
                break;
            }
        }
        self.raw.buffer_stall_ns += admit - t.max(self.last_admit);
        self.last_admit = admit;
        admit
    }

    /// Place one host unit; returns the program completion time if this
    /// filled a dpage (which is then programmed).
    fn place_host(&mut self, lpn: u64, ready: u64) -> Option<u64> {
        let die = self.host_die(ready);
        self.place_on(Stream::Host, die, lpn, ready)
    }

    /// Before a new host dpage: dies normally take host dpages in turn, but
    /// a die whose queued work (typically foreground GC) runs well past the
    /// least busy die's is passed over for that one, as controllers dispatch
    /// writes to the dies that can take them. Without this one die's GC
    /// would hold up every host write striped behind it.
    fn steer_cursor(&mut self) {
        let c = self.cursor as usize;
        let slack = 2 * (self.geo.t_prog + self.geo.chan_ns(self.geo.dpage_bytes));
        let (best, best_busy) = self
            .die_busy
            .iter()
            .enumerate()
            .min_by_key(|&(_, &b)| b)
            .map(|(d, &b)| (d, b))
            .unwrap_or((c, 0));
        if self.die_busy[c] > best_busy + slack {
            self.cursor = best as u32;
        }
    }

    /// Pick the die for the next host unit: the cursor die, unless it can no
    /// longer take data (full of valid data), in which case the next one that can.
    fn host_die(&mut self, now: u64) -> usize {
        if self.host_wp[self.cursor as usize].slot == 0 {
            self.steer_cursor();
        }
        for _ in 0..self.geo.dies {
            let d = self.cursor as usize;
            if self.host_wp[d].block != NONE || self.alloc_host_block(d, now) {
                return d;
            }
            self.cursor = (self.cursor + 1) % self.geo.dies;
        }
        // Every die is at its reserve: take a reserve block anywhere. The
        // capacity check in profile validation makes this unreachable in
        // practice; it is here so no input can wedge the model.
        for _ in 0..self.geo.dies {
            let d = self.cursor as usize;
            if let Some(b) = self.free[d].pop_front() {
                self.open_block(Stream::Host, d, b, now);
                return d;
            }
            self.cursor = (self.cursor + 1) % self.geo.dies;
        }
        panic!(
            "model invariant broken: no free block on any die (exported capacity exceeds raw NAND)"
        );
    }

    fn place_on(&mut self, stream: Stream, die: usize, lpn: u64, ready: u64) -> Option<u64> {
        let wp = match stream {
            Stream::Host => self.host_wp[die],
            Stream::Gc => self.gc_wp[die],
        };
        debug_assert!(wp.block != NONE);
        let ppn = self.geo.ppn(wp.block, wp.page, wp.slot);
        self.unmap(lpn);
        self.l2p.set(lpn as usize, ppn + 1);
        self.p2l.set(ppn as usize, lpn + 1);
        self.valid[wp.block as usize] += 1;
        self.mapped_units += 1;
        let wpm = match stream {
            Stream::Host => &mut self.host_wp[die],
            Stream::Gc => &mut self.gc_wp[die],
        };
        wpm.slot += 1;
        wpm.ready_ns = wpm.ready_ns.max(ready);
        if wpm.slot == self.geo.units_per_dpage {
            let done = self.program_open(stream, die);
            if stream == Stream::Host {
                self.cursor = (self.cursor + 1) % self.geo.dies;
                self.gc_keep_pace(die, ready);
            }
            done
        } else {
            None
        }
    }

    /// Program the open dpage of a stream on `die`, padded if partial.
    /// Returns the program completion time, or None if nothing was pending.
    fn program_open(&mut self, stream: Stream, die: usize) -> Option<u64> {
        let wp = match stream {
            Stream::Host => self.host_wp[die],
            Stream::Gc => self.gc_wp[die],
        };
        if wp.block == NONE || wp.slot == 0 {
            return None;
        }
        let ch = die % self.geo.channels as usize;
        let dur = self.geo.chan_ns(self.geo.dpage_bytes);
        let lane = die / self.geo.channels as usize;
        let xe = self.chan[ch].reserve(lane, wp.ready_ns.max(self.die_busy[die]), dur) + dur;
        let done = xe + self.geo.t_prog;
        self.die_busy[die] = done;
        self.raw.nand_pages_programmed += self.geo.planes as u64;
        self.raw.nand_bytes_programmed += self.geo.dpage_bytes;
        self.last_write[wp.block as usize] = done;
        if stream == Stream::Host && self.geo.buffer_units > 0 {
            self.buffer.push(Reverse((done, wp.slot)));
            self.buffered_units += wp.slot as u64;
            self.buffer_last_release = self.buffer_last_release.max(done);
        }
        let mut next = wp;
        next.page += 1;
        next.slot = 0;
        next.ready_ns = 0;
        if next.page == self.geo.pages_per_block {
            self.close_block(wp.block);
            next = WritePoint::EMPTY;
        }
        match stream {
            Stream::Host => self.host_wp[die] = next,
            Stream::Gc => self.gc_wp[die] = next,
        }
        Some(done)
    }

    /// Remove the mapping of `lpn`, if any, invalidating its physical unit.
    fn unmap(&mut self, lpn: u64) {
        let e = self.l2p.get(lpn as usize);
        if e == 0 {
            return;
        }
        let ppn = e - 1;
        self.l2p.set(lpn as usize, 0);
        self.p2l.set(ppn as usize, 0);
        self.mapped_units -= 1;
        let b = self.geo.block_of_ppn(ppn);
        let full = self.state[b as usize] == BlockState::Full as u8;
        if full {
            self.bucket_remove(b);
        }
        self.valid[b as usize] -= 1;
        if full {
            self.bucket_insert(b);
        }
    }

    // ----------------------------------------------------- block management

    fn open_block(&mut self, stream: Stream, die: usize, b: u32, now: u64) {
        self.state[b as usize] = BlockState::Open as u8;
        self.last_write[b as usize] = now;
        let wp = WritePoint {
            block: b,
            page: 0,
            slot: 0,
            ready_ns: 0,
        };
        match stream {
            Stream::Host => self.host_wp[die] = wp,
            Stream::Gc => self.gc_wp[die] = wp,
        }
    }

    fn close_block(&mut self, b: u32) {
        self.state[b as usize] = BlockState::Full as u8;
        self.bucket_insert(b);
    }

    /// Give the host write point of `die` a new block, running foreground GC
    /// first if the die's free pool is at its threshold. One free block is
    /// always kept for GC. Returns false if the die cannot take host data.
    fn alloc_host_block(&mut self, die: usize, now: u64) -> bool {
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
        let b = self.free[die].pop_front().expect("checked non-empty");
        self.open_block(Stream::Host, die, b, now);
        true
    }

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

    fn bucket_insert(&mut self, b: u32) {
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

    fn bucket_remove(&mut self, b: u32) {
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

    /// Choose a GC victim among the full blocks of `die` that have at least
    /// one invalid unit.
    fn select_victim(&self, die: usize, now: u64) -> Option<u32> {
        let upb = self.geo.units_per_block as usize;
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

    /// Reclaim one victim block on `die` completely, starting no earlier
    /// than `t` (continuing the victim in progress, if any). False if there
    /// is nothing to reclaim.
    fn gc_one(&mut self, die: usize, t: u64, foreground: bool) -> bool {
        self.gc_step(die, t, u64::MAX, foreground)
    }

    /// Work on the die's GC victim, starting no earlier than `t`: pick one
    /// if none is in progress, copy the valid units of its next pages to the
    /// die's GC write point until about `budget` units are copied, and erase
    /// it once empty. Copies and the erase occupy the die and its channel
    /// like host I/O. False if there is nothing to reclaim.
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
                let e = self.p2l.get(self.geo.ppn(victim, page, slot) as usize);
                if e != 0 {
                    lpns.push(e - 1);
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
        for &(n, plane_pages) in &pages {
            self.raw.nand_pages_read += plane_pages as u64;
            let ready = self.nand_read(die, t, n as u64 * self.geo.unit_bytes);
            for &lpn in &lpns[next..next + n] {
                self.ensure_gc_block(die, ready);
                self.place_on(Stream::Gc, die, lpn, ready);
                self.raw.gc_copies += 1;
            }
            next += n;
        }
        self.gc_lpns = lpns;
        self.gc_pages = pages;
        if page >= self.geo.pages_per_block || self.valid[victim as usize] == 0 {
            debug_assert_eq!(self.valid[victim as usize], 0);
            self.gc_cur[die] = None;
            self.erase_block(die, victim, t.max(self.die_busy[die]));
        } else {
            self.gc_cur[die] = Some((victim, page));
        }
        true
    }

    /// Pick the die's next GC victim and make it the collection in
    /// progress. False if there is none, or no room to copy its valid units.
    fn start_victim(&mut self, die: usize, t: u64, foreground: bool) -> bool {
        let Some(victim) = self.select_victim(die, t) else {
            return false;
        };
        let need = self.valid[victim as usize];
        let wp = self.gc_wp[die];
        let room = if wp.block == NONE {
            0
        } else {
            (self.geo.pages_per_block - wp.page) * self.geo.units_per_dpage - wp.slot
        };
        if need > room && self.free[die].is_empty() {
            return false;
        }
        self.bucket_remove(victim);
        self.state[victim as usize] = BlockState::Victim as u8;
        let upb = self.geo.units_per_block as f64;
        self.gc_ratio[die] = need as f64 / (upb - need as f64);
        if foreground {
            self.raw.fg_gc_victims += 1;
        } else {
            self.raw.bg_gc_victims += 1;
        }
        self.gc_cur[die] = Some((victim, 0));
        true
    }

    /// Incremental foreground GC, run after each host dpage programmed on a
    /// die whose pool is low: copy about as many units as reclaiming space
    /// for that dpage costs with the current victim (u / (1 − u) per unit
    /// written), so GC keeps pace with host writes in small steps instead of
    /// stalling them for whole victims when the pool runs out.
    fn gc_keep_pace(&mut self, die: usize, t: u64) {
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

    /// Erase block `b` of `die` starting at `start` and return it to the pool.
    fn erase_block(&mut self, die: usize, b: u32, start: u64) {
        self.die_busy[die] = start + self.geo.t_erase;
        self.erase_count[b as usize] += 1;
        self.raw.erases += 1;
        self.state[b as usize] = BlockState::Free as u8;
        self.free[die].push_back(b);
    }

    fn ensure_gc_block(&mut self, die: usize, now: u64) {
        if self.gc_wp[die].block == NONE {
            let b = self.free[die]
                .pop_front()
                .expect("gc_one checked room or a free block");
            self.open_block(Stream::Gc, die, b, now);
        }
    }

    /// A die with nothing to do erases blocks that hold no valid data (left by
    /// TRIM or overwrites), as long as the erase ends before `now`: such
    /// erases only use time the die would have spent idle, so they never
    /// delay host I/O. This is why a trimmed drive is soon back to fresh-like
    /// speed even without a long idle period.
    fn erase_in_gaps(&mut self, now: u64) {
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
    fn background(&mut self, now: u64) {
        if self.geo.bg_idle_ns == 0 {
            return;
        }
        let idle_start = self.last_host_done + self.geo.bg_idle_ns;
        if now <= idle_start {
            return;
        }
        if self.host_wp[self.cursor as usize].slot > 0 {
            let d = self.cursor as usize;
            let ready = self.host_wp[d].ready_ns.max(idle_start);
            self.host_wp[d].ready_ns = ready;
            self.program_open(Stream::Host, d);
            self.cursor = (self.cursor + 1) % self.geo.dies;
        }
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
        // The idle gap is used up; the next one starts after new host I/O.
        self.last_host_done = self.last_host_done.max(now - self.geo.bg_idle_ns);
    }

    // ----------------------------------------------------------- trim, flush

    fn trim(&mut self, t: u64, offset: u64, len: u64) -> u64 {
        self.raw.host_trim_cmds += 1;
        self.raw.host_trimmed_bytes += len;
        let ub = self.geo.unit_bytes;
        // Only whole mapping units are deallocated; partial units keep their data.
        let first = offset.div_ceil(ub);
        let end = (offset + len) / ub;
        let mut units = 0;
        for lpn in first..end.max(first) {
            self.unmap(lpn);
            units += 1;
        }
        let work = units * self.geo.trim_ns_per_unit;
        self.ctrl_free = self.ctrl_free.max(t) + work;
        t + work
    }

    fn flush(&mut self, t: u64) -> u64 {
        self.raw.host_flush_cmds += 1;
        let mut done = t;
        let d = self.cursor as usize;
        if self.host_wp[d].slot > 0 {
            self.host_wp[d].ready_ns = self.host_wp[d].ready_ns.max(t);
            if let Some(p) = self.program_open(Stream::Host, d) {
                done = done.max(p);
            }
            self.cursor = (self.cursor + 1) % self.geo.dies;
        }
        for die in 0..self.geo.dies as usize {
            if self.gc_wp[die].slot > 0 {
                self.gc_wp[die].ready_ns = self.gc_wp[die].ready_ns.max(t);
                if let Some(p) = self.program_open(Stream::Gc, die) {
                    done = done.max(p);
                }
            }
        }
        if self.geo.buffer_units > 0 {
            done = done.max(self.buffer_last_release);
        }
        done
    }

    // -------------------------------------------------------------- control

    /// Back to a fresh drive, as an ATA Secure Erase (HDDErase) does: all
    /// blocks erased, mapping cleared. Erase counts and cumulative counters stay.
    pub fn secure_erase(&mut self) {
        for b in 0..self.valid.len() {
            if self.state[b] != BlockState::Free as u8 || self.valid[b] > 0 {
                self.erase_count[b] += 1;
                self.raw.erases += 1;
            }
        }
        let fresh = Ssd::new(&self.profile, self.seed);
        let (erase_count, raw, last_now) = (
            std::mem::take(&mut self.erase_count),
            std::mem::take(&mut self.raw),
            self.last_now,
        );
        *self = fresh;
        self.erase_count = erase_count;
        self.raw = raw;
        self.last_now = last_now;
        self.last_host_done = last_now;
        self.ctrl_free = last_now;
    }

    /// Age the drive without data, driving the same submit path at QD 32 in
    /// model time from `now_ns`. Returns the model time when the last request
    /// completes. Random offsets come from `seed`.
    pub fn precondition(&mut self, now_ns: u64, step: &Precondition, seed: u64) -> u64 {
        let cap = self.capacity();
        let mut q = QdDriver::new(now_ns.max(self.last_now), 32);
        match *step {
            Precondition::FillSequential { bs } => {
                let bs = clamp_bs(bs, cap);
                let mut off = 0;
                while off < cap {
                    let len = bs.min(cap - off);
                    q.issue(self, Op::Write, off, len);
                    off += len;
                }
            }
            Precondition::Random { bs, amount } => {
                let bs = clamp_bs(bs, cap);
                let slots = cap / bs;
                let mut rng = SplitMix64(seed);
                for _ in 0..amount.div_ceil(bs) {
                    let off = rng.below(slots) * bs;
                    q.issue(self, Op::Write, off, bs);
                }
            }
            Precondition::TrimAll => q.issue(self, Op::Trim, 0, cap),
        }
        q.finish()
    }

    /// Check every FTL invariant; returns a description of the first broken one.
    /// Used by the property tests; cost is linear in the drive size.
    pub fn check_invariants(&self) -> Result<(), String> {
        let g = &self.geo;
        let mut valid = vec![0u32; self.valid.len()];
        let mut mapped = 0u64;
        for lpn in 0..g.logical_units {
            let e = self.l2p.get(lpn as usize);
            if e == 0 {
                continue;
            }
            mapped += 1;
            let ppn = e - 1;
            if ppn >= g.physical_units {
                return Err(format!("lpn {lpn} maps outside NAND: {ppn}"));
            }
            if self.p2l.get(ppn as usize) != lpn + 1 {
                return Err(format!(
                    "lpn {lpn} -> ppn {ppn}, but ppn {ppn} -> {}",
                    self.p2l.get(ppn as usize) as i64 - 1
                ));
            }
            valid[g.block_of_ppn(ppn) as usize] += 1;
        }
        let mut reverse = 0u64;
        for ppn in 0..g.physical_units {
            let e = self.p2l.get(ppn as usize);
            if e != 0 {
                reverse += 1;
                if e > g.logical_units {
                    return Err(format!("ppn {ppn} claims lpn {} beyond the drive", e - 1));
                }
                if self.l2p.get((e - 1) as usize) != ppn + 1 {
                    return Err(format!(
                        "ppn {ppn} claims lpn {}, which maps elsewhere",
                        e - 1
                    ));
                }
            }
        }
        if mapped != reverse || mapped != self.mapped_units {
            return Err(format!(
                "mapped {mapped}, reverse {reverse}, counter {}",
                self.mapped_units
            ));
        }
        if valid != self.valid {
            let b = (0..valid.len())
                .find(|&b| valid[b] != self.valid[b])
                .unwrap_or(0);
            return Err(format!(
                "block {b}: {} valid units counted, {} recorded",
                valid[b], self.valid[b]
            ));
        }
        let mut free = 0;
        let mut open = 0;
        for d in 0..g.dies as usize {
            for &b in &self.free[d] {
                if self.state[b as usize] != BlockState::Free as u8 || self.valid[b as usize] != 0 {
                    return Err(format!(
                        "free list of die {d} holds block {b} that is not free/empty"
                    ));
                }
                if g.die_of_block(b) as usize != d {
                    return Err(format!(
                        "free list of die {d} holds block {b} of another die"
                    ));
                }
            }
            free += self.free[d].len();
            for wp in [self.host_wp[d], self.gc_wp[d]] {
                if wp.block != NONE {
                    open += 1;
                    if self.state[wp.block as usize] != BlockState::Open as u8 {
                        return Err(format!("write point block {} is not open", wp.block));
                    }
                }
            }
            for v in 0..self.heads[d].len() {
                let mut b = self.heads[d][v];
                while b != NONE {
                    if self.valid[b as usize] as usize != v
                        || self.state[b as usize] != BlockState::Full as u8
                    {
                        return Err(format!(
                            "bucket {v} of die {d} holds block {b} (valid {})",
                            self.valid[b as usize]
                        ));
                    }
                    b = self.bnext[b as usize];
                }
            }
        }
        let states = |s: BlockState| self.state.iter().filter(|&&x| x == s as u8).count();
        if states(BlockState::Free) != free {
            return Err(format!(
                "{} blocks marked free, {free} in free lists",
                states(BlockState::Free)
            ));
        }
        if states(BlockState::Open) != open {
            return Err(format!(
                "{} blocks marked open, {open} write points",
                states(BlockState::Open)
            ));
        }
        let empty = (0..self.valid.len())
            .filter(|&b| self.state[b] == BlockState::Full as u8 && self.valid[b] == 0)
            .count() as u64;
        if empty != self.empty_full {
            return Err(format!(
                "{empty} full blocks without valid data, counter says {}",
                self.empty_full
            ));
        }
        let in_progress = self.gc_cur.iter().flatten().count();
        if states(BlockState::Victim) != in_progress {
            return Err(format!(
                "{} blocks marked victim, {in_progress} collections in progress",
                states(BlockState::Victim)
            ));
        }
        for (d, cur) in self.gc_cur.iter().enumerate() {
            if let Some((b, _)) = *cur
                && (self.state[b as usize] != BlockState::Victim as u8
                    || g.die_of_block(b) as usize != d)
            {
                return Err(format!(
                    "die {d}: collection in progress on block {b} that is not its victim"
                ));
            }
        }
        if free + open + states(BlockState::Full) + in_progress != self.valid.len() {
            return Err("free + open + full != total blocks".into());
        }
        let r = &self.raw;
        let open_units: u64 = self
            .host_wp
            .iter()
            .chain(self.gc_wp.iter())
            .map(|wp| wp.slot as u64)
            .sum();
        let prog_units = r.nand_bytes_programmed / g.unit_bytes + open_units;
        if prog_units < mapped {
            return Err(format!(
                "{mapped} units mapped but only {prog_units} programmed or buffered"
            ));
        }
        let erased: u64 = self.erase_count.iter().map(|&e| e as u64).sum();
        if erased != r.erases {
            return Err(format!(
                "erase counts sum to {erased}, erase counter says {}",
                r.erases
            ));
        }
        Ok(())
    }
}

fn clamp_bs(bs: u64, cap: u64) -> u64 {
    (bs.max(512) / 512 * 512).min(cap).max(512)
}

/// Issues requests keeping at most `qd` outstanding, each next one at the
/// earliest completion — how fio drives a queue.
struct QdDriver {
    now: u64,
    qd: usize,
    inflight: BinaryHeap<Reverse<u64>>,
    end: u64,
}

impl QdDriver {
    fn new(now: u64, qd: usize) -> QdDriver {
        QdDriver {
            now,
            qd,
            inflight: BinaryHeap::new(),
            end: now,
        }
    }

    fn issue(&mut self, ssd: &mut Ssd, op: Op, offset: u64, len: u64) {
        if self.inflight.len() >= self.qd
            && let Some(Reverse(t)) = self.inflight.pop()
        {
            self.now = self.now.max(t);
        }
        let req = Request {
            op,
            offset,
            len,
            payload: Payload::Unknown,
        };
        if let Ok(c) = ssd.submit(self.now, &req) {
            self.inflight.push(Reverse(c.done_ns));
            self.end = self.end.max(c.done_ns);
        }
    }

    fn finish(self) -> u64 {
        self.end
    }
}

/// SplitMix64: a tiny, fixed, seedable generator, so precondition results
/// never change with a dependency's version.
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by rejection-free multiply-shift.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}
