//! PLACEHOLDER while the model is being written: signatures only.
#![allow(missing_docs, unused_variables)]
use super::*;

#[derive(Debug, Error)]
pub enum PersistError {
    #[error("I/O error reading drive state: {0}")]
    Io(#[from] std::io::Error),
    #[error("drive state file is damaged: {0}")]
    Corrupt(String),
    #[error("drive state was saved with a different profile: {0}")]
    ProfileMismatch(String),
    #[error("drive state version {found} is not supported (expected {expected})")]
    Version { found: u32, expected: u32 },
}

#[derive(Debug, Clone)]
pub struct Ssd { profile: Profile }

impl Ssd {
    pub fn new(profile: &Profile, seed: u64) -> Ssd { todo!() }
    pub fn profile(&self) -> &Profile { &self.profile }
    pub fn capacity(&self) -> u64 { todo!() }
    pub fn submit(&mut self, now_ns: u64, req: &Request) -> Result<Completion, ModelError> { todo!() }
    pub fn counters(&self) -> Counters { todo!() }
    pub fn secure_erase(&mut self) { todo!() }
    pub fn precondition(&mut self, now_ns: u64, step: &Precondition, seed: u64) -> u64 { todo!() }
    pub fn save<W: std::io::Write>(&self, w: W) -> std::io::Result<()> { todo!() }
    pub fn load<R: std::io::Read>(profile: &Profile, r: R) -> Result<Ssd, PersistError> { todo!() }
}
