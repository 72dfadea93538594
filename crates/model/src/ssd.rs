//! The drive: FTL state and resource timelines.
//!
//! Vocabulary used throughout:
//! - *unit*: a mapping unit (logical page), the granularity of the mapping table;
//! - *dpage*: a multi-plane page of one die (one page on each plane), the
//!   granularity of programs; it holds `units_per_dpage` units;
//! - *block*: the same erase block on every plane of one die, the granularity
//!   of erases and garbage collection; it holds `pages_per_block` dpages;
//! - *lpn* / *ppn*: logical / physical unit numbers. The tables store `x + 1`
//!   so that the zero-initialised forward map means "unmapped"; which
//!   physical units hold current data is the live bitmap's (`mapping.rs`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::geo::Geo;
use super::packed::{Bitmap, PackedVec};
use super::timeline::Channel;
use super::write_point::{Stream, WritePoint};
use super::*;
use vssd_profile::SlcMode;

pub(crate) const NONE: u32 = u32::MAX;

/// Block states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum BlockState {
    Free = 0,
    Open = 1,
    Full = 2,
    Victim = 3,
    /// Hybrid mapping: part of a data or log superblock.
    Mapped = 4,
    /// Retired from service (a factory bad block, `geometry.retired_blocks`):
    /// never written, erased or counted in wear.
    Retired = 5,
}

impl BlockState {
    pub(crate) fn from_u8(v: u8) -> Option<BlockState> {
        Some(match v {
            0 => BlockState::Free,
            1 => BlockState::Open,
            2 => BlockState::Full,
            3 => BlockState::Victim,
            4 => BlockState::Mapped,
            5 => BlockState::Retired,
            _ => return None,
        })
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
    pub(crate) host_reduced_bytes: u64,
    pub(crate) trim_dropped_units: u64,
    pub(crate) merges_switch: u64,
    pub(crate) merges_partial: u64,
    pub(crate) merges_full: u64,
    pub(crate) merge_copies: u64,
    pub(crate) slc_units_written: u64,
    pub(crate) slc_units_folded: u64,
}

/// An FTL invariant found broken part-way through a request (see
/// [`ModelError::Internal`]): what broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Broken(pub(super) &'static str);

/// One emulated SSD: FTL state plus timelines. See the module docs of
/// [`crate`].
#[derive(Debug, Clone)]
pub struct Ssd {
    pub(super) profile: Profile,
    pub(super) geo: Geo,
    /// lpn -> ppn + 1 (0 = unmapped).
    pub(super) l2p: PackedVec,
    /// ppn -> lpn + 1, meaningful only where `live` is set: an overwrite
    /// or TRIM clears the unit's `live` bit and leaves its entry stale.
    pub(super) p2l: PackedVec,
    /// One bit per physical unit: set while it holds an lpn's current data.
    /// A host overwrite invalidates a unit at a random place on the NAND;
    /// clearing its bit here (1/26 of the reverse map's size, mostly in
    /// cache) instead of its reverse entry saves a cache miss per write.
    pub(super) live: Bitmap,
    /// Per block: valid units.
    pub(super) valid: Vec<u32>,
    /// Per block: erase count.
    pub(super) erase_count: Vec<u32>,
    /// Per block: [`BlockState`] as u8.
    pub(super) state: Vec<u8>,
    /// Per block: time of the last program into it (cost-benefit age).
    pub(super) last_write: Vec<u64>,
    /// Per block: intrusive list links for the valid-count buckets of full blocks.
    pub(super) bnext: Vec<u32>,
    pub(super) bprev: Vec<u32>,
    /// Per die: bucket heads, indexed by valid count (0..=units_per_block).
    pub(super) heads: Vec<Vec<u32>>,
    /// Full blocks holding no valid data (reclaimable by an erase alone).
    pub(super) empty_full: u64,
    /// Per die: erased blocks, oldest first (so wear rotates through all).
    pub(super) free: Vec<VecDeque<u32>>,
    /// Per die: the write point of each [`Stream`] (see `write_point.rs`).
    pub(super) wps: Vec<[WritePoint; 2]>,
    /// Die currently receiving host units.
    pub(super) cursor: u32,
    pub(super) mapped_units: u64,
    // Timelines (ns).
    pub(super) die_busy: Vec<u64>,
    /// With independent plane reads: per die, when its last program,
    /// erase or whole-die read ends (a plane read waits for that only),
    /// and per die and plane, when that plane's last read ends. Empty
    /// otherwise; `die_busy` then covers reads too.
    pub(super) die_pe_busy: Vec<u64>,
    pub(super) plane_busy: Vec<u64>,
    pub(super) chan: Vec<Channel>,
    /// The host link (SATA, PCIe): transfers take the earliest gap after
    /// their data is ready, so a read whose data is ready early does not
    /// wait behind one that was sent before it (NCQ and NVMe complete out
    /// of order). One lane: reads and writes share it.
    pub(super) link: Channel,
    pub(super) ctrl_free: u64,
    pub(super) last_now: u64,
    /// Latest completion of any host command (idle detection).
    pub(super) last_host_done: u64,
    /// Latest write-buffer admission (admission is in order).
    pub(super) last_admit: u64,
    /// Completion times of outstanding commands (queue-depth limit).
    pub(super) outstanding: BinaryHeap<Reverse<u64>>,
    /// Programs holding host data: (done time, units) — the write buffer's drain.
    pub(super) buffer: BinaryHeap<Reverse<(u64, u32)>>,
    pub(super) buffered_units: u64,
    pub(super) buffer_last_release: u64,
    pub(super) raw: Raw,
    pub(super) seed: u64,
    /// Per die: the GC victim being collected and its next page.
    pub(super) gc_cur: Vec<Option<(u32, u32)>>,
    /// Per die: valid / invalid units of the current victim when picked.
    pub(super) gc_ratio: Vec<f64>,
    /// Scratch space reused by every GC victim (no allocation per victim).
    pub(super) gc_lpns: Vec<u64>,
    pub(super) gc_pages: Vec<(usize, u32)>,
    /// Set when the model found its state broken ([`ModelError::Internal`]):
    /// every later request is refused and the state is not saved.
    pub(super) damaged: Option<&'static str>,
    // ------------------------------------------------ period mechanisms
    /// No command starts before this (a non-queued TRIM in progress).
    pub(super) barrier: u64,
    /// Data reduction: per logical unit, its compressed size in 1/256 of
    /// a unit, minus 1 (empty without reduction).
    pub(super) csize: Vec<u8>,
    /// Data reduction: per block, the slots it took when it was closed
    /// (empty without reduction).
    pub(super) bcap: Vec<u32>,
    /// Compressed size (1/256 of a unit, 1..=256) of the units of the
    /// write being placed.
    pub(super) cur_csize: u32,
    /// SLC cache: per block, whether it is (being) written in SLC mode
    /// (empty without a cache), and how many are.
    pub(super) slc_mode: Vec<bool>,
    pub(super) slc_blocks: u64,
    /// Hybrid log-block mapping state (None for page mapping).
    pub(super) hy: Option<Box<super::hybrid::Hybrid>>,
    /// Deferred release (`trim.deferred_release`; empty without): per
    /// logical unit, a bit set while it is trimmed but its flash not yet
    /// released (it stays mapped in `l2p`, so GC copies it, but reads as
    /// unmapped); how many; the TRIM ranges to release, oldest first; and
    /// the release credit host writes have earned.
    pub(super) pending: Bitmap,
    pub(super) pending_units: u64,
    pub(super) release_q: VecDeque<(u64, u64)>,
    pub(super) release_credit: f64,
}

impl Ssd {
    /// A fresh drive: everything erased and unmapped. `seed` is kept for
    /// [`Ssd::precondition`]; the model has no other randomness.
    pub fn new(profile: &Profile, seed: u64) -> Ssd {
        let geo = Geo::new(profile);
        let nblocks = geo.blocks();
        let mut ssd = Ssd {
            profile: profile.clone(),
            l2p: PackedVec::new(geo.logical_units as usize, geo.physical_units),
            p2l: PackedVec::new(geo.physical_units as usize, geo.logical_units),
            live: Bitmap::new(geo.physical_units),
            valid: vec![0; nblocks],
            erase_count: vec![0; nblocks],
            state: vec![BlockState::Free as u8; nblocks],
            last_write: vec![0; nblocks],
            bnext: vec![NONE; nblocks],
            bprev: vec![NONE; nblocks],
            heads: vec![vec![NONE; geo.units_per_block as usize + 1]; geo.dies as usize],
            empty_full: 0,
            free: Vec::new(),
            wps: vec![[WritePoint::EMPTY; 2]; geo.dies as usize],
            cursor: 0,
            mapped_units: 0,
            die_busy: vec![0; geo.dies as usize],
            die_pe_busy: if geo.plane_reads {
                vec![0; geo.dies as usize]
            } else {
                Vec::new()
            },
            plane_busy: if geo.plane_reads {
                vec![0; (geo.dies * geo.planes) as usize]
            } else {
                Vec::new()
            },
            chan: vec![Channel::new((geo.dies / geo.channels) as usize); geo.channels as usize],
            link: Channel::new(1),
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
            damaged: None,
            barrier: 0,
            csize: if geo.vx > 1 {
                vec![255; geo.logical_units as usize]
            } else {
                Vec::new()
            },
            bcap: if geo.vx > 1 {
                vec![0; nblocks]
            } else {
                Vec::new()
            },
            cur_csize: 256,
            slc_mode: if geo.slc != SlcMode::Off {
                vec![false; nblocks]
            } else {
                Vec::new()
            },
            slc_blocks: 0,
            hy: None,
            pending: if geo.deferred_release {
                Bitmap::new(geo.logical_units)
            } else {
                Bitmap::default()
            },
            pending_units: 0,
            release_q: VecDeque::new(),
            release_credit: 0.0,
            geo,
        };
        ssd.free = (0..ssd.geo.dies)
            .map(|d| {
                let b0 = d * ssd.geo.blocks_per_die;
                let end = b0 + ssd.geo.blocks_per_die;
                let first_retired = end - ssd.geo.retired_on(d);
                for b in first_retired..end {
                    ssd.state[b as usize] = BlockState::Retired as u8;
                }
                (b0..first_retired).collect()
            })
            .collect();
        if ssd.geo.hybrid {
            ssd.hy = Some(Box::new(super::hybrid::Hybrid::new(&ssd.geo)));
        }
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

    /// Why the model is damaged, if it found its state broken: see
    /// [`ModelError::Internal`]. `None` for a healthy drive.
    pub fn damaged(&self) -> Option<&'static str> {
        self.damaged
    }

    /// Heap bytes held by the model state (mapping tables, block table, queues).
    pub fn memory_bytes(&self) -> usize {
        let nblocks = self.valid.len();
        self.l2p.heap_bytes()
            + self.p2l.heap_bytes()
            + self.live.heap_bytes()
            + nblocks * (4 + 4 + 1 + 8 + 4 + 4 + 4)
            + self.heads.iter().map(|h| h.len() * 4).sum::<usize>()
            + self.outstanding.capacity() * 8
            + self.buffer.capacity() * 16
            + self.chan.iter().map(|c| c.len() * 16).sum::<usize>()
            + self.link.len() * 16
            + (self.die_pe_busy.len() + self.plane_busy.len()) * 8
            + self.pending.heap_bytes()
            + self.release_q.capacity() * 16
    }

    /// Counters, with derived figures (write amplification, wear) computed now.
    pub fn counters(&self) -> Counters {
        let r = &self.raw;
        let retired = BlockState::Retired as u8;
        let in_service = self.valid.len() - self.geo.retired as usize;
        let n = in_service.max(1);
        let (mut mn, mut mx, mut sum) = (u32::MAX, 0u32, 0u64);
        for (&e, _) in self
            .erase_count
            .iter()
            .zip(&self.state)
            .filter(|(_, s)| **s != retired)
        {
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
            total_blocks: in_service as u64,
            mapped_units: self.mapped_units - self.pending_units,
            trim_pending_units: self.pending_units,
            total_units: self.geo.logical_units,
            erase_count_min: if in_service == 0 { 0 } else { mn },
            erase_count_avg: sum as f64 / n as f64,
            erase_count_max: mx,
            host_reduced_bytes: r.host_reduced_bytes,
            trim_dropped_units: r.trim_dropped_units,
            merges_switch: r.merges_switch,
            merges_partial: r.merges_partial,
            merges_full: r.merges_full,
            merge_copies: r.merge_copies,
            slc_units_written: r.slc_units_written,
            slc_units_folded: r.slc_units_folded,
            slc_free_units: self.slc_free_units(),
            wear_percent_used: (self.geo.rated_pe > 0)
                .then(|| sum as f64 / n as f64 / self.geo.rated_pe as f64 * 100.0),
        }
    }

    /// A host write's first and last mapping units and its transfer over
    /// the link, which starts once the write buffer admits it: (first,
    /// last, link start, link end). Shared by both mapping policies.
    pub(super) fn write_transfer(&mut self, t: u64, offset: u64, len: u64) -> (u64, u64, u64, u64) {
        let ub = self.geo.unit_bytes;
        let first = offset / ub;
        let last = (offset + len - 1) / ub;
        let admit = if self.geo.buffer_units > 0 {
            self.buffer_admit(t, last - first + 1)
        } else {
            t
        };
        let dur = self.geo.link_ns(len);
        let link_start = self.link.reserve_anywhere(0, admit, dur);
        let link_end = link_start + dur;
        (first, last, link_start, link_end)
    }

    /// Let the drive do, up to `now_ns`, the work it does while the host
    /// leaves it alone (erases in idle die time, background GC, SLC folding
    /// after `bg_idle_ms`). [`Ssd::submit`] does the same before each
    /// request, so this changes no timing: it only brings the state (and
    /// the counters a monitor reads) up to date during an idle period.
    pub fn catch_up(&mut self, now_ns: u64) {
        if self.damaged.is_some() {
            return;
        }
        let now = now_ns.max(self.last_now);
        self.erase_in_gaps(now);
        self.background(now);
    }

    /// Submit a request at `now_ns` and return when it completes.
    ///
    /// `now_ns` is clamped to be non-decreasing. A bad request (misaligned,
    /// out of range) returns an error and leaves the state untouched.
    /// [`ModelError::Internal`] instead means the model found its state
    /// broken: it is damaged from then on (see [`Ssd::damaged`]). Never
    /// panics.
    pub fn submit(&mut self, now_ns: u64, req: &Request) -> Result<Completion, ModelError> {
        if let Some(what) = self.damaged {
            return Err(ModelError::Internal { what });
        }
        self.check(req)?;
        let now = now_ns.max(self.last_now);
        self.last_now = now;
        for c in &mut self.chan {
            c.prune(now);
        }
        self.link.prune(now);
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
        let mut start = now.max(self.barrier);
        let trim = matches!(req.op, Op::Trim | Op::WriteZeroes { unmap: true });
        let non_queued = trim && self.geo.trim_non_queued;
        if non_queued {
            // SATA DSM before 3.1 is not an NCQ command: the host drains the
            // queue first, so it starts when every outstanding one is done.
            if let Some(last) = self.outstanding.iter().map(|r| r.0).max() {
                start = start.max(last);
            }
        } else if self.outstanding.len() >= self.geo.queue_depth
            && let Some(Reverse(t)) = self.outstanding.pop()
        {
            start = start.max(t);
        }
        // The controller handles one command at a time.
        start = start.max(self.ctrl_free);
        let cmd_ns = match req.op {
            Op::Read => self.geo.cmd_read_ns,
            Op::Write | Op::WriteZeroes { unmap: false } => self.geo.cmd_write_ns,
            _ => self.geo.cmd_ns,
        };
        self.ctrl_free = start + cmd_ns;
        let t = start + cmd_ns;

        let done = match req.op {
            Op::Read => self.read(t, req.offset, req.len),
            Op::Write | Op::WriteZeroes { unmap: false } => {
                let payload = if matches!(req.op, Op::WriteZeroes { .. }) {
                    Payload::Zeroes
                } else {
                    req.payload
                };
                match self.write(t, req.offset, req.len, payload) {
                    Ok(done) => done,
                    Err(Broken(what)) => {
                        self.damaged = Some(what);
                        return Err(ModelError::Internal { what });
                    }
                }
            }
            Op::Trim | Op::WriteZeroes { unmap: true } => match self.trim(t, req.offset, req.len) {
                Ok(done) => done,
                Err(Broken(what)) => {
                    self.damaged = Some(what);
                    return Err(ModelError::Internal { what });
                }
            },
            Op::Flush => self.flush(t),
        };
        if non_queued {
            // Nothing else runs while it executes.
            self.barrier = self.barrier.max(done);
        }
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

    // ---------------------------------------------------------------- writes

    fn write(&mut self, t: u64, offset: u64, len: u64, payload: Payload) -> Result<u64, Broken> {
        self.raw.host_write_cmds += 1;
        self.raw.host_written_bytes += len;
        if len == 0 {
            return Ok(t);
        }
        if self.geo.vx > 1 {
            self.cur_csize = self.compressed_size(payload);
            self.raw.host_reduced_bytes += len * self.cur_csize as u64 / 256;
        }
        if self.hy.is_some() {
            return self.hy_write(t, offset, len);
        }
        let ub = self.geo.unit_bytes;
        let (first, last, link_start, link_end) = self.write_transfer(t, offset, len);
        let buffered = self.geo.buffer_units > 0;
        let mut done = link_end;
        for (i, lpn) in (first..=last).enumerate() {
            let mut ready = (link_start + self.geo.link_ns((i as u64 + 1) * ub)).min(link_end);
            let partial = (lpn == first && !offset.is_multiple_of(ub))
                || (lpn == last && !(offset + len).is_multiple_of(ub));
            if partial && self.l2p.get(lpn as usize) != 0 && !self.is_pending(lpn) {
                // Sub-unit write: read the rest of the unit first.
                self.raw.rmw_reads += 1;
                let (r, _) = self.read_group(ready, lpn, lpn);
                ready = ready.max(r);
            }
            let programmed = self.place_host(lpn, ready)?;
            if !buffered && let Some(p) = programmed {
                // Without a buffer the command waits for its data to be in NAND.
                done = done.max(p);
            }
        }
        if self.pending_units > 0 {
            self.release_pending((last - first + 1) as f64 * self.geo.release_rate);
        }
        if !buffered {
            // No write buffer: the command completes when its data is in NAND.
            if let Some(p) = self.program_partial(Stream::Host, self.cursor as usize, 0) {
                done = done.max(p);
            }
        }
        Ok(done)
    }

    /// Wait for room for `n` units in the write buffer; returns the admission time.
    pub(super) fn buffer_admit(&mut self, t: u64, n: u64) -> u64 {
        let cap = self.geo.buffer_units;
        let need = n.min(cap);
        let open = self.wp(Stream::Host, self.cursor as usize).slot as u64;
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
    fn place_host(&mut self, lpn: u64, ready: u64) -> Result<Option<u64>, Broken> {
        let die = self.host_die(ready)?;
        if self.geo.vx > 1 {
            self.csize[lpn as usize] = (self.cur_csize - 1) as u8;
        }
        // host_die returned a die whose host write point holds an open block.
        Ok(self.place_on(Stream::Host, die, lpn, ready))
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
    /// longer take data (full of valid data), in which case the next one that
    /// can. The die returned has an open host block.
    fn host_die(&mut self, now: u64) -> Result<usize, Broken> {
        if self.wp(Stream::Host, self.cursor as usize).slot == 0 {
            self.steer_cursor();
        }
        for _ in 0..self.geo.dies {
            let d = self.cursor as usize;
            if self.wp(Stream::Host, d).block != NONE || self.alloc_host_block(d, now) {
                return Ok(d);
            }
            self.next_host_die();
        }
        // Every die is at its reserve: take a reserve block anywhere (a die
        // whose GC then finds no block to copy into pauses it, see gc_step).
        // The capacity check in profile validation (room for
        // fg_threshold_blocks + 2 blocks per die beyond the exported units)
        // makes this unreachable in practice; it is here so no input can
        // wedge the model.
        for _ in 0..self.geo.dies {
            let d = self.cursor as usize;
            if let Some(b) = self.free[d].pop_front() {
                self.open_block(Stream::Host, d, b, now);
                return Ok(d);
            }
            self.next_host_die();
        }
        // Not a single erased block on any die, and GC could reclaim none:
        // exported data exceeds the NAND, which validation rules out. Report
        // it instead of panicking while other queues share the model.
        Err(Broken("no free block on any die for host data"))
    }

    // ------------------------------------------------------------ flush

    /// Compressed size of a unit of `payload`, in 1/256 of a unit (1..=256).
    fn compressed_size(&self, payload: Payload) -> u32 {
        let min = ((self.geo.min_fraction * 256.0).ceil() as u32).clamp(1, 256);
        let c = match payload {
            Payload::Unknown => 256,
            Payload::Zeroes => 0,
            Payload::Compressible { percent } => 256 * (100 - percent.min(100) as u32) / 100,
        };
        c.clamp(min, 256)
    }

    fn flush(&mut self, t: u64) -> u64 {
        self.raw.host_flush_cmds += 1;
        let mut done = t;
        if let Some(p) = self.program_partial(Stream::Host, self.cursor as usize, t) {
            done = done.max(p);
        }
        for die in 0..self.geo.dies as usize {
            if let Some(p) = self.program_partial(Stream::Gc, die, t) {
                done = done.max(p);
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
            let st = self.state[b];
            if (st != BlockState::Free as u8 && st != BlockState::Retired as u8)
                || self.valid[b] > 0
            {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proptests::tiny;

    fn req(op: Op, offset: u64, len: u64) -> Request {
        Request {
            op,
            offset,
            len,
            payload: Payload::Unknown,
        }
    }

    #[test]
    fn broken_state_is_an_error_not_a_panic_and_stays_reported() {
        let p = tiny("4KiB", "4KiB", 1, "64KiB", "greedy", 0.0);
        let mut ssd = Ssd::new(&p, 1);
        // Deliberate damage: no die has a free block any more (and nothing
        // to collect), which validation and the FTL rule out.
        for f in &mut ssd.free {
            f.clear();
        }
        let e = ssd.submit(0, &req(Op::Write, 0, 4096)).unwrap_err();
        assert!(matches!(e, ModelError::Internal { .. }), "{e}");
        assert!(ssd.damaged().is_some());
        // Sticky: every later request is refused, reads included.
        let again = ssd.submit(1000, &req(Op::Read, 0, 4096)).unwrap_err();
        assert_eq!(again, e);
        // And a damaged state is never saved.
        let mut buf = Vec::new();
        assert!(ssd.save(&mut buf).is_err());
        assert!(buf.is_empty());
        // A secure erase is a fresh drive again.
        ssd.secure_erase();
        assert_eq!(ssd.damaged(), None);
        ssd.submit(2000, &req(Op::Write, 0, 4096)).unwrap();
        ssd.check_invariants().unwrap();
    }
}
