//! The slow-op thread: requests that may block for long (FLUSH's
//! `fdatasync`, DISCARD and WRITE_ZEROES punching or zeroing big ranges)
//! run here instead of on their queue's thread, so completions of other
//! requests are not held up behind them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};

/// A lazily started worker thread fed through a channel.
pub struct SlowOps<J> {
    tx: Mutex<Option<Sender<J>>>,
    pending: Arc<AtomicUsize>,
}

impl<J> Default for SlowOps<J> {
    fn default() -> Self {
        SlowOps {
            tx: Mutex::new(None),
            pending: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl<J: Send + 'static> SlowOps<J> {
    /// Hand `job` to the worker, starting it on first use with the handler
    /// `make_handler` builds. The handler returns false when its owner is
    /// gone; the thread then ends. The job comes back if it cannot be
    /// handed over (the caller then runs it itself).
    pub fn send<F>(&self, job: J, make_handler: impl FnOnce() -> F) -> Result<(), J>
    where
        F: FnMut(J) -> bool + Send + 'static,
    {
        let mut tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        if tx.is_none() {
            let (t, rx) = mpsc::channel::<J>();
            let mut handle = make_handler();
            let pending = self.pending.clone();
            let spawned = std::thread::Builder::new()
                .name("vssd-slow-ops".into())
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        let go_on = handle(job);
                        pending.fetch_sub(1, Ordering::SeqCst);
                        if !go_on {
                            break;
                        }
                    }
                });
            if spawned.is_err() {
                return Err(job);
            }
            *tx = Some(t);
        }
        let Some(t) = tx.as_ref() else {
            return Err(job);
        };
        self.pending.fetch_add(1, Ordering::SeqCst);
        if let Err(mpsc::SendError(job)) = t.send(job) {
            // The thread ended (its owner is gone): start afresh next time.
            self.pending.fetch_sub(1, Ordering::SeqCst);
            *tx = None;
            return Err(job);
        }
        Ok(())
    }

    /// Jobs handed over and not finished.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn jobs_run_off_thread_and_are_counted() {
        let slow = SlowOps::<u32>::default();
        let (tx, rx) = mpsc::channel();
        for i in 0..3 {
            let tx = tx.clone();
            slow.send(i, move || {
                move |j| {
                    tx.send(j).unwrap();
                    true
                }
            })
            .unwrap();
        }
        let got: Vec<u32> = (0..3)
            .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        assert_eq!(got, vec![0, 1, 2]);
        let start = Instant::now();
        while slow.pending() > 0 && start.elapsed() < Duration::from_secs(10) {
            std::thread::yield_now();
        }
        assert_eq!(slow.pending(), 0);
    }
}
