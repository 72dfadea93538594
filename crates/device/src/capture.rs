//! Request tracing (`vssd serve --trace`, `vssd ctl trace start|stop`):
//! every request as the drive received it, written in vssd's binary trace
//! format ([`vssd_trace::vssd`]) off the completion path.
//!
//! A completion pushes its record, with the daemon's and the model's raw
//! clock readings, into a bounded lock-free ring ([`crossbeam_queue::ArrayQueue`],
//! allocated once when the first trace starts): no lock, no allocation,
//! one atomic compare-and-swap per record. A writer thread empties the
//! ring every [`FLUSH_EVERY`], converts the times to the trace's clock and
//! writes the records through to the file: what `ctl trace status` counts
//! is in the file. A full ring (a writer that falls behind, a slow disk)
//! makes requests go unrecorded, counted as dropped, instead of growing
//! memory or slowing the drive. The file stops growing at its size limit
//! or at a write error (a full filesystem): tracing then ends at once,
//! with a warning, and `ctl trace status` says so (`active` false, the
//! reason in `ended`); what arrives afterwards is counted as dropped until
//! `ctl trace stop`. A trace that cannot write its header (a full
//! filesystem) does not start.
//!
//! Each trace gets a generation number, carried by its records: a
//! completion that read "tracing on" just before a `stop` may push its
//! record after the writer ended; the next trace's writer discards it.

use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use serde::{Deserialize, Serialize};
use vssd_common::clock::TimeScale;
use vssd_trace::vssd::{Header, Record, Writer};

use crate::files::{FileError, create_new_private};

use Ordering::{AcqRel, Acquire, Relaxed, Release};

/// How often the writer thread writes what completed.
pub const FLUSH_EVERY: Duration = Duration::from_millis(10);
/// Records the ring holds at most (96 bytes a slot, 12 MiB, allocated
/// when the first trace starts) before requests go unrecorded.
pub const MAX_BUFFERED: usize = 128 * 1024;
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

/// One completed request in the ring: a record whose times are still the
/// raw clocks' (see [`RawRecord`]), and the trace it belongs to.
#[derive(Clone, Copy)]
struct Entry {
    generation: u32,
    raw: RawRecord,
}

/// A record as a completion knows it: `received_ns`, `due_ns` and
/// `delivered_ns` on the daemon clock; `taken_ns` on the model clock
/// (without the precondition offset) when `model_taken`, else on the
/// daemon clock (a request that never reached the model).
#[derive(Clone, Copy)]
pub(crate) struct RawRecord {
    /// The record, raw times.
    pub(crate) rec: Record,
    /// `rec.taken_ns` is a model-clock time.
    pub(crate) model_taken: bool,
}

/// The ring and what the completion path counts in it.
struct Ring {
    q: ArrayQueue<Entry>,
    /// Requests not recorded because the ring was full (this trace's).
    dropped: AtomicU64,
}

/// What the writer thread reports back.
struct Shared {
    stop: AtomicBool,
    /// Records in the file.
    records: AtomicU64,
    /// Bytes in the file.
    bytes: AtomicU64,
    /// Dropped by the writer (after the size limit or a write error).
    dropped: AtomicU64,
    /// Why the trace ended by itself, as soon as it did.
    ended: Mutex<Option<String>>,
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
    generation: AtomicU32,
    ring: OnceLock<Arc<Ring>>,
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

/// Where a completion pushes its records while a trace is being taken.
pub(crate) struct Sender<'a> {
    ring: &'a Ring,
    generation: u32,
}

impl Sender<'_> {
    /// Push one record (dropped, and counted, when the ring is full).
    #[inline]
    pub(crate) fn push(&self, raw: RawRecord) {
        let e = Entry {
            generation: self.generation,
            raw,
        };
        if self.ring.q.push(e).is_err() {
            self.ring.dropped.fetch_add(1, Relaxed);
        }
    }
}

impl Capture {
    /// Whether requests are being recorded (one relaxed load).
    #[inline]
    pub fn on(&self) -> bool {
        self.on.load(Relaxed)
    }

    /// The ring to push records to, if a trace is being taken.
    #[inline]
    pub(crate) fn sender(&self) -> Option<Sender<'_>> {
        if !self.on.load(Acquire) {
            return None;
        }
        Some(Sender {
            ring: self.ring.get()?,
            generation: self.generation.load(Acquire),
        })
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
        if let Some(a) = lock(&self.active).as_ref() {
            return Err(CaptureError::Active(a.path.clone()));
        }
        let file = create_new_private(path)?;
        self.start_on(file, path, limit, now_daemon_ns, drive)
            .inspect_err(|e| {
                if matches!(e, CaptureError::Header { .. }) {
                    let _ = std::fs::remove_file(path);
                }
            })
    }

    /// Start tracing into `out`, shown as `path`.
    fn start_on<W: Write + Seek + Send + 'static>(
        &self,
        out: W,
        path: &Path,
        limit: u64,
        now_daemon_ns: u64,
        drive: DriveInfo<'_>,
    ) -> Result<(), CaptureError> {
        let mut act = lock(&self.active);
        if let Some(a) = act.as_ref() {
            return Err(CaptureError::Active(a.path.clone()));
        }
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
        // The header goes to the file now: a filesystem without room
        // refuses the trace here rather than losing it later.
        let writer = Writer::new(BufWriter::with_capacity(1 << 20, out), header)
            .and_then(|mut w| w.flush().map(|()| w))
            .map_err(|source| CaptureError::Header {
                path: path.into(),
                source,
            })?;
        let ring = self
            .ring
            .get_or_init(|| {
                Arc::new(Ring {
                    q: ArrayQueue::new(MAX_BUFFERED),
                    dropped: AtomicU64::new(0),
                })
            })
            .clone();
        ring.dropped.store(0, Relaxed);
        let generation = self.generation.fetch_add(1, AcqRel).wrapping_add(1);
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(writer.bytes()),
            dropped: AtomicU64::new(0),
            ended: Mutex::new(None),
        });
        let w = WriterThread {
            writer,
            ring,
            shared: shared.clone(),
            generation,
            limit,
            shown: path.display().to_string(),
            scale: drive.scale,
            base: drive.scale.to_model(now_daemon_ns),
        };
        let thread = std::thread::Builder::new()
            .name("vssd-trace".into())
            .spawn(move || w.run())
            .map_err(CaptureError::Thread)?;
        *act = Some(Active {
            path: path.into(),
            limit,
            start_daemon_ns: now_daemon_ns,
            shared,
            thread: Some(thread),
        });
        *lock(&self.last) = TraceStatus::default();
        self.on.store(true, Release);
        log::info!("tracing requests to {}", path.display());
        Ok(())
    }

    /// Stop tracing (if on): the writer writes what is left and closes the
    /// file. Returns the final status.
    pub fn stop(&self) -> TraceStatus {
        self.on.store(false, Release);
        let taken = lock(&self.active).take();
        if let Some(mut a) = taken {
            a.shared.stop.store(true, Release);
            let ended = a.thread.take().and_then(|t| {
                t.thread().unpark();
                t.join().ok().flatten()
            });
            let st = self.status_of(&a, false, ended);
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
                let ended = lock(&a.shared.ended).clone();
                let finished = a.thread.as_ref().is_some_and(|t| t.is_finished());
                let active = ended.is_none() && !finished;
                let mut st = self.status_of(a, active, ended);
                st.now_ns = scale
                    .to_model(now_daemon_ns)
                    .saturating_sub(scale.to_model(a.start_daemon_ns));
                st
            }
            None => lock(&self.last).clone(),
        }
    }

    fn status_of(&self, a: &Active, active: bool, ended: Option<String>) -> TraceStatus {
        let ring_dropped = self.ring.get().map_or(0, |r| r.dropped.load(Relaxed));
        TraceStatus {
            active,
            path: Some(a.path.display().to_string()),
            records: a.shared.records.load(Relaxed),
            dropped: a.shared.dropped.load(Relaxed) + ring_dropped,
            bytes: a.shared.bytes.load(Relaxed),
            limit: a.limit,
            ended,
            now_ns: 0,
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The writer thread of one trace.
struct WriterThread<W: Write + Seek> {
    writer: Writer<BufWriter<W>>,
    ring: Arc<Ring>,
    shared: Arc<Shared>,
    generation: u32,
    limit: u64,
    shown: String,
    scale: TimeScale,
    /// The trace's start on the model clock (without the offset).
    base: u64,
}

impl<W: Write + Seek> WriterThread<W> {
    /// A raw record on the trace's clock.
    fn convert(&self, raw: &RawRecord) -> Record {
        let daemon = |ns: u64| self.scale.to_model(ns).saturating_sub(self.base);
        let mut r = raw.rec;
        r.received_ns = daemon(r.received_ns);
        r.taken_ns = if raw.model_taken {
            r.taken_ns.saturating_sub(self.base)
        } else {
            daemon(r.taken_ns)
        }
        // Rounding of the two clocks' conversions never puts the model
        // before the frontend.
        .max(r.received_ns);
        r.due_ns = daemon(r.due_ns);
        r.delivered_ns = daemon(r.delivered_ns);
        r
    }

    /// Every [`FLUSH_EVERY`] (or when told to stop) write what the ring
    /// holds, up to the size limit; then close the file. Returns why it
    /// ended by itself, if it did.
    fn run(mut self) -> Option<String> {
        let mut ended: Option<String> = None;
        loop {
            std::thread::park_timeout(FLUSH_EVERY);
            let stopping = self.shared.stop.load(Acquire);
            // What is in the ring now (bounded: no more than it holds, so
            // a busy drive cannot keep this loop from checking `stop`).
            let mut n = self.ring.q.len();
            let mut write_err = None;
            while n > 0 {
                n -= 1;
                let Some(e) = self.ring.q.pop() else { break };
                if e.generation != self.generation {
                    continue; // a late record of an earlier trace
                }
                if ended.is_some() || write_err.is_some() {
                    self.shared.dropped.fetch_add(1, Relaxed);
                    continue;
                }
                if self.writer.bytes() + vssd_trace::vssd::RECORD_LEN as u64 > self.limit {
                    ended = Some(format!(
                        "the trace reached its size limit of {} bytes",
                        self.limit
                    ));
                    self.shared.dropped.fetch_add(1, Relaxed);
                    continue;
                }
                let rec = self.convert(&e.raw);
                if let Err(err) = self.writer.write(std::slice::from_ref(&rec)) {
                    write_err = Some(format!("writing the trace failed: {err}"));
                }
            }
            // Write through: what the status counts is in the file.
            if write_err.is_none()
                && let Err(err) = self.writer.flush()
            {
                write_err = Some(format!("writing the trace failed: {err}"));
            }
            if write_err.is_none() {
                self.shared.records.store(self.writer.records(), Relaxed);
                self.shared.bytes.store(self.writer.bytes(), Relaxed);
            } else if ended.is_none() {
                // What the writer took since the last good write never
                // reached the file.
                let lost = self.writer.records() - self.shared.records.load(Relaxed);
                self.shared.dropped.fetch_add(lost, Relaxed);
            }
            if ended.is_none() {
                ended = write_err;
            }
            if let Some(why) = &ended {
                *lock(&self.shared.ended) = Some(why.clone());
                log::warn!(
                    "tracing to {} stopped: {why} after {} requests; further requests are not recorded (vssd ctl trace stop, then start a new one)",
                    self.shown,
                    self.writer.records()
                );
                if stopping {
                    break;
                }
                // Keep emptying the ring (counting what it drops) until
                // told to stop, without warning again.
                return self.drain_until_stopped(ended);
            }
            if stopping {
                break;
            }
        }
        self.finish(ended)
    }

    /// After the trace ended by itself: count what still arrives as
    /// dropped until `stop`, then close the file.
    fn drain_until_stopped(self, ended: Option<String>) -> Option<String> {
        loop {
            std::thread::park_timeout(FLUSH_EVERY);
            let stopping = self.shared.stop.load(Acquire);
            let mut n = self.ring.q.len();
            while n > 0 {
                n -= 1;
                let Some(e) = self.ring.q.pop() else { break };
                if e.generation == self.generation {
                    self.shared.dropped.fetch_add(1, Relaxed);
                }
            }
            if stopping {
                return self.finish(ended);
            }
        }
    }

    fn finish(self, mut ended: Option<String>) -> Option<String> {
        let dropped = self.shared.dropped.load(Relaxed) + self.ring.dropped.load(Relaxed);
        let failed = ended.as_deref().is_some_and(|e| e.starts_with("writing"));
        let (records, bytes) = (self.writer.records(), self.writer.bytes());
        if let Err(e) = self.writer.finish(dropped) {
            log::warn!("closing the trace {} failed: {e}", self.shown);
            ended.get_or_insert(format!("closing the trace failed: {e}"));
        } else if !failed {
            // Everything the writer took is in the file.
            self.shared.records.store(records, Relaxed);
            self.shared.bytes.store(bytes, Relaxed);
        }
        ended
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use vssd_trace::vssd::{RecOp, status};

    fn raw(t: u64) -> RawRecord {
        RawRecord {
            rec: Record {
                received_ns: t,
                taken_ns: t + 5,
                due_ns: t + 100,
                delivered_ns: t + 110,
                offset: t * 512,
                len: 512,
                conn: 1,
                frontend: 0,
                queue: 0,
                op: RecOp::Write,
                flags: 0,
                status: status::OK,
                seq: t,
            },
            model_taken: true,
        }
    }

    fn drive() -> DriveInfo<'static> {
        DriveInfo {
            capacity: 1 << 30,
            logical_block: 512,
            scale: TimeScale::default(),
            profile: "instant",
        }
    }

    /// Records pushed while a trace runs land in its file on the trace's
    /// clock; a record pushed after `stop` (a completion that saw "on"
    /// just before) is not written into the next trace.
    #[test]
    fn records_reach_their_own_trace_only() {
        let dir = tempfile::tempdir().unwrap();
        let c = Capture::default();
        assert!(c.sender().is_none());
        let a = dir.path().join("a.trace");
        c.start(&a, DEFAULT_LIMIT, 1000, drive()).unwrap();
        let s = c.sender().unwrap();
        for t in [2000, 3000] {
            s.push(raw(t));
        }
        let st = c.stop();
        assert_eq!((st.records, st.dropped), (2, 0));
        // Late: after the stop, with the first trace's generation.
        s.push(raw(4000));
        let b = dir.path().join("b.trace");
        c.start(&b, DEFAULT_LIMIT, 10_000, drive()).unwrap();
        c.sender().unwrap().push(raw(12_000));
        c.stop();
        let read = |p: &Path| {
            vssd_trace::vssd::read(std::fs::File::open(p).unwrap(), "t")
                .unwrap()
                .records
        };
        let ra = read(&a);
        assert_eq!(ra.len(), 2);
        assert_eq!(
            (ra[0].received_ns, ra[0].taken_ns, ra[0].delivered_ns),
            (1000, 1005, 1110)
        );
        let rb = read(&b);
        assert_eq!(rb.len(), 1);
        assert_eq!(rb[0].received_ns, 2000);
    }

    /// A writer that takes `room` bytes, then fails as a full filesystem does.
    struct Full {
        room: usize,
        data: std::io::Cursor<Vec<u8>>,
    }

    impl Write for Full {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let pos = self.data.position() as usize;
            if pos + b.len() > self.room {
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.data.write(b)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Seek for Full {
        fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
            self.data.seek(to)
        }
    }

    fn wait_ended(c: &Capture) -> TraceStatus {
        for _ in 0..500 {
            let st = c.status(TimeScale::default(), 0);
            if st.ended.is_some() {
                return st;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "the trace never said it ended: {:?}",
            c.status(TimeScale::default(), 0)
        );
    }

    /// A full filesystem: a trace that cannot write its header does not
    /// start; one that fails later says so at once (not active, why),
    /// and counts only what reached the file.
    #[test]
    fn a_write_error_ends_the_trace_and_the_status_says_so() {
        let c = Capture::default();
        let p = Path::new("/nowhere/t.trace");
        let none = Full {
            room: 10,
            data: Default::default(),
        };
        let e = c.start_on(none, p, DEFAULT_LIMIT, 0, drive()).unwrap_err();
        assert!(e.to_string().contains("No space left"), "{e}");
        assert!(!c.on());
        // Room for the header and two records.
        let room = vssd_trace::vssd::HEADER_LEN + 2 * vssd_trace::vssd::RECORD_LEN;
        let some = Full {
            room,
            data: Default::default(),
        };
        c.start_on(some, p, DEFAULT_LIMIT, 0, drive()).unwrap();
        let s = c.sender().unwrap();
        for t in 0..2 {
            s.push(raw(t));
        }
        // Written through: the two records are in the file now.
        for _ in 0..500 {
            if c.status(TimeScale::default(), 0).records == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(c.status(TimeScale::default(), 0).records, 2);
        for t in 2..10 {
            s.push(raw(t));
        }
        let st = wait_ended(&c);
        assert!(!st.active, "{st:?}");
        assert!(
            st.ended.as_deref().unwrap().contains("No space left"),
            "{st:?}"
        );
        assert_eq!(st.records, 2, "only what reached the file: {st:?}");
        let end = c.stop();
        assert!(!end.active && end.ended.is_some(), "{end:?}");
        assert_eq!(end.records + end.dropped, 10, "{end:?}");
    }

    /// At the size limit the status says the trace ended at once, and the
    /// records before it are in the file without waiting for `stop`.
    #[test]
    fn the_size_limit_ends_the_trace_with_its_records_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let c = Capture::default();
        let p = dir.path().join("limit.trace");
        c.start(&p, MIN_LIMIT, 0, drive()).unwrap();
        let s = c.sender().unwrap();
        let fits =
            (MIN_LIMIT as usize - vssd_trace::vssd::HEADER_LEN) / vssd_trace::vssd::RECORD_LEN;
        for t in 0..fits as u64 + 10 {
            s.push(raw(t));
        }
        let st = wait_ended(&c);
        assert!(
            !st.active && st.ended.as_deref().unwrap().contains("size limit"),
            "{st:?}"
        );
        assert_eq!(st.records, fits as u64, "{st:?}");
        let on_disk = std::fs::metadata(&p).unwrap().len();
        assert_eq!(on_disk, st.bytes, "the status counts what is in the file");
        let end = c.stop();
        assert_eq!((end.records, end.dropped), (fits as u64, 10));
    }

    /// The ring's memory is what the docs say: a slot is an entry and
    /// the queue's stamp, 96 bytes, 12 MiB in all.
    #[test]
    fn the_ring_is_12_mib() {
        let slot = std::mem::size_of::<Entry>() + std::mem::size_of::<usize>();
        assert_eq!(slot, 96);
        assert_eq!(slot * MAX_BUFFERED, 12 << 20);
    }

    /// Every record pushed is written or, when the ring was full, counted
    /// as dropped; the file's header says how many were not recorded.
    #[test]
    fn every_record_is_written_or_counted_as_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let c = Capture::default();
        let p = dir.path().join("full.trace");
        c.start(&p, DEFAULT_LIMIT, 0, drive()).unwrap();
        let s = c.sender().unwrap();
        // More than the ring holds, with no pause: some are dropped unless
        // the writer emptied the ring meanwhile.
        let n = MAX_BUFFERED as u64 + 100;
        for t in 0..n {
            s.push(raw(t));
        }
        let st = c.stop();
        assert_eq!(st.records + st.dropped, n);
        let f = vssd_trace::vssd::read(std::fs::File::open(&p).unwrap(), "t").unwrap();
        assert_eq!(f.records.len() as u64, st.records);
        assert_eq!(f.header.dropped, st.dropped);
    }
}
