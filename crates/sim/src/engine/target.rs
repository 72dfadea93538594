//! What the engine drives: the [`Target`] trait, the model behind it, and
//! [`FixedLatency`], a drive of no model for measuring the engine alone.

use vssd_model::{Completion, ModelError, Request, Ssd};

/// What the engine drives: the model, or a stand-in in tests.
pub trait Target {
    /// Exported capacity, bytes.
    fn capacity(&self) -> u64;
    /// Submit a request at virtual time `now_ns`.
    fn submit(&mut self, now_ns: u64, req: &Request) -> Result<Completion, ModelError>;
}

impl Target for Ssd {
    fn capacity(&self) -> u64 {
        Ssd::capacity(self)
    }

    #[inline]
    fn submit(&mut self, now_ns: u64, req: &Request) -> Result<Completion, ModelError> {
        Ssd::submit(self, now_ns, req)
    }
}

/// A drive with no model at all: every request takes `latency_ns`, any number
/// at once. For measuring the engine's own cost (`benches/sim.rs`).
#[derive(Debug, Clone, Copy)]
pub struct FixedLatency {
    /// Exported capacity, bytes.
    pub capacity: u64,
    /// Service time of every request, ns.
    pub latency_ns: u64,
}

impl Target for FixedLatency {
    fn capacity(&self) -> u64 {
        self.capacity
    }

    #[inline]
    fn submit(&mut self, now_ns: u64, _req: &Request) -> Result<Completion, ModelError> {
        Ok(Completion {
            submit_ns: now_ns,
            done_ns: now_ns + self.latency_ns,
        })
    }
}
