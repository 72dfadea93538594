//! The request API every frontend uses: a [`Connection`] per client
//! connection, and per request a [`Pending`] guard that carries the
//! request from its submission to the delivery of its completion, with its
//! [`OpKind`] and, once the drive answered, its [`Status`] and modelled
//! completion time.
//!
//! [`Pending::complete`] records the request once, in the device's
//! accounting ([`super::stats`]) and in the trace if one is being taken;
//! a guard dropped without completing (its frontend went away) is counted
//! as abandoned. In-flight requests are the live guards, so no frontend
//! adjusts a counter by hand.

use std::sync::Arc;

use vssd_trace::vssd::{FLAG_FUA, FLAG_MORE, FLAG_UNMAP, RecOp, Record, status as trace_status};

use super::capture::RawRecord;
pub use super::op::{OpKind, Status};
use super::stats::{ConnStats, Finished, Frontend, FrontendStats, Stats, TrimOutcome};

/// What a connection's requests record into (no cycle: the device's list
/// of frontends never points back here).
pub(crate) struct ConnHandle {
    pub(crate) stats: Arc<Stats>,
    pub(crate) frontend: Arc<FrontendStats>,
    pub(crate) conn: Arc<ConnStats>,
}

impl Frontend {
    /// Record a new connection from `peer`: every request of it is
    /// accounted through the returned [`Connection`].
    pub fn connect(&self, peer: impl Into<String>) -> Connection {
        let (stats, frontend, conn) = self.open_conn(peer);
        Connection::new(ConnHandle {
            stats,
            frontend,
            conn,
        })
    }
}

/// A frontend connection as the device sees it: every request of the
/// connection is accounted through it. Dropping it marks the connection closed.
pub struct Connection {
    inner: Arc<ConnHandle>,
}

impl Connection {
    /// The accounting of a new connection of `frontend`.
    pub(crate) fn new(handle: ConnHandle) -> Connection {
        Connection {
            inner: Arc::new(handle),
        }
    }

    /// Start accounting one request of this connection: counted in flight
    /// until the returned guard completes or is dropped.
    pub fn begin(&self, op: OpKind, bytes: u64, submit_ns: u64) -> Pending {
        let h = &self.inner;
        h.stats.enter(&h.frontend, &h.conn, submit_ns);
        Pending {
            conn: self.inner.clone(),
            op,
            bytes,
            offset: 0,
            queue: 0,
            flags: 0,
            ranges: None,
            model_arrival: std::cell::Cell::new(None),
            received_ns: submit_ns,
            status: Status::Ok,
            submit_ns,
            due_ns: submit_ns,
            trim: TrimOutcome::default(),
            refused: false,
            done: false,
        }
    }

    /// The connection's number within its frontend (from 1).
    pub fn id(&self) -> u64 {
        self.inner.conn.id()
    }

    /// The frontend's id.
    pub fn frontend_id(&self) -> u32 {
        self.inner.frontend.id()
    }

    /// `KIND NAME #ID`, e.g. `nbd unix:/run/vssd.sock #3`.
    pub fn label(&self) -> String {
        let f = &self.inner.frontend;
        format!("{} {} #{}", f.kind(), f.name(), self.inner.conn.id())
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.inner.conn.close();
    }
}

/// One request between its submission and the delivery of its completion.
///
/// Holds what the completion will report. [`Pending::complete`] records it;
/// dropping it instead counts it as abandoned (its frontend went away).
#[must_use = "a request must be completed (or is counted as abandoned)"]
pub struct Pending {
    conn: Arc<ConnHandle>,
    pub(crate) op: OpKind,
    pub(crate) bytes: u64,
    /// First byte (for the trace).
    offset: u64,
    /// The frontend's queue (for the trace).
    queue: u16,
    /// Trace flags (`vssd_trace::vssd::FLAG_*`).
    flags: u8,
    /// All ranges of a DISCARD or WRITE ZEROES of more than one (for the trace).
    ranges: Option<Box<[(u64, u64)]>>,
    /// When the model took it (model clock without the precondition
    /// offset) and its place in the model's order (for the trace).
    model_arrival: std::cell::Cell<Option<(u64, u64)>>,
    /// When the frontend received it (daemon clock; for the trace):
    /// its submission unless the frontend says otherwise.
    received_ns: u64,
    pub(crate) status: Status,
    pub(crate) submit_ns: u64,
    pub(crate) due_ns: u64,
    pub(crate) trim: TrimOutcome,
    /// Refused by the frontend before it reached the drive (counted as
    /// rejected whatever its status).
    pub(crate) refused: bool,
    done: bool,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("op", &self.op)
            .field("bytes", &self.bytes)
            .field("status", &self.status)
            .field("submit_ns", &self.submit_ns)
            .field("due_ns", &self.due_ns)
            .finish()
    }
}

impl Pending {
    /// The kind of request.
    pub fn op(&self) -> OpKind {
        self.op
    }

    /// How it ended.
    pub fn status(&self) -> Status {
        self.status
    }

    /// When it was submitted (daemon clock, ns).
    pub fn submit_ns(&self) -> u64 {
        self.submit_ns
    }

    /// When the drive completes it (daemon clock, ns).
    pub fn due_ns(&self) -> u64 {
        self.due_ns
    }

    /// Bytes the request moved (or discarded / zeroed).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub(crate) fn finish(&mut self, status: Status, due_ns: u64) {
        self.status = status;
        self.due_ns = due_ns.max(self.submit_ns);
    }

    /// Where the request goes, for the trace: its first byte, its ranges
    /// if several, force unit access, unmap allowed.
    pub(crate) fn set_target(&mut self, ranges: &[(u64, u64)], fua: bool, unmap: bool) {
        self.offset = ranges.first().map_or(0, |r| r.0);
        if ranges.len() > 1 && self.conn.stats.capture.on() {
            self.ranges = Some(ranges.into());
        }
        self.flags = (u8::from(fua) * FLAG_FUA) | (u8::from(unmap) * FLAG_UNMAP);
    }

    /// The model took the request at `model_ns` (its clock without the
    /// precondition offset), as its `seq`-th; the first submission counts.
    pub(crate) fn submitted(&self, model_ns: u64, seq: u64) {
        if self.model_arrival.get().is_none() {
            self.model_arrival.set(Some((model_ns, seq)));
        }
    }

    /// The frontend's queue this request came on (virtqueue index), for
    /// the trace.
    pub fn set_queue(&mut self, queue: u16) {
        self.queue = queue;
    }

    /// When the frontend received the request (daemon clock: it popped
    /// the descriptor chain, read the NBD request header), for the trace;
    /// without it, the request's submission to the device counts. A time
    /// after the submission is ignored.
    pub fn set_received(&mut self, daemon_ns: u64) {
        self.received_ns = daemon_ns.min(self.submit_ns);
    }

    /// Append this request to the trace, if one is being taken: its raw
    /// clock readings go to the trace's ring (no lock, no allocation), its
    /// writer thread converts them.
    fn trace(&self, delivered_ns: Option<u64>) {
        let h = &self.conn;
        let Some(tx) = h.stats.capture.sender() else {
            return;
        };
        let op = match self.op {
            OpKind::Read => RecOp::Read,
            OpKind::Write => RecOp::Write,
            OpKind::Discard => RecOp::Discard,
            OpKind::WriteZeroes => RecOp::WriteZeroes,
            OpKind::Flush => RecOp::Flush,
            OpKind::Other => RecOp::Other,
        };
        let status = match (delivered_ns, self.status) {
            (None, _) => trace_status::ABANDONED,
            (_, Status::Ok) => trace_status::OK,
            (_, Status::Invalid) => trace_status::INVALID,
            (_, Status::Unsupported) => trace_status::UNSUPPORTED,
            (_, Status::IoError) => trace_status::IO_ERROR,
            (_, Status::NoSpace) => trace_status::NO_SPACE,
            (_, Status::Stopped) => trace_status::STOPPED,
        };
        // When the model took it, else (never submitted) when it came.
        let (taken, seq, model_taken) = match self.model_arrival.get() {
            Some((model_ns, seq)) => (model_ns, seq, true),
            None => (self.submit_ns, 0, false),
        };
        let rec = |offset: u64, len: u64, more: bool| RawRecord {
            rec: Record {
                received_ns: self.received_ns,
                taken_ns: taken,
                seq,
                due_ns: self.due_ns,
                delivered_ns: delivered_ns.unwrap_or(self.due_ns),
                offset,
                len,
                conn: h.conn.id().min(u32::MAX as u64) as u32,
                frontend: h.frontend.id().min(u16::MAX as u32) as u16,
                queue: self.queue,
                op,
                flags: self.flags | (u8::from(more) * FLAG_MORE),
                status,
            },
            model_taken,
        };
        match &self.ranges {
            None => tx.push(rec(self.offset, self.bytes, false)),
            Some(rs) => {
                for (i, &(o, l)) in rs.iter().enumerate() {
                    tx.push(rec(o, l, i + 1 < rs.len()));
                }
            }
        }
    }

    pub(crate) fn set_trim(&mut self, t: TrimOutcome) {
        self.trim = t;
    }

    /// Mark it failed with `status` (e.g. the frontend could not write its
    /// reply), due now.
    pub fn fail(&mut self, status: Status) {
        self.status = status;
        self.due_ns = self.submit_ns;
    }

    /// The frontend refused the request before it reached the drive, with
    /// `status` (its protocol's error comes from it): due now, and counted
    /// as rejected whatever the status (a write beyond the end is refused
    /// with [`Status::NoSpace`], NBD's ENOSPC).
    pub fn refuse(&mut self, status: Status) {
        self.fail(status);
        self.refused = true;
    }

    /// The completion reached the client at `delivered_ns` (daemon clock):
    /// record status, bytes, latency and lateness, and leave the in-flight set.
    pub fn complete(mut self, delivered_ns: u64) {
        self.done = true;
        self.trace(Some(delivered_ns));
        let h = &self.conn;
        let done = Finished {
            op: self.op,
            bytes: self.bytes,
            status: self.status,
            refused: self.refused,
            trim: self.trim,
            submit_ns: self.submit_ns,
            due_ns: self.due_ns,
        };
        h.stats.complete(&h.frontend, &h.conn, &done, delivered_ns);
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.done {
            self.trace(None);
            let h = &self.conn;
            h.stats.abandon(&h.frontend, &h.conn, self.submit_ns);
        }
    }
}
