//! What the device counts outside the model: the requests' statistics
//! and queue depth ([`Stats`]), the TRIM audit's log, the recent write
//! amplification window, the I/O warnings; and the reports built from them
//! with the model's counters (`ctl stats`, `ctl smart`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use log::warn;
use vssd_common::clock::TimeScale;
use vssd_model::Counters;

use crate::error::DeviceError;
use crate::hist;
use crate::report::{DriveReport, StatsReport, WindowReport};
use crate::request::Pending;
use crate::smart;
use crate::stats::{Frontend, Stats};
use crate::trimlog::{TrimLog, TrimRecord};
use crate::{Device, rss_bytes};

/// One counter sample for the recent write-amplification window.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at_ns: u64,
    host_written: u64,
    nand_programmed: u64,
}

/// Samples kept (one per [`Device::sample`] call, normally each second).
const SAMPLES_KEPT: usize = 61;

/// The device's accounting.
pub(crate) struct Accounting {
    stats: Arc<Stats>,
    samples: Mutex<VecDeque<Sample>>,
    io_warnings: AtomicU64,
    trim_log: TrimLog,
}

impl Accounting {
    /// Nothing counted yet; latencies recorded in drive time (`scale`).
    pub fn new(scale: TimeScale) -> Accounting {
        Accounting {
            stats: Arc::new(Stats::with_scale(scale)),
            samples: Mutex::new(VecDeque::with_capacity(SAMPLES_KEPT)),
            io_warnings: AtomicU64::new(0),
            trim_log: TrimLog::default(),
        }
    }

    /// The request statistics.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The TRIM log.
    pub fn trim_log(&self) -> &TrimLog {
        &self.trim_log
    }

    /// Log a failed request, the first `limit` in full, then count them.
    pub fn warn_io(&self, p: &Pending, e: &DeviceError, limit: u64) {
        let n = self.io_warnings.fetch_add(1, Relaxed) + 1;
        let cause = std::error::Error::source(e)
            .map(|s| format!(": {s}"))
            .unwrap_or_default();
        if n <= limit {
            warn!("{:?} of {} bytes failed: {e}{cause}", p.op(), p.bytes());
            if n == limit {
                warn!("further I/O errors are only counted (ctl stats: errors)");
            }
        }
    }

    /// Forget the latencies and the window (a secure erase).
    pub fn reset(&self) {
        self.stats.reset();
        lock(&self.samples).clear();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Device {
    /// The device's statistics (read-only for frontends: use [`Pending`]).
    pub fn stats(&self) -> &Stats {
        self.accounting.stats()
    }

    /// Register a frontend (one listener): `kind` (`vhost-user-blk`, `nbd`),
    /// where it listens, and details shown by `ctl stats`.
    pub fn register_frontend(
        &self,
        kind: &'static str,
        name: impl Into<String>,
        info: impl Into<String>,
    ) -> Frontend {
        self.accounting.stats.register_frontend(kind, name, info)
    }

    /// TRIM log records after sequence number `after` (at most `max`), and
    /// how many after it were already dropped from the ring.
    pub fn trim_log(&self, after: u64, max: usize) -> (Vec<TrimRecord>, u64) {
        self.accounting.trim_log.since(after, max)
    }

    /// The model's counters, with the drive's idle-time work done up to now
    /// (it is otherwise done when the next request arrives).
    pub fn counters(&self) -> Counters {
        let now = self.drive.model_clock(self.now_ns());
        let mut core = self.drive.lock();
        core.ssd.catch_up(now);
        core.ssd.counters()
    }

    /// The drive's SMART view, from its counters now (`vssd ctl smart`).
    pub fn smart(&self) -> smart::SmartReport {
        let c = self.counters();
        let spare = self.drive.lock().ssd.spare_percent();
        let f = self.faults.registry().report();
        let e = smart::Errors {
            uncorrectable_reads: f.counters.uncorrectable_reads,
            power_cuts: self.drive.lock().power.cuts(),
            spare_percent: spare,
        };
        smart::report_with(self.profile(), &c, &e)
    }

    /// Record a counter sample for the recent write-amplification window
    /// (call about once a second).
    pub fn sample(&self) {
        self.poll_power();
        self.faults
            .check_end_of_life(self.profile(), &self.drive.lock().ssd);
        let c = self.counters();
        let mut s = lock(&self.accounting.samples);
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
        let s = lock(&self.accounting.samples);
        let first = s.front()?;
        let host = c.host_written_bytes.saturating_sub(first.host_written);
        let nand = c
            .nand_bytes_programmed
            .saturating_sub(first.nand_programmed);
        Some(WindowReport {
            seconds: self
                .drive
                .model_clock(self.now_ns().saturating_sub(first.at_ns)) as f64
                / 1e9,
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
        let now = self.drive.model_clock(self.now_ns());
        let (counters, model_bytes) = {
            let mut core = self.drive.lock();
            core.ssd.catch_up(now);
            (core.ssd.counters(), core.ssd.memory_bytes() as u64)
        };
        let store = self.drive.store();
        let stats = self.stats();
        StatsReport {
            drive: DriveReport {
                profile: self.profile().name.clone(),
                capacity: self.capacity(),
                backing: store.path().map(|p| p.display().to_string()),
                allocated_bytes: store.allocated_bytes(),
                serial: self.profile().identity().serial,
                identity: Some(self.profile().identity()),
                stopped: self.stopped().map(str::to_string),
                model_bytes,
                rss_bytes: rss_bytes(),
                pending_zero_bytes: store.pending_zero_bytes(),
                time_scale: self.drive.scale().factor(),
            },
            connection: stats.connection_report(),
            frontends: stats.frontends_report(),
            recent: self.recent_window(&counters),
            counters,
            lateness: hist::Summary::of(stats.lateness()),
            ops: stats.ops_report(),
            faults: self.faults(),
        }
    }
}
