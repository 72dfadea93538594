//! The NBD frontend: the drive as an NBD export, so that QEMU can present
//! it to a guest as a SATA SSD on AHCI (`ide-hd`) or as an NVMe namespace,
//! and libnbd's tools can inspect it.
//!
//! - [`proto`]: the wire format, pure and fuzzable;
//! - [`handshake`]: the fixed newstyle negotiation;
//! - [`conn`]: the transmission phase (concurrent requests, replies at
//!   their modelled time, out of order);
//! - [`sock`]: unix and TCP connections;
//! - this module: listeners, one thread per connection (plus its writer).
//!
//! Why our own protocol layer: the Rust NBD server crates checked (`nbd`
//! 0.3: one request at a time, no structured replies, no block status;
//! `tokio-nbd` 0.2: an async runtime around a request-at-a-time backend
//! trait) cannot send each reply at its own modelled time, out of order,
//! nor answer block status from the FTL.

pub mod budget;
pub mod command;
pub mod conn;
pub mod handshake;
pub mod proto;
pub mod sock;

use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use self::budget::Budget;
use self::conn::{ServerShared, Stopper};
use self::handshake::{ExportInfo, HandshakeError};
use self::sock::Sock;
use vssd_device::completion::Timing;
use vssd_device::{Device, Frontend};
use vssd_profile::size::format_size;

/// Connections one listener serves at once, those still in the handshake
/// included; more are closed at once.
pub const MAX_CONNECTIONS: usize = 64;

/// How long a client may take over the whole handshake (a deadline, not
/// a timeout per read).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Internal, for the tests: the handshake deadline in milliseconds instead
/// of [`HANDSHAKE_TIMEOUT`].
pub const HANDSHAKE_TIMEOUT_ENV: &str = "VSSD_NBD_HANDSHAKE_TIMEOUT_MS";

fn handshake_timeout() -> Duration {
    std::env::var(HANDSHAKE_TIMEOUT_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(HANDSHAKE_TIMEOUT, Duration::from_millis)
}

/// One slot of a listener's connection count, given back when dropped
/// (whenever the connection's thread ends: handshake failed or session over).
struct Slot(Arc<AtomicUsize>);

impl Slot {
    /// A slot if fewer than `max` are taken; otherwise how many are.
    fn take(count: &Arc<AtomicUsize>, max: usize) -> Result<Slot, usize> {
        count
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .map(|_| Slot(count.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Where an NBD listener listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NbdAddr {
    /// `unix:PATH`.
    Unix(PathBuf),
    /// `tcp:HOST:PORT`.
    Tcp(SocketAddr),
}

impl FromStr for NbdAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<NbdAddr, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err("unix: needs a socket path, e.g. unix:/run/vssd-nbd.sock".into());
            }
            return Ok(NbdAddr::Unix(PathBuf::from(p)));
        }
        if let Some(a) = s.strip_prefix("tcp:") {
            let addr: SocketAddr = a.parse().map_err(|_| {
                format!("tcp:{a}: give an IP address and port, e.g. tcp:127.0.0.1:10809")
            })?;
            return Ok(NbdAddr::Tcp(addr));
        }
        Err(format!(
            "{s:?}: an NBD address is unix:PATH or tcp:HOST:PORT (e.g. tcp:127.0.0.1:10809)"
        ))
    }
}

impl std::fmt::Display for NbdAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NbdAddr::Unix(p) => write!(f, "unix:{}", p.display()),
            NbdAddr::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

/// Whether a TCP address keeps the export on this host.
pub fn is_loopback(ip: &IpAddr) -> bool {
    ip.is_loopback()
}

/// A bound listener.
#[derive(Debug)]
pub enum NbdListener {
    /// Unix socket.
    Unix(UnixListener),
    /// TCP.
    Tcp(TcpListener),
}

impl NbdListener {
    fn accept(&self) -> io::Result<Sock> {
        match self {
            NbdListener::Unix(l) => l.accept().map(|(s, _)| Sock::Unix(s)),
            NbdListener::Tcp(l) => l.accept().map(|(s, _)| Sock::Tcp(s)),
        }
    }
}

/// Running NBD listeners and their connections.
pub struct NbdServer {
    draining: Arc<AtomicBool>,
    live: Arc<Mutex<Vec<(Stopper, Sock)>>>,
    timing: Timing,
    /// Buffer bytes all connections may hold together.
    buffers: Arc<Budget>,
}

impl NbdServer {
    /// An NBD server (no listeners yet) whose reply threads wait for
    /// completion times as `timing` says.
    pub fn new(timing: Timing) -> NbdServer {
        NbdServer {
            draining: Arc::new(AtomicBool::new(false)),
            live: Arc::new(Mutex::new(Vec::new())),
            timing,
            buffers: Arc::new(Budget::new(budget::DEFAULT_TOTAL)),
        }
    }

    /// Let all connections together hold at most `bytes` of request and
    /// reply buffers (at least [`budget::MIN_TOTAL`]); each connection
    /// holds at most [`budget::PER_CONNECTION`].
    pub fn with_buffer_limit(mut self, bytes: u64) -> NbdServer {
        self.buffers = Arc::new(Budget::new(bytes));
        self
    }

    /// Buffer bytes the connections hold now.
    pub fn buffered(&self) -> u64 {
        self.buffers.used()
    }

    /// Serve `listener` (bound at `addr`) on a thread for the life of the process.
    pub fn spawn(
        &self,
        dev: Arc<Device>,
        frontend: Frontend,
        addr: NbdAddr,
        listener: NbdListener,
    ) -> io::Result<()> {
        let export = ExportInfo {
            size: dev.capacity(),
            preferred_block: dev.topology().physical_block.min(u64::from(u32::MAX)) as u32,
            description: format!(
                "vssd {} ({}, {})",
                dev.profile().name,
                format_size(dev.capacity()),
                dev.profile().description
            ),
        };
        let draining = self.draining.clone();
        let live = self.live.clone();
        // A power cut closes every connection, as a real one does.
        let cut = live.clone();
        dev.on_power_cut(move || {
            for (_, sock) in cut.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                let _ = sock.shutdown();
            }
        });
        let timing = self.timing;
        let buffers = self.buffers.clone();
        let handshake = handshake_timeout();
        // Connections of this listener, counted from accept to close.
        let count = Arc::new(AtomicUsize::new(0));
        thread::Builder::new()
            .name("vssd-nbd-accept".into())
            .spawn(move || {
                loop {
                    let sock = match listener.accept() {
                        Ok(s) => s,
                        Err(e) => {
                            warn!("NBD {addr}: accept failed: {e}");
                            thread::sleep(Duration::from_millis(100));
                            continue;
                        }
                    };
                    if draining.load(Ordering::SeqCst) {
                        let _ = sock.shutdown();
                        continue;
                    }
                    if !dev.powered() {
                        debug!("NBD {addr}: the drive's power is off; closing a new connection");
                        let _ = sock.shutdown();
                        continue;
                    }
                    live.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .retain(|(s, _)| s.alive());
                    let slot = match Slot::take(&count, MAX_CONNECTIONS) {
                        Ok(s) => s,
                        Err(open) => {
                            warn!("NBD {addr}: {open} connections open already; refusing another");
                            let _ = sock.shutdown();
                            continue;
                        }
                    };
                    let (dev, frontend, export) = (dev.clone(), frontend.clone(), export.clone());
                    let (draining, live) = (draining.clone(), live.clone());
                    let buffers = buffers.clone();
                    let r = thread::Builder::new()
                        .name("vssd-nbd-rx".into())
                        .spawn(move || {
                            let _slot = slot;
                            let deadline = Instant::now() + handshake;
                            let server = ServerShared {
                                draining,
                                timing,
                                buffers,
                            };
                            serve_one(dev, frontend, export, sock, server, live, deadline)
                        });
                    if let Err(e) = r {
                        warn!("NBD {addr}: cannot start a connection thread: {e}");
                    }
                }
            })
            .map(|_| ())
    }

    /// Daemon stopping: send every pending reply now, then close every
    /// connection (waits up to `limit` for replies to go out).
    pub fn drain_and_close(&self, limit: Duration) {
        self.draining.store(true, Ordering::SeqCst);
        let start = Instant::now();
        loop {
            let l = self.live.lock().unwrap_or_else(|e| e.into_inner());
            for (s, _) in l.iter() {
                s.wake();
            }
            if l.iter().all(|(s, _)| !s.alive()) || start.elapsed() > limit {
                for (_, sock) in l.iter() {
                    let _ = sock.shutdown();
                }
                return;
            }
            drop(l);
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Default for NbdServer {
    fn default() -> Self {
        Self::new(Timing::default())
    }
}

fn serve_one(
    dev: Arc<Device>,
    frontend: Frontend,
    export: ExportInfo,
    mut sock: Sock,
    server: ServerShared,
    live: Arc<Mutex<Vec<(Stopper, Sock)>>>,
    deadline: Instant,
) {
    sock.set_nodelay();
    let peer = sock.peer();
    let negotiating = frontend.negotiating();
    let neg =
        match handshake::negotiate(&mut handshake::Deadline::new(&mut sock, deadline), &export) {
            Ok(n) => n,
            Err(HandshakeError::Aborted) => {
                debug!("NBD client {peer} ended the negotiation");
                return;
            }
            Err(e) => {
                info!("NBD client {peer}: {e}");
                return;
            }
        };
    drop(negotiating);
    // Idle clients are normal in transmission (a guest that does no I/O).
    let _ = sock.set_read_timeout(None);
    let conn = frontend.connect(peer.clone());
    info!(
        "NBD client {peer} connected (connection {}, {} replies{})",
        conn.id(),
        if neg.structured {
            "structured"
        } else {
            "simple"
        },
        if neg.base_allocation {
            ", base:allocation"
        } else {
            ""
        }
    );
    let keep = sock.try_clone();
    conn::transmission(dev, conn, sock, neg, server, &|stopper| {
        if let Ok(k) = &keep
            && let Ok(k) = k.try_clone()
        {
            live.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((stopper, k));
        }
    });
    info!("NBD client {peer} disconnected");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse() {
        assert_eq!(
            "unix:/run/x.sock".parse::<NbdAddr>(),
            Ok(NbdAddr::Unix("/run/x.sock".into()))
        );
        assert_eq!(
            "tcp:127.0.0.1:10809".parse::<NbdAddr>(),
            Ok(NbdAddr::Tcp("127.0.0.1:10809".parse().unwrap()))
        );
        assert!("tcp:[::1]:10809".parse::<NbdAddr>().is_ok());
        assert!("tcp:localhost".parse::<NbdAddr>().is_err());
        assert!("/run/x.sock".parse::<NbdAddr>().is_err());
        assert!("unix:".parse::<NbdAddr>().is_err());
        assert_eq!(
            NbdAddr::Tcp("127.0.0.1:1".parse().unwrap()).to_string(),
            "tcp:127.0.0.1:1"
        );
    }
}
