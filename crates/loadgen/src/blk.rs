//! virtio-blk requests built in the driver's shared memory, for tests and
//! one-off commands: header, data and status laid out in a scratch area,
//! submitted, waited for.

use std::time::Duration;

use virtio_bindings::virtio_blk::{
    VIRTIO_BLK_T_DISCARD, VIRTIO_BLK_T_FLUSH, VIRTIO_BLK_T_GET_ID, VIRTIO_BLK_T_IN,
    VIRTIO_BLK_T_OUT, VIRTIO_BLK_T_WRITE_ZEROES,
};

use super::driver::{BlkDriver, DriverError};
use super::vring::Buf;

/// One request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlkOp {
    /// Read `len` bytes from `sector`.
    Read {
        /// First sector.
        sector: u64,
        /// Bytes.
        len: u32,
    },
    /// Write `data` at `sector`.
    Write {
        /// First sector.
        sector: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// Flush.
    Flush,
    /// The 20-byte serial.
    GetId,
    /// Discard `(sector, sectors)` ranges.
    Discard(Vec<(u64, u32)>),
    /// Write zeroes over `(sector, sectors)` ranges.
    WriteZeroes {
        /// The ranges.
        ranges: Vec<(u64, u32)>,
        /// Let the device deallocate.
        unmap: bool,
    },
    /// Any request type with a raw header (for malformed-request tests).
    Raw {
        /// `VIRTIO_BLK_T_*` (or anything).
        kind: u32,
        /// Header sector.
        sector: u64,
        /// Device-readable payload after the header.
        out: Vec<u8>,
        /// Device-writable bytes before the status.
        in_len: u32,
    },
}

/// What the device answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status byte.
    pub status: u8,
    /// The used length the device reported.
    pub used_len: u32,
    /// The device-writable data (reads, GET_ID).
    pub data: Vec<u8>,
}

/// A scratch area for one request at a time.
#[derive(Debug, Clone, Copy)]
pub struct Scratch {
    addr: u64,
    data_max: u32,
}

const DATA_AT: u64 = 4096;

impl Scratch {
    /// Reserve room for requests carrying up to `data_max` bytes.
    pub fn new(d: &mut BlkDriver, data_max: u32) -> Result<Scratch, DriverError> {
        let addr = d.alloc(DATA_AT + u64::from(data_max))?;
        Ok(Scratch { addr, data_max })
    }
}

fn segs(ranges: &[(u64, u32)], flags: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(16 * ranges.len());
    for &(s, n) in ranges {
        v.extend(s.to_le_bytes());
        v.extend(n.to_le_bytes());
        v.extend(flags.to_le_bytes());
    }
    v
}

/// Submit `op` on queue `q` and wait for its completion.
pub fn run(
    d: &mut BlkDriver,
    q: usize,
    s: &Scratch,
    op: &BlkOp,
    timeout: Duration,
) -> Result<Reply, DriverError> {
    let (kind, sector, out, in_len): (u32, u64, Vec<u8>, u32) = match op {
        BlkOp::Read { sector, len } => (VIRTIO_BLK_T_IN, *sector, vec![], *len),
        BlkOp::Write { sector, data } => (VIRTIO_BLK_T_OUT, *sector, data.clone(), 0),
        BlkOp::Flush => (VIRTIO_BLK_T_FLUSH, 0, vec![], 0),
        BlkOp::GetId => (VIRTIO_BLK_T_GET_ID, 0, vec![], 20),
        BlkOp::Discard(r) => (VIRTIO_BLK_T_DISCARD, 0, segs(r, 0), 0),
        BlkOp::WriteZeroes { ranges, unmap } => (
            VIRTIO_BLK_T_WRITE_ZEROES,
            0,
            segs(ranges, u32::from(*unmap)),
            0,
        ),
        BlkOp::Raw {
            kind,
            sector,
            out,
            in_len,
        } => (*kind, *sector, out.clone(), *in_len),
    };
    if out.len() as u64 > u64::from(s.data_max) || in_len > s.data_max {
        return Err(DriverError::Memory(format!(
            "request data larger than the scratch area ({} bytes)",
            s.data_max
        )));
    }
    let mut hdr = [0u8; 16];
    hdr[0..4].copy_from_slice(&kind.to_le_bytes());
    hdr[8..16].copy_from_slice(&sector.to_le_bytes());
    d.write_mem(s.addr, &hdr)?;
    d.write_mem(s.addr + 16, &[0xff])?;
    let data = s.addr + DATA_AT;
    let mut bufs = vec![Buf {
        addr: s.addr,
        len: 16,
        write: false,
    }];
    if !out.is_empty() {
        d.write_mem(data, &out)?;
        bufs.push(Buf {
            addr: data,
            len: out.len() as u32,
            write: false,
        });
    }
    if in_len > 0 {
        bufs.push(Buf {
            addr: data,
            len: in_len,
            write: true,
        });
    }
    bufs.push(Buf {
        addr: s.addr + 16,
        len: 1,
        write: true,
    });
    let head = d.add(q, &bufs)?;
    d.kick(q)?;
    let done = d.complete(q, timeout)?;
    let used_len = done
        .iter()
        .find(|(h, _)| *h == head)
        .map(|(_, l)| *l)
        .ok_or_else(|| DriverError::Wait("another request completed".into()))?;
    let mut st = [0u8; 1];
    d.read_mem(s.addr + 16, &mut st)?;
    let mut back = vec![0u8; in_len as usize];
    d.read_mem(data, &mut back)?;
    Ok(Reply {
        status: st[0],
        used_len,
        data: back,
    })
}
