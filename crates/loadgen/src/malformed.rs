//! `vssd loadgen --malformed`: requests a guest must never send, each
//! followed by a valid one to check the backend still serves.
//!
//! Every case must come back with an error status (`IOERR` or `UNSUPP`),
//! or — when the chain has no usable status byte — complete without one.
//! An `OK`, no completion at all, or a backend that stops serving fails
//! the run. (libvhost-user based backends such as qemu-storage-daemon
//! treat several of these as fatal device errors: this mode is meant for
//! `vssd serve`.)

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use virtio_bindings::virtio_blk::{
    VIRTIO_BLK_S_IOERR, VIRTIO_BLK_S_OK, VIRTIO_BLK_S_UNSUPP, VIRTIO_BLK_T_DISCARD,
    VIRTIO_BLK_T_IN, VIRTIO_BLK_T_OUT, VIRTIO_BLK_T_WRITE_ZEROES,
};
use virtio_bindings::virtio_ring::{VRING_DESC_F_INDIRECT, VRING_DESC_F_WRITE};

use vm_memory::Bytes;

use super::driver::{BlkDriver, DriverError, DriverOptions};
use super::vring::RawDesc;

/// What a case must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// `UNSUPP`.
    Unsupported,
    /// `IOERR`.
    IoError,
    /// No status can be written: a completion with the status byte left
    /// alone, or any error status.
    NoStatus,
}

/// One case's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    /// What was sent.
    pub name: String,
    /// What it must get.
    pub expected: Expect,
    /// The status byte after completion (None: not written).
    pub status: Option<u8>,
    /// The used length reported (None: no completion).
    pub used_len: Option<u32>,
    /// Whether the outcome is acceptable.
    pub ok: bool,
    /// Whether a valid request right after it succeeded.
    pub still_serving: bool,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct MalformedReport {
    /// The socket.
    pub socket: String,
    /// Each case.
    pub cases: Vec<CaseResult>,
    /// Every case acceptable and the backend serving throughout.
    pub passed: bool,
}

const UNTOUCHED: u8 = 0xa5;

struct Area {
    hdr: u64,
    status: u64,
    data: u64,
    table: u64,
    mem_end: u64,
}

fn r(addr: u64, len: u32, next: Option<usize>) -> RawDesc {
    RawDesc {
        addr,
        len,
        flags: 0,
        next,
    }
}

fn w(addr: u64, len: u32, next: Option<usize>) -> RawDesc {
    RawDesc {
        addr,
        len,
        flags: VRING_DESC_F_WRITE as u16,
        next,
    }
}

struct Case {
    name: &'static str,
    kind: u32,
    sector: u64,
    /// Device-readable payload after the header (written at `data`).
    payload: Vec<u8>,
    descs: Vec<RawDesc>,
    /// Descriptors of an indirect table (at `table`) that `descs` points to.
    table: Vec<RawDesc>,
    expect: Expect,
}

fn seg(sector: u64, sectors: u32, flags: u32) -> Vec<u8> {
    let mut v = sector.to_le_bytes().to_vec();
    v.extend(sectors.to_le_bytes());
    v.extend(flags.to_le_bytes());
    v
}

impl Area {
    /// Header, data buffer (device-writable if `data_write`) of `len`
    /// bytes, status byte: the usual three-descriptor chain.
    fn std3(&self, data_write: bool, len: u32) -> Vec<RawDesc> {
        vec![
            r(self.hdr, 16, Some(1)),
            RawDesc {
                addr: self.data,
                len,
                flags: if data_write {
                    VRING_DESC_F_WRITE as u16
                } else {
                    0
                },
                next: Some(2),
            },
            w(self.status, 1, None),
        ]
    }
}

/// A case with a direct descriptor chain.
fn case(
    name: &'static str,
    kind: u32,
    sector: u64,
    payload: Vec<u8>,
    descs: Vec<RawDesc>,
    expect: Expect,
) -> Case {
    Case {
        name,
        kind,
        sector,
        payload,
        descs,
        table: vec![],
        expect,
    }
}

/// A discard or write-zeroes case: `payload` (its segments) in the usual
/// three-descriptor chain.
fn discard(a: &Area, name: &'static str, payload: Vec<u8>, kind: u32, expect: Expect) -> Case {
    let len = payload.len() as u32;
    Case {
        name,
        kind,
        sector: 0,
        descs: a.std3(false, len.max(1)),
        payload,
        table: vec![],
        expect,
    }
}

/// Every case, in the order they are sent.
fn cases(a: &Area, capacity_sectors: u64, max_data: u64, max_discard_seg: u32) -> Vec<Case> {
    let mut v = header_cases(a, capacity_sectors);
    v.extend(chain_cases(a, max_data));
    v.extend(segment_cases(a, capacity_sectors, max_discard_seg));
    v
}

/// What the header asks: an unknown type, a range past the disk or past
/// 2^64, a length in partial sectors.
fn header_cases(a: &Area, capacity_sectors: u64) -> Vec<Case> {
    let (h, st) = (a.hdr, a.status);
    vec![
        case(
            "unknown request type 99",
            99,
            0,
            vec![],
            vec![r(h, 16, Some(1)), w(st, 1, None)],
            Expect::Unsupported,
        ),
        case(
            "read crossing the end of the disk",
            VIRTIO_BLK_T_IN,
            capacity_sectors - 1,
            vec![],
            a.std3(true, 4096),
            Expect::IoError,
        ),
        case(
            "write at sector 2^64-8 (overflow)",
            VIRTIO_BLK_T_OUT,
            u64::MAX - 7,
            vec![],
            a.std3(false, 4096),
            Expect::IoError,
        ),
        case(
            "read of 1000 bytes (not whole sectors)",
            VIRTIO_BLK_T_IN,
            0,
            vec![],
            a.std3(true, 1000),
            Expect::IoError,
        ),
    ]
}

/// The descriptor chain: data buffers in the wrong direction, outside
/// memory or too long, a short header, a missing or read-only status byte,
/// a looping chain, broken indirect tables.
fn chain_cases(a: &Area, max_data: u64) -> Vec<Case> {
    let (h, st, d) = (a.hdr, a.status, a.data);
    vec![
        case(
            "read with a device-readable data buffer",
            VIRTIO_BLK_T_IN,
            0,
            vec![],
            a.std3(false, 4096),
            Expect::IoError,
        ),
        case(
            "write with a device-writable data buffer",
            VIRTIO_BLK_T_OUT,
            0,
            vec![],
            a.std3(true, 4096),
            Expect::IoError,
        ),
        case(
            "8-byte header",
            VIRTIO_BLK_T_IN,
            0,
            vec![],
            vec![r(h, 8, Some(1)), w(st, 1, None)],
            Expect::IoError,
        ),
        case(
            "readable descriptor after a writable one",
            VIRTIO_BLK_T_IN,
            0,
            vec![],
            vec![
                r(h, 16, Some(1)),
                w(d, 4096, Some(2)),
                r(d, 512, Some(3)),
                w(st, 1, None),
            ],
            Expect::IoError,
        ),
        case(
            "data buffer outside guest memory",
            VIRTIO_BLK_T_IN,
            0,
            vec![],
            vec![
                r(h, 16, Some(1)),
                w(a.mem_end + 4096, 4096, Some(2)),
                w(st, 1, None),
            ],
            Expect::IoError,
        ),
        case(
            "data longer than seg_max x size_max",
            VIRTIO_BLK_T_OUT,
            0,
            vec![],
            vec![
                r(h, 16, Some(1)),
                r(d, u32::try_from(max_data + 512).unwrap_or(!511), Some(2)),
                w(st, 1, None),
            ],
            Expect::IoError,
        ),
        case(
            "no status descriptor",
            VIRTIO_BLK_T_IN,
            0,
            vec![],
            vec![r(h, 16, Some(1)), w(d, 4096, None)],
            Expect::NoStatus,
        ),
        case(
            "read-only status byte",
            VIRTIO_BLK_T_IN,
            0,
            vec![],
            vec![r(h, 16, Some(1)), w(d, 4096, Some(2)), r(st, 1, None)],
            Expect::NoStatus,
        ),
        case(
            "descriptor chain looping on itself",
            VIRTIO_BLK_T_IN,
            0,
            vec![],
            vec![r(h, 16, Some(1)), w(st, 1, Some(0))],
            Expect::NoStatus,
        ),
        Case {
            name: "indirect table outside guest memory",
            kind: VIRTIO_BLK_T_IN,
            sector: 0,
            payload: vec![],
            descs: vec![RawDesc {
                addr: a.mem_end + 8192,
                len: 48,
                flags: VRING_DESC_F_INDIRECT as u16,
                next: None,
            }],
            table: vec![],
            expect: Expect::NoStatus,
        },
        Case {
            name: "indirect table pointing past its end",
            kind: VIRTIO_BLK_T_IN,
            sector: 0,
            payload: vec![],
            descs: vec![RawDesc {
                addr: a.table,
                len: 32,
                flags: VRING_DESC_F_INDIRECT as u16,
                next: None,
            }],
            table: vec![r(h, 16, Some(1)), w(d, 4096, Some(7)), w(st, 1, None)],
            expect: Expect::NoStatus,
        },
    ]
}

/// Discard and write-zeroes segments: flags, lengths and counts a guest
/// must not send.
fn segment_cases(a: &Area, capacity_sectors: u64, max_discard_seg: u32) -> Vec<Case> {
    let many_segs: Vec<u8> = (0..u64::from(max_discard_seg) + 1)
        .flat_map(|i| seg(i * 8, 8, 0))
        .collect();
    vec![
        discard(
            a,
            "discard with the UNMAP flag",
            seg(0, 8, 1),
            VIRTIO_BLK_T_DISCARD,
            Expect::Unsupported,
        ),
        discard(
            a,
            "discard segment of 2^32-1 sectors",
            seg(0, u32::MAX, 0),
            VIRTIO_BLK_T_DISCARD,
            Expect::IoError,
        ),
        discard(
            a,
            "discard segment past the end of the disk",
            seg(capacity_sectors - 8, 16, 0),
            VIRTIO_BLK_T_DISCARD,
            Expect::IoError,
        ),
        discard(
            a,
            "discard payload of 3 bytes",
            vec![1, 2, 3],
            VIRTIO_BLK_T_DISCARD,
            Expect::IoError,
        ),
        discard(
            a,
            "one discard segment more than max_discard_seg",
            many_segs,
            VIRTIO_BLK_T_DISCARD,
            Expect::IoError,
        ),
        discard(
            a,
            "write zeroes with 2 segments (max 1)",
            [seg(0, 8, 0), seg(64, 8, 0)].concat(),
            VIRTIO_BLK_T_WRITE_ZEROES,
            Expect::IoError,
        ),
        discard(
            a,
            "write zeroes with reserved flag bits",
            seg(0, 8, 0x100),
            VIRTIO_BLK_T_WRITE_ZEROES,
            Expect::Unsupported,
        ),
    ]
}

/// Send every case on queue 0 (and a valid read after each, on each of
/// `queues` queues in turn).
pub fn run(socket: &Path, queues: u16) -> Result<MalformedReport, DriverError> {
    let mut d = BlkDriver::connect(
        socket,
        &DriverOptions {
            queues,
            queue_size: 128,
            mem_bytes: 16 << 20,
            ..DriverOptions::default()
        },
    )?;
    let info = *d.info();
    let base = d.alloc(3 * 4096 + (1 << 20))?;
    let area = Area {
        hdr: base,
        status: base + 64,
        table: base + 4096,
        data: base + 3 * 4096,
        mem_end: 16 << 20,
    };
    let capacity_sectors = info.capacity / 512;
    let max_data = u64::from(info.seg_max.max(1)) * u64::from(info.size_max.max(4096));
    let list = cases(
        &area,
        capacity_sectors,
        max_data,
        info.max_discard_seg.max(1),
    );
    let mut out = Vec::new();
    let mut passed = true;
    let qn = usize::from(queues.max(1));
    for (i, c) in list.iter().enumerate() {
        let res = send(&mut d, &area, c, 0);
        let (status, used_len) = match res {
            Ok(x) => x,
            Err(e) => {
                log::warn!("{}: {e}", c.name);
                (None, None)
            }
        };
        let ok = match (c.expect, status, used_len) {
            (_, _, None) => false,
            (Expect::Unsupported, Some(s), _) => s == VIRTIO_BLK_S_UNSUPP as u8,
            (Expect::IoError, Some(s), _) => s == VIRTIO_BLK_S_IOERR as u8,
            (Expect::NoStatus, None, _) => true,
            (Expect::NoStatus, Some(s), _) => s != VIRTIO_BLK_S_OK as u8,
            (_, None, _) => false,
        };
        let still_serving = valid_read(&mut d, &area, i % qn).unwrap_or(false);
        passed &= ok && still_serving;
        out.push(CaseResult {
            name: c.name.to_string(),
            expected: c.expect,
            status,
            used_len,
            ok,
            still_serving,
        });
        if !still_serving {
            break;
        }
    }
    Ok(MalformedReport {
        socket: socket.display().to_string(),
        passed: passed && out.len() == list.len(),
        cases: out,
    })
}

/// Send case `c` on queue `q`: (status byte if written, used length if completed).
fn send(
    d: &mut BlkDriver,
    a: &Area,
    c: &Case,
    q: usize,
) -> Result<(Option<u8>, Option<u32>), DriverError> {
    let mut hdr = [0u8; 16];
    hdr[0..4].copy_from_slice(&c.kind.to_le_bytes());
    hdr[8..16].copy_from_slice(&c.sector.to_le_bytes());
    d.write_mem(a.hdr, &hdr)?;
    d.write_mem(a.status, &[UNTOUCHED])?;
    if !c.payload.is_empty() {
        d.write_mem(a.data, &c.payload)?;
    }
    for (i, t) in c.table.iter().enumerate() {
        let mut flags = t.flags;
        let next = match t.next {
            Some(n) => {
                flags |= virtio_bindings::virtio_ring::VRING_DESC_F_NEXT as u16;
                n as u16
            }
            None => 0,
        };
        let desc = virtio_queue::desc::split::Descriptor::new(t.addr, t.len, flags, next);
        d.memory()
            .write_obj(desc, vm_memory::GuestAddress(a.table + 16 * i as u64))
            .map_err(|e| DriverError::Memory(e.to_string()))?;
    }
    let mem = d.memory().clone();
    let head = d.queue(q).ring.add_raw(&mem, &c.descs)?;
    d.kick(q)?;
    let done = match d.complete(q, Duration::from_secs(5)) {
        Ok(done) => done,
        Err(DriverError::Wait(_)) => return Ok((None, None)),
        Err(e) => return Err(e),
    };
    let used = done.iter().find(|(h, _)| *h == head).map(|(_, l)| *l);
    let mut st = [0u8; 1];
    d.read_mem(a.status, &mut st)?;
    Ok(((st[0] != UNTOUCHED).then_some(st[0]), used))
}

fn valid_read(d: &mut BlkDriver, a: &Area, q: usize) -> Result<bool, DriverError> {
    let c = Case {
        name: "valid read",
        kind: VIRTIO_BLK_T_IN,
        sector: 0,
        payload: vec![],
        descs: vec![
            r(a.hdr, 16, Some(1)),
            w(a.data, 4096, Some(2)),
            w(a.status, 1, None),
        ],
        table: vec![],
        expect: Expect::IoError,
    };
    let (st, used) = send(d, a, &c, q)?;
    Ok(st == Some(VIRTIO_BLK_S_OK as u8) && used == Some(4097))
}

/// The report as text.
pub fn text(r: &MalformedReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "malformed requests to {}:", r.socket);
    for c in &r.cases {
        let got = match (c.used_len, c.status) {
            (None, _) => "no completion".to_string(),
            (Some(l), None) => format!("completed without status (used length {l})"),
            (Some(l), Some(s)) => format!(
                "status {} (used length {l})",
                match u32::from(s) {
                    VIRTIO_BLK_S_OK => "OK".to_string(),
                    VIRTIO_BLK_S_IOERR => "IOERR".to_string(),
                    VIRTIO_BLK_S_UNSUPP => "UNSUPP".to_string(),
                    x => x.to_string(),
                }
            ),
        };
        let _ = writeln!(
            out,
            "  {:<4} {:<48} {got}{}",
            if c.ok { "ok" } else { "FAIL" },
            c.name,
            if c.still_serving {
                ""
            } else {
                "; the backend stopped serving"
            }
        );
    }
    let _ = writeln!(
        out,
        "{}",
        if r.passed {
            "passed: every malformed request refused, the backend kept serving"
        } else {
            "FAILED"
        }
    );
    out
}
