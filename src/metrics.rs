//! `vssd serve --metrics ADDR`: the drive's counters, latency and lateness
//! in the Prometheus text format, for the dashboards users already have.
//!
//! Every scrape builds the same [`StatsReport`] as `vssd ctl stats`
//! (so the numbers are the same: counters, gauges, and the percentiles as
//! `*_quantile_seconds` gauges), plus the latency and lateness histograms
//! as Prometheus histograms with power-of-two buckets from 1 µs to ~17 s.
//! Encoding is `prometheus-client`'s; the HTTP side is a minimal
//! one-request-per-connection server (`GET /metrics`), up to 8 requests
//! at once, each with a 10 s deadline for the whole request.

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Scrapes served at once.
const MAX_SCRAPES: usize = 8;

/// How long a client may take to send its whole request.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

use log::{debug, info, warn};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use vssd_device::hist::{Histogram, Summary};
use vssd_device::{Device, OpKind, StatsReport};

/// Histogram buckets: 2^10 ns (~1 µs) .. 2^34 ns (~17 s).
const LO_BITS: u32 = 10;
const HI_BITS: u32 = 34;

/// The collector: one report per scrape.
#[derive(Debug)]
struct DeviceCollector {
    device: Weak<Device>,
}

type Labels = Vec<(&'static str, String)>;

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

struct Enc<'a, 'b> {
    e: &'a mut DescriptorEncoder<'b>,
}

impl Enc<'_, '_> {
    fn counter(&mut self, name: &str, help: &str, v: u64) -> std::fmt::Result {
        let mut m = self
            .e
            .encode_descriptor(name, help, None, MetricType::Counter)?;
        m.encode_counter::<NoLabelSet, _, u64>(&v, None)
    }

    fn counter_f(&mut self, name: &str, help: &str, v: f64) -> std::fmt::Result {
        let mut m = self
            .e
            .encode_descriptor(name, help, None, MetricType::Counter)?;
        m.encode_counter::<NoLabelSet, _, f64>(&v, None)
    }

    fn gauge(&mut self, name: &str, help: &str, v: f64) -> std::fmt::Result {
        let mut m = self
            .e
            .encode_descriptor(name, help, None, MetricType::Gauge)?;
        m.encode_gauge(&v)
    }

    fn counters(&mut self, name: &str, help: &str, rows: &[(Labels, u64)]) -> std::fmt::Result {
        let mut m = self
            .e
            .encode_descriptor(name, help, None, MetricType::Counter)?;
        for (l, v) in rows {
            m.encode_family(l)?
                .encode_counter::<NoLabelSet, _, u64>(v, None)?;
        }
        Ok(())
    }

    fn counters_f(&mut self, name: &str, help: &str, rows: &[(Labels, f64)]) -> std::fmt::Result {
        let mut m = self
            .e
            .encode_descriptor(name, help, None, MetricType::Counter)?;
        for (l, v) in rows {
            m.encode_family(l)?
                .encode_counter::<NoLabelSet, _, f64>(v, None)?;
        }
        Ok(())
    }

    fn gauges(&mut self, name: &str, help: &str, rows: &[(Labels, f64)]) -> std::fmt::Result {
        let mut m = self
            .e
            .encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (l, v) in rows {
            if l.is_empty() {
                m.encode_gauge(v)?;
            } else {
                m.encode_family(l)?.encode_gauge(v)?;
            }
        }
        Ok(())
    }

    fn histograms(
        &mut self,
        name: &str,
        help: &str,
        rows: &[(Labels, &Histogram)],
    ) -> std::fmt::Result {
        let mut m = self
            .e
            .encode_descriptor(name, help, None, MetricType::Histogram)?;
        for (l, h) in rows {
            let buckets: Vec<(f64, u64)> = h
                .pow2_buckets(LO_BITS, HI_BITS)
                .into_iter()
                .map(|(le, n)| (if le == u64::MAX { f64::MAX } else { secs(le) }, n))
                .collect();
            let count = buckets.iter().map(|b| b.1).sum();
            if l.is_empty() {
                m.encode_histogram::<NoLabelSet>(secs(h.sum()), count, &buckets, None)?;
            } else {
                m.encode_family(l)?.encode_histogram::<NoLabelSet>(
                    secs(h.sum()),
                    count,
                    &buckets,
                    None,
                )?;
            }
        }
        Ok(())
    }
}

fn quantiles(base: &Labels, s: &Summary) -> Vec<(Labels, f64)> {
    [
        ("0.5", s.p50_ns),
        ("0.9", s.p90_ns),
        ("0.99", s.p99_ns),
        ("0.999", s.p999_ns),
        ("1", s.max_ns),
    ]
    .iter()
    .map(|(q, v)| {
        let mut l = base.clone();
        l.push(("quantile", (*q).to_string()));
        (l, secs(*v))
    })
    .collect()
}

/// The same values as `vssd ctl smart`: ATA attributes by ID and name, or
/// the NVMe health log fields.
fn encode_smart(sm: &vssd_device::smart::SmartReport, e: &mut Enc<'_, '_>) -> std::fmt::Result {
    if let Some(n) = &sm.nvme {
        if let Some(p) = n.percentage_used {
            e.gauge(
                "vssd_nvme_percentage_used",
                "NVMe health log: percentage used (mean erase count over the rated P/E cycles)",
                p as f64,
            )?;
        }
        for (name, help, v) in [
            (
                "vssd_nvme_data_units_read",
                "NVMe health log: data units read (1000 x 512 bytes, rounded up)",
                n.data_units_read,
            ),
            (
                "vssd_nvme_data_units_written",
                "NVMe health log: data units written (1000 x 512 bytes, rounded up)",
                n.data_units_written,
            ),
            (
                "vssd_nvme_host_read_commands",
                "NVMe health log: host read commands",
                n.host_read_commands,
            ),
            (
                "vssd_nvme_host_write_commands",
                "NVMe health log: host write commands",
                n.host_write_commands,
            ),
            (
                "vssd_nvme_media_errors",
                "NVMe health log: media and data integrity errors",
                n.media_errors,
            ),
        ] {
            e.counter(name, help, v)?;
        }
        return Ok(());
    }
    let label = |a: &vssd_device::smart::Attribute| -> Labels {
        vec![("id", a.id.to_string()), ("name", a.name.clone())]
    };
    let raw: Vec<(Labels, f64)> = sm
        .attributes
        .iter()
        .map(|a| (label(a), a.raw as f64))
        .collect();
    e.gauges(
        "vssd_smart_attribute_raw",
        "SMART attribute raw value, in the attribute set of the drive's controller (vssd ctl smart)",
        &raw,
    )?;
    let value: Vec<(Labels, f64)> = sm
        .attributes
        .iter()
        .filter_map(|a| a.value.map(|v| (label(a), v as f64)))
        .collect();
    e.gauges(
        "vssd_smart_attribute_value",
        "SMART attribute normalised value (100 = new)",
        &value,
    )
}

fn encode_report(dev: &Device, r: &StatsReport, e: &mut Enc<'_, '_>) -> std::fmt::Result {
    let d = &r.drive;
    {
        let mut m =
            e.e.encode_descriptor("vssd_drive", "The emulated drive", None, MetricType::Info)?;
        let labels: Labels = vec![
            ("profile", d.profile.clone()),
            ("serial", d.serial.clone()),
            (
                "model",
                d.identity
                    .as_ref()
                    .map(|i| i.model.clone())
                    .unwrap_or_default(),
            ),
            (
                "firmware",
                d.identity
                    .as_ref()
                    .map(|i| i.firmware.clone())
                    .unwrap_or_default(),
            ),
            (
                "backing",
                d.backing.clone().unwrap_or_else(|| "memory".into()),
            ),
        ];
        m.encode_info(&labels)?;
    }
    encode_smart(&vssd_device::smart::report(dev.profile(), &r.counters), e)?;
    e.gauge(
        "vssd_drive_capacity_bytes",
        "Exported capacity",
        d.capacity as f64,
    )?;
    e.gauge(
        "vssd_store_allocated_bytes",
        "Bytes allocated in the data store (file blocks or memory pages)",
        d.allocated_bytes as f64,
    )?;
    e.gauge(
        "vssd_store_pending_zero_bytes",
        "Bytes discarded but not yet zeroed in the backing file",
        d.pending_zero_bytes as f64,
    )?;
    e.gauge(
        "vssd_model_memory_bytes",
        "Heap bytes of the drive model's state",
        d.model_bytes as f64,
    )?;
    e.gauge(
        "vssd_process_resident_memory_bytes",
        "Resident memory of the daemon",
        d.rss_bytes as f64,
    )?;
    e.gauge(
        "vssd_time_scale",
        "Time dilation K (serve --time-scale): the drive's clock runs K times slower than the \
         wall clock; latencies and lateness here are in the drive's time",
        d.time_scale,
    )?;
    e.gauge(
        "vssd_stopped",
        "1 if the drive stopped after an internal failure",
        if d.stopped.is_some() { 1.0 } else { 0.0 },
    )?;

    let c = &r.connection;
    e.gauge(
        "vssd_connected",
        "1 while a frontend client is connected",
        if c.connected { 1.0 } else { 0.0 },
    )?;
    e.counter(
        "vssd_connections",
        "Client connections so far",
        c.connections,
    )?;
    e.gauge(
        "vssd_in_flight",
        "Requests not completed yet",
        c.in_flight as f64,
    )?;
    e.gauge(
        "vssd_max_in_flight",
        "The most requests in flight at once since start, all frontends",
        c.depth.max_in_flight as f64,
    )?;
    e.counter_f(
        "vssd_busy_seconds",
        "Time with at least one request in flight",
        secs(c.depth.busy_ns),
    )?;
    e.counter_f(
        "vssd_request_seconds",
        "Time integral of the in-flight count; rate(vssd_request_seconds) / \
         rate(vssd_busy_seconds) is the mean queue depth while busy",
        secs(c.depth.request_ns),
    )?;
    e.counter(
        "vssd_rejected",
        "Malformed or unsupported requests",
        c.rejected,
    )?;
    e.counter(
        "vssd_abandoned",
        "Requests whose client went away before their completion",
        c.abandoned,
    )?;

    let f = &r.faults;
    e.gauge(
        "vssd_read_only",
        "1 once the drive is read-only: worn out ([wear] end_of_life) or out of spare blocks",
        if f.read_only { 1.0 } else { 0.0 },
    )?;
    e.gauge(
        "vssd_powered",
        "0 while the drive's power is cut (ctl power-cut)",
        if f.power.powered { 1.0 } else { 0.0 },
    )?;
    e.counter("vssd_power_cuts", "Power cuts so far", f.power.cuts)?;
    e.gauge(
        "vssd_faults_active",
        "Injected faults registered now (ctl fault list)",
        f.active.len() as f64,
    )?;
    e.counters(
        "vssd_fault_errors_injected",
        "Requests failed by an injected media fault, by direction",
        &[
            (vec![("op", "read".into())], f.counters.read_errors_injected),
            (
                vec![("op", "write".into())],
                f.counters.write_errors_injected,
            ),
        ],
    )?;
    e.counter(
        "vssd_fault_stalls",
        "Injected stalls that held at least one command",
        f.counters.stalls_injected,
    )?;
    e.counter(
        "vssd_fault_stalled_commands",
        "Commands that waited for the end of an injected stall",
        f.counters.stalled_commands,
    )?;
    e.counter_f(
        "vssd_fault_stall_wait_seconds",
        "Drive time commands waited for injected stalls, in all",
        secs(f.counters.stall_wait_ns),
    )?;
    e.counter(
        "vssd_fault_throttled_commands",
        "Commands an injected throttle slowed",
        f.counters.throttled_commands,
    )?;
    e.counter_f(
        "vssd_fault_throttle_delay_seconds",
        "Drive time injected throttles added to commands' latency, in all",
        secs(f.counters.throttle_delay_ns),
    )?;
    e.counter(
        "vssd_uncorrectable_reads",
        "Reads failed by the media-wear model (or at a unit it left uncorrectable)",
        f.counters.uncorrectable_reads,
    )?;
    e.gauge(
        "vssd_grown_bad_blocks",
        "Blocks retired in service (grown bad blocks)",
        r.counters.grown_bad_blocks as f64,
    )?;

    let k = &r.counters;
    for (name, help, v) in [
        (
            "vssd_host_read_bytes",
            "Bytes read by the host",
            k.host_read_bytes,
        ),
        (
            "vssd_host_written_bytes",
            "Bytes written by the host",
            k.host_written_bytes,
        ),
        (
            "vssd_host_trimmed_bytes",
            "Bytes the host trimmed",
            k.host_trimmed_bytes,
        ),
        (
            "vssd_host_read_commands",
            "Host read commands",
            k.host_read_cmds,
        ),
        (
            "vssd_host_write_commands",
            "Host write commands",
            k.host_write_cmds,
        ),
        (
            "vssd_host_trim_commands",
            "Host TRIM commands",
            k.host_trim_cmds,
        ),
        (
            "vssd_host_flush_commands",
            "Host FLUSH commands",
            k.host_flush_cmds,
        ),
        ("vssd_nand_pages_read", "NAND page reads", k.nand_pages_read),
        (
            "vssd_nand_pages_programmed",
            "NAND pages programmed",
            k.nand_pages_programmed,
        ),
        (
            "vssd_nand_bytes_programmed",
            "Bytes programmed to NAND",
            k.nand_bytes_programmed,
        ),
        ("vssd_erases", "Block erases", k.erases),
        (
            "vssd_gc_copies",
            "Mapping units copied by garbage collection",
            k.gc_copies,
        ),
        (
            "vssd_gc_victims",
            "Blocks reclaimed by garbage collection",
            k.gc_victims,
        ),
        (
            "vssd_gc_foreground_victims",
            "Blocks reclaimed while host writes waited",
            k.fg_gc_victims,
        ),
        (
            "vssd_gc_background_victims",
            "Blocks reclaimed in idle time",
            k.bg_gc_victims,
        ),
        (
            "vssd_rmw_reads",
            "Mapping units read back for sub-unit writes",
            k.rmw_reads,
        ),
    ] {
        e.counter(name, help, v)?;
    }
    e.counter_f(
        "vssd_buffer_stall_seconds",
        "Time host writes waited for write-buffer space",
        secs(k.buffer_stall_ns),
    )?;
    for (name, help, v) in [
        (
            "vssd_write_amplification",
            "NAND bytes programmed / host bytes written (lifetime)",
            k.write_amplification,
        ),
        ("vssd_free_blocks", "Erased blocks", k.free_blocks as f64),
        ("vssd_blocks", "All blocks", k.total_blocks as f64),
        (
            "vssd_mapped_units",
            "Logical mapping units mapped",
            k.mapped_units as f64,
        ),
        (
            "vssd_units",
            "Logical mapping units exported",
            k.total_units as f64,
        ),
        (
            "vssd_erase_count_min",
            "Lowest erase count of a block",
            f64::from(k.erase_count_min),
        ),
        (
            "vssd_erase_count_avg",
            "Mean erase count",
            k.erase_count_avg,
        ),
        (
            "vssd_erase_count_max",
            "Highest erase count of a block",
            f64::from(k.erase_count_max),
        ),
    ] {
        e.gauge(name, help, v)?;
    }
    if let Some(w) = &r.recent {
        e.gauge(
            "vssd_recent_write_amplification",
            "Write amplification over the last minute",
            w.write_amplification,
        )?;
    }

    let ops: Vec<(&String, _)> = r.ops.iter().collect();
    let op_rows = |f: &dyn Fn(&vssd_device::stats::OpReport) -> u64| -> Vec<(Labels, u64)> {
        ops.iter()
            .map(|(n, o)| (vec![("op", (*n).clone())], f(o)))
            .collect()
    };
    e.counters(
        "vssd_requests",
        "Requests completed, by operation",
        &op_rows(&|o| o.cmds),
    )?;
    e.counters(
        "vssd_request_bytes",
        "Bytes moved, by operation",
        &op_rows(&|o| o.bytes),
    )?;
    e.counters(
        "vssd_request_errors",
        "Requests that failed, by operation",
        &op_rows(&|o| o.errors),
    )?;

    let mut trims: Vec<(Labels, u64)> = Vec::new();
    let mut freed: Vec<(Labels, u64)> = Vec::new();
    let mut max_depth: Vec<(Labels, f64)> = Vec::new();
    let mut busy: Vec<(Labels, f64)> = Vec::new();
    let mut request_s: Vec<(Labels, f64)> = Vec::new();
    for f in &r.frontends {
        let l: Labels = vec![("frontend", f.kind.clone()), ("listener", f.name.clone())];
        trims.push((l.clone(), f.io.trim.requested_bytes));
        freed.push((l.clone(), f.io.trim.freed_bytes));
        max_depth.push((l.clone(), f.io.depth.max_in_flight as f64));
        busy.push((l.clone(), secs(f.io.depth.busy_ns)));
        request_s.push((l, secs(f.io.depth.request_ns)));
    }
    e.gauges(
        "vssd_frontend_max_in_flight",
        "The most requests a frontend has had in flight at once",
        &max_depth,
    )?;
    e.counters_f(
        "vssd_frontend_busy_seconds",
        "Time a frontend had at least one request in flight",
        &busy,
    )?;
    e.counters_f(
        "vssd_frontend_request_seconds",
        "Time integral of a frontend's in-flight count; its rate over \
         rate(vssd_frontend_busy_seconds) is the mean queue depth while busy",
        &request_s,
    )?;
    e.counters(
        "vssd_trim_requested_bytes",
        "Bytes the host asked to TRIM, by frontend",
        &trims,
    )?;
    e.counters(
        "vssd_trim_freed_bytes",
        "Mapped bytes a TRIM freed, by frontend",
        &freed,
    )?;

    let stats = dev.stats();
    let mut hists: Vec<(Labels, &Histogram)> = Vec::new();
    let mut qs: Vec<(Labels, f64)> = Vec::new();
    for op in OpKind::ALL {
        let (modelled, delivered) = stats.latency(op);
        for (stage, h) in [("modelled", modelled), ("delivered", delivered)] {
            let l: Labels = vec![("op", op.name().to_string()), ("stage", stage.to_string())];
            if let Some(o) = r.ops.get(op.name()) {
                let s = if stage == "modelled" {
                    &o.modelled
                } else {
                    &o.delivered
                };
                qs.extend(quantiles(&l, s));
            }
            hists.push((l, h));
        }
    }
    e.histograms(
        "vssd_latency_seconds",
        "Request latency: modelled (the drive's) and delivered (to the client)",
        &hists,
    )?;
    e.gauges(
        "vssd_latency_quantile_seconds",
        "Latency percentiles as vssd ctl stats shows them",
        &qs,
    )?;
    e.histograms(
        "vssd_lateness_seconds",
        "Delivered minus modelled completion time",
        &[(Vec::new(), stats.lateness())],
    )?;
    e.gauges(
        "vssd_lateness_quantile_seconds",
        "Lateness percentiles as vssd ctl stats shows them",
        &quantiles(&Vec::new(), &r.lateness),
    )?;
    Ok(())
}

impl Collector for DeviceCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Some(dev) = self.device.upgrade() else {
            return Ok(());
        };
        let r = dev.report();
        encode_report(&dev, &r, &mut Enc { e: &mut encoder })
    }
}

/// The metrics of `device` in the Prometheus text format.
pub fn render(device: &Arc<Device>) -> String {
    let mut reg = Registry::default();
    reg.register_collector(Box::new(DeviceCollector {
        device: Arc::downgrade(device),
    }));
    let mut out = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &reg) {
        let _ = writeln!(out, "# encoding failed: {e}");
    }
    out
}

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

#[cfg(test)]
mod tests;
