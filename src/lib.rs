//! vssd: an SSD that does not exist.
//!
//! Layers, top to bottom (see `docs/` and `../shared/DESIGN.md`):
//! - [`sim`]: fio job files run against the model in virtual time;
//! - [`serve`], [`ctl`]: the vhost-user-blk daemon and its control client;
//! - [`frontend`]: protocols (vhost-user-blk) in front of the [`device`];
//! - [`loadgen`]: a vhost-user-blk driver of our own, to drive any backend;
//! - [`device`]: one emulated SSD: model + data store + completion timing;
//! - [`kit`] (feature `kit`, on by default): the Linux test guest booted in
//!   QEMU and `vssd demo`; the daemon's core never depends on it;
//! - [`model`]: the pure, deterministic FTL + timing model;
//! - [`profile`]: TOML drive profiles and built-in presets;
//! - [`metrics`]: the drive's statistics for Prometheus (`serve --metrics`);
//! - [`cli_out`], [`size`]: how commands write to stdout and end; size strings.

pub mod calibrate;
pub mod cli_out;
pub mod ctl;
pub mod device;
pub mod frontend;
#[cfg(feature = "kit")]
pub mod kit;
pub mod loadgen;
pub mod metrics;
pub mod model;
pub mod profile;
pub mod serve;
pub mod sim;
pub mod size;
