//! The vhost-user-blk frontend: QEMU's `vhost-user-blk-pci` talks to us over
//! a Unix socket; the guest sees a virtio-blk disk.
//!
//! - [`request`]: parsing and validation, pure (no guest memory, no device);
//! - [`config`]: feature bits and config space, mapped from the device's topology;
//! - [`exec`]: a chain parsed once into a job, executed against guest
//!   memory and the device into a completion (used length + pending status);
//! - [`queue`]: per-queue completion heap and timer;
//! - [`slow`]: the thread for requests that may block;
//! - [`backend`]: the `VhostUserBackend` glue.

pub mod backend;
pub mod config;
pub mod exec;
pub mod queue;
pub mod request;
pub mod sigbus;
pub mod slow;

pub use backend::{BlkBackend, MemoryError, check_regions};
pub use exec::FrontendError;
