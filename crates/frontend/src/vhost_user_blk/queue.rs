//! Per-queue completion scheduling: executed requests wait in a min-heap
//! until their modelled completion time; one timerfd per queue, armed at
//! the earliest deadline (absolute `CLOCK_MONOTONIC`), wakes the queue's
//! worker thread to deliver them. [`QueueSched::arm`] is the only place
//! the timer is set.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Mutex, MutexGuard};

use log::warn;

use super::exec::Done;
use vssd_device::Device;
use vssd_device::completion::{CompletionHeap, Timer};

#[derive(Default)]
struct State {
    heap: CompletionHeap<Done>,
    /// The deadline the timer is armed for (daemon clock; 0 = at once).
    armed_ns: Option<u64>,
}

/// One queue's pending completions and timer.
pub struct QueueSched {
    state: Mutex<State>,
    timer: Timer,
}

impl QueueSched {
    /// An empty queue with a disarmed timer.
    pub fn new() -> io::Result<QueueSched> {
        Ok(QueueSched {
            state: Mutex::new(State::default()),
            timer: Timer::new()?,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The timer's fd, for the worker's epoll set.
    pub fn timer_fd(&self) -> RawFd {
        self.timer.as_raw_fd()
    }

    /// Queue a completion for later delivery (call [`Self::arm`] after).
    pub fn push(&self, done: Done) {
        let due = done.due_ns();
        self.state().heap.push(due, done);
    }

    /// Set the timer `early_ns` before the earliest pending deadline — or
    /// to fire at once when `now` and anything is pending — and disarm it
    /// when nothing is. Does nothing when it is already set right.
    pub fn arm(&self, dev: &Device, now: bool, early_ns: u64) {
        let mut s = self.state();
        let want = match s.heap.next_due() {
            None => None,
            Some(_) if now => Some(0),
            Some(d) => Some(d.saturating_sub(early_ns).max(1)),
        };
        if want == s.armed_ns {
            return;
        }
        let r = match want {
            None => self.timer.disarm(),
            Some(0) => self.timer.arm_at(1),
            Some(d) => self.timer.arm_at(dev.to_monotonic(d)),
        };
        if let Err(e) = r {
            warn!("timerfd: {e}");
        }
        s.armed_ns = want;
    }

    /// The timer fired: consume it (it is disarmed until the next [`Self::arm`]).
    pub fn fired(&self) {
        self.timer.ack();
        self.state().armed_ns = None;
    }

    /// Remove the completions due at `now_ns` (all of them with `all`).
    pub fn take_due(&self, now_ns: u64, all: bool) -> Vec<Done> {
        let mut s = self.state();
        let mut out = Vec::new();
        while let Some((_, d)) = if all {
            s.heap.pop()
        } else {
            s.heap.pop_due(now_ns)
        } {
            out.push(d);
        }
        out
    }

    /// The earliest pending deadline (daemon clock).
    pub fn next_due(&self) -> Option<u64> {
        self.state().heap.next_due()
    }

    /// Pending completions.
    pub fn len(&self) -> usize {
        self.state().heap.len()
    }

    /// No pending completion.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
