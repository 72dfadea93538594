//! What an NBD request asks: its header checked against the export and
//! what was negotiated, into a [`Command`] the device runs or a
//! [`Refusal`]. Pure (fuzzed through [`super::proto::parse_request`]).

use super::handshake::{MAX_PAYLOAD, Negotiated};
use super::proto::{self, cflags, cmd};
use vssd_device::{OpKind, SECTOR, Status};

/// Most extents in one block-status reply.
pub const MAX_EXTENTS: usize = 2048;

/// A request that passed [`validate`]: what the device is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Read `len` bytes at `offset`.
    Read {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
    },
    /// Write the `len` bytes of payload that follow the header.
    Write {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
        /// Durable before the reply.
        fua: bool,
    },
    /// Flush the drive's write buffer.
    Flush,
    /// TRIM the range.
    Trim {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
        /// Durable before the reply.
        fua: bool,
    },
    /// Write zeroes over the range, deallocating unless `NO_HOLE`.
    WriteZeroes {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
        /// The client allows a hole (no `NO_HOLE` flag).
        unmap: bool,
        /// Durable before the reply.
        fua: bool,
    },
    /// A cache hint: answered at once.
    Cache,
    /// Report allocation (`base:allocation`) over the range.
    BlockStatus {
        /// Byte offset.
        offset: u64,
        /// Bytes.
        len: u32,
        /// Most extents to return (1 with `REQ_ONE`).
        max_extents: usize,
    },
    /// The client ends the session.
    Disconnect,
}

/// Why a request header is not executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Answered with this status, mapped by [`super::conn::nbd_errno`] (its payload,
    /// if any, still follows and is skipped).
    Refuse(Status, &'static str),
    /// Cannot be answered safely: end the connection.
    Disconnect(&'static str),
}

/// Validate a request header against the export and what was negotiated:
/// flags for the command, alignment, range, payload size. Pure (fuzzed
/// through [`proto::parse_request`]).
pub fn validate(r: &proto::Request, size: u64, neg: &Negotiated) -> Result<Command, Refusal> {
    let allowed = match r.kind {
        cmd::READ => {
            if neg.structured {
                cflags::DF
            } else {
                0
            }
        }
        cmd::WRITE | cmd::TRIM => cflags::FUA,
        cmd::WRITE_ZEROES => cflags::FUA | cflags::NO_HOLE,
        cmd::BLOCK_STATUS => cflags::REQ_ONE,
        cmd::FLUSH | cmd::CACHE | cmd::DISC => 0,
        _ => return Err(Refusal::Refuse(Status::Invalid, "unknown command")),
    };
    if r.kind == cmd::WRITE && r.len > MAX_PAYLOAD {
        return Err(Refusal::Disconnect("write payload over the 32 MiB maximum"));
    }
    if r.flags & !allowed != 0 {
        return Err(Refusal::Refuse(
            Status::Invalid,
            "flag not valid for this command",
        ));
    }
    match r.kind {
        cmd::FLUSH => return Ok(Command::Flush),
        cmd::DISC => return Ok(Command::Disconnect),
        _ => {}
    }
    if r.kind == cmd::READ && r.len > MAX_PAYLOAD {
        return Err(Refusal::Refuse(
            Status::Invalid,
            "read over the 32 MiB maximum",
        ));
    }
    if r.kind == cmd::BLOCK_STATUS && !neg.base_allocation {
        return Err(Refusal::Refuse(
            Status::Invalid,
            "no metadata context selected",
        ));
    }
    if r.kind == cmd::BLOCK_STATUS && r.len == 0 {
        // A block-status reply must hold at least one descriptor, and a
        // descriptor of zero length is not allowed: there is nothing to
        // describe, so the request is invalid.
        return Err(Refusal::Refuse(
            Status::Invalid,
            "block status of zero bytes",
        ));
    }
    if !r.offset.is_multiple_of(SECTOR) || !u64::from(r.len).is_multiple_of(SECTOR) {
        return Err(Refusal::Refuse(Status::Invalid, "not aligned to 512 bytes"));
    }
    if r.offset
        .checked_add(u64::from(r.len))
        .is_none_or(|end| end > size)
    {
        let s = if matches!(r.kind, cmd::WRITE | cmd::WRITE_ZEROES) {
            Status::NoSpace
        } else {
            Status::Invalid
        };
        return Err(Refusal::Refuse(s, "beyond the end of the export"));
    }
    let (offset, len, fua) = (r.offset, r.len, r.flags & cflags::FUA != 0);
    Ok(match r.kind {
        cmd::READ => Command::Read { offset, len },
        cmd::WRITE => Command::Write { offset, len, fua },
        cmd::TRIM => Command::Trim { offset, len, fua },
        cmd::WRITE_ZEROES => Command::WriteZeroes {
            offset,
            len,
            unmap: r.flags & cflags::NO_HOLE == 0,
            fua,
        },
        cmd::CACHE => Command::Cache,
        // The only other command `allowed` let through.
        _ => Command::BlockStatus {
            offset,
            len,
            max_extents: if r.flags & cflags::REQ_ONE != 0 {
                1
            } else {
                MAX_EXTENTS
            },
        },
    })
}

/// Whether the reply to a command of this kind is structured.
pub(super) fn structured_reply(kind: u16, neg: &Negotiated) -> bool {
    neg.structured && matches!(kind, cmd::READ | cmd::BLOCK_STATUS)
}

/// The device's accounting class of an NBD command.
pub(super) fn op_kind(kind: u16) -> OpKind {
    match kind {
        cmd::READ => OpKind::Read,
        cmd::WRITE => OpKind::Write,
        cmd::TRIM => OpKind::Discard,
        cmd::WRITE_ZEROES => OpKind::WriteZeroes,
        _ => OpKind::Other,
    }
}

/// Split `(offset, len)` into ranges of at most `max` bytes.
pub(super) fn split(offset: u64, len: u64, max: u64) -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    let mut o = offset;
    let end = offset + len;
    while o < end {
        let n = (end - o).min(max);
        v.push((o, n));
        o += n;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn neg(structured: bool, meta: bool) -> Negotiated {
        Negotiated {
            structured,
            base_allocation: meta,
            flags: 0,
        }
    }

    fn req(kind: u16, flags: u16, offset: u64, len: u32) -> proto::Request {
        proto::Request {
            flags,
            kind,
            cookie: 1,
            offset,
            len,
        }
    }

    #[test]
    fn requests_are_checked_like_the_spec_says() {
        let n = neg(true, true);
        let size = 1 << 30;
        assert_eq!(
            validate(&req(cmd::READ, 0, 0, 4096), size, &n),
            Ok(Command::Read {
                offset: 0,
                len: 4096
            })
        );
        assert!(validate(&req(cmd::READ, cflags::DF, 0, 4096), size, &n).is_ok());
        assert!(matches!(
            validate(
                &req(cmd::READ, cflags::DF, 0, 4096),
                size,
                &neg(false, false)
            ),
            Err(Refusal::Refuse(Status::Invalid, _))
        ));
        assert!(matches!(
            validate(&req(cmd::READ, 0, 100, 4096), size, &n),
            Err(Refusal::Refuse(Status::Invalid, _))
        ));
        assert!(matches!(
            validate(&req(cmd::READ, 0, size - 512, 1024), size, &n),
            Err(Refusal::Refuse(Status::Invalid, _))
        ));
        assert!(matches!(
            validate(&req(cmd::WRITE, 0, size - 512, 1024), size, &n),
            Err(Refusal::Refuse(Status::NoSpace, _))
        ));
        assert!(matches!(
            validate(&req(cmd::WRITE, 0, 0, MAX_PAYLOAD + 512), size, &n),
            Err(Refusal::Disconnect(_))
        ));
        assert!(matches!(
            validate(&req(cmd::READ, 0, 0, MAX_PAYLOAD + 512), size, &n),
            Err(Refusal::Refuse(Status::Invalid, _))
        ));
        assert!(matches!(
            validate(&req(cmd::WRITE_ZEROES, cflags::FAST_ZERO, 0, 512), size, &n),
            Err(Refusal::Refuse(Status::Invalid, _))
        ));
        assert_eq!(
            validate(
                &req(cmd::WRITE_ZEROES, cflags::NO_HOLE | cflags::FUA, 0, 512),
                size,
                &n
            ),
            Ok(Command::WriteZeroes {
                offset: 0,
                len: 512,
                unmap: false,
                fua: true
            })
        );
        assert!(matches!(
            validate(&req(cmd::BLOCK_STATUS, 0, 0, 512), size, &neg(true, false)),
            Err(Refusal::Refuse(Status::Invalid, _))
        ));
        assert!(
            matches!(
                validate(&req(cmd::BLOCK_STATUS, 0, 4096, 0), size, &n),
                Err(Refusal::Refuse(Status::Invalid, _))
            ),
            "block status of length 0 has no descriptor to return"
        );
        assert!(matches!(
            validate(&req(42, 0, 0, 0), size, &n),
            Err(Refusal::Refuse(Status::Invalid, _))
        ));
        assert!(validate(&req(cmd::TRIM, 0, 0, u32::MAX - 511), size * 8, &n).is_ok());
        assert_eq!(split(0, 5 << 30, 1 << 30).len(), 5);
    }

    proptest! {
        /// Any header is either valid inside the export or refused; never a panic.
        #[test]
        fn check_never_panics_and_valid_means_inside(
            kind in 0u16..10, flags in any::<u16>(), offset in any::<u64>(), len in any::<u32>(),
            structured in any::<bool>(), meta in any::<bool>(),
        ) {
            let size = 1u64 << 30;
            let r = req(kind, flags, offset, len);
            if validate(&r, size, &neg(structured, meta)).is_ok()
                && !matches!(kind, cmd::FLUSH | cmd::DISC)
            {
                prop_assert!(offset + u64::from(len) <= size);
                prop_assert_eq!(offset % 512, 0);
            }
        }
    }
}
