//! Small types every part of the model shares: the "no block" marker,
//! block states, write streams, the raw counters and the internal-error
//! value. They live here, below every mechanism, so that no mechanism
//! needs the drive ([`crate::Ssd`]) to name them.

/// "None" in the per-block and per-die tables of block ids.
pub(crate) const NONE: u32 = u32::MAX;

/// Block states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum BlockState {
    Free = 0,
    Open = 1,
    Full = 2,
    Victim = 3,
    /// Hybrid mapping: part of a data or log superblock.
    Mapped = 4,
    /// Retired from service (a factory bad block, `geometry.retired_blocks`):
    /// never written, erased or counted in wear.
    Retired = 5,
}

impl BlockState {
    pub(crate) fn from_u8(v: u8) -> Option<BlockState> {
        Some(match v {
            0 => BlockState::Free,
            1 => BlockState::Open,
            2 => BlockState::Full,
            3 => BlockState::Victim,
            4 => BlockState::Mapped,
            5 => BlockState::Retired,
            _ => return None,
        })
    }
}

/// Which write stream a unit belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Stream {
    /// Host data.
    Host = 0,
    /// Units copied by garbage collection.
    Gc = 1,
}

/// Raw counters kept by the model; [`crate::Counters`] adds the derived figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Raw {
    pub(crate) host_read_bytes: u64,
    pub(crate) host_written_bytes: u64,
    pub(crate) host_trimmed_bytes: u64,
    pub(crate) host_read_cmds: u64,
    pub(crate) host_write_cmds: u64,
    pub(crate) host_trim_cmds: u64,
    pub(crate) host_flush_cmds: u64,
    pub(crate) nand_pages_read: u64,
    pub(crate) nand_pages_programmed: u64,
    pub(crate) nand_bytes_programmed: u64,
    pub(crate) erases: u64,
    pub(crate) gc_copies: u64,
    pub(crate) fg_gc_victims: u64,
    pub(crate) bg_gc_victims: u64,
    pub(crate) rmw_reads: u64,
    pub(crate) buffer_stall_ns: u64,
    pub(crate) host_reduced_bytes: u64,
    pub(crate) trim_dropped_units: u64,
    pub(crate) merges_switch: u64,
    pub(crate) merges_partial: u64,
    pub(crate) merges_full: u64,
    pub(crate) merge_copies: u64,
    pub(crate) slc_units_written: u64,
    pub(crate) slc_units_folded: u64,
}

/// An FTL invariant found broken part-way through a request (see
/// [`crate::ModelError::Internal`]): what broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Broken(pub(crate) &'static str);
