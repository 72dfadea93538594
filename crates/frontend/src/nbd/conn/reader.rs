//! The reader thread of a connection: read a request, wait for a queue
//! slot, validate it, execute it against the device (or refuse it), and
//! hand its reply to the writer.

use std::io::{self, Read};

use log::{debug, warn};
use vm_memory::VolatileSlice;

use super::super::command::{Command, Refusal, op_kind, split, structured_reply, validate};
use super::super::handshake::Negotiated;
use super::super::proto::{self, REQUEST_LEN, cmd, state};
use super::super::sock::Sock;
use super::writer::{Body, Out};
use super::{Budgets, Held, Shared};
use vssd_device::{Connection, Device, OpKind, Pending, Status};

/// Take requests off the socket until the client leaves: read, wait for a
/// queue slot, validate, execute (or refuse), enqueue the reply.
pub(super) fn reader_loop(
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
