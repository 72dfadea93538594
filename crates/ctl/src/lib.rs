//! `vssd ctl`: talk to a running `vssd serve` over its control socket.
//!
//! [`protocol`] defines the JSON lines and the typed results, [`server`]
//! answers them inside the daemon, [`format`] prints them, and this module
//! is the command-line client.

pub mod format;
pub mod protocol;
pub mod server;

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use serde::de::DeserializeOwned;
use serde_json::Value;
use thiserror::Error;

use self::protocol::{
    CtlReply, CtlRequest, CutTrigger, EraseResult, FaultAddResult, FaultClearResult, FaultReport,
    FaultSpec, PowerCutResult, PowerReport, PreconditionResult, ProgressLine, SmartReport,
    StatsReport, Step, TraceStatus, TrimLogResult,
};
use vssd_profile::size::parse_size;

/// Errors of the control client.
#[derive(Debug, Error)]
pub enum CtlError {
    /// No daemon at the socket.
    #[error(
        "cannot connect to control socket {path} (is `vssd serve` running with --control {path}?)"
    )]
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The socket answered, but not as a control socket.
    #[error(
        "{path} is not vssd's control socket ({what}); give ctl the daemon's control socket with --control (by default the vhost-user socket's or the first unix NBD socket's path with .ctl added)"
    )]
    NotControl {
        /// The socket.
        path: PathBuf,
        /// What it did instead.
        what: &'static str,
    },
    /// The daemon did not answer in time.
    #[error("no reply from the daemon within {0:?} (raise --timeout, or check the daemon's log)")]
    Timeout(Duration),
    /// The connection failed mid-request.
    #[error("control socket I/O")]
    Io(#[source] std::io::Error),
    /// The daemon's reply is not valid.
    #[error("invalid reply from the daemon: {0}")]
    Protocol(String),
    /// The daemon refused the request.
    #[error("the daemon refused the request: {0}")]
    Refused(String),
    /// The command line is inconsistent.
    #[error("{0}")]
    Usage(String),
    /// Printing the result failed.
    #[error("writing the output")]
    Output(#[source] vssd_common::cli_out::StdoutError),
}

impl From<std::io::Error> for CtlError {
    fn from(e: std::io::Error) -> Self {
        CtlError::Io(e)
    }
}

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
    fn spec(&self) -> FaultSpec {
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

/// A connection to a daemon's control socket.
pub struct Client {
    w: UnixStream,
    r: BufReader<UnixStream>,
    timeout: Duration,
    path: PathBuf,
}

impl Client {
    /// Connect, with `timeout` for each reply line.
    pub fn connect(control: &Path, timeout: Duration) -> Result<Client, CtlError> {
        let s = UnixStream::connect(control).map_err(|source| CtlError::Connect {
            path: control.into(),
            source,
        })?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        Ok(Client {
            r: BufReader::new(s.try_clone()?),
            w: s,
            timeout,
            path: control.into(),
        })
    }

    fn send(&mut self, req: &CtlRequest) -> Result<(), CtlError> {
        let mut line = serde_json::to_vec(req).map_err(|e| CtlError::Protocol(e.to_string()))?;
        line.push(b'\n');
        self.w.write_all(&line)?;
        Ok(())
    }

    fn line(&mut self) -> Result<String, CtlError> {
        let not_control = |what| CtlError::NotControl {
            path: self.path.clone(),
            what,
        };
        let timeout = |e: &std::io::Error| {
            matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            )
        };
        // What arrives first tells what is at the other end: an NBD server
        // greets before it is asked; a vhost-user backend drops a client
        // whose message it cannot parse.
        // A signal landing during the wait is not an answer: wait again
        // (`fill_buf`, unlike `read_line`, hands EINTR up).
        let first = loop {
            match self.r.fill_buf() {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r.map(|b| b[..b.len().min(8)].to_vec()),
            }
        };
        match first {
            Ok(b) if b.is_empty() => {
                return Err(not_control("it closed the connection without a reply"));
            }
            Ok(b) if b.starts_with(b"NBDMAGIC") => {
                return Err(not_control("it greets like an NBD server"));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Err(not_control("it reset the connection without a reply"));
            }
            Err(e) if timeout(&e) => return Err(CtlError::Timeout(self.timeout)),
            Err(e) => return Err(e.into()),
        }
        let mut l = String::new();
        match self.r.read_line(&mut l) {
            Ok(0) => Err(CtlError::Protocol(
                "the daemon closed the connection".into(),
            )),
            Ok(_) => Ok(l),
            Err(e) if timeout(&e) => Err(CtlError::Timeout(self.timeout)),
            Err(e) => Err(e.into()),
        }
    }

    fn finish(line: &str) -> Result<Value, CtlError> {
        let reply: CtlReply =
            serde_json::from_str(line).map_err(|e| CtlError::Protocol(e.to_string()))?;
        if reply.ok {
            Ok(reply.result.unwrap_or(Value::Null))
        } else {
            Err(CtlError::Refused(reply.error.unwrap_or_default()))
        }
    }

    /// Send one request and return its result as JSON. Progress lines, if
    /// any, go to `on_progress`.
    pub fn call(
        &mut self,
        req: &CtlRequest,
        on_progress: &mut dyn FnMut(&ProgressLine),
    ) -> Result<Value, CtlError> {
        self.send(req)?;
        loop {
            let l = self.line()?;
            if let Ok(p) = serde_json::from_str::<ProgressLine>(&l) {
                on_progress(&p);
                continue;
            }
            return Self::finish(&l);
        }
    }

    /// [`Self::call`] with the result decoded as `T`.
    pub fn call_typed<T: DeserializeOwned>(
        &mut self,
        req: &CtlRequest,
        on_progress: &mut dyn FnMut(&ProgressLine),
    ) -> Result<T, CtlError> {
        let v = self.call(req, on_progress)?;
        serde_json::from_value(v).map_err(|e| CtlError::Protocol(e.to_string()))
    }
}

/// Default reply timeout of [`request`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Send one request, return the result (or the daemon's error).
pub fn request(control: &Path, req: &CtlRequest) -> Result<Value, CtlError> {
    Client::connect(control, DEFAULT_TIMEOUT)?.call(req, &mut |_| {})
}

/// The drive's statistics.
pub fn stats(control: &Path) -> Result<StatsReport, CtlError> {
    Client::connect(control, DEFAULT_TIMEOUT)?.call_typed(&CtlRequest::Stats, &mut |_| {})
}

fn control_path(args: &CtlArgs) -> Result<PathBuf, CtlError> {
    match (&args.control, &args.socket) {
        (Some(c), _) => Ok(c.clone()),
        (None, Some(s)) => Ok(PathBuf::from(format!("{}.ctl", s.display()))),
        (None, None) => Err(CtlError::Usage(
            "say which daemon: --control PATH (or --socket SOCKET for SOCKET.ctl, or VSSD_CONTROL)"
                .into(),
        )),
    }
}

fn print_json(v: &impl serde::Serialize) -> Result<(), CtlError> {
    let mut s = serde_json::to_string(v).map_err(|e| CtlError::Protocol(e.to_string()))?;
    s.push('\n');
    print_text(&s)
}

fn print_text(s: &str) -> Result<(), CtlError> {
    vssd_common::cli_out::print(s).map_err(CtlError::Output)
}

/// Retry connecting and asking for stats until the daemon answers.
fn wait_ready(control: &Path, timeout: Duration) -> Result<(), CtlError> {
    let start = std::time::Instant::now();
    loop {
        let r = Client::connect(control, timeout)
            .and_then(|mut c| c.call(&CtlRequest::Stats, &mut |_| {}));
        match r {
            Ok(_) => return Ok(()),
            Err(e @ (CtlError::Connect { .. } | CtlError::Io(_))) => {
                if start.elapsed() >= timeout {
                    return Err(e);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(e),
        }
    }
}

fn trim_log(client: &mut Client, follow: bool, last: usize, json: bool) -> Result<(), CtlError> {
    let fetch = |client: &mut Client, after: u64| -> Result<TrimLogResult, CtlError> {
        client.call_typed(&CtlRequest::TrimLog { after, max: 10_000 }, &mut |_| {})
    };
    // Everything still in the ring, of which the last `last` are shown.
    let mut r = fetch(client, 0)?;
    let mut next = r.records.last().map(|x| x.seq).unwrap_or(0);
    while r.records.len() == 10_000 {
        let more = fetch(client, next)?;
        if more.records.is_empty() {
            break;
        }
        next = more.records.last().map(|x| x.seq).unwrap_or(next);
        r.records.extend(more.records);
    }
    let skip = if follow {
        r.records.len()
    } else {
        r.records.len().saturating_sub(last)
    };
    let mut header = !json;
    let show = |records: &[protocol::TrimRecord], header: &mut bool| -> Result<(), CtlError> {
        let mut text = String::new();
        for rec in records {
            if json {
                text.push_str(
                    &serde_json::to_string(rec).map_err(|e| CtlError::Protocol(e.to_string()))?,
                );
                text.push('\n');
            } else {
                if *header {
                    text.push_str(&format::trim_header());
                    *header = false;
                }
                text.push_str(&format::trim_record(rec));
            }
        }
        print_text(&text)
    };
    if !follow {
        if r.records.is_empty() && !json {
            return print_text("no discards received yet\n");
        }
        return show(&r.records[skip..], &mut header);
    }
    if !json {
        print_text("waiting for discards (Ctrl-C to stop)\n")?;
    }
    loop {
        std::thread::sleep(Duration::from_millis(250));
        let more = fetch(client, next)?;
        if more.lost > 0 && !json {
            print_text(&format!(
                "({} records dropped before they could be shown)\n",
                more.lost
            ))?;
        }
        if let Some(l) = more.records.last() {
            next = l.seq;
        }
        show(&more.records, &mut header)?;
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

/// Seconds given to `name`: a finite number from 0 to a day (86400).
fn check_seconds(name: &str, v: f64) -> Result<(), CtlError> {
    if v.is_finite() && (0.0..=86_400.0).contains(&v) {
        Ok(())
    } else {
        Err(CtlError::Usage(format!(
            "{name} {v}: seconds from 0 to 86400 (e.g. 2.5)"
        )))
    }
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    vssd_profile::size::parse_size(s).map_err(|e| e.to_string())
}

fn fault(client: &mut Client, cmd: FaultCmd) -> Result<(), CtlError> {
    match cmd {
        FaultCmd::Add { fault, json } => {
            // Checked here too: JSON has no NaN or infinity to send.
            if let FaultAdd::MediaWear {
                acceleration,
                retention_days,
            } = fault
                && !(acceleration.is_finite() && retention_days.is_finite())
            {
                return Err(CtlError::Usage(format!(
                    "media-wear: --acceleration {acceleration} must be from 1 to 1e12 and --retention-days {retention_days} from 0 to 36500"
                )));
            }
            let r: FaultAddResult = client.call_typed(
                &CtlRequest::FaultAdd {
                    fault: fault.spec(),
                },
                &mut |_| {},
            )?;
            if json {
                print_json(&r)
            } else {
                print_text(&format!("added {}\n", format::fault(&r.fault)))
            }
        }
        FaultCmd::List { lost, json } => {
            let r: FaultReport = client.call_typed(&CtlRequest::FaultList, &mut |_| {})?;
            match (lost, json) {
                (true, true) => print_json(&r.power.last_cut.map(|c| c.lost).unwrap_or_default()),
                (true, false) => print_text(&format::lost_writes(&r.power)),
                (false, true) => print_json(&r),
                (false, false) => print_text(&format::faults(&r)),
            }
        }
        FaultCmd::Clear { id, json } => {
            let r: FaultClearResult =
                client.call_typed(&CtlRequest::FaultClear { id }, &mut |_| {})?;
            if json {
                print_json(&r)
            } else {
                print_text(&format!("{} cleared\n", format::fault_count(r.cleared)))
            }
        }
    }
}

/// Run `vssd ctl`.
pub fn run(args: CtlArgs) -> Result<(), CtlError> {
    if !(args.timeout.is_finite() && args.timeout > 0.0 && args.timeout <= 86_400.0) {
        return Err(CtlError::Usage(format!(
            "--timeout {} must be between 0 and 86400 seconds",
            args.timeout
        )));
    }
    let control = control_path(&args)?;
    let timeout = Duration::from_secs_f64(args.timeout);
    if let CtlCmd::Wait = args.cmd {
        return wait_ready(&control, timeout);
    }
    let mut client = Client::connect(&control, timeout)?;
    match args.cmd {
        CtlCmd::Wait => {}
        CtlCmd::Stats { json } => {
            let r: StatsReport = client.call_typed(&CtlRequest::Stats, &mut |_| {})?;
            if json {
                print_json(&r)?;
            } else {
                print_text(&format::stats(&r))?;
            }
        }
        CtlCmd::Smart { json } => {
            let r: SmartReport = client.call_typed(&CtlRequest::Smart, &mut |_| {})?;
            if json {
                print_json(&r)?;
            } else {
                print_text(&format::smart(&r))?;
            }
        }
        CtlCmd::TrimLog { follow, last, json } => {
            trim_log(&mut client, follow, last, json)?;
        }
        CtlCmd::Trace { cmd } => {
            let (req, json) = match cmd {
                TraceCmd::Start { file, limit, json } => {
                    let abs = if file.is_absolute() {
                        file
                    } else {
                        std::env::current_dir()?.join(file)
                    };
                    let path = abs.to_str().ok_or_else(|| {
                        CtlError::Usage(format!("{}: not a UTF-8 path", abs.display()))
                    })?;
                    (
                        CtlRequest::TraceStart {
                            path: path.to_string(),
                            limit,
                        },
                        json,
                    )
                }
                TraceCmd::Stop { json } => (CtlRequest::TraceStop, json),
                TraceCmd::Status { json } => (CtlRequest::TraceStatus, json),
            };
            let r: TraceStatus = client.call_typed(&req, &mut |_| {})?;
            if json {
                print_json(&r)?;
            } else {
                print_text(&format::trace_status(&r))?;
            }
        }
        CtlCmd::Fault { cmd } => fault(&mut client, cmd)?,
        CtlCmd::Faults { lost, json } => fault(&mut client, FaultCmd::List { lost, json })?,
        CtlCmd::PowerCut {
            after_writes,
            after_ms,
            at,
            random,
            restart_after,
            json,
        } => {
            for (name, v) in [("--at", at), ("--restart-after", restart_after)] {
                if let Some(v) = v {
                    check_seconds(name, v)?;
                }
            }
            let ms = |s: f64| (s * 1000.0).round() as u64;
            let trigger = match (after_writes, after_ms, at, random) {
                (Some(writes), ..) => CutTrigger::AfterWrites { writes },
                (_, Some(ms), ..) => CutTrigger::AfterMs { ms },
                (_, _, Some(s), _) => CutTrigger::At { ms: ms(s) },
                (.., Some(seed)) => CutTrigger::Random { seed },
                _ => CutTrigger::Now,
            };
            let r: PowerCutResult = client.call_typed(
                &CtlRequest::PowerCut {
                    trigger,
                    restart_after_ms: restart_after.map(ms),
                },
                &mut |_| {},
            )?;
            if json {
                print_json(&r)?;
            } else {
                print_text(&format::power_cut(&r))?;
            }
        }
        CtlCmd::PowerOn { json } => {
            let r: PowerReport = client.call_typed(&CtlRequest::PowerOn, &mut |_| {})?;
            if json {
                print_json(&r)?;
            } else {
                print_text("power on: the drive takes requests and connections again\n")?;
            }
        }
        CtlCmd::SecureErase { json } => {
            let r: EraseResult = client.call_typed(&CtlRequest::SecureErase, &mut |_| {})?;
            if json {
                print_json(&r)?;
            } else {
                print_text("secure erase done: the drive is fresh and reads as zeros\n")?;
            }
        }
        CtlCmd::Precondition {
            wear,
            trim_all,
            fill,
            fill_bs,
            random,
            amount,
            seed,
            json,
        } => {
            let mut steps = Vec::new();
            if let Some(percent) = wear {
                // Checked here too: JSON has no NaN or infinity to send.
                if !(percent.is_finite() && percent > 0.0 && percent <= 1000.0) {
                    return Err(CtlError::Usage(format!(
                        "--wear {percent} must be in (0, 1000] percent"
                    )));
                }
                steps.push(Step::Wear { percent });
            }
            if trim_all {
                steps.push(Step::TrimAll);
            }
            match fill.as_deref() {
                None => {}
                Some("seq") | Some("sequential") => steps.push(Step::FillSeq { bs: fill_bs }),
                Some(o) => {
                    return Err(CtlError::Usage(format!(
                        "--fill {o:?}: only `seq` is supported"
                    )));
                }
            }
            if let Some(bs) = random {
                steps.push(Step::Random { bs, amount });
            }
            if steps.is_empty() {
                return Err(CtlError::Usage(
                    "precondition: give --wear PERCENT, --trim-all, --fill seq and/or --random SIZE"
                        .into(),
                ));
            }
            let names: Vec<String> = steps.iter().map(format::step_name).collect();
            let bar = (!json && std::io::stderr().is_terminal())
                .then(|| format::precondition_bar(&names));
            let r: PreconditionResult = client.call_typed(
                &CtlRequest::Precondition {
                    steps,
                    seed,
                    progress: true,
                },
                &mut |p| {
                    if let Some(b) = &bar {
                        format::update_bar(b, &p.progress);
                    }
                },
            )?;
            if let Some(b) = bar {
                b.finish_and_clear();
            }
            if json {
                print_json(&r)?;
            } else {
                print_text(&format::precondition(&r))?;
            }
        }
    }
    Ok(())
}
