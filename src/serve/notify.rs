//! systemd's readiness protocol (`Type=notify`, `sd_notify(3)`): the
//! daemon says `READY=1` once every socket answers and `STOPPING=1` when
//! it begins to shut down, so `systemctl start vssd@NAME` returns when the
//! drive can be attached and a VM ordered after it finds its sockets.
//! Without `$NOTIFY_SOCKET` (not started by systemd) nothing is sent.

use std::ffi::OsStr;
use std::io;
use std::os::unix::net::UnixDatagram;

/// Tell the service manager `state` (`READY=1`, `STOPPING=1`), if one
/// asked. A failure is logged, never fatal: the daemon works without it.
pub fn notify(state: &str) {
    if let Some(addr) = std::env::var_os("NOTIFY_SOCKET")
        && let Err(e) = send(&addr, state)
    {
        log::warn!("cannot notify the service manager ({state}): {e}");
    }
}

/// Send `state` to the datagram socket `addr`: a path, or `@NAME` for an
/// abstract socket.
pub fn send(addr: &OsStr, state: &str) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let sock = UnixDatagram::unbound()?;
    let bytes = addr.as_bytes();
    match bytes.split_first() {
        Some((b'@', name)) => {
            use std::os::linux::net::SocketAddrExt;
            let a = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            sock.send_to_addr(state.as_bytes(), &a)?;
        }
        Some((b'/', _)) => {
            sock.send_to(state.as_bytes(), addr)?;
        }
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("NOTIFY_SOCKET={}: not a socket path", addr.display()),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn states_reach_path_and_abstract_sockets() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("notify");
        let rx = UnixDatagram::bind(&p).unwrap();
        send(p.as_os_str(), "READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("vssd-notify-test-{}", std::process::id());
        let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&a).unwrap();
        send(OsStr::new(&format!("@{name}")), "STOPPING=1").unwrap();
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");

        assert!(send(OsStr::new("relative"), "READY=1").is_err());
    }
}
