//! `vssd loadgen`'s building blocks: a vhost-user-blk driver of our own
//! (the part QEMU plays) to drive any vhost-user-blk backend without a
//! guest.
//!
//! - [`vring`]: the driver side of a split virtqueue;
//! - [`driver`]: the vhost-user conversation, shared memory, queues;
//! - [`blk`]: single virtio-blk requests (tests, one-off commands).

pub mod blk;
pub mod driver;
pub mod vring;

pub use driver::{BlkDriver, BlkInfo, DriverError, DriverOptions};
