//! The vhost-user-blk frontend: QEMU's `vhost-user-blk-pci` talks to us over
//! a Unix socket; the guest sees a virtio-blk disk.
//!
//! - [`request`]: parsing and validation, pure (no guest memory, no device);
//! - [`config`]: feature bits and config space from the drive profile;
//! - [`backend`]: the `VhostUserBackend` glue, per-queue completion timing.

pub mod backend;
pub mod config;
pub mod request;

pub use backend::{BlkBackend, FrontendError};
