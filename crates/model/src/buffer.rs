//! The host side's queues: the write buffer (host data held until its
//! program completes, which bounds how far ahead of the NAND the host can
//! write) and the command tags (the drive's queue depth).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Write buffer and outstanding commands.
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteBuffer {
    /// Programs holding host data: (done time, units) — the buffer's drain.
    programs: BinaryHeap<Reverse<(u64, u32)>>,
    /// Units those programs hold.
    buffered_units: u64,
    /// When the last of them completes.
    last_release: u64,
    /// Latest admission (admission is in order).
    last_admit: u64,
    /// Completion times of outstanding commands (queue-depth limit).
    outstanding: BinaryHeap<Reverse<u64>>,
}

impl WriteBuffer {
    /// Heap bytes of the queues.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.outstanding.capacity() * 8 + self.programs.capacity() * 16
    }

    /// Wait, from `t`, for room for `need` units in a buffer of `cap`
    /// units, `open` of which sit in the open dpage: returns the admission
    /// time and how long the write stalled for room.
    #[inline]
    pub(crate) fn admit(&mut self, t: u64, need: u64, open: u64, cap: u64) -> (u64, u64) {
        let mut admit = t.max(self.last_admit);
        while let Some(&Reverse((done, units))) = self.programs.peek() {
            if done <= admit || self.buffered_units + open + need > cap {
                self.programs.pop();
                self.buffered_units -= units as u64;
                admit = admit.max(done);
            } else {
                break;
            }
        }
        let stall = admit - t.max(self.last_admit);
        self.last_admit = admit;
        (admit, stall)
    }

    /// A program done at `done` holds `units` host units until then.
    #[inline]
    pub(crate) fn hold(&mut self, done: u64, units: u32) {
        self.programs.push(Reverse((done, units)));
        self.buffered_units += units as u64;
        self.last_release = self.last_release.max(done);
    }

    /// When every unit now in the buffer is in NAND.
    #[inline]
    pub(crate) fn last_release(&self) -> u64 {
        self.last_release
    }

    /// Forget the commands done by `now`.
    #[inline]
    pub(crate) fn retire(&mut self, now: u64) {
        while let Some(&Reverse(t)) = self.outstanding.peek() {
            if t <= now {
                self.outstanding.pop();
            } else {
                break;
            }
        }
    }

    /// Completion of the last outstanding command.
    pub(crate) fn last_outstanding(&self) -> Option<u64> {
        self.outstanding.iter().map(|r| r.0).max()
    }

    /// When a tag is free for a new command, with `depth` tags: now if
    /// fewer are outstanding, else when the earliest of them completes
    /// (which frees its tag).
    #[inline]
    pub(crate) fn take_tag(&mut self, depth: usize) -> Option<u64> {
        if self.outstanding.len() >= depth
            && let Some(Reverse(t)) = self.outstanding.pop()
        {
            return Some(t);
        }
        None
    }

    /// A command completes at `done`.
    #[inline]
    pub(crate) fn command(&mut self, done: u64) {
        self.outstanding.push(Reverse(done));
    }
}
