//! `vssd trace`: read, summarise and convert request traces (vssd's own
//! from `serve --trace`, fio iologs v2/v3, blkparse text, blktrace
//! binaries). Replay is `vssd sim` with `read_iolog=`.

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use thiserror::Error;

use vssd_common::cli_out;
use vssd_device::files::{FileError, create_new_private};
use vssd_profile::size::format_size;
use vssd_trace::vssd::{self as vt, RecOp};
use vssd_trace::{Format, Io, Op, Trace, TraceError, blkparse, iolog};

/// `vssd trace` arguments.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// What to do.
    #[command(subcommand)]
    pub cmd: TraceCmd,
}

/// `vssd trace` subcommands.
#[derive(Debug, Subcommand)]
pub enum TraceCmd {
    /// Summarise a trace: format, requests and bytes per kind, span,
    /// duration, arrival rate; for a vssd trace also queue depth,
    /// latency and what was not recorded.
    Info {
        /// The trace (any format vssd reads; detected from its content).
        file: PathBuf,
        /// blkparse text: which event becomes a request.
        #[arg(long, value_enum, default_value_t = BlkEvent::Q)]
        event: BlkEvent,
    },
    /// Convert a trace to a fio iolog (so real fio replays it with
    /// `read_iolog=`), to blkparse's text, or to vssd's format (so `vssd
    /// sim` replays it at ns precision).
    Convert {
        /// The trace to read (format detected from its content).
        input: PathBuf,
        /// The file to write (must not exist).
        output: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutFormat::Iolog3)]
        to: OutFormat,
        /// File name written in the iolog (`replay_redirect=` changes it
        /// when replaying).
        #[arg(long, value_name = "NAME", default_value = "/dev/vssd")]
        file_name: String,
        /// The device blkparse text names (`--to blkparse`), MAJOR,MINOR.
        #[arg(long, value_name = "MAJOR,MINOR", default_value = "254,0", value_parser = parse_dev)]
        device: (u32, u32),
        /// blkparse text: which event becomes a request (`q`: queued, what
        /// fio replays from blktrace; `d`: issued to the driver).
        #[arg(long, value_enum, default_value_t = BlkEvent::Q)]
        event: BlkEvent,
    },
}

/// Which blkparse event becomes a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BlkEvent {
    /// Queued (`Q`).
    Q,
    /// Issued to the driver (`D`).
    D,
}

/// Output formats of `convert`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutFormat {
    /// fio iolog version 3 (times in µs).
    Iolog3,
    /// fio iolog version 2 (times to the ms, as `wait` lines).
    Iolog2,
    /// blkparse's default text output (Q events; D and C too from a vssd
    /// trace).
    Blkparse,
    /// vssd's binary trace (times in ns; from another format, no
    /// completion times are known).
    Vssd,
}

/// `MAJOR,MINOR`.
fn parse_dev(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("`{s}` is not a device number MAJOR,MINOR (e.g. 8,16)");
    let (a, b) = s.split_once(',').ok_or_else(bad)?;
    Ok((
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    ))
}

/// What went wrong.
#[derive(Debug, Error)]
pub enum TraceCmdError {
    /// Reading the input.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// Creating the output.
    #[error(transparent)]
    File(#[from] FileError),
    /// Writing the output.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Printing.
    #[error("writing the output")]
    Output(#[from] cli_out::StdoutError),
}

/// Read any trace, with the blkparse event chosen; a vssd trace comes
/// with its records.
pub fn load(path: &Path, event: BlkEvent) -> Result<(Format, Trace, Option<vt::File>), TraceError> {
    let name = path.display().to_string();
    let format = vssd_trace::detect_path(path)?;
    match format {
        Format::Blkparse if event == BlkEvent::D => {
            let t = blkparse::read(vssd_trace::open(path)?, &name, blkparse::Event::Dispatch)?;
            Ok((format, t, None))
        }
        Format::Vssd => {
            let v = vt::read(vssd_trace::open(path)?, &name)?;
            Ok((format, v.to_trace(), Some(v)))
        }
        _ => {
            let (f, t) = vssd_trace::load(path)?;
            Ok((f, t, None))
        }
    }
}

/// Run `vssd trace`.
pub fn run(args: TraceArgs) -> Result<(), TraceCmdError> {
    match args.cmd {
        TraceCmd::Info { file, event } => {
            let (format, trace, v) = load(&file, event)?;
            let mut text = info(&file, format, &trace.timed_by_waits(), v.as_ref());
            if trace.has_waits() {
                text.push_str("  times from the iolog v2 wait lines (to the millisecond)\n");
            }
            cli_out::print(&text)?;
        }
        TraceCmd::Convert {
            input,
            output,
            to,
            file_name,
            device,
            event,
        } => {
            let (format, read, v) = load(&input, event)?;
            // iolog v2's waits become the times of the requests after them.
            let trace = read.timed_by_waits();
            let f = create_new_private(&output)?;
            let wr = |source| TraceCmdError::Write {
                path: output.clone(),
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
                    let done = iolog::write(&mut w, ver, &file_name, ios).map_err(wr)?;
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
                    let mut tw =
                        vt::Writer::new(std::io::Cursor::new(Vec::new()), header).map_err(wr)?;
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
            if trace.ios().any(|i| matches!(i.op, Op::WriteZeroes { .. })) && to != OutFormat::Vssd
            {
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
            cli_out::print(&msg)?;
        }
    }
    Ok(())
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

/// The `info` text.
pub fn info(path: &Path, format: Format, trace: &Trace, v: Option<&vt::File>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {}",
        path.display(),
        match format {
            Format::Vssd => "vssd trace",
            Format::IologV2 => "fio iolog v2",
            Format::IologV3 => "fio iolog v3",
            Format::Blkparse => "blkparse text",
            Format::Blktrace => "blktrace binary",
        }
    );
    if let Some(v) = v {
        let h = &v.header;
        let _ = writeln!(
            s,
            "  drive: {} ({}), {}-byte logical blocks{}",
            if h.profile.is_empty() {
                "?"
            } else {
                &h.profile
            },
            format_size(h.capacity),
            h.logical_block,
            if h.time_scale_milli != 1000 {
                format!(", time scale {}", h.time_scale_milli as f64 / 1000.0)
            } else {
                String::new()
            }
        );
        if !v.closed {
            s.push_str(
                "  not closed (the daemon ended without stopping it): its whole records are read\n",
            );
        }
        if h.dropped > 0 {
            let _ = writeln!(s, "  {} requests were not recorded", h.dropped);
        }
    }
    if trace.files.len() > 1 {
        let _ = writeln!(s, "  files/devices: {}", trace.files.join(", "));
    }
    let mut per: Vec<(&'static str, u64, u64)> = Vec::new();
    let mut lo = u64::MAX;
    let mut hi = 0u64;
    let mut first_t = None;
    let mut last_t = None;
    let mut n = 0u64;
    for io in trace.ios() {
        n += 1;
        let name = io.op.name();
        match per.iter_mut().find(|p| p.0 == name) {
            Some(p) => {
                p.1 += 1;
                p.2 += io.len;
            }
            None => per.push((name, 1, io.len)),
        }
        if io.len > 0 {
            lo = lo.min(io.offset);
            hi = hi.max(io.offset + io.len);
        }
        if let Some(t) = io.t_ns {
            first_t.get_or_insert(t);
            last_t = Some(t);
        }
    }
    let _ = writeln!(s, "  requests: {n}");
    for (name, c, b) in &per {
        let _ = writeln!(s, "    {name:<13} {c:>10}  {}", format_size(*b));
    }
    if lo < hi {
        let _ = writeln!(s, "  span: {} .. {} ({})", lo, hi, format_size(hi - lo));
    }
    if let (Some(a), Some(b)) = (first_t, last_t) {
        let d = (b - a) as f64 / 1e9;
        let _ = write!(s, "  arrivals over {d:.3} s");
        if d > 0.0 {
            let _ = write!(s, " ({:.0} requests/s)", n as f64 / d);
        }
        s.push('\n');
    } else if n > 0 {
        s.push_str("  no times (replayed as fast as iodepth allows)\n");
    }
    if let Some(v) = v {
        // Queue depth (received to delivered), latency as the client saw
        // it, and how long requests waited for the model.
        let mut spans: Vec<(u64, u64)> = v
            .records
            .iter()
            .map(|r| (r.received_ns, r.delivered_ns))
            .collect();
        spans.sort_unstable();
        let mut ends: std::collections::BinaryHeap<std::cmp::Reverse<u64>> =
            std::collections::BinaryHeap::new();
        let mut max_depth = 0usize;
        for &(a, d) in &spans {
            while ends.peek().is_some_and(|e| e.0 <= a) {
                ends.pop();
            }
            ends.push(std::cmp::Reverse(d));
            max_depth = max_depth.max(ends.len());
        }
        let mut lat: Vec<u64> = spans.iter().map(|&(a, d)| d.saturating_sub(a)).collect();
        let mut wait: Vec<u64> = v
            .records
            .iter()
            .map(|r| r.taken_ns - r.received_ns)
            .collect();
        lat.sort_unstable();
        wait.sort_unstable();
        let pct = |xs: &[u64], q: f64| xs[((xs.len() - 1) as f64 * q) as usize] as f64 / 1e3;
        if !lat.is_empty() {
            let _ = writeln!(
                s,
                "  in flight at most {max_depth}; latency (received to delivered) p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
                pct(&lat, 0.5),
                pct(&lat, 0.99),
                pct(&lat, 1.0)
            );
            if v.version >= vt::VERSION {
                let _ = writeln!(
                    s,
                    "  received to taken by the model: p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
                    pct(&wait, 0.5),
                    pct(&wait, 0.99),
                    pct(&wait, 1.0)
                );
            }
        }
        if v.version < vt::VERSION {
            let _ = writeln!(
                s,
                "  format version {}: times are the model's (when it took each request), not the frontend's",
                v.version
            );
        }
        let failed = v
            .records
            .iter()
            .filter(|r| r.status != vt::status::OK)
            .count();
        if failed > 0 {
            let _ = writeln!(
                s,
                "  {failed} records did not complete OK (refused, failed or abandoned)"
            );
        }
    }
    s
}
