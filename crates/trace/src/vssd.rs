//! vssd's binary trace: a 128-byte header, then one 64-byte record per
//! request (per range, for a DISCARD or WRITE ZEROES of several ranges),
//! little-endian, in the order the requests completed.
//!
//! Header: magic `VSSDTRCE`, version (u16, 2), header length (u16, 128),
//! record length (u16, 64), reserved (u16), capacity (u64, bytes), logical
//! block size (u32), time scale × 1000 (u32), start (u64, Unix ns),
//! records (u64; `u64::MAX` while the trace is being written), records
//! dropped (u64), reserved (u64), the profile's name (64 bytes, UTF-8, NUL
//! padded).
//!
//! Record (version 2): received (when the frontend received the request),
//! taken (when the drive's model took it), modelled completion, delivery
//! (u64 each, drive-time ns since the trace started), offset (u64), length
//! (u64), connection (u32), frontend (u16), queue (u16), op (u8), flags
//! (u8), status (u8), and the request's place in the order the model took
//! requests (40 bits: it orders requests the model took at the same
//! time). Times are drive time: with `serve --time-scale K` they are the
//! model's, not the wall clock's.
//!
//! Version 1 (56-byte records) had no received time: its one arrival time
//! was the model's. It is still read, with the received time set to the
//! model's.
//!
//! A reader accepts longer headers and records of a later minor layout
//! (it reads the fields it knows), refuses another version, and checks the
//! record count against the file's length.

use std::io::{Read, Seek, SeekFrom, Write};

use super::{Io, Item, Op, Trace, TraceError};

/// The file's first eight bytes.
pub const MAGIC: [u8; 8] = *b"VSSDTRCE";
/// The layout this code writes (it reads this one and [`VERSION_1`]).
pub const VERSION: u16 = 2;
/// The first layout: one arrival time (the model's), 56-byte records.
pub const VERSION_1: u16 = 1;
/// Header bytes.
pub const HEADER_LEN: usize = 128;
/// Record bytes.
pub const RECORD_LEN: usize = 64;
/// Record bytes of version 1.
pub const RECORD_LEN_V1: usize = 56;
/// `records` of a trace still being written (or never closed).
pub const OPEN: u64 = u64::MAX;

/// What the header says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    /// Exported capacity, bytes.
    pub capacity: u64,
    /// Logical block size, bytes.
    pub logical_block: u32,
    /// `serve --time-scale`, × 1000 (1000: none).
    pub time_scale_milli: u32,
    /// When tracing started, Unix ns.
    pub start_unix_ns: u64,
    /// Records written ([`OPEN`] while open).
    pub records: u64,
    /// Requests that were not recorded (the writer fell behind, or the
    /// size limit was reached).
    pub dropped: u64,
    /// The drive's profile.
    pub profile: String,
}

/// Request kinds as records store them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RecOp {
    /// Read.
    Read = 0,
    /// Write.
    Write = 1,
    /// Flush.
    Flush = 2,
    /// Discard.
    Discard = 3,
    /// Write zeroes.
    WriteZeroes = 4,
    /// Answered without the drive (identify, a refused request).
    Other = 5,
}

impl RecOp {
    fn from_u8(v: u8) -> Option<RecOp> {
        Some(match v {
            0 => RecOp::Read,
            1 => RecOp::Write,
            2 => RecOp::Flush,
            3 => RecOp::Discard,
            4 => RecOp::WriteZeroes,
            5 => RecOp::Other,
            _ => return None,
        })
    }

    /// Name for listings.
    pub fn name(self) -> &'static str {
        match self {
            RecOp::Read => "read",
            RecOp::Write => "write",
            RecOp::Flush => "flush",
            RecOp::Discard => "discard",
            RecOp::WriteZeroes => "write-zeroes",
            RecOp::Other => "other",
        }
    }
}

/// Flag: force unit access.
pub const FLAG_FUA: u8 = 1;
/// Flag: WRITE ZEROES that may deallocate.
pub const FLAG_UNMAP: u8 = 2;
/// Flag: another range of the same request follows in the next record.
pub const FLAG_MORE: u8 = 4;

/// Status codes of records.
pub mod status {
    /// Completed.
    pub const OK: u8 = 0;
    /// Refused as invalid.
    pub const INVALID: u8 = 1;
    /// Not supported.
    pub const UNSUPPORTED: u8 = 2;
    /// I/O error.
    pub const IO_ERROR: u8 = 3;
    /// No space (beyond the end).
    pub const NO_SPACE: u8 = 4;
    /// The drive had stopped.
    pub const STOPPED: u8 = 5;
    /// The client went away before the completion.
    pub const ABANDONED: u8 = 6;

    /// Name for listings.
    pub fn name(s: u8) -> &'static str {
        match s {
            OK => "ok",
            INVALID => "invalid",
            UNSUPPORTED => "unsupported",
            IO_ERROR => "io-error",
            NO_SPACE => "no-space",
            STOPPED => "stopped",
            ABANDONED => "abandoned",
            _ => "unknown",
        }
    }
}

/// One request as the drive received it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// When the frontend received it (read it from the virtqueue or the
    /// socket), drive-time ns since the trace started.
    pub received_ns: u64,
    /// When the drive's model took it (at or after `received_ns`: a
    /// request waits for the model's lock, and the model never goes back
    /// in time, so one that reaches it after a later arrival is taken at
    /// that later time).
    pub taken_ns: u64,
    /// When the model completed it.
    pub due_ns: u64,
    /// When its completion reached the client.
    pub delivered_ns: u64,
    /// First byte.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
    /// Connection number within its frontend.
    pub conn: u32,
    /// Frontend id.
    pub frontend: u16,
    /// Queue (virtqueue index; 0 for NBD).
    pub queue: u16,
    /// Kind.
    pub op: RecOp,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// [`status`] code.
    pub status: u8,
    /// Its place in the order the drive model took requests (40 bits; 0:
    /// never submitted): orders records with equal arrival times.
    pub seq: u64,
}

impl Record {
    /// The little-endian bytes.
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0..8].copy_from_slice(&self.received_ns.to_le_bytes());
        b[8..16].copy_from_slice(&self.taken_ns.to_le_bytes());
        b[16..24].copy_from_slice(&self.due_ns.to_le_bytes());
        b[24..32].copy_from_slice(&self.delivered_ns.to_le_bytes());
        b[32..40].copy_from_slice(&self.offset.to_le_bytes());
        b[40..48].copy_from_slice(&self.len.to_le_bytes());
        b[48..52].copy_from_slice(&self.conn.to_le_bytes());
        b[52..54].copy_from_slice(&self.frontend.to_le_bytes());
        b[54..56].copy_from_slice(&self.queue.to_le_bytes());
        b[56] = self.op as u8;
        b[57] = self.flags;
        b[58] = self.status;
        b[59..64].copy_from_slice(&self.seq.to_le_bytes()[..5]);
        b
    }

    /// Read a record of layout `version` (at least its record length).
    fn decode(b: &[u8], version: u16, at: &dyn Fn() -> String) -> Result<Record, TraceError> {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        // Version 1 has no received time: its fields start 8 bytes earlier.
        let (received, k) = if version == VERSION_1 {
            (None, 0)
        } else {
            (Some(u64_at(0)), 8)
        };
        let op = RecOp::from_u8(b[k + 48])
            .ok_or_else(|| TraceError::bad(at(), format!("unknown request kind {}", b[k + 48])))?;
        let taken = u64_at(k);
        let r = Record {
            received_ns: received.unwrap_or(taken),
            taken_ns: taken,
            due_ns: u64_at(k + 8),
            delivered_ns: u64_at(k + 16),
            offset: u64_at(k + 24),
            len: u64_at(k + 32),
            conn: u32::from_le_bytes(b[k + 40..k + 44].try_into().unwrap_or([0; 4])),
            frontend: u16::from_le_bytes([b[k + 44], b[k + 45]]),
            queue: u16::from_le_bytes([b[k + 46], b[k + 47]]),
            op,
            flags: b[k + 49],
            status: b[k + 50],
            seq: {
                let mut s = [0u8; 8];
                s[..5].copy_from_slice(&b[k + 51..k + 56]);
                u64::from_le_bytes(s)
            },
        };
        if r.offset.checked_add(r.len).is_none() {
            return Err(TraceError::bad(at(), "offset + length overflows"));
        }
        if r.taken_ns < r.received_ns {
            return Err(TraceError::bad(
                at(),
                format!(
                    "taken by the drive before the frontend received it (received {} ns, taken {} ns): times go backwards",
                    r.received_ns, r.taken_ns
                ),
            ));
        }
        if r.status != status::ABANDONED && (r.due_ns < r.taken_ns || r.delivered_ns < r.taken_ns) {
            return Err(TraceError::bad(
                at(),
                format!(
                    "completes before it arrives (taken {} ns, completion {} ns, delivery {} ns): times go backwards",
                    r.taken_ns, r.due_ns, r.delivered_ns
                ),
            ));
        }
        Ok(r)
    }

    /// The request it replays as (none for requests answered without the
    /// drive or refused), arriving when the frontend received it: the time
    /// the host issued it, as fio's iolog and blktrace timestamps are
    /// (the daemon's own delay before the model took it is not part of
    /// the workload).
    pub fn io(&self) -> Option<Io> {
        let op = match self.op {
            RecOp::Read => Op::Read,
            RecOp::Write => Op::Write,
            RecOp::Flush => Op::Flush,
            RecOp::Discard => Op::Discard,
            RecOp::WriteZeroes => Op::WriteZeroes {
                unmap: self.flags & FLAG_UNMAP != 0,
            },
            RecOp::Other => return None,
        };
        if matches!(
            self.status,
            status::INVALID | status::UNSUPPORTED | status::NO_SPACE
        ) {
            return None;
        }
        Some(Io {
            t_ns: Some(self.received_ns),
            op,
            offset: self.offset,
            len: self.len,
            file: 0,
            fua: self.flags & FLAG_FUA != 0,
        })
    }
}

impl Header {
    /// The little-endian bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_le_bytes());
        b[10..12].copy_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        b[12..14].copy_from_slice(&(RECORD_LEN as u16).to_le_bytes());
        b[16..24].copy_from_slice(&self.capacity.to_le_bytes());
        b[24..28].copy_from_slice(&self.logical_block.to_le_bytes());
        b[28..32].copy_from_slice(&self.time_scale_milli.to_le_bytes());
        b[32..40].copy_from_slice(&self.start_unix_ns.to_le_bytes());
        b[40..48].copy_from_slice(&self.records.to_le_bytes());
        b[48..56].copy_from_slice(&self.dropped.to_le_bytes());
        let name = self.profile.as_bytes();
        let n = floor_char_boundary(&self.profile, name.len().min(64));
        b[64..64 + n].copy_from_slice(&name[..n]);
        b
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// A trace file being written: the header first (open), records appended,
/// the header rewritten with the counts when it is finished.
pub struct Writer<W: Write + Seek> {
    out: W,
    header: Header,
    written: u64,
}

impl<W: Write + Seek> Writer<W> {
    /// Start a trace on `out` (at its start).
    pub fn new(mut out: W, mut header: Header) -> std::io::Result<Self> {
        header.records = OPEN;
        out.write_all(&header.encode())?;
        Ok(Writer {
            out,
            header,
            written: 0,
        })
    }

    /// Append records (each written as it is encoded: give `out` a
    /// buffer).
    pub fn write(&mut self, recs: &[Record]) -> std::io::Result<()> {
        for r in recs {
            self.out.write_all(&r.encode())?;
            self.written += 1;
        }
        Ok(())
    }

    /// Push what is buffered on to `out` (with a `BufWriter`, to the file).
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.written
    }

    /// Bytes of the file so far.
    pub fn bytes(&self) -> u64 {
        HEADER_LEN as u64 + self.written * RECORD_LEN as u64
    }

    /// Write the final counts into the header and flush; returns the output.
    pub fn finish(mut self, dropped: u64) -> std::io::Result<W> {
        self.header.records = self.written;
        self.header.dropped = dropped;
        self.out.flush()?;
        self.out.seek(SeekFrom::Start(0))?;
        self.out.write_all(&self.header.encode())?;
        self.out.seek(SeekFrom::End(0))?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A whole trace file read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Its header (`records` is the number read when it was never closed).
    pub header: Header,
    /// Whether it was closed properly (else the daemon ended without
    /// stopping it: the records up to the last whole one are kept).
    pub closed: bool,
    /// The format version it was written in.
    pub version: u16,
    /// Records in the order the model took them (taken time, then its
    /// order number).
    pub records: Vec<Record>,
}

impl File {
    /// The replayable requests as a [`Trace`] on one file, `vssd`, in the
    /// order the frontends received them (ties: the model's order).
    pub fn to_trace(&self) -> Trace {
        let mut recs: Vec<&Record> = self.records.iter().collect();
        recs.sort_by_key(|r| (r.received_ns, r.taken_ns, r.seq));
        Trace {
            files: vec!["vssd".into()],
            items: recs
                .into_iter()
                .filter_map(Record::io)
                .map(Item::Io)
                .collect(),
        }
    }
}

/// Read a vssd trace (`name` labels messages).
pub fn read(mut r: impl Read, name: &str) -> Result<File, TraceError> {
    let io_err = |source| TraceError::Io {
        path: name.to_string(),
        source,
    };
    let mut fixed = [0u8; 64];
    let got = super::read_full(&mut r, &mut fixed).map_err(io_err)?;
    if got < 64 || fixed[0..8] != MAGIC {
        return Err(TraceError::bad(
            name,
            "not a vssd trace (no VSSDTRCE header)",
        ));
    }
    let u16_at = |i: usize| u16::from_le_bytes([fixed[i], fixed[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes(fixed[i..i + 4].try_into().unwrap_or([0; 4]));
    let u64_at = |i: usize| u64::from_le_bytes(fixed[i..i + 8].try_into().unwrap_or([0; 8]));
    let version = u16_at(8);
    let min_record = match version {
        VERSION => RECORD_LEN,
        VERSION_1 => RECORD_LEN_V1,
        _ => {
            return Err(TraceError::bad(
                name,
                format!(
                    "trace format version {version}; this vssd reads versions {VERSION_1} and {VERSION}"
                ),
            ));
        }
    };
    let header_len = u16_at(10) as usize;
    let record_len = u16_at(12) as usize;
    if header_len < HEADER_LEN || record_len < min_record {
        return Err(TraceError::bad(
            name,
            format!(
                "header of {header_len} bytes or records of {record_len} bytes are shorter than version {version}'s ({HEADER_LEN}, {min_record})"
            ),
        ));
    }
    let mut rest = vec![0u8; header_len - 64];
    if super::read_full(&mut r, &mut rest).map_err(io_err)? < rest.len() {
        return Err(TraceError::bad(name, "truncated in its header"));
    }
    let pname = &rest[0..64];
    let end = pname.iter().position(|&c| c == 0).unwrap_or(64);
    let mut header = Header {
        capacity: u64_at(16),
        logical_block: u32_at(24),
        time_scale_milli: u32_at(28),
        start_unix_ns: u64_at(32),
        records: u64_at(40),
        dropped: u64_at(48),
        profile: String::from_utf8_lossy(&pname[..end]).into_owned(),
    };
    let closed = header.records != OPEN;
    let mut records = Vec::new();
    let mut buf = vec![0u8; record_len * 4096];
    let mut n: u64 = 0;
    let partial;
    loop {
        let got = super::read_full(&mut r, &mut buf).map_err(io_err)?;
        let whole = got / record_len;
        for c in buf[..whole * record_len].chunks_exact(record_len) {
            if closed && n >= header.records {
                return Err(TraceError::bad(
                    name,
                    format!("holds more records than its header's {}", header.records),
                ));
            }
            if records.len() >= super::MAX_ITEMS {
                return Err(TraceError::Limit(format!(
                    "{name}: more than {} records",
                    super::MAX_ITEMS
                )));
            }
            let at = || format!("{name}: record {}", n + 1);
            records.push(Record::decode(c, version, &at)?);
            n += 1;
        }
        if got < buf.len() {
            partial = got - whole * record_len;
            break;
        }
    }
    if closed {
        if n != header.records || partial != 0 {
            return Err(TraceError::bad(
                name,
                format!(
                    "truncated: its header says {} records, the file holds {n}{}",
                    header.records,
                    if partial != 0 {
                        format!(" and {partial} bytes of another")
                    } else {
                        String::new()
                    }
                ),
            ));
        }
    } else {
        header.records = n;
    }
    // Records are written as requests complete; readers want the order
    // in which the model took them.
    records.sort_by_key(|r| (r.taken_ns, r.seq));
    Ok(File {
        header,
        closed,
        version,
        records,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Cursor;

    fn rec(t: u64, op: RecOp, off: u64, len: u64) -> Record {
        Record {
            received_ns: t,
            taken_ns: t,
            due_ns: t + 100,
            delivered_ns: t + 150,
            offset: off,
            len,
            conn: 1,
            frontend: 0,
            queue: 0,
            op,
            flags: 0,
            status: status::OK,
            seq: 0,
        }
    }

    fn header() -> Header {
        Header {
            capacity: 1 << 30,
            logical_block: 512,
            time_scale_milli: 1000,
            start_unix_ns: 1,
            records: 0,
            dropped: 0,
            profile: "sata-mlc-2011".into(),
        }
    }

    fn written(recs: &[Record], finish: bool) -> Vec<u8> {
        let mut w = Writer::new(Cursor::new(Vec::new()), header()).unwrap();
        w.write(recs).unwrap();
        if finish {
            w.finish(3).unwrap().into_inner()
        } else {
            w.out.into_inner()
        }
    }

    #[test]
    fn round_trip_sorts_by_arrival_and_keeps_every_field() {
        let a = rec(500, RecOp::Write, 4096, 4096);
        let mut b = rec(100, RecOp::Discard, 0, 1 << 20);
        b.flags = FLAG_MORE;
        b.queue = 3;
        // Received before `a`, taken after it (it waited for the model).
        let mut c = rec(600, RecOp::Read, 8192, 512);
        c.received_ns = 400;
        c.seq = 1 << 39;
        let bytes = written(&[a, b, c], true);
        assert_eq!(bytes.len(), HEADER_LEN + 3 * RECORD_LEN);
        let f = read(Cursor::new(bytes), "t").unwrap();
        assert!(f.closed);
        assert_eq!(f.version, VERSION);
        assert_eq!(f.header.records, 3);
        assert_eq!(f.header.dropped, 3);
        assert_eq!(f.header.profile, "sata-mlc-2011");
        // In the model's order; every field kept.
        assert_eq!(f.records, vec![b, a, c]);
        // Replayed in the order received, at the received times.
        let t = f.to_trace();
        let times: Vec<_> = t.ios().map(|i| (i.t_ns.unwrap(), i.op)).collect();
        assert_eq!(
            times,
            vec![(100, Op::Discard), (400, Op::Read), (500, Op::Write)]
        );
    }

    /// A version 1 trace (56-byte records, one arrival time: the model's),
    /// as the first release wrote it, byte by byte.
    #[test]
    fn version_1_traces_are_still_read() {
        let mut b = header().encode().to_vec();
        b[8..10].copy_from_slice(&1u16.to_le_bytes());
        b[12..14].copy_from_slice(&56u16.to_le_bytes());
        b[40..48].copy_from_slice(&2u64.to_le_bytes());
        for (t, op, seq) in [(700u64, 1u8, 2u64), (300, 0, 1)] {
            let mut r = [0u8; 56];
            r[0..8].copy_from_slice(&t.to_le_bytes());
            r[8..16].copy_from_slice(&(t + 40).to_le_bytes());
            r[16..24].copy_from_slice(&(t + 50).to_le_bytes());
            r[24..32].copy_from_slice(&4096u64.to_le_bytes());
            r[32..40].copy_from_slice(&512u64.to_le_bytes());
            r[40..44].copy_from_slice(&7u32.to_le_bytes());
            r[46..48].copy_from_slice(&2u16.to_le_bytes());
            r[48] = op;
            r[49] = FLAG_FUA;
            r[51..56].copy_from_slice(&seq.to_le_bytes()[..5]);
            b.extend_from_slice(&r);
        }
        let f = read(Cursor::new(b), "old").unwrap();
        assert_eq!(f.version, VERSION_1);
        let want = Record {
            received_ns: 300,
            taken_ns: 300,
            due_ns: 340,
            delivered_ns: 350,
            offset: 4096,
            len: 512,
            conn: 7,
            frontend: 0,
            queue: 2,
            op: RecOp::Read,
            flags: FLAG_FUA,
            status: status::OK,
            seq: 1,
        };
        assert_eq!(f.records[0], want);
        assert_eq!(f.records[1].taken_ns, 700);
        assert_eq!(f.records[1].received_ns, 700);
        assert_eq!(f.records[1].op, RecOp::Write);
    }

    #[test]
    fn an_unclosed_trace_keeps_its_whole_records() {
        let mut bytes = written(
            &[rec(1, RecOp::Read, 0, 512), rec(2, RecOp::Read, 0, 512)],
            false,
        );
        bytes.truncate(bytes.len() - 10);
        let f = read(Cursor::new(bytes), "t").unwrap();
        assert!(!f.closed);
        assert_eq!(f.records.len(), 1);
    }

    #[test]
    fn hostile_traces_get_clear_errors() {
        let good = written(
            &[rec(1, RecOp::Read, 0, 512), rec(2, RecOp::Write, 0, 512)],
            true,
        );
        let msg = |b: Vec<u8>| read(Cursor::new(b), "t").unwrap_err().to_string();
        // Truncated in a record.
        let mut b = good.clone();
        b.truncate(b.len() - 1);
        assert!(msg(b).contains("truncated: its header says 2 records"), "");
        // Truncated in the header.
        assert!(msg(good[..100].to_vec()).contains("truncated in its header"));
        // Another version.
        let mut b = good.clone();
        b[8] = 9;
        assert!(msg(b).contains("version 9; this vssd reads versions 1 and 2"));
        // A huge count: no allocation, an error.
        let mut b = good.clone();
        b[40..48].copy_from_slice(&(u64::MAX - 1).to_le_bytes());
        assert!(msg(b).contains("truncated"));
        // Times going backwards.
        let mut r = rec(1000, RecOp::Read, 0, 512);
        r.due_ns = 10;
        assert!(msg(written(&[r], true)).contains("times go backwards"));
        let mut r = rec(1000, RecOp::Read, 0, 512);
        r.received_ns = 2000;
        assert!(
            msg(written(&[r], true)).contains("taken by the drive before the frontend received it")
        );
        // A bad kind.
        let mut b = good.clone();
        b[HEADER_LEN + 56] = 77;
        assert!(msg(b).contains("record 1: unknown request kind 77"));
        // Not a trace.
        assert!(msg(b"hello".to_vec()).contains("not a vssd trace"));
    }
}
