//! The command line of `vssd ctl`: its arguments and subcommands.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::protocol::FaultSpec;
use vssd_profile::size::parse_size;

/// `vssd ctl` arguments.
#[derive(Debug, Args)]
pub struct CtlArgs {
    /// The daemon's control socket (`vssd serve --control PATH`; its default
    /// is the vhost-user socket's path + `.ctl`). Also `VSSD_CONTROL`.
    #[arg(long, value_name = "PATH", global = true, env = "VSSD_CONTROL")]
    pub control: Option<PathBuf>,
    /// The daemon's vhost-user socket: use its default control socket, SOCKET.ctl.
    #[arg(long, value_name = "SOCKET", global = true, conflicts_with = "control")]
    pub socket: Option<PathBuf>,
    /// Seconds to wait for the daemon's reply (for a precondition: between
    /// two progress reports).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0, global = true)]
    pub timeout: f64,
    /// What to do.
    #[command(subcommand)]
    pub cmd: CtlCmd,
}

/// `vssd ctl` subcommands.
#[derive(Debug, Subcommand)]
pub enum CtlCmd {
    /// Wait until the daemon answers (up to --timeout): for scripts that
    /// start `vssd serve` in the background. Every listener is ready then.
    Wait,
    /// Drive counters, write amplification, latency and lateness, frontends
    /// and their TRIM audit.
    Stats {
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The drive's health as its controller family reported it (SMART
    /// attributes in `smartctl -A` style, or the NVMe health log), computed
    /// from the model's counters. On the SATA and NVMe buses the guest's
    /// own smartctl sees QEMU's emulated SMART, not this.
    Smart {
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Recent discards and write-zeroes as the drive received them: source,
    /// ranges, what each freed in the FTL.
    TrimLog {
        /// Keep printing new ones as they arrive (Ctrl-C to stop).
        #[arg(long)]
        follow: bool,
        /// Only the last N records (without --follow).
        #[arg(long, value_name = "N", default_value_t = 50)]
        last: usize,
        /// One JSON object per record.
        #[arg(long)]
        json: bool,
    },
    /// Record every request the drive receives to a trace file (vssd's
    /// binary format: `vssd trace convert` turns it into a fio iolog,
    /// `vssd sim` replays it with `read_iolog=`).
    Trace {
        /// start, stop or status.
        #[command(subcommand)]
        cmd: TraceCmd,
    },
    /// Back to a fresh drive (all data reads as zeros, FTL reset), like HDDErase.
    SecureErase {
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Age the drive in model time without touching data
    /// (steps run in this order: --wear, --trim-all, --fill, --random).
    /// Guest I/O goes on meanwhile; Ctrl-C cancels (what is done stays done).
    Precondition {
        /// Wear the NAND to PERCENT of its rated P/E cycles at once (every
        /// block, wear levelled; presets that go read-only at end of life
        /// do at 100).
        #[arg(long, value_name = "PERCENT")]
        wear: Option<f64>,
        /// TRIM the whole drive first.
        #[arg(long)]
        trim_all: bool,
        /// Sequential fill of the whole drive (only `seq`).
        #[arg(long, value_name = "seq")]
        fill: Option<String>,
        /// Write size of the fill.
        #[arg(long, value_name = "SIZE", default_value = "128k", value_parser = parse_size)]
        fill_bs: u64,
        /// Random writes of this size.
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        random: Option<u64>,
        /// Total random writes: a size (`64G`) or a multiple of the capacity (`2x`).
        #[arg(long, value_name = "AMOUNT", default_value = "1x")]
        amount: String,
        /// Seed for the random writes.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Inject faults (media errors at LBA ranges, wear-driven media
    /// errors and grown bad blocks, stalls, throttling), list and clear
    /// them; `fault list` also shows what the latest power cut lost.
    Fault {
        /// What to do.
        #[command(subcommand)]
        cmd: FaultCmd,
    },
    /// The injected faults, what they did, the power state and which LBA
    /// ranges the latest power cut lost (the same as `fault list`).
    Faults {
        /// Only the writes the latest power cut lost, one per line.
        #[arg(long)]
        lost: bool,
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Cut the drive's power: writes acknowledged but not yet durable are
    /// lost (unless the preset has power-loss protection), every NBD and
    /// vhost-user connection is closed, new ones are closed at once, and
    /// no request is taken until `power-on` (or --restart-after). Without
    /// a timing option the power goes now.
    PowerCut {
        /// The power goes as the Nth write from now arrives.
        #[arg(long, value_name = "N", conflicts_with_all = ["after_ms", "at", "random"])]
        after_writes: Option<u64>,
        /// The power goes T ms of drive time from now.
        #[arg(long, value_name = "T", conflicts_with_all = ["at", "random"])]
        after_ms: Option<u64>,
        /// The power goes at drive time SECONDS (the drive's clock, as
        /// `ctl fault list` shows it: "drive time").
        #[arg(long, value_name = "SECONDS", conflicts_with = "random")]
        at: Option<f64>,
        /// The power goes after a number of writes (1 to 1000) picked from SEED.
        #[arg(long, value_name = "SEED")]
        random: Option<u64>,
        /// Power on again by itself SECONDS of drive time after the cut.
        #[arg(long, value_name = "SECONDS")]
        restart_after: Option<f64>,
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Power the drive back on after a cut.
    PowerOn {
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `vssd ctl fault` subcommands.
#[derive(Debug, Subcommand)]
pub enum FaultCmd {
    /// Inject a fault (see docs/faults.md).
    Add {
        /// The fault.
        #[command(subcommand)]
        fault: FaultAdd,
        /// Print the reply as JSON.
        #[arg(long, global = true)]
        json: bool,
    },
    /// The injected faults and the errors and stalls they caused, the
    /// power state and what the latest power cut lost.
    List {
        /// Only the writes the latest power cut lost, one per line:
        /// offset, length, drive time acknowledged.
        #[arg(long)]
        lost: bool,
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove fault ID (see `ctl fault list`), or all of them.
    Clear {
        /// The fault's id; without it every fault is removed.
        id: Option<u64>,
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// The faults `vssd ctl fault add` injects.
#[derive(Debug, Subcommand)]
pub enum FaultAdd {
    /// Reads touching the range fail (unrecoverable read error: virtio-blk
    /// IOERR, NBD EIO); the rest of the drive reads as before.
    ReadError {
        /// Start of the range, bytes (a multiple of 512; suffixes as `4k`).
        #[arg(long, value_parser = parse_size)]
        offset: u64,
        /// Length of the range, bytes (a non-zero multiple of 512).
        #[arg(long, value_parser = parse_size)]
        length: u64,
    },
    /// Writes and write-zeroes touching the range fail, writing nothing.
    WriteError {
        /// Start of the range, bytes (a multiple of 512; suffixes as `4k`).
        #[arg(long, value_parser = parse_size)]
        offset: u64,
        /// Length of the range, bytes (a non-zero multiple of 512).
        #[arg(long, value_parser = parse_size)]
        length: u64,
    },
    /// The drive takes no command for --ms of drive time: once (now, or
    /// --after-ms from now) or every --every-ms.
    Stall {
        /// Length of the stall, ms of drive time.
        #[arg(long)]
        ms: u64,
        /// Repeat with this period, ms (the first stall one period from now).
        #[arg(long, value_name = "MS", conflicts_with = "after_ms")]
        every_ms: Option<u64>,
        /// Stall once, this long from now, ms.
        #[arg(long, value_name = "MS")]
        after_ms: Option<u64>,
    },
    /// Thermal throttling: reads and writes move at most --mb-s MB/s of
    /// drive time, from --after-ms on (default now), for --for-ms (default:
    /// until cleared).
    Throttle {
        /// The cap, MB/s (10^6 bytes/s; 1 to 100000).
        #[arg(long = "mb-s", value_name = "MB_S")]
        mb_s: u64,
        /// Start this long from now, ms.
        #[arg(long, value_name = "MS")]
        after_ms: Option<u64>,
        /// Last this long, ms.
        #[arg(long, value_name = "MS")]
        for_ms: Option<u64>,
    },
    /// Grown bad blocks: COUNT blocks fail now; their valid data is moved
    /// out, they leave service (the spare shrinks), SMART counts them.
    BadBlock {
        /// Blocks to retire (1 to 4096).
        #[arg(long, default_value_t = 1)]
        count: u32,
    },
    /// The NAND's wear models: uncorrectable reads at the rate its raw
    /// bit-error model gives for each block's wear and data age, and blocks
    /// failing their erase at a rate rising with wear; both --acceleration
    /// times as often (see docs/faults.md).
    MediaWear {
        /// Rate multiplier (1: as the models give; a fresh drive then
        /// practically never fails).
        #[arg(long, default_value_t = 1.0)]
        acceleration: f64,
        /// Days added to every block's data age (as if the drive had sat
        /// unpowered that long).
        #[arg(long, default_value_t = 0.0)]
        retention_days: f64,
    },
}

impl FaultAdd {
    pub(crate) fn spec(&self) -> FaultSpec {
        match *self {
            FaultAdd::ReadError { offset, length } => FaultSpec::ReadError { offset, length },
            FaultAdd::WriteError { offset, length } => FaultSpec::WriteError { offset, length },
            FaultAdd::Stall {
                ms,
                every_ms,
                after_ms,
            } => FaultSpec::Stall {
                ms,
                every_ms,
                after_ms,
            },
            FaultAdd::Throttle {
                mb_s,
                after_ms,
                for_ms,
            } => FaultSpec::Throttle {
                mb_s,
                after_ms,
                for_ms,
            },
            FaultAdd::BadBlock { count } => FaultSpec::BadBlock { count },
            FaultAdd::MediaWear {
                acceleration,
                retention_days,
            } => FaultSpec::MediaWear {
                acceleration,
                retention_days,
            },
        }
    }
}

/// `vssd ctl trace` subcommands.
#[derive(Debug, Subcommand)]
pub enum TraceCmd {
    /// Start recording to FILE (it must not exist; created mode 0600 by
    /// the daemon, so give a path the daemon can write).
    Start {
        /// The trace file.
        file: PathBuf,
        /// Stop recording when the file reaches this size (e.g. 512M, 4G).
        #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
        limit: Option<u64>,
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop recording and close the file.
    Stop {
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Whether a trace is being taken, its file, records and size.
    Status {
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// A size argument (`512M`, `4G`).
fn parse_size_arg(s: &str) -> Result<u64, String> {
    vssd_profile::size::parse_size(s).map_err(|e| e.to_string())
}
