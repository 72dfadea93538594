//! `vssd ctl`: talk to a running `vssd serve` over its control socket.
//!
//! [`protocol`] defines the JSON lines and the typed results, [`server`]
//! answers them inside the daemon, [`format`](mod@format) prints them; the
//! command-line client is its arguments (`cli`), the connection
//! ([`Client`]) and the subcommands (`run`).

mod cli;
mod client;
pub mod format;
pub mod protocol;
mod run;
pub mod server;

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

pub use cli::{CtlArgs, CtlCmd, FaultAdd, FaultCmd, TraceCmd};
pub use client::{Client, DEFAULT_TIMEOUT, request, stats};
pub use run::run;

/// Errors of the control client.
#[derive(Debug, Error)]
pub enum CtlError {
    /// No daemon at the socket, or not one this user may talk to.
    #[error("{}", connect_message(path, source))]
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The socket answered, but not as a control socket.
    #[error(
        "{path} is not vssd's control socket ({what}); give ctl the daemon's control socket with --control (by default the vhost-user socket's or the first unix NBD socket's path with .ctl added)"
    )]
    NotControl {
        /// The socket.
        path: PathBuf,
        /// What it did instead.
        what: &'static str,
    },
    /// The daemon did not answer in time.
    #[error("no reply from the daemon within {0:?} (raise --timeout, or check the daemon's log)")]
    Timeout(Duration),
    /// The connection failed mid-request.
    #[error("control socket I/O")]
    Io(#[source] std::io::Error),
    /// The daemon's reply is not valid.
    #[error("invalid reply from the daemon: {0}")]
    Protocol(String),
    /// The daemon refused the request.
    #[error("the daemon refused the request: {0}")]
    Refused(String),
    /// The command line is inconsistent.
    #[error("{0}")]
    Usage(String),
    /// Printing the result failed.
    #[error("writing the output")]
    Output(#[source] vssd_common::cli_out::StdoutError),
}

/// What a failed connect to the control socket means, by its cause.
fn connect_message(path: &std::path::Path, e: &std::io::Error) -> String {
    let p = path.display();
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => format!(
            "not allowed to use control socket {p}: it is private (mode 0600) to the user the \
             daemon runs as; run vssd ctl as that user (for a daemon running as root: sudo vssd ctl ...)"
        ),
        std::io::ErrorKind::NotFound => {
            format!("no control socket at {p} (is `vssd serve` running with --control {p}?)")
        }
        std::io::ErrorKind::ConnectionRefused => format!(
            "nothing listens on control socket {p}: the daemon that made it is gone \
             (is `vssd serve` running?)"
        ),
        _ => format!("cannot connect to control socket {p}"),
    }
}

impl From<std::io::Error> for CtlError {
    fn from(e: std::io::Error) -> Self {
        CtlError::Io(e)
    }
}
