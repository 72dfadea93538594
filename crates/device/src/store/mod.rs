//! Where the bytes live: a sparse file at logical offsets, or sparse memory.
//!
//! The store knows nothing of the model: data is always at its logical
//! address, so nothing the model does can alter it. Buffers are
//! [`VolatileSlice`]s (guest memory, or ordinary memory in tests and other
//! frontends), so guest data goes to the file with one `preadv`/`pwritev`.
//!
//! - **Memory** ([`Store::memory`]): one anonymous `MAP_NORESERVE` mapping
//!   the size of the drive. The kernel allocates it a 4 KiB page at a
//!   time on first write; a bitmap (itself a lazily allocated mapping, one
//!   bit per page) says which pages were written, so reads of the rest
//!   copy zeros without touching the mapping, and discarded whole pages
//!   are handed back (`MADV_DONTNEED`). No lock on the data path.
//! - **File** ([`Store::open_file`]): discards and write-zeroes of more
//!   than [`SYNC_ZERO_MAX`] bytes do not punch holes on the request's path:
//!   the range is recorded as *pending* ([`Holes`]) and a background
//!   thread punches it in pieces of [`PIECE`]. Until then the store itself
//!   answers for it: a read zeroes the parts of its buffers that are
//!   pending (the pending set is sampled before the `preadv`, so a range
//!   punched meanwhile reads as zeros from the file), and a write first
//!   takes its range out of the pending set (waiting for a piece being
//!   punched under it), so a late punch never erases newer data.
//!   [`Store::sync`] waits for pending punches before `fdatasync`, so a
//!   FLUSH makes earlier discards durable too.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use log::warn;
use thiserror::Error;
use vm_memory::VolatileSlice;

/// Errors opening a store.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The backing file could not be opened or created read-write (or is
    /// a symlink, or belongs to another user).
    #[error("backing file")]
    Open(#[from] super::files::FileError),
    /// The backing file's size could not be read.
    #[error("cannot stat backing file {path}")]
    Stat {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The existing backing file is smaller than the drive.
    #[error(
        "backing file {path} is {found} bytes, smaller than the drive's {needed} bytes \
         (use a larger file, another --capacity, or remove it to start empty)"
    )]
    TooSmall {
        /// The file.
        path: PathBuf,
        /// Its size.
        found: u64,
        /// The exported capacity.
        needed: u64,
    },
    /// The file could not be extended (sparse) to the drive's size.
    #[error("cannot size backing file {path} to {size} bytes")]
    Resize {
        /// The file.
        path: PathBuf,
        /// Wanted size.
        size: u64,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The address space for an in-memory drive could not be reserved.
    #[error(
        "cannot reserve {size} bytes of address space for an in-memory drive \
         (vm.overcommit_memory=2? use a backing file instead)"
    )]
    Reserve {
        /// Bytes asked for.
        size: u64,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// Memory store page: the allocation granule.
pub const PAGE: u64 = 4096;
/// Discards and write-zeroes up to this size are done on the request's path.
pub const SYNC_ZERO_MAX: u64 = 1 << 20;
/// The background thread punches at most this much at a time (a write to
/// the range being punched waits for it).
pub const PIECE: u64 = 16 << 20;

static ZEROS: [u8; PAGE as usize] = [0; PAGE as usize];

mod mem;
pub use mem::MemStore;

/// Byte ranges waiting to be zeroed in the backing file: disjoint, keyed
/// by start, with their end and whether to deallocate.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RangeSet {
    map: BTreeMap<u64, (u64, bool)>,
}

impl RangeSet {
    /// No ranges.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Total bytes.
    pub fn bytes(&self) -> u64 {
        self.map.iter().map(|(s, (e, _))| e - s).sum()
    }

    /// The ranges overlapping `[lo, hi)`, clipped to it.
    pub fn overlapping(&self, lo: u64, hi: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        // The range starting before `lo` may reach into it.
        if let Some((_, &(e, _))) = self.map.range(..lo).next_back()
            && e > lo
        {
            out.push((lo, e.min(hi)));
        }
        for (&s, &(e, _)) in self.map.range(lo..hi) {
            out.push((s, e.min(hi)));
        }
        out
    }

    /// Remove `[lo, hi)` from every range (splitting them).
    pub fn remove(&mut self, lo: u64, hi: u64) {
        if lo >= hi {
            return;
        }
        if let Some((&s, &(e, u))) = self.map.range(..lo).next_back()
            && e > lo
        {
            self.map.insert(s, (lo, u));
            if e > hi {
                self.map.insert(hi, (e, u));
            }
        }
        let inside: Vec<u64> = self.map.range(lo..hi).map(|(&s, _)| s).collect();
        for s in inside {
            if let Some((e, u)) = self.map.remove(&s)
                && e > hi
            {
                self.map.insert(hi, (e, u));
            }
        }
    }

    /// Add `[lo, hi)` (replacing what it overlaps).
    pub fn insert(&mut self, lo: u64, hi: u64, unmap: bool) {
        if lo >= hi {
            return;
        }
        self.remove(lo, hi);
        self.map.insert(lo, (hi, unmap));
    }

    /// Take up to `max` bytes from the start of the first range.
    pub fn take_piece(&mut self, max: u64) -> Option<(u64, u64, bool)> {
        let (&s, &(e, u)) = self.map.iter().next()?;
        let end = e.min(s.saturating_add(max));
        self.map.remove(&s);
        if end < e {
            self.map.insert(end, (e, u));
        }
        Some((s, end, u))
    }
}

#[derive(Default)]
struct HoleState {
    pending: RangeSet,
    /// The piece being zeroed now.
    busy: Option<(u64, u64)>,
    /// The thread is running.
    running: bool,
    /// The store is being dropped: stop after the current piece.
    shutdown: bool,
    /// The last error of a background zeroing (reported by the next sync).
    error: Option<io::Error>,
}

/// Deferred zeroing of the backing file (see the module documentation).
struct Holes {
    state: Mutex<HoleState>,
    cv: Condvar,
    /// Anything pending or busy (fast path for reads and writes).
    any: AtomicBool,
}

impl Holes {
    fn lock(&self) -> MutexGuard<'_, HoleState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update_any(&self, s: &HoleState) {
        self.any
            .store(!s.pending.is_empty() || s.busy.is_some(), Ordering::SeqCst);
    }
}

/// The file store.
pub struct FileStore {
    file: Arc<File>,
    path: PathBuf,
    len: u64,
    holes: Arc<Holes>,
}

impl FileStore {
    fn open(path: &Path, len: u64) -> Result<FileStore, StoreError> {
        let file = super::files::open_private_rw(path)?;
        let meta = file.metadata().map_err(|source| StoreError::Stat {
            path: path.into(),
            source,
        })?;
        let found = meta.len();
        if found == 0 {
            file.set_len(len).map_err(|source| StoreError::Resize {
                path: path.into(),
                size: len,
                source,
            })?;
        } else if found < len {
            return Err(StoreError::TooSmall {
                path: path.into(),
                found,
                needed: len,
            });
        }
        Ok(FileStore {
            file: Arc::new(file),
            path: path.into(),
            len,
            holes: Arc::new(Holes {
                state: Mutex::new(HoleState::default()),
                cv: Condvar::new(),
                any: AtomicBool::new(false),
            }),
        })
    }

    fn read(&self, offset: u64, bufs: &[VolatileSlice<'_>], total: u64) -> io::Result<()> {
        // Sampled before reading: what is pending now was not punched yet.
        let zero = if self.holes.any.load(Ordering::SeqCst) {
            let s = self.holes.lock();
            let mut z = s.pending.overlapping(offset, offset + total);
            if let Some((lo, hi)) = s.busy
                && lo < offset + total
                && hi > offset
            {
                z.push((lo.max(offset), hi.min(offset + total)));
            }
            z
        } else {
            Vec::new()
        };
        rw_vectored(&self.file, offset, bufs, false)?;
        for (lo, hi) in zero {
            zero_bufs(bufs, offset, lo, hi)?;
        }
        Ok(())
    }

    fn write(&self, offset: u64, bufs: &[VolatileSlice<'_>], total: u64) -> io::Result<()> {
        if self.holes.any.load(Ordering::SeqCst) {
            let end = offset + total;
            let mut s = self.holes.lock();
            // A piece being punched under the write must finish first.
            while s.busy.is_some_and(|(lo, hi)| lo < end && hi > offset) {
                s = self.holes.cv.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            // The write replaces these bytes: they need no zeroing any more.
            s.pending.remove(offset, end);
            self.holes.update_any(&s);
        }
        rw_vectored(&self.file, offset, bufs, true)
    }

    fn zero(&self, offset: u64, len: u64, unmap: bool) -> io::Result<()> {
        if len <= SYNC_ZERO_MAX {
            return zero_file(&self.file, offset, len, unmap);
        }
        let mut s = self.holes.lock();
        if !s.running {
            let (file, holes) = (self.file.clone(), self.holes.clone());
            let spawned = std::thread::Builder::new()
                .name("vssd-punch".into())
                .spawn(move || punch_loop(&file, &holes));
            if let Err(e) = spawned {
                warn!("cannot start the hole-punching thread ({e}): zeroing on the request's path");
                drop(s);
                return zero_file(&self.file, offset, len, unmap);
            }
            s.running = true;
        }
        s.pending.insert(offset, offset + len, unmap);
        self.holes.update_any(&s);
        self.holes.cv.notify_all();
        Ok(())
    }

    /// Wait until nothing is pending (reporting a background failure).
    fn settle(&self) -> io::Result<()> {
        let mut s = self.holes.lock();
        while !s.pending.is_empty() || s.busy.is_some() {
            if !s.running {
                // The thread is gone (could not restart): zero here.
                while let Some((lo, hi, unmap)) = s.pending.take_piece(PIECE) {
                    zero_file(&self.file, lo, hi - lo, unmap)?;
                }
                break;
            }
            s = self.holes.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        self.holes.update_any(&s);
        match s.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn pending_bytes(&self) -> u64 {
        let s = self.holes.lock();
        s.pending.bytes() + s.busy.map_or(0, |(lo, hi)| hi - lo)
    }
}

impl Drop for FileStore {
    fn drop(&mut self) {
        let mut s = self.holes.lock();
        s.shutdown = true;
        self.holes.cv.notify_all();
    }
}

/// The background thread: zero pending ranges a piece at a time until
/// none is left (it is started again by the next large discard).
fn punch_loop(file: &File, holes: &Holes) {
    let mut s = holes.lock();
    loop {
        if s.shutdown {
            break;
        }
        let Some((lo, hi, unmap)) = s.pending.take_piece(PIECE) else {
            break;
        };
        s.busy = Some((lo, hi));
        holes.update_any(&s);
        drop(s);
        let r = zero_file(file, lo, hi - lo, unmap);
        s = holes.lock();
        s.busy = None;
        if let Err(e) = r {
            warn!("zeroing {lo}..{hi} of the backing file failed: {e}");
            s.error = Some(e);
        }
        holes.update_any(&s);
        holes.cv.notify_all();
    }
    s.running = false;
    holes.cv.notify_all();
}

/// Fill `v` with zeros.
fn zero_slice(v: &VolatileSlice<'_>) {
    let mut at = 0;
    while at < v.len() {
        let n = (v.len() - at).min(PAGE as usize);
        if let Ok(piece) = v.subslice(at, n) {
            piece.copy_from(&ZEROS[..n]);
        }
        at += n;
    }
}

/// Fill the parts of `bufs` (laid out from `offset`) that fall in `[lo, hi)`
/// with `byte`.
pub(crate) fn fill_bufs(
    bufs: &[VolatileSlice<'_>],
    offset: u64,
    lo: u64,
    hi: u64,
    byte: u8,
) -> io::Result<()> {
    let chunk = [byte; PAGE as usize];
    let mut at = offset;
    for b in bufs {
        let (s, e) = (at, at + b.len() as u64);
        let (fl, fh) = (lo.max(s), hi.min(e));
        let mut pos = fl;
        while pos < fh {
            let n = (fh - pos).min(PAGE);
            b.subslice((pos - s) as usize, n as usize)
                .map_err(io::Error::other)?
                .copy_from(&chunk[..n as usize]);
            pos += n;
        }
        at = e;
    }
    Ok(())
}

/// Zero the parts of `bufs` (laid out from `offset`) that fall in `[lo, hi)`.
fn zero_bufs(bufs: &[VolatileSlice<'_>], offset: u64, lo: u64, hi: u64) -> io::Result<()> {
    let mut at = offset;
    for b in bufs {
        let (s, e) = (at, at + b.len() as u64);
        let (zl, zh) = (lo.max(s), hi.min(e));
        if zl < zh {
            zero_slice(
                &b.subslice((zl - s) as usize, (zh - zl) as usize)
                    .map_err(io::Error::other)?,
            );
        }
        at = e;
    }
    Ok(())
}

/// Make `[offset, offset + len)` of the file read as zeros: punch a hole
/// (`unmap`) or zero the range in place, falling back to a hole, then to
/// writing zeros, on filesystems without those.
fn zero_file(file: &File, offset: u64, len: u64, unmap: bool) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let mode = if unmap {
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE
    } else {
        libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE
    };
    if fallocate(file, mode, offset, len).is_ok() {
        return Ok(());
    }
    // ZERO_RANGE is missing on some filesystems (tmpfs): a hole reads as zeros too.
    if !unmap
        && fallocate(
            file,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset,
            len,
        )
        .is_ok()
    {
        return Ok(());
    }
    let mut off = offset;
    let end = offset + len;
    while off < end {
        let n = (end - off).min(PAGE);
        file.write_all_at(&ZEROS[..n as usize], off)?;
        off += n;
    }
    Ok(())
}

/// The drive's data.
pub enum Store {
    /// A sparse file; large discards punch holes in the background.
    File(FileStore),
    /// Sparse memory, allocated a page at a time.
    Memory(MemStore),
}

impl Store {
    /// Open (or create, sparse, mode 0600) a backing file of at least `len`
    /// bytes. A symlink or a file owned by another user is refused.
    pub fn open_file(path: &Path, len: u64) -> Result<Store, StoreError> {
        Ok(Store::File(FileStore::open(path, len)?))
    }

    /// An empty in-memory store of `len` bytes (address space reserved,
    /// memory allocated as it is written).
    pub fn memory(len: u64) -> Result<Store, StoreError> {
        Ok(Store::Memory(MemStore::new(len)?))
    }

    /// Exported bytes.
    pub fn len(&self) -> u64 {
        match self {
            Store::File(f) => f.len,
            Store::Memory(m) => m.len,
        }
    }

    /// Whether the store has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Path of the backing file, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Store::File(f) => Some(&f.path),
            Store::Memory(_) => None,
        }
    }

    fn check(&self, offset: u64, len: u64) -> io::Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "range outside the store",
            )),
        }
    }

    /// Read `offset..` into `bufs` (in order).
    pub fn read(&self, offset: u64, bufs: &[VolatileSlice<'_>]) -> io::Result<()> {
        let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        self.check(offset, total)?;
        match self {
            Store::File(f) => f.read(offset, bufs, total),
            Store::Memory(m) => m.read(offset, bufs),
        }
    }

    /// Write `bufs` (in order) at `offset..`.
    pub fn write(&self, offset: u64, bufs: &[VolatileSlice<'_>]) -> io::Result<()> {
        let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        self.check(offset, total)?;
        match self {
            Store::File(f) => f.write(offset, bufs, total),
            Store::Memory(m) => m.write(offset, bufs),
        }
    }

    /// Make `offset..offset+len` read as zeros, at once. With `unmap` the
    /// space is deallocated (hole punched / pages freed); without, it
    /// stays allocated. In a file, large ranges are zeroed in the
    /// background (reads see zeros meanwhile; [`Self::sync`] waits).
    pub fn zero(&self, offset: u64, len: u64, unmap: bool) -> io::Result<()> {
        self.check(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        match self {
            Store::File(f) => f.zero(offset, len, unmap),
            Store::Memory(m) => {
                m.zero(offset, len, unmap);
                Ok(())
            }
        }
    }

    /// Make written data — and zeroing still pending in the background —
    /// durable (fdatasync); a no-op in memory.
    pub fn sync(&self) -> io::Result<()> {
        match self {
            Store::File(f) => {
                f.settle()?;
                f.file.sync_data()
            }
            Store::Memory(_) => Ok(()),
        }
    }

    /// Everything reads as zeros again, space released.
    pub fn erase_all(&self) -> io::Result<()> {
        match self {
            Store::File(f) => {
                {
                    let mut s = f.holes.lock();
                    while s.busy.is_some() {
                        s = f.holes.cv.wait(s).unwrap_or_else(|e| e.into_inner());
                    }
                    s.pending = RangeSet::default();
                    f.holes.update_any(&s);
                    let file = &f.file;
                    if fallocate(
                        file,
                        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                        0,
                        f.len,
                    )
                    .is_err()
                    {
                        file.set_len(0)?;
                        file.set_len(f.len)?;
                    }
                }
                f.file.sync_all()
            }
            Store::Memory(m) => {
                m.erase_all();
                Ok(())
            }
        }
    }

    /// Bytes actually allocated (file blocks or memory pages).
    pub fn allocated_bytes(&self) -> u64 {
        match self {
            Store::File(f) => {
                use std::os::unix::fs::MetadataExt;
                f.file.metadata().map(|m| m.blocks() * 512).unwrap_or(0)
            }
            Store::Memory(m) => m.allocated_bytes(),
        }
    }

    /// The ranges of `offset..offset + len` where the backing file holds
    /// data (`SEEK_DATA` / `SEEK_HOLE`), as `(start, len)`: everywhere else
    /// it reads as zeros. At most `max` ranges (the last may be cut);
    /// `None` for a memory store, whose contents never outlive the
    /// process. A file system without `SEEK_DATA` reports the whole range
    /// as data, which is never wrong.
    pub fn data_extents(
        &self,
        offset: u64,
        len: u64,
        max: usize,
    ) -> io::Result<Option<Vec<(u64, u64)>>> {
        use std::os::fd::AsRawFd;
        let Store::File(f) = self else {
            return Ok(None);
        };
        self.check(offset, len)?;
        let end = offset + len;
        let fd = f.file.as_raw_fd();
        let seek = |pos: u64, whence: libc::c_int| -> io::Result<Option<u64>> {
            let at = libc::off_t::try_from(pos)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
            // SAFETY: lseek only moves this fd's offset (the store does
            // positioned I/O, which does not use it) and returns a value.
            let r = unsafe { libc::lseek(fd, at, whence) };
            if r < 0 {
                let e = io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::ENXIO) => Ok(None),
                    _ => Err(e),
                };
            }
            Ok(Some(r as u64))
        };
        let mut out = Vec::new();
        let mut pos = offset;
        while pos < end && out.len() < max {
            let data = match seek(pos, libc::SEEK_DATA) {
                Ok(Some(d)) => d,
                Ok(None) => break,
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    return Ok(Some(vec![(offset, len)]));
                }
                Err(e) => return Err(e),
            };
            if data >= end {
                break;
            }
            let hole = seek(data, libc::SEEK_HOLE)?.unwrap_or(f.len).min(end);
            out.push((data, hole - data));
            pos = hole;
        }
        Ok(Some(out))
    }

    /// Bytes discarded but not yet zeroed in the backing file (0 in memory).
    pub fn pending_zero_bytes(&self) -> u64 {
        match self {
            Store::File(f) => f.pending_bytes(),
            Store::Memory(_) => 0,
        }
    }
}

fn fallocate(file: &File, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
    let (Ok(off), Ok(l)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    // SAFETY: fallocate only reads its scalar arguments; the fd is open for
    // the lifetime of `file`.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), mode, off, l) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// preadv/pwritev straight between the file and the slices, resuming after
/// short transfers and EINTR.
fn rw_vectored(
    file: &File,
    offset: u64,
    bufs: &[VolatileSlice<'_>],
    write: bool,
) -> io::Result<()> {
    // Guards keep the slices' pointers valid while the kernel uses them.
    let guards_r: Vec<_>;
    let guards_w: Vec<_>;
    let mut iov: Vec<libc::iovec> = if write {
        guards_r = bufs.iter().map(|b| b.ptr_guard()).collect();
        guards_r
            .iter()
            .map(|g| libc::iovec {
                iov_base: g.as_ptr() as *mut libc::c_void,
                iov_len: g.len(),
            })
            .collect()
    } else {
        guards_w = bufs.iter().map(|b| b.ptr_guard_mut()).collect();
        guards_w
            .iter()
            .map(|g| libc::iovec {
                iov_base: g.as_ptr() as *mut libc::c_void,
                iov_len: g.len(),
            })
            .collect()
    };
    iov.retain(|v| v.iov_len > 0);
    let mut first = 0usize;
    let mut off = offset;
    while first < iov.len() {
        let cnt = (iov.len() - first).min(1024);
        let Ok(o) = libc::off_t::try_from(off) else {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        };
        // SAFETY: every iovec points into a VolatileSlice whose pointer guard
        // is alive in `guards_r`/`guards_w` for the duration of this call, and
        // its length is the slice's length; the fd is valid for `file`'s life.
        let n = unsafe {
            if write {
                libc::pwritev(
                    file.as_raw_fd(),
                    iov[first..].as_ptr(),
                    cnt as libc::c_int,
                    o,
                )
            } else {
                libc::preadv(
                    file.as_raw_fd(),
                    iov[first..].as_ptr(),
                    cnt as libc::c_int,
                    o,
                )
            }
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            // Reading past the end of a (shrunk) file, or a write that made no progress.
            if write {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "pwritev wrote nothing",
                ));
            }
            for v in &iov[first..] {
                // SAFETY: same pointers as above, still guarded; zero the unread tail.
                unsafe { std::ptr::write_bytes(v.iov_base as *mut u8, 0, v.iov_len) };
            }
            return Ok(());
        }
        let mut n = n as usize;
        off += n as u64;
        while n > 0 && first < iov.len() {
            if n >= iov[first].iov_len {
                n -= iov[first].iov_len;
                first += 1;
            } else {
                // SAFETY: advancing within the same guarded buffer by n < its length.
                iov[first].iov_base =
                    unsafe { (iov[first].iov_base as *mut u8).add(n) } as *mut libc::c_void;
                iov[first].iov_len -= n;
                n = 0;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
