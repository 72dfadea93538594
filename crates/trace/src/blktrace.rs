//! blktrace's binary events (`struct blk_io_trace`, version 7: the format
//! of blktrace 1.x and Linux's relay interface), as fio's `read_iolog`
//! takes them: a 48-byte event (magic and version, sequence, time in ns,
//! sector, bytes, action, pid, device, CPU, error, payload length) followed
//! by its payload. Only queue events (`Q`) become requests, as in fio:
//! reads, writes, discards (`BLK_TC_DISCARD`) and flushes
//! (`BLK_TC_FLUSH` with no data). blktrace writes one file per CPU;
//! `blkparse -i NAME -d merged.bin` merges them into one such file.
//! Either byte order is read.

use std::io::Read;

use super::{Io, Item, Op, Trace, TraceError};

const MAGIC: u32 = 0x6561_7400;
const VERSION: u32 = 0x07;
const EVENT_LEN: usize = 48;

const TC_SHIFT: u32 = 16;
const TC_READ: u32 = 1 << 0;
const TC_WRITE: u32 = 1 << 1;
const TC_FLUSH: u32 = 1 << 2;
const TC_NOTIFY: u32 = 1 << 10;
const TC_DISCARD: u32 = 1 << 13;
const TC_FUA: u32 = 1 << 15;
const TA_QUEUE: u32 = 1;

/// Whether the first bytes are a blktrace event (either byte order).
pub fn is_blktrace(head: &[u8]) -> bool {
    head.len() >= 4 && {
        let le = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let be = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        le & 0xffff_ff00 == MAGIC || be & 0xffff_ff00 == MAGIC
    }
}

/// Read blktrace binary events (`name` labels messages).
pub fn read(mut r: impl Read, name: &str) -> Result<Trace, TraceError> {
    let mut t = Trace::default();
    let mut ev = [0u8; EVENT_LEN];
    let mut pdu = vec![0u8; u16::MAX as usize];
    let mut big_endian: Option<bool> = None;
    let mut base: Option<u64> = None;
    let mut last = 0u64;
    let mut n: u64 = 0;
    loop {
        let got = super::read_full(&mut r, &mut ev).map_err(|source| TraceError::Io {
            path: name.to_string(),
            source,
        })?;
        if got == 0 {
            break;
        }
        n += 1;
        let at = || format!("{name}: event {n}");
        if got < EVENT_LEN {
            return Err(TraceError::bad(
                at(),
                format!("truncated: {got} of {EVENT_LEN} bytes"),
            ));
        }
        let be = *big_endian.get_or_insert_with(|| {
            u32::from_be_bytes([ev[0], ev[1], ev[2], ev[3]]) & 0xffff_ff00 == MAGIC
        });
        let u32_at = |i: usize| {
            let b = [ev[i], ev[i + 1], ev[i + 2], ev[i + 3]];
            if be {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&ev[i..i + 8]);
            if be {
                u64::from_be_bytes(b)
            } else {
                u64::from_le_bytes(b)
            }
        };
        let magic = u32_at(0);
        if magic & 0xffff_ff00 != MAGIC {
            return Err(TraceError::bad(
                at(),
                "bad magic: not a blktrace event (or the file is corrupt)",
            ));
        }
        if magic & 0xff != VERSION {
            return Err(TraceError::bad(
                at(),
                format!(
                    "blktrace format version {}; this vssd reads version 7",
                    magic & 0xff
                ),
            ));
        }
        let time = u64_at(8);
        let sector = u64_at(16);
        let bytes = u32_at(24) as u64;
        let action = u32_at(28);
        let device = u32_at(36);
        let pdu_len = {
            let b = [ev[46], ev[47]];
            if be {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            }
        } as usize;
        if pdu_len > 0 {
            let got =
                super::read_full(&mut r, &mut pdu[..pdu_len]).map_err(|source| TraceError::Io {
                    path: name.to_string(),
                    source,
                })?;
            if got < pdu_len {
                return Err(TraceError::bad(at(), "truncated in its payload"));
            }
        }
        let cat = action >> TC_SHIFT;
        if cat & TC_NOTIFY != 0 || action & 0xffff != TA_QUEUE {
            continue;
        }
        if time < last {
            return Err(TraceError::bad(
                at(),
                format!(
                    "time {time} ns is before the previous event's {last} ns: times go backwards (merge per-CPU files with `blkparse -d`)"
                ),
            ));
        }
        last = time;
        let op = if cat & TC_DISCARD != 0 {
            Op::Discard
        } else if cat & TC_WRITE != 0 && bytes > 0 {
            Op::Write
        } else if cat & TC_FLUSH != 0 && bytes == 0 {
            Op::Flush
        } else if cat & TC_READ != 0 || (cat & TC_WRITE == 0 && bytes > 0) {
            Op::Read
        } else {
            continue;
        };
        let offset = sector
            .checked_mul(512)
            .filter(|o| o.checked_add(bytes).is_some())
            .ok_or_else(|| TraceError::bad(at(), "sector out of range"))?;
        let dev = format!("{},{}", device >> 20, device & 0xfffff);
        let file = t.file_index(&dev)?;
        let b = *base.get_or_insert(time);
        t.push(Item::Io(Io {
            t_ns: Some(time - b),
            op,
            offset: if op == Op::Flush { 0 } else { offset },
            len: if op == Op::Flush { 0 } else { bytes },
            file,
            fua: cat & TC_FUA != 0,
        }))?;
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// One event as the kernel lays it out (little-endian).
    fn event(time: u64, sector: u64, bytes: u32, act: u32, cat: u32, pdu: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&(MAGIC | VERSION).to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&time.to_le_bytes());
        b.extend_from_slice(&sector.to_le_bytes());
        b.extend_from_slice(&bytes.to_le_bytes());
        b.extend_from_slice(&((cat << TC_SHIFT) | act).to_le_bytes());
        b.extend_from_slice(&77u32.to_le_bytes());
        b.extend_from_slice(&((8u32 << 20) | 16).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&(pdu.len() as u16).to_le_bytes());
        b.extend_from_slice(pdu);
        b
    }

    #[test]
    fn queue_events_become_requests() {
        let mut f = Vec::new();
        f.extend(event(1000, 8, 4096, TA_QUEUE, TC_WRITE, b""));
        f.extend(event(1500, 8, 4096, 7, TC_WRITE, b"")); // issue: skipped
        f.extend(event(2000, 0, 0, 0, TC_NOTIFY, b"fio\0")); // a process name
        f.extend(event(3000, 16, 8192, TA_QUEUE, TC_READ, b""));
        f.extend(event(
            4000,
            0,
            1 << 20,
            TA_QUEUE,
            TC_WRITE | TC_DISCARD,
            b"",
        ));
        f.extend(event(5000, 0, 0, TA_QUEUE, TC_WRITE | TC_FLUSH, b""));
        assert!(is_blktrace(&f));
        let t = read(std::io::Cursor::new(f), "b").unwrap();
        assert_eq!(t.files, vec!["8,16"]);
        let got: Vec<_> = t
            .ios()
            .map(|i| (i.t_ns.unwrap(), i.op, i.offset, i.len))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, Op::Write, 4096, 4096),
                (2000, Op::Read, 8192, 8192),
                (3000, Op::Discard, 0, 1 << 20),
                (4000, Op::Flush, 0, 0),
            ]
        );
    }

    #[test]
    fn hostile_files_get_clear_errors() {
        let e = |b: Vec<u8>| read(std::io::Cursor::new(b), "b").unwrap_err().to_string();
        let ev = event(1000, 8, 4096, TA_QUEUE, TC_WRITE, b"");
        assert!(e(ev[..30].to_vec()).contains("b: event 1: truncated"));
        let mut v = ev.clone();
        v[0] = 0x08;
        assert!(e(v).contains("version 8; this vssd reads version 7"));
        let mut back = ev.clone();
        back.extend(event(10, 8, 4096, TA_QUEUE, TC_WRITE, b""));
        assert!(e(back).contains("times go backwards"));
        let mut p = event(1000, 8, 4096, TA_QUEUE, TC_WRITE, b"abcd");
        p.truncate(p.len() - 2);
        assert!(e(p).contains("truncated in its payload"));
        let mut m = ev.clone();
        m.extend_from_slice(&[1u8; 48]);
        assert!(e(m).contains("event 2: bad magic"));
    }
}
