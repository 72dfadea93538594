//! The Linux test guest: builds a tiny Debian-kernel + busybox guest and
//! runs shell scripts inside it under QEMU, with emulated disks attached,
//! and starts the `vssd serve` it boots on.
//!
//! Used by the end-to-end tests, the demo (`vssd-demo`) and the bench
//! (`vssd-bench`). The guest has
//! no disk image of its own: its initramfs mounts the host's root read-only
//! over virtio-9p and runs the script chrooted there, so the guest uses the
//! host's `fio`, `blkdiscard`, `mkfs.ext4`... (the guest sees a private
//! tmpfs on `/tmp`, `/run` and `/dev/shm`; the script starts in `/tmp`).
//!
//! ```no_run
//! use std::time::Duration;
//! use vssd_guest::{Disk, Guest};
//!
//! # fn main() -> Result<(), vssd_guest::GuestError> {
//! let run = Guest::new()
//!     .disk(Disk::VhostUserBlk { socket: "/tmp/vssd.sock".into(), num_queues: 2 })
//!     .run_script("cat /sys/block/vda/size; exit 3", Duration::from_secs(120))?;
//! assert_eq!(run.exit_code, 3);
//! println!("{} sectors, booted in {:?}", run.output.trim(), run.boot_time);
//! # Ok(()) }
//! ```
//!
//! Pieces:
//! - [`ensure_image`] runs `vm-images/build-guest.sh` (cached: instant when
//!   nothing changed) and returns the kernel and initramfs paths;
//! - [`detect_accel`] picks KVM when a short, bounded probe works (the KVM
//!   API, then [`probe_kernel`], then a boot), TCG (`thread=multi`)
//!   otherwise; `VSSD_ACCEL=kvm|tcg` overrides it;
//! - [`Guest`] builds the QEMU command line (memory, vCPUs, [`Disk`]s) and
//!   [`Guest::run_script`] boots it, bounded by a timeout, and returns a
//!   [`GuestRun`] with the script's output and exit status; the QEMU
//!   options of the disks come from `vssd-qemu`, the builder `vssd
//!   qemu-args` prints with;
//! - [`bus`]: the bus a vssd drive is attached through, as a [`Disk`];
//! - [`serve`]: a `vssd serve` child process for one bus;
//! - [`fs`]: the filesystems the guest makes and their `mkfs`;
//! - [`console_files`]: files a script hands back on the console;
//! - [`guest_visible`]: a host file (the vssd binary) where the guest sees it.
//!
//! Environment: `VSSD_GUEST_DIR` (image cache directory, default
//! `<crate>/vm-images/cache`), `VSSD_ACCEL`, `VSSD_QEMU` (QEMU binary,
//! default `qemu-system-x86_64`).
#![deny(missing_docs)]

mod accel;
pub mod bus;
mod console;
pub mod console_files;
pub mod fs;
mod image;
mod run;
pub mod serve;
mod visible;

use std::path::PathBuf;
use std::time::Duration;

pub use accel::{Accel, probe_kernel};
pub use image::{GuestImage, ensure_image, guest_dir};
pub use run::{Disk, Guest, GuestRun, POWER_LOST, detect_accel, run_script};
pub use visible::guest_visible;

/// Everything that can go wrong while preparing or running a test guest.
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    /// A host program the guest needs (QEMU, bash...) is not installed.
    #[error(
        "`{program}` cannot be run ({source}); install the test dependencies with scripts/install-deps.sh"
    )]
    MissingProgram {
        /// The program that could not be started.
        program: String,
        /// Why starting it failed.
        #[source]
        source: std::io::Error,
    },
    /// `vm-images/build-guest.sh` failed.
    #[error("building the test guest with {script} failed ({status}):\n{stderr}")]
    ImageBuild {
        /// The build script that was run.
        script: PathBuf,
        /// Its exit status, as text.
        status: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// A file operation on the host failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path involved.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The configuration cannot be turned into a QEMU command line.
    #[error("invalid guest configuration: {0}")]
    Config(String),
    /// The guest did not finish within its timeout; QEMU was killed.
    #[error(
        "guest did not finish within {timeout:?} (QEMU killed; run files in {run_dir}){stderr}\n--- console tail ---\n{console_tail}"
    )]
    Timeout {
        /// The timeout that expired.
        timeout: Duration,
        /// Directory holding the console log and the script.
        run_dir: PathBuf,
        /// QEMU's standard error, prefixed for display (may be empty).
        stderr: String,
        /// The last lines of the serial console.
        console_tail: String,
    },
    /// QEMU exited before the script reported its exit status (bad
    /// command line, backend socket refused, kernel panic...).
    #[error(
        "QEMU exited ({status}) before the guest script finished (run files in {run_dir}){stderr}\n--- console tail ---\n{console_tail}"
    )]
    QemuExited {
        /// QEMU's exit status, as text.
        status: String,
        /// Directory holding the console log and the script.
        run_dir: PathBuf,
        /// QEMU's standard error, prefixed for display (may be empty).
        stderr: String,
        /// The last lines of the serial console.
        console_tail: String,
    },
    /// The run was cancelled (QEMU killed).
    #[error("the guest run was cancelled")]
    Cancelled,
    /// The guest's init could not run the script (9p mount failed...).
    #[error("guest init failed: {reason}\n--- console tail ---\n{console_tail}")]
    GuestInit {
        /// The reason printed by the guest's init.
        reason: String,
        /// The last lines of the serial console.
        console_tail: String,
    },
}

/// Result type of this module.
pub type Result<T> = std::result::Result<T, GuestError>;

/// Wraps an I/O error with a description of what was being done.
fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> GuestError {
    let what = what.into();
    move |source| GuestError::Io { what, source }
}
