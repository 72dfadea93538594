//! The errors of `vssd serve`.

use std::io;
use std::path::PathBuf;

use thiserror::Error;
use vssd_device::DeviceError;
use vssd_device::files::FileError;
use vssd_profile::ProfileError;

/// Errors of `vssd serve` (startup problems mostly).
#[derive(Debug, Error)]
pub enum ServeError {
    /// The profile does not load.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// `--trace` could not start.
    #[error("--trace: {0}")]
    Trace(#[source] vssd_device::capture::CaptureError),
    /// Another process listens on the socket path.
    #[error("{0} is in use by a running process (another vssd or qemu-storage-daemon?)")]
    SocketInUse(PathBuf),
    /// Something that is not a socket is at the path.
    #[error("{0} exists and is not a socket; refusing to replace it")]
    NotASocket(PathBuf),
    /// The socket's directory does not exist.
    #[error("cannot create socket {path}: directory {dir} does not exist")]
    NoSocketDir {
        /// The socket.
        path: PathBuf,
        /// Its missing directory.
        dir: PathBuf,
    },
    /// The socket's directory is writable by every user and not sticky.
    #[error(
        "refusing to create socket {path}: its directory {dir} (mode {mode:04o}) is writable by \
         every user and not sticky, so another user could replace the socket; use a directory \
         only the daemon's user can write (or a sticky one, like /tmp)"
    )]
    OpenSocketDir {
        /// The socket.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
        /// The directory's mode.
        mode: u32,
    },
    /// Binding or preparing a socket failed.
    #[error("cannot listen on {path}: {step}")]
    Bind {
        /// The socket (the user's path, never a temporary one).
        path: PathBuf,
        /// What was being done.
        step: &'static str,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A socket path longer than a unix socket address holds.
    #[error(
        "socket path {path} is {len} bytes long: a unix socket's path has at most {max} \
         (clients connect by it); choose a shorter one",
        max = super::sockets::SOCKET_PATH_MAX
    )]
    SocketPathTooLong {
        /// The socket.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
    },
    /// Bad option values.
    #[error("{0}")]
    Usage(String),
    /// An NBD listener cannot be set up.
    #[error("NBD listener {addr}")]
    Nbd {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Opening the drive failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The state directory is unusable (or locked by another daemon).
    #[error("state directory")]
    StateDir(#[from] FileError),
    /// vhost-user setup failed.
    #[error("vhost-user: {0}")]
    Vhost(String),
    /// Thread, signal or eventfd setup failed.
    #[error("daemon setup")]
    Setup(#[source] io::Error),
    /// `--pidfile` cannot be taken.
    #[error(transparent)]
    PidFile(#[from] super::pidfile::PidFileError),
    /// The metrics listener cannot be set up.
    #[error(transparent)]
    Metrics(#[from] crate::metrics::MetricsError),
}
