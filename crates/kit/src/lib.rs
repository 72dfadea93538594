//! Test and demo kit: the Linux test guest, `vssd demo`, `vssd bench`,
//! and `vssd validate` (the presets against published measurements).
//!
//! Nothing in the daemon's core (model, device, frontends, serve, ctl)
//! depends on this module; it is compiled only with the `kit` feature (on
//! by default), and `cargo build --no-default-features` builds the daemon
//! without it.

pub mod bench;
pub mod bus;
pub mod demo;
pub mod guest;
pub mod serve;
pub mod validate;
