//! The control socket server: a thread accepting local clients; each line
//! is one request, answered by one line. Bad input gets an error reply.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::thread;

use log::{debug, info, warn};
use serde_json::{Value, json};

use super::protocol::{CtlReply, CtlRequest, Step, parse_amount};
use crate::device::Device;
use crate::model::Precondition;

/// Longest accepted request line.
pub const MAX_LINE: u64 = 64 * 1024;

/// What the server knows beyond the device.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// Queues offered to the frontend.
    pub queues: u16,
    /// The vhost-user socket.
    pub socket: String,
}

/// Answer one request line.
pub fn handle_line(device: &Device, info: &ServerInfo, line: &str) -> CtlReply {
    let req: CtlRequest = match serde_json::from_str(line) {
        Ok(r) => r,
        Err(e) => return CtlReply::err(format!("malformed request: {e}")),
    };
    match req {
        CtlRequest::Stats => CtlReply::ok(stats_json(device, info)),
        CtlRequest::SecureErase => match device.secure_erase() {
            Ok(()) => {
                info!("secure erase: drive reset to fresh, data zeroed");
                CtlReply::ok(json!({ "erased": true, "counters": device.counters() }))
            }
            Err(e) => CtlReply::err(format!("secure erase failed: {e}")),
        },
        CtlRequest::Precondition { steps, seed } => {
            let cap = device.capacity();
            let mut model_steps = Vec::new();
            for s in &steps {
                let step = match s {
                    Step::TrimAll => Precondition::TrimAll,
                    Step::FillSeq { bs } => {
                        if *bs == 0 || bs % 512 != 0 || *bs > cap {
                            return CtlReply::err(format!(
                                "fill-seq bs {bs} must be a non-zero multiple of 512"
                            ));
                        }
                        Precondition::FillSequential { bs: *bs }
                    }
                    Step::Random { bs, amount } => {
                        if *bs == 0 || bs % 512 != 0 || *bs > cap {
                            return CtlReply::err(format!(
                                "random bs {bs} must be a non-zero multiple of 512"
                            ));
                        }
                        match parse_amount(amount, cap, *bs) {
                            Ok(a) => Precondition::Random { bs: *bs, amount: a },
                            Err(e) => return CtlReply::err(format!("random amount: {e}")),
                        }
                    }
                };
                model_steps.push(step);
            }
            let model_ns = device.precondition(&model_steps, seed);
            info!(
                "precondition {steps:?}: {:.1} s of model time",
                model_ns as f64 / 1e9
            );
            CtlReply::ok(json!({ "model_time_ns": model_ns, "counters": device.counters() }))
        }
    }
}

/// The `stats` result.
pub fn stats_json(device: &Device, info: &ServerInfo) -> Value {
    let st = &device.stats;
    let ops: serde_json::Map<String, Value> = st
        .ops_report()
        .into_iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                serde_json::to_value(v).unwrap_or(Value::Null),
            )
        })
        .collect();
    json!({
        "drive": {
            "profile": device.profile().name,
            "capacity": device.capacity(),
            "backing": device.store().path().map(|p| p.display().to_string()),
            "allocated_bytes": device.store().allocated_bytes(),
            "serial": String::from_utf8_lossy(&device.serial()),
        },
        "connection": {
            "socket": info.socket,
            "connected": st.connected.load(Relaxed),
            "connections": st.connections.load(Relaxed),
            "queues": info.queues,
            "in_flight": st.in_flight.load(Relaxed),
            "rejected": st.rejected.load(Relaxed),
        },
        "counters": device.counters(),
        "lateness": st.lateness.summary(),
        "ops": ops,
    })
}

fn serve_client(stream: UnixStream, device: &Device, info: &ServerInfo) -> std::io::Result<()> {
    let mut w = stream.try_clone()?;
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
                Ok(s) if s.trim().is_empty() => continue,
                Ok(s) => handle_line(device, info, s.trim()),
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
    info: ServerInfo,
) -> std::io::Result<thread::JoinHandle<()>> {
    thread::Builder::new()
        .name("vssd-ctl".into())
        .spawn(move || {
            for conn in listener.incoming() {
                match conn {
                    Ok(stream) => {
                        let device = device.clone();
                        let info = info.clone();
                        let r = thread::Builder::new().name("vssd-ctl-client".into()).spawn(
                            move || {
                                if let Err(e) = serve_client(stream, &device, &info) {
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
                        thread::sleep(std::time::Duration::from_millis(100));
                    }
                }
            }
        })
}
