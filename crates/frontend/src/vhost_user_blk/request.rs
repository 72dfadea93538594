//! virtio-blk request parsing: pure functions over descriptor lists and
//! bytes, no guest memory, no device. Executing lives in `backend.rs`.
//!
//! A request is a descriptor chain: device-readable descriptors (16-byte
//! header, then data for OUT / DISCARD / WRITE_ZEROES) followed by
//! device-writable ones (data for IN / GET_ID, then a 1-byte status).
//! With VIRTIO_F_VERSION_1 the split between descriptors is arbitrary, so
//! the layout is computed in bytes, not descriptors.

use thiserror::Error;
use virtio_bindings::virtio_blk::{
    VIRTIO_BLK_S_IOERR, VIRTIO_BLK_S_OK, VIRTIO_BLK_S_UNSUPP, VIRTIO_BLK_T_DISCARD,
    VIRTIO_BLK_T_FLUSH, VIRTIO_BLK_T_GET_ID, VIRTIO_BLK_T_IN, VIRTIO_BLK_T_OUT,
    VIRTIO_BLK_T_WRITE_ZEROES,
};

pub use vssd_device::SECTOR;
use vssd_device::Status;
/// Size of the request header (`struct virtio_blk_outhdr`).
pub const HEADER_LEN: usize = 16;
/// Size of one discard / write-zeroes segment.
pub const SEGMENT_LEN: usize = 16;
/// Length of the GET_ID answer.
pub const ID_LEN: usize = 20;
/// `VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP`.
pub const FLAG_UNMAP: u32 = 1;

/// One descriptor as the queue gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desc {
    /// Guest physical address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// Device-writable.
    pub write_only: bool,
}

/// A contiguous piece of guest memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seg {
    /// Guest physical address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
}

/// Where the parts of a request are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    /// The 16 header bytes (possibly spread over descriptors).
    pub header: Vec<Seg>,
    /// Device-readable bytes after the header.
    pub out_data: Vec<Seg>,
    /// Total of `out_data`.
    pub out_len: u64,
    /// Device-writable bytes before the status byte.
    pub in_data: Vec<Seg>,
    /// Total of `in_data`.
    pub in_len: u64,
    /// Guest address of the status byte.
    pub status: u64,
}

/// Device limits a request is checked against (from the config space).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Disk size in sectors.
    pub capacity_sectors: u64,
    /// Largest IN/OUT data length, bytes.
    pub max_data_len: u64,
    /// Largest discard segment, sectors.
    pub max_discard_sectors: u32,
    /// Most discard segments per request.
    pub max_discard_seg: u32,
    /// Largest write-zeroes segment, sectors.
    pub max_write_zeroes_sectors: u32,
    /// Most write-zeroes segments per request.
    pub max_write_zeroes_seg: u32,
}

/// Why a request is refused. [`ParseError::status`] is what the guest gets.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    /// No device-writable byte for the status: nothing can be reported.
    #[error("descriptor chain has no writable status byte")]
    NoStatus,
    /// A device-readable descriptor follows a writable one.
    #[error("readable descriptor after a writable one")]
    BadOrder,
    /// Fewer than 16 readable bytes.
    #[error("request header is {0} bytes, need 16")]
    ShortHeader(u64),
    /// Descriptor lengths overflow.
    #[error("descriptor lengths overflow")]
    Overflow,
    /// Too many descriptors.
    #[error("descriptor chain longer than {0}")]
    TooLong(usize),
    /// Request type not implemented.
    #[error("unsupported request type {0}")]
    Unsupported(u32),
    /// Data buffers in the wrong direction for the type.
    #[error("request type {kind} has {out_len} readable and {in_len} writable data bytes")]
    Direction {
        /// Request type.
        kind: u32,
        /// Readable data bytes.
        out_len: u64,
        /// Writable data bytes.
        in_len: u64,
    },
    /// Data length not a multiple of 512.
    #[error("data length {0} is not a multiple of 512")]
    Unaligned(u64),
    /// Data length above the advertised maximum.
    #[error("data length {0} exceeds the maximum")]
    TooBig(u64),
    /// Sector range outside the disk (or overflowing).
    #[error("sectors {sector}+{sectors} outside the disk ({capacity} sectors)")]
    OutOfRange {
        /// First sector.
        sector: u64,
        /// Count.
        sectors: u64,
        /// Disk size.
        capacity: u64,
    },
    /// Discard / write-zeroes payload not a whole number of segments, or none.
    #[error("discard/write-zeroes payload of {0} bytes is not 1.. whole 16-byte segments")]
    SegmentPayload(u64),
    /// More segments than advertised.
    #[error("{count} segments, maximum {max}")]
    TooManySegments {
        /// Segments sent.
        count: u64,
        /// Advertised maximum.
        max: u32,
    },
    /// A segment larger than advertised.
    #[error("segment of {sectors} sectors, maximum {max}")]
    SegmentTooBig {
        /// Segment sectors.
        sectors: u32,
        /// Advertised maximum.
        max: u32,
    },
    /// Reserved or forbidden segment flags.
    #[error("segment flags {0:#x} not supported")]
    SegmentFlags(u32),
}

impl ParseError {
    /// The device status this error is reported with ([`virtio_status`]
    /// turns it into the status byte).
    pub fn status(&self) -> Status {
        match self {
            ParseError::Unsupported(_) | ParseError::SegmentFlags(_) => Status::Unsupported,
            _ => Status::Invalid,
        }
    }
}

/// The virtio-blk status byte for a device status: the frontend's one
/// mapping, used for parse errors and device results alike.
pub fn virtio_status(s: Status) -> u8 {
    (match s {
        Status::Ok => VIRTIO_BLK_S_OK,
        Status::Unsupported => VIRTIO_BLK_S_UNSUPP,
        Status::Invalid | Status::IoError | Status::NoSpace | Status::Stopped => VIRTIO_BLK_S_IOERR,
    }) as u8
}

/// The request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// `VIRTIO_BLK_T_*`.
    pub kind: u32,
    /// Priority (ignored).
    pub ioprio: u32,
    /// First sector.
    pub sector: u64,
}

impl Header {
    /// Decode the 16 little-endian header bytes.
    pub fn from_bytes(b: &[u8; HEADER_LEN]) -> Header {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut s = [0u8; 8];
        s.copy_from_slice(&b[8..16]);
        Header {
            kind: u32_at(0),
            ioprio: u32_at(4),
            sector: u64::from_le_bytes(s),
        }
    }
}

/// What the request asks for, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlkRequest {
    /// Read `len` bytes at byte `offset` into the writable data.
    Read {
        /// Byte offset.
        offset: u64,
        /// Byte length.
        len: u64,
    },
    /// Write the readable data, `len` bytes, at byte `offset`.
    Write {
        /// Byte offset.
        offset: u64,
        /// Byte length.
        len: u64,
    },
    /// Flush.
    Flush,
    /// Device serial into the first `len` writable bytes.
    GetId {
        /// Bytes to write (≤ 20).
        len: u32,
    },
    /// Discard; segments follow in the readable data.
    Discard {
        /// Number of segments.
        segments: u32,
    },
    /// Write zeroes; segments follow in the readable data.
    WriteZeroes {
        /// Number of segments.
        segments: u32,
    },
}

/// A validated discard / write-zeroes range, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// Byte offset.
    pub offset: u64,
    /// Byte length.
    pub len: u64,
    /// Unmap flag (write zeroes only).
    pub unmap: bool,
}

/// Guest address of the status byte: the last byte of the last non-empty
/// device-writable descriptor (None: the request cannot be answered).
pub fn status_byte(descs: &[Desc]) -> Option<u64> {
    let d = descs.iter().rev().find(|d| d.write_only && d.len > 0)?;
    d.addr.checked_add(u64::from(d.len) - 1)
}

/// Split a descriptor chain into header, data and status, in bytes.
pub fn split_layout(descs: &[Desc], max_descs: usize) -> Result<Layout, ParseError> {
    if descs.len() > max_descs {
        return Err(ParseError::TooLong(max_descs));
    }
    let status = status_byte(descs).ok_or(ParseError::NoStatus)?;
    let n_read = descs.iter().take_while(|d| !d.write_only).count();
    let (readable, writable) = descs.split_at(n_read);
    if writable.iter().any(|d| !d.write_only) {
        // The status can still be reported.
        return Err(ParseError::BadOrder);
    }
    // Every writable descriptor is write-only, so this is the status's.
    let last_w = writable
        .iter()
        .rposition(|d| d.len > 0)
        .ok_or(ParseError::NoStatus)?;
    let mut l = Layout {
        status,
        ..Layout::default()
    };

    let mut need = HEADER_LEN as u64;
    for d in readable {
        let mut addr = d.addr;
        let mut len = u64::from(d.len);
        if need > 0 {
            let take = need.min(len);
            if take > 0 {
                l.header.push(Seg {
                    addr,
                    len: take as u32,
                });
            }
            need -= take;
            len -= take;
            addr = addr.checked_add(take).ok_or(ParseError::Overflow)?;
        }
        if len > 0 {
            addr.checked_add(len - 1).ok_or(ParseError::Overflow)?;
            l.out_data.push(Seg {
                addr,
                len: len as u32,
            });
            l.out_len = l.out_len.checked_add(len).ok_or(ParseError::Overflow)?;
        }
    }
    if need > 0 {
        return Err(ParseError::ShortHeader(HEADER_LEN as u64 - need));
    }
    for (i, d) in writable.iter().enumerate() {
        let len = if i == last_w {
            u64::from(d.len) - 1
        } else if i > last_w {
            0
        } else {
            u64::from(d.len)
        };
        if len > 0 {
            d.addr.checked_add(len - 1).ok_or(ParseError::Overflow)?;
            l.in_data.push(Seg {
                addr: d.addr,
                len: len as u32,
            });
            l.in_len = l.in_len.checked_add(len).ok_or(ParseError::Overflow)?;
        }
    }
    Ok(l)
}

/// Validate a request against its layout and the device limits.
pub fn parse_request(h: &Header, l: &Layout, lim: &Limits) -> Result<BlkRequest, ParseError> {
    let dir = |ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(ParseError::Direction {
                kind: h.kind,
                out_len: l.out_len,
                in_len: l.in_len,
            })
        }
    };
    let range = |len: u64| -> Result<u64, ParseError> {
        if !len.is_multiple_of(SECTOR) {
            return Err(ParseError::Unaligned(len));
        }
        if len > lim.max_data_len {
            return Err(ParseError::TooBig(len));
        }
        let sectors = len / SECTOR;
        match h.sector.checked_add(sectors) {
            Some(end) if end <= lim.capacity_sectors => Ok(h.sector * SECTOR),
            _ => Err(ParseError::OutOfRange {
                sector: h.sector,
                sectors,
                capacity: lim.capacity_sectors,
            }),
        }
    };
    match h.kind {
        VIRTIO_BLK_T_IN => {
            dir(l.out_len == 0)?;
            Ok(BlkRequest::Read {
                offset: range(l.in_len)?,
                len: l.in_len,
            })
        }
        VIRTIO_BLK_T_OUT => {
            dir(l.in_len == 0)?;
            Ok(BlkRequest::Write {
                offset: range(l.out_len)?,
                len: l.out_len,
            })
        }
        VIRTIO_BLK_T_FLUSH => {
            dir(l.in_len == 0 && l.out_len == 0)?;
            Ok(BlkRequest::Flush)
        }
        VIRTIO_BLK_T_GET_ID => {
            dir(l.out_len == 0 && l.in_len > 0)?;
            Ok(BlkRequest::GetId {
                len: l.in_len.min(ID_LEN as u64) as u32,
            })
        }
        VIRTIO_BLK_T_DISCARD | VIRTIO_BLK_T_WRITE_ZEROES => {
            dir(l.in_len == 0)?;
            if l.out_len == 0 || !l.out_len.is_multiple_of(SEGMENT_LEN as u64) {
                return Err(ParseError::SegmentPayload(l.out_len));
            }
            let count = l.out_len / SEGMENT_LEN as u64;
            let max = if h.kind == VIRTIO_BLK_T_DISCARD {
                lim.max_discard_seg
            } else {
                lim.max_write_zeroes_seg
            };
            if count > u64::from(max) {
                return Err(ParseError::TooManySegments { count, max });
            }
            let segments = count as u32;
            Ok(if h.kind == VIRTIO_BLK_T_DISCARD {
                BlkRequest::Discard { segments }
            } else {
                BlkRequest::WriteZeroes { segments }
            })
        }
        other => Err(ParseError::Unsupported(other)),
    }
}

/// Decode and validate discard / write-zeroes segments
/// (`struct virtio_blk_discard_write_zeroes`: le64 sector, le32 num_sectors, le32 flags).
pub fn parse_segments(
    bytes: &[u8],
    write_zeroes: bool,
    lim: &Limits,
) -> Result<Vec<Range>, ParseError> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(SEGMENT_LEN) {
        return Err(ParseError::SegmentPayload(bytes.len() as u64));
    }
    let max = if write_zeroes {
        lim.max_write_zeroes_sectors
    } else {
        lim.max_discard_sectors
    };
    let mut out = Vec::with_capacity(bytes.len() / SEGMENT_LEN);
    for s in bytes.chunks_exact(SEGMENT_LEN) {
        let mut b8 = [0u8; 8];
        b8.copy_from_slice(&s[0..8]);
        let sector = u64::from_le_bytes(b8);
        let sectors = u32::from_le_bytes([s[8], s[9], s[10], s[11]]);
        let flags = u32::from_le_bytes([s[12], s[13], s[14], s[15]]);
        // Discard: no flags at all. Write zeroes: only UNMAP.
        let allowed = if write_zeroes { FLAG_UNMAP } else { 0 };
        if flags & !allowed != 0 {
            return Err(ParseError::SegmentFlags(flags));
        }
        if sectors > max {
            return Err(ParseError::SegmentTooBig { sectors, max });
        }
        match sector.checked_add(u64::from(sectors)) {
            Some(end) if end <= lim.capacity_sectors => {}
            _ => {
                return Err(ParseError::OutOfRange {
                    sector,
                    sectors: u64::from(sectors),
                    capacity: lim.capacity_sectors,
                });
            }
        }
        out.push(Range {
            offset: sector * SECTOR,
            len: u64::from(sectors) * SECTOR,
            unmap: flags & FLAG_UNMAP != 0,
        });
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIM: Limits = Limits {
        capacity_sectors: 2048,
        max_data_len: 1 << 20,
        max_discard_sectors: 1024,
        max_discard_seg: 4,
        max_write_zeroes_sectors: 1024,
        max_write_zeroes_seg: 1,
    };

    pub(crate) fn r(addr: u64, len: u32) -> Desc {
        Desc {
            addr,
            len,
            write_only: false,
        }
    }
    pub(crate) fn w(addr: u64, len: u32) -> Desc {
        Desc {
            addr,
            len,
            write_only: true,
        }
    }
    fn hdr(kind: u32, sector: u64) -> Header {
        Header {
            kind,
            ioprio: 0,
            sector,
        }
    }

    #[test]
    fn linux_layout_read() {
        let l = split_layout(&[r(0x1000, 16), w(0x2000, 4096), w(0x3000, 1)], 64).unwrap();
        assert_eq!(
            l.header,
            vec![Seg {
                addr: 0x1000,
                len: 16
            }]
        );
        assert_eq!(
            l.in_data,
            vec![Seg {
                addr: 0x2000,
                len: 4096
            }]
        );
        assert_eq!(l.status, 0x3000);
        assert_eq!(
            parse_request(&hdr(VIRTIO_BLK_T_IN, 8), &l, &LIM),
            Ok(BlkRequest::Read {
                offset: 4096,
                len: 4096
            })
        );
    }

    #[test]
    fn any_layout_header_and_data_in_one_descriptor() {
        let l = split_layout(&[r(0x1000, 16 + 512), w(0x3000, 513)], 64).unwrap();
        assert_eq!(
            l.header,
            vec![Seg {
                addr: 0x1000,
                len: 16
            }]
        );
        assert_eq!(
            l.out_data,
            vec![Seg {
                addr: 0x1010,
                len: 512
            }]
        );
        assert_eq!(l.in_len, 512);
        assert_eq!(l.status, 0x3000 + 512);
        // OUT with writable data is a direction error.
        assert!(matches!(
            parse_request(&hdr(VIRTIO_BLK_T_OUT, 0), &l, &LIM),
            Err(ParseError::Direction { .. })
        ));
    }

    #[test]
    fn bad_chains() {
        assert_eq!(
            split_layout(&[r(0, 16), r(16, 1)], 64),
            Err(ParseError::NoStatus)
        );
        assert_eq!(
            split_layout(&[r(0, 8), w(16, 1)], 64),
            Err(ParseError::ShortHeader(8))
        );
        assert_eq!(
            split_layout(&[r(0, 16), w(16, 8), r(32, 1), w(48, 1)], 64),
            Err(ParseError::BadOrder)
        );
        assert_eq!(
            split_layout(&[r(u64::MAX - 4, 16), w(0, 1)], 64),
            Err(ParseError::Overflow)
        );
        assert_eq!(
            split_layout(&[r(0, 16), w(0, 1)], 1),
            Err(ParseError::TooLong(1))
        );
    }

    #[test]
    fn ranges_and_types() {
        let l = split_layout(&[r(0, 16), r(0x1000, 1024), w(0x9000, 1)], 64).unwrap();
        assert!(parse_request(&hdr(VIRTIO_BLK_T_OUT, 1024), &l, &LIM).is_ok());
        assert!(matches!(
            parse_request(&hdr(VIRTIO_BLK_T_OUT, 2047), &l, &LIM),
            Err(ParseError::OutOfRange { .. })
        ));
        assert!(matches!(
            parse_request(&hdr(VIRTIO_BLK_T_OUT, u64::MAX), &l, &LIM),
            Err(ParseError::OutOfRange { .. })
        ));
        let e = parse_request(&hdr(99, 0), &l, &LIM).unwrap_err();
        assert_eq!(virtio_status(e.status()), VIRTIO_BLK_S_UNSUPP as u8);
        let odd = split_layout(&[r(0, 16), r(0x1000, 100), w(0x9000, 1)], 64).unwrap();
        assert_eq!(
            parse_request(&hdr(VIRTIO_BLK_T_OUT, 0), &odd, &LIM),
            Err(ParseError::Unaligned(100))
        );
        let flush = split_layout(&[r(0, 16), w(0x9000, 1)], 64).unwrap();
        assert_eq!(
            parse_request(&hdr(VIRTIO_BLK_T_FLUSH, 0), &flush, &LIM),
            Ok(BlkRequest::Flush)
        );
        let id = split_layout(&[r(0, 16), w(0x100, 64), w(0x9000, 1)], 64).unwrap();
        assert_eq!(
            parse_request(&hdr(VIRTIO_BLK_T_GET_ID, 0), &id, &LIM),
            Ok(BlkRequest::GetId { len: 20 })
        );
    }

    fn seg(sector: u64, n: u32, flags: u32) -> Vec<u8> {
        let mut v = sector.to_le_bytes().to_vec();
        v.extend(n.to_le_bytes());
        v.extend(flags.to_le_bytes());
        v
    }

    #[test]
    fn segments() {
        let mut two = seg(0, 8, 0);
        two.extend(seg(100, 16, 0));
        let got = parse_segments(&two, false, &LIM).unwrap();
        assert_eq!(
            got[1],
            Range {
                offset: 100 * 512,
                len: 16 * 512,
                unmap: false
            }
        );
        assert_eq!(
            parse_segments(&seg(0, 8, 1), false, &LIM),
            Err(ParseError::SegmentFlags(1))
        );
        assert!(parse_segments(&seg(0, 8, 1), true, &LIM).unwrap()[0].unmap);
        assert_eq!(
            parse_segments(&seg(0, 8, 2), true, &LIM),
            Err(ParseError::SegmentFlags(2))
        );
        assert!(matches!(
            parse_segments(&seg(2040, 16, 0), false, &LIM),
            Err(ParseError::OutOfRange { .. })
        ));
        assert!(matches!(
            parse_segments(&seg(u64::MAX, 1, 0), false, &LIM),
            Err(ParseError::OutOfRange { .. })
        ));
        assert!(matches!(
            parse_segments(&seg(0, 2000, 0), false, &LIM),
            Err(ParseError::SegmentTooBig { .. })
        ));
        assert!(parse_segments(&[0u8; 15], false, &LIM).is_err());
        let l = split_layout(&[r(0, 16), r(0x100, 16 * 5), w(0x9000, 1)], 64).unwrap();
        assert!(matches!(
            parse_request(&hdr(VIRTIO_BLK_T_DISCARD, 0), &l, &LIM),
            Err(ParseError::TooManySegments { count: 5, max: 4 })
        ));
    }

    fn arb_desc() -> impl Strategy<Value = Desc> {
        (
            any::<u64>(),
            prop_oneof![0u32..40, 0u32..5000, any::<u32>()],
            any::<bool>(),
        )
            .prop_map(|(addr, len, write_only)| Desc {
                addr,
                len,
                write_only,
            })
    }

    proptest! {
        /// Any chain and header: no panic; an accepted request is consistent.
        #[test]
        fn parse_never_panics(descs in prop::collection::vec(arb_desc(), 0..12),
                              kind in prop_oneof![0u32..16, any::<u32>()],
                              sector in prop_oneof![0u64..4096, any::<u64>()],
                              seg_bytes in prop::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(l) = split_layout(&descs, 64) {
                let total: u64 = descs.iter().map(|d| u64::from(d.len)).sum();
                prop_assert_eq!(l.header.iter().map(|s| u64::from(s.len)).sum::<u64>(), 16);
                prop_assert!(l.out_len + l.in_len + 16 < total);
                prop_assert!(l.out_data.iter().chain(&l.in_data).all(|s| s.len > 0 && s.addr.checked_add(u64::from(s.len) - 1).is_some()));
                let h = Header { kind, ioprio: 0, sector };
                match parse_request(&h, &l, &LIM) {
                    Ok(BlkRequest::Read { offset, len }) | Ok(BlkRequest::Write { offset, len }) => {
                        prop_assert!(offset + len <= LIM.capacity_sectors * 512);
                        prop_assert_eq!(len % 512, 0);
                    }
                    Ok(BlkRequest::GetId { len }) => prop_assert!(len as usize <= ID_LEN),
                    Ok(_) => {}
                    Err(e) => { let s = virtio_status(e.status()); prop_assert!(s == 1 || s == 2); }
                }
            }
            for wz in [false, true] {
                if let Ok(rs) = parse_segments(&seg_bytes, wz, &LIM) {
                    for r in rs {
                        prop_assert!(r.offset + r.len <= LIM.capacity_sectors * 512);
                    }
                }
            }
        }
    }
}
