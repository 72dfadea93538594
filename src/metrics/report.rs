//! What a scrape holds: the drive, its connections, faults, flash
//! counters, requests by operation and frontend, SMART, and the latency
//! and lateness histograms; the same [`StatsReport`] as `vssd ctl stats`.

use prometheus_client::metrics::MetricType;

use super::encode::{Enc, Labels, quantiles, secs};
use vssd_device::hist::Histogram;
use vssd_device::{Device, OpKind, StatsReport};

/// Every metric of one scrape, from `r` (and the device's histograms).
pub(super) fn encode_report(
    dev: &Device,
    r: &StatsReport,
    e: &mut Enc<'_, '_>,
) -> std::fmt::Result {
    drive(dev, r, e)?;
    connections(r, e)?;
    faults(r, e)?;
    flash(r, e)?;
    requests(r, e)?;
    frontends(r, e)?;
    latency(dev, r, e)
}

/// The drive: its identity (an info metric), SMART, capacity, store,
/// memory, time scale, whether it stopped.
fn drive(dev: &Device, r: &StatsReport, e: &mut Enc<'_, '_>) -> std::fmt::Result {
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
    Ok(())
}

/// Connections and requests in flight, all frontends together.
fn connections(r: &StatsReport, e: &mut Enc<'_, '_>) -> std::fmt::Result {
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
    Ok(())
}

/// Power, read-only state and injected faults.
fn faults(r: &StatsReport, e: &mut Enc<'_, '_>) -> std::fmt::Result {
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
    if let Some(t) = r.counters.temperature_c {
        // Only where the profile has a thermal model ([thermal]).
        e.gauge(
            "vssd_temperature_celsius",
            "The drive's temperature (thermal model)",
            t,
        )?;
        e.gauge(
            "vssd_throttle_step",
            "The thermal throttle step the drive is in (0: none)",
            r.counters.throttle_level as f64,
        )?;
    }
    Ok(())
}

/// The flash: host and NAND traffic, GC, free blocks, mapping, wear.
fn flash(r: &StatsReport, e: &mut Enc<'_, '_>) -> std::fmt::Result {
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
    Ok(())
}

/// Requests, bytes and errors by operation.
fn requests(r: &StatsReport, e: &mut Enc<'_, '_>) -> std::fmt::Result {
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
    Ok(())
}

/// Queue depth and TRIM by frontend.
fn frontends(r: &StatsReport, e: &mut Enc<'_, '_>) -> std::fmt::Result {
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
    e.counters(
        "vssd_frontend_busy_seconds",
        "Time a frontend had at least one request in flight",
        &busy,
    )?;
    e.counters(
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
    Ok(())
}

/// Latency (modelled and delivered, by operation) and lateness, as
/// histograms and as the percentiles `ctl stats` shows.
fn latency(dev: &Device, r: &StatsReport, e: &mut Enc<'_, '_>) -> std::fmt::Result {
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
