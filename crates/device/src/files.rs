//! Files the daemon creates or opens on the user's host, where it usually
//! runs as root: created private (0600), never through a symlink, never a
//! file another user planted, and a state directory locked for the
//! daemon's life so two daemons cannot share it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Problems with a path the daemon was told to use.
#[derive(Debug, Error)]
pub enum FileError {
    /// Opening or creating failed.
    #[error("cannot open {path}")]
    Open {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The path is a symbolic link.
    #[error(
        "{0} is a symbolic link; give the real path (vssd does not follow links it writes through)"
    )]
    Symlink(PathBuf),
    /// The path is not a regular file / directory.
    #[error("{path} is not a {want}")]
    WrongType {
        /// The path.
        path: PathBuf,
        /// `regular file` or `directory`.
        want: &'static str,
    },
    /// Someone else owns it.
    #[error(
        "{path} belongs to uid {owner}, not to the user running vssd (uid {me}); refusing to use it"
    )]
    NotOwned {
        /// The path.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// Our effective uid.
        me: u32,
    },
    /// Other users could replace files in it.
    #[error(
        "{path} is writable by other users (mode {mode:o}); make it private first: chmod go-w {path}"
    )]
    WritableByOthers {
        /// The directory.
        path: PathBuf,
        /// Its mode bits.
        mode: u32,
    },
    /// Another daemon holds the lock.
    #[error("{dir} is in use by another vssd{holder}; stop it first or use another --state-dir")]
    Locked {
        /// The state directory.
        dir: PathBuf,
        /// ` (pid N)` when known.
        holder: String,
    },
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn open_err(path: &Path) -> impl FnOnce(io::Error) -> FileError + '_ {
    move |source| {
        if source.raw_os_error() == Some(libc::ELOOP) {
            FileError::Symlink(path.into())
        } else {
            FileError::Open {
                path: path.into(),
                source,
            }
        }
    }
}

/// Check that an opened file is a regular file we own, then make its fd
/// blocking again: it was opened `O_NONBLOCK` so that a FIFO or a device
/// planted at the path cannot block the open (a FIFO's read-only open
/// waits for a writer forever); the check refuses those before any read.
fn check_owned_file(path: &Path, f: &File) -> Result<(), FileError> {
    let m = f.metadata().map_err(open_err(path))?;
    if !m.file_type().is_file() {
        return Err(FileError::WrongType {
            path: path.into(),
            want: "regular file",
        });
    }
    let me = euid();
    if m.uid() != me {
        return Err(FileError::NotOwned {
            path: path.into(),
            owner: m.uid(),
            me,
        });
    }
    let fd = f.as_raw_fd();
    // SAFETY: F_GETFL/F_SETFL on an fd we own; no memory is passed.
    let r = unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 {
            fl
        } else {
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK)
        }
    };
    if r < 0 {
        return Err(open_err(path)(io::Error::last_os_error()));
    }
    Ok(())
}

/// Open `path` read-write, creating it with mode 0600 if missing. Refuses a
/// symlink, a non-regular file and a file owned by another user.
pub fn open_private_rw(path: &Path) -> Result<File, FileError> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(open_err(path))?;
    check_owned_file(path, &f)?;
    Ok(f)
}

/// Open an existing `path` read-only with the same checks.
pub fn open_private_ro(path: &Path) -> Result<File, FileError> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(open_err(path))?;
    check_owned_file(path, &f)?;
    Ok(f)
}

/// Create `path` anew (it must not exist), mode 0600, for writing.
pub fn create_new_private(path: &Path) -> Result<File, FileError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(open_err(path))
}

/// Replace `path` atomically with what `write` produces: a private temp
/// file next to it (`path.tmp`), fsynced, renamed over `path`, the
/// directory synced. On any failure the temp file is removed and `path`
/// is left as it was.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut io::BufWriter<File>) -> io::Result<()>,
) -> Result<(), FileError> {
    let tmp = path.with_extension("tmp");
    let open = |source| FileError::Open {
        path: tmp.clone(),
        source,
    };
    // A temp file left by a crash is ours to replace (never through a link).
    if let Ok(md) = tmp.symlink_metadata()
        && (md.file_type().is_file() || md.file_type().is_symlink())
    {
        std::fs::remove_file(&tmp).map_err(open)?;
    }
    let f = create_new_private(&tmp)?;
    let written = (|| {
        let mut w = io::BufWriter::new(f);
        write(&mut w)?;
        w.flush()?;
        w.get_ref().sync_all()?;
        drop(w);
        std::fs::rename(&tmp, path)
    })();
    if let Err(source) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(FileError::Open {
            path: path.into(),
            source,
        });
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Make sure `dir` is a directory we own that no other user can write to,
/// creating it (0700) if missing.
pub fn private_dir(dir: &Path) -> Result<(), FileError> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(open_err(dir))?;
        }
        Err(e) => return Err(open_err(dir)(e)),
        Ok(m) if m.file_type().is_symlink() => return Err(FileError::Symlink(dir.into())),
        Ok(m) if !m.is_dir() => {
            return Err(FileError::WrongType {
                path: dir.into(),
                want: "directory",
            });
        }
        Ok(_) => {}
    }
    let m = std::fs::symlink_metadata(dir).map_err(open_err(dir))?;
    let me = euid();
    if m.uid() != me {
        return Err(FileError::NotOwned {
            path: dir.into(),
            owner: m.uid(),
            me,
        });
    }
    let mode = m.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(FileError::WritableByOthers {
            path: dir.into(),
            mode,
        });
    }
    Ok(())
}

/// An advisory lock on a state directory, held while this value lives.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
    path: PathBuf,
}

impl DirLock {
    /// Lock `dir` (through `dir/lock`, which records our pid), or say who holds it.
    pub fn acquire(dir: &Path) -> Result<DirLock, FileError> {
        let path = dir.join("lock");
        let mut f = open_private_rw(&path)?;
        // SAFETY: flock on an fd we own; no memory is involved.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let pid = std::fs::read_to_string(&path).unwrap_or_default();
                let pid = pid.trim();
                return Err(FileError::Locked {
                    dir: dir.into(),
                    holder: if pid.is_empty() {
                        String::new()
                    } else {
                        format!(" (pid {pid})")
                    },
                });
            }
            return Err(FileError::Open { path, source: e });
        }
        f.set_len(0).map_err(open_err(&path))?;
        let _ = writeln!(f, "{}", std::process::id());
        Ok(DirLock { _file: f, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn created_files_are_private_and_links_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("disk.img");
        let f = open_private_rw(&p).unwrap();
        assert_eq!(f.metadata().unwrap().permissions().mode() & 0o777, 0o600);
        let l = d.path().join("link.img");
        symlink(&p, &l).unwrap();
        assert!(matches!(open_private_rw(&l), Err(FileError::Symlink(_))));
        assert!(matches!(open_private_ro(&l), Err(FileError::Symlink(_))));
        assert!(matches!(
            open_private_rw(d.path()),
            Err(FileError::Open { .. } | FileError::WrongType { .. })
        ));
        assert!(
            create_new_private(&p).is_err(),
            "create_new refuses an existing file"
        );
    }

    /// A FIFO planted where a state file belongs is refused at once: its
    /// read-only open used to wait for a writer forever.
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ftl.state");
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let q = p.clone();
        std::thread::spawn(move || {
            let ro = open_private_ro(&q).map(|_| ());
            let rw = open_private_rw(&q).map(|_| ());
            let _ = tx.send((ro, rw));
        });
        let (ro, rw) = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("opening a FIFO blocked");
        for r in [ro, rw] {
            let e = r.unwrap_err();
            assert!(matches!(e, FileError::WrongType { .. }), "{e}");
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
        // A regular file still reads normally (the fd is blocking again).
        let f = d.path().join("x");
        std::fs::write(&f, b"data").unwrap();
        let mut s = String::new();
        std::io::Read::read_to_string(&mut open_private_ro(&f).unwrap(), &mut s).unwrap();
        assert_eq!(s, "data");
    }

    #[test]
    fn atomic_writes_leave_no_temp_file_when_they_fail() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ftl.state");
        write_atomically(&p, |w| w.write_all(b"good")).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"good");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // A write that fails half-way (a full disk): the old file stays,
        // no temp file is left behind.
        let r = write_atomically(&p, |w| {
            w.write_all(&[1u8; 100_000])?;
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"good");
        assert!(!p.with_extension("tmp").exists());
        // A stale temp file from a crash is replaced.
        std::fs::write(p.with_extension("tmp"), b"stale").unwrap();
        write_atomically(&p, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert!(!p.with_extension("tmp").exists());
    }

    #[test]
    fn state_dirs_must_be_private_and_are_locked() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("state");
        private_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let lock = DirLock::acquire(&dir).unwrap();
        let again = DirLock::acquire(&dir).unwrap_err();
        let msg = again.to_string();
        assert!(msg.contains("in use by another vssd"), "{msg}");
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        drop(lock);
        DirLock::acquire(&dir).unwrap();

        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(
            private_dir(&dir),
            Err(FileError::WritableByOthers { .. })
        ));
        let l = d.path().join("state-link");
        symlink(&dir, &l).unwrap();
        assert!(matches!(private_dir(&l), Err(FileError::Symlink(_))));
    }
}
