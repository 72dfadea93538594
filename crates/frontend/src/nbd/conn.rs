//! The transmission phase of one NBD connection.
//!
//! A reader thread takes requests off the socket, validates them and hands
//! them to the device (up to the drive's queue depth at once); each comes
//! back as a pending completion due at its modelled time. A writer thread
//! sends the replies when they are due, in due order, not request order
//! (NBD allows replies out of order; the cookie ties them to requests), and
//! completes them for the device's accounting (latency, lateness).
//!
//! A client that stops reading its replies fills the socket buffer: the
//! writer's send times out and the connection is closed; one that sends
//! half a request and leaves ends its reader at EOF. Neither affects other
//! connections.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use log::{debug, warn};
use vm_memory::VolatileSlice;

use super::budget::{self, Budget};
use super::handshake::{Deadline, MAX_PAYLOAD, Negotiated};
use super::proto::{self, BASE_ALLOCATION_ID, REQUEST_LEN, cflags, chunk, cmd, errno, state};
use super::sock::Sock;
use vssd_device::completion::{CompletionHeap, Timing};
use vssd_device::{Connection, Device, OpKind, Pending, SECTOR, Status};

/// Most extents in one block-status reply.
pub const MAX_EXTENTS: usize = 2048;

/// A reply's payload.
#[derive(Debug)]
enum Body {
    /// No payload.
    Empty,
    /// Read data (from `offset`).
    Data(u64, Vec<u8>),
    /// `base:allocation` extents.
    Extents(Vec<(u32, u32)>),
}

/// A reply waiting for its time. Its NBD error comes from the pending
/// completion's status alone ([`nbd_errno`]).
#[derive(Debug)]
struct Out {
    cookie: u64,
    body: Body,
    /// Send as a structured reply.
    structured: bool,
    pending: Pending,
    /// The buffer bytes this reply holds, given back when it is dropped.
    _held: Option<Held>,
}

/// Bytes taken from the connection's and the daemon's budgets, given back
/// when dropped (reply sent, or dropped with its connection).
#[derive(Debug)]
struct Held {
    conn: Arc<Budget>,
    total: Arc<Budget>,
    bytes: u64,
}

impl Held {
    /// Take `bytes` from both budgets, waiting while they do not fit;
    /// `None` when the connection ends meanwhile.
    fn take(budgets: &Budgets, shared: &Shared, bytes: u64) -> Option<Held> {
        let ended = || shared.lock().writer_dead;
        if !budgets.conn.acquire(bytes, &ended) {
            return None;
        }
        if !budgets.total.acquire(bytes, &ended) {
            budgets.conn.release(bytes);
            return None;
        }
        Some(Held {
            conn: budgets.conn.clone(),
            total: budgets.total.clone(),
            bytes,
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.total.release(self.bytes);
        self.conn.release(self.bytes);
    }
}

/// A connection's buffer budget and the daemon's.
struct Budgets {
    conn: Arc<Budget>,
    total: Arc<Budget>,
}

#[derive(Default)]
struct State {
    heap: CompletionHeap<Out>,
    /// Requests handed to the device whose reply is not sent yet.
    in_flight: usize,
    reader_done: bool,
    writer_dead: bool,
}

/// What the reader and writer share.
struct Shared {
    state: Mutex<State>,
    cv: Condvar,
    /// Deliver everything at once (daemon shutting down).
    draining: Arc<AtomicBool>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A handle on a live connection, to wake its writer when the daemon stops
/// (its replies then go out at once).
pub struct Stopper {
    shared: std::sync::Weak<Shared>,
}

impl Stopper {
    /// Wake the connection's writer (after setting the shared draining flag).
    pub fn wake(&self) {
        if let Some(s) = self.shared.upgrade() {
            s.cv.notify_all();
        }
    }

    /// Whether the connection is still running.
    pub fn alive(&self) -> bool {
        self.shared.strong_count() > 0
    }
}

/// The NBD error for a device status.
pub fn nbd_errno(s: Status) -> u32 {
    match s {
        Status::Ok => 0,
        Status::Invalid | Status::Unsupported => errno::EINVAL,
        Status::NoSpace => errno::ENOSPC,
        Status::IoError | Status::Stopped => errno::EIO,
    }
}

/// A request that passed [`validate`]: what the device is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Read `len` bytes at `offset`.
    Read {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
    },
    /// Write the `len` bytes of payload that follow the header.
    Write {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
        /// Durable before the reply.
        fua: bool,
    },
    /// Flush the drive's write buffer.
    Flush,
    /// TRIM the range.
    Trim {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
        /// Durable before the reply.
        fua: bool,
    },
    /// Write zeroes over the range, deallocating unless `NO_HOLE`.
    WriteZeroes {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
        /// The client allows a hole (no `NO_HOLE` flag).
        unmap: bool,
        /// Durable before the reply.
        fua: bool,
    },
    /// A cache hint: answered at once.
    Cache,
    /// Report allocation (`base:allocation`) over the range.
    BlockStatus {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
        /// Most extents to return (1 with `REQ_ONE`).
        max_extents: usize,
    },
    /// The client ends the session.
    Disconnect,
}

/// Why a request header is not executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Answered with this status, mapped by [`nbd_errno`] (its payload,
    /// if any, still follows and is skipped).
    Refuse(Status, &'static str),
    /// Cannot be answered safely: end the connection.
    Disconnect(&'static str),
}

/// Validate a request header against the export and what was negotiated:
/// flags for the command, alignment, range, payload size. Pure (fuzzed
/// through [`proto::parse_request`]).
pub fn validate(r: &proto::Request, size: u64, neg: &Negotiated) -> Result<Command, Refusal> {
    let allowed = match r.kind {
        cmd::READ => {
            if neg.structured {
                cflags::DF
            } else {
                0
            }
        }
        cmd::WRITE | cmd::TRIM => cflags::FUA,
        cmd::WRITE_ZEROES => cflags::FUA | cflags::NO_HOLE,
        cmd::BLOCK_STATUS => cflags::REQ_ONE,
        cmd::FLUSH | cmd::CACHE | cmd::DISC => 0,
        _ => return Err(Refusal::Refuse(Status::Invalid, "unknown command")),
    };
    if r.kind == cmd::WRITE && r.len > MAX_PAYLOAD {
        return Err(Refusal::Disconnect("write payload over the 32 MiB maximum"));
    }
    if r.flags & !allowed != 0 {
        return Err(Refusal::Refuse(
            Status::Invalid,
            "flag not valid for this command",
        ));
    }
    match r.kind {
        cmd::FLUSH => return Ok(Command::Flush),
        cmd::DISC => return Ok(Command::Disconnect),
        _ => {}
    }
    if r.kind == cmd::READ && r.len > MAX_PAYLOAD {
        return Err(Refusal::Refuse(
            Status::Invalid,
            "read over the 32 MiB maximum",
        ));
    }
    if r.kind == cmd::BLOCK_STATUS && !neg.base_allocation {
        return Err(Refusal::Refuse(
            Status::Invalid,
            "no metadata context selected",
        ));
    }
    if r.kind == cmd::BLOCK_STATUS && r.len == 0 {
        // A block-status reply must hold at least one descriptor, and a
        // descriptor of zero length is not allowed: there is nothing to
        // describe, so the request is invalid.
        return Err(Refusal::Refuse(
            Status::Invalid,
            "block status of zero bytes",
        ));
    }
    if !r.offset.is_multiple_of(SECTOR) || !u64::from(r.len).is_multiple_of(SECTOR) {
        return Err(Refusal::Refuse(Status::Invalid, "not aligned to 512 bytes"));
    }
    if r.offset
        .checked_add(u64::from(r.len))
        .is_none_or(|end| end > size)
    {
        let s = if matches!(r.kind, cmd::WRITE | cmd::WRITE_ZEROES) {
            Status::NoSpace
        } else {
            Status::Invalid
        };
        return Err(Refusal::Refuse(s, "beyond the end of the export"));
    }
    let (offset, len, fua) = (r.offset, r.len, r.flags & cflags::FUA != 0);
    Ok(match r.kind {
        cmd::READ => Command::Read { offset, len },
        cmd::WRITE => Command::Write { offset, len, fua },
        cmd::TRIM => Command::Trim { offset, len, fua },
        cmd::WRITE_ZEROES => Command::WriteZeroes {
            offset,
            len,
            unmap: r.flags & cflags::NO_HOLE == 0,
            fua,
        },
        cmd::CACHE => Command::Cache,
        // The only other command `allowed` let through.
        _ => Command::BlockStatus {
            offset,
            len,
            max_extents: if r.flags & cflags::REQ_ONE != 0 {
                1
            } else {
                MAX_EXTENTS
            },
        },
    })
}

/// Whether the reply to a command of this kind is structured.
fn structured_reply(kind: u16, neg: &Negotiated) -> bool {
    neg.structured && matches!(kind, cmd::READ | cmd::BLOCK_STATUS)
}

/// The device's accounting class of an NBD command.
fn op_kind(kind: u16) -> OpKind {
    match kind {
        cmd::READ => OpKind::Read,
        cmd::WRITE => OpKind::Write,
        cmd::TRIM => OpKind::Discard,
        cmd::WRITE_ZEROES => OpKind::WriteZeroes,
        _ => OpKind::Other,
    }
}

/// Split `(offset, len)` into ranges of at most `max` bytes.
fn split(offset: u64, len: u64, max: u64) -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    let mut o = offset;
    let end = offset + len;
    while o < end {
        let n = (end - o).min(max);
        v.push((o, n));
        o += n;
    }
    v
}

/// What every connection of a server shares.
#[derive(Clone)]
pub struct ServerShared {
    /// Deliver everything at once (daemon stopping).
    pub draining: Arc<AtomicBool>,
    /// How the reply thread waits for completion times.
    pub timing: Timing,
    /// The daemon's buffer budget.
    pub buffers: Arc<Budget>,
}

/// Serve the transmission phase on `sock` until the client disconnects.
pub fn transmission(
    dev: Arc<Device>,
    conn: Connection,
    sock: Sock,
    neg: Negotiated,
    server: ServerShared,
    register: &dyn Fn(Stopper),
) {
    let ServerShared {
        draining,
        timing,
        buffers,
    } = server;
    let budgets = Budgets {
        conn: Arc::new(Budget::new(budget::PER_CONNECTION)),
        total: buffers,
    };
    let shared = Arc::new(Shared {
        state: Mutex::new(State::default()),
        cv: Condvar::new(),
        draining,
    });
    register(Stopper {
        shared: Arc::downgrade(&shared),
    });
    let writer = {
        let shared = shared.clone();
        let dev = dev.clone();
        let out = match sock.try_clone() {
            Ok(s) => s,
            Err(e) => {
                warn!("NBD: cannot clone the connection's socket: {e}");
                return;
            }
        };
        std::thread::Builder::new()
            .name("vssd-nbd-tx".into())
            .spawn(move || writer_loop(&dev, &shared, out, timing))
    };
    let writer = match writer {
        Ok(w) => w,
        Err(e) => {
            warn!("NBD: cannot start a writer thread: {e}");
            return;
        }
    };
    let r = reader_loop(&dev, &conn, &shared, &budgets, &sock, &neg);
    if let Err(e) = r {
        debug!("NBD connection {}: {e}", conn.id());
    }
    shared.lock().reader_done = true;
    shared.cv.notify_all();
    let _ = writer.join();
    let _ = sock.shutdown();
}

/// Take requests off the socket until the client leaves: read, wait for a
/// queue slot, validate, execute (or refuse), enqueue the reply.
fn reader_loop(
    dev: &Device,
    conn: &Connection,
    shared: &Shared,
    budgets: &Budgets,
    sock: &Sock,
    neg: &Negotiated,
) -> io::Result<()> {
    let mut input = sock.try_clone()?;
    let qd = dev.topology().queue_depth.max(1) as usize;
    let size = dev.capacity();
    loop {
        let Some(r) = read_request(&mut input, conn)? else {
            return Ok(());
        };
        // For the trace: the request came when its header had been read.
        let received = dev.tracing().then(|| dev.now_ns());
        if !wait_for_slot(shared, qd) {
            return Ok(());
        }
        let mut held = None;
        let (body, mut pending) = match validate(&r, size, neg) {
            Err(Refusal::Disconnect(why)) => {
                warn!("NBD connection {}: {why}; closing it", conn.id());
                return Ok(());
            }
            Ok(Command::Disconnect) => {
                debug!("NBD connection {}: client disconnects", conn.id());
                return Ok(());
            }
            Err(Refusal::Refuse(status, why)) => {
                debug!("NBD request {r:?} refused: {why}");
                if r.kind == cmd::WRITE {
                    // Keep in step: the payload follows anyway.
                    io::copy(&mut (&mut input).take(u64::from(r.len)), &mut io::sink())?;
                }
                let mut p = dev.begin(conn, op_kind(r.kind), 0);
                p.refuse(status);
                (Body::Empty, p)
            }
            Ok(c) => {
                // A READ's data until its reply is sent, a WRITE's payload
                // while it arrives: wait (reading nothing more from the
                // client) until the bytes fit the budgets.
                if let Command::Read { len, .. } | Command::Write { len, .. } = c {
                    held = Held::take(budgets, shared, u64::from(len));
                    if held.is_none() {
                        return Ok(());
                    }
                }
                let r = execute(dev, conn, c, &mut input)?;
                if matches!(c, Command::Write { .. }) {
                    held = None;
                }
                r
            }
        };
        if let Some(t) = received {
            pending.set_received(t);
        }
        enqueue(
            shared,
            Out {
                cookie: r.cookie,
                body,
                structured: structured_reply(r.kind, neg),
                pending,
                _held: held,
            },
        );
    }
}

/// Read and parse one request header; `None` at the end of the session
/// (EOF between requests, or a header that cannot be parsed).
fn read_request(input: &mut Sock, conn: &Connection) -> io::Result<Option<proto::Request>> {
    let mut h = [0u8; REQUEST_LEN];
    match input.read_exact(&mut h) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    match proto::parse_request(&h) {
        Ok(r) => Ok(Some(r)),
        Err(e) => {
            warn!("NBD connection {}: {e}; closing it", conn.id());
            Ok(None)
        }
    }
}

/// Queue depth: wait until fewer than `qd` replies are outstanding. False
/// when the writer has gone (the connection is ending).
fn wait_for_slot(shared: &Shared, qd: usize) -> bool {
    let mut st = shared.lock();
    while st.in_flight >= qd && !st.writer_dead {
        st = shared.cv.wait(st).unwrap_or_else(|e| e.into_inner());
    }
    !st.writer_dead
}

/// Run a validated command against the device (reading a write's payload
/// from `input`): the reply's body and the pending completion.
fn execute(
    dev: &Device,
    conn: &Connection,
    c: Command,
    input: &mut Sock,
) -> io::Result<(Body, Pending)> {
    let max_trim = dev.topology().max_discard_range;
    Ok(match c {
        Command::Read { offset, len } => {
            let mut buf = vec![0u8; len as usize];
            let p = dev.read(conn, offset, &[VolatileSlice::from(&mut buf[..])]);
            (Body::Data(offset, buf), p)
        }
        Command::Write { offset, len, fua } => {
            let mut buf = vec![0u8; len as usize];
            input.read_exact(&mut buf)?;
            let p = dev.write(conn, offset, &[VolatileSlice::from(&mut buf[..])], fua);
            (Body::Empty, p)
        }
        Command::Flush => (Body::Empty, dev.flush(conn)),
        Command::Trim { offset, len, fua } => {
            let ranges = split(offset, u64::from(len), max_trim);
            (Body::Empty, dev.discard(conn, &ranges, fua))
        }
        Command::WriteZeroes {
            offset,
            len,
            unmap,
            fua,
        } => {
            let ranges = split(offset, u64::from(len), max_trim);
            (Body::Empty, dev.write_zeroes(conn, &ranges, unmap, fua))
        }
        Command::Cache => (Body::Empty, dev.begin(conn, OpKind::Other, 0)),
        Command::BlockStatus {
            offset,
            len,
            max_extents,
        } => {
            // A hole reads as zeros only on a drive with deterministic zeros
            // after TRIM; otherwise it is a hole that holds something else.
            let hole = if dev.topology().unmapped_reads_zero {
                state::HOLE | state::ZERO
            } else {
                state::HOLE
            };
            let ext = dev
                .allocation(offset, u64::from(len), max_extents)
                .into_iter()
                .map(|(len, mapped)| {
                    let f = if mapped { 0 } else { hole };
                    (len as u32, f)
                })
                .collect();
            (Body::Extents(ext), dev.begin(conn, OpKind::Other, 0))
        }
        // The reader ends the session before executing anything.
        Command::Disconnect => {
            let mut p = dev.begin(conn, OpKind::Other, 0);
            p.fail(Status::Invalid);
            (Body::Empty, p)
        }
    })
}

/// Hand a reply to the writer, due at its pending completion's time.
fn enqueue(shared: &Shared, out: Out) {
    let mut st = shared.lock();
    st.in_flight += 1;
    let due = out.pending.due_ns();
    st.heap.push(due, out);
    drop(st);
    shared.cv.notify_all();
}

/// Encode one reply: its header, then the data it carries (not copied).
fn encode(o: &Out) -> (Vec<u8>, &[u8]) {
    let err = nbd_errno(o.pending.status());
    if !o.structured {
        let v = proto::simple_reply(err, o.cookie).to_vec();
        return match &o.body {
            Body::Data(_, d) if err == 0 => (v, d),
            _ => (v, &[]),
        };
    }
    if err != 0 {
        return (proto::error_chunk(o.cookie, err, "request failed"), &[]);
    }
    match &o.body {
        Body::Data(off, d) => {
            let mut v = proto::chunk_header(
                chunk::FLAG_DONE,
                chunk::OFFSET_DATA,
                o.cookie,
                8 + d.len() as u32,
            )
            .to_vec();
            v.extend(off.to_be_bytes());
            (v, d)
        }
        Body::Extents(e) => (
            proto::block_status_chunk(o.cookie, BASE_ALLOCATION_ID, e),
            &[],
        ),
        Body::Empty => (
            proto::chunk_header(chunk::FLAG_DONE, chunk::NONE, o.cookie, 0).to_vec(),
            &[],
        ),
    }
}

/// How long a reply may wait for the client to read: a client that stops
/// reading is disconnected after this.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(30);

fn writer_loop(dev: &Device, shared: &Shared, mut out: Sock, timing: Timing) {
    timing.setup_thread();
    loop {
        let batch: Vec<Out> = {
            let mut st = shared.lock();
            loop {
                let now = dev.now_ns();
                let all = shared.draining.load(Ordering::Relaxed) || st.writer_dead;
                let mut due = Vec::new();
                while let Some((_, o)) = if all {
                    st.heap.pop()
                } else {
                    st.heap.pop_due(now)
                } {
                    due.push(o);
                }
                if !due.is_empty() {
                    break due;
                }
                if st.reader_done && st.heap.is_empty() {
                    return;
                }
                st = match st.heap.next_due() {
                    // Due within the spin margin: poll rather than sleep
                    // (a wake-up would add its latency to the reply).
                    Some(d) if d.saturating_sub(now) <= timing.spin_ns => {
                        drop(st);
                        std::hint::spin_loop();
                        shared.lock()
                    }
                    Some(d) => {
                        let wait = Duration::from_nanos(d.saturating_sub(now) - timing.spin_ns);
                        shared
                            .cv
                            .wait_timeout(st, wait)
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                    }
                    None => shared.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
                };
            }
        };
        let n = batch.len();
        let mut failed = false;
        for o in batch {
            if !failed {
                let (head, data) = encode(&o);
                // One deadline for the whole reply: a timeout per write
                // restarted with every partial write of a large reply.
                let deadline = std::time::Instant::now() + SEND_TIMEOUT;
                let mut w = Deadline::new(&mut out, deadline);
                if let Err(e) = w.write_all(&head).and_then(|()| w.write_all(data)) {
                    debug!("NBD: sending a reply failed ({e}); closing the connection");
                    failed = true;
                }
            }
            if !failed {
                o.pending.complete(dev.now_ns());
            }
            // A reply that could not be sent is dropped: counted as abandoned.
        }
        let mut st = shared.lock();
        st.in_flight -= n;
        if failed {
            st.writer_dead = true;
            drop(st);
            let _ = out.shutdown();
            shared.cv.notify_all();
            // Drop what is still queued, then wait for the reader to stop.
            let mut st = shared.lock();
            while st.heap.pop().is_some() {
                st.in_flight -= 1;
            }
            drop(st);
            continue;
        }
        drop(st);
        shared.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn neg(structured: bool, meta: bool) -> Negotiated {
        Negotiated {
            structured,
            base_allocation: meta,
            flags: 0,
        }
    }

    fn req(kind: u16, flags: u16, offset: u64, len: u32) -> proto::Request {
        proto::Request {
            flags,
            kind,
            cookie: 1,
            offset,
            len,
        }
    }

    #[test]
    fn requests_are_checked_like_the_spec_says() {
        let n = neg(true, true);
        let size = 1 << 30;
        assert_eq!(
            validate(&req(cmd::READ, 0, 0, 4096), size, &n),
            Ok(Command::Read {
                offset: 0,
                len: 4096
            })
        );
        assert!(validate(&req(cmd::READ, cflags::DF, 0, 4096), size, &n).is_ok());
        assert!(matches!(
            validate(
                &req(cmd::READ, cflags::DF, 0, 4096),
                size,
                &neg(false, false)
            ),
            Err(Refusal::Refuse(Status::Invalid, _))
        ));
        assert!(matches!(
            validate(&req(cmd::READ, 0, 100, 4096), size, &n),
            Err(Refusal::Refuse(Status::Invalid, _))
        ));
        assert!(matches!(
            validate(&req(cmd::READ, 0, size - 512, 1024), size, &n),
            Err(Refusal::Refuse(Status::Invalid, _))
        ));
        assert!(matches!(
            validate(&req(cmd::WRITE, 0, size - 512, 1024), size, &n),
            Err(Refusal::Refuse(Status::NoSpace, _))
        ));
        assert!(matches!(
            validate(&req(cmd::WRITE, 0, 0, MAX_PAYLOAD + 512), size, &n),
            Err(Refusal::Disconnect(_))
        ));
        assert!(matches!(
            validate(&req(cmd::READ, 0, 0, MAX_PAYLOAD + 512), size, &n),
            Err(Refusal::Refuse(Status::Invalid, _))
        ));
        assert!(matches!(
            validate(&req(cmd::WRITE_ZEROES, cflags::FAST_ZERO, 0, 512), size, &n),
            Err(Refusal::Refuse(Status::Invalid, _))
        ));
        assert_eq!(
            validate(
                &req(cmd::WRITE_ZEROES, cflags::NO_HOLE | cflags::FUA, 0, 512),
                size,
                &n
            ),
            Ok(Command::WriteZeroes {
                offset: 0,
                len: 512,
                unmap: false,
                fua: true
            })
        );
        assert!(matches!(
            validate(&req(cmd::BLOCK_STATUS, 0, 0, 512), size, &neg(true, false)),
            Err(Refusal::Refuse(Status::Invalid, _))
        ));
        assert!(
            matches!(
                validate(&req(cmd::BLOCK_STATUS, 0, 4096, 0), size, &n),
                Err(Refusal::Refuse(Status::Invalid, _))
            ),
            "block status of length 0 has no descriptor to return"
        );
        assert!(matches!(
            validate(&req(42, 0, 0, 0), size, &n),
            Err(Refusal::Refuse(Status::Invalid, _))
        ));
        assert!(validate(&req(cmd::TRIM, 0, 0, u32::MAX - 511), size * 8, &n).is_ok());
        assert_eq!(split(0, 5 << 30, 1 << 30).len(), 5);
    }

    proptest! {
        /// Any header is either valid inside the export or refused; never a panic.
        #[test]
        fn check_never_panics_and_valid_means_inside(
            kind in 0u16..10, flags in any::<u16>(), offset in any::<u64>(), len in any::<u32>(),
            structured in any::<bool>(), meta in any::<bool>(),
        ) {
            let size = 1u64 << 30;
            let r = req(kind, flags, offset, len);
            if validate(&r, size, &neg(structured, meta)).is_ok()
                && !matches!(kind, cmd::FLUSH | cmd::DISC)
            {
                prop_assert!(offset + u64::from(len) <= size);
                prop_assert_eq!(offset % 512, 0);
            }
        }
    }
}
