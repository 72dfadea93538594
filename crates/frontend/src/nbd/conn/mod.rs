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
//!
//! This module holds what the two threads share and starts them; `reader`
//! and `writer` are the threads, and [`super::command`] checks each request
//! header.

mod reader;
mod writer;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use log::{debug, warn};

use super::budget::{self, Budget};
use super::handshake::Negotiated;
use super::sock::Sock;
use reader::reader_loop;
use vssd_device::completion::{CompletionHeap, Timing};
use vssd_device::{Connection, Device};
use writer::{Out, writer_loop};
pub use writer::{SEND_TIMEOUT, nbd_errno};

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
