//! Frontends: protocols through which a VM reaches the [`vssd_device`].
//! Thin by design: parse, validate, hand to the device, report status.
//!
//! - [`vhost_user_blk`]: virtio-blk over vhost-user (QEMU's `vhost-user-blk-pci`);
//! - [`nbd`]: NBD, which QEMU presents as a SATA (AHCI) or NVMe disk.

pub mod nbd;
pub mod vhost_user_blk;
