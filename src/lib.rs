//! vssd: an SSD that does not exist.
//!
//! The `vssd` package is the command line (`src/main.rs`), the daemon
//! ([`serve`]) and its Prometheus endpoint ([`metrics`]). Everything else
//! lives in one crate per layer under `crates/`, re-exported here under the
//! names the command line, the tests and the benches use. Dependencies run
//! one way, top to bottom; `docs/architecture.md` has the table of crates
//! and modules, what each owns, and the request path through each frontend.
//!
//! - the kit (feature `kit`, on by default; the daemon never depends on
//!   it): [`guest`] (`vssd-guest`: the Linux test guest and the `vssd
//!   serve` it boots on), [`demo`] (`vssd-demo`), [`bench`] (`vssd-bench`:
//!   `vssd bench` and `vssd surface`), [`fidelity`] (`vssd-fidelity`:
//!   `vssd validate` and `vssd calibrate --fit`);
//! - [`qemu`] (`vssd-qemu`): the QEMU options that attach a drive, for
//!   `vssd qemu-args` and the test guest;
//! - [`loadgen`] (`vssd-loadgen`): a vhost-user-blk driver of our own;
//! - [`ctl`] (`vssd-ctl`): the control socket's protocol, server and client;
//! - [`frontend`] (`vssd-frontend`): vhost-user-blk and NBD;
//! - [`device`] (`vssd-device`): one emulated drive: model, store, timing,
//!   accounting;
//! - [`sim`], [`calibrate`] (`vssd-sim`): fio job files in virtual time;
//! - [`model`] (`vssd-model`): the pure, deterministic FTL and timing model;
//! - [`profile`], [`size`] (`vssd-profile`): drive profiles and presets;
//! - [`cli_out`] (`vssd-common`, with the clock, histogram and random
//!   streams): how commands write to standard output.

pub mod logging;
pub mod metrics;
pub mod qemu_args;
pub mod serve;

#[cfg(feature = "kit")]
pub use vssd_bench as bench;
pub use vssd_common::cli_out;
pub use vssd_ctl as ctl;
#[cfg(feature = "kit")]
pub use vssd_demo as demo;
pub use vssd_device as device;
#[cfg(feature = "kit")]
pub use vssd_fidelity as fidelity;
pub use vssd_frontend as frontend;
#[cfg(feature = "kit")]
pub use vssd_guest as guest;
pub use vssd_loadgen as loadgen;
pub use vssd_model as model;
pub use vssd_profile as profile;
pub use vssd_profile::size;
pub use vssd_qemu as qemu;
pub use vssd_sim as sim;
pub use vssd_sim::calibrate;
pub use vssd_trace as trace;
