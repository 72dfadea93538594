//! Small pieces shared by the simulator, the device, the load generator
//! and the command line: the monotonic clock, the latency histogram, the
//! seeded random streams, and how commands write to standard output.
//!
//! Depends on nothing of vssd's own.

pub mod cli_out;
pub mod clock;
pub mod fio;
pub mod hist;
pub mod rng;
