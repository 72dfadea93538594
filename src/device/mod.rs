//! One emulated SSD: a request goes to the model (when does it complete?)
//! and to the store (the bytes), and comes back with its modelled
//! completion time. Frontends (vhost-user-blk now, NBD later) deliver the
//! completion at that time with [`scheduler`].
//!
//! Time: the daemon clock is `CLOCK_MONOTONIC` minus the daemon's start.
//! The model's clock is the daemon clock plus an offset that grows when
//! `precondition` ages the drive in model time, so a guest never waits for
//! the hours of simulated writes a precondition represents.

pub mod scheduler;
pub mod stats;
pub mod store;

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use thiserror::Error;
use vm_memory::VolatileSlice;

use crate::model::{Counters, ModelError, Op, Payload, PersistError, Precondition, Request, Ssd};
use crate::profile::Profile;

use self::stats::Stats;
use self::store::{Store, StoreError};

/// Bytes per sector (virtio-blk and the model both count in 512-byte sectors).
pub const SECTOR: u64 = 512;

/// Errors of the device layer.
#[derive(Debug, Error)]
pub enum DeviceError {
    /// Opening the backing store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
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
}

/// When a request was submitted and when the drive completes it (daemon clock, ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Arrival.
    pub submit_ns: u64,
    /// Modelled completion.
    pub due_ns: u64,
}

struct ModelState {
    ssd: Ssd,
    /// model time = daemon time + offset.
    offset_ns: u64,
}

/// One emulated drive, shared by all queues and the control socket.
pub struct Device {
    profile: Profile,
    model: Mutex<ModelState>,
    store: Store,
    base_ns: u64,
    serial: [u8; 20],
    state_file: Option<PathBuf>,
    /// Counters and latency histograms kept outside the model.
    pub stats: Stats,
}

/// The 20-byte virtio-blk serial: stable for a profile, capacity and backing file.
pub fn serial_for(profile: &Profile, backing: Option<&Path>) -> [u8; 20] {
    let mut a = crc32fast::Hasher::new();
    a.update(profile.name.as_bytes());
    a.update(&profile.geometry.exported_capacity.0.to_le_bytes());
    let where_ = match backing {
        Some(p) => std::fs::canonicalize(p)
            .unwrap_or_else(|_| p.to_path_buf())
            .to_string_lossy()
            .into_owned(),
        None => "memory".to_string(),
    };
    let b = crc32fast::hash(where_.as_bytes());
    let s = format!("VSSD{:08X}{:08X}", a.finalize(), b);
    let mut out = [0u8; 20];
    out.copy_from_slice(&s.as_bytes()[..20]);
    out
}

impl Device {
    /// Open the store and the model (loading saved FTL state if there is some).
    pub fn open(opts: DeviceOptions) -> Result<Device, DeviceError> {
        let capacity = opts.profile.geometry.exported_capacity.0;
        let ssd = match &opts.state_file {
            Some(path) if path.exists() => {
                let f = File::open(path).map_err(|e| DeviceError::StateLoad {
                    path: path.clone(),
                    source: e.into(),
                })?;
                Ssd::load(&opts.profile, BufReader::new(f)).map_err(|source| {
                    DeviceError::StateLoad {
                        path: path.clone(),
                        source,
                    }
                })?
            }
            _ => Ssd::new(&opts.profile, opts.seed),
        };
        debug_assert_eq!(ssd.capacity(), capacity);
        let store = match &opts.data {
            DataLocation::File(p) => Store::open_file(p, capacity)?,
            DataLocation::Memory => Store::memory(capacity),
        };
        Ok(Device {
            serial: serial_for(&opts.profile, store.path()),
            profile: opts.profile,
            model: Mutex::new(ModelState { ssd, offset_ns: 0 }),
            store,
            base_ns: scheduler::monotonic_ns(),
            state_file: opts.state_file,
            stats: Stats::default(),
        })
    }

    /// The drive's profile.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Exported bytes.
    pub fn capacity(&self) -> u64 {
        self.store.len()
    }

    /// The virtio-blk serial (GET_ID).
    pub fn serial(&self) -> [u8; 20] {
        self.serial
    }

    /// The store (for its path and allocation figures).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Whether the drive has a volatile write cache (the profile has a write buffer).
    pub fn has_write_cache(&self) -> bool {
        self.profile.buffer.size.0 > 0
    }

    /// Daemon clock: ns since the device was opened.
    pub fn now_ns(&self) -> u64 {
        scheduler::monotonic_ns().saturating_sub(self.base_ns)
    }

    /// Daemon clock → absolute `CLOCK_MONOTONIC` ns (for timer deadlines).
    pub fn to_monotonic(&self, t: u64) -> u64 {
        t.saturating_add(self.base_ns)
    }

    fn lock(&self) -> MutexGuard<'_, ModelState> {
        // A panic while holding the lock cannot leave the model half-updated
        // in a way that matters more than stopping the drive would.
        self.model.lock().unwrap_or_else(|e| e.into_inner())
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

    /// Submit requests to the model at one instant; the timing is that of the last to finish.
    fn submit(&self, op: Op, ranges: &[(u64, u64)]) -> Result<Timing, DeviceError> {
        for &(o, l) in ranges {
            self.check(o, l)?;
        }
        let mut m = self.lock();
        let submit_ns = self.now_ns();
        let model_now = submit_ns + m.offset_ns;
        let mut done = model_now;
        for &(offset, len) in ranges {
            let c = m.ssd.submit(
                model_now,
                &Request {
                    op,
                    offset,
                    len,
                    payload: Payload::Unknown,
                },
            )?;
            done = done.max(c.done_ns);
        }
        Ok(Timing {
            submit_ns,
            due_ns: done.saturating_sub(m.offset_ns),
        })
    }

    /// Read `offset..` into `bufs`.
    pub fn read(&self, offset: u64, bufs: &[VolatileSlice<'_>]) -> Result<Timing, DeviceError> {
        let len = bufs.iter().map(|b| b.len() as u64).sum();
        let t = self.submit(Op::Read, &[(offset, len)])?;
        self.store.read(offset, bufs).map_err(DeviceError::Io)?;
        Ok(t)
    }

    /// Write `bufs` at `offset..`.
    pub fn write(&self, offset: u64, bufs: &[VolatileSlice<'_>]) -> Result<Timing, DeviceError> {
        let len = bufs.iter().map(|b| b.len() as u64).sum();
        let t = self.submit(Op::Write, &[(offset, len)])?;
        self.store.write(offset, bufs).map_err(DeviceError::Io)?;
        Ok(t)
    }

    /// TRIM `(offset, len)` ranges: the data reads as zeros afterwards.
    pub fn discard(&self, ranges: &[(u64, u64)]) -> Result<Timing, DeviceError> {
        let t = self.submit(Op::Trim, ranges)?;
        for &(o, l) in ranges {
            self.store.zero(o, l, true).map_err(DeviceError::Io)?;
        }
        Ok(t)
    }

    /// Write zeroes over `(offset, len)` ranges; with `unmap` the drive deallocates.
    pub fn write_zeroes(&self, ranges: &[(u64, u64)], unmap: bool) -> Result<Timing, DeviceError> {
        let t = self.submit(Op::WriteZeroes { unmap }, ranges)?;
        for &(o, l) in ranges {
            self.store.zero(o, l, unmap).map_err(DeviceError::Io)?;
        }
        Ok(t)
    }

    /// Make everything written so far durable, then flush the drive's buffer.
    pub fn flush(&self) -> Result<Timing, DeviceError> {
        let submit_ns = self.now_ns();
        self.store.sync().map_err(DeviceError::Io)?;
        let mut m = self.lock();
        let model_now = submit_ns + m.offset_ns;
        let c = m.ssd.submit(
            model_now,
            &Request {
                op: Op::Flush,
                offset: 0,
                len: 0,
                payload: Payload::Unknown,
            },
        )?;
        Ok(Timing {
            submit_ns,
            due_ns: c.done_ns.saturating_sub(m.offset_ns),
        })
    }

    /// The model's counters.
    pub fn counters(&self) -> Counters {
        self.lock().ssd.counters()
    }

    /// Back to a fresh drive: all data reads as zeros, the FTL is reset.
    pub fn secure_erase(&self) -> Result<(), DeviceError> {
        let mut m = self.lock();
        self.store.erase_all().map_err(DeviceError::Io)?;
        m.ssd.secure_erase();
        self.stats.reset();
        Ok(())
    }

    /// Age the drive in model time (no data is touched). Returns the model
    /// time the steps took, in ns.
    pub fn precondition(&self, steps: &[Precondition], seed: u64) -> u64 {
        let mut m = self.lock();
        let start = self.now_ns() + m.offset_ns;
        let mut now = start;
        for (i, step) in steps.iter().enumerate() {
            now = m
                .ssd
                .precondition(now, step, seed.wrapping_add(i as u64))
                .max(now);
        }
        m.offset_ns += now - start;
        now - start
    }

    /// Write the FTL state file (atomically: temp file, fsync, rename).
    pub fn save_state(&self) -> Result<(), DeviceError> {
        let Some(path) = &self.state_file else {
            return Ok(());
        };
        let err = |source| DeviceError::StateSave {
            path: path.clone(),
            source,
        };
        let tmp = path.with_extension("tmp");
        let m = self.lock();
        let f = File::create(&tmp).map_err(err)?;
        let mut w = BufWriter::new(f);
        m.ssd.save(&mut w).map_err(err)?;
        w.flush().map_err(err)?;
        w.get_ref().sync_all().map_err(err)?;
        drop(w);
        std::fs::rename(&tmp, path).map_err(err)?;
        if let Some(dir) = path.parent()
            && let Ok(d) = File::open(if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            })
        {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Sync the data and save the FTL state (clean shutdown).
    pub fn close(&self) -> Result<(), DeviceError> {
        self.store.sync().map_err(DeviceError::Io)?;
        self.save_state()
    }
}
