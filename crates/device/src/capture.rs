//! Request tracing (`vssd serve --trace`, `vssd ctl trace start|stop`):
//! every request as the drive received it, written in vssd's binary trace
//! format ([`vssd_trace::vssd`]) off the completion path.
//!
//! A completion appends a 56-byte record to a buffer under a lock held
//! for the push alone; a writer thread takes the buffer every
//! [`FLUSH_EVERY`] and writes it. The buffer holds at most
//! [`MAX_BUFFERED`] records: a writer that falls behind (a slow disk)
//! makes requests go unrecorded, counted as dropped, instead of growing
//! memory or slowing the drive. The file stops growing at its size limit:
//! tracing then ends, with a warning and the reason in `ctl trace status`.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use vssd_common::clock::TimeScale;
use vssd_trace::vssd::{Header, Record, Writer};

use crate::files::{FileError, create_new_private};

/// How often the writer thread writes what completed.
pub const FLUSH_EVERY: Duration = Duration::from_millis(20);
/// Records held in memory at most (14 MiB) before requests go unrecorded.
pub const MAX_BUFFERED: usize = 256 * 1024;
/// Default size limit of a trace file.
pub const DEFAULT_LIMIT: u64 = 4 << 30;
/// Smallest size limit accepted.
pub const MIN_LIMIT: u64 = 1 << 20;

/// Why tracing could not start.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// Already tracing.
    #[error("already tracing to {0} (vssd ctl trace stop first)")]
    Active(PathBuf),
    /// The file could not be created (it must not exist).
    #[error(transparent)]
    File(#[from] FileError),
    /// Writing the header failed.
    #[error("cannot write the trace header to {path}: {source}")]
    Header {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A limit below [`MIN_LIMIT`].
    #[error("a trace size limit of {0} bytes is too small (at least 1 MiB)")]
    LimitTooSmall(u64),
    /// The writer thread could not start.
    #[error("cannot start the trace writer thread: {0}")]
    Thread(std::io::Error),
}

/// What `ctl trace status` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceStatus {
    /// Tracing now.
    pub active: bool,
    /// The file of the current (or last) trace.
    pub path: Option<String>,
    /// Records written to it.
    pub records: u64,
    /// Requests not recorded (writer behind, or after the size limit).
    pub dropped: u64,
    /// Bytes of the file.
    pub bytes: u64,
    /// Its size limit.
    pub limit: u64,
    /// Why the last trace ended, if it ended by itself (limit, write error).
    pub ended: Option<String>,
    /// Drive time since the trace started, ns, when this status was taken
    /// (0 when no trace is being taken): records' times are on this clock.
    #[serde(default)]
    pub now_ns: u64,
}

struct Shared {
    buf: Mutex<Vec<Record>>,
    wake: Condvar,
    stop: AtomicBool,
    dropped: AtomicU64,
    records: AtomicU64,
    bytes: AtomicU64,
}

struct Active {
    path: PathBuf,
    limit: u64,
    start_daemon_ns: u64,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Option<String>>>,
}

/// The trace of one drive: off, or writing to a file.
#[derive(Default)]
pub struct Capture {
    on: AtomicBool,
    active: Mutex<Option<Active>>,
    last: Mutex<TraceStatus>,
}

/// What the trace needs to know of the drive.
pub struct DriveInfo<'a> {
    /// Capacity, bytes.
    pub capacity: u64,
    /// Logical block size.
    pub logical_block: u32,
    /// Time scale.
    pub scale: TimeScale,
    /// Profile name.
    pub profile: &'a str,
}

impl Capture {
    /// Whether requests are being recorded (one relaxed load).
    #[inline]
    pub fn on(&self) -> bool {
        self.on.load(Relaxed)
    }

    /// Start tracing to `path` (a new file, mode 0600) from `now_daemon_ns`.
    pub fn start(
        &self,
        path: &Path,
        limit: u64,
        now_daemon_ns: u64,
        drive: DriveInfo<'_>,
    ) -> Result<(), CaptureError> {
        if limit < MIN_LIMIT {
            return Err(CaptureError::LimitTooSmall(limit));
        }
        let mut act = lock(&self.active);
        if let Some(a) = act.as_ref() {
            return Err(CaptureError::Active(a.path.clone()));
        }
        let file = create_new_private(path)?;
        let header = Header {
            capacity: drive.capacity,
            logical_block: drive.logical_block,
            time_scale_milli: (drive.scale.factor() * 1000.0).round() as u32,
            start_unix_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0),
            records: 0,
            dropped: 0,
            profile: drive.profile.to_string(),
        };
        let writer =
            Writer::new(BufWriter::with_capacity(1 << 20, file), header).map_err(|source| {
                let _ = std::fs::remove_file(path);
                CaptureError::Header {
                    path: path.into(),
                    source,
                }
            })?;
        let shared = Arc::new(Shared {
            buf: Mutex::new(Vec::with_capacity(4096)),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(writer.bytes()),
        });
        let s2 = shared.clone();
        let shown = path.display().to_string();
        let thread = std::thread::Builder::new()
            .name("vssd-trace".into())
            .spawn(move || write_loop(writer, &s2, limit, &shown))
            .map_err(CaptureError::Thread)?;
        *act = Some(Active {
            path: path.into(),
            limit,
            start_daemon_ns: now_daemon_ns,
            shared,
            thread: Some(thread),
        });
        *lock(&self.last) = TraceStatus::default();
        self.on.store(true, Relaxed);
        log::info!("tracing requests to {}", path.display());
        Ok(())
    }

    /// Stop tracing (if on): the writer writes what is left and closes the
    /// file. Returns the final status.
    pub fn stop(&self) -> TraceStatus {
        self.on.store(false, Relaxed);
        let taken = lock(&self.active).take();
        if let Some(mut a) = taken {
            a.shared.stop.store(true, Relaxed);
            a.shared.wake.notify_all();
            let ended = a.thread.take().and_then(|t| t.join().ok()).flatten();
            let st = status_of(&a, false, ended);
            *lock(&self.last) = st;
        }
        lock(&self.last).clone()
    }

    /// The current or last trace, at daemon time `now_daemon_ns`.
    pub fn status(&self, scale: TimeScale, now_daemon_ns: u64) -> TraceStatus {
        let act = lock(&self.active);
        match act.as_ref() {
            Some(a) => {
                // Ended by itself (limit, write error): report it as ended.
                let finished = a.thread.as_ref().is_some_and(|t| t.is_finished());
                let mut st = status_of(a, !finished, None);
                st.now_ns = scale
                    .to_model(now_daemon_ns)
                    .saturating_sub(scale.to_model(a.start_daemon_ns));
                st
            }
            None => lock(&self.last).clone(),
        }
    }

    /// Record one completed request: `rec` makes its record with the
    /// trace's clock.
    pub(crate) fn record(&self, scale: TimeScale, rec: impl FnOnce(&TraceClock) -> Vec<Record>) {
        let act = lock(&self.active);
        let Some(a) = act.as_ref() else { return };
        let clock = TraceClock {
            scale,
            base: scale.to_model(a.start_daemon_ns),
        };
        let rs = rec(&clock);
        let mut buf = lock(&a.shared.buf);
        if buf.len() + rs.len() > MAX_BUFFERED {
            a.shared.dropped.fetch_add(rs.len() as u64, Relaxed);
            return;
        }
        buf.extend(rs);
    }
}

/// The trace's clock: drive-time ns since the trace started.
pub(crate) struct TraceClock {
    scale: TimeScale,
    base: u64,
}

impl TraceClock {
    /// A daemon-clock time on the trace's clock.
    pub(crate) fn daemon(&self, daemon_ns: u64) -> u64 {
        self.scale.to_model(daemon_ns).saturating_sub(self.base)
    }

    /// A model-clock time (without the precondition offset) on the
    /// trace's clock.
    pub(crate) fn model(&self, model_ns: u64) -> u64 {
        model_ns.saturating_sub(self.base)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop();
    }
}

fn status_of(a: &Active, active: bool, ended: Option<String>) -> TraceStatus {
    TraceStatus {
        active,
        path: Some(a.path.display().to_string()),
        records: a.shared.records.load(Relaxed),
        dropped: a.shared.dropped.load(Relaxed),
        bytes: a.shared.bytes.load(Relaxed),
        limit: a.limit,
        ended,
        now_ns: 0,
    }
}

/// The writer thread: every [`FLUSH_EVERY`] (or when told to stop) write
/// the buffered records, up to the size limit. Returns why it ended by
/// itself, if it did.
fn write_loop(
    mut w: Writer<BufWriter<File>>,
    s: &Shared,
    limit: u64,
    shown: &str,
) -> Option<String> {
    let mut batch: Vec<Record> = Vec::with_capacity(4096);
    let mut ended: Option<String> = None;
    loop {
        let stopping = {
            let buf = lock(&s.buf);
            let (mut buf, _) = s
                .wake
                .wait_timeout_while(buf, FLUSH_EVERY, |_| !s.stop.load(Relaxed))
                .unwrap_or_else(|e| e.into_inner());
            std::mem::swap(&mut *buf, &mut batch);
            s.stop.load(Relaxed)
        };
        if ended.is_none() && !batch.is_empty() {
            let room =
                (limit.saturating_sub(w.bytes()) / vssd_trace::vssd::RECORD_LEN as u64) as usize;
            let n = batch.len().min(room);
            if let Err(e) = w.write(&batch[..n]) {
                ended = Some(format!("writing the trace failed: {e}"));
            } else if n < batch.len() {
                ended = Some(format!("the trace reached its size limit of {limit} bytes"));
                s.dropped.fetch_add((batch.len() - n) as u64, Relaxed);
            }
            s.records.store(w.records(), Relaxed);
            s.bytes.store(w.bytes(), Relaxed);
            if let Some(why) = &ended {
                log::warn!(
                    "tracing to {shown} stopped: {why} after {} requests; further requests are not recorded (vssd ctl trace stop, then start a new one)",
                    w.records()
                );
            }
        } else if ended.is_some() {
            s.dropped.fetch_add(batch.len() as u64, Relaxed);
        }
        batch.clear();
        if stopping {
            break;
        }
    }
    match w.finish(s.dropped.load(Relaxed)) {
        Ok(_) => {}
        Err(e) => {
            log::warn!("closing the trace {shown} failed: {e}");
            ended.get_or_insert(format!("closing the trace failed: {e}"));
        }
    }
    s.bytes.store(w_bytes_final(&s.records), Relaxed);
    ended
}

fn w_bytes_final(records: &AtomicU64) -> u64 {
    vssd_trace::vssd::HEADER_LEN as u64
        + records.load(Relaxed) * vssd_trace::vssd::RECORD_LEN as u64
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
