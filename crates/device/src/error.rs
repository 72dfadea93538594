//! The device layer's errors, each mapped to the protocol-independent
//! [`Status`] a frontend reports.

use std::io;
use std::path::PathBuf;

use thiserror::Error;
use vssd_model::{ModelError, PersistError};

use super::files::FileError;
use super::request::Status;
use super::store::StoreError;

/// Errors of the device layer.
#[derive(Debug, Error)]
pub enum DeviceError {
    /// Opening the backing store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A state file or directory is unusable.
    #[error(transparent)]
    File(#[from] FileError),
    /// The saved FTL state could not be loaded; it is never silently replaced.
    #[error(
        "drive state file {path} cannot be loaded (it is kept as is: move it away \
         to start with a fresh drive, or use the profile/capacity it was saved with)"
    )]
    StateLoad {
        /// The state file.
        path: PathBuf,
        /// Why.
        #[source]
        source: PersistError,
    },
    /// Writing the FTL state failed.
    #[error("cannot save drive state to {path}")]
    StateSave {
        /// The state file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The request is outside the drive or misaligned.
    #[error("request {offset}+{len} is outside the drive or not sector-aligned")]
    BadRange {
        /// Byte offset.
        offset: u64,
        /// Byte length.
        len: u64,
    },
    /// The model refused the request.
    #[error("the drive model refused the request")]
    Model(#[from] ModelError),
    /// Reading or writing the data failed.
    #[error("data I/O failed")]
    Io(#[source] io::Error),
    /// The drive stopped after an internal failure.
    #[error("the drive has stopped: {0}")]
    Stopped(String),
    /// The drive is worn out and read-only (`[wear] end_of_life`).
    #[error("the drive is worn out (rated P/E cycles reached) and read-only")]
    ReadOnly,
    /// The drive's power is off (`ctl power-cut`) until `ctl power-on`.
    #[error("the drive's power is off (vssd ctl power-on)")]
    PoweredOff,
    /// A time a client gave is beyond what the drive's clock takes.
    #[error("{0}")]
    Clock(String),
    /// An injected media fault (`ctl fault add`) failed the request; the
    /// error is reported at the request's modelled completion time.
    #[error("injected media error (fault {fault})")]
    Media {
        /// The fault's id.
        fault: u64,
        /// When the drive reports the error (daemon clock).
        due: u64,
    },
}

impl DeviceError {
    /// The protocol-independent status a frontend reports for this error.
    pub fn status(&self) -> Status {
        match self {
            DeviceError::BadRange { .. } | DeviceError::Clock(_) => Status::Invalid,
            DeviceError::Model(e) if model_error_is_request_error(e) => Status::Invalid,
            DeviceError::Model(_) | DeviceError::Stopped(_) | DeviceError::PoweredOff => {
                Status::Stopped
            }
            DeviceError::Io(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOSPC | libc::EFBIG | libc::EDQUOT)
                ) =>
            {
                Status::NoSpace
            }
            _ => Status::IoError,
        }
    }
}

/// Whether the model refused the request itself (bad range), as opposed to
/// failing inside (its state is then not to be trusted).
pub(crate) fn model_error_is_request_error(e: &ModelError) -> bool {
    match e {
        ModelError::OutOfRange { .. } | ModelError::Misaligned { .. } => true,
        ModelError::Internal { .. } => false,
    }
}

/// Why a power request was refused; one line each.
#[derive(Debug, Error)]
pub enum PowerError {
    /// A cut while the power is off.
    #[error("the drive's power is off already (vssd ctl power-on)")]
    AlreadyOff,
    /// Power-on while it is on.
    #[error("the drive's power is on")]
    AlreadyOn,
    /// An absurd trigger.
    #[error("{0}")]
    BadTrigger(String),
}
