//! Unix sockets the daemon listens on: path checks, private binding,
//! explicit mode and group.

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use super::ServeError;

/// Parse an octal permission mode (`0660`, `660`); no special bits.
pub fn parse_mode(s: &str) -> Result<u32, String> {
    let t = s.trim_start_matches("0o");
    match u32::from_str_radix(t, 8) {
        Ok(m) if m <= 0o777 => Ok(m),
        _ => Err(format!(
            "{s:?} is not an octal permission mode between 0000 and 0777"
        )),
    }
}

/// Resolve a group name (or number) to its gid.
pub fn group_id(name: &str) -> Result<u32, ServeError> {
    if let Ok(n) = name.parse::<u32>() {
        return Ok(n);
    }
    let c = std::ffi::CString::new(name)
        .map_err(|_| ServeError::Usage(format!("--socket-group {name:?}: not a group name")))?;
    let mut grp: libc::group = unsafe_zeroed_group();
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut out: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; `buf` outlives it and
    // its length is passed; the result is read only through `out`.
    let r =
        unsafe { libc::getgrnam_r(c.as_ptr(), &mut grp, buf.as_mut_ptr(), buf.len(), &mut out) };
    if r != 0 || out.is_null() {
        return Err(ServeError::Usage(format!(
            "--socket-group {name:?}: no such group on this host"
        )));
    }
    Ok(grp.gr_gid)
}

fn unsafe_zeroed_group() -> libc::group {
    // SAFETY: `libc::group` is plain data (integers and pointers); all-zero
    // is a valid value that getgrnam_r overwrites.
    unsafe { std::mem::zeroed() }
}

/// The longest path a unix socket can have (`sun_path` less its NUL).
pub const SOCKET_PATH_MAX: usize = 107;

/// Bind a unix socket at `path` with its final mode and group, without
/// ever applying them through a path another user could have swapped.
///
/// The socket is bound inside a fresh directory private to the daemon
/// (mode 0700, made next to `path`), given its group and mode there, where
/// no other user can replace it, and renamed into place. `rename` replaces
/// whatever sits at `path` (a symlink planted there included) without
/// following it, and a client cannot connect before the mode is final. No
/// umask change: that is process-wide, and the device's threads already run.
///
/// The socket is bound through `/proc/self/fd/N/` (N: the private
/// directory), so the temporary path is never longer than `path` allows;
/// errors name `path`, never the temporary one.
pub fn bind_socket<T>(
    path: &Path,
    mode: u32,
    gid: Option<u32>,
    bind: impl FnOnce(&Path) -> io::Result<T>,
) -> Result<T, ServeError> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::PermissionsExt;
    let err = |step: &'static str| {
        move |e: io::Error| ServeError::Bind {
            path: path.into(),
            step,
            source: without_temp_path(e),
        }
    };
    check_socket_path_len(path)?;
    let dir = socket_dir(path);
    let name = path
        .file_name()
        .ok_or_else(|| ServeError::Usage(format!("{}: not a socket file name", path.display())))?;
    let private = tempfile::Builder::new()
        .prefix(&format!(".{}.", name.to_string_lossy()))
        .tempdir_in(dir)
        .map_err(err("making a private directory beside it"))?;
    let tmp = private.path().join("s");
    let handle = std::fs::File::open(private.path()).map_err(err("opening that directory"))?;
    let short = PathBuf::from(format!("/proc/self/fd/{}/s", handle.as_raw_fd()));
    let bind_at = if short.parent().is_some_and(Path::is_dir) {
        short.as_path()
    } else {
        tmp.as_path() // no /proc: the full path (refused above if too long)
    };
    let listener = bind(bind_at).map_err(err("binding"))?;
    drop(handle);
    if let Some(g) = gid {
        std::os::unix::fs::lchown(&tmp, None, Some(g)).map_err(err("setting its group"))?;
    }
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
        .map_err(err("setting its mode"))?;
    std::fs::rename(&tmp, path).map_err(err("moving it into place"))?;
    private
        .close()
        .map_err(err("removing the private directory"))?;
    Ok(listener)
}

/// `e` without the temporary path `tempfile` adds to its messages ("...
/// at path \"DIR/.NAME.XXXXXX\""): the OS error alone, as the message names
/// the user's path and the step.
fn without_temp_path(e: io::Error) -> io::Error {
    if let Some(code) = e.raw_os_error() {
        return io::Error::from_raw_os_error(code);
    }
    let msg = e.to_string();
    let code = msg
        .split_once("(os error ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .and_then(|(n, _)| n.parse::<i32>().ok());
    match (code, msg.split_once(" at path ")) {
        (Some(code), _) => io::Error::from_raw_os_error(code),
        (None, Some((head, _))) => io::Error::new(e.kind(), head.to_string()),
        (None, None) => e,
    }
}

/// Refuse a socket path clients could not connect to: longer than
/// [`SOCKET_PATH_MAX`] bytes.
fn check_socket_path_len(path: &Path) -> Result<(), ServeError> {
    use std::os::unix::ffi::OsStrExt;
    let len = path.as_os_str().as_bytes().len();
    if len > SOCKET_PATH_MAX {
        return Err(ServeError::SocketPathTooLong {
            path: path.into(),
            len,
        });
    }
    Ok(())
}

/// The directory a socket path lives in.
fn socket_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Refuse a socket directory that every user may write to unless it is
/// sticky (like /tmp): there anyone could rename the socket away or put
/// their own in its place.
fn check_socket_dir(path: &Path, dir: &Path) -> Result<(), ServeError> {
    use std::os::unix::fs::PermissionsExt;
    let m = std::fs::metadata(dir)
        .map_err(|source| ServeError::Bind {
            path: path.into(),
            step: "looking at its directory",
            source,
        })?
        .permissions()
        .mode();
    if m & 0o002 != 0 && m & 0o1000 == 0 {
        return Err(ServeError::OpenSocketDir {
            path: path.into(),
            dir: dir.into(),
            mode: m & 0o7777,
        });
    }
    Ok(())
}

/// Refuse a path held by a live listener or by a non-socket; remove a stale socket.
pub fn claim_socket_path(path: &Path) -> Result<(), ServeError> {
    let dir = socket_dir(path);
    if !dir.is_dir() {
        return Err(ServeError::NoSocketDir {
            path: path.into(),
            dir: dir.into(),
        });
    }
    check_socket_dir(path, dir)?;
    check_socket_path_len(path)?;
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(ServeError::Bind {
            path: path.into(),
            step: "looking at what is there",
            source,
        }),
        Ok(m) if !m.file_type().is_socket() => Err(ServeError::NotASocket(path.into())),
        Ok(_) => {
            if UnixStream::connect(path).is_ok() {
                return Err(ServeError::SocketInUse(path.into()));
            }
            std::fs::remove_file(path).map_err(|source| ServeError::Bind {
                path: path.into(),
                step: "removing the stale socket there",
                source,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::UnixListener;

    /// What the race left at the socket's path (a symlink to a file the
    /// daemon's user owns) gets replaced, and the file it points at keeps
    /// its mode: the old chmod-after-bind made it 0660 here.
    #[test]
    fn mode_is_never_applied_through_a_swapped_path() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"secret").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        let sock = dir.path().join("s.sock");
        std::os::unix::fs::symlink(&victim, &sock).unwrap();
        let l = bind_socket(&sock, 0o660, None, |p| UnixListener::bind(p)).unwrap();
        let m = std::fs::symlink_metadata(&sock).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.permissions().mode() & 0o777, 0o660);
        let v = std::fs::metadata(&victim).unwrap();
        assert_eq!(v.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(&victim).unwrap(), b"secret");
        // The socket answers at its final path; the private dir is gone.
        UnixStream::connect(&sock).unwrap();
        drop(l);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    /// Errors name the user's path and the step, not the private
    /// directory's temporary path; a path longer than a socket address
    /// holds is refused, and one that fits is bound however deep.
    #[test]
    fn errors_name_the_users_path_and_long_paths_work() {
        let e = without_temp_path(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "Permission denied (os error 13) at path \"/d/.s.sock.AbCdEf\"",
        ));
        assert_eq!(e.raw_os_error(), Some(13));
        assert!(!e.to_string().contains(".s.sock."), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let deep = dir
            .path()
            .join("d".repeat(96 - dir.path().as_os_str().len()));
        std::fs::create_dir(&deep).unwrap();
        let ok = deep.join("abcdef");
        assert!(ok.as_os_str().len() <= SOCKET_PATH_MAX);
        let l = bind_socket(&ok, 0o600, None, |p| UnixListener::bind(p)).unwrap();
        UnixStream::connect(&ok).unwrap();
        drop(l);
        let long = deep.join("a-name-too-long");
        let e = claim_socket_path(&long).unwrap_err();
        assert!(matches!(e, ServeError::SocketPathTooLong { .. }), "{e}");
        assert!(e.to_string().contains(&long.display().to_string()), "{e}");
    }

    #[test]
    fn open_directories_are_refused_unless_sticky() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = claim_socket_path(&open.join("s")).unwrap_err();
        assert!(matches!(e, ServeError::OpenSocketDir { .. }), "{e}");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        claim_socket_path(&open.join("s")).unwrap();
    }
}
