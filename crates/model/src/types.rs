//! Small types every part of the model shares: the "no block" marker,
//! block states, write streams, the tally of counted events and the
//! internal-error value. They live here, below every mechanism, so that no mechanism
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

/// What the model counts, in the order the state file keeps the counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Count {
    HostReadBytes,
    HostWrittenBytes,
    HostTrimmedBytes,
    HostReadCmds,
    HostWriteCmds,
    HostTrimCmds,
    HostFlushCmds,
    NandPagesRead,
    NandPagesProgrammed,
    NandBytesProgrammed,
    Erases,
    GcCopies,
    FgGcVictims,
    BgGcVictims,
    RmwReads,
    BufferStallNs,
    HostReducedBytes,
    TrimDroppedUnits,
    MergesSwitch,
    MergesPartial,
    MergesFull,
    MergeCopies,
    SlcUnitsWritten,
    SlcUnitsFolded,
    MapReads,
    MapWrites,
}

/// How many [`Count`]s there are.
pub(crate) const COUNTS: usize = 26;

/// Tally counters kept by the model; [`crate::Counters`] adds the derived figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    counts: [u64; COUNTS],
}

impl Tally {
    /// Count `n` more of `c`.
    #[inline(always)]
    pub(crate) fn add(&mut self, c: Count, n: u64) {
        self.counts[c as usize] += n;
    }

    /// The count of `c`.
    #[inline(always)]
    pub(crate) fn get(&self, c: Count) -> u64 {
        self.counts[c as usize]
    }

    /// Every count, in [`Count`] order (the state file's).
    pub(crate) fn all(&self) -> &[u64; COUNTS] {
        &self.counts
    }

    /// Counters from every count, in [`Count`] order.
    pub(crate) fn from_all(counts: [u64; COUNTS]) -> Tally {
        Tally { counts }
    }
}

/// An FTL invariant found broken part-way through a request (see
/// [`crate::ModelError::Internal`]): what broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Broken(pub(crate) &'static str);
