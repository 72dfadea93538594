//! The vocabulary of a request's accounting: what kind it was
//! ([`OpKind`]) and how it ended ([`Status`]), shared by the request guards
//! ([`super::request`]) and the counters they record into ([`super::stats`]).

use serde::{Deserialize, Serialize};

/// Kinds of request, for statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// Read.
    Read = 0,
    /// Write.
    Write = 1,
    /// Discard / TRIM / deallocate.
    Discard = 2,
    /// Write zeroes (either flavour).
    WriteZeroes = 3,
    /// Flush.
    Flush = 4,
    /// Anything answered without the drive (GET_ID, CACHE, invalid requests).
    Other = 5,
}

impl OpKind {
    /// All kinds, in index order.
    pub const ALL: [OpKind; 6] = [
        OpKind::Read,
        OpKind::Write,
        OpKind::Discard,
        OpKind::WriteZeroes,
        OpKind::Flush,
        OpKind::Other,
    ];

    /// Stable name used in JSON.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Discard => "discard",
            OpKind::WriteZeroes => "write_zeroes",
            OpKind::Flush => "flush",
            OpKind::Other => "other",
        }
    }
}

/// How a request ended, independent of any wire format: each frontend maps
/// it to its protocol's status (virtio-blk `S_*`, NBD errno values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Done.
    Ok,
    /// Malformed or out of range: refused before it touched anything.
    Invalid,
    /// A request type or flag the drive does not implement.
    Unsupported,
    /// Reading or writing the data failed.
    IoError,
    /// The backing store is full.
    NoSpace,
    /// The drive stopped after an internal failure, or its power is cut
    /// (`ctl power-cut`), and refuses all I/O.
    Stopped,
}

impl Status {
    /// Whether the request succeeded.
    pub fn is_ok(self) -> bool {
        self == Status::Ok
    }
}
