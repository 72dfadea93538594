//! The drive itself: its profile and what it shows (topology, serial), the
//! store that holds its bytes, the model behind one lock with the state
//! that must change in the model's order, and the clocks.
//!
//! Time: the daemon clock is `CLOCK_MONOTONIC` minus the daemon's start.
//! The model's clock is the daemon clock divided by the time scale `K`
//! ([`TimeScale`], 1 unless `serve --time-scale` dilates time) plus an
//! offset that grows when `precondition` or `idle` ages the drive in model
//! time, so a guest never waits for the hours of simulated writes a
//! precondition represents. The drive's clock never goes back: the offset
//! only grows, and is bounded ([`MAX_DRIVE_NS`]).

use std::sync::{Mutex, MutexGuard, OnceLock};

use log::error;
use vssd_common::clock::TimeScale;
use vssd_model::Ssd;
use vssd_profile::{Profile, ReadAfterTrim};

use crate::completion;
use crate::error::DeviceError;
use crate::faults::MediaState;
use crate::power::{Audit, PowerState};
use crate::store::Store;
use crate::topology::{SECTOR, Topology};

pub use vssd_common::clock::MAX_DRIVE_NS;

/// The model's clock against the daemon's, and the model's order of requests.
#[derive(Debug, Default)]
pub(crate) struct ModelClock {
    /// model time = daemon time / K + offset.
    offset_ns: u64,
    /// Model time of the latest request submitted (requests reach the
    /// model in lock order, which two queues' threads can make differ
    /// from the order of their arrival times by a few µs: the model takes
    /// the later time for both, and the trace records what it took).
    last_ns: u64,
    /// Requests submitted to the model (the trace's order among equal times).
    seq: u64,
}

impl ModelClock {
    /// The offset: drive time the drive lived through without the daemon's clock.
    pub fn offset_ns(&self) -> u64 {
        self.offset_ns
    }

    /// Model time of the latest request submitted.
    pub fn last_ns(&self) -> u64 {
        self.last_ns
    }

    /// Take a request at drive time `now` (no earlier than the last):
    /// its time and place in the model's order.
    pub fn take(&mut self, now: u64) -> (u64, u64) {
        self.last_ns = now;
        self.seq += 1;
        (now, self.seq)
    }

    /// The drive lives through `ns` more than the daemon's clock says.
    pub fn advance(&mut self, ns: u64) {
        self.offset_ns = self.offset_ns.saturating_add(ns);
    }

    /// The offset is at least `lag`.
    pub fn catch_up(&mut self, lag: u64) {
        self.offset_ns = self.offset_ns.max(lag);
    }
}

/// Everything under the model lock: what must change in the model's order.
pub(crate) struct Core {
    /// The FTL and its timing.
    pub ssd: Ssd,
    /// The model's clock.
    pub clock: ModelClock,
    /// The power state.
    pub power: PowerState,
    /// The writes a cut would lose.
    pub audit: Audit,
    /// What the wear models left.
    pub media: MediaState,
}

/// The drive: what it is, its bytes, its model, its clocks.
pub(crate) struct Drive {
    profile: Profile,
    topology: Topology,
    serial: [u8; 20],
    read_after_trim: ReadAfterTrim,
    store: Store,
    core: Mutex<Core>,
    /// `CLOCK_MONOTONIC` at open: the daemon clock's zero.
    base_ns: u64,
    /// Daemon clock ↔ model clock (the only place they are converted).
    scale: TimeScale,
    /// Why the drive stopped, once it has.
    stopped: OnceLock<String>,
}

/// The serial number a drive of `profile` reports: its identity's serial,
/// truncated to the 20 ASCII characters SATA and NVMe give it, zero-padded.
pub fn serial_for(profile: &Profile) -> [u8; 20] {
    let id = profile.identity();
    let mut out = [0u8; 20];
    let n = id.serial.len().min(20);
    out[..n].copy_from_slice(&id.serial.as_bytes()[..n]);
    out
}

impl Drive {
    /// A drive of `profile` on `store` with the model `ssd` (fresh or
    /// loaded), its wear draws from `seed`, its clock `scale` times slower
    /// than the daemon's.
    pub fn new(profile: Profile, store: Store, ssd: Ssd, seed: u64, scale: TimeScale) -> Drive {
        Drive {
            serial: serial_for(&profile),
            topology: Topology::of(&profile),
            read_after_trim: profile.identity().read_after_trim,
            profile,
            store,
            core: Mutex::new(Core {
                media: MediaState::new(seed, ssd.erases()),
                ssd,
                clock: ModelClock::default(),
                power: PowerState::default(),
                audit: Audit::default(),
            }),
            base_ns: completion::monotonic_ns(),
            scale,
            stopped: OnceLock::new(),
        }
    }

    /// The drive's profile.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Block sizes and limits.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The serial number (20 ASCII characters).
    pub fn serial(&self) -> [u8; 20] {
        self.serial
    }

    /// What a read of trimmed data returns.
    pub fn read_after_trim(&self) -> ReadAfterTrim {
        self.read_after_trim
    }

    /// The bytes.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Exported bytes.
    pub fn capacity(&self) -> u64 {
        self.topology.capacity
    }

    /// The model lock. Only a panic inside the model can poison it: its
    /// state may be half-updated, so the drive stops.
    pub fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|e| {
            self.stop("a thread panicked while updating the drive model".into());
            e.into_inner()
        })
    }

    /// Stop the drive: every later request fails, its state is not saved.
    pub fn stop(&self, why: String) {
        if self.stopped.set(why.clone()).is_ok() {
            error!(
                "drive stopped, all further I/O fails and its FTL state will not be saved: {why}"
            );
        }
    }

    /// Why the drive stopped, if it did.
    pub fn stopped(&self) -> Option<&str> {
        self.stopped.get().map(String::as_str)
    }

    /// Fails once the drive has stopped.
    pub fn running(&self) -> Result<(), DeviceError> {
        match self.stopped() {
            Some(why) => Err(DeviceError::Stopped(why.into())),
            None => Ok(()),
        }
    }

    /// Daemon clock: ns since the device was opened.
    pub fn now_ns(&self) -> u64 {
        completion::monotonic_ns().saturating_sub(self.base_ns)
    }

    /// The time dilation.
    pub fn scale(&self) -> TimeScale {
        self.scale
    }

    /// Daemon time → model time, without the offset.
    pub fn model_clock(&self, daemon_ns: u64) -> u64 {
        self.scale.to_model(daemon_ns)
    }

    /// Drive time now (model clock with the offset).
    pub fn now(&self, core: &Core) -> u64 {
        self.model_clock(self.now_ns()) + core.clock.offset_ns()
    }

    /// Daemon clock → absolute `CLOCK_MONOTONIC` ns (for timer deadlines).
    pub fn to_monotonic(&self, t: u64) -> u64 {
        t.saturating_add(self.base_ns)
    }

    /// `offset..offset + len` is inside the drive and sector-aligned.
    pub fn check(&self, offset: u64, len: u64) -> Result<(), DeviceError> {
        let ok = offset.is_multiple_of(SECTOR)
            && len.is_multiple_of(SECTOR)
            && offset
                .checked_add(len)
                .is_some_and(|end| end <= self.capacity());
        if ok {
            Ok(())
        } else {
            Err(DeviceError::BadRange { offset, len })
        }
    }
}
