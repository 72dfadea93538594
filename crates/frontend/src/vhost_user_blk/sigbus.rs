//! Guest memory that faults: a vhost-user frontend can shrink the file
//! behind its memory table after the daemon mapped it, and the next access
//! to a page past the new end raises SIGBUS, which would kill the daemon.
//!
//! The region check at SET_MEM_TABLE cannot prevent it (the file can
//! shrink any time later), locking the mapping does not either (truncation
//! unmaps locked pages too), and unwinding out of a signal handler is not
//! possible in Rust. So the handler installed here looks the faulting
//! address up in a table of the guest memory mappings currently alive; if
//! it is one of them, it maps a private zero page over the faulting page
//! (the access then completes, reading zeros or writing into that page),
//! records the fault against the mapping, and returns. The backend checks
//! [`Guard::faulted`] after touching guest memory: it then stops the
//! frontend's queues, fails the requests it was serving, and waits for the
//! frontend to go away; the next frontend gets fresh mappings. A SIGBUS
//! anywhere else goes to the handler that was there before (Rust's stack
//! overflow handler) or kills the process as it would have.
//!
//! Data moved by system calls (`pread`/`pwrite` on the backing file) never
//! raises SIGBUS: the kernel returns EFAULT, an I/O error for that request.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

/// Guest memory mappings watched at once (vhost-user allows 8 regions per
/// table, 32 with memory slots; a few tables may overlap while an old one
/// is still referenced).
const SLOTS: usize = 256;

struct Slot {
    /// Start address; 0 while free.
    start: AtomicUsize,
    len: AtomicUsize,
    /// A fault was absorbed in this mapping.
    hit: AtomicBool,
    /// The fault's address (the first one).
    at: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)] // an array initialiser only
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    hit: AtomicBool::new(false),
    at: AtomicUsize::new(0),
};

static TABLE: [Slot; SLOTS] = [FREE; SLOTS];
static PAGE: AtomicUsize = AtomicUsize::new(4096);
static INSTALL: Once = Once::new();
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// Faults absorbed so far, all mappings: one load tells a request path
/// whether to look further.
static FAULTS: AtomicU64 = AtomicU64::new(0);
/// The SIGBUS action before ours, for faults that are not in guest memory.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// Faults absorbed in guest memory since the daemon started.
pub fn fault_count() -> u64 {
    FAULTS.load(Ordering::Acquire)
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page > 0 {
            PAGE.store(page as usize, Ordering::Relaxed);
        }
        // SAFETY: a zeroed sigaction is valid plain data, filled in before
        // use; `PREVIOUS` is set before the handler that reads it exists.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_sigbus as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut act.sa_mask);
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
                log::warn!("cannot read the SIGBUS action: guest memory faults are not caught");
                return;
            }
            let _ = PREVIOUS.set(old);
            if libc::sigaction(libc::SIGBUS, &act, std::ptr::null_mut()) != 0 {
                log::warn!("cannot install a SIGBUS handler: guest memory faults are not caught");
                return;
            }
        }
        INSTALLED.store(true, Ordering::SeqCst);
    });
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Relaxed);
    for s in &TABLE {
        let start = s.start.load(Ordering::Acquire);
        let len = s.len.load(Ordering::Acquire);
        if start == 0 || addr < start || addr - start >= len {
            continue;
        }
        let at = addr & !(page - 1);
        // SAFETY: replaces one page of a live guest memory mapping (the
        // table holds only those) with private anonymous memory; mmap is
        // a plain system call, safe in a signal handler.
        let p = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            if !s.hit.swap(true, Ordering::AcqRel) {
                s.at.store(addr, Ordering::Release);
            }
            FAULTS.fetch_add(1, Ordering::AcqRel);
            return;
        }
        break;
    }
    // Not ours: whatever handled SIGBUS before, or the default action.
    // SAFETY: calling the previous handler with the arguments it was
    // installed to receive; sigaction is a plain system call.
    unsafe {
        match PREVIOUS.get().copied() {
            Some(p)
                if p.sa_sigaction != libc::SIG_DFL
                    && p.sa_sigaction != libc::SIG_IGN
                    && p.sa_flags & libc::SA_SIGINFO != 0 =>
            {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(p.sa_sigaction);
                f(sig, info, ctx);
            }
            Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
                let f: extern "C" fn(libc::c_int) = std::mem::transmute(p.sa_sigaction);
                f(sig);
            }
            _ => {
                // Back to the default: returning re-runs the access, which
                // faults again and ends the process as it would have.
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
            }
        }
    }
}

/// Guest memory mappings watched for faults while this lives.
#[derive(Debug)]
pub struct Guard {
    slots: Vec<usize>,
}

impl Guard {
    /// Watch the mappings `(start address, length)`. Mappings that do not
    /// fit in the table are not watched (logged).
    pub fn watch(ranges: impl IntoIterator<Item = (usize, usize)>) -> Guard {
        install();
        let mut slots = Vec::new();
        for (start, len) in ranges {
            if start == 0 || len == 0 {
                continue;
            }
            let free = TABLE.iter().position(|s| {
                s.len
                    .compare_exchange(0, len, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            });
            match free {
                Some(i) => {
                    TABLE[i].hit.store(false, Ordering::Relaxed);
                    TABLE[i].at.store(0, Ordering::Relaxed);
                    TABLE[i].start.store(start, Ordering::Release);
                    slots.push(i);
                }
                None => log::warn!(
                    "{SLOTS} guest memory mappings watched already: a fault in one more \
                     would not be caught"
                ),
            }
        }
        if !INSTALLED.load(Ordering::SeqCst) {
            log::debug!("guest memory faults are not caught (no SIGBUS handler)");
        }
        Guard { slots }
    }

    /// The address of the first fault absorbed in these mappings, if any.
    pub fn faulted(&self) -> Option<usize> {
        self.slots.iter().find_map(|&i| {
            let s = &TABLE[i];
            s.hit
                .load(Ordering::Acquire)
                .then(|| s.at.load(Ordering::Acquire))
        })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        for &i in &self.slots {
            TABLE[i].start.store(0, Ordering::Release);
            TABLE[i].len.store(0, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    /// A shared file mapping whose file shrinks: the access past the end
    /// completes (zeros), the fault is recorded, and nothing is recorded
    /// against other mappings.
    #[test]
    fn a_shrunk_file_mapping_faults_into_a_zero_page() {
        let page = PAGE.load(Ordering::Relaxed).max(4096);
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![7u8; 4 * page]).unwrap();
        // SAFETY: maps the file just written, shared, 4 pages.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let base = p as usize;
        let other = Guard::watch([(base + 8 * page, page)]);
        let g = Guard::watch([(base, 4 * page)]);
        assert_eq!(g.faulted(), None);
        f.set_len(page as u64).unwrap();
        // SAFETY: inside the mapping; page 0 is still backed by the file,
        // page 2 is past its end now and faults.
        let (first, third) = unsafe {
            (
                std::ptr::read_volatile(p as *const u8),
                std::ptr::read_volatile((base + 2 * page + 5) as *const u8),
            )
        };
        assert_eq!((first, third), (7, 0));
        assert_eq!(g.faulted(), Some(base + 2 * page + 5));
        assert_eq!(other.faulted(), None);
        drop(g);
        drop(other);
        // SAFETY: unmaps what was mapped above.
        unsafe { libc::munmap(p, 4 * page) };
    }
}
