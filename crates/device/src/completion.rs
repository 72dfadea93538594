//! Delivering completions at their modelled time.
//!
//! Each queue keeps a min-heap of pending completions and one timerfd armed
//! at the earliest deadline, as an absolute `CLOCK_MONOTONIC` time so no
//! drift accumulates. The timer's fd is polled by the queue's worker thread,
//! which lowers its timer slack to 1 ns ([`lower_timer_slack`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub use vssd_common::clock::monotonic_ns;

/// Set the calling thread's timer slack to 1 ns (default 50 µs), so waits
/// on this thread wake when asked to.
pub fn lower_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and affects only
    // the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// How the threads that serve requests and deliver completions are
/// scheduled (`vssd serve --sched`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchedPolicy {
    /// `batch` for a drive that models no time (`instant`), else `normal`.
    #[default]
    Auto,
    /// `SCHED_OTHER`: a thread woken by a guest's kick or its timer
    /// usually preempts whatever runs on the CPU (QEMU's vCPUs).
    Normal,
    /// `SCHED_BATCH`: woken threads do not preempt: on a host without a
    /// spare core the vCPU that kicked keeps running, more requests queue
    /// up, and their completions reach the guest in fewer interrupts.
    /// Completions may be late by up to a scheduler slice.
    Batch,
    /// `SCHED_FIFO` priority 1: due completions preempt everything else.
    Realtime,
}

impl SchedPolicy {
    /// Every policy, with the name the command line gives it.
    pub const NAMES: [(&'static str, SchedPolicy); 4] = [
        ("auto", SchedPolicy::Auto),
        ("normal", SchedPolicy::Normal),
        ("batch", SchedPolicy::Batch),
        ("realtime", SchedPolicy::Realtime),
    ];

    /// The policy called `name` (see [`Self::NAMES`]).
    pub fn from_name(name: &str) -> Option<SchedPolicy> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, p)| p)
    }

    /// `Auto` made definite for a drive that does (`timed`) or does not
    /// model time.
    pub fn resolve(self, timed: bool) -> SchedPolicy {
        match self {
            SchedPolicy::Auto if timed => SchedPolicy::Normal,
            SchedPolicy::Auto => SchedPolicy::Batch,
            p => p,
        }
    }
}

/// How the threads that deliver completions wait for their time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Their scheduling policy.
    pub sched: SchedPolicy,
    /// Spin (polling the clock, and the ring for vhost-user) instead of
    /// sleeping when the next completion is due within this many ns; the
    /// timer is armed this much early. 0: always sleep.
    pub spin_ns: u64,
}

/// Default spin margin (`vssd serve --spin-us`).
pub const DEFAULT_SPIN_NS: u64 = 50_000;

impl Default for Timing {
    fn default() -> Self {
        Timing {
            sched: SchedPolicy::Auto,
            spin_ns: DEFAULT_SPIN_NS,
        }
    }
}

impl Timing {
    /// Set up the calling thread to deliver completions: timer slack of
    /// 1 ns, and the scheduling policy (`Auto` counts as `Normal` here:
    /// resolve it first with [`SchedPolicy::resolve`]).
    pub fn setup_thread(&self) {
        lower_timer_slack();
        match self.sched {
            SchedPolicy::Auto | SchedPolicy::Normal => {}
            SchedPolicy::Batch => set_policy(libc::SCHED_BATCH, 0, "SCHED_BATCH"),
            SchedPolicy::Realtime => set_policy(libc::SCHED_FIFO, 1, "SCHED_FIFO (--realtime)"),
        }
    }
}

/// Put the calling thread under scheduling `policy` at `priority`
/// (`SCHED_BATCH`: its wake-ups do not preempt running threads;
/// `SCHED_FIFO` 1: the lowest real-time priority, so it preempts ordinary
/// threads such as QEMU's vCPUs when a completion is due). A refusal is
/// logged and the thread keeps its policy.
fn set_policy(policy: libc::c_int, priority: libc::c_int, what: &str) {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
    let r = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if r != 0 {
        log::warn!("cannot use {what}: {}", io::Error::last_os_error());
    }
}

/// A one-shot timerfd on `CLOCK_MONOTONIC` with absolute deadlines.
#[derive(Debug)]
pub struct Timer {
    fd: OwnedFd,
}

impl Timer {
    /// A disarmed, non-blocking timer.
    pub fn new() -> io::Result<Timer> {
        // SAFETY: timerfd_create takes scalar flags and returns a new fd or -1.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Timer { fd })
    }

    fn set(&self, abs_ns: u64) -> io::Result<()> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (abs_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (abs_ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: the fd is a timerfd we own; `spec` is a valid itimerspec and
        // the old-value pointer may be null.
        let r = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Fire at `abs_ns` (`CLOCK_MONOTONIC`); a past deadline fires at once.
    pub fn arm_at(&self, abs_ns: u64) -> io::Result<()> {
        // 0 would disarm: the earliest real deadline is 1 ns.
        self.set(abs_ns.max(1))
    }

    /// Cancel.
    pub fn disarm(&self) -> io::Result<()> {
        self.set(0)
    }

    /// Consume an expiry (non-blocking); false if it had not fired.
    pub fn ack(&self) -> bool {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into the valid local buffer.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                8,
            )
        };
        n == 8
    }
}

impl AsRawFd for Timer {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

struct Entry<T> {
    due_ns: u64,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.due_ns, self.seq) == (o.due_ns, o.seq)
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Entry<T> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.due_ns, self.seq).cmp(&(o.due_ns, o.seq))
    }
}

/// Pending completions ordered by deadline (ties: submission order).
pub struct CompletionHeap<T> {
    heap: BinaryHeap<Reverse<Entry<T>>>,
    seq: u64,
}

impl<T> Default for CompletionHeap<T> {
    fn default() -> Self {
        CompletionHeap {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<T> CompletionHeap<T> {
    /// Add a completion due at `due_ns`.
    pub fn push(&mut self, due_ns: u64, item: T) {
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            due_ns,
            seq: self.seq,
            item,
        }));
    }

    /// The earliest deadline.
    pub fn next_due(&self) -> Option<u64> {
        self.heap.peek().map(|e| e.0.due_ns)
    }

    /// Remove the earliest completion if it is due at or before `now_ns`.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<(u64, T)> {
        if self.next_due()? <= now_ns {
            self.heap.pop().map(|e| (e.0.due_ns, e.0.item))
        } else {
            None
        }
    }

    /// Remove the earliest completion whatever its deadline.
    pub fn pop(&mut self) -> Option<(u64, T)> {
        self.heap.pop().map(|e| (e.0.due_ns, e.0.item))
    }

    /// Pending completions.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// No pending completions.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_is_batch_only_for_a_drive_that_models_no_time() {
        assert_eq!(SchedPolicy::Auto.resolve(false), SchedPolicy::Batch);
        assert_eq!(SchedPolicy::Auto.resolve(true), SchedPolicy::Normal);
        for p in [
            SchedPolicy::Normal,
            SchedPolicy::Batch,
            SchedPolicy::Realtime,
        ] {
            assert_eq!(p.resolve(false), p);
            assert_eq!(p.resolve(true), p);
        }
    }

    #[test]
    fn heap_orders_by_deadline_then_submission() {
        let mut h = CompletionHeap::default();
        h.push(30, "c");
        h.push(10, "a");
        h.push(20, "b1");
        h.push(20, "b2");
        assert_eq!(h.next_due(), Some(10));
        assert_eq!(h.pop_due(5), None);
        assert_eq!(h.pop_due(20), Some((10, "a")));
        assert_eq!(h.pop_due(20), Some((20, "b1")));
        assert_eq!(h.pop_due(20), Some((20, "b2")));
        assert_eq!(h.pop_due(20), None);
        assert_eq!(h.len(), 1);
        assert_eq!(h.pop(), Some((30, "c")));
        assert!(h.is_empty());
    }

    #[test]
    fn timer_fires_at_absolute_deadline() {
        lower_timer_slack();
        let t = Timer::new().unwrap();
        assert!(!t.ack());
        let start = monotonic_ns();
        t.arm_at(start + 2_000_000).unwrap();
        let mut pfd = libc::pollfd {
            fd: t.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, 1000) };
        assert_eq!(n, 1);
        assert!(monotonic_ns() >= start + 2_000_000);
        assert!(t.ack());
        t.arm_at(start).unwrap();
        t.disarm().unwrap();
        assert!(!t.ack());
    }
}
