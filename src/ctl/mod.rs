//! `vssd ctl`: talk to a running `vssd serve` over its control socket.
//!
//! [`protocol`] defines the JSON lines, [`server`] answers them inside the
//! daemon, and this module is the command-line client.

pub mod protocol;
pub mod server;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::Value;
use thiserror::Error;

use self::protocol::{CtlReply, CtlRequest, Step};
use crate::size::{format_size, parse_size};

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
    /// The connection failed mid-request.
    #[error("control socket I/O")]
    Io(#[from] std::io::Error),
    /// The daemon's reply is not valid.
    #[error("invalid reply from the daemon: {0}")]
    Protocol(String),
    /// The daemon refused the request.
    #[error("the daemon refused the request: {0}")]
    Refused(String),
    /// The command line is inconsistent.
    #[error("{0}")]
    Usage(String),
}

/// `vssd ctl` arguments.
#[derive(Debug, Args)]
pub struct CtlArgs {
    /// The daemon's control socket (`vssd serve --control PATH`).
    #[arg(long, value_name = "PATH")]
    pub control: PathBuf,
    /// What to do.
    #[command(subcommand)]
    pub cmd: CtlCmd,
}

/// `vssd ctl` subcommands.
#[derive(Debug, Subcommand)]
pub enum CtlCmd {
    /// Model counters, latency and lateness percentiles, connection state.
    Stats {
        /// Print the raw JSON reply.
        #[arg(long)]
        json: bool,
    },
    /// Back to a fresh drive (all data reads as zeros, FTL reset), like HDDErase.
    SecureErase {
        /// Print the raw JSON reply.
        #[arg(long)]
        json: bool,
    },
    /// Age the drive in model time without touching data
    /// (steps run in this order: --trim-all, --fill, --random).
    Precondition {
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
        /// Print the raw JSON reply.
        #[arg(long)]
        json: bool,
    },
}

/// Send one request, return the result (or the daemon's error).
pub fn request(control: &Path, req: &CtlRequest) -> Result<Value, CtlError> {
    let mut s = UnixStream::connect(control).map_err(|source| CtlError::Connect {
        path: control.into(),
        source,
    })?;
    let mut line = serde_json::to_vec(req).map_err(|e| CtlError::Protocol(e.to_string()))?;
    line.push(b'\n');
    s.write_all(&line)?;
    let mut r = BufReader::new(s);
    let mut reply = String::new();
    r.read_line(&mut reply)?;
    let reply: CtlReply =
        serde_json::from_str(&reply).map_err(|e| CtlError::Protocol(e.to_string()))?;
    if reply.ok {
        Ok(reply.result.unwrap_or(Value::Null))
    } else {
        Err(CtlError::Refused(reply.error.unwrap_or_default()))
    }
}

/// Run `vssd ctl`.
pub fn run(args: CtlArgs) -> Result<(), CtlError> {
    match args.cmd {
        CtlCmd::Stats { json } => {
            let v = request(&args.control, &CtlRequest::Stats)?;
            if json {
                println!("{v}");
            } else {
                print!("{}", format_stats(&v));
            }
        }
        CtlCmd::SecureErase { json } => {
            let v = request(&args.control, &CtlRequest::SecureErase)?;
            if json {
                println!("{v}");
            } else {
                println!("secure erase done: the drive is fresh and reads as zeros");
            }
        }
        CtlCmd::Precondition {
            trim_all,
            fill,
            fill_bs,
            random,
            amount,
            seed,
            json,
        } => {
            let mut steps = Vec::new();
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
                    "precondition: give --trim-all, --fill seq and/or --random SIZE".into(),
                ));
            }
            let v = request(&args.control, &CtlRequest::Precondition { steps, seed })?;
            if json {
                println!("{v}");
            } else {
                let ns = v["model_time_ns"].as_u64().unwrap_or(0);
                let c = &v["counters"];
                println!(
                    "preconditioned: {:.1} s of model time; write amplification {:.2}, free blocks {}/{}",
                    ns as f64 / 1e9,
                    c["write_amplification"].as_f64().unwrap_or(0.0),
                    c["free_blocks"],
                    c["total_blocks"]
                );
            }
        }
    }
    Ok(())
}

fn us(v: &Value) -> String {
    let ns = v.as_f64().unwrap_or(0.0);
    if ns >= 1e6 {
        format!("{:.2}ms", ns / 1e6)
    } else {
        format!("{:.1}us", ns / 1e3)
    }
}

/// The human-readable `ctl stats` table.
pub fn format_stats(v: &Value) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let d = &v["drive"];
    let c = &v["connection"];
    let _ = writeln!(
        o,
        "drive       {}  {}  serial {}  data {} ({} allocated)",
        d["profile"].as_str().unwrap_or("?"),
        format_size(d["capacity"].as_u64().unwrap_or(0)),
        d["serial"].as_str().unwrap_or("?"),
        d["backing"].as_str().unwrap_or("in memory"),
        format_size(d["allocated_bytes"].as_u64().unwrap_or(0)),
    );
    let _ = writeln!(
        o,
        "frontend    {}  ({} connections so far, {} queues, {} in flight, {} rejected)",
        if c["connected"].as_bool().unwrap_or(false) {
            "connected"
        } else {
            "waiting for QEMU"
        },
        c["connections"],
        c["queues"],
        c["in_flight"],
        c["rejected"],
    );
    let _ = writeln!(o, "\nmodel counters");
    if let Some(m) = v["counters"].as_object() {
        for (k, val) in m {
            let shown = match val.as_f64() {
                Some(f) if val.is_f64() => format!("{f:.3}"),
                _ => val.to_string(),
            };
            let _ = writeln!(o, "  {k:<24} {shown}");
        }
    }
    let _ = writeln!(
        o,
        "\n{:<13} {:>9} {:>10} {:>6}   {:>9} {:>9} {:>9}   {:>9} {:>9} {:>9}",
        "op", "cmds", "bytes", "errors", "model p50", "p99", "max", "guest p50", "p99", "max"
    );
    if let Some(ops) = v["ops"].as_object() {
        for (k, r) in ops {
            if r["cmds"].as_u64().unwrap_or(0) == 0 {
                continue;
            }
            let (m, g) = (&r["modelled"], &r["delivered"]);
            let _ = writeln!(
                o,
                "{:<13} {:>9} {:>10} {:>6}   {:>9} {:>9} {:>9}   {:>9} {:>9} {:>9}",
                k,
                r["cmds"],
                format_size(r["bytes"].as_u64().unwrap_or(0)),
                r["errors"],
                us(&m["p50_ns"]),
                us(&m["p99_ns"]),
                us(&m["max_ns"]),
                us(&g["p50_ns"]),
                us(&g["p99_ns"]),
                us(&g["max_ns"]),
            );
        }
    }
    let l = &v["lateness"];
    let _ = writeln!(
        o,
        "\nlateness (delivered - modelled completion), {} completions:\n  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        l["count"],
        us(&l["p50_ns"]),
        us(&l["p90_ns"]),
        us(&l["p99_ns"]),
        us(&l["p999_ns"]),
        us(&l["max_ns"]),
    );
    o
}
