//! The HTTP side of `--metrics`: a minimal one-request-per-connection
//! server for `GET /metrics`, up to [`MAX_SCRAPES`] requests at once, each
//! with a deadline for the whole request.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use super::render;
use vssd_device::Device;

/// Scrapes served at once.
const MAX_SCRAPES: usize = 8;

/// How long a client may take to send its whole request.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// Errors setting up the metrics listener.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// Not a loopback address, and not allowed.
    #[error(
        "--metrics {0} is not a loopback address: anyone who reaches it can read the drive's \
         statistics; add --metrics-listen-any if that is wanted"
    )]
    NotLoopback(SocketAddr),
    /// Binding failed.
    #[error("cannot listen on {addr} for metrics")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// Serve `GET /metrics` on `addr` on a thread for the life of the process.
pub fn spawn(
    addr: SocketAddr,
    any: bool,
    device: &Arc<Device>,
) -> Result<SocketAddr, MetricsError> {
    if !addr.ip().is_loopback() && !any {
        return Err(MetricsError::NotLoopback(addr));
    }
    let l = TcpListener::bind(addr).map_err(|source| MetricsError::Bind { addr, source })?;
    let bound = l.local_addr().unwrap_or(addr);
    let weak = Arc::downgrade(device);
    let busy = Arc::new(AtomicUsize::new(0));
    let spawned = std::thread::Builder::new()
        .name("vssd-metrics".into())
        .spawn(move || {
            for s in l.incoming() {
                let Some(dev) = weak.upgrade() else { break };
                match s {
                    Ok(s) => {
                        // Scrapes are served concurrently, at most
                        // MAX_SCRAPES at once (more are closed at once), so
                        // one slow client cannot hold up the others.
                        let taken = busy.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                            (n < MAX_SCRAPES).then_some(n + 1)
                        });
                        if taken.is_err() {
                            debug!("metrics: {MAX_SCRAPES} scrapes in progress; refusing another");
                            continue;
                        }
                        let busy = busy.clone();
                        let r = std::thread::Builder::new()
                            .name("vssd-metrics-req".into())
                            .spawn(move || {
                                if let Err(e) = answer(s, &dev) {
                                    debug!("metrics request: {e}");
                                }
                                busy.fetch_sub(1, Ordering::SeqCst);
                            });
                        if let Err(e) = r {
                            warn!("metrics: cannot start a thread: {e}");
                        }
                    }
                    Err(e) => {
                        warn!("metrics: accept failed: {e}");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        });
    if let Err(source) = spawned {
        return Err(MetricsError::Bind { addr, source });
    }
    info!("metrics on http://{bound}/metrics");
    Ok(bound)
}

/// Read one request (headers only) and answer it.
fn answer(mut s: TcpStream, dev: &Arc<Device>) -> io::Result<()> {
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    // One deadline for the whole request: a timeout per read would let a
    // client dripping a byte at a time keep the request open for ever.
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "request not received within its deadline",
            ));
        }
        s.set_read_timeout(Some(left))?;
        let n = s.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > 16 * 1024 {
            break;
        }
    }
    let line = String::from_utf8_lossy(&buf);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, ctype, body) = match (method, path.split('?').next().unwrap_or("")) {
        ("GET" | "HEAD", "/metrics") => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            render(dev),
        ),
        ("GET" | "HEAD", "/") => (
            "200 OK",
            "text/plain; charset=utf-8",
            "vssd: metrics at /metrics\n".to_string(),
        ),
        _ => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found\n".to_string(),
        ),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    if method != "HEAD" {
        s.write_all(body.as_bytes())?;
    }
    s.flush()
}
