//! A connected NBD socket: unix or TCP.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// A client connection.
#[derive(Debug)]
pub enum Sock {
    /// A unix socket.
    Unix(UnixStream),
    /// A TCP connection.
    Tcp(TcpStream),
}

impl Sock {
    /// Another handle on the same connection.
    pub fn try_clone(&self) -> io::Result<Sock> {
        Ok(match self {
            Sock::Unix(s) => Sock::Unix(s.try_clone()?),
            Sock::Tcp(s) => Sock::Tcp(s.try_clone()?),
        })
    }

    /// Close both directions (wakes a thread blocked reading).
    pub fn shutdown(&self) -> io::Result<()> {
        match self {
            Sock::Unix(s) => s.shutdown(Shutdown::Both),
            Sock::Tcp(s) => s.shutdown(Shutdown::Both),
        }
    }

    /// Timeout for reads (`None`: wait forever).
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Sock::Unix(s) => s.set_read_timeout(t),
            Sock::Tcp(s) => s.set_read_timeout(t),
        }
    }

    /// Timeout for writes.
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Sock::Unix(s) => s.set_write_timeout(t),
            Sock::Tcp(s) => s.set_write_timeout(t),
        }
    }

    /// Who is on the other end: `pid N uid M` for a unix socket, the
    /// address for TCP.
    pub fn peer(&self) -> String {
        match self {
            Sock::Tcp(s) => s
                .peer_addr()
                .map(|a| a.to_string())
                .unwrap_or_else(|_| "tcp client".into()),
            Sock::Unix(s) => {
                let mut cred = libc::ucred {
                    pid: 0,
                    uid: 0,
                    gid: 0,
                };
                let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
                // SAFETY: SO_PEERCRED fills a ucred of the given length on
                // a socket fd we own.
                let r = unsafe {
                    libc::getsockopt(
                        s.as_raw_fd(),
                        libc::SOL_SOCKET,
                        libc::SO_PEERCRED,
                        &mut cred as *mut libc::ucred as *mut libc::c_void,
                        &mut len,
                    )
                };
                if r == 0 {
                    format!("pid {} uid {}", cred.pid, cred.uid)
                } else {
                    "unix client".into()
                }
            }
        }
    }

    /// Disable Nagle on TCP (replies are small and latency matters).
    pub fn set_nodelay(&self) {
        if let Sock::Tcp(s) = self {
            let _ = s.set_nodelay(true);
        }
    }
}

impl Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => s.read(buf),
            Sock::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Sock {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => s.write(buf),
            Sock::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sock::Unix(s) => s.flush(),
            Sock::Tcp(s) => s.flush(),
        }
    }
}
