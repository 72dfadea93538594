//! How many bytes of request and reply buffers NBD connections may hold.
//!
//! A READ's data waits in memory until its modelled time and until the
//! client reads it; a WRITE's payload is held while it arrives. Without a
//! bound, a client that never reads its replies pins 32 MiB per request.
//! Each connection has its own budget and all connections share the
//! daemon's; a reader that cannot get the bytes for its next request stops
//! reading from its socket until replies go out (back-pressure on the
//! client), and gives up when its connection ends.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use super::handshake::MAX_PAYLOAD;

/// Bytes of buffers one connection may hold (two requests of the largest
/// size; QEMU's client keeps at most 16 requests in flight, each far
/// smaller in practice).
pub const PER_CONNECTION: u64 = 2 * MAX_PAYLOAD as u64;

/// Bytes of buffers all NBD connections of the daemon may hold together,
/// unless `vssd serve --nbd-buffer-limit` says otherwise.
pub const DEFAULT_TOTAL: u64 = 512 << 20;

/// The smallest daemon-wide limit: one request of the largest size.
pub const MIN_TOTAL: u64 = MAX_PAYLOAD as u64;

/// A count of bytes held against a limit, with waiting.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: Mutex<u64>,
    cv: Condvar,
}

impl Budget {
    /// A budget of `limit` bytes (at least one request of the largest size).
    pub fn new(limit: u64) -> Budget {
        Budget {
            limit: limit.max(MIN_TOTAL),
            used: Mutex::new(0),
            cv: Condvar::new(),
        }
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes held now.
    pub fn used(&self) -> u64 {
        *self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take `n` bytes, waiting while they do not fit; `false` (nothing
    /// taken) once `give_up` says so, checked at least every 50 ms.
    pub fn acquire(&self, n: u64, give_up: &dyn Fn() -> bool) -> bool {
        let n = n.min(self.limit);
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        while *used + n > self.limit {
            if give_up() {
                return false;
            }
            used = self
                .cv
                .wait_timeout(used, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *used += n;
        true
    }

    /// Give back `n` bytes taken with [`Budget::acquire`].
    pub fn release(&self, n: u64) {
        let n = n.min(self.limit);
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        *used = used.saturating_sub(n);
        drop(used);
        self.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn waits_while_over_and_gives_up_when_told() {
        let b = Arc::new(Budget::new(64 << 20));
        assert!(b.acquire(32 << 20, &|| false));
        assert!(b.acquire(32 << 20, &|| false));
        assert_eq!(b.used(), 64 << 20);
        // Over the limit: gives up when told, holding nothing more.
        assert!(!b.acquire(1, &|| true));
        assert_eq!(b.used(), 64 << 20);
        // A waiter gets its bytes once some are released.
        let stop = Arc::new(AtomicBool::new(false));
        let (b2, s2) = (b.clone(), stop.clone());
        let t = std::thread::spawn(move || b2.acquire(16 << 20, &|| s2.load(Ordering::SeqCst)));
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(b.used(), 64 << 20, "still waiting");
        b.release(32 << 20);
        assert!(t.join().unwrap());
        assert_eq!(b.used(), 48 << 20);
        // The limit never goes under one largest request.
        assert_eq!(Budget::new(1).limit(), MIN_TOTAL);
    }
}
