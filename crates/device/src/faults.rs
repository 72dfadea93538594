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
//!
//! Faults live in memory only: a restart of the daemon starts without any.
//! The registry is bounded ([`MAX_FAULTS`]) and every request to add one
//! is checked against the drive ([`FaultError`]).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::SECTOR;

/// Most faults registered at once.
pub const MAX_FAULTS: usize = 64;
/// Longest stall, ms of drive time.
pub const MAX_STALL_MS: u64 = 60_000;
/// Longest period or delay of a stall, ms of drive time (one day).
pub const MAX_PERIOD_MS: u64 = 86_400_000;

/// A fault to add.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
}

impl FaultSpec {
    /// The kind's name as `ctl fault add` spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            FaultSpec::ReadError { .. } => "read-error",
            FaultSpec::WriteError { .. } => "write-error",
            FaultSpec::Stall { .. } => "stall",
        }
    }
}

/// Why a fault was not added or cleared; one line each.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
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
    /// The registry is full.
    #[error("{MAX_FAULTS} faults are registered already: clear some first (ctl fault clear [ID])")]
    Full,
    /// No fault has this id.
    #[error("no fault with id {0} (ctl fault list shows them)")]
    NoSuchFault(u64),
}

/// One registered fault, as `ctl fault list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultInfo {
    /// Its id (for `ctl fault clear ID`); ids are never reused.
    pub id: u64,
    /// What it is.
    pub spec: FaultSpec,
    /// Drive time it was added at, ns.
    pub added_model_ns: u64,
    /// Requests it failed (media errors) or stalls that held a command.
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
}

/// The faults registered now and what they did (`ctl fault list`, and the
/// `faults` part of `ctl stats`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
                    (Some(e), None) => now_ns.saturating_add(e * 1_000_000),
                    (None, Some(a)) if *a > MAX_PERIOD_MS => {
                        return Err(FaultError::BadStall(format!(
                            "--after-ms {a} must be at most {MAX_PERIOD_MS}"
                        )));
                    }
                    (None, a) => now_ns.saturating_add(a.unwrap_or(0) * 1_000_000),
                }
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
