//! The drive: its state, grouped by mechanism, and the request entry
//! points. Every group is owned by its mechanism's module, which keeps it
//! consistent; the drive's methods (here and in the modules that extend
//! [`Ssd`]: `write.rs`, `write_point.rs`, `gc.rs`, `read.rs`, `trim.rs`,
//! `hybrid/`, ...) combine them. The vocabulary is the crate's (see the
//! glossary in [`crate`]).

use super::Durability;
use super::blocks::Blocks;
use super::buffer::WriteBuffer;
use super::deferred_release::DeferredRelease;
use super::geo::Geo;
use super::log_blocks::MappingScheme;
use super::map_cache::MapCache;
use super::mapping::Mapping;
use super::reduction::Reduction;
use super::slc::SlcCache;
use super::thermal::Thermal;
use super::timeline::Timelines;
use super::types::{Broken, Count, Stream, Tally};
use super::victims::Victims;
use super::{Completion, Counters, ModelError, Op, Payload, Request};
use vssd_profile::Profile;

/// One emulated SSD: FTL state plus timelines. See the module docs of
/// [`crate`].
#[derive(Debug, Clone)]
pub struct Ssd {
    pub(super) profile: Profile,
    pub(super) geo: Geo,
    /// Forward and reverse maps, live units (`mapping.rs`).
    pub(super) mapping: Mapping,
    /// Block table, valid-count buckets, free lists, write points (`blocks.rs`).
    pub(super) blocks: Blocks,
    /// Die, plane, channel, link and controller busy times; host clock
    /// (`timeline.rs`).
    pub(super) timelines: Timelines,
    /// Write buffer and command tags (`buffer.rs`).
    pub(super) buffer: WriteBuffer,
    /// GC victims in progress and scratch (`victims.rs`).
    pub(super) victims: Victims,
    /// Data reduction's compressed sizes (`reduction.rs`).
    pub(super) reduction: Reduction,
    /// SLC cache's blocks (`slc.rs`).
    pub(super) slc: SlcCache,
    /// Trimmed units not released yet (`deferred_release.rs`).
    pub(super) release: DeferredRelease,
    /// Page or hybrid mapping, with hybrid's state (`log_blocks.rs`).
    pub(super) scheme: MappingScheme,
    /// The translation pages cached in DRAM, where only part of the map
    /// fits (`map_cache.rs`).
    pub(super) map_cache: MapCache,
    /// What the model has counted (`types.rs`).
    pub(super) tally: Tally,
    /// Temperature and throttling (`thermal.rs`; inert without `[thermal]`).
    pub(super) thermal: Thermal,
    pub(super) seed: u64,
    /// Host units placed so far (each host write places one per mapping
    /// unit it covers), for [`Ssd::durability`]. Not saved.
    pub(super) host_units_placed: u64,
    /// Read look-ahead: where the last read ended and when it was issued
    /// (the next read starting there was begun in NAND then). Not saved.
    pub(super) look_ahead: Option<(u64, u64)>,
    /// Host bytes written since the last housekeeping pause
    /// (`host.pause_every_bytes`). Not saved.
    pub(super) since_pause: u64,
    /// Set when the model found its state broken ([`ModelError::Internal`]):
    /// every later request is refused and the state is not saved.
    pub(super) damaged: Option<&'static str>,
}

impl Ssd {
    /// A fresh drive: everything erased and unmapped. `seed` is kept for
    /// [`Ssd::precondition`]; the model has no other randomness.
    pub fn new(profile: &Profile, seed: u64) -> Ssd {
        let geo = Geo::new(profile);
        Ssd {
            profile: profile.clone(),
            mapping: Mapping::new(&geo),
            blocks: Blocks::new(&geo),
            timelines: Timelines::new(&geo),
            buffer: WriteBuffer::default(),
            victims: Victims::new(geo.dies),
            reduction: Reduction::new(&geo),
            slc: SlcCache::new(&geo, profile),
            release: DeferredRelease::new(&geo),
            scheme: MappingScheme::new(&geo),
            map_cache: MapCache::new(&geo),
            tally: Tally::default(),
            thermal: Thermal::new(profile),
            seed,
            host_units_placed: 0,
            look_ahead: None,
            since_pause: 0,
            damaged: None,
            geo,
        }
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
        self.mapping.heap_bytes()
            + self.blocks.heap_bytes()
            + self.buffer.heap_bytes()
            + self.timelines.heap_bytes()
            + self.release.heap_bytes()
            + self.map_cache.heap_bytes()
    }

    /// Counters, with derived figures (write amplification, wear) computed now.
    pub fn counters(&self) -> Counters {
        let r = &self.tally;
        let in_service = self.blocks.count() - self.retired_blocks();
        let n = in_service.max(1);
        let (mn, mx, sum) = self.blocks.wear();
        let pending = self.release.pending_units();
        Counters {
            host_read_bytes: r.get(Count::HostReadBytes),
            host_written_bytes: r.get(Count::HostWrittenBytes),
            host_trimmed_bytes: r.get(Count::HostTrimmedBytes),
            host_read_cmds: r.get(Count::HostReadCmds),
            host_write_cmds: r.get(Count::HostWriteCmds),
            host_trim_cmds: r.get(Count::HostTrimCmds),
            host_flush_cmds: r.get(Count::HostFlushCmds),
            nand_pages_read: r.get(Count::NandPagesRead),
            nand_pages_programmed: r.get(Count::NandPagesProgrammed),
            nand_bytes_programmed: r.get(Count::NandBytesProgrammed),
            erases: r.get(Count::Erases),
            gc_copies: r.get(Count::GcCopies),
            gc_victims: r.get(Count::FgGcVictims) + r.get(Count::BgGcVictims),
            fg_gc_victims: r.get(Count::FgGcVictims),
            bg_gc_victims: r.get(Count::BgGcVictims),
            rmw_reads: r.get(Count::RmwReads),
            buffer_stall_ns: r.get(Count::BufferStallNs),
            write_amplification: if r.get(Count::HostWrittenBytes) > 0 {
                r.get(Count::NandBytesProgrammed) as f64 / r.get(Count::HostWrittenBytes) as f64
            } else {
                0.0
            },
            free_blocks: self.blocks.free_total(),
            total_blocks: in_service as u64,
            mapped_units: self.mapping.mapped_units() - pending,
            trim_pending_units: pending,
            total_units: self.geo.logical_units,
            erase_count_min: if in_service == 0 { 0 } else { mn },
            erase_count_avg: sum as f64 / n as f64,
            erase_count_max: mx,
            host_reduced_bytes: r.get(Count::HostReducedBytes),
            trim_dropped_units: r.get(Count::TrimDroppedUnits),
            merges_switch: r.get(Count::MergesSwitch),
            merges_partial: r.get(Count::MergesPartial),
            merges_full: r.get(Count::MergesFull),
            merge_copies: r.get(Count::MergeCopies),
            slc_units_written: r.get(Count::SlcUnitsWritten),
            slc_units_folded: r.get(Count::SlcUnitsFolded),
            slc_free_units: self.slc_free_units(),
            map_reads: r.get(Count::MapReads),
            map_writes: r.get(Count::MapWrites),
            wear_percent_used: (self.geo.rated_pe > 0)
                .then(|| sum as f64 / n as f64 / self.geo.rated_pe as f64 * 100.0),
            grown_bad_blocks: self.grown_bad_blocks(),
            ..self.thermal_counters()
        }
    }

    /// The thermal model's fields of [`Counters`] (all absent or zero
    /// without `[thermal]`).
    fn thermal_counters(&self) -> Counters {
        if !self.thermal.enabled() {
            return Counters::default();
        }
        let t = self.thermal.report();
        Counters {
            temperature_c: Some(t.temp),
            temperature_peak_c: Some(t.peak),
            throttle_level: t.level,
            throttle1_entries: t.entered[0],
            throttle2_entries: t.entered[1..].iter().sum(),
            throttle1_ns: t.time_in[0],
            throttle2_ns: t.time_in[1..].iter().sum(),
            warning_temp_ns: t.warning_ns,
            critical_temp_ns: t.critical_ns,
            ..Counters::default()
        }
    }

    /// Host units the SLC cache can take now (0 without a cache).
    pub(crate) fn slc_free_units(&self) -> u64 {
        self.slc.free_units(&self.geo, self.mapping.mapped_units())
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
        let now = now_ns.max(self.timelines.now());
        self.erase_in_gaps(now);
        self.background(now);
        self.thermal.tick(now, &self.tally);
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
        let now = now_ns.max(self.timelines.now());
        // The idle-time work up to `now` first: its steps start before
        // `now` and must see the channels' reservations that end before it
        // (which `advance` forgets), as they do when a catch-up did it.
        self.erase_in_gaps(now);
        self.background(now);
        self.thermal.tick(now, &self.tally);
        self.timelines.advance(now);

        // Queue-depth limit: a command beyond the drive's tags waits for one.
        self.buffer.retire(now);
        let mut start = now.max(self.timelines.barrier());
        let trim = matches!(req.op, Op::Trim | Op::WriteZeroes { unmap: true });
        let non_queued = trim && self.geo.trim_non_queued;
        if non_queued {
            // SATA DSM before 3.1 is not an NCQ command: the host drains the
            // queue first, so it starts when every outstanding one is done.
            if let Some(last) = self.buffer.last_outstanding() {
                start = start.max(last);
            }
        } else if let Some(t) = self.buffer.take_tag(self.geo.queue_depth) {
            start = start.max(t);
        }
        // The controller handles one command at a time.
        start = start.max(self.timelines.ctrl_free());
        let cmd_ns = match req.op {
            Op::Read => self.geo.cmd_read_ns,
            Op::Write | Op::WriteZeroes { unmap: false } => self.geo.cmd_write_ns,
            _ => self.geo.cmd_ns,
        };
        self.timelines.set_ctrl_free(start + cmd_ns);
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
            self.timelines.raise_barrier(done);
        }
        if self.geo.pause_every > 0
            && matches!(req.op, Op::Write | Op::WriteZeroes { unmap: false })
        {
            // Firmware housekeeping: every so many bytes written, the
            // drive holds every command for a while after this one.
            self.since_pause += req.len;
            if self.since_pause >= self.geo.pause_every {
                self.since_pause %= self.geo.pause_every;
                self.timelines
                    .raise_barrier(done.saturating_add(self.geo.pause_ns));
            }
        }
        self.buffer.command(done);
        self.timelines.host_done(done);
        Ok(Completion {
            submit_ns: now,
            done_ns: done,
        })
    }

    /// Where the host data written so far is: of the `placed` host units
    /// (in the order the host wrote them), the last `open` sit in open
    /// dpages not yet programmed (a FLUSH, idle time or later writes
    /// program them); every other one is in a program that is done by
    /// `programmed_by_ns` (0 without a write buffer: a write then
    /// completes only once its data is in NAND).
    pub fn durability(&self) -> Durability {
        let open = if self.scheme.is_hybrid() {
            // Hybrid mapping programs partly filled dpages at the end of
            // each request.
            0
        } else {
            (0..self.geo.dies as usize)
                .map(|d| self.blocks.wp(Stream::Host, d).slot() as u64)
                .sum()
        };
        Durability {
            placed: self.host_units_placed,
            open,
            programmed_by_ns: if self.geo.buffer_units > 0 {
                self.buffer.last_release()
            } else {
                0
            },
        }
    }

    /// Age the NAND fast: every block in service to at least `percent` of
    /// the rated P/E cycles (wear levelled, as a drive that wrote that
    /// much evenly). The erases count in the counters, and program and
    /// erase times grow with them as the profile's `[wear]` says. Data and
    /// mapping are untouched. Returns the erases added (0 without rated
    /// cycles or when already that worn).
    pub fn age_to(&mut self, percent: f64) -> u64 {
        if self.geo.rated_pe == 0 || !percent.is_finite() || percent <= 0.0 {
            return 0;
        }
        let target = (self.geo.rated_pe as f64 * percent / 100.0).ceil();
        let added = self.blocks.age_to(target.min(u32::MAX as f64) as u32);
        self.tally.add(Count::Erases, added);
        added
    }

    /// Whether the mean erase count has reached the rated P/E cycles
    /// (false without rated cycles).
    pub fn worn_out(&self) -> bool {
        if self.geo.rated_pe == 0 {
            return false;
        }
        let in_service = (self.blocks.count() - self.retired_blocks()).max(1);
        let (_, _, sum) = self.blocks.wear();
        sum >= self.geo.rated_pe as u64 * in_service as u64
    }

    /// Hold the drive until `until_ns`: no host command starts before then
    /// (a firmware stall; commands already started finish as planned).
    pub fn hold_until(&mut self, until_ns: u64) {
        self.timelines.raise_barrier(until_ns);
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

    // -------------------------------------------------------------- control

    /// Back to a fresh drive, as an ATA Secure Erase (HDDErase) does: all
    /// blocks erased, mapping cleared. Erase counts and cumulative counters stay.
    pub fn secure_erase(&mut self) {
        self.tally
            .add(Count::Erases, self.blocks.count_secure_erase());
        let mut fresh = Ssd::new(&self.profile, self.seed);
        fresh
            .blocks
            .set_erase_counts(self.blocks.take_erase_counts());
        // Grown bad blocks stay out of service.
        let retired = super::types::BlockState::Retired as u8;
        for b in 0..self.blocks.count() as u32 {
            if self.blocks.state_byte(b) == retired && !self.geo.is_retired(b) {
                let die = self.geo.die_of_block(b) as usize;
                fresh.blocks.take_free(die, b);
                fresh.blocks.set_state(b, super::types::BlockState::Retired);
            }
        }
        fresh.tally = std::mem::take(&mut self.tally);
        fresh.thermal = std::mem::take(&mut self.thermal);
        fresh.timelines = Timelines::idle_from(&fresh.geo, self.timelines.now());
        *self = fresh;
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
    fn ageing_wears_every_block_and_reaches_end_of_life_at_100_percent() {
        let mut p = tiny("4KiB", "4KiB", 1, "64KiB", "greedy", 0.0);
        p.wear.rated_pe_cycles = 1000;
        let mut ssd = Ssd::new(&p, 1);
        assert!(!ssd.worn_out());
        let added = ssd.age_to(50.0);
        let c = ssd.counters();
        assert_eq!(c.erase_count_min, 500);
        assert_eq!(c.erases, added);
        assert!(!ssd.worn_out());
        assert_eq!(ssd.age_to(10.0), 0, "ageing never takes wear away");
        ssd.age_to(100.0);
        assert!(ssd.worn_out());
        ssd.check_invariants().unwrap();
        // Writes still work in the model: end-of-life behaviour is the device's.
        ssd.submit(0, &req(Op::Write, 0, 4096)).unwrap();
    }

    #[test]
    fn a_hold_delays_commands_that_arrive_during_it_only() {
        let p = tiny("4KiB", "4KiB", 1, "64KiB", "greedy", 0.0);
        let mut ssd = Ssd::new(&p, 1);
        let w = ssd.submit(0, &req(Op::Write, 0, 4096)).unwrap();
        let t = w.done_ns + 1_000_000;
        let plain = ssd.submit(t, &req(Op::Read, 0, 4096)).unwrap().done_ns - t;
        let until = t + 50_000_000;
        ssd.hold_until(until);
        let r = ssd.submit(t + 1_000_000, &req(Op::Read, 0, 4096)).unwrap();
        assert_eq!(r.done_ns, until + plain, "starts at the end of the hold");
        let after = until + 1_000_000;
        let r = ssd.submit(after, &req(Op::Read, 0, 4096)).unwrap();
        assert_eq!(r.done_ns - after, plain, "after it, as before");
    }

    #[test]
    fn broken_state_is_an_error_not_a_panic_and_stays_reported() {
        let p = tiny("4KiB", "4KiB", 1, "64KiB", "greedy", 0.0);
        let mut ssd = Ssd::new(&p, 1);
        // Deliberate damage: no die has a free block any more (and nothing
        // to collect), which validation and the FTL rule out.
        for d in 0..ssd.geo.dies as usize {
            ssd.blocks.free_list_mut(d).clear();
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
