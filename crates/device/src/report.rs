//! The typed report `vssd ctl stats` shows: built by the daemon
//! ([`super::Device::report`]), read back by the client, serialised as JSON.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::hist::Summary;
use vssd_model::Counters;

/// Per-kind figures of the device (with latency percentiles).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpReport {
    /// Completed requests.
    pub cmds: u64,
    /// Bytes.
    pub bytes: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Modelled latency (drive completion − submission).
    pub modelled: Summary,
    /// Delivered latency (completion seen by the client − submission).
    pub delivered: Summary,
}

/// Per-kind counts of a frontend or connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpCount {
    /// Completed requests.
    pub cmds: u64,
    /// Bytes.
    pub bytes: u64,
    /// Requests that failed.
    pub errors: u64,
}

/// The TRIM audit of a frontend or connection: did discards arrive, and
/// did they free anything?
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrimReport {
    /// Discard (TRIM, deallocate) commands executed (refused ones are
    /// counted as rejected).
    pub discard_cmds: u64,
    /// Write-zeroes commands executed (either flavour).
    pub write_zeroes_cmds: u64,
    /// Bytes the executed discards and write-zeroes covered.
    pub requested_bytes: u64,
    /// Bytes that were mapped in the FTL and are now free.
    pub freed_bytes: u64,
    /// Bytes that were already unmapped (nothing to free).
    pub already_unmapped_bytes: u64,
}

impl TrimReport {
    /// What was counted between `earlier` (a report of the same counters
    /// taken before) and this one.
    pub fn since(&self, earlier: &TrimReport) -> TrimReport {
        TrimReport {
            discard_cmds: self.discard_cmds - earlier.discard_cmds,
            write_zeroes_cmds: self.write_zeroes_cmds - earlier.write_zeroes_cmds,
            requested_bytes: self.requested_bytes - earlier.requested_bytes,
            freed_bytes: self.freed_bytes - earlier.freed_bytes,
            already_unmapped_bytes: self.already_unmapped_bytes - earlier.already_unmapped_bytes,
        }
    }
}

/// The queue depth the drive saw from a frontend, a connection or all of
/// them: what a guest's queue depth became on its way through the bus.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DepthReport {
    /// Requests in flight now.
    pub in_flight: u64,
    /// The most requests ever in flight at once.
    pub max_in_flight: u64,
    /// Time with at least one request in flight, ns (only grows).
    pub busy_ns: u64,
    /// Σ of finished requests' time in flight, ns: the integral of the
    /// in-flight count over time (only grows).
    pub request_ns: u64,
    /// `request_ns / busy_ns`: requests in flight on average while busy.
    pub mean_in_flight: f64,
    /// The first request's submission (daemon clock, ns since the drive
    /// opened; 0: none yet).
    #[serde(default)]
    pub first_ns: u64,
    /// The latest submission or completion (daemon clock, ns): with
    /// `first_ns`, the span over which a load ran, so bytes over
    /// `(last_ns - first_ns)` is the bandwidth the client got, idle
    /// moments included.
    #[serde(default)]
    pub last_ns: u64,
}

impl DepthReport {
    /// A report of these figures, with the mean computed.
    pub fn new(in_flight: u64, max_in_flight: u64, busy_ns: u64, request_ns: u64) -> Self {
        DepthReport {
            in_flight,
            max_in_flight,
            busy_ns,
            request_ns,
            mean_in_flight: mean_depth(request_ns, busy_ns),
            first_ns: 0,
            last_ns: 0,
        }
    }

    /// The mean depth between `earlier` (a report of the same counters
    /// taken before) and this one; `None` when it was idle throughout.
    pub fn mean_since(&self, earlier: &DepthReport) -> Option<f64> {
        let busy = self.busy_ns.checked_sub(earlier.busy_ns)?;
        let req = self.request_ns.checked_sub(earlier.request_ns)?;
        (busy > 0).then(|| mean_depth(req, busy))
    }
}

fn mean_depth(request_ns: u64, busy_ns: u64) -> f64 {
    if busy_ns == 0 {
        0.0
    } else {
        request_ns as f64 / busy_ns as f64
    }
}

/// Counters of a frontend or a connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IoReport {
    /// Per kind (only kinds seen), keyed by [`OpKind::name`].
    pub ops: BTreeMap<String, OpCount>,
    /// Requests refused by validation (malformed, out of range, unsupported).
    pub rejected: u64,
    /// Requests whose completion was never delivered (client went away).
    pub abandoned: u64,
    /// Discards and write-zeroes.
    pub trim: TrimReport,
    /// The queue depth it delivered to the drive.
    #[serde(default)]
    pub depth: DepthReport,
}

/// One connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnReport {
    /// Number within the frontend, from 1.
    pub id: u64,
    /// The client, as the frontend describes it.
    pub peer: String,
    /// When it connected (Unix time, s).
    pub opened_unix_s: u64,
    /// Still connected.
    pub open: bool,
    /// Its counters.
    pub io: IoReport,
}

/// One frontend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrontendReport {
    /// Index among the device's frontends.
    pub id: u32,
    /// `vhost-user-blk` or `nbd`.
    pub kind: String,
    /// Where it listens.
    pub name: String,
    /// Frontend-specific details (queues, export name).
    pub info: String,
    /// Connections accepted since start.
    pub connections: u64,
    /// Connections open now.
    pub open_connections: u64,
    /// Clients connected but still negotiating (vhost-user: features not
    /// acknowledged yet, as while a VM is paused; NBD: in the handshake).
    #[serde(default)]
    pub negotiating: u64,
    /// Counters over all its connections.
    pub io: IoReport,
    /// Open connections and the most recent closed ones.
    pub conns: Vec<ConnReport>,
}

/// All frontends together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConnectionReport {
    /// At least one client is connected.
    pub connected: bool,
    /// Connections accepted since start, all frontends.
    pub connections: u64,
    /// Requests handed to the device and not completed yet.
    pub in_flight: u64,
    /// Requests refused by validation since start (or the last secure erase).
    pub rejected: u64,
    /// Requests whose completion was never delivered.
    pub abandoned: u64,
    /// The queue depth the drive saw, all frontends together.
    #[serde(default)]
    pub depth: DepthReport,
}

/// The drive itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriveReport {
    /// Profile name.
    pub profile: String,
    /// Exported bytes.
    pub capacity: u64,
    /// Backing file (none: in memory).
    pub backing: Option<String>,
    /// Bytes allocated in the store.
    pub allocated_bytes: u64,
    /// Serial number.
    pub serial: String,
    /// What the drive reports about itself (`[identity]`): model, serial,
    /// firmware, WWN, SMART attribute set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<vssd_profile::Identity>,
    /// Why the drive stopped serving I/O, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Heap bytes of the model's state (mapping tables, block table).
    #[serde(default)]
    pub model_bytes: u64,
    /// Resident memory of the whole daemon process, bytes.
    #[serde(default)]
    pub rss_bytes: u64,
    /// Bytes discarded but not yet zeroed in the backing file (they read
    /// as zeros already; FLUSH waits for them).
    #[serde(default)]
    pub pending_zero_bytes: u64,
    /// Time dilation `K` (`serve --time-scale`): the model's clock runs `K`
    /// times slower than the wall clock. Every latency, lateness and rate
    /// in this report is in the model's time, the drive's own.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub time_scale: f64,
}

fn one() -> f64 {
    1.0
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
fn is_one(k: &f64) -> bool {
    *k == 1.0
}

/// Write amplification over a recent window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowReport {
    /// Window length actually covered, s.
    pub seconds: f64,
    /// Host bytes written in the window.
    pub host_written_bytes: u64,
    /// NAND bytes programmed in the window.
    pub nand_bytes_programmed: u64,
    /// Their ratio (0 when the host wrote nothing).
    pub write_amplification: f64,
}

/// The reply to `stats`: one type for the daemon that builds it and the
/// client that prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatsReport {
    /// The drive.
    pub drive: DriveReport,
    /// All frontends together.
    pub connection: ConnectionReport,
    /// Each frontend, with its connections and TRIM audit.
    pub frontends: Vec<FrontendReport>,
    /// The model's counters (lifetime).
    pub counters: Counters,
    /// Write amplification over the last minute or so (sampled each second).
    #[serde(default)]
    pub recent: Option<WindowReport>,
    /// Delivered − modelled completion time.
    pub lateness: Summary,
    /// Per operation kind, keyed by [`OpKind::name`].
    pub ops: BTreeMap<String, OpReport>,
    /// Injected faults and what they did (`ctl fault list`).
    #[serde(default)]
    pub faults: crate::faults::FaultReport,
}

impl StatsReport {
    /// The TRIM audit of every frontend added up.
    pub fn trim_total(&self) -> TrimReport {
        let mut t = TrimReport::default();
        for f in &self.frontends {
            let x = &f.io.trim;
            t.discard_cmds += x.discard_cmds;
            t.write_zeroes_cmds += x.write_zeroes_cmds;
            t.requested_bytes += x.requested_bytes;
            t.freed_bytes += x.freed_bytes;
            t.already_unmapped_bytes += x.already_unmapped_bytes;
        }
        t
    }
}
