//! fio's iolog, versions 2 and 3 (fio 3.33's `iolog.c`).
//!
//! Version 2: a header line `fio version 2 iolog`, then
//! `FILE ACTION [OFFSET LENGTH]` per line; file actions `add`, `open`,
//! `close`; I/O actions `read`, `write`, `sync`, `datasync`, `trim`, and
//! `wait`, whose offset field is a time in ms since fio started
//! (`mtime_since_genesis`): fio sleeps until then, and issues the lines
//! that follow as fast as `iodepth` allows. Version 2's only timing is
//! these waits, to the millisecond.
//! Version 3 prefixes every line with a timestamp in µs since the log
//! started (`fio --write_iolog` writes version 3) and has no `wait`; fio
//! replays it by delaying each I/O by the difference between its timestamp
//! and the previous line's.
//!
//! Reading is stricter than fio, which skips lines it cannot parse: here a
//! bad line is an error that names it, and so is a timestamp smaller than
//! the one before it.

use std::io::{BufRead, Write};

use super::{Io, Item, MAX_TIME_NS as MAX_DRIVE_NS, Op, Trace, TraceError};

/// Version 2's header line.
pub const V2_HEADER: &str = "fio version 2 iolog";
/// Version 3's header line.
pub const V3_HEADER: &str = "fio version 3 iolog";

/// Longest line accepted, bytes (fio reads lines of up to 4096).
const MAX_LINE: usize = 4096;

/// Read an iolog of version 2 or 3 (`name` labels messages).
pub fn read(r: impl BufRead, name: &str) -> Result<Trace, TraceError> {
    let mut lines = BoundedLines::new(r, name);
    let first = lines
        .next_line()?
        .ok_or_else(|| TraceError::bad(format!("{name}:1"), "empty file"))?;
    let v3 = if first.starts_with(V3_HEADER) {
        true
    } else if first.starts_with(V2_HEADER) {
        false
    } else {
        return Err(TraceError::bad(
            format!("{name}:1"),
            format!("not a fio iolog header (`{V2_HEADER}` or `{V3_HEADER}`)"),
        ));
    };
    let mut t = Trace::default();
    let mut last_us: u64 = 0;
    let mut line_no = 1;
    while let Some(line) = lines.next_line()? {
        line_no += 1;
        let at = || format!("{name}:{line_no}");
        let mut f = line.split_whitespace();
        let time_us = if v3 {
            let Some(ts) = f.next() else { continue };
            let v: u64 = ts
                .parse()
                .map_err(|_| TraceError::bad(at(), format!("bad timestamp `{ts}`")))?;
            if v < last_us {
                return Err(TraceError::bad(
                    at(),
                    format!(
                        "timestamp {v} µs is before the previous line's {last_us} µs: times go backwards"
                    ),
                ));
            }
            if v > MAX_DRIVE_NS / 1000 {
                return Err(TraceError::bad(
                    at(),
                    format!(
                        "timestamp {v} µs is beyond the longest time a trace may span ({} µs, about 146 years)",
                        MAX_DRIVE_NS / 1000
                    ),
                ));
            }
            last_us = v;
            Some(v)
        } else {
            None
        };
        let Some(file) = f.next() else {
            if v3 {
                return Err(TraceError::bad(at(), "a timestamp and nothing else"));
            }
            continue;
        };
        let act = f
            .next()
            .ok_or_else(|| TraceError::bad(at(), "no action after the file name"))?;
        let nums: Vec<&str> = f.collect();
        let num = |i: usize| -> Result<u64, TraceError> {
            let s = nums.get(i).ok_or_else(|| {
                TraceError::bad(at(), format!("`{act}` needs an offset and a length"))
            })?;
            s.parse::<u64>()
                .map_err(|_| TraceError::bad(at(), format!("bad number `{s}`")))
        };
        let op = match act {
            "add" | "open" | "close" => {
                t.file_index(file)?;
                continue;
            }
            "wait" if v3 => continue, // fio ignores it in version 3
            "wait" => {
                let ms = num(0)?;
                let since_start_ns = ms
                    .checked_mul(1_000_000)
                    .filter(|&ns| ns <= MAX_DRIVE_NS)
                    .ok_or_else(|| {
                        TraceError::bad(
                            at(),
                            format!(
                                "wait {ms} ms is beyond the longest time a trace may span ({} ms, about 146 years)",
                                MAX_DRIVE_NS / 1_000_000
                            ),
                        )
                    })?;
                t.push(Item::Wait { since_start_ns })?;
                continue;
            }
            "read" => Op::Read,
            "write" => Op::Write,
            "sync" | "datasync" => Op::Flush,
            "trim" => Op::Discard,
            other => {
                return Err(TraceError::bad(at(), format!("unknown action `{other}`")));
            }
        };
        let (offset, len) = if op == Op::Flush && nums.is_empty() {
            (0, 0)
        } else {
            (num(0)?, num(1)?)
        };
        if offset.checked_add(len).is_none() {
            return Err(TraceError::bad(at(), "offset + length overflows"));
        }
        let file = t.file_index(file)?;
        t.push(Item::Io(Io {
            t_ns: time_us.map(|u| u * 1000),
            op,
            offset,
            len,
            file,
            fua: false,
        }))?;
    }
    Ok(t)
}

/// Lines of at most [`MAX_LINE`] bytes, UTF-8.
pub(crate) struct BoundedLines<'a, R> {
    r: R,
    name: &'a str,
    buf: Vec<u8>,
    no: usize,
}

impl<'a, R: BufRead> BoundedLines<'a, R> {
    pub(crate) fn new(r: R, name: &'a str) -> Self {
        BoundedLines {
            r,
            name,
            buf: Vec::new(),
            no: 0,
        }
    }

    pub(crate) fn next_line(&mut self) -> Result<Option<String>, TraceError> {
        self.buf.clear();
        self.no += 1;
        let n = std::io::Read::take(&mut self.r, MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut self.buf)
            .map_err(|source| TraceError::Io {
                path: self.name.to_string(),
                source,
            })?;
        if n == 0 {
            return Ok(None);
        }
        if self.buf.len() > MAX_LINE && !self.buf.ends_with(b"\n") {
            return Err(TraceError::bad(
                format!("{}:{}", self.name, self.no),
                format!("line longer than {MAX_LINE} bytes"),
            ));
        }
        let s = std::str::from_utf8(&self.buf)
            .map_err(|_| TraceError::bad(format!("{}:{}", self.name, self.no), "not UTF-8 text"))?;
        Ok(Some(s.trim_end_matches(['\n', '\r']).to_string()))
    }
}

/// Which iolog version to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// Times to the ms, as `wait` lines: fio waits until each one's time
    /// since it started, then issues what follows as fast as `iodepth`
    /// allows.
    V2,
    /// Times in µs: fio replays at the recorded pace.
    V3,
}

/// What [`write`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Written {
    /// Requests.
    pub ios: u64,
    /// Version 2's `wait` lines.
    pub waits: u64,
}

/// Write `ios` (in arrival order) as an iolog for the file `file`.
///
/// Version 3's timestamps are µs since the first request plus 1: fio
/// takes a previous timestamp of 0 to mean "no delay", so a log starting
/// at 0 would lose its second request's delay. Version 2 gets a `wait`
/// line before the first request of each later millisecond (ms since the
/// first request, rounded down). A WRITE ZEROES becomes a `write` (fio
/// has no such action), a flush `sync`, a discard `trim`.
pub fn write<'a>(
    mut w: impl Write,
    version: Version,
    file: &str,
    ios: impl IntoIterator<Item = &'a Io>,
) -> std::io::Result<Written> {
    let mut base: Option<u64> = None;
    let mut last = 1u64;
    let mut waited_ms = 0u64;
    let mut waits = 0u64;
    let stamp = |w: &mut dyn Write, us: u64| -> std::io::Result<()> {
        if version == Version::V3 {
            write!(w, "{us} ")?;
        }
        Ok(())
    };
    match version {
        Version::V2 => writeln!(w, "{V2_HEADER}")?,
        Version::V3 => writeln!(w, "{V3_HEADER}")?,
    }
    stamp(&mut w, 1)?;
    writeln!(w, "{file} add")?;
    stamp(&mut w, 1)?;
    writeln!(w, "{file} open")?;
    let mut n = 0;
    for io in ios {
        let t = io.t_ns.unwrap_or(0);
        let b = *base.get_or_insert(t);
        let us = 1 + t.saturating_sub(b) / 1000;
        last = last.max(us);
        if version == Version::V2 && io.t_ns.is_some() {
            let ms = t.saturating_sub(b) / 1_000_000;
            if ms > waited_ms {
                writeln!(w, "{file} wait {ms} 0")?;
                waited_ms = ms;
                waits += 1;
            }
        }
        stamp(&mut w, last)?;
        match io.op {
            Op::Read => writeln!(w, "{file} read {} {}", io.offset, io.len)?,
            Op::Write | Op::WriteZeroes { .. } => {
                writeln!(w, "{file} write {} {}", io.offset, io.len)?
            }
            Op::Flush => writeln!(w, "{file} sync 0 0")?,
            Op::Discard => writeln!(w, "{file} trim {} {}", io.offset, io.len)?,
        }
        n += 1;
    }
    stamp(&mut w, last)?;
    writeln!(w, "{file} close")?;
    w.flush()?;
    Ok(Written { ios: n, waits })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(s: &str) -> Result<Trace, TraceError> {
        read(std::io::Cursor::new(s.as_bytes().to_vec()), "log")
    }

    #[test]
    fn fio_written_v3_logs_parse() {
        // As fio 3.33 writes one (`--write_iolog`, thinktime=10ms).
        let t = parse(
            "fio version 3 iolog\n26 /tmp/f.dat add\n213 /tmp/f.dat open\n217 /tmp/f.dat write 0 4096\n10299 /tmp/f.dat write 4096 4096\n10400 /tmp/f.dat sync 0 0\n10500 /tmp/f.dat trim 0 8192\n50649 /tmp/f.dat close\n",
        )
        .unwrap();
        assert_eq!(t.files, vec!["/tmp/f.dat"]);
        let ios: Vec<_> = t.ios().collect();
        assert_eq!(ios.len(), 4);
        assert_eq!(ios[1].t_ns, Some(10_299_000));
        assert_eq!(
            (ios[1].op, ios[1].offset, ios[1].len),
            (Op::Write, 4096, 4096)
        );
        assert_eq!(ios[2].op, Op::Flush);
        assert_eq!(ios[3].op, Op::Discard);
    }

    #[test]
    fn times_beyond_the_clock_are_refused_with_the_limit() {
        let v2 = "fio version 2 iolog\n/dev/x add\n/dev/x write 0 4096\n/dev/x wait 18446744073709551 0\n/dev/x write 4096 4096\n";
        let e = parse(v2).unwrap_err().to_string();
        assert!(e.contains(":4") && e.contains("146 years"), "{e}");
        let v3 = "fio version 3 iolog\n0 /dev/x add\n18446744073709551 /dev/x write 0 4096\n";
        let e = parse(v3).unwrap_err().to_string();
        assert!(e.contains(":3") && e.contains("146 years"), "{e}");
        // Just inside the limit is fine.
        let ok = format!(
            "fio version 2 iolog\n/dev/x add\n/dev/x wait {} 0\n/dev/x write 0 4096\n",
            MAX_DRIVE_NS / 1_000_000
        );
        parse(&ok).unwrap();
    }

    #[test]
    fn v2_logs_have_waits_and_no_times() {
        let t = parse("fio version 2 iolog\n/dev/sdb add\n/dev/sdb open\n/dev/sdb read 0 4096\n/dev/sdb wait 20 0\n/dev/sdb write 512 1024\n").unwrap();
        assert_eq!(t.items.len(), 3);
        assert_eq!(
            t.items[1],
            Item::Wait {
                since_start_ns: 20_000_000
            }
        );
        assert!(t.ios().all(|i| i.t_ns.is_none()));
    }

    #[test]
    fn round_trip_through_v3_keeps_requests_and_pace() {
        let ios = vec![
            Io {
                t_ns: Some(5_000),
                op: Op::Write,
                offset: 0,
                len: 4096,
                file: 0,
                fua: false,
            },
            Io {
                t_ns: Some(2_005_000),
                op: Op::Read,
                offset: 8192,
                len: 512,
                file: 0,
                fua: false,
            },
            Io {
                t_ns: Some(3_005_000),
                op: Op::Flush,
                offset: 0,
                len: 0,
                file: 0,
                fua: false,
            },
        ];
        let mut out = Vec::new();
        assert_eq!(write(&mut out, Version::V3, "/dev/x", &ios).unwrap().ios, 3);
        let t = parse(std::str::from_utf8(&out).unwrap()).unwrap();
        let back: Vec<_> = t.ios().copied().collect();
        assert_eq!(back.len(), 3);
        assert_eq!(back[0].t_ns, Some(1000));
        assert_eq!(back[1].t_ns.unwrap() - back[0].t_ns.unwrap(), 2_000_000);
        assert_eq!(
            (back[1].op, back[1].offset, back[1].len),
            (Op::Read, 8192, 512)
        );
    }

    /// Version 2 carries times as `wait` lines (ms since the start, as
    /// fio's `mtime_since_genesis`); read back, each request takes the
    /// time of the wait before it.
    #[test]
    fn round_trip_through_v2_keeps_the_pace_to_the_millisecond() {
        let io = |t_ns: u64, offset: u64| Io {
            t_ns: Some(t_ns),
            op: Op::Write,
            offset,
            len: 4096,
            file: 0,
            fua: false,
        };
        let ios = vec![
            io(7_000_000, 0),
            io(7_400_000, 4096),
            io(9_100_000, 8192),
            io(9_900_000, 12288),
            io(2_007_000_000, 16384),
        ];
        let mut out = Vec::new();
        let n = write(&mut out, Version::V2, "/dev/x", &ios).unwrap();
        assert_eq!(n, Written { ios: 5, waits: 2 });
        let text = std::str::from_utf8(&out).unwrap();
        assert_eq!(
            text,
            "fio version 2 iolog\n/dev/x add\n/dev/x open\n/dev/x write 0 4096\n/dev/x write 4096 4096\n/dev/x wait 2 0\n/dev/x write 8192 4096\n/dev/x write 12288 4096\n/dev/x wait 2000 0\n/dev/x write 16384 4096\n/dev/x close\n"
        );
        let t = parse(text).unwrap().timed_by_waits();
        let times: Vec<_> = t.ios().map(|i| i.t_ns.unwrap() / 1_000_000).collect();
        assert_eq!(times, vec![0, 0, 2, 2, 2000]);
        assert!(t.items.iter().all(|i| matches!(i, Item::Io(_))));
    }

    #[test]
    fn bad_lines_name_themselves() {
        let e = |s: &str| parse(s).unwrap_err().to_string();
        assert!(e("fio version 1 iolog\n").contains("log:1: not a fio iolog header"));
        assert!(
            e("fio version 3 iolog\n10 f add\n5 f read 0 512\n")
                .contains("log:3: timestamp 5 µs is before")
        );
        assert!(e("fio version 3 iolog\n10 f fly 0 512\n").contains("log:2: unknown action `fly`"));
        assert!(e("fio version 3 iolog\n10 f read 0\n").contains("needs an offset and a length"));
        assert!(e("fio version 3 iolog\nx f read 0 1\n").contains("bad timestamp"));
        assert!(e("fio version 2 iolog\nf read 18446744073709551615 2\n").contains("overflows"));
        let long = format!("fio version 2 iolog\n{}\n", "a".repeat(10_000));
        assert!(e(&long).contains("longer than 4096"));
    }
}
