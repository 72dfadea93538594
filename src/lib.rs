//! vssd: an SSD that does not exist.
//!
//! Layers, top to bottom (see `docs/` and `../shared/DESIGN.md`):
//! - [`sim`]: fio job files run against the model in virtual time;
//! - [`guest`]: a small Linux test guest booted in QEMU (tests, demo, benches);
//! - [`model`]: the pure, deterministic FTL + timing model;
//! - [`profile`]: TOML drive profiles and built-in presets.

pub mod guest;
pub mod model;
pub mod profile;
pub mod sim;
pub mod size;
