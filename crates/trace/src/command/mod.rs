//! `vssd trace`: read, summarise and convert request traces (vssd's own
//! from `serve --trace`, fio iologs v2/v3, blkparse text, blktrace
//! binaries). Replay is `vssd sim` with `read_iolog=`.
//!
//! This module is the command line and reading a trace of any format;
//! `info` and `convert` are the two subcommands.

mod convert;
mod info;

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use thiserror::Error;

use crate::vssd as vt;
use crate::{Format, Trace, TraceError, blkparse};
pub use convert::convert;
pub use info::info;
use vssd_common::cli_out;

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
    #[error("cannot open {path}")]
    Create {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
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
    let format = crate::detect_path(path)?;
    match format {
        Format::Blkparse if event == BlkEvent::D => {
            let t = blkparse::read(crate::open(path)?, &name, blkparse::Event::Dispatch)?;
            Ok((format, t, None))
        }
        Format::Vssd => {
            let v = vt::read(crate::open(path)?, &name)?;
            Ok((format, v.to_trace(), Some(v)))
        }
        _ => {
            let (f, t) = crate::load(path)?;
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
            let msg = convert::convert(&input, &output, to, &file_name, device, event)?;
            cli_out::print(&msg)?;
        }
    }
    Ok(())
}
