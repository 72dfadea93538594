//! One emulated SSD: a request goes to the model (when does it complete?)
//! and to the store (the bytes), and comes back as a [`Pending`] completion
//! carrying its status and modelled completion time. Frontends
//! (vhost-user-blk, NBD) deliver it at that time ([`scheduler`]) and call
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
//!   protocol.
//!
//! Time: the daemon clock is `CLOCK_MONOTONIC` minus the daemon's start.
//! The model's clock is the daemon clock divided by the time scale `K`
//! ([`TimeScale`], 1 unless `serve --time-scale` dilates time) plus an
//! offset that grows when `precondition` ages the drive in model time, so
//! a guest never waits for the hours of simulated writes a precondition
//! represents. Completion times come back to the daemon clock (× `K`);
//! the accounting ([`Stats`]) records latencies and lateness in the
//! model's time, so every figure the drive reports is the drive's.
//!
//! Failure: if the model reports that its own state is damaged (an internal
//! invariant failed), the drive stops: every later request fails with
//! [`Status::Stopped`], and the FTL state is not saved over the last good one.

pub mod capture;
pub mod faults;
pub mod files;
pub mod hist;
pub mod media;
pub mod power;
pub mod report;
pub mod scheduler;
pub mod smart;
mod state;
pub mod stats;
pub mod store;
pub mod topology;
pub mod trimlog;

use std::collections::{BTreeSet, VecDeque};
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, RwLock, Weak};

use log::{error, warn};
use thiserror::Error;
use vm_memory::VolatileSlice;

use vssd_common::clock::TimeScale;
use vssd_model::{
    Counters, ModelError, Op, Payload, PersistError, Precondition, PreconditionRun, Request, Ssd,
};
use vssd_profile::{EndOfLife, Profile, ReadAfterTrim};

use self::faults::{FaultError, FaultInfo, FaultReport, FaultSpec, Faults, Media};
use self::files::FileError;
use self::power::{Armed, Classes, CutReport, CutTrigger, PowerLog, PowerReport, Record};
pub use self::state::StateOrigin;
use self::state::dirty_marker;
pub use self::stats::{
    Connection, DepthReport, Frontend, OpKind, Pending, Stats, StatsReport, Status, TrimOutcome,
};
use self::stats::{DriveReport, WindowReport};
use self::store::{Store, StoreError};
pub use self::topology::{SECTOR, Topology};
use self::trimlog::{TrimLog, TrimRecord};

/// Errors of the device layer.
#[derive(Debug, Error)]
pub enum DeviceError {
    /// Opening the backing store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A state file or directory is unusable.
    #[error(transparent)]
    File(#[from] FileError),
    /// The saved FTL state could not be loaded; it is never silently replaced.
    #[error(
        "drive state file {path} cannot be loaded (it is kept as is: move it away \
         to start with a fresh drive, or use the profile/capacity it was saved with)"
    )]
    StateLoad {
        /// The state file.
        path: PathBuf,
        /// Why.
        #[source]
        source: PersistError,
    },
    /// Writing the FTL state failed.
    #[error("cannot save drive state to {path}")]
    StateSave {
        /// The state file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The request is outside the drive or misaligned.
    #[error("request {offset}+{len} is outside the drive or not sector-aligned")]
    BadRange {
        /// Byte offset.
        offset: u64,
        /// Byte length.
        len: u64,
    },
    /// The model refused the request.
    #[error("the drive model refused the request")]
    Model(#[from] ModelError),
    /// Reading or writing the data failed.
    #[error("data I/O failed")]
    Io(#[source] io::Error),
    /// The drive stopped after an internal failure.
    #[error("the drive has stopped: {0}")]
    Stopped(String),
    /// The drive is worn out and read-only (`[wear] end_of_life`).
    #[error("the drive is worn out (rated P/E cycles reached) and read-only")]
    ReadOnly,
    /// The drive's power is off (`ctl power-cut`) until `ctl power-on`.
    #[error("the drive's power is off (vssd ctl power-on)")]
    PoweredOff,
    /// An injected media fault (`ctl fault add`) failed the request; the
    /// error is reported at the request's modelled completion time.
    #[error("injected media error (fault {fault})")]
    Media {
        /// The fault's id.
        fault: u64,
        /// When the drive reports the error (daemon clock).
        due: u64,
    },
}

impl DeviceError {
    /// The protocol-independent status a frontend reports for this error.
    pub fn status(&self) -> Status {
        match self {
            DeviceError::BadRange { .. } => Status::Invalid,
            DeviceError::Model(e) if model_error_is_request_error(e) => Status::Invalid,
            DeviceError::Model(_) | DeviceError::Stopped(_) | DeviceError::PoweredOff => {
                Status::Stopped
            }
            DeviceError::Io(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOSPC | libc::EFBIG | libc::EDQUOT)
                ) =>
            {
                Status::NoSpace
            }
            _ => Status::IoError,
        }
    }
}

/// Whether the model refused the request itself (bad range), as opposed to
/// failing inside (its state is then not to be trusted).
fn model_error_is_request_error(e: &ModelError) -> bool {
    match e {
        ModelError::OutOfRange { .. } | ModelError::Misaligned { .. } => true,
        ModelError::Internal { .. } => false,
    }
}

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

struct ModelState {
    ssd: Ssd,
    /// model time = daemon time / K + offset.
    offset_ns: u64,
    /// Model time of the latest request submitted (requests reach the
    /// model in lock order, which two queues' threads can make differ
    /// from the order of their arrival times by a few µs: the model takes
    /// the later time for both, and the trace records what it took).
    last_ns: u64,
    /// Requests submitted to the model (the trace's order among equal times).
    seq: u64,
    /// Writes not yet durable, the power state (under the same lock, so
    /// in the model's order).
    power: PowerLog,
    /// Draws of the media-wear models, in the model's order.
    media_rng: vssd_common::rng::Rng,
    /// Erases already looked at by the bad-block model.
    erases_seen: u64,
    /// Mapping units a media-wear read found uncorrectable: reads of them
    /// fail until they are written or trimmed (bounded, [`MAX_UNCORRECTABLE`]).
    uncorrectable: BTreeSet<u64>,
}

/// Most uncorrectable units remembered; beyond, a failed read is not sticky.
pub const MAX_UNCORRECTABLE: usize = 1 << 16;

/// Why a power request was refused; one line each.
#[derive(Debug, Error)]
pub enum PowerError {
    /// A cut while the power is off.
    #[error("the drive's power is off already (vssd ctl power-on)")]
    AlreadyOff,
    /// Power-on while it is on.
    #[error("the drive's power is on")]
    AlreadyOn,
    /// An absurd trigger.
    #[error("{0}")]
    BadTrigger(String),
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

type PowerHook = Box<dyn Fn() + Send + Sync>;

/// Wall time the model lock is held at most per precondition chunk.
pub const PRECONDITION_CHUNK: std::time::Duration = std::time::Duration::from_millis(2);

/// What a precondition did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreconditionOutcome {
    /// Model time it took, ns.
    pub model_ns: u64,
    /// Stopped early because the caller asked.
    pub cancelled: bool,
}

/// One counter sample for the recent write-amplification window.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at_ns: u64,
    host_written: u64,
    nand_programmed: u64,
}

/// Samples kept (one per [`Device::sample`] call, normally each second).
const SAMPLES_KEPT: usize = 61;

/// Warnings logged in full before they are only counted.
const WARN_LIMIT: u64 = 20;

/// One emulated drive, shared by all frontends, their queues and the control socket.
pub struct Device {
    profile: Profile,
    topology: Topology,
    model: Mutex<ModelState>,
    store: Store,
    base_ns: u64,
    /// Daemon clock ↔ model clock (the only place they are converted).
    scale: TimeScale,
    serial: [u8; 20],
    state_file: Option<PathBuf>,
    stats: Arc<Stats>,
    stopped: OnceLock<String>,
    samples: Mutex<VecDeque<Sample>>,
    io_warnings: AtomicU64,
    trim_log: TrimLog,
    /// Whether the FTL state describes the data in the store: block status
    /// is then the FTL's alone. False after a start whose saved state is
    /// older than the data (a crash, or a backing file without state): the
    /// store's allocated extents then count as data too, so no range that
    /// holds data is ever reported as a hole. A secure erase makes it true.
    ftl_describes_data: AtomicBool,
    origin: StateOrigin,
    read_after_trim: ReadAfterTrim,
    faults: Faults,
    /// Power is on (a quick test for frontends; the truth is `power.off`).
    powered: AtomicBool,
    /// A cut is decided and waits to be carried out by [`Self::finish_cut`].
    cut_requested: AtomicBool,
    /// Requests hold it shared from submission to the end of their data
    /// I/O; a cut takes it exclusively, so it undoes writes whose data is
    /// in the store.
    gate: RwLock<()>,
    /// Called when the power goes (frontends close their connections).
    power_hooks: Mutex<Vec<PowerHook>>,
    /// Writes are audited for power loss (the preset has no protection).
    track: bool,
    /// The preset's failure classes of a cut (Zheng et al.).
    classes: Classes,
    /// Seed of the cuts' random choices (the device's seed).
    seed: u64,
    /// The NAND's wear models (`fault add media-wear`).
    media: media::MediaModel,
    /// Wakes the power timer ([`Device::spawn_power_timer`]) when a cut is
    /// armed or an automatic power-on is due.
    power_timer: Arc<(Mutex<u64>, Condvar)>,
    /// Worn out with `end_of_life = "read-only"`: writes fail.
    read_only: AtomicBool,
    flush_lies: bool,
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

/// The 20-byte serial virtio-blk's GET_ID returns: the profile's
/// identity serial (`[identity] serial`, or the default derived from the
/// profile's name and capacity), NUL-padded as virtio-blk specifies for a
/// serial shorter than 20 bytes.
pub fn serial_for(profile: &Profile) -> [u8; 20] {
    let id = profile.identity();
    let mut out = [0u8; 20];
    let n = id.serial.len().min(20);
    out[..n].copy_from_slice(&id.serial.as_bytes()[..n]);
    out
}

impl Device {
    /// Open the store and the model (loading saved FTL state if there is some).
    pub fn open(opts: DeviceOptions) -> Result<Device, DeviceError> {
        let capacity = opts.profile.geometry.exported_capacity.0;
        let (ssd, loaded) = match &opts.state_file {
            Some(path) if path.symlink_metadata().is_ok() => {
                let f = files::open_private_ro(path)?;
                let ssd = Ssd::load(&opts.profile, BufReader::new(f)).map_err(|source| {
                    DeviceError::StateLoad {
                        path: path.clone(),
                        source,
                    }
                })?;
                (ssd, true)
            }
            _ => (Ssd::new(&opts.profile, opts.seed), false),
        };
        debug_assert_eq!(ssd.capacity(), capacity);
        let store = match &opts.data {
            DataLocation::File(p) => Store::open_file(p, capacity)?,
            DataLocation::Memory => Store::memory(capacity)?,
        };
        let has_data = || {
            store
                .data_extents(0, capacity, 1)
                .map(|e| e.is_some_and(|e| !e.is_empty()))
                .unwrap_or(true)
        };
        let origin = match &opts.state_file {
            Some(path) if loaded && dirty_marker(path).symlink_metadata().is_err() => {
                StateOrigin::Saved
            }
            _ if loaded || has_data() => StateOrigin::OlderThanData,
            _ => StateOrigin::Fresh,
        };
        if let Some(path) = &opts.state_file {
            // Until a clean exit saves the state again, it is older than
            // the data: a crash from here on is seen at the next start.
            let marker = dirty_marker(path);
            files::write_atomically(&marker, |w| {
                use std::io::Write as _;
                w.write_all(
                    b"vssd is running: the FTL state beside this file is older than the data until a clean exit\n",
                )
            })?;
        }
        log::info!("{}", origin.describe());
        let read_after_trim = opts.profile.identity().read_after_trim;
        let track = !opts.profile.reliability.power_loss_protection;
        let classes = Classes::of(&opts.profile.reliability);
        let media = media::MediaModel::of(&opts.profile);
        let flush_lies = opts.profile.reliability.flush_lies;
        Ok(Device {
            serial: serial_for(&opts.profile),
            topology: Topology::of(&opts.profile),
            profile: opts.profile,
            model: Mutex::new(ModelState {
                erases_seen: ssd.erases(),
                ssd,
                offset_ns: 0,
                last_ns: 0,
                seq: 0,
                power: PowerLog::default(),
                media_rng: vssd_common::rng::Rng::new(vssd_common::rng::derive_seed(&[
                    opts.seed,
                    0x006d_6564_6961, // "media"
                ])),
                uncorrectable: BTreeSet::new(),
            }),
            media,
            store,
            base_ns: scheduler::monotonic_ns(),
            scale: opts.time_scale,
            state_file: opts.state_file,
            stats: Arc::new(Stats::with_scale(opts.time_scale)),
            stopped: OnceLock::new(),
            samples: Mutex::new(VecDeque::with_capacity(SAMPLES_KEPT)),
            io_warnings: AtomicU64::new(0),
            trim_log: TrimLog::default(),
            ftl_describes_data: AtomicBool::new(origin != StateOrigin::OlderThanData),
            origin,
            read_after_trim,
            faults: Faults::default(),
            powered: AtomicBool::new(true),
            cut_requested: AtomicBool::new(false),
            gate: RwLock::new(()),
            power_hooks: Mutex::new(Vec::new()),
            track,
            classes,
            seed: opts.seed,
            power_timer: Arc::new((Mutex::new(0), Condvar::new())),
            flush_lies,
            read_only: AtomicBool::new(false),
        })
    }

    /// Where the FTL state came from at open.
    pub fn state_origin(&self) -> StateOrigin {
        self.origin
    }

    /// The drive's profile.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Block sizes and limits, for frontends to advertise.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Exported bytes.
    pub fn capacity(&self) -> u64 {
        self.topology.capacity
    }

    /// The drive's serial number (20 ASCII characters).
    pub fn serial(&self) -> [u8; 20] {
        self.serial
    }

    /// The store (for its path and allocation figures).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The device's statistics (read-only for frontends: use [`Pending`]).
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Register a frontend (one listener): `kind` (`vhost-user-blk`, `nbd`),
    /// where it listens, and details shown by `ctl stats`.
    pub fn register_frontend(
        &self,
        kind: &'static str,
        name: impl Into<String>,
        info: impl Into<String>,
    ) -> Frontend {
        self.stats.register_frontend(kind, name, info)
    }

    /// Why the drive stopped, if it did.
    pub fn stopped(&self) -> Option<&str> {
        self.stopped.get().map(String::as_str)
    }

    /// Daemon clock: ns since the device was opened.
    pub fn now_ns(&self) -> u64 {
        scheduler::monotonic_ns().saturating_sub(self.base_ns)
    }

    /// The time dilation: the model's clock runs `K` times slower than
    /// the daemon's.
    pub fn time_scale(&self) -> TimeScale {
        self.scale
    }

    /// Daemon time → model time, without the precondition offset.
    fn model_clock(&self, daemon_ns: u64) -> u64 {
        self.scale.to_model(daemon_ns)
    }

    /// Daemon clock → absolute `CLOCK_MONOTONIC` ns (for timer deadlines).
    pub fn to_monotonic(&self, t: u64) -> u64 {
        t.saturating_add(self.base_ns)
    }

    fn stop(&self, why: String) {
        if self.stopped.set(why.clone()).is_ok() {
            error!(
                "drive stopped, all further I/O fails and its FTL state will not be saved: {why}"
            );
        }
    }

    fn lock(&self) -> MutexGuard<'_, ModelState> {
        self.model.lock().unwrap_or_else(|e| {
            // Only a panic inside the model can poison the lock: its state
            // may be half-updated, so the drive stops.
            self.stop("a thread panicked while updating the drive model".into());
            e.into_inner()
        })
    }

    fn check(&self, offset: u64, len: u64) -> Result<(), DeviceError> {
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

    /// Submit requests to the model at one instant; the completion is that
    /// of the last to finish (daemon clock).
    fn submit(&self, p: &Pending, op: Op, ranges: &[(u64, u64)]) -> Result<u64, DeviceError> {
        self.submit_with(p, op, ranges, Payload::Unknown, |_, _, _, _| {}, |_, _| {})
    }

    /// [`Self::submit`], calling `before(ssd, model_now, offset, len)` under
    /// the same lock just before each range is submitted, and
    /// `after(state, (model_now, model_done))` once they all are.
    fn submit_with(
        &self,
        p: &Pending,
        op: Op,
        ranges: &[(u64, u64)],
        payload: Payload,
        mut before: impl FnMut(&Ssd, u64, u64, u64),
        after: impl FnOnce(&mut ModelState, (u64, u64)),
    ) -> Result<u64, DeviceError> {
        if let Some(why) = self.stopped() {
            return Err(DeviceError::Stopped(why.into()));
        }
        for &(o, l) in ranges {
            self.check(o, l)?;
        }
        let mut m = self.lock();
        let model_now = (self.model_clock(p.submit_ns()) + m.offset_ns).max(m.last_ns);
        if m.power.off {
            return Err(DeviceError::PoweredOff);
        }
        if !matches!(op, Op::Read | Op::Flush) && self.read_only.load(Relaxed) {
            return Err(DeviceError::ReadOnly);
        }
        if let Some(Armed::At { model_ns }) = m.power.armed
            && model_now >= model_ns
        {
            self.decide_cut(
                &mut m,
                model_ns,
                "its time came (--after-ms / --at)".to_string(),
            );
            return Err(DeviceError::PoweredOff);
        }
        if let Some(until) = self.faults.stall_until(model_now) {
            m.ssd.hold_until(until);
        }
        if self.track && !m.power.records.is_empty() {
            // What the drive programmed while idle (its buffer, open
            // dpages) is durable from then: settle before this request's
            // programs move the model's "programmed by" time later.
            m.ssd.catch_up(model_now);
            let d = m.ssd.durability();
            m.power.settle(d);
        }
        m.last_ns = model_now;
        m.seq += 1;
        p.submitted(model_now - m.offset_ns, m.seq);
        let mut done = model_now;
        for &(offset, len) in ranges {
            before(&m.ssd, model_now, offset, len);
            let r = m.ssd.submit(
                model_now,
                &Request {
                    op,
                    offset,
                    len,
                    payload,
                },
            );
            match r {
                Ok(c) => done = done.max(c.done_ns),
                Err(e) if model_error_is_request_error(&e) => return Err(e.into()),
                Err(e) => {
                    self.stop(format!("the drive model failed: {e}"));
                    return Err(e.into());
                }
            }
        }
        // A throttle delays the completion the host sees (and the audit's
        // acknowledgement time with it).
        if let Some(t) = self
            .faults
            .throttle(model_now, done, throttled_bytes(op, ranges))
        {
            done = t;
        }
        after(&mut m, (model_now, done));
        self.media_erases(&mut m);
        if self.track {
            let d = m.ssd.durability();
            m.power.settle(d);
            m.power.retire(model_now, PowerLog::keep_ns(&self.classes));
        }
        Ok(self.scale.to_wall(done.saturating_sub(m.offset_ns)))
    }

    /// Turn the outcome of a request into its pending completion.
    fn settle(&self, mut p: Pending, r: Result<u64, DeviceError>) -> Pending {
        match r {
            Ok(due) => p.finish(Status::Ok, due),
            Err(DeviceError::ReadOnly) => {
                log::debug!("{:?} refused: the drive is read-only", p.op());
                p.fail(Status::IoError);
            }
            Err(DeviceError::PoweredOff) => {
                log::debug!("{:?} refused: the power is off", p.op());
                p.fail(Status::Stopped);
            }
            Err(DeviceError::Media { fault, due }) => {
                log::debug!("{:?} failed by injected fault {fault}", p.op());
                p.finish(Status::IoError, due);
            }
            Err(e) => {
                let st = e.status();
                match st {
                    Status::Invalid => log::debug!("{:?} refused: {e}", p.op()),
                    _ => self.warn_io(&p, &e),
                }
                p.fail(st);
            }
        }
        p
    }

    fn warn_io(&self, p: &Pending, e: &DeviceError) {
        let n = self.io_warnings.fetch_add(1, Relaxed) + 1;
        let cause = std::error::Error::source(e)
            .map(|s| format!(": {s}"))
            .unwrap_or_default();
        if n <= WARN_LIMIT {
            warn!("{:?} of {} bytes failed: {e}{cause}", p.op(), p.bytes());
            if n == WARN_LIMIT {
                warn!("further I/O errors are only counted (ctl stats: errors)");
            }
        }
    }

    /// Account a request answered without the drive (e.g. an identify
    /// command), or refused by the frontend's own validation (then
    /// [`Pending::fail`] it). Due at once.
    pub fn begin(&self, conn: &Connection, op: OpKind, bytes: u64) -> Pending {
        conn.begin(op, bytes, self.now_ns())
    }

    /// Read `offset..` into `bufs`.
    pub fn read(&self, conn: &Connection, offset: u64, bufs: &[VolatileSlice<'_>]) -> Pending {
        let len = bufs.iter().map(|b| b.len() as u64).sum();
        let mut p = self.begin(conn, OpKind::Read, len);
        p.set_target(&[(offset, len)], false, false);
        let _gate = self.gate.read().unwrap_or_else(|e| e.into_inner());
        let mut worn = None;
        let r = self
            .submit_with(
                &p,
                Op::Read,
                &[(offset, len)],
                Payload::Unknown,
                |_, _, _, _| {},
                |m, (now, _)| worn = self.media_read(m, offset, len, now),
            )
            .and_then(|due| {
                if let Some(fault) = worn {
                    return Err(DeviceError::Media { fault, due });
                }
                self.media_check(Media::Read, &[(offset, len)], due)?;
                self.store.read(offset, bufs).map_err(DeviceError::Io)?;
                if self.read_after_trim == ReadAfterTrim::Pattern {
                    self.fill_unmapped(offset, len, bufs)?;
                }
                Ok(due)
            });
        drop(_gate);
        self.finish_cut();
        self.settle(p, r)
    }

    /// `read_after_trim = "pattern"`: the unmapped parts of a read (trimmed
    /// or never written, as block status reports them) return the pattern.
    fn fill_unmapped(
        &self,
        offset: u64,
        len: u64,
        bufs: &[VolatileSlice<'_>],
    ) -> Result<(), DeviceError> {
        let mut at = offset;
        for (n, mapped) in self.allocation(offset, len, usize::MAX) {
            if !mapped {
                store::fill_bufs(bufs, offset, at, at + n, ReadAfterTrim::PATTERN_BYTE)
                    .map_err(DeviceError::Io)?;
            }
            at += n;
        }
        Ok(())
    }

    /// Write `bufs` at `offset..`. With `fua` the data is durable (on the
    /// backing file and programmed in the model) before the completion.
    pub fn write(
        &self,
        conn: &Connection,
        offset: u64,
        bufs: &[VolatileSlice<'_>],
        fua: bool,
    ) -> Pending {
        let len = bufs.iter().map(|b| b.len() as u64).sum();
        let mut p = self.begin(conn, OpKind::Write, len);
        p.set_target(&[(offset, len)], fua, false);
        // A data-reducing drive needs to know how compressible the data is.
        let payload = if self.profile.reduction.enabled {
            sample_payload(bufs, len)
        } else {
            Payload::Unknown
        };
        let gate = self.gate.read().unwrap_or_else(|e| e.into_inner());
        let mut cut_during = false;
        let mut media = None;
        // What the write overwrites, read before the model lock is taken
        // (the gate keeps a cut from undoing anything meanwhile).
        let mut undo = self.undo_of(&[(offset, len)]);
        let r = self
            .submit_with(
                &p,
                Op::Write,
                &[(offset, len)],
                payload,
                |_, _, _, _| {},
                |m, at| {
                    // A write an injected fault fails changes nothing to lose.
                    media = self.faults.media_hit(Media::Write, &[(offset, len)]);
                    if media.is_some() {
                        undo.clear();
                    } else {
                        self.rewritten(m, &[(offset, len)]);
                    }
                    cut_during = self.track_write(m, std::mem::take(&mut undo), at);
                },
            )
            .and_then(|due| {
                if let Some(fault) = media {
                    return Err(DeviceError::Media { fault, due });
                }
                self.store.write(offset, bufs).map_err(DeviceError::Io)?;
                if cut_during {
                    // The power went as this write arrived: never acknowledged.
                    return Err(DeviceError::PoweredOff);
                }
                if fua && !self.flush_lies {
                    self.store.sync().map_err(DeviceError::Io)?;
                    let flushed = self.submit(&p, Op::Flush, &[(0, 0)])?;
                    return Ok(due.max(flushed));
                }
                Ok(due)
            });
        drop(gate);
        self.finish_cut();
        self.settle(p, r)
    }

    /// TRIM `(offset, len)` ranges: the data reads as the profile's
    /// `read_after_trim` says afterwards (zeros by default). With `fua` the
    /// zeroing is durable before the completion.
    pub fn discard(&self, conn: &Connection, ranges: &[(u64, u64)], fua: bool) -> Pending {
        let len = ranges.iter().map(|r| r.1).sum();
        let mut p = self.begin(conn, OpKind::Discard, len);
        p.set_target(ranges, fua, false);
        let gate = self.gate.read().unwrap_or_else(|e| e.into_inner());
        let r = self.trim_ranges(conn, &mut p, Op::Trim, ranges, true, fua);
        drop(gate);
        self.finish_cut();
        self.settle(p, r)
    }

    /// Write zeroes over `(offset, len)` ranges; with `unmap` the drive
    /// deallocates (a TRIM that guarantees zeros), without it the zeros are
    /// written. With `fua` they are durable before the completion.
    pub fn write_zeroes(
        &self,
        conn: &Connection,
        ranges: &[(u64, u64)],
        unmap: bool,
        fua: bool,
    ) -> Pending {
        let len = ranges.iter().map(|r| r.1).sum();
        let mut p = self.begin(conn, OpKind::WriteZeroes, len);
        // Deallocating guarantees zeros only on a drive whose trimmed LBAs
        // read as zeros (ATA RZAT, NVMe DLFEAT): any other writes them.
        let unmap = unmap && self.read_after_trim == ReadAfterTrim::Zeros;
        p.set_target(ranges, fua, unmap);
        let gate = self.gate.read().unwrap_or_else(|e| e.into_inner());
        let r = self.trim_ranges(conn, &mut p, Op::WriteZeroes { unmap }, ranges, unmap, fua);
        drop(gate);
        self.finish_cut();
        self.settle(p, r)
    }

    fn trim_ranges(
        &self,
        conn: &Connection,
        p: &mut Pending,
        op: Op,
        ranges: &[(u64, u64)],
        unmap: bool,
        fua: bool,
    ) -> Result<u64, DeviceError> {
        let mut outcome = TrimOutcome::default();
        let mut model_ns = 0;
        let mut media = None;
        let mut cut_during = false;
        let mut undo = if matches!(op, Op::WriteZeroes { unmap: false }) {
            self.undo_of(ranges)
        } else {
            Vec::new()
        };
        let due = self.submit_with(
            p,
            op,
            ranges,
            Payload::Unknown,
            |ssd, model_now, offset, len| {
                model_ns = model_now;
                if unmap {
                    outcome.add_range(ssd, offset, len);
                }
            },
            |m, at| {
                if matches!(op, Op::WriteZeroes { .. }) {
                    media = self.faults.media_hit(Media::Write, ranges);
                }
                if media.is_none() {
                    self.rewritten(m, ranges);
                }
                if matches!(op, Op::WriteZeroes { unmap: false }) {
                    // Written zeros are a write like any other.
                    if media.is_some() {
                        undo.clear();
                    }
                    cut_during = self.track_write(m, std::mem::take(&mut undo), at);
                } else if media.is_none() {
                    for &(o, l) in ranges {
                        m.power.clip(o, l);
                    }
                }
            },
        )?;
        if let Some(fault) = media {
            return Err(DeviceError::Media { fault, due });
        }
        self.trim_log.push(TrimRecord {
            seq: 0,
            model_ns,
            wall_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            source: conn.label(),
            kind: match op {
                Op::Trim => "discard",
                Op::WriteZeroes { unmap: true } => "write-zeroes-unmap",
                _ => "write-zeroes",
            }
            .into(),
            ranges: ranges.to_vec(),
            freed_bytes: outcome.freed_bytes,
            already_unmapped_bytes: outcome.already_unmapped_bytes,
        });
        // A TRIM on a drive without deterministic zeros leaves the data:
        // `old-data` returns it, `pattern` covers it on reads.
        let keep = op == Op::Trim && self.read_after_trim != ReadAfterTrim::Zeros;
        if !keep {
            for &(o, l) in ranges {
                self.store.zero(o, l, unmap).map_err(DeviceError::Io)?;
            }
        }
        if cut_during {
            // The power went as these zeros arrived: never acknowledged.
            return Err(DeviceError::PoweredOff);
        }
        if fua && !self.flush_lies {
            self.store.sync().map_err(DeviceError::Io)?;
        }
        p.set_trim(outcome);
        Ok(due)
    }

    /// Start recording every request to a new trace file at `path` (mode
    /// 0600; it must not exist), at most `limit` bytes.
    pub fn trace_start(&self, path: &Path, limit: u64) -> Result<(), capture::CaptureError> {
        self.stats.capture.start(
            path,
            limit,
            self.now_ns(),
            capture::DriveInfo {
                capacity: self.capacity(),
                logical_block: self.topology.logical_block as u32,
                scale: self.scale,
                profile: &self.profile.name,
            },
        )
    }

    /// Whether a trace is being taken (one relaxed load): a frontend then
    /// notes when it received each request ([`Pending::set_received`]).
    #[inline]
    pub fn tracing(&self) -> bool {
        self.stats.capture.on()
    }

    /// Stop the trace (if any) and close its file.
    pub fn trace_stop(&self) -> capture::TraceStatus {
        self.stats.capture.stop()
    }

    /// The current or last trace.
    pub fn trace_status(&self) -> capture::TraceStatus {
        self.stats.capture.status(self.scale, self.now_ns())
    }

    /// What a write of `ranges` overwrites, for the power audit: read
    /// from the store before the write takes the model lock, so the copy
    /// does not hold other queues up. Empty when nothing is audited (power-
    /// loss protection, power off, a read-only drive) and for a range
    /// beyond the audit's bounds (counted as untracked).
    fn undo_of(&self, ranges: &[(u64, u64)]) -> Vec<(u64, Option<Vec<u8>>)> {
        if !self.track || !self.powered() || self.read_only.load(Relaxed) {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(ranges.len());
        for &(offset, len) in ranges {
            if self.check(offset, len).is_err() {
                continue;
            }
            if len > power::MAX_UNDO_BYTES / 4 {
                out.push((offset, None));
                continue;
            }
            let mut undo = vec![0u8; len as usize];
            match self
                .store
                .read(offset, &[VolatileSlice::from(&mut undo[..])])
            {
                Ok(()) => out.push((offset, Some(undo))),
                Err(e) => {
                    warn!("power-loss audit: cannot read the previous contents at {offset}: {e}");
                    out.push((offset, None));
                }
            }
        }
        out
    }

    /// Audit a write just submitted at `(model_now, model_done)`: `undo`
    /// holds what each of its ranges overwrote ([`Self::undo_of`]; empty
    /// for a write an injected fault failed, which changes nothing), kept
    /// until the write is durable. Returns whether an armed
    /// `--after-writes` cut goes off with it.
    fn track_write(
        &self,
        m: &mut ModelState,
        undo: Vec<(u64, Option<Vec<u8>>)>,
        (now, done): (u64, u64),
    ) -> bool {
        if self.track {
            let units_end = m.ssd.durability().placed;
            for (offset, undo) in undo {
                let Some(undo) = undo else {
                    m.power.untracked += 1;
                    continue;
                };
                m.power.push(Record {
                    offset,
                    undo,
                    submitted_ns: now,
                    acked_ns: done,
                    units_end,
                    durable_ns: None,
                });
            }
        }
        if let Some(Armed::AfterWrites { writes }) = m.power.armed {
            if writes <= 1 {
                self.decide_cut(m, now, "with a write (--after-writes)".into());
                return true;
            }
            m.power.armed = Some(Armed::AfterWrites { writes: writes - 1 });
        }
        false
    }

    /// The power goes at drive time `t`: no request is taken from now on;
    /// [`Self::finish_cut`] carries the cut out.
    fn decide_cut(&self, m: &mut ModelState, t: u64, trigger: String) {
        m.power.off = true;
        m.power.armed = None;
        let restart = m.power.armed_restart_ms.take();
        m.power.pending_cut = Some((t, trigger, restart));
        self.powered.store(false, Relaxed);
        self.cut_requested.store(true, Relaxed);
    }

    /// Carry out a decided cut: close the frontends' connections, wait for
    /// the requests whose data I/O is under way, undo the lost writes,
    /// save the state as it is after the cut.
    fn finish_cut(&self) {
        if !self.cut_requested.swap(false, Relaxed) {
            return;
        }
        for h in self
            .power_hooks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            h();
        }
        let _excl = self.gate.write().unwrap_or_else(|e| e.into_inner());
        let mut m = self.lock();
        let Some((t, trigger, restart_ms)) = m.power.pending_cut.take() else {
            return;
        };
        let plan = if self.track {
            m.ssd.catch_up(t);
            let d = m.ssd.durability();
            m.power.settle(d);
            let records = m.power.take_all();
            // Each cut draws from its own stream of the device's seed.
            let mut rng = vssd_common::rng::Rng::new(vssd_common::rng::derive_seed(&[
                self.seed,
                0x706f_7765_725f_6375, // "power_cu"
                m.power.cuts,
            ]));
            power::plan_cut(records, t, self.classes, &mut rng)
        } else {
            power::CutPlan::default()
        };
        // Newest first: each write's previous contents are what the one
        // before it (or the durable data) left.
        for (offset, data) in &plan.restores {
            let mut d = data.clone();
            if let Err(e) = self
                .store
                .write(*offset, &[VolatileSlice::from(&mut d[..])])
            {
                error!("power cut: cannot restore {offset}+{}: {e}", d.len());
            }
        }
        if let Err(e) = self.store.sync() {
            error!("power cut: cannot sync the store: {e}");
        }
        let lost_bytes = plan.lost.iter().map(|l| l.length).sum();
        let restart_at = restart_ms.map(|ms| t.saturating_add(ms.saturating_mul(1_000_000)));
        warn!(
            "power cut at drive time {:.3} s ({trigger}): {} writes ({lost_bytes} bytes) lost, {} pending ones survived{}{}{}",
            t as f64 / 1e9,
            plan.lost.len(),
            plan.survived,
            if self.track {
                ""
            } else {
                " (power-loss protection)"
            },
            if plan.mapping_lost {
                "; the mapping updates of the window were lost"
            } else {
                ""
            },
            restart_at
                .map(|r| format!("; power comes back at drive time {:.3} s", r as f64 / 1e9))
                .unwrap_or_default()
        );
        m.power.cuts += 1;
        m.power.restart_at = restart_at;
        m.power.last_cut = Some(CutReport {
            model_ns: t,
            trigger,
            protected: !self.track,
            lost: plan.lost,
            lost_bytes,
            survived: plan.survived,
            reordered: plan.reordered,
            mapping_lost: plan.mapping_lost,
            restart_at_model_ns: restart_at,
        });
        drop(m);
        if let Err(e) = self.save_state() {
            warn!("power cut: {e}");
        }
        self.wake_power_timer();
    }

    /// Drive time now (model clock with the precondition offset).
    fn drive_now(&self, m: &ModelState) -> u64 {
        self.model_clock(self.now_ns()) + m.offset_ns
    }

    /// An armed `--after-ms` / `--at` cut whose time has come goes off; an
    /// automatic power-on whose time has come brings the power back.
    fn poll_power(&self) {
        {
            let mut m = self.lock();
            let now = self.drive_now(&m);
            if let Some(Armed::At { model_ns }) = m.power.armed
                && now >= model_ns
            {
                self.decide_cut(
                    &mut m,
                    model_ns,
                    "its time came (--after-ms / --at)".to_string(),
                );
            }
        }
        self.finish_cut();
        let mut m = self.lock();
        if m.power.off
            && m.power.pending_cut.is_none()
            && m.power.restart_at.is_some_and(|r| self.drive_now(&m) >= r)
        {
            m.power.off = false;
            m.power.restart_at = None;
            self.powered.store(true, Relaxed);
            log::info!("power on (automatic, --restart-after)");
        }
    }

    /// When the power state changes next by itself (drive time), if it does.
    fn next_power_event(&self) -> Option<u64> {
        let m = self.lock();
        match (m.power.armed, m.power.restart_at) {
            (Some(Armed::At { model_ns }), _) => Some(model_ns),
            (_, Some(r)) if m.power.off => Some(r),
            _ => None,
        }
    }

    fn wake_power_timer(&self) {
        let (lock, cv) = &*self.power_timer;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        cv.notify_all();
    }

    /// Start the thread that carries out timed power events on time: a cut
    /// armed for a drive time (`--after-ms`, `--at`) goes off then even if
    /// no request comes, and `--restart-after` powers the drive on. Without
    /// it they happen at the next request or [`Device::sample`]. The thread
    /// ends when the device is dropped.
    pub fn spawn_power_timer(dev: &Arc<Device>) -> io::Result<()> {
        let weak: Weak<Device> = Arc::downgrade(dev);
        let timer = dev.power_timer.clone();
        std::thread::Builder::new()
            .name("vssd-power".into())
            .spawn(move || {
                let (lock, cv) = &*timer;
                loop {
                    let wait = {
                        let Some(dev) = weak.upgrade() else { return };
                        dev.poll_power();
                        match dev.next_power_event() {
                            Some(at) => {
                                let now = dev.drive_now(&dev.lock());
                                // Drive time runs K times slower than the wall clock.
                                let ns = at.saturating_sub(now);
                                std::time::Duration::from_nanos(
                                    dev.scale.to_wall(ns).clamp(100_000, 1_000_000_000),
                                )
                            }
                            None => std::time::Duration::from_secs(1),
                        }
                    };
                    let g = lock.lock().unwrap_or_else(|e| e.into_inner());
                    let seen = *g;
                    let _ = cv
                        .wait_timeout_while(g, wait, |n| *n == seen)
                        .unwrap_or_else(|e| e.into_inner());
                }
            })
            .map(|_| ())
    }

    /// A drive whose preset goes read-only at end of life does once its
    /// mean erase count reaches the rated cycles.
    fn check_end_of_life(&self, ssd: &Ssd) {
        if self.profile.wear.end_of_life == EndOfLife::ReadOnly
            && !self.read_only.load(Relaxed)
            && ssd.worn_out()
        {
            self.read_only.store(true, Relaxed);
            warn!(
                "the drive has reached its rated {} P/E cycles and is read-only from now on (as its kind was)",
                self.profile.wear.rated_pe_cycles
            );
        }
    }

    /// Whether the drive is worn out and read-only.
    pub fn read_only(&self) -> bool {
        self.read_only.load(Relaxed)
    }

    /// Age the NAND fast (`ctl precondition --wear PERCENT`): every block
    /// to at least `percent` of the rated P/E cycles (data untouched).
    /// Returns the erases added.
    pub fn age(&self, percent: f64) -> Result<u64, String> {
        if self.profile.wear.rated_pe_cycles == 0 {
            return Err(format!(
                "profile {} has no [wear] rated_pe_cycles: there is no rated life to age it towards",
                self.profile.name
            ));
        }
        if !(percent.is_finite() && percent > 0.0 && percent <= 1000.0) {
            return Err(format!("--wear {percent} must be in (0, 1000] percent"));
        }
        let mut m = self.lock();
        let added = m.ssd.age_to(percent);
        // The drive had done that wear before: no block fails on these erases now.
        m.erases_seen = m.ssd.erases();
        self.check_end_of_life(&m.ssd);
        drop(m);
        log::info!("aged the NAND to {percent} % of its rated cycles ({added} erases)");
        Ok(added)
    }

    /// Cut the power (`ctl power-cut`) now or arm a cut; with
    /// `restart_after_ms` the drive powers itself on again that long (drive
    /// time) after the cut.
    pub fn power_cut(
        &self,
        trigger: CutTrigger,
        restart_after_ms: Option<u64>,
    ) -> Result<PowerCutResult, PowerError> {
        if let Some(ms) = restart_after_ms
            && !(1..=faults::MAX_PERIOD_MS).contains(&ms)
        {
            return Err(PowerError::BadTrigger(format!(
                "--restart-after {} s must be between 0.001 and {} s",
                ms as f64 / 1000.0,
                faults::MAX_PERIOD_MS / 1000
            )));
        }
        let armed = {
            let mut m = self.lock();
            if m.power.off {
                return Err(PowerError::AlreadyOff);
            }
            let now = self.drive_now(&m);
            let armed = match trigger {
                CutTrigger::Now => None,
                CutTrigger::AfterWrites { writes } => {
                    if !(1..=power::MAX_AFTER_WRITES).contains(&writes) {
                        return Err(PowerError::BadTrigger(format!(
                            "--after-writes {writes} must be between 1 and {}",
                            power::MAX_AFTER_WRITES
                        )));
                    }
                    Some(Armed::AfterWrites { writes })
                }
                CutTrigger::AfterMs { ms } => {
                    if ms > faults::MAX_PERIOD_MS {
                        return Err(PowerError::BadTrigger(format!(
                            "--after-ms {ms} must be at most {}",
                            faults::MAX_PERIOD_MS
                        )));
                    }
                    Some(Armed::At {
                        model_ns: now + ms * 1_000_000,
                    })
                }
                CutTrigger::At { ms } => {
                    let at = ms.saturating_mul(1_000_000);
                    if at <= now {
                        return Err(PowerError::BadTrigger(format!(
                            "--at {} s is not ahead: the drive's clock is at {:.3} s (ctl fault list: drive time)",
                            ms as f64 / 1000.0,
                            now as f64 / 1e9
                        )));
                    }
                    if at - now > faults::MAX_PERIOD_MS * 1_000_000 {
                        return Err(PowerError::BadTrigger(format!(
                            "--at {} s is more than a day of drive time ahead (the clock is at {:.3} s)",
                            ms as f64 / 1000.0,
                            now as f64 / 1e9
                        )));
                    }
                    Some(Armed::At { model_ns: at })
                }
                CutTrigger::Random { seed } => Some(Armed::AfterWrites {
                    writes: 1 + vssd_common::rng::Rng::new(seed).below(1000),
                }),
            };
            m.power.armed_restart_ms = restart_after_ms;
            match armed {
                None => self.decide_cut(&mut m, now, "now (ctl power-cut)".into()),
                Some(a) => {
                    log::info!("power cut armed: {a:?}");
                    m.power.armed = Some(a);
                }
            }
            armed
        };
        self.finish_cut();
        self.wake_power_timer();
        let cut = match armed {
            None => self.lock().power.last_cut.clone(),
            Some(_) => None,
        };
        Ok(PowerCutResult { cut, armed })
    }

    /// Power back on (`ctl power-on`): requests and connections are taken again.
    pub fn power_on(&self) -> Result<(), PowerError> {
        let mut m = self.lock();
        if !m.power.off {
            return Err(PowerError::AlreadyOn);
        }
        m.power.off = false;
        m.power.restart_at = None;
        self.powered.store(true, Relaxed);
        log::info!("power on");
        Ok(())
    }

    /// Whether the drive has power (frontends refuse connections without).
    pub fn powered(&self) -> bool {
        self.powered.load(Relaxed)
    }

    /// Call `hook` whenever the power goes (a frontend closes its
    /// connections, as a real power loss does).
    pub fn on_power_cut(&self, hook: impl Fn() + Send + Sync + 'static) {
        self.power_hooks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(hook));
    }

    /// The power state and the audit.
    pub fn power_report(&self) -> PowerReport {
        let m = self.lock();
        PowerReport {
            powered: !m.power.off,
            drive_time_ns: self.drive_now(&m),
            armed_restart_after_ms: m.power.armed.and(m.power.armed_restart_ms),
            classes: self.classes,
            armed: m.power.armed,
            power_loss_protection: !self.track,
            flush_lies: self.flush_lies,
            cuts: m.power.cuts,
            last_cut: m.power.last_cut.clone(),
            pending_writes: m.power.records.len() as u64,
            pending_undo_bytes: m.power.undo_bytes,
            untracked_writes: m.power.untracked,
        }
    }

    /// An injected media fault over `ranges` fails the request, reported at `due`.
    fn media_check(&self, dir: Media, ranges: &[(u64, u64)], due: u64) -> Result<(), DeviceError> {
        match self.faults.media_hit(dir, ranges) {
            Some(fault) => Err(DeviceError::Media { fault, due }),
            None => Ok(()),
        }
    }

    /// Register an injected fault (`ctl fault add`), checked against the
    /// drive. A `bad-block` fault retires its blocks now (at least one, or
    /// it is refused).
    pub fn add_fault(&self, spec: FaultSpec) -> Result<FaultInfo, FaultError> {
        if let FaultSpec::BadBlock { count } = spec {
            if !(1..=faults::MAX_BAD_BLOCKS).contains(&count) {
                // The registry says why.
                return self.faults.add(spec, self.capacity(), 0);
            }
            if !self.powered() {
                return Err(FaultError::Bad {
                    kind: "bad-block",
                    why: "the drive's power is off (vssd ctl power-on)".into(),
                });
            }
            let retired = self.retire_blocks(count)?;
            let now = self.drive_now(&self.lock());
            let mut info = self.faults.add(spec, self.capacity(), now)?;
            self.faults.count_media(Some(info.id), 0, retired);
            info.hits = retired;
            log::warn!(
                "fault {}: {retired} of {count} blocks retired as grown bad blocks",
                info.id
            );
            return Ok(info);
        }
        let now = {
            let mut m = self.lock();
            // Media-wear counts erases from now on.
            m.erases_seen = m.ssd.erases();
            self.model_clock(self.now_ns()) + m.offset_ns
        };
        let info = self.faults.add(spec, self.capacity(), now)?;
        log::info!("fault {} added: {:?}", info.id, info.spec);
        Ok(info)
    }

    /// Retire up to `count` blocks picked from the device's seed (their
    /// data moved out first): how many were. Refused if none could be.
    fn retire_blocks(&self, count: u32) -> Result<u64, FaultError> {
        let mut m = self.lock();
        let now = self.drive_now(&m).max(m.last_ns);
        let nblocks = u64::from(m.ssd.block_count());
        let mut done = 0u64;
        let mut last_err = None;
        let mut attempts = 0u64;
        while done < u64::from(count) && attempts < 64 * u64::from(count) + 1024 {
            attempts += 1;
            let b = m.media_rng.below(nblocks) as u32;
            match m.ssd.retire_block(now, b) {
                Ok(()) => done += 1,
                Err(
                    e @ (vssd_model::RetireError::Hybrid | vssd_model::RetireError::NoSpare { .. }),
                ) => {
                    last_err = Some(e);
                    // Another die may have spare blocks; a hybrid drive has none.
                    if matches!(last_err, Some(vssd_model::RetireError::Hybrid)) {
                        break;
                    }
                }
                Err(e) => last_err = Some(e),
            }
            if let Some(e) = m.ssd.damaged() {
                self.stop(format!("the drive model failed retiring a block: {e}"));
                break;
            }
        }
        if done == 0 {
            return Err(FaultError::Bad {
                kind: "bad-block",
                why: match last_err {
                    Some(e) => format!("no block could be retired: {e}"),
                    None => "no block could be retired".into(),
                },
            });
        }
        Ok(done)
    }

    /// Media-wear, for a read of `offset..+len` the model took at `now`:
    /// whether a unit it reads is uncorrectable (then the media-wear
    /// fault's id, 0 for a unit an earlier read left uncorrectable), drawn
    /// from the raw bit-error model for the unit's block wear and data age.
    fn media_read(&self, m: &mut ModelState, offset: u64, len: u64, now: u64) -> Option<u64> {
        let ub = m.ssd.unit_bytes();
        if !m.uncorrectable.is_empty()
            && m.uncorrectable
                .range(offset / ub..(offset + len).div_ceil(ub))
                .next()
                .is_some()
        {
            self.faults.count_media(None, 1, 0);
            return Some(0);
        }
        let (id, accel, extra_age) = self.faults.media_wear()?;
        let mut failed = Vec::new();
        let ModelState { ssd, media_rng, .. } = m;
        ssd.unit_wear(offset, len, |lpn, erases, written| {
            let age = now.saturating_sub(written).saturating_add(extra_age);
            let p = self.media.unit_failure(erases, age, accel, ub);
            if p > 0.0 && ((media_rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p {
                failed.push(lpn);
            }
        });
        if failed.is_empty() {
            return None;
        }
        for lpn in failed {
            if m.uncorrectable.len() < MAX_UNCORRECTABLE {
                m.uncorrectable.insert(lpn);
            }
        }
        self.faults.count_media(Some(id), 1, 0);
        Some(id)
    }

    /// Units written or trimmed in `ranges` are readable again (the drive
    /// wrote them to a new place).
    fn rewritten(&self, m: &mut ModelState, ranges: &[(u64, u64)]) {
        if m.uncorrectable.is_empty() {
            return;
        }
        let ub = m.ssd.unit_bytes();
        for &(o, l) in ranges {
            // Only units the write covers whole are rewritten.
            let (first, end) = (o.div_ceil(ub), (o + l) / ub);
            if first < end {
                let gone: Vec<u64> = m.uncorrectable.range(first..end).copied().collect();
                for lpn in gone {
                    m.uncorrectable.remove(&lpn);
                }
            }
        }
    }

    /// Media-wear: the erases since the last look each fail with the
    /// bad-block model's probability; a failed block is retired (the most
    /// worn free one). Out of spare blocks, the drive turns read-only.
    fn media_erases(&self, m: &mut ModelState) {
        let erases = m.ssd.erases();
        let new = erases.saturating_sub(m.erases_seen);
        m.erases_seen = erases;
        if new == 0 {
            return;
        }
        let Some((id, accel, _)) = self.faults.media_wear() else {
            return;
        };
        let mean = erases as f64 / f64::from(m.ssd.block_count().max(1));
        let p = self.media.erase_failure(mean, accel);
        if p <= 0.0 {
            return;
        }
        // Failures among `new` erases: a binomial draw (at most 64 a request).
        let mut fails = 0u64;
        for _ in 0..new.min(1 << 20) {
            if ((m.media_rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p {
                fails += 1;
                if fails == 64 {
                    break;
                }
            }
        }
        let mut retired = 0;
        for _ in 0..fails {
            match m.ssd.retire_worn_free_block() {
                Some(b) => {
                    retired += 1;
                    log::warn!("media-wear: block {b} failed its erase and is retired");
                }
                None => {
                    if !self.read_only.swap(true, Relaxed) {
                        warn!(
                            "media-wear: a block failed and no spare block is left: the drive is read-only from now on"
                        );
                    }
                    break;
                }
            }
        }
        self.faults.count_media(Some(id), 0, retired);
    }

    /// Remove injected fault `id`, or all (`None`): how many were removed.
    pub fn clear_faults(&self, id: Option<u64>) -> Result<usize, FaultError> {
        let n = self.faults.clear(id)?;
        log::info!("{n} fault(s) cleared");
        Ok(n)
    }

    /// The injected faults and what they did.
    pub fn faults(&self) -> FaultReport {
        self.poll_power();
        FaultReport {
            power: self.power_report(),
            read_only: self.read_only(),
            ..self.faults.report()
        }
    }

    /// TRIM log records after sequence number `after` (at most `max`), and
    /// how many after it were already dropped from the ring.
    pub fn trim_log(&self, after: u64, max: usize) -> (Vec<TrimRecord>, u64) {
        self.trim_log.since(after, max)
    }

    /// Make everything written so far durable, then flush the drive's buffer.
    pub fn flush(&self, conn: &Connection) -> Pending {
        let p = self.begin(conn, OpKind::Flush, 0);
        let gate = self.gate.read().unwrap_or_else(|e| e.into_inner());
        let r = if self.flush_lies {
            // A drive that lies about flushes answers at once and programs
            // nothing (no range: the model is not asked).
            self.submit(&p, Op::Flush, &[])
        } else {
            self.store
                .sync()
                .map_err(DeviceError::Io)
                .and_then(|()| self.submit(&p, Op::Flush, &[(0, 0)]))
        };
        drop(gate);
        self.finish_cut();
        self.settle(p, r)
    }

    /// The model's counters, with the drive's idle-time work done up to now
    /// (it is otherwise done when the next request arrives).
    pub fn counters(&self) -> Counters {
        let now = self.model_clock(self.now_ns());
        let mut m = self.lock();
        m.ssd.catch_up(now);
        m.ssd.counters()
    }

    /// The drive's SMART view, from its counters now (`vssd ctl smart`).
    pub fn smart(&self) -> smart::SmartReport {
        let c = self.counters();
        let spare = self.lock().ssd.spare_percent();
        let f = self.faults.report();
        let e = smart::Errors {
            uncorrectable_reads: f.counters.uncorrectable_reads,
            power_cuts: self.lock().power.cuts,
            spare_percent: spare,
        };
        smart::report_with(&self.profile, &c, &e)
    }

    /// Record a counter sample for the recent write-amplification window
    /// (call about once a second).
    pub fn sample(&self) {
        self.poll_power();
        self.check_end_of_life(&self.lock().ssd);
        let c = self.counters();
        let mut s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if s.len() == SAMPLES_KEPT {
            s.pop_front();
        }
        s.push_back(Sample {
            at_ns: self.now_ns(),
            host_written: c.host_written_bytes,
            nand_programmed: c.nand_bytes_programmed,
        });
    }

    /// Write amplification between the oldest kept sample and `now`.
    fn recent_window(&self, c: &Counters) -> Option<WindowReport> {
        let s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let first = s.front()?;
        let host = c.host_written_bytes.saturating_sub(first.host_written);
        let nand = c
            .nand_bytes_programmed
            .saturating_sub(first.nand_programmed);
        Some(WindowReport {
            seconds: self.model_clock(self.now_ns().saturating_sub(first.at_ns)) as f64 / 1e9,
            host_written_bytes: host,
            nand_bytes_programmed: nand,
            write_amplification: if host > 0 {
                nand as f64 / host as f64
            } else {
                0.0
            },
        })
    }

    /// Everything `vssd ctl stats` shows.
    pub fn report(&self) -> StatsReport {
        let now = self.model_clock(self.now_ns());
        let (counters, model_bytes) = {
            let mut m = self.lock();
            m.ssd.catch_up(now);
            (m.ssd.counters(), m.ssd.memory_bytes() as u64)
        };
        StatsReport {
            drive: DriveReport {
                profile: self.profile.name.clone(),
                capacity: self.capacity(),
                backing: self.store.path().map(|p| p.display().to_string()),
                allocated_bytes: self.store.allocated_bytes(),
                serial: self.profile.identity().serial,
                identity: Some(self.profile.identity()),
                stopped: self.stopped().map(str::to_string),
                model_bytes,
                rss_bytes: rss_bytes(),
                pending_zero_bytes: self.store.pending_zero_bytes(),
                time_scale: self.scale.factor(),
            },
            connection: self.stats.connection_report(),
            frontends: self.stats.frontends_report(),
            recent: self.recent_window(&counters),
            counters,
            lateness: hist::Summary::of(self.stats.lateness()),
            ops: self.stats.ops_report(),
            faults: self.faults(),
        }
    }

    /// Back to a fresh drive: all data reads as zeros, the FTL is reset.
    pub fn secure_erase(&self) -> Result<(), DeviceError> {
        if !self.powered() {
            return Err(DeviceError::PoweredOff);
        }
        let mut m = self.lock();
        self.store.erase_all().map_err(DeviceError::Io)?;
        m.ssd.secure_erase();
        // Nothing written before is there to lose (and the model counts
        // placed units from zero again); no unit is unreadable any more,
        // and the erase of every block is no wear-out failure.
        m.power.clear();
        m.uncorrectable.clear();
        m.erases_seen = m.ssd.erases();
        self.ftl_describes_data.store(true, Relaxed);
        self.stats.reset();
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        Ok(())
    }

    /// Let the drive idle `ns` of model time at once: its idle-time work
    /// (erases, background garbage collection) runs up to `ns` from now,
    /// and the model clock moves on by `ns` (the offset grows, as after a
    /// precondition), so the next request finds the drive as after that
    /// much idleness.
    pub fn idle(&self, ns: u64) -> Result<(), DeviceError> {
        if let Some(why) = self.stopped() {
            return Err(DeviceError::Stopped(why.into()));
        }
        if !self.powered() {
            return Err(DeviceError::PoweredOff);
        }
        let mut m = self.lock();
        let now = self.model_clock(self.now_ns()) + m.offset_ns;
        m.ssd.catch_up(now.saturating_add(ns));
        m.offset_ns = m.offset_ns.saturating_add(ns);
        if self.track {
            let d = m.ssd.durability();
            m.power.settle(d);
        }
        Ok(())
    }

    /// Age the drive in model time (no data is touched, except that a
    /// TRIM-all step also zeroes the store, as a drive's TRIM does). The
    /// work runs in chunks of about [`PRECONDITION_CHUNK`] of wall time;
    /// between chunks the model lock is free, so guest I/O and `ctl stats`
    /// go on (guest requests then queue behind the work done so far, as on
    /// a drive busy with it). `progress(done_bytes, total_bytes)` is called
    /// after each chunk; returning false cancels (what is done stays done).
    pub fn precondition(
        &self,
        steps: &[Precondition],
        seed: u64,
        progress: &mut dyn FnMut(u64, u64) -> bool,
    ) -> Result<PreconditionOutcome, DeviceError> {
        if let Some(why) = self.stopped() {
            return Err(DeviceError::Stopped(why.into()));
        }
        if !self.powered() {
            return Err(DeviceError::PoweredOff);
        }
        if steps.contains(&Precondition::TrimAll) {
            self.store
                .zero(0, self.capacity(), true)
                .map_err(DeviceError::Io)?;
        }
        let (mut run, start) = {
            let m = self.lock();
            let start = self.model_clock(self.now_ns()) + m.offset_ns;
            (PreconditionRun::new(&m.ssd, start, steps, seed), start)
        };
        let mut cancelled = false;
        let end = loop {
            let p = {
                let mut m = self.lock();
                let t0 = std::time::Instant::now();
                let p = run
                    .advance_while(&mut m.ssd, || t0.elapsed() < PRECONDITION_CHUNK)
                    .inspect_err(|e| self.stop(format!("the drive model failed: {e}")))?;
                self.media_erases(&mut m);
                // Model time = daemon time / K + offset: the drive has
                // done the work so far by now.
                let lag = p
                    .model_now_ns
                    .saturating_sub(self.model_clock(self.now_ns()));
                m.offset_ns = m.offset_ns.max(lag);
                p
            };
            if p.finished {
                break p.model_now_ns;
            }
            if !progress(p.done_bytes, p.total_bytes) {
                cancelled = true;
                break p.model_now_ns;
            }
        };
        self.check_end_of_life(&self.lock().ssd);
        Ok(PreconditionOutcome {
            model_ns: end.saturating_sub(start),
            cancelled,
        })
    }
}

/// The bytes a throttle counts for a request: what reads and writes move
/// (writing zeros without unmapping moves them too); none for the rest.
fn throttled_bytes(op: Op, ranges: &[(u64, u64)]) -> u64 {
    match op {
        Op::Read | Op::Write | Op::WriteZeroes { unmap: false } => ranges.iter().map(|r| r.1).sum(),
        _ => 0,
    }
}

/// How compressible the data in `bufs` (`len` bytes) is: a bounded sample
/// of it through [`vssd_model::payload::estimate`].
fn sample_payload(bufs: &[VolatileSlice<'_>], len: u64) -> Payload {
    let mut sample = [0u8; 2 * vssd_model::payload::SAMPLE_BYTES];
    let mut n = 0;
    for (at, want) in vssd_model::payload::sample_ranges(len) {
        let (mut at, mut want) = (at, want);
        for b in bufs {
            let blen = b.len() as u64;
            if want == 0 {
                break;
            }
            if at >= blen {
                at -= blen;
                continue;
            }
            let k = want.min((blen - at) as usize);
            match b.subslice(at as usize, k) {
                Ok(s) => n += s.copy_to(&mut sample[n..n + k]),
                Err(_) => return Payload::Unknown,
            }
            want -= k;
            at = 0;
        }
    }
    vssd_model::payload::estimate(&sample[..n])
}

#[cfg(test)]
mod power_tests;
#[cfg(test)]
mod tests;
