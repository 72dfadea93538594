//! The writer thread of a connection: send each reply when it is due (in
//! due order, not request order), and complete it for the device's
//! accounting.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::Duration;

use log::debug;

use super::super::handshake::Deadline;
use super::super::proto::{self, BASE_ALLOCATION_ID, chunk, errno};
use super::super::sock::Sock;
use super::{Held, Shared};
use vssd_device::completion::Timing;
use vssd_device::{Device, Pending, Status};

/// A reply's payload.
#[derive(Debug)]
pub(super) enum Body {
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
pub(super) struct Out {
    pub(super) cookie: u64,
    pub(super) body: Body,
    /// Send as a structured reply.
    pub(super) structured: bool,
    pub(super) pending: Pending,
    /// The buffer bytes this reply holds, given back when it is dropped.
    pub(super) _held: Option<Held>,
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

pub(super) fn writer_loop(dev: &Device, shared: &Shared, mut out: Sock, timing: Timing) {
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
