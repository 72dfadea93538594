//! What the device counts, and the typed report `vssd ctl stats` shows.
//!
//! The device owns its accounting: frontends register themselves
//! ([`FrontendStats`]) and their connections ([`ConnStats`]); the requests
//! of a connection ([`super::request`]) record status, bytes, modelled and
//! delivered latency, lateness and queue depth here when they complete or
//! are abandoned.
//!
//! Counting is lock-free (relaxed atomics) on the request path; only
//! registering a connection and building a report take a lock.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use vssd_common::clock::TimeScale;

use super::capture::Capture;
use super::hist::{Histogram, Summary};
pub use super::op::{OpKind, Status};
pub use super::report::{
    ConnReport, ConnectionReport, DepthReport, DriveReport, FrontendReport, IoReport, OpCount,
    OpReport, StatsReport, TrimReport, WindowReport,
};

/// Closed connections kept in a frontend's report (oldest dropped first).
pub const CLOSED_CONNS_KEPT: usize = 16;

#[derive(Default)]
struct OpStats {
    cmds: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
    modelled: Histogram,
    delivered: Histogram,
}

/// The queue depth a frontend or connection delivered to the drive: the
/// requests in flight now, the most ever, and the time integral of the
/// in-flight count over the time at least one was in flight (its busy
/// time). Both integrals only grow, so two reports give the mean depth
/// over the time between them (a secure erase's reset leaves them alone).
///
/// Lock-free on the request path except when the count leaves or reaches
/// zero (the start and end of a busy period).
#[derive(Default)]
struct Depth {
    now: AtomicU64,
    max: AtomicU64,
    /// Σ over finished requests of their time in flight, ns: the integral
    /// of the in-flight count over time (Little's law).
    request_ns: AtomicU64,
    /// Finished busy periods, ns.
    busy_ns: AtomicU64,
    /// The latest submission or completion seen (daemon clock, ns).
    last_ns: AtomicU64,
    /// The first submission (daemon clock, ns, at least 1; 0: none yet).
    first_ns: AtomicU64,
    /// Start of the busy period under way.
    busy_since: Mutex<Option<u64>>,
}

impl Depth {
    fn enter(&self, at_ns: u64) {
        if self.first_ns.load(Relaxed) == 0 {
            let _ = self
                .first_ns
                .compare_exchange(0, at_ns.max(1), Relaxed, Relaxed);
        }
        self.last_ns.fetch_max(at_ns, Relaxed);
        let before = self.now.fetch_add(1, Relaxed);
        self.max.fetch_max(before + 1, Relaxed);
        if before == 0 {
            let mut since = lock(&self.busy_since);
            // Another thread may have ended this request's busy period
            // already (it completed at once): open one only if still busy.
            if since.is_none() && self.now.load(Relaxed) > 0 {
                *since = Some(at_ns);
            }
        }
    }

    fn leave(&self, submit_ns: u64, at_ns: Option<u64>) {
        let at_ns = at_ns.unwrap_or_else(|| self.last_ns.load(Relaxed).max(submit_ns));
        self.last_ns.fetch_max(at_ns, Relaxed);
        self.request_ns
            .fetch_add(at_ns.saturating_sub(submit_ns), Relaxed);
        if self.now.fetch_sub(1, Relaxed) == 1 {
            let mut since = lock(&self.busy_since);
            if self.now.load(Relaxed) == 0
                && let Some(t) = since.take()
            {
                self.busy_ns.fetch_add(at_ns.saturating_sub(t), Relaxed);
            }
        }
    }

    fn report(&self) -> DepthReport {
        let open =
            lock(&self.busy_since).map_or(0, |t| self.last_ns.load(Relaxed).saturating_sub(t));
        DepthReport {
            first_ns: self.first_ns.load(Relaxed),
            last_ns: self.last_ns.load(Relaxed),
            ..DepthReport::new(
                self.now.load(Relaxed),
                self.max.load(Relaxed),
                self.busy_ns.load(Relaxed) + open,
                self.request_ns.load(Relaxed),
            )
        }
    }
}

/// Counters kept per frontend and per connection (no histograms).
#[derive(Default)]
struct IoCounters {
    depth: Depth,
    cmds: [AtomicU64; 6],
    bytes: [AtomicU64; 6],
    errors: [AtomicU64; 6],
    rejected: AtomicU64,
    abandoned: AtomicU64,
    discards_ok: AtomicU64,
    write_zeroes_ok: AtomicU64,
    trim_requested_bytes: AtomicU64,
    trim_freed_bytes: AtomicU64,
    trim_unmapped_bytes: AtomicU64,
}

impl IoCounters {
    fn record(&self, op: OpKind, bytes: u64, status: Status, refused: bool, trim: TrimOutcome) {
        let i = op as usize;
        self.cmds[i].fetch_add(1, Relaxed);
        self.bytes[i].fetch_add(bytes, Relaxed);
        if !status.is_ok() {
            self.errors[i].fetch_add(1, Relaxed);
        }
        if refused || status == Status::Invalid || status == Status::Unsupported {
            self.rejected.fetch_add(1, Relaxed);
        }
        if status.is_ok() {
            match op {
                OpKind::Discard => self.discards_ok.fetch_add(1, Relaxed),
                OpKind::WriteZeroes => self.write_zeroes_ok.fetch_add(1, Relaxed),
                _ => 0,
            };
            if matches!(op, OpKind::Discard | OpKind::WriteZeroes) {
                self.trim_requested_bytes.fetch_add(bytes, Relaxed);
            }
        }
        if trim != TrimOutcome::default() {
            self.trim_freed_bytes.fetch_add(trim.freed_bytes, Relaxed);
            self.trim_unmapped_bytes
                .fetch_add(trim.already_unmapped_bytes, Relaxed);
        }
    }

    fn report(&self) -> IoReport {
        let ops = OpKind::ALL
            .iter()
            .map(|&k| {
                let i = k as usize;
                (
                    k.name().to_string(),
                    OpCount {
                        cmds: self.cmds[i].load(Relaxed),
                        bytes: self.bytes[i].load(Relaxed),
                        errors: self.errors[i].load(Relaxed),
                    },
                )
            })
            .filter(|(_, c)| c.cmds > 0)
            .collect();
        IoReport {
            ops,
            rejected: self.rejected.load(Relaxed),
            abandoned: self.abandoned.load(Relaxed),
            trim: TrimReport {
                discard_cmds: self.discards_ok.load(Relaxed),
                write_zeroes_cmds: self.write_zeroes_ok.load(Relaxed),
                requested_bytes: self.trim_requested_bytes.load(Relaxed),
                freed_bytes: self.trim_freed_bytes.load(Relaxed),
                already_unmapped_bytes: self.trim_unmapped_bytes.load(Relaxed),
            },
            depth: self.depth.report(),
        }
    }
}

/// What a discard (or unmapping write-zeroes) did in the FTL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrimOutcome {
    /// Bytes that were mapped and are now free.
    pub freed_bytes: u64,
    /// Bytes of the request that were not mapped anyway.
    pub already_unmapped_bytes: u64,
}

impl TrimOutcome {
    /// Count what a TRIM of `offset..offset + len` frees on `ssd`, before
    /// it is submitted: the TRIM audit's one computation, used by the
    /// device and by the bench's simulator run alike.
    pub fn add_range(&mut self, ssd: &vssd_model::Ssd, offset: u64, len: u64) {
        let (mapped, unmapped) = ssd.unit_census(offset, len);
        self.freed_bytes += mapped * ssd.unit_bytes();
        self.already_unmapped_bytes += unmapped * ssd.unit_bytes();
    }
}

/// Device-wide statistics: per-operation latency, lateness, in-flight count,
/// and the registered frontends.
#[derive(Default)]
pub struct Stats {
    ops: [OpStats; 6],
    lateness: Histogram,
    in_flight: AtomicU64,
    depth: Depth,
    abandoned: AtomicU64,
    rejected: AtomicU64,
    frontends: Mutex<Vec<Arc<FrontendStats>>>,
    /// The request trace (`serve --trace`, `ctl trace`).
    pub(crate) capture: Capture,
    /// Latencies are taken on the daemon clock and recorded in the
    /// model's time (daemon durations / K).
    scale: TimeScale,
}

impl Stats {
    /// Statistics of a drive whose model clock runs `scale` times slower
    /// than the daemon clock: latencies and lateness are recorded in the
    /// model's time, the drive's own.
    pub fn with_scale(scale: TimeScale) -> Self {
        Self {
            scale,
            ..Self::default()
        }
    }

    /// Register a frontend (a vhost-user socket, an NBD listener).
    pub fn register_frontend(
        self: &Arc<Self>,
        kind: &'static str,
        name: impl Into<String>,
        info: impl Into<String>,
    ) -> Frontend {
        let mut list = lock(&self.frontends);
        let f = Arc::new(FrontendStats {
            id: list.len() as u32,
            kind,
            name: name.into(),
            info: info.into(),
            counters: IoCounters::default(),
            connections: AtomicU64::new(0),
            conns: Mutex::new(VecDeque::new()),
            negotiating: AtomicU64::new(0),
        });
        list.push(f.clone());
        Frontend {
            device: self.clone(),
            stats: f,
        }
    }

    /// Requests handed to the device and not completed yet.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Relaxed)
    }

    /// Forget latency figures and counts (after a secure erase). Frontend
    /// and connection counters (the TRIM audit) are kept.
    pub fn reset(&self) {
        for s in &self.ops {
            s.cmds.store(0, Relaxed);
            s.bytes.store(0, Relaxed);
            s.errors.store(0, Relaxed);
            s.modelled.reset();
            s.delivered.reset();
        }
        self.lateness.reset();
        self.rejected.store(0, Relaxed);
        self.abandoned.store(0, Relaxed);
    }

    /// The lateness histogram (delivered − modelled completion).
    pub fn lateness(&self) -> &Histogram {
        &self.lateness
    }

    /// The modelled and delivered latency histograms of `op`.
    pub fn latency(&self, op: OpKind) -> (&Histogram, &Histogram) {
        let s = &self.ops[op as usize];
        (&s.modelled, &s.delivered)
    }

    /// A request of `conn` (of `fe`) submitted at `at_ns` is in flight.
    pub(crate) fn enter(&self, fe: &FrontendStats, conn: &ConnStats, at_ns: u64) {
        self.in_flight.fetch_add(1, Relaxed);
        self.depth.enter(at_ns);
        fe.counters.depth.enter(at_ns);
        conn.counters.depth.enter(at_ns);
    }

    /// Request `p` of `conn` (of `fe`) was delivered at `delivered_ns`.
    pub(crate) fn complete(
        &self,
        fe: &FrontendStats,
        conn: &ConnStats,
        p: &Finished,
        delivered_ns: u64,
    ) {
        self.record(p, delivered_ns);
        conn.counters
            .record(p.op, p.bytes, p.status, p.refused, p.trim);
        fe.counters
            .record(p.op, p.bytes, p.status, p.refused, p.trim);
        self.in_flight.fetch_sub(1, Relaxed);
        self.leave(fe, conn, p.submit_ns, Some(delivered_ns));
    }

    /// A request of `conn` submitted at `submit_ns` was dropped without
    /// completing (its frontend went away).
    pub(crate) fn abandon(&self, fe: &FrontendStats, conn: &ConnStats, submit_ns: u64) {
        self.in_flight.fetch_sub(1, Relaxed);
        self.leave(fe, conn, submit_ns, None);
        self.abandoned.fetch_add(1, Relaxed);
        conn.counters.abandoned.fetch_add(1, Relaxed);
        fe.counters.abandoned.fetch_add(1, Relaxed);
    }

    /// A request submitted at `submit_ns` left the in-flight set at
    /// `at_ns` (none: abandoned, at the latest time seen).
    fn leave(&self, fe: &FrontendStats, conn: &ConnStats, submit_ns: u64, at_ns: Option<u64>) {
        // The same time for all three, the device's latest.
        let at_ns = at_ns.or_else(|| Some(self.depth.last_ns.load(Relaxed).max(submit_ns)));
        self.depth.leave(submit_ns, at_ns);
        fe.counters.depth.leave(submit_ns, at_ns);
        conn.counters.depth.leave(submit_ns, at_ns);
    }

    fn record(&self, p: &Finished, delivered_ns: u64) {
        let s = &self.ops[p.op as usize];
        s.cmds.fetch_add(1, Relaxed);
        s.bytes.fetch_add(p.bytes, Relaxed);
        if !p.status.is_ok() {
            s.errors.fetch_add(1, Relaxed);
        }
        if p.refused || p.status == Status::Invalid || p.status == Status::Unsupported {
            self.rejected.fetch_add(1, Relaxed);
        }
        let drive = |daemon_ns: u64| self.scale.to_model(daemon_ns);
        s.modelled
            .record(drive(p.due_ns.saturating_sub(p.submit_ns)));
        s.delivered
            .record(drive(delivered_ns.saturating_sub(p.submit_ns)));
        self.lateness
            .record(drive(delivered_ns.saturating_sub(p.due_ns)));
    }

    /// Per-operation report, every kind, keyed by [`OpKind::name`].
    pub fn ops_report(&self) -> BTreeMap<String, OpReport> {
        OpKind::ALL
            .iter()
            .map(|&k| {
                let s = &self.ops[k as usize];
                (
                    k.name().to_string(),
                    OpReport {
                        cmds: s.cmds.load(Relaxed),
                        bytes: s.bytes.load(Relaxed),
                        errors: s.errors.load(Relaxed),
                        modelled: Summary::of(&s.modelled),
                        delivered: Summary::of(&s.delivered),
                    },
                )
            })
            .collect()
    }

    /// The `connection` part of the report (all frontends together).
    pub fn connection_report(&self) -> ConnectionReport {
        let fronts = lock(&self.frontends);
        ConnectionReport {
            connected: fronts.iter().any(|f| f.open_connections() > 0),
            connections: fronts.iter().map(|f| f.connections.load(Relaxed)).sum(),
            in_flight: self.in_flight.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
            abandoned: self.abandoned.load(Relaxed),
            depth: self.depth.report(),
        }
    }

    /// One report per registered frontend.
    pub fn frontends_report(&self) -> Vec<FrontendReport> {
        lock(&self.frontends).iter().map(|f| f.report()).collect()
    }
}

/// A registered frontend, as the frontend holds it: opens connections.
#[derive(Clone)]
pub struct Frontend {
    device: Arc<Stats>,
    stats: Arc<FrontendStats>,
}

/// One frontend (listener): its identity and counters over all its connections.
pub struct FrontendStats {
    id: u32,
    kind: &'static str,
    name: String,
    info: String,
    counters: IoCounters,
    connections: AtomicU64,
    conns: Mutex<VecDeque<Arc<ConnStats>>>,
    /// Clients connected but not yet through negotiation (a vhost-user
    /// frontend before it acknowledges features, an NBD client in its
    /// handshake).
    negotiating: AtomicU64,
}

/// A client still negotiating, counted while this lives.
pub struct Negotiating(Arc<FrontendStats>);

impl Drop for Negotiating {
    fn drop(&mut self) {
        self.0.negotiating.fetch_sub(1, Relaxed);
    }
}

impl Frontend {
    /// Count a client that is connected but still negotiating, until the
    /// returned guard is dropped.
    pub fn negotiating(&self) -> Negotiating {
        self.stats.negotiating.fetch_add(1, Relaxed);
        Negotiating(self.stats.clone())
    }

    /// Record a new connection from `peer`: the device's, the
    /// frontend's and the connection's counters its requests record into
    /// ([`Frontend::connect`] wraps them).
    pub(crate) fn open_conn(
        &self,
        peer: impl Into<String>,
    ) -> (Arc<Stats>, Arc<FrontendStats>, Arc<ConnStats>) {
        let fe = &self.stats;
        let id = fe.connections.fetch_add(1, Relaxed) + 1;
        let c = Arc::new(ConnStats {
            id,
            peer: peer.into(),
            opened_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            open: AtomicBool::new(true),
            counters: IoCounters::default(),
        });
        let mut conns = lock(&fe.conns);
        // Keep every open connection and the most recent closed ones (this
        // one may close next, hence one fewer).
        let mut closed = conns.iter().filter(|c| !c.is_open()).count();
        while closed >= CLOSED_CONNS_KEPT {
            match conns.iter().position(|c| !c.is_open()) {
                Some(i) => conns.remove(i),
                None => break,
            };
            closed -= 1;
        }
        conns.push_back(c.clone());
        (self.device.clone(), fe.clone(), c)
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.stats.open_connections()
    }

    /// The frontend's id (its index among the device's frontends).
    pub fn id(&self) -> u32 {
        self.stats.id
    }
}

impl FrontendStats {
    /// The frontend's id.
    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// Its kind (`vhost-user-blk`, `nbd`).
    pub(crate) fn kind(&self) -> &'static str {
        self.kind
    }

    /// Where it listens.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        lock(&self.conns).iter().filter(|c| c.is_open()).count()
    }

    fn report(&self) -> FrontendReport {
        let conns = lock(&self.conns);
        FrontendReport {
            id: self.id,
            kind: self.kind.to_string(),
            name: self.name.clone(),
            info: self.info.clone(),
            connections: self.connections.load(Relaxed),
            open_connections: conns.iter().filter(|c| c.is_open()).count() as u64,
            negotiating: self.negotiating.load(Relaxed),
            io: self.counters.report(),
            conns: conns.iter().map(|c| c.report()).collect(),
        }
    }
}

/// One connection's identity and counters.
pub struct ConnStats {
    id: u64,
    peer: String,
    opened_unix_s: u64,
    open: AtomicBool,
    counters: IoCounters,
}

impl ConnStats {
    /// The connection's number within its frontend (from 1).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The connection closed.
    pub(crate) fn close(&self) {
        self.open.store(false, Relaxed);
    }

    fn is_open(&self) -> bool {
        self.open.load(Relaxed)
    }

    fn report(&self) -> ConnReport {
        ConnReport {
            id: self.id,
            peer: self.peer.clone(),
            opened_unix_s: self.opened_unix_s,
            open: self.is_open(),
            io: self.counters.report(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a request that reached its completion reports to the counters
/// (taken from its [`Pending`](super::request::Pending) guard).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Finished {
    pub(crate) op: OpKind,
    pub(crate) bytes: u64,
    pub(crate) status: Status,
    /// Refused by the frontend before it reached the drive.
    pub(crate) refused: bool,
    pub(crate) trim: TrimOutcome,
    /// Submission and modelled completion (daemon clock).
    pub(crate) submit_ns: u64,
    pub(crate) due_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_guards_account_in_flight_completion_and_abandon() {
        let stats = Arc::new(Stats::default());
        let fe = stats.register_frontend("nbd", "unix:/x", "");
        let conn = fe.connect("client 1");
        let mut a = conn.begin(OpKind::Write, 4096, 100);
        a.finish(Status::Ok, 1100);
        let b = conn.begin(OpKind::Read, 512, 200);
        assert_eq!(stats.in_flight(), 2);
        a.complete(1200);
        assert_eq!(stats.in_flight(), 1);
        drop(b);
        assert_eq!(stats.in_flight(), 0);
        let c = stats.connection_report();
        assert_eq!((c.abandoned, c.connections, c.connected), (1, 1, true));
        let ops = stats.ops_report();
        assert_eq!(ops["write"].cmds, 1);
        assert_eq!(ops["write"].bytes, 4096);
        assert_eq!(ops["write"].modelled.max_ns, 1000);
        assert_eq!(ops["write"].delivered.max_ns, 1100);
        assert_eq!(Summary::of(stats.lateness()).max_ns, 100);
        let f = &stats.frontends_report()[0];
        assert_eq!(f.io.ops["write"].cmds, 1);
        assert_eq!(f.io.abandoned, 1);
        assert_eq!(f.conns[0].peer, "client 1");
        drop(conn);
        assert!(!stats.connection_report().connected);
    }

    #[test]
    fn depth_is_the_in_flight_integral_over_busy_time() {
        let stats = Arc::new(Stats::default());
        let fe = stats.register_frontend("nbd", "x", "");
        let c1 = fe.connect("a");
        let c2 = fe.connect("b");
        // c1: two requests over 0..100 and 50..150 (busy 150 ns, 200 ns of
        // requests); idle; then one over 1000..1100 (abandoned: it leaves
        // at the latest time seen, 1100).
        let a = c1.begin(OpKind::Read, 0, 0);
        let b = c1.begin(OpKind::Read, 0, 50);
        a.complete(100);
        b.complete(150);
        let late = c1.begin(OpKind::Read, 0, 1000);
        let other = c2.begin(OpKind::Write, 0, 1050);
        other.complete(1100);
        drop(late);
        let f = &stats.frontends_report()[0];
        let d1 = &f.conns[0].io.depth;
        assert_eq!((d1.max_in_flight, d1.in_flight), (2, 0));
        assert_eq!(d1.busy_ns, 150 + 100);
        assert_eq!(d1.request_ns, 100 + 100 + 100);
        assert!((d1.mean_in_flight - 300.0 / 250.0).abs() < 1e-12);
        let d2 = &f.conns[1].io.depth;
        assert_eq!((d2.max_in_flight, d2.busy_ns, d2.request_ns), (1, 50, 50));
        // The frontend: both connections, overlapping at 1050..1100.
        let fd = &f.io.depth;
        assert_eq!((fd.max_in_flight, fd.busy_ns, fd.request_ns), (2, 250, 350));
        assert_eq!(stats.connection_report().depth, *fd);
        // A busy period under way counts up to the latest event.
        let open = c2.begin(OpKind::Read, 0, 2000);
        let _next = c1.begin(OpKind::Read, 0, 2400);
        let now = &stats.frontends_report()[0].io.depth;
        assert_eq!((now.in_flight, now.busy_ns), (2, 250 + 400));
        assert_eq!(now.mean_since(fd), Some(0.0)); // none finished since
        open.complete(2500);
        let later = &stats.frontends_report()[0].io.depth;
        assert_eq!(later.mean_since(fd), Some(500.0 / 500.0));
        // A secure erase's reset leaves the depth figures alone.
        stats.reset();
        assert_eq!(stats.frontends_report()[0].io.depth.busy_ns, 250 + 500);
    }

    #[test]
    fn trim_audit_and_rejections_per_connection() {
        let stats = Arc::new(Stats::default());
        let fe = stats.register_frontend("vhost-user-blk", "/s", "2 queues");
        let c1 = fe.connect("qemu");
        let c2 = fe.connect("qemu");
        let mut t = c1.begin(OpKind::Discard, 1 << 20, 0);
        t.set_trim(TrimOutcome {
            freed_bytes: 3 << 18,
            already_unmapped_bytes: 1 << 18,
        });
        t.finish(Status::Ok, 10);
        t.complete(10);
        let mut bad = c2.begin(OpKind::Other, 0, 0);
        bad.fail(Status::Invalid);
        bad.complete(0);
        let f = &stats.frontends_report()[0];
        assert_eq!(f.io.trim.discard_cmds, 1);
        assert_eq!(f.io.trim.requested_bytes, 1 << 20);
        assert_eq!(f.io.trim.freed_bytes, 3 << 18);
        assert_eq!(f.io.trim.already_unmapped_bytes, 1 << 18);
        assert_eq!(f.conns[0].io.trim.discard_cmds, 1);
        assert_eq!(f.conns[1].io.trim.discard_cmds, 0);
        assert_eq!(f.conns[1].io.rejected, 1);
        assert_eq!(stats.connection_report().rejected, 1);
    }

    #[test]
    fn closed_connections_are_bounded() {
        let stats = Arc::new(Stats::default());
        let fe = stats.register_frontend("nbd", "x", "");
        let keep = fe.connect("long-lived");
        for i in 0..100 {
            drop(fe.connect(format!("c{i}")));
        }
        let r = &stats.frontends_report()[0];
        assert_eq!(r.connections, 101);
        assert!(r.conns.len() <= CLOSED_CONNS_KEPT + 1);
        assert!(r.conns.iter().any(|c| c.peer == "long-lived" && c.open));
        drop(keep);
    }
}
