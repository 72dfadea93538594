//! The SSD model: pure and deterministic. No I/O, no clock, no threads.
//!
//! The caller passes the time in (`now_ns`); the model returns when each
//! request completes and keeps the FTL state. See `docs/model.md`.
//!
//! # Glossary
//!
//! The FTL's own terms, used in names throughout the crate:
//!
//! - *unit*: a mapping unit (logical page), the granularity of the mapping
//!   table;
//! - *lpn* / *ppn*: logical / physical unit numbers. The forward map
//!   stores `ppn + 1` so that the zero-initialised table means "unmapped";
//!   which physical units hold current data is the live bitmap's
//!   (`mapping.rs`);
//! - *dpage*: a multi-plane page of one die (one page on each plane), the
//!   granularity of programs; it holds `units_per_dpage` units;
//! - *block*: the same erase block on every plane of one die, the
//!   granularity of erases and garbage collection; it holds
//!   `pages_per_block` dpages;
//! - *superblock* (hybrid mapping): block `k` of every die, the unit of
//!   hybrid mapping's logical and physical blocks (`logical_sb`,
//!   `physical_sb`);
//! - *write point*: where a write stream (host data or GC copies) of a die
//!   places its next unit;
//! - *victim*: a full block GC is collecting: *collecting* a victim is
//!   copying its valid units to the GC write point and erasing it (the
//!   only word for what GC does; hybrid mapping's equivalent is a log
//!   block's *merge*).
//!
//! # Layout
//!
//! [`Ssd`] (`ssd.rs`) holds its state grouped by mechanism, each group
//! owned by a module below it that knows nothing of the drive: the
//! mapping tables (`mapping.rs`), the block pool and write points
//! (`blocks.rs`), timelines (`timeline.rs`, over `channel.rs`), the write
//! buffer and command tags (`buffer.rs`), GC's victims (`victims.rs`), data
//! reduction (`reduction.rs`), the SLC cache (`slc.rs`), TRIM's deferred
//! release (`deferred_release.rs`), the mapping cache (`map_cache.rs`) and
//! hybrid mapping's state (`log_blocks.rs`), with the
//! types they share in `types.rs`. What the drive does with them is in
//! the modules that extend [`Ssd`]: the write path (`write.rs`,
//! `write_point.rs`), reads (`read.rs`), GC (`gc.rs`), TRIM (`trim.rs`),
//! the map cache's traffic (`map_traffic.rs`), hybrid mapping (`hybrid/`), invariants, queries, persistence and
//! preconditioning.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What the host asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Read `len` bytes at `offset`.
    Read,
    /// Write `len` bytes at `offset`.
    Write,
    /// TRIM / DISCARD / deallocate.
    Trim,
    /// Flush the write buffer to NAND.
    Flush,
    /// Write zeroes; with `unmap` the drive may deallocate instead.
    WriteZeroes {
        /// Deallocate instead of writing (virtio-blk WRITE_ZEROES_FLAG_UNMAP).
        unmap: bool,
    },
}

/// What the written data looks like (for drives that compress; a hint only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Payload {
    /// Nothing known.
    #[default]
    Unknown,
    /// `percent` of the data compresses away (fio's buffer_compress_percentage).
    Compressible {
        /// 0..=100.
        percent: u8,
    },
    /// All zeroes.
    Zeroes,
}

/// One host request: byte offset and length (Flush: both 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The operation.
    pub op: Op,
    /// Byte offset, a multiple of 512.
    pub offset: u64,
    /// Byte length, a multiple of 512.
    pub len: u64,
    /// Data hint for writes.
    pub payload: Payload,
}

/// Where the host's data is ([`Ssd::durability`]): what a power cut
/// would lose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Durability {
    /// Host units placed since the model was created or loaded.
    pub placed: u64,
    /// The last `open` of them wait in open dpages, not programmed.
    pub open: u64,
    /// The others are in NAND by this time (0: no write buffer).
    pub programmed_by_ns: u64,
}

/// When the drive finishes a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// Submission time as seen by the model (clamped to be non-decreasing).
    pub submit_ns: u64,
    /// Completion time.
    pub done_ns: u64,
}

/// A request the drive refuses. For every variant but [`ModelError::Internal`]
/// the model state is untouched.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ModelError {
    /// Beyond the exported capacity (or overflowing).
    #[error("request {offset}+{len} is outside the drive ({capacity} bytes)")]
    OutOfRange {
        /// Offset.
        offset: u64,
        /// Length.
        len: u64,
        /// Exported capacity.
        capacity: u64,
    },
    /// Not sector-aligned.
    #[error("request offset {offset} or length {len} is not a multiple of 512")]
    Misaligned {
        /// Offset.
        offset: u64,
        /// Length.
        len: u64,
    },
    /// The model found its own state broken (an FTL invariant does not
    /// hold) part-way through a request.
    ///
    /// After this error the model must be considered **damaged**: the
    /// request may be partly applied, and every later [`Ssd::submit`]
    /// returns this error again. Stop the drive, and do not save its state
    /// ([`Ssd::save`] refuses to); only [`Ssd::secure_erase`] (a fresh
    /// drive) clears it. No input is known to cause it: it reports a model
    /// bug instead of panicking while other queues share the model.
    #[error("drive model state is damaged (internal error: {what}); the drive must be stopped")]
    Internal {
        /// Which invariant broke.
        what: &'static str,
    },
}

/// All counters; field names are stable (they appear under `vssd` in JSON output).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Counters {
    /// Bytes read by the host.
    pub host_read_bytes: u64,
    /// Bytes written by the host (WRITE and non-unmapping WRITE_ZEROES).
    pub host_written_bytes: u64,
    /// Bytes the host asked to TRIM (and unmapping WRITE_ZEROES).
    pub host_trimmed_bytes: u64,
    /// Read commands.
    pub host_read_cmds: u64,
    /// Write commands.
    pub host_write_cmds: u64,
    /// TRIM commands.
    pub host_trim_cmds: u64,
    /// FLUSH commands.
    pub host_flush_cmds: u64,
    /// NAND page reads (host reads, read-modify-write and GC).
    pub nand_pages_read: u64,
    /// NAND pages programmed (one per plane of a multi-plane program).
    pub nand_pages_programmed: u64,
    /// Bytes programmed to NAND, padding included.
    pub nand_bytes_programmed: u64,
    /// Block erases.
    pub erases: u64,
    /// Mapping units copied by GC.
    pub gc_copies: u64,
    /// Blocks GC collected (its victims).
    pub gc_victims: u64,
    /// Foreground GC victims (host writes waited).
    pub fg_gc_victims: u64,
    /// Background GC victims (done in idle time).
    pub bg_gc_victims: u64,
    /// Mapping units read back for sub-unit writes.
    pub rmw_reads: u64,
    /// Total time host writes waited for write-buffer space, ns.
    pub buffer_stall_ns: u64,
    /// NAND bytes programmed / host bytes written (0 before any write).
    pub write_amplification: f64,
    /// Free (erased) blocks now, all dies.
    pub free_blocks: u64,
    /// All blocks (a block spans the planes of a die).
    pub total_blocks: u64,
    /// Logical mapping units currently mapped.
    pub mapped_units: u64,
    /// Logical mapping units exported.
    pub total_units: u64,
    /// Lowest erase count of any block.
    pub erase_count_min: u32,
    /// Mean erase count.
    pub erase_count_avg: f64,
    /// Highest erase count of any block.
    pub erase_count_max: u32,
    // The period mechanisms' counters are left out of JSON while zero (a
    // drive without the mechanism never moves them), so existing outputs
    // stay byte-identical.
    /// Host bytes after data reduction (`[reduction]`): what the host wrote,
    /// as compressed before it reaches NAND.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub host_reduced_bytes: u64,
    /// Mapping units TRIMmed while still in the write buffer (dropped, never
    /// programmed).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trim_dropped_units: u64,
    /// Hybrid mapping: switch merges (a log block becomes the data block).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub merges_switch: u64,
    /// Hybrid mapping: partial merges (the rest copied into a sequential log block).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub merges_partial: u64,
    /// Hybrid mapping: full merges (a logical block rewritten into a new block).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub merges_full: u64,
    /// Hybrid mapping: units copied by merges.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub merge_copies: u64,
    /// SLC cache: host units written in SLC mode.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slc_units_written: u64,
    /// SLC cache: units folded from SLC-mode blocks into native blocks.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slc_units_folded: u64,
    /// SLC cache: host units it can take now.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slc_free_units: u64,
    /// Mapping cache (`mapping.cache_bytes`): translation pages read from
    /// NAND because they were not cached.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub map_reads: u64,
    /// Mapping cache: changed translation pages written back to NAND (also
    /// in `nand_bytes_programmed`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub map_writes: u64,
    /// Deferred release (`trim.deferred_release`): units trimmed whose
    /// flash is not released yet (not counted in `mapped_units`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trim_pending_units: u64,
    /// Wear (`[wear]` with rated cycles): SMART-like "percentage used",
    /// mean erase count over the rated P/E cycles × 100 (may exceed 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wear_percent_used: Option<f64>,
    /// Blocks retired in service (grown bad blocks), not counting the
    /// factory-retired ones of the geometry.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub grown_bad_blocks: u64,
    /// Thermal model (`[thermal]`): the drive's temperature, °C, as of the
    /// last request or catch-up (absent without the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<f64>,
    /// Thermal model: the highest temperature reached, °C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_peak_c: Option<f64>,
    /// Thermal model: the throttle step now (0: none, 1: the first, ...).
    #[serde(default, skip_serializing_if = "is_zero32")]
    pub throttle_level: u32,
    /// Thermal model: times the drive entered its first throttle step
    /// (NVMe "Thermal Management Temperature 1 Transition Count").
    #[serde(default, skip_serializing_if = "is_zero")]
    pub throttle1_entries: u64,
    /// Times it entered a further step (NVMe TMT2 transitions).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub throttle2_entries: u64,
    /// Time in the first throttle step, ns.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub throttle1_ns: u64,
    /// Time in further steps, ns.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub throttle2_ns: u64,
    /// Time at or above the warning temperature (`thermal.warning_c`), ns.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warning_temp_ns: u64,
    /// Time at or above the critical temperature (`thermal.critical_c`), ns.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub critical_temp_ns: u64,
}

fn is_zero32(v: &u32) -> bool {
    *v == 0
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// A data-free way to age the drive in model time (`vssd ctl precondition`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Precondition {
    /// One sequential pass over the whole drive with `bs` writes at QD 32
    /// (`bs` at most [`MAX_REQUEST_BYTES`]).
    FillSequential {
        /// Write size.
        bs: u64,
    },
    /// Uniformly random aligned `bs` writes at QD 32, `amount` bytes in total
    /// (`bs` at most [`MAX_REQUEST_BYTES`]).
    Random {
        /// Write size.
        bs: u64,
        /// Total bytes.
        amount: u64,
    },
    /// TRIM the whole drive, in TRIMs of [`TRIM_PIECE_UNITS`] mapping units.
    TrimAll,
}

pub(crate) mod ssd;
pub use grown::RetireError;
pub use persist::PersistError;
pub use precondition::{MAX_REQUEST_BYTES, PreconditionRun, Progress, TRIM_PIECE_UNITS};
pub use ssd::Ssd;

mod blocks;
mod buffer;
mod channel;
mod deferred_release;
mod gc;
mod geo;
mod grown;
mod hybrid;
mod invariants;
mod log_blocks;
mod map_cache;
mod map_traffic;
mod mapping;
mod packed;
pub mod payload;
mod persist;
mod precondition;
mod query;
mod read;
mod reduction;
mod slc;
mod slc_fold;
mod thermal;
mod timeline;
mod trim;
mod types;
mod victims;
mod write;
mod write_point;

#[cfg(test)]
mod period_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod read_tests;
