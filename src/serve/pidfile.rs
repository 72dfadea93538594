//! `serve --pidfile FILE`: the daemon's process id in a private file,
//! locked while the daemon runs and removed when it exits.
//!
//! The file is opened without following a symlink, must be a regular file
//! of the daemon's user (vssd's private-file rules, see
//! [`vssd_device::files`]), is made mode 0600 and locked (`flock`). A second
//! daemon given the same file finds it locked and stops, naming the pid
//! inside; a file left by a daemon that was killed is not locked, and is
//! taken over.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use thiserror::Error;
use vssd_device::files::{FileError, open_private_rw};

/// Errors of `--pidfile`.
#[derive(Debug, Error)]
pub enum PidFileError {
    /// The file cannot be used (a symlink, another user's, not a regular
    /// file, cannot be created).
    #[error("--pidfile")]
    File(#[from] FileError),
    /// Its directory is missing or writable by every user and not sticky.
    #[error(
        "--pidfile {path}: its directory {dir} {why}; use a directory only the daemon's user \
         can write (such as /run)"
    )]
    Dir {
        /// The pid file.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A running daemon holds it.
    #[error("--pidfile {path} is held by a running vssd{holder}")]
    Held {
        /// The pid file.
        path: PathBuf,
        /// ` (pid N)`, or nothing if the file holds no pid yet.
        holder: String,
    },
    /// Locking or writing it failed.
    #[error("--pidfile {path}: {step}")]
    Io {
        /// The pid file.
        path: PathBuf,
        /// What was being done.
        step: &'static str,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// A pid file this daemon holds; removed when dropped.
#[derive(Debug)]
pub struct PidFile {
    file: File,
    path: PathBuf,
}

impl PidFile {
    /// Take `path` for this process: lock it and write our pid.
    pub fn create(path: &Path) -> Result<PidFile, PidFileError> {
        let io_err = |step| {
            move |source| PidFileError::Io {
                path: path.into(),
                step,
                source,
            }
        };
        check_dir(path)?;
        // A daemon stopping removes the file and then unlocks it: one that
        // opened the old file meanwhile locks a file nobody can see, so
        // make sure the file locked is the one at `path`.
        for _ in 0..8 {
            let mut file = open_private_rw(path)?;
            // SAFETY: flock on a file descriptor we own; no memory involved.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                    return Err(io_err("locking it")(e));
                }
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                return Err(PidFileError::Held {
                    path: path.into(),
                    holder: if pid.is_empty() {
                        String::new()
                    } else {
                        format!(" (pid {pid})")
                    },
                });
            }
            if !same_file(&file, path) {
                continue;
            }
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(io_err("making it private"))?;
            file.set_len(0).map_err(io_err("truncating it"))?;
            file.rewind().map_err(io_err("writing it"))?;
            writeln!(file, "{}", std::process::id()).map_err(io_err("writing it"))?;
            return Ok(PidFile {
                file,
                path: path.into(),
            });
        }
        Err(io_err("locking it")(io::Error::other(
            "it was replaced repeatedly while being locked",
        )))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        // Still locked: remove it only if it is still ours.
        if same_file(&self.file, &self.path) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Whether `path` (not followed) is the file `f` has open.
fn same_file(f: &File, path: &Path) -> bool {
    match (f.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Refuse a missing directory, or one every user may write to unless it
/// is sticky: there another user could swap the file.
fn check_dir(path: &Path) -> Result<(), PidFileError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let refuse = |why: String| PidFileError::Dir {
        path: path.into(),
        dir: dir.into(),
        why,
    };
    let m = std::fs::metadata(dir).map_err(|e| refuse(format!("cannot be used ({e})")))?;
    if !m.is_dir() {
        return Err(refuse("is not a directory".into()));
    }
    let mode = m.permissions().mode();
    if mode & 0o002 != 0 && mode & 0o1000 == 0 {
        return Err(refuse(format!(
            "(mode {:04o}) is writable by every user and not sticky",
            mode & 0o7777
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn private_locked_and_removed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("vssd.pid");
        std::fs::write(&p, "stale\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let held = PidFile::create(&p).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            format!("{}\n", std::process::id())
        );
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let e = PidFile::create(&p).unwrap_err();
        assert!(matches!(e, PidFileError::Held { .. }), "{e}");
        assert!(
            e.to_string()
                .contains(&format!("(pid {})", std::process::id())),
            "{e}"
        );
        drop(held);
        assert!(!p.exists());
        // Free again.
        drop(PidFile::create(&p).unwrap());
    }

    #[test]
    fn links_open_directories_and_replaced_files() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = d.path().join("link.pid");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = PidFile::create(&link).unwrap_err();
        assert!(e.to_string().contains("--pidfile"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");

        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = PidFile::create(&open.join("p")).unwrap_err();
        assert!(matches!(e, PidFileError::Dir { .. }), "{e}");
        let e = PidFile::create(&d.path().join("missing/p")).unwrap_err();
        assert!(matches!(e, PidFileError::Dir { .. }), "{e}");

        // A file replaced under a holder is not removed by it.
        let p = d.path().join("p");
        let held = PidFile::create(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, "other").unwrap();
        drop(held);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "other");
    }
}
