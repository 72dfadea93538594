//! Faults injected at will (`vssd ctl fault add`): media errors at LBA
//! ranges and stalls of the whole drive.
//!
//! - A **read error** range fails every read that touches it with
//!   [`Status::IoError`](super::Status::IoError) (an unrecoverable read
//!   error: virtio-blk `S_IOERR`, NBD `EIO`); the read's buffers are not
//!   filled. Reads that do not touch it are unaffected.
//! - A **write error** range fails every write and write-zeroes that
//!   touches it the same way; the store is not written, so the range (and
//!   the rest of the request) keeps its old data.
//! - A **stall** holds the drive for `ms` of drive time, once (`after_ms`
//!   from when it was added) or periodically (`every_ms`): a command that
//!   arrives during a stall starts when it ends, so its modelled latency
//!   includes the stall (and the lateness accounting, which measures the
//!   delivery against the modelled completion, does not count it as late).
//! - A **throttle** caps the data the drive moves (reads and writes) at
//!   `mb_s` MB/s from `after_ms` on, for `for_ms` (thermal throttling): a
//!   command completes no earlier than its bytes pass the cap, in the
//!   modelled latency like a stall.
//! - A **bad-block** fault retires `count` blocks now (grown bad blocks,
//!   their data moved out first); **media-wear** turns on the NAND's wear
//!   models: uncorrectable reads at the rate its raw bit-error model gives
//!   for each block's wear and data age, and blocks failing their erase at
//!   a rate rising with wear, both scaled by `acceleration` (the
//!   injector applies them to each request: [`media`], `injector.rs`).
//!
//! Faults live in memory only: a restart of the daemon starts without any.
//! The registry is bounded ([`MAX_FAULTS`]) and every request to add one
//! is checked against the drive ([`FaultError`]).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::SECTOR;

mod injector;
pub mod media;

pub use self::injector::MAX_UNCORRECTABLE;
pub(crate) use self::injector::{FaultInjector, MediaState};

/// Most faults registered at once.
pub const MAX_FAULTS: usize = 64;
/// Longest stall, ms of drive time.
pub const MAX_STALL_MS: u64 = 60_000;
/// Longest period or delay of a stall, ms of drive time (one day).
pub const MAX_PERIOD_MS: u64 = 86_400_000;
/// Largest share of each period a periodic stall may take: the drive must
/// run at least a tenth of the time.
pub const MAX_STALL_DUTY: f64 = 0.9;
/// Most blocks one `bad-block` fault retires.
pub const MAX_BAD_BLOCKS: u32 = 4096;
/// Largest `media-wear` acceleration.
pub const MAX_ACCELERATION: f64 = 1e12;
/// Longest `media-wear` retention (data age added), days.
pub const MAX_RETENTION_DAYS: f64 = 36_500.0;

/// A fault to add.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum FaultSpec {
    /// Reads touching `offset..offset + length` (bytes) fail.
    ReadError {
        /// Byte offset, a multiple of 512.
        offset: u64,
        /// Bytes, a non-zero multiple of 512.
        length: u64,
    },
    /// Writes and write-zeroes touching `offset..offset + length` fail.
    WriteError {
        /// Byte offset, a multiple of 512.
        offset: u64,
        /// Bytes, a non-zero multiple of 512.
        length: u64,
    },
    /// The drive takes no command for `ms` of drive time: once, `after_ms`
    /// from now (default 0), or every `every_ms` (the first one `every_ms`
    /// from now).
    Stall {
        /// Length of each stall, ms (1 ..= [`MAX_STALL_MS`]).
        ms: u64,
        /// Period, ms: more than `ms`, at most [`MAX_PERIOD_MS`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        every_ms: Option<u64>,
        /// Delay of a single stall, ms (at most [`MAX_PERIOD_MS`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after_ms: Option<u64>,
    },
    /// Reads and writes move at most `mb_s` MB/s (10^6 bytes/s) of drive
    /// time: thermal throttling, from `after_ms` from now (default 0) for
    /// `for_ms` (default: until cleared).
    Throttle {
        /// The cap, MB/s (1 ..= 100000).
        mb_s: u64,
        /// When it starts, ms from now (at most [`MAX_PERIOD_MS`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after_ms: Option<u64>,
        /// How long it lasts, ms (1 ..= [`MAX_PERIOD_MS`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        for_ms: Option<u64>,
    },
    /// `count` blocks fail now and are retired (grown bad blocks): their
    /// valid data is moved out by GC first.
    BadBlock {
        /// Blocks (1 ..= [`MAX_BAD_BLOCKS`]).
        count: u32,
    },
    /// The NAND's wear models: uncorrectable reads from the raw bit-error
    /// model, blocks failing their erase at a rate rising with wear, both
    /// `acceleration` times as often; data ages `retention_days` more.
    MediaWear {
        /// Raw bit-error rate and block failure rate multiplier (1: as the
        /// models give; at least 1).
        #[serde(default = "one")]
        acceleration: f64,
        /// Days added to every block's data age (the drive sat unpowered).
        #[serde(default)]
        retention_days: f64,
    },
}

fn one() -> f64 {
    1.0
}

impl FaultSpec {
    /// The kind's name as `ctl fault add` spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            FaultSpec::ReadError { .. } => "read-error",
            FaultSpec::WriteError { .. } => "write-error",
            FaultSpec::Stall { .. } => "stall",
            FaultSpec::Throttle { .. } => "throttle",
            FaultSpec::BadBlock { .. } => "bad-block",
            FaultSpec::MediaWear { .. } => "media-wear",
        }
    }
}

/// Why a fault was not added or cleared; one line each.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum FaultError {
    /// The range is empty, misaligned or beyond the drive.
    #[error(
        "{kind} range {offset}+{length} must be a non-empty multiple of 512 bytes within the drive's {capacity} bytes"
    )]
    BadRange {
        /// The fault's kind.
        kind: &'static str,
        /// Byte offset.
        offset: u64,
        /// Bytes.
        length: u64,
        /// The drive's capacity.
        capacity: u64,
    },
    /// The stall's figures are out of bounds.
    #[error("stall: {0}")]
    BadStall(String),
    /// Another fault's figures are out of bounds.
    #[error("{kind}: {why}")]
    Bad {
        /// The fault's kind.
        kind: &'static str,
        /// Why.
        why: String,
    },
    /// The registry is full.
    #[error("{MAX_FAULTS} faults are registered already: clear some first (ctl fault clear [ID])")]
    Full,
    /// No fault has this id.
    #[error("no fault with id {0} (ctl fault list shows them)")]
    NoSuchFault(u64),
}

/// One registered fault, as `ctl fault list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultInfo {
    /// Its id (for `ctl fault clear ID`); ids are never reused.
    pub id: u64,
    /// What it is.
    pub spec: FaultSpec,
    /// Drive time it was added at, ns.
    pub added_model_ns: u64,
    /// Requests it failed (media errors), stalls that held a command,
    /// commands a throttle slowed, blocks retired (bad-block), reads failed
    /// and blocks retired (media-wear).
    pub hits: u64,
}

/// Injected-fault counters since the daemon started (not reset by
/// clearing faults, so they only grow, as Prometheus counters must).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCounters {
    /// Reads failed by a read-error range.
    pub read_errors_injected: u64,
    /// Writes (and write-zeroes) failed by a write-error range.
    pub write_errors_injected: u64,
    /// Stalls that held at least one command.
    pub stalls_injected: u64,
    /// Commands that arrived during a stall and waited for its end.
    pub stalled_commands: u64,
    /// Σ of the time those commands waited, ns of drive time.
    pub stall_wait_ns: u64,
    /// Commands a throttle slowed.
    #[serde(default)]
    pub throttled_commands: u64,
    /// Σ of what the throttle added to their latency, ns of drive time.
    #[serde(default)]
    pub throttle_delay_ns: u64,
    /// Reads failed by the raw bit-error model (media-wear), and reads
    /// failed again at a sector such a read left uncorrectable.
    #[serde(default)]
    pub uncorrectable_reads: u64,
    /// Blocks retired as grown bad blocks (bad-block and media-wear).
    #[serde(default)]
    pub blocks_retired: u64,
}

/// The faults registered now and what they did (`ctl fault list`, and the
/// `faults` part of `ctl stats`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultReport {
    /// Registered faults, by id.
    pub active: Vec<FaultInfo>,
    /// What they did since the daemon started.
    pub counters: FaultCounters,
    /// The power state and what the latest power cut lost.
    #[serde(default)]
    pub power: super::power::PowerReport,
    /// Worn out and read-only (`[wear] end_of_life = "read-only"`).
    #[serde(default)]
    pub read_only: bool,
}

struct Entry {
    info: FaultInfo,
    /// Throttles: drive time the cap's pipe is free again, ns.
    busy_until: u64,
    /// Stalls: the start of the first window, ns of drive time.
    first_ns: u64,
    /// Stalls: the index of the last window that held a command (+1; 0 none).
    last_window: u64,
}

/// The registry: a bounded list behind a lock, and counters. A drive
/// without faults pays one atomic load per request.
#[derive(Default)]
pub struct Faults {
    entries: Mutex<Vec<Entry>>,
    /// Entries registered (the fast path's test).
    count: AtomicUsize,
    next_id: AtomicU64,
    read_errors: AtomicU64,
    write_errors: AtomicU64,
    stalls: AtomicU64,
    stalled_commands: AtomicU64,
    stall_wait_ns: AtomicU64,
    throttled: AtomicU64,
    throttle_ns: AtomicU64,
    uncorrectable: AtomicU64,
    retired: AtomicU64,
}

/// Which direction a media check is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Media {
    /// A read.
    Read,
    /// A write or write-zeroes.
    Write,
}

fn overlaps(a: u64, alen: u64, b: u64, blen: u64) -> bool {
    a < b.saturating_add(blen) && b < a.saturating_add(alen)
}

impl Faults {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Check `spec` against a drive of `capacity` bytes and register it at
    /// drive time `now_ns`.
    pub fn add(
        &self,
        spec: FaultSpec,
        capacity: u64,
        now_ns: u64,
    ) -> Result<FaultInfo, FaultError> {
        let first_ns = match &spec {
            FaultSpec::ReadError { offset, length } | FaultSpec::WriteError { offset, length } => {
                let ok = *length > 0
                    && offset.is_multiple_of(SECTOR)
                    && length.is_multiple_of(SECTOR)
                    && offset.checked_add(*length).is_some_and(|e| e <= capacity);
                if !ok {
                    return Err(FaultError::BadRange {
                        kind: spec.kind(),
                        offset: *offset,
                        length: *length,
                        capacity,
                    });
                }
                0
            }
            FaultSpec::Stall {
                ms,
                every_ms,
                after_ms,
            } => {
                if !(1..=MAX_STALL_MS).contains(ms) {
                    return Err(FaultError::BadStall(format!(
                        "--ms {ms} must be between 1 and {MAX_STALL_MS}"
                    )));
                }
                match (every_ms, after_ms) {
                    (Some(_), Some(_)) => {
                        return Err(FaultError::BadStall(
                            "give --every-ms (periodic) or --after-ms (once), not both".into(),
                        ));
                    }
                    (Some(e), None) if *e <= *ms || *e > MAX_PERIOD_MS => {
                        return Err(FaultError::BadStall(format!(
                            "--every-ms {e} must be more than --ms {ms} (the drive must run between stalls) and at most {MAX_PERIOD_MS}"
                        )));
                    }
                    (Some(e), None) if *ms as f64 > MAX_STALL_DUTY * *e as f64 => {
                        return Err(FaultError::BadStall(format!(
                            "--ms {ms} every {e} ms stalls the drive {:.1} % of the time: at most {} % (a drive that never runs is not a stall)",
                            *ms as f64 / *e as f64 * 100.0,
                            MAX_STALL_DUTY * 100.0
                        )));
                    }
                    (Some(e), None) => now_ns.saturating_add(e * 1_000_000),
                    (None, Some(a)) if *a > MAX_PERIOD_MS => {
                        return Err(FaultError::BadStall(format!(
                            "--after-ms {a} must be at most {MAX_PERIOD_MS}"
                        )));
                    }
                    (None, a) => now_ns.saturating_add(a.unwrap_or(0) * 1_000_000),
                }
            }
            FaultSpec::Throttle {
                mb_s,
                after_ms,
                for_ms,
            } => {
                let bad = |why: String| FaultError::Bad {
                    kind: "throttle",
                    why,
                };
                if !(1..=100_000).contains(mb_s) {
                    return Err(bad(format!("--mb-s {mb_s} must be between 1 and 100000")));
                }
                if after_ms.is_some_and(|a| a > MAX_PERIOD_MS) {
                    return Err(bad(format!("--after-ms must be at most {MAX_PERIOD_MS}")));
                }
                if for_ms.is_some_and(|f| !(1..=MAX_PERIOD_MS).contains(&f)) {
                    return Err(bad(format!(
                        "--for-ms must be between 1 and {MAX_PERIOD_MS}"
                    )));
                }
                now_ns.saturating_add(after_ms.unwrap_or(0) * 1_000_000)
            }
            FaultSpec::BadBlock { count } => {
                if !(1..=MAX_BAD_BLOCKS).contains(count) {
                    return Err(FaultError::Bad {
                        kind: "bad-block",
                        why: format!("--count {count} must be between 1 and {MAX_BAD_BLOCKS}"),
                    });
                }
                0
            }
            FaultSpec::MediaWear {
                acceleration,
                retention_days,
            } => {
                let bad = |why: String| FaultError::Bad {
                    kind: "media-wear",
                    why,
                };
                if !(acceleration.is_finite() && (1.0..=MAX_ACCELERATION).contains(acceleration)) {
                    return Err(bad(format!(
                        "--acceleration {acceleration} must be from 1 to {MAX_ACCELERATION:e}"
                    )));
                }
                if !(retention_days.is_finite()
                    && (0.0..=MAX_RETENTION_DAYS).contains(retention_days))
                {
                    return Err(bad(format!(
                        "--retention-days {retention_days} must be from 0 to {MAX_RETENTION_DAYS}"
                    )));
                }
                if self
                    .lock()
                    .iter()
                    .any(|e| matches!(e.info.spec, FaultSpec::MediaWear { .. }))
                {
                    return Err(bad(
                        "one is registered already (ctl fault clear ID first)".into()
                    ));
                }
                0
            }
        };
        let mut e = self.lock();
        if e.len() >= MAX_FAULTS {
            return Err(FaultError::Full);
        }
        let info = FaultInfo {
            id: self.next_id.fetch_add(1, Relaxed) + 1,
            spec,
            added_model_ns: now_ns,
            hits: 0,
        };
        e.push(Entry {
            info: info.clone(),
            busy_until: first_ns,
            first_ns,
            last_window: 0,
        });
        self.count.store(e.len(), Relaxed);
        Ok(info)
    }

    /// Remove fault `id`, or all of them: how many were removed.
    pub fn clear(&self, id: Option<u64>) -> Result<usize, FaultError> {
        let mut e = self.lock();
        let before = e.len();
        match id {
            Some(id) => {
                e.retain(|x| x.info.id != id);
                if e.len() == before {
                    return Err(FaultError::NoSuchFault(id));
                }
            }
            None => e.clear(),
        }
        self.count.store(e.len(), Relaxed);
        Ok(before - e.len())
    }

    /// The registered faults and the counters.
    pub fn report(&self) -> FaultReport {
        let active = self.lock().iter().map(|x| x.info.clone()).collect();
        FaultReport {
            active,
            power: Default::default(),
            read_only: false,
            counters: FaultCounters {
                read_errors_injected: self.read_errors.load(Relaxed),
                write_errors_injected: self.write_errors.load(Relaxed),
                stalls_injected: self.stalls.load(Relaxed),
                stalled_commands: self.stalled_commands.load(Relaxed),
                stall_wait_ns: self.stall_wait_ns.load(Relaxed),
                throttled_commands: self.throttled.load(Relaxed),
                throttle_delay_ns: self.throttle_ns.load(Relaxed),
                uncorrectable_reads: self.uncorrectable.load(Relaxed),
                blocks_retired: self.retired.load(Relaxed),
            },
        }
    }

    /// Whether a request of direction `dir` over `ranges` hits a media
    /// fault; if so it is counted (once per request) and the fault's id
    /// returned.
    pub fn media_hit(&self, dir: Media, ranges: &[(u64, u64)]) -> Option<u64> {
        if self.count.load(Relaxed) == 0 {
            return None;
        }
        let mut e = self.lock();
        let hit = e.iter_mut().find(|x| {
            let (o, l) = match (&x.info.spec, dir) {
                (FaultSpec::ReadError { offset, length }, Media::Read)
                | (FaultSpec::WriteError { offset, length }, Media::Write) => (*offset, *length),
                _ => return false,
            };
            ranges
                .iter()
                .any(|&(ro, rl)| rl > 0 && overlaps(ro, rl, o, l))
        })?;
        hit.info.hits += 1;
        match dir {
            Media::Read => &self.read_errors,
            Media::Write => &self.write_errors,
        }
        .fetch_add(1, Relaxed);
        Some(hit.info.id)
    }

    /// A command moving `bytes` that the drive finishes at `done_ns` (drive
    /// time), having arrived at `now_ns`: when it finishes under the
    /// throttles active at its arrival (each a pipe of its rate that
    /// commands pass one after the other), if that is later. Counted.
    pub fn throttle(&self, now_ns: u64, done_ns: u64, bytes: u64) -> Option<u64> {
        if self.count.load(Relaxed) == 0 || bytes == 0 {
            return None;
        }
        let mut e = self.lock();
        let mut end = done_ns;
        for x in e.iter_mut() {
            let FaultSpec::Throttle { mb_s, for_ms, .. } = x.info.spec else {
                continue;
            };
            let active = now_ns >= x.first_ns
                && for_ms.is_none_or(|f| now_ns < x.first_ns.saturating_add(f * 1_000_000));
            if !active {
                continue;
            }
            // bytes / (mb_s · 10^6 B/s), in ns.
            let pass =
                (u128::from(bytes) * 1000 / u128::from(mb_s)).min(u128::from(u64::MAX)) as u64;
            let t = x.busy_until.max(now_ns).saturating_add(pass);
            x.busy_until = t;
            if t > done_ns {
                x.info.hits += 1;
            }
            end = end.max(t);
        }
        (end > done_ns).then(|| {
            self.throttled.fetch_add(1, Relaxed);
            self.throttle_ns.fetch_add(end - done_ns, Relaxed);
            end
        })
    }

    /// The media-wear fault, if one is registered: its id, acceleration and
    /// added data age (ns).
    pub fn media_wear(&self) -> Option<(u64, f64, u64)> {
        if self.count.load(Relaxed) == 0 {
            return None;
        }
        self.lock().iter().find_map(|x| match x.info.spec {
            FaultSpec::MediaWear {
                acceleration,
                retention_days,
            } => Some((
                x.info.id,
                acceleration,
                (retention_days * 86_400e9).min(u64::MAX as f64) as u64,
            )),
            _ => None,
        })
    }

    /// Count a hit of fault `id` (a read media-wear failed, blocks a fault
    /// retired): `reads` uncorrectable reads, `blocks` retired.
    pub fn count_media(&self, id: Option<u64>, reads: u64, blocks: u64) {
        if let Some(id) = id
            && let Some(x) = self.lock().iter_mut().find(|x| x.info.id == id)
        {
            x.info.hits += reads + blocks;
        }
        self.uncorrectable.fetch_add(reads, Relaxed);
        self.retired.fetch_add(blocks, Relaxed);
    }

    /// If a command arriving at drive time `now_ns` falls in a stall: when
    /// the stall ends (the latest end if several overlap). Counted.
    pub fn stall_until(&self, now_ns: u64) -> Option<u64> {
        if self.count.load(Relaxed) == 0 {
            return None;
        }
        let mut e = self.lock();
        let mut until = None::<u64>;
        for x in e.iter_mut() {
            let FaultSpec::Stall { ms, every_ms, .. } = x.info.spec else {
                continue;
            };
            let len = ms * 1_000_000;
            if now_ns < x.first_ns {
                continue;
            }
            let since = now_ns - x.first_ns;
            let (window, start) = match every_ms {
                Some(p) => {
                    let p = p * 1_000_000;
                    (since / p, x.first_ns + since / p * p)
                }
                None => (0, x.first_ns),
            };
            let end = start.saturating_add(len);
            if now_ns >= end {
                continue;
            }
            if x.last_window != window + 1 {
                x.last_window = window + 1;
                x.info.hits += 1;
                self.stalls.fetch_add(1, Relaxed);
            }
            until = Some(until.map_or(end, |u| u.max(end)));
        }
        if let Some(u) = until {
            self.stalled_commands.fetch_add(1, Relaxed);
            self.stall_wait_ns.fetch_add(u - now_ns, Relaxed);
        }
        until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: u64 = 1 << 30;

    fn read_error(offset: u64, length: u64) -> FaultSpec {
        FaultSpec::ReadError { offset, length }
    }

    #[test]
    fn media_faults_hit_exactly_their_range_and_direction() {
        let f = Faults::default();
        assert_eq!(f.media_hit(Media::Read, &[(0, CAP)]), None);
        let id = f.add(read_error(4096, 512), CAP, 0).unwrap().id;
        // The sectors just before and after are clean.
        assert_eq!(f.media_hit(Media::Read, &[(0, 4096)]), None);
        assert_eq!(f.media_hit(Media::Read, &[(4608, 4096)]), None);
        assert_eq!(f.media_hit(Media::Read, &[(4096, 512)]), Some(id));
        assert_eq!(f.media_hit(Media::Read, &[(0, 8192)]), Some(id));
        // A read error does not fail writes.
        assert_eq!(f.media_hit(Media::Write, &[(4096, 512)]), None);
        // A zero-length range touches nothing.
        assert_eq!(f.media_hit(Media::Read, &[(4096, 0)]), None);
        let w = f
            .add(
                FaultSpec::WriteError {
                    offset: 0,
                    length: 512,
                },
                CAP,
                0,
            )
            .unwrap()
            .id;
        assert_eq!(
            f.media_hit(Media::Write, &[(1 << 20, 512), (0, 512)]),
            Some(w)
        );
        let r = f.report();
        assert_eq!(r.counters.read_errors_injected, 2);
        assert_eq!(r.counters.write_errors_injected, 1);
        assert_eq!(r.active[0].hits, 2);
        assert_eq!(f.clear(Some(id)), Ok(1));
        assert_eq!(f.media_hit(Media::Read, &[(4096, 512)]), None);
        assert_eq!(f.clear(Some(id)), Err(FaultError::NoSuchFault(id)));
        assert_eq!(f.clear(None), Ok(1));
        // Counters only grow.
        assert_eq!(f.report().counters.read_errors_injected, 2);
    }

    #[test]
    fn hostile_faults_are_refused_with_a_reason() {
        let f = Faults::default();
        for spec in [
            read_error(CAP, 512),
            read_error(CAP - 512, 1024),
            read_error(0, 0),
            read_error(1, 512),
            read_error(0, 100),
            read_error(u64::MAX - 511, 512),
        ] {
            let e = f.add(spec.clone(), CAP, 0).unwrap_err();
            assert!(matches!(e, FaultError::BadRange { .. }), "{spec:?}: {e}");
        }
        let stall = |ms, every_ms, after_ms| FaultSpec::Stall {
            ms,
            every_ms,
            after_ms,
        };
        for spec in [
            stall(0, None, None),
            stall(MAX_STALL_MS + 1, None, None),
            stall(10, Some(10), None),
            stall(10, Some(u64::MAX), None),
            stall(10, None, Some(u64::MAX)),
            stall(10, Some(100), Some(5)),
        ] {
            let e = f.add(spec.clone(), CAP, 0).unwrap_err();
            assert!(matches!(e, FaultError::BadStall(_)), "{spec:?}: {e}");
        }
        for i in 0..MAX_FAULTS as u64 {
            f.add(read_error(i * 512, 512), CAP, 0).unwrap();
        }
        assert_eq!(f.add(read_error(0, 512), CAP, 0), Err(FaultError::Full));
        assert_eq!(f.report().active.len(), MAX_FAULTS);
    }

    #[test]
    fn stalls_hold_commands_in_their_windows_only() {
        const MS: u64 = 1_000_000;
        let f = Faults::default();
        // Once, 5 ms long, 10 ms after t = 100 ms.
        f.add(
            FaultSpec::Stall {
                ms: 5,
                every_ms: None,
                after_ms: Some(10),
            },
            CAP,
            100 * MS,
        )
        .unwrap();
        assert_eq!(f.stall_until(109 * MS), None);
        assert_eq!(f.stall_until(110 * MS), Some(115 * MS));
        assert_eq!(f.stall_until(114 * MS), Some(115 * MS));
        assert_eq!(f.stall_until(115 * MS), None);
        assert_eq!(f.stall_until(500 * MS), None);
        let c = f.report().counters;
        assert_eq!((c.stalls_injected, c.stalled_commands), (1, 2));
        assert_eq!(c.stall_wait_ns, 6 * MS);
        f.clear(None).unwrap();
        // 2 ms every 10 ms from t = 0: windows [10, 12), [20, 22), ...
        f.add(
            FaultSpec::Stall {
                ms: 2,
                every_ms: Some(10),
                after_ms: None,
            },
            CAP,
            0,
        )
        .unwrap();
        assert_eq!(f.stall_until(5 * MS), None);
        assert_eq!(f.stall_until(11 * MS), Some(12 * MS));
        assert_eq!(f.stall_until(12 * MS), None);
        assert_eq!(f.stall_until(31 * MS), Some(32 * MS));
        assert_eq!(f.stall_until(31 * MS + 1), Some(32 * MS));
        let r = f.report();
        assert_eq!(r.counters.stalls_injected, 3);
        assert_eq!(r.active[0].hits, 2);
    }
}
