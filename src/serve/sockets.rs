//! Unix sockets the daemon listens on: path checks, private binding,
//! explicit mode and group.

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

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

/// Give a socket its final mode and group.
pub fn set_socket_access(path: &Path, mode: u32, gid: Option<u32>) -> Result<(), ServeError> {
    use std::os::unix::fs::PermissionsExt;
    let err = |source| ServeError::Bind {
        path: path.into(),
        source,
    };
    if let Some(g) = gid {
        std::os::unix::fs::lchown(path, None, Some(g)).map_err(err)?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(err)
}

/// Bind a unix socket created private (umask 0177 while binding), before
/// any other thread runs.
pub fn bind_private<T>(path: &Path, bind: impl FnOnce() -> io::Result<T>) -> Result<T, ServeError> {
    // SAFETY: umask only swaps the process file-mode mask; no other thread yet.
    let old = unsafe { libc::umask(0o177) };
    let r = bind();
    // SAFETY: restores the previous mask.
    unsafe { libc::umask(old) };
    r.map_err(|source| ServeError::Bind {
        path: path.into(),
        source,
    })
}

/// Refuse a path held by a live listener or by a non-socket; remove a stale socket.
pub fn claim_socket_path(path: &Path) -> Result<(), ServeError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(ServeError::NoSocketDir {
            path: path.into(),
            dir: dir.into(),
        });
    }
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(ServeError::Bind {
            path: path.into(),
            source,
        }),
        Ok(m) if !m.file_type().is_socket() => Err(ServeError::NotASocket(path.into())),
        Ok(_) => {
            if UnixStream::connect(path).is_ok() {
                return Err(ServeError::SocketInUse(path.into()));
            }
            std::fs::remove_file(path).map_err(|source| ServeError::Bind {
                path: path.into(),
                source,
            })
        }
    }
}
