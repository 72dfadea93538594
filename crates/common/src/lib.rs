//! Small pieces shared by the simulator, the device, the frontends, the
//! load generator and the command line: the monotonic clock, the latency
//! histogram, progress displays' ETAs, the seeded random streams, how
//! commands write to standard output and print numbers, the assertions
//! (`a.x < 0.9 * b.y`) the bench's expectations and the fidelity corpus's
//! shapes are written in, and the virtio features the device offers and
//! the load generator asks for.
//!
//! Depends on nothing of vssd's own.

pub mod cli_out;
pub mod clock;
pub mod eta;
pub mod expr;
pub mod fio;
pub mod hist;
pub mod numfmt;
pub mod rng;
pub mod virtio;
