//! One emulated SSD: a request goes to the model (when does it complete?)
//! and to the store (the bytes), and comes back as a [`Pending`] completion
//! carrying its status and modelled completion time. Frontends
//! (vhost-user-blk, NBD) deliver it at that time ([`completion`]) and call
//! [`Pending::complete`]; they never touch the device's internals.
//!
//! The interface every frontend uses:
//! - [`Device::register_frontend`] once per listener, then
//!   [`Frontend::connect`] per client connection: the device's accounting
//!   (per frontend and per connection counters, the TRIM audit) follows;
//! - [`Device::topology`]: block sizes and limits, mapped by each frontend
//!   to its own wire format;
//! - [`Device::read`], [`Device::write`], [`Device::flush`],
//!   [`Device::discard`], [`Device::write_zeroes`], and [`Device::begin`]
//!   for requests answered without the drive (identify, invalid requests);
//!   each returns a [`Pending`] whose [`Status`] the frontend maps to its
//!   protocol ([`request`]).
//!
//! Inside, a [`Device`] is five parts, each private to its module:
//! - the drive ([`drive`]): profile, store, the model behind one lock, the clocks;
//! - the power domain ([`power`]): power state, cuts, the write audit;
//! - the fault injector ([`faults`]): injected faults, the NAND's wear models;
//! - the accounting ([`accounting`]): request statistics, TRIM log, samples;
//! - the state file ([`state`]): saved FTL state and how it relates to the data.
//!
//! A request goes through one pipeline ([`pipeline`]): admit (power,
//! faults, bounds) → model → settle (audit, completion), under one hold of
//! the model lock, with nothing calling back into the device; then its
//! data moves in the store ([`io`]).
//!
//! Time: latencies and lateness are recorded in the model's time, so every
//! figure the drive reports is the drive's ([`drive`] says how the daemon's
//! and the model's clocks relate).
//!
//! Failure: if the model reports that its own state is damaged (an internal
//! invariant failed), the drive stops: every later request fails with
//! [`Status::Stopped`], and the FTL state is not saved over the last good one.

mod accounting;
pub mod capture;
pub mod completion;
mod drive;
mod error;
pub mod faults;
pub mod files;
pub mod hist;
mod io;
mod maintenance;
mod op;
mod pipeline;
pub mod power;
pub mod report;
pub mod request;
pub mod smart;
mod state;
pub mod stats;
pub mod store;
pub mod topology;
pub mod trimlog;

use std::path::PathBuf;

use vssd_common::clock::TimeScale;
use vssd_profile::Profile;

use self::accounting::Accounting;
use self::drive::Drive;
use self::faults::FaultInjector;
use self::power::{Armed, CutReport, PowerDomain};
use self::state::StateFile;
use self::store::Store;

pub use self::drive::{MAX_DRIVE_NS, serial_for};
pub use self::error::{DeviceError, PowerError};
pub use self::faults::MAX_UNCORRECTABLE;
pub use self::maintenance::{MAX_IDLE_NS, PRECONDITION_CHUNK, PreconditionOutcome};
pub use self::request::{Connection, OpKind, Pending, Status};
pub use self::state::StateOrigin;
pub use self::stats::{DepthReport, Frontend, Stats, StatsReport, TrimOutcome};
pub use self::topology::{SECTOR, Topology};

/// Where the drive's data lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataLocation {
    /// A sparse file (created if missing).
    File(PathBuf),
    /// Memory only; lost on exit.
    Memory,
}

/// How to open a device.
#[derive(Debug, Clone)]
pub struct DeviceOptions {
    /// The drive.
    pub profile: Profile,
    /// Data store.
    pub data: DataLocation,
    /// FTL state file: loaded at open if present, written by [`Device::save_state`].
    pub state_file: Option<PathBuf>,
    /// Seed for the model's randomness.
    pub seed: u64,
    /// Time dilation: the model's clock runs `K` times slower than the
    /// daemon's (`K = 1`: none).
    pub time_scale: TimeScale,
}

/// What `ctl power-cut` did: the cut's report, or the cut it armed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PowerCutResult {
    /// The cut, if it happened at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<CutReport>,
    /// The cut waiting for its moment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub armed: Option<Armed>,
}

/// Warnings logged in full before they are only counted.
const WARN_LIMIT: u64 = 20;

/// One emulated drive, shared by all frontends, their queues and the control socket.
pub struct Device {
    drive: Drive,
    power: PowerDomain,
    faults: FaultInjector,
    accounting: Accounting,
    state: StateFile,
}

/// Resident memory of this process (`/proc/self/statm`), bytes; 0 if unknown.
pub fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

impl Device {
    /// Open the store and the model (loading saved FTL state if there is some).
    pub fn open(opts: DeviceOptions) -> Result<Device, DeviceError> {
        let capacity = opts.profile.geometry.exported_capacity.0;
        let (ssd, loaded) = StateFile::load(opts.state_file.as_deref(), &opts.profile, opts.seed)?;
        debug_assert_eq!(ssd.capacity(), capacity);
        let store = match &opts.data {
            DataLocation::File(p) => Store::open_file(p, capacity)?,
            DataLocation::Memory => Store::memory(capacity)?,
        };
        let state = StateFile::open(opts.state_file, loaded, &store, capacity)?;
        Ok(Device {
            power: PowerDomain::new(&opts.profile, opts.seed),
            faults: FaultInjector::new(&opts.profile),
            accounting: Accounting::new(opts.time_scale),
            drive: Drive::new(opts.profile, store, ssd, opts.seed, opts.time_scale),
            state,
        })
    }

    /// The drive's profile.
    pub fn profile(&self) -> &Profile {
        self.drive.profile()
    }

    /// Block sizes and limits, for frontends to advertise.
    pub fn topology(&self) -> &Topology {
        self.drive.topology()
    }

    /// Exported bytes.
    pub fn capacity(&self) -> u64 {
        self.drive.capacity()
    }

    /// The drive's serial number (20 ASCII characters).
    pub fn serial(&self) -> [u8; 20] {
        self.drive.serial()
    }

    /// The store (for its path and allocation figures).
    pub fn store(&self) -> &Store {
        self.drive.store()
    }

    /// Why the drive stopped, if it did.
    pub fn stopped(&self) -> Option<&str> {
        self.drive.stopped()
    }

    /// Daemon clock: ns since the device was opened.
    pub fn now_ns(&self) -> u64 {
        self.drive.now_ns()
    }

    /// The time dilation: the model's clock runs `K` times slower than
    /// the daemon's.
    pub fn time_scale(&self) -> TimeScale {
        self.drive.scale()
    }

    /// Daemon clock → absolute `CLOCK_MONOTONIC` ns (for timer deadlines).
    pub fn to_monotonic(&self, t: u64) -> u64 {
        self.drive.to_monotonic(t)
    }

    /// Start recording every request to a new trace file at `path` (mode
    /// 0600; it must not exist), at most `limit` bytes.
    pub fn trace_start(
        &self,
        path: &std::path::Path,
        limit: u64,
    ) -> Result<(), capture::CaptureError> {
        self.stats().capture.start(
            path,
            limit,
            self.now_ns(),
            capture::DriveInfo {
                capacity: self.capacity(),
                logical_block: self.topology().logical_block as u32,
                scale: self.time_scale(),
                profile: &self.profile().name,
            },
        )
    }

    /// Whether a trace is being taken (one relaxed load): a frontend then
    /// notes when it received each request ([`Pending::set_received`]).
    #[inline]
    pub fn tracing(&self) -> bool {
        self.stats().capture.on()
    }

    /// Stop the trace (if any) and close its file.
    pub fn trace_stop(&self) -> capture::TraceStatus {
        self.stats().capture.stop()
    }

    /// The current or last trace.
    pub fn trace_status(&self) -> capture::TraceStatus {
        self.stats()
            .capture
            .status(self.time_scale(), self.now_ns())
    }
}

#[cfg(test)]
mod power_tests;
#[cfg(test)]
mod tests;
