//! Where the bytes live: a sparse file at logical offsets, or sparse memory.
//!
//! The store knows nothing of the model: data is always at its logical
//! address, so nothing the model does can alter it. Buffers are
//! [`VolatileSlice`]s (guest memory, or ordinary memory in tests and other
//! frontends), so guest data goes to the file with one `preadv`/`pwritev`.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

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
}

/// Memory store granule.
const CHUNK: u64 = 64 * 1024;
const SHARDS: usize = 64;
static ZEROS: [u8; CHUNK as usize] = [0; CHUNK as usize];

/// Split `bufs`, laid out from `offset`, at memory-chunk boundaries and call
/// `f(chunk index, offset within the chunk, piece)` for each piece in order.
fn chunk_walk(
    offset: u64,
    bufs: &[VolatileSlice<'_>],
    mut f: impl FnMut(u64, usize, VolatileSlice<'_>),
) -> io::Result<()> {
    let mut off = offset;
    for b in bufs {
        let mut done = 0usize;
        while done < b.len() {
            let idx = off / CHUNK;
            let within = (off % CHUNK) as usize;
            let n = (CHUNK as usize - within).min(b.len() - done);
            f(idx, within, b.subslice(done, n).map_err(io::Error::other)?);
            done += n;
            off += n as u64;
        }
    }
    Ok(())
}

/// The drive's data.
pub enum Store {
    /// A sparse file; discards punch holes.
    File {
        /// The open file.
        file: File,
        /// Its path (for messages and the drive serial).
        path: PathBuf,
        /// Exported bytes.
        len: u64,
    },
    /// Sparse memory: 64 KiB chunks allocated on first write.
    Memory {
        /// Chunks by index, sharded to keep queue threads apart.
        shards: Vec<Mutex<HashMap<u64, Box<[u8]>>>>,
        /// Exported bytes.
        len: u64,
    },
}

impl Store {
    /// Open (or create, sparse, mode 0600) a backing file of at least `len`
    /// bytes. A symlink or a file owned by another user is refused.
    pub fn open_file(path: &Path, len: u64) -> Result<Store, StoreError> {
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
        Ok(Store::File {
            file,
            path: path.into(),
            len,
        })
    }

    /// An empty in-memory store of `len` bytes.
    pub fn memory(len: u64) -> Store {
        Store::Memory {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            len,
        }
    }

    /// Exported bytes.
    pub fn len(&self) -> u64 {
        match self {
            Store::File { len, .. } | Store::Memory { len, .. } => *len,
        }
    }

    /// Whether the store has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Path of the backing file, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Store::File { path, .. } => Some(path),
            Store::Memory { .. } => None,
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
            Store::File { file, .. } => rw_vectored(file, offset, bufs, false),
            Store::Memory { .. } => chunk_walk(offset, bufs, |idx, within, dst| {
                let shard = self.shard(idx).lock().unwrap_or_else(|e| e.into_inner());
                match shard.get(&idx) {
                    Some(c) => dst.copy_from(&c[within..within + dst.len()]),
                    None => dst.copy_from(&ZEROS[..dst.len()]),
                }
            }),
        }
    }

    /// Write `bufs` (in order) at `offset..`.
    pub fn write(&self, offset: u64, bufs: &[VolatileSlice<'_>]) -> io::Result<()> {
        let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        self.check(offset, total)?;
        match self {
            Store::File { file, .. } => rw_vectored(file, offset, bufs, true),
            Store::Memory { .. } => chunk_walk(offset, bufs, |idx, within, src| {
                let mut shard = self.shard(idx).lock().unwrap_or_else(|e| e.into_inner());
                let c = shard
                    .entry(idx)
                    .or_insert_with(|| vec![0u8; CHUNK as usize].into());
                src.copy_to(&mut c[within..within + src.len()]);
            }),
        }
    }

    /// Make `offset..offset+len` read as zeros. With `unmap` the space is
    /// deallocated (hole punched / chunk freed); without, it stays allocated.
    pub fn zero(&self, offset: u64, len: u64, unmap: bool) -> io::Result<()> {
        self.check(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        match self {
            Store::File { file, .. } => {
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
                // Last resort: write zeros.
                let mut off = offset;
                let end = offset + len;
                while off < end {
                    let n = (end - off).min(CHUNK);
                    file.write_all_at(&ZEROS[..n as usize], off)?;
                    off += n;
                }
                Ok(())
            }
            Store::Memory { .. } => {
                let mut off = offset;
                let end = offset + len;
                while off < end {
                    let idx = off / CHUNK;
                    let within = (off % CHUNK) as usize;
                    let n = (CHUNK - within as u64).min(end - off) as usize;
                    let mut shard = self.shard(idx).lock().unwrap_or_else(|e| e.into_inner());
                    if n as u64 == CHUNK {
                        shard.remove(&idx);
                    } else if let Some(c) = shard.get_mut(&idx) {
                        c[within..within + n].fill(0);
                    }
                    off += n as u64;
                }
                Ok(())
            }
        }
    }

    /// Make written data durable (fdatasync); a no-op in memory.
    pub fn sync(&self) -> io::Result<()> {
        match self {
            Store::File { file, .. } => file.sync_data(),
            Store::Memory { .. } => Ok(()),
        }
    }

    /// Everything reads as zeros again, space released.
    pub fn erase_all(&self) -> io::Result<()> {
        match self {
            Store::File { file, len, .. } => {
                if fallocate(
                    file,
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    0,
                    *len,
                )
                .is_err()
                {
                    file.set_len(0)?;
                    file.set_len(*len)?;
                }
                file.sync_all()
            }
            Store::Memory { shards, .. } => {
                for s in shards {
                    s.lock().unwrap_or_else(|e| e.into_inner()).clear();
                }
                Ok(())
            }
        }
    }

    /// Bytes actually allocated (file blocks or memory chunks).
    pub fn allocated_bytes(&self) -> u64 {
        match self {
            Store::File { file, .. } => {
                use std::os::unix::fs::MetadataExt;
                file.metadata().map(|m| m.blocks() * 512).unwrap_or(0)
            }
            Store::Memory { shards, .. } => shards
                .iter()
                .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len() as u64 * CHUNK)
                .sum(),
        }
    }

    fn shard(&self, idx: u64) -> &Mutex<HashMap<u64, Box<[u8]>>> {
        match self {
            Store::Memory { shards, .. } => &shards[(idx as usize) % SHARDS],
            Store::File { .. } => unreachable!("shard() is only called on memory stores"),
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
mod tests {
    use super::*;

    fn roundtrip(store: &Store) {
        let mut data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let (a, b) = data.split_at_mut(70_000);
        store
            .write(4096, &[VolatileSlice::from(a), VolatileSlice::from(b)])
            .unwrap();
        let mut back = vec![0u8; 200_000];
        store
            .read(4096, &[VolatileSlice::from(&mut back[..])])
            .unwrap();
        assert_eq!(back, data);
        // Unwritten space reads as zeros.
        let mut z = vec![1u8; 4096];
        store.read(0, &[VolatileSlice::from(&mut z[..])]).unwrap();
        assert!(z.iter().all(|&x| x == 0));
        // Discard a middle range (not chunk-aligned), both flavours.
        store.zero(4096 + 512, 100_000, true).unwrap();
        store.zero(4096 + 150_000, 1024, false).unwrap();
        store
            .read(4096, &[VolatileSlice::from(&mut back[..])])
            .unwrap();
        for (i, (&x, &y)) in back.iter().zip(data.iter()).enumerate() {
            let zeroed = (512..100_512).contains(&i) || (150_000..151_024).contains(&i);
            assert_eq!(x, if zeroed { 0 } else { y }, "byte {i}");
        }
        // Out of range is refused.
        let mut one = [0u8; 512];
        assert!(
            store
                .read(store.len(), &[VolatileSlice::from(&mut one[..])])
                .is_err()
        );
        assert!(store.zero(store.len() - 512, 1024, true).is_err());
        store.sync().unwrap();
        store.erase_all().unwrap();
        store
            .read(4096, &[VolatileSlice::from(&mut back[..])])
            .unwrap();
        assert!(back.iter().all(|&x| x == 0));
    }

    #[test]
    fn memory_store() {
        roundtrip(&Store::memory(1 << 20));
    }

    #[test]
    fn file_store() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("disk.img");
        roundtrip(&Store::open_file(&p, 1 << 20).unwrap());
        // Reopen an existing file; a too-small one is refused.
        assert!(Store::open_file(&p, 1 << 20).is_ok());
        assert!(matches!(
            Store::open_file(&p, 2 << 20),
            Err(StoreError::TooSmall { .. })
        ));
    }
}
