//! One queue's load: keep `iodepth` requests in flight, reap completions,
//! measure their latency, check their status and (with `--verify`) their
//! data. Runs on its own thread with its own virtqueue.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use virtio_bindings::virtio_blk::{VIRTIO_BLK_S_OK, VIRTIO_BLK_T_IN, VIRTIO_BLK_T_OUT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

use super::driver::{DriverError, Vq};
use super::job::Job;
use super::verify::{self, Found, GenTable};
use super::vring::Buf;
use vssd_common::clock::monotonic_ns;
use vssd_common::hist::Histogram;
use vssd_common::rng::Rng;

/// Bytes of shared memory one request slot takes for a block of `bs`:
/// header, status and indirect table in the first page, then the data.
pub fn slot_bytes(bs: u64) -> u64 {
    4096 + bs.div_ceil(4096) * 4096
}

/// Most data segments per request (the indirect table fits in the slot's
/// first page after the header and status).
pub const MAX_SEGMENTS: u64 = (4096 - TABLE_AT) / 16 - 2;

const STATUS_AT: u64 = 16;
const TABLE_AT: u64 = 64;
const DATA_AT: u64 = 4096;
/// Verify errors described in full (the rest are counted).
const ERRORS_KEPT: usize = 10;

/// Per-direction results of one queue.
#[derive(Debug, Default, Clone)]
pub struct DirResult {
    /// Completions inside the measured window.
    pub ios: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Their completion latency.
    pub clat: Histogram,
}

/// What `--verify` found.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct VerifyResult {
    /// Blocks whose data was checked (during the run and in the final pass).
    pub blocks_checked: u64,
    /// Of them, checked in the final read-back pass.
    pub pass_checked: u64,
    /// Reads of blocks not written by this run that held data this
    /// check cannot judge (not zeros, not a verify block).
    pub unverifiable: u64,
    /// Mismatches.
    pub errors: u64,
    /// The first mismatches, described.
    pub first_errors: Vec<String>,
}

/// One queue's results.
#[derive(Debug)]
pub struct QueueResult {
    /// The queue's index.
    pub queue: u16,
    /// Reads, writes.
    pub dirs: [DirResult; 2],
    /// Requests whose status was not OK.
    pub io_errors: u64,
    /// The first of them, described.
    pub first_io_errors: Vec<String>,
    /// Data checks.
    pub verify: VerifyResult,
    /// Kicks sent to the backend.
    pub kicks: u64,
    /// Call-eventfd signals received from the backend.
    pub calls: u64,
    /// All completions, measured or not.
    pub completions: u64,
}

struct Slot {
    base: u64,
    block: u64,
    write: bool,
    generation: u32,
    submit_ns: u64,
}

/// Where the next request comes from.
enum Phase {
    /// The timed workload.
    Timed,
    /// Reading back every block written (`--verify`), from this block index.
    ReadBack(u64),
}

/// Times of the run, `CLOCK_MONOTONIC` ns.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Measuring starts (after the ramp).
    pub start_ns: u64,
    /// Submitting stops.
    pub end_ns: u64,
}

/// Everything one queue's thread needs.
pub struct Worker<'a> {
    q: u16,
    mem: &'a GuestMemoryMmap,
    vq: Vq,
    job: &'a Job,
    lo: u64,
    blocks: u64,
    slots: Vec<Slot>,
    free: Vec<usize>,
    by_head: Vec<u32>,
    gens: Option<GenTable>,
    rng: Rng,
    cursor: u64,
    submitted: u64,
    phase: Phase,
    read_pct: u64,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    used: Vec<(u16, u32)>,
    bufs: Vec<Buf>,
    seg_bytes: u64,
    res: QueueResult,
    progress: &'a AtomicU64,
}

impl<'a> Worker<'a> {
    /// A worker for queue `q` using `vq`, with `iodepth` slots from `slots_at`.
    pub fn new(
        q: u16,
        mem: &'a GuestMemoryMmap,
        vq: Vq,
        job: &'a Job,
        slots_at: u64,
        seg_bytes: u64,
        progress: &'a AtomicU64,
    ) -> Worker<'a> {
        let (lo, hi) = job.region(q);
        let blocks = (hi - lo) / job.bs;
        let stride = slot_bytes(job.bs);
        let slots = (0..u64::from(job.iodepth))
            .map(|i| Slot {
                base: slots_at + i * stride,
                block: 0,
                write: false,
                generation: 0,
                submit_ns: 0,
            })
            .collect();
        let seed = vssd_common::rng::derive_seed(&[job.seed, u64::from(q)]);
        let mut rng = Rng::new(seed);
        let gens = job
            .verify
            .then(|| GenTable::new(blocks, rng.next_u64() as u32));
        let size = usize::from(vq.ring.size());
        Worker {
            q,
            mem,
            vq,
            job,
            lo,
            blocks,
            slots,
            free: (0..usize::from(job.iodepth)).rev().collect(),
            by_head: vec![u32::MAX; size],
            gens,
            rng,
            cursor: 0,
            submitted: 0,
            phase: Phase::Timed,
            read_pct: u64::from(job.rw.read_percent(job.rwmixread)),
            buf: vec![0; job.bs as usize],
            scratch: Vec::new(),
            used: Vec::with_capacity(size),
            bufs: Vec::new(),
            seg_bytes: seg_bytes.max(512),
            res: QueueResult {
                queue: q,
                dirs: Default::default(),
                io_errors: 0,
                first_io_errors: Vec::new(),
                verify: VerifyResult::default(),
                kicks: 0,
                calls: 0,
                completions: 0,
            },
            progress,
        }
    }

    /// Run the timed phase, then (with `--verify`) read back every block
    /// written. `stop` ends the timed phase early. Returns the results and
    /// the queue.
    pub fn run(
        mut self,
        w: Window,
        stall: Duration,
        stop: &AtomicBool,
    ) -> Result<(QueueResult, Vq), DriverError> {
        self.drive(Some(w), stall, stop)?;
        if self.gens.is_some() {
            self.phase = Phase::ReadBack(0);
            self.drive(None, stall, stop)?;
        }
        self.res.kicks = self.vq.kicks;
        self.res.calls = self.vq.calls;
        Ok((self.res, self.vq))
    }

    /// Submit and reap until the phase has nothing more to submit (the
    /// window ended, or the read-back is done) and nothing is in flight.
    fn drive(
        &mut self,
        w: Option<Window>,
        stall: Duration,
        stop: &AtomicBool,
    ) -> Result<(), DriverError> {
        let mut submitting = true;
        let mut waited = Duration::ZERO;
        loop {
            if submitting {
                let over = match w {
                    Some(w) => monotonic_ns() >= w.end_ns || stop.load(Ordering::Relaxed),
                    None => false,
                };
                if over {
                    submitting = false;
                } else {
                    let mut added = 0;
                    while let Some(&s) = self.free.last() {
                        if !self.submit(s)? {
                            break;
                        }
                        self.free.pop();
                        added += 1;
                    }
                    if added > 0 {
                        self.vq.kick(self.mem)?;
                    } else if self.free.len() == self.slots.len() {
                        // Nothing in flight and nothing to submit: the phase is over.
                        submitting = false;
                    }
                }
            }
            if self.free.len() == self.slots.len() && !submitting {
                return Ok(());
            }
            self.used.clear();
            let n = self.vq.ring.take_used_into(self.mem, &mut self.used)?;
            if n == 0 {
                let step = Duration::from_millis(100);
                if !self.vq.wait_call(step)? {
                    waited += step;
                    if waited >= stall {
                        return Err(DriverError::Wait(format!(
                            "queue {}: no completion within {stall:?} ({} requests in flight)",
                            self.q,
                            self.slots.len() - self.free.len()
                        )));
                    }
                }
                continue;
            }
            waited = Duration::ZERO;
            let now = monotonic_ns();
            for i in 0..self.used.len() {
                let (head, _len) = self.used[i];
                self.reap(head, now, w)?;
            }
            self.progress.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// Pick the next request: (write, block index). None when nothing can
    /// be submitted now.
    fn next_op(&mut self) -> Option<(bool, u64)> {
        if self.blocks == 0 {
            return None;
        }
        match self.phase {
            Phase::ReadBack(ref mut next) => {
                let gens = self.gens.as_ref()?;
                while *next < self.blocks {
                    let b = *next;
                    *next += 1;
                    if gens.generation(b) != 0 {
                        return Some((false, b));
                    }
                }
                None
            }
            Phase::Timed => {
                if self.job.io_limit.is_some_and(|n| self.submitted >= n) {
                    return None;
                }
                let write = self.read_pct < 100
                    && (self.read_pct == 0 || self.rng.below(100) >= self.read_pct);
                let busy = |b: u64, g: &Option<GenTable>| g.as_ref().is_some_and(|g| g.busy(b));
                if self.job.rw.random() {
                    // A block with a request in flight is not touched again
                    // until it completes (their order would be undefined).
                    for _ in 0..16 {
                        let b = self.rng.below(self.blocks);
                        if !busy(b, &self.gens) {
                            return Some((write, b));
                        }
                    }
                    None
                } else {
                    let b = self.cursor;
                    if busy(b, &self.gens) {
                        return None;
                    }
                    self.cursor = (self.cursor + 1) % self.blocks;
                    Some((write, b))
                }
            }
        }
    }

    /// Build and add one request in slot `s`. False if there is nothing to submit.
    fn submit(&mut self, s: usize) -> Result<bool, DriverError> {
        let Some((write, block)) = self.next_op() else {
            return Ok(false);
        };
        if matches!(self.phase, Phase::Timed) {
            self.submitted += 1;
        }
        let bs = self.job.bs;
        let offset = self.lo + block * bs;
        let base = self.slots[s].base;
        let mut hdr = [0u8; 16];
        let kind = if write {
            VIRTIO_BLK_T_OUT
        } else {
            VIRTIO_BLK_T_IN
        };
        hdr[0..4].copy_from_slice(&kind.to_le_bytes());
        hdr[8..16].copy_from_slice(&(offset / 512).to_le_bytes());
        let mem_err = |e: vm_memory::GuestMemoryError| DriverError::Memory(e.to_string());
        self.mem
            .write_slice(&hdr, GuestAddress(base))
            .map_err(mem_err)?;
        self.mem
            .write_obj(0xffu8, GuestAddress(base + STATUS_AT))
            .map_err(mem_err)?;
        let mut generation = 0;
        if let Some(g) = self.gens.as_mut() {
            g.set_busy(block);
            if write {
                generation = g.next_generation();
                verify::fill(&mut self.buf, offset, generation);
                self.mem
                    .write_slice(&self.buf, GuestAddress(base + DATA_AT))
                    .map_err(mem_err)?;
            }
        }
        let bufs = &mut self.bufs;
        bufs.clear();
        bufs.push(Buf {
            addr: base,
            len: 16,
            write: false,
        });
        // Data in segments of at most the backend's size_max.
        let mut at = 0;
        while at < bs {
            let n = (bs - at).min(self.seg_bytes);
            bufs.push(Buf {
                addr: base + DATA_AT + at,
                len: n as u32,
                write: !write,
            });
            at += n;
        }
        bufs.push(Buf {
            addr: base + STATUS_AT,
            len: 1,
            write: true,
        });
        let head = if self.job.indirect {
            self.vq.ring.add_indirect(self.mem, base + TABLE_AT, bufs)?
        } else {
            self.vq.ring.add(self.mem, bufs)?
        };
        self.by_head[usize::from(head)] = s as u32;
        let slot = &mut self.slots[s];
        slot.block = block;
        slot.write = write;
        slot.generation = generation;
        slot.submit_ns = monotonic_ns();
        Ok(true)
    }

    /// A completion for chain `head` arrived at `now`.
    fn reap(&mut self, head: u16, now: u64, w: Option<Window>) -> Result<(), DriverError> {
        let s = self
            .by_head
            .get(usize::from(head))
            .copied()
            .filter(|s| (*s as usize) < self.slots.len())
            .ok_or(DriverError::Backend(format!(
                "returned chain {head}, which is not in flight"
            )))? as usize;
        self.by_head[usize::from(head)] = u32::MAX;
        self.free.push(s);
        self.res.completions += 1;
        let (base, block, write, generation, submit_ns) = {
            let x = &self.slots[s];
            (x.base, x.block, x.write, x.generation, x.submit_ns)
        };
        let offset = self.lo + block * self.job.bs;
        let status: u8 = self
            .mem
            .read_obj(GuestAddress(base + STATUS_AT))
            .map_err(|e| DriverError::Memory(e.to_string()))?;
        let ok = status == VIRTIO_BLK_S_OK as u8;
        if !ok {
            self.res.io_errors += 1;
            if self.res.first_io_errors.len() < ERRORS_KEPT {
                self.res.first_io_errors.push(format!(
                    "{} of {} bytes at {offset}: status {status}",
                    if write { "write" } else { "read" },
                    self.job.bs
                ));
            }
        }
        if self.gens.is_some() {
            if ok && write {
                if let Some(g) = self.gens.as_mut() {
                    g.set_generation(block, generation);
                }
            } else if ok {
                self.check_read(base, block, offset)?;
            }
            if let Some(g) = self.gens.as_mut() {
                g.clear_busy(block);
            }
        }
        if let Some(w) = w
            && now >= w.start_ns
            && now <= w.end_ns
        {
            let d = &mut self.res.dirs[usize::from(write)];
            d.ios += 1;
            d.bytes += self.job.bs;
            d.clat.record(now.saturating_sub(submit_ns));
        }
        Ok(())
    }

    fn check_read(&mut self, base: u64, block: u64, offset: u64) -> Result<(), DriverError> {
        self.mem
            .read_slice(&mut self.buf, GuestAddress(base + DATA_AT))
            .map_err(|e| DriverError::Memory(e.to_string()))?;
        let want = self.gens.as_ref().map_or(0, |g| g.generation(block));
        let found = verify::inspect(&self.buf, &mut self.scratch);
        let v = &mut self.res.verify;
        if matches!(self.phase, Phase::ReadBack(_)) {
            v.pass_checked += 1;
        }
        let good = match found {
            Found::Block {
                offset: o,
                generation,
            } => o == offset && (want == 0 || generation == want),
            Found::Zeros => want == 0,
            Found::Foreign if want == 0 => {
                v.unverifiable += 1;
                return Ok(());
            }
            Found::Corrupt { .. } | Found::Foreign => false,
        };
        v.blocks_checked += 1;
        if !good {
            v.errors += 1;
            if v.first_errors.len() < ERRORS_KEPT {
                let expected = if want == 0 {
                    "zeros or an earlier run's block".to_string()
                } else {
                    format!("generation {want}")
                };
                v.first_errors.push(format!(
                    "block at {offset}: expected {expected}, found {found:?}"
                ));
            }
        }
        Ok(())
    }
}
