//! The in-memory store: one sparse anonymous mapping the size of the
//! drive and a bitmap of the pages written since they were last discarded.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use log::warn;
use vm_memory::VolatileSlice;

use super::{PAGE, StoreError, ZEROS, zero_slice};

/// An anonymous private mapping, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; all access to it
// goes through volatile slices or atomics, from any thread.
unsafe impl Send for Mapping {}
// SAFETY: as above; shared access never creates Rust references to its bytes
// except as atomics (bitmap) or volatile slices (data).
unsafe impl Sync for Mapping {}

impl Mapping {
    /// `len` bytes of zero-filled address space, allocated on first write.
    fn new(len: u64) -> io::Result<Mapping> {
        let len =
            usize::try_from(len.max(1)).map_err(|_| io::Error::from_raw_os_error(libc::ENOMEM))?;
        // SAFETY: an anonymous mapping at an address the kernel picks; no
        // existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: p as *mut u8,
            len,
        })
    }

    /// Give back the pages of `[off, off + len)` (page-aligned): they read
    /// as zeros again.
    fn discard(&self, off: usize, len: usize) {
        debug_assert!(off.is_multiple_of(PAGE as usize) && off + len <= self.len);
        if len == 0 {
            return;
        }
        // SAFETY: the range is inside our own mapping; MADV_DONTNEED on a
        // private anonymous mapping only drops its pages (they refault as
        // zeros).
        let r = unsafe {
            libc::madvise(
                self.ptr.add(off) as *mut libc::c_void,
                len,
                libc::MADV_DONTNEED,
            )
        };
        if r != 0 {
            // Cannot happen for a valid range of our mapping; zero by hand.
            warn!("madvise(MADV_DONTNEED): {}", io::Error::last_os_error());
            zero_slice(&self.slice(off, len));
        }
    }

    /// `[off, off + len)` as a volatile slice.
    fn slice(&self, off: usize, len: usize) -> VolatileSlice<'_> {
        assert!(off.checked_add(len).is_some_and(|e| e <= self.len));
        // SAFETY: in bounds (checked above) of a mapping that lives as long
        // as `self`; volatile access tolerates concurrent writers.
        unsafe { VolatileSlice::new(self.ptr.add(off), len) }
    }

    /// The mapping as atomic words (for the bitmap).
    fn words(&self) -> &[AtomicU64] {
        // SAFETY: the mapping is page-aligned, zero-initialised, `len` bytes
        // long and lives as long as `self`; AtomicU64 has the layout of u64
        // and every bit pattern is valid.
        unsafe { std::slice::from_raw_parts(self.ptr as *const AtomicU64, self.len / 8) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped, once.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// The in-memory store.
pub struct MemStore {
    data: Mapping,
    /// One bit per page: written since last discarded.
    bits: Mapping,
    pages: AtomicU64,
    pub(super) len: u64,
}

impl MemStore {
    pub(super) fn new(len: u64) -> Result<MemStore, StoreError> {
        let reserve =
            |size: u64| Mapping::new(size).map_err(|source| StoreError::Reserve { size, source });
        let npages = len.div_ceil(PAGE);
        Ok(MemStore {
            data: reserve(len)?,
            bits: reserve(npages.div_ceil(64) * 8)?,
            pages: AtomicU64::new(0),
            len,
        })
    }

    fn bit(&self, page: u64) -> (&AtomicU64, u64) {
        (
            &self.bits.words()[(page / 64) as usize],
            1u64 << (page % 64),
        )
    }

    fn written(&self, page: u64) -> bool {
        let (w, m) = self.bit(page);
        w.load(Ordering::Acquire) & m != 0
    }

    fn mark(&self, page: u64) {
        let (w, m) = self.bit(page);
        if w.load(Ordering::Relaxed) & m == 0 && w.fetch_or(m, Ordering::AcqRel) & m == 0 {
            self.pages.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Clear the bits of pages `[p0, p1)`; how many were set.
    fn unmark_run(&self, p0: u64, p1: u64) -> u64 {
        let words = self.bits.words();
        let mut cleared = 0u64;
        let mut p = p0;
        while p < p1 {
            let w = p / 64;
            let lo = p % 64;
            let hi = (p1 - w * 64).min(64);
            let mask = if hi - lo == 64 {
                u64::MAX
            } else {
                ((1u64 << (hi - lo)) - 1) << lo
            };
            let word = &words[w as usize];
            if word.load(Ordering::Relaxed) & mask != 0 {
                cleared += u64::from((word.fetch_and(!mask, Ordering::AcqRel) & mask).count_ones());
            }
            p = w * 64 + hi;
        }
        self.pages.fetch_sub(cleared, Ordering::Relaxed);
        cleared
    }

    /// Split `bufs`, laid out from `offset`, at page boundaries: `f(page,
    /// offset in the page, piece)`.
    fn walk(
        offset: u64,
        bufs: &[VolatileSlice<'_>],
        mut f: impl FnMut(u64, usize, VolatileSlice<'_>),
    ) -> io::Result<()> {
        let mut off = offset;
        for b in bufs {
            let mut done = 0usize;
            while done < b.len() {
                let within = (off % PAGE) as usize;
                let n = (PAGE as usize - within).min(b.len() - done);
                f(
                    off / PAGE,
                    within,
                    b.subslice(done, n).map_err(io::Error::other)?,
                );
                done += n;
                off += n as u64;
            }
        }
        Ok(())
    }

    pub(super) fn read(&self, offset: u64, bufs: &[VolatileSlice<'_>]) -> io::Result<()> {
        Self::walk(offset, bufs, |page, within, dst| {
            if self.written(page) {
                let at = (page * PAGE) as usize + within;
                self.data.slice(at, dst.len()).copy_to_volatile_slice(dst);
            } else {
                dst.copy_from(&ZEROS[..dst.len()]);
            }
        })
    }

    pub(super) fn write(&self, offset: u64, bufs: &[VolatileSlice<'_>]) -> io::Result<()> {
        Self::walk(offset, bufs, |page, within, src| {
            self.mark(page);
            let at = (page * PAGE) as usize + within;
            src.copy_to_volatile_slice(self.data.slice(at, src.len()));
        })
    }

    pub(super) fn zero(&self, offset: u64, len: u64, unmap: bool) {
        let end = offset + len;
        let mut off = offset;
        while off < end {
            let page = off / PAGE;
            let within = off % PAGE;
            let n = (PAGE - within).min(end - off);
            let whole = n == PAGE;
            if whole && unmap {
                // The run of whole pages: give them back.
                let stop = end / PAGE;
                if self.unmark_run(page, stop) > 0 {
                    self.data
                        .discard((page * PAGE) as usize, ((stop - page) * PAGE) as usize);
                }
                off = stop * PAGE;
                continue;
            }
            if self.written(page) {
                zero_slice(&self.data.slice(off as usize, n as usize));
            }
            off += n;
        }
    }

    pub(super) fn erase_all(&self) {
        // Bits first: a read from now on copies zeros without looking.
        self.bits.discard(0, self.bits.len);
        self.pages.store(0, Ordering::Relaxed);
        self.data.discard(0, self.data.len);
    }

    pub(super) fn allocated_bytes(&self) -> u64 {
        self.pages.load(Ordering::Relaxed) * PAGE
    }
}
