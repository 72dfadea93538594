//! Frontends: protocols through which a VM reaches the [`crate::device`].
//! Thin by design: parse, validate, hand to the device, report status.

pub mod vhost_user_blk;
