//! The control socket server: a thread accepting local clients; each line
//! is one request, answered by one line (a precondition may send progress
//! lines first). Bad input gets an error reply and the connection stays
//! usable.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use super::protocol::{
    CtlReply, CtlRequest, EraseResult, FaultAddResult, FaultClearResult, IdleResult,
    PreconditionResult, Progress, ProgressLine, Step, TrimLogResult, model_steps,
};
use vssd_device::Device;

/// Longest accepted request line.
pub const MAX_LINE: u64 = 64 * 1024;

/// Shortest interval between two progress lines.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// Whether the peer of `stream` has hung up (without consuming input).
fn peer_gone(stream: &UnixStream) -> bool {
    let mut p = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

/// Answer one request line. Progress lines (if asked for) go to `out`;
/// `cancelled` says whether the client has gone away.
pub fn handle_line(
    device: &Device,
    line: &str,
    out: &mut dyn Write,
    cancelled: &dyn Fn() -> bool,
) -> CtlReply {
    let req: CtlRequest = match serde_json::from_str(line) {
        Ok(r) => r,
        Err(e) => return CtlReply::err(format!("malformed request: {e}")),
    };
    match req {
        CtlRequest::Stats => CtlReply::ok(&device.report()),
        CtlRequest::Smart => CtlReply::ok(&device.smart()),
        CtlRequest::TrimLog { after, max } => {
            let (records, lost) = device.trim_log(after, max.min(10_000));
            CtlReply::ok(&TrimLogResult { records, lost })
        }
        CtlRequest::Idle { ns } => match device.idle(ns) {
            Ok(()) => CtlReply::ok(&IdleResult {
                model_ns: ns,
                counters: device.counters(),
            }),
            Err(e) => CtlReply::err(format!("idle failed: {e}")),
        },
        CtlRequest::TraceStart { path, limit } => {
            let p = std::path::Path::new(&path);
            if !p.is_absolute() {
                return CtlReply::err(format!(
                    "trace path {path:?} is not absolute (the daemon's working directory is not the client's)"
                ));
            }
            let limit = limit.unwrap_or(vssd_device::capture::DEFAULT_LIMIT);
            match device.trace_start(p, limit) {
                Ok(()) => CtlReply::ok(&device.trace_status()),
                Err(e) => {
                    let mut msg = format!("cannot start the trace: {e}");
                    let mut src = std::error::Error::source(&e);
                    while let Some(c) = src {
                        msg.push_str(&format!(": {c}"));
                        src = c.source();
                    }
                    CtlReply::err(msg)
                }
            }
        }
        CtlRequest::TraceStop => {
            let st = device.trace_stop();
            if let Some(p) = &st.path {
                info!(
                    "trace {p} closed: {} requests, {} not recorded",
                    st.records, st.dropped
                );
            }
            CtlReply::ok(&st)
        }
        CtlRequest::TraceStatus => CtlReply::ok(&device.trace_status()),
        CtlRequest::FaultAdd { fault } => match device.add_fault(fault) {
            Ok(fault) => CtlReply::ok(&FaultAddResult { fault }),
            Err(e) => CtlReply::err(e.to_string()),
        },
        CtlRequest::FaultList => CtlReply::ok(&device.faults()),
        CtlRequest::PowerCut {
            trigger,
            restart_after_ms,
        } => match device.power_cut(trigger, restart_after_ms) {
            Ok(r) => CtlReply::ok(&r),
            Err(e) => CtlReply::err(e.to_string()),
        },
        CtlRequest::PowerOn => match device.power_on() {
            Ok(()) => CtlReply::ok(&device.power_report()),
            Err(e) => CtlReply::err(e.to_string()),
        },
        CtlRequest::FaultClear { id } => match device.clear_faults(id) {
            Ok(cleared) => CtlReply::ok(&FaultClearResult { cleared }),
            Err(e) => CtlReply::err(e.to_string()),
        },
        CtlRequest::SecureErase => match device.secure_erase() {
            Ok(()) => {
                info!("secure erase: drive reset to fresh, data zeroed");
                CtlReply::ok(&EraseResult {
                    erased: true,
                    counters: device.counters(),
                })
            }
            Err(e) => CtlReply::err(format!("secure erase failed: {e}")),
        },
        CtlRequest::Precondition {
            steps,
            seed,
            progress,
        } => {
            let (wear, writes): (Vec<Step>, Vec<Step>) = steps
                .iter()
                .cloned()
                .partition(|s| matches!(s, Step::Wear { .. }));
            let model = match model_steps(&writes, device.capacity()) {
                Ok(m) => m,
                Err(e) => return CtlReply::err(e),
            };
            for w in &wear {
                if let Step::Wear { percent } = w
                    && let Err(e) = device.age(*percent)
                {
                    return CtlReply::err(e);
                }
            }
            let mut last = Instant::now();
            let mut write_failed = false;
            let r = device.precondition(&model, seed, &mut |done, total| {
                if progress && !write_failed && last.elapsed() >= PROGRESS_EVERY {
                    last = Instant::now();
                    let p = ProgressLine {
                        progress: Progress {
                            done_bytes: done,
                            total_bytes: total,
                        },
                    };
                    let mut l = serde_json::to_vec(&p).unwrap_or_default();
                    l.push(b'\n');
                    write_failed = out.write_all(&l).and_then(|()| out.flush()).is_err();
                }
                !(write_failed || cancelled())
            });
            let r = match r {
                Ok(r) => r,
                Err(e) => return CtlReply::err(format!("precondition failed: {e}")),
            };
            if r.cancelled {
                info!(
                    "precondition cancelled by the client after {:.1} s of model time",
                    r.model_ns as f64 / 1e9
                );
            } else {
                info!(
                    "precondition {steps:?}: {:.1} s of model time",
                    r.model_ns as f64 / 1e9
                );
            }
            CtlReply::ok(&PreconditionResult {
                model_time_ns: r.model_ns,
                cancelled: r.cancelled,
                counters: device.counters(),
            })
        }
    }
}

fn serve_client(stream: UnixStream, device: &Device) -> std::io::Result<()> {
    let mut w = stream.try_clone()?;
    let probe = stream.try_clone()?;
    let mut r = BufReader::new(stream);
    loop {
        let mut buf = Vec::new();
        let n = (&mut r).take(MAX_LINE).read_until(b'\n', &mut buf)?;
        if n == 0 {
            return Ok(());
        }
        let too_long = buf.last() != Some(&b'\n') && n as u64 >= MAX_LINE;
        let reply = if too_long {
            CtlReply::err(format!("request line longer than {MAX_LINE} bytes"))
        } else {
            match std::str::from_utf8(&buf) {
                Ok(s) if s.trim().is_empty() => CtlReply::err(
                    "empty request: send one JSON object per line, e.g. {\"cmd\":\"stats\"}",
                ),
                Ok(s) => handle_line(device, s.trim(), &mut w, &|| peer_gone(&probe)),
                Err(_) => CtlReply::err("request is not UTF-8"),
            }
        };
        let mut out = serde_json::to_vec(&reply).unwrap_or_else(|_| b"{\"ok\":false}".to_vec());
        out.push(b'\n');
        w.write_all(&out)?;
        if too_long {
            return Ok(());
        }
    }
}

/// Serve `listener` on a background thread for the life of the process.
pub fn spawn(
    listener: UnixListener,
    device: Arc<Device>,
) -> std::io::Result<thread::JoinHandle<()>> {
    thread::Builder::new()
        .name("vssd-ctl".into())
        .spawn(move || {
            for conn in listener.incoming() {
                match conn {
                    Ok(stream) => {
                        let device = device.clone();
                        let r = thread::Builder::new().name("vssd-ctl-client".into()).spawn(
                            move || {
                                if let Err(e) = serve_client(stream, &device) {
                                    debug!("control client: {e}");
                                }
                            },
                        );
                        if let Err(e) = r {
                            warn!("control socket: cannot start client thread: {e}");
                        }
                    }
                    Err(e) => {
                        warn!("control socket accept: {e}");
                        thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        })
}
