//! `vssd trace convert`: a trace of any format vssd reads, written as a
//! fio iolog (v3 or v2), blkparse text or vssd's own format.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::{BlkEvent, OutFormat, TraceCmdError, load};
use crate::vssd::{self as vt, RecOp};
use crate::{Io, Op, Trace, blkparse, iolog};

/// Convert `input` into a new file `output` (mode 0600; it must not
/// exist): the line `vssd trace convert` prints, with what changed on the
/// way.
pub fn convert(
    input: &Path,
    output: &Path,
    to: OutFormat,
    file_name: &str,
    device: (u32, u32),
    event: BlkEvent,
) -> Result<String, TraceCmdError> {
    let (format, read, v) = load(input, event)?;
    // iolog v2's waits become the times of the requests after them.
    let trace = read.timed_by_waits();
    let f = create_new_private(output)?;
    let wr = |source| TraceCmdError::Write {
        path: output.to_path_buf(),
        source,
    };
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let mut notes: Vec<String> = Vec::new();
    let n = match to {
        OutFormat::Iolog3 | OutFormat::Iolog2 => {
            let ver = if to == OutFormat::Iolog3 {
                iolog::Version::V3
            } else {
                iolog::Version::V2
            };
            let ios: Vec<&Io> = trace.ios().collect();
            let done = iolog::write(&mut w, ver, file_name, ios).map_err(wr)?;
            if to == OutFormat::Iolog2 && trace.ios().any(|i| i.t_ns.is_some()) {
                notes.push(format!(
                    "{} wait lines: iolog v2 keeps times to the millisecond",
                    done.waits
                ));
            }
            done.ios
        }
        OutFormat::Blkparse => {
            let reqs = blkparse_requests(&trace, v.as_ref());
            blkparse::write(&mut w, device, &reqs).map_err(wr)?;
            reqs.len() as u64
        }
        OutFormat::Vssd => {
            let header = match &v {
                Some(v) => v.header.clone(),
                None => vt::Header {
                    time_scale_milli: 1000,
                    ..vt::Header::default()
                },
            };
            let recs: Vec<vt::Record> = match &v {
                Some(v) => v.records.clone(),
                None => trace.ios().map(record_of).collect(),
            };
            let mut tw = vt::Writer::new(std::io::Cursor::new(Vec::new()), header).map_err(wr)?;
            tw.write(&recs).map_err(wr)?;
            let bytes = tw
                .finish(v.as_ref().map_or(0, |v| v.header.dropped))
                .map_err(wr)?;
            w.write_all(&bytes.into_inner()).map_err(wr)?;
            recs.len() as u64
        }
    };
    w.flush().map_err(wr)?;
    if read.has_waits() {
        notes.push("iolog v2 waits became the times of the requests after them".into());
    }
    if trace.ios().any(|i| matches!(i.op, Op::WriteZeroes { .. })) && to != OutFormat::Vssd {
        let whose = if to == OutFormat::Blkparse {
            "blkparse"
        } else {
            "fio"
        };
        notes.push(format!(
            "write-zeroes became writes: {whose} has no write-zeroes"
        ));
    }
    let mut msg = format!(
        "{} ({}) -> {} ({}): {n} requests",
        input.display(),
        format.name(),
        output.display(),
        match to {
            OutFormat::Iolog3 => "fio iolog v3",
            OutFormat::Iolog2 => "fio iolog v2",
            OutFormat::Blkparse => "blkparse text",
            OutFormat::Vssd => "vssd",
        }
    );
    for note in notes {
        let _ = write!(msg, " ({note})");
    }
    msg.push('\n');
    Ok(msg)
}

/// Create `path` anew (it must not exist), mode 0600, for writing.
fn create_new_private(path: &Path) -> Result<File, TraceCmdError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| TraceCmdError::Create {
            path: path.into(),
            source,
        })
}

/// The requests of `trace` for blkparse text: from a vssd trace (`v`) each
/// record's receipt as `Q`, the model taking it as `D`, the delivery of
/// its completion as `C`; from another format `Q` events alone.
fn blkparse_requests(trace: &Trace, v: Option<&vt::File>) -> Vec<blkparse::Request> {
    match v {
        Some(v) => {
            let mut recs: Vec<&vt::Record> = v.records.iter().collect();
            recs.sort_by_key(|r| (r.received_ns, r.taken_ns, r.seq));
            recs.into_iter()
                .filter_map(|r| {
                    let io = r.io()?;
                    Some(blkparse::Request {
                        io,
                        issued_ns: Some(r.taken_ns),
                        completed_ns: (r.status != vt::status::ABANDONED).then_some(r.delivered_ns),
                        failed: r.status != vt::status::OK,
                    })
                })
                .collect()
        }
        None => trace
            .ios()
            .map(|io| blkparse::Request {
                io: *io,
                issued_ns: None,
                completed_ns: None,
                failed: false,
            })
            .collect(),
    }
}

/// A vssd record for a request of another format (completion unknown:
/// due and delivered are its arrival).
fn record_of(io: &Io) -> vt::Record {
    let t = io.t_ns.unwrap_or(0);
    let (op, unmap) = match io.op {
        Op::Read => (RecOp::Read, false),
        Op::Write => (RecOp::Write, false),
        Op::Flush => (RecOp::Flush, false),
        Op::Discard => (RecOp::Discard, false),
        Op::WriteZeroes { unmap } => (RecOp::WriteZeroes, unmap),
    };
    vt::Record {
        received_ns: t,
        taken_ns: t,
        due_ns: t,
        delivered_ns: t,
        offset: io.offset,
        len: io.len,
        conn: io.file,
        frontend: 0,
        queue: 0,
        op,
        flags: (u8::from(io.fua) * vt::FLAG_FUA) | (u8::from(unmap) * vt::FLAG_UNMAP),
        status: vt::status::OK,
        seq: 0,
    }
}
