//! `vssd loadgen`'s results: fio-shaped JSON (`--json`) and a short text.

use std::fmt::Write as _;

use serde::Serialize;

use super::job::Job;
use super::worker::{QueueResult, VerifyResult};
use vssd_common::fio::{DEFAULT_PERCENTILES, Percentiles};
use vssd_common::hist::Histogram;
use vssd_profile::size::format_size;

/// fio's `clat_ns`.
#[derive(Debug, Clone, Serialize)]
pub struct Lat {
    /// Smallest, ns.
    pub min: u64,
    /// Largest, ns.
    pub max: u64,
    /// Mean, ns.
    pub mean: f64,
    /// Standard deviation, ns.
    pub stddev: f64,
    /// Samples.
    #[serde(rename = "N")]
    pub n: u64,
    /// Percentiles, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentile: Option<Percentiles>,
}

impl Lat {
    fn of(h: &Histogram) -> Lat {
        Lat {
            min: h.min(),
            max: h.max(),
            mean: round3(h.mean()),
            stddev: round3(h.stddev()),
            n: h.count(),
            percentile: (h.count() > 0).then(|| {
                Percentiles(
                    DEFAULT_PERCENTILES
                        .iter()
                        .map(|&p| (p, h.percentile(p)))
                        .collect(),
                )
            }),
        }
    }

    /// The value at percentile `p` of the listed ones (0 if absent).
    pub fn at(&self, p: f64) -> u64 {
        self.percentile
            .as_ref()
            .and_then(|ps| ps.at(p))
            .unwrap_or(0)
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// One direction, fio's field names.
#[derive(Debug, Clone, Serialize)]
pub struct DirReport {
    /// Bytes moved in the measured window.
    pub io_bytes: u64,
    /// The same in KiB.
    pub io_kbytes: u64,
    /// Bytes per second.
    pub bw_bytes: u64,
    /// KiB per second.
    pub bw: u64,
    /// Requests per second.
    pub iops: f64,
    /// Measured time, ms.
    pub runtime: u64,
    /// Requests completed in the window.
    pub total_ios: u64,
    /// Completion latency (submission to reaping).
    pub clat_ns: Lat,
    /// The same (there is no separate submission latency).
    pub lat_ns: Lat,
}

/// How often each side woke the other.
#[derive(Debug, Clone, Serialize)]
pub struct Notifications {
    /// Kicks the driver sent.
    pub kicks: u64,
    /// Used-ring signals (interrupts) the backend sent.
    pub calls: u64,
    /// Completions, measured or not.
    pub completions: u64,
    /// Interrupts per completed request: what a guest's CPU pays.
    pub calls_per_io: f64,
    /// Kicks per completed request.
    pub kicks_per_io: f64,
}

/// Per queue, briefly.
#[derive(Debug, Clone, Serialize)]
pub struct QueueReport {
    /// Queue index.
    pub queue: u16,
    /// Requests per second, both directions.
    pub iops: f64,
    /// Interrupts per completed request.
    pub calls_per_io: f64,
}

/// The job's options as fio prints them.
#[derive(Debug, Clone, Serialize)]
pub struct JobOptions {
    /// Pattern.
    pub rw: String,
    /// Block size.
    pub bs: String,
    /// Depth per queue.
    pub iodepth: String,
    /// Queues.
    pub numjobs: String,
    /// Seconds measured.
    pub runtime: String,
    /// Seconds of ramp.
    pub ramp_time: String,
    /// Region size.
    pub size: String,
    /// Read percentage.
    pub rwmixread: String,
    /// Verify on or off.
    pub verify: String,
}

/// One job (all queues together, as fio's `group_reporting`).
#[derive(Debug, Clone, Serialize)]
pub struct JobReport {
    /// Name.
    pub jobname: String,
    /// 0, or 1 when a request failed or data did not verify.
    pub error: i32,
    /// Options.
    #[serde(rename = "job options")]
    pub job_options: JobOptions,
    /// Reads.
    pub read: DirReport,
    /// Writes.
    pub write: DirReport,
    /// Measured time, ms.
    pub job_runtime: u64,
    /// Requests whose status was not OK.
    pub io_errors: u64,
    /// The first of them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub first_io_errors: Vec<String>,
    /// Kicks and interrupts.
    pub notifications: Notifications,
    /// Data checks (with `--verify`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifyResult>,
    /// Per queue.
    pub queues: Vec<QueueReport>,
}

/// What was driven.
#[derive(Debug, Clone, Serialize)]
pub struct BackendReport {
    /// Its socket.
    pub socket: String,
    /// Disk size, bytes.
    pub capacity: u64,
    /// Queues it offers.
    pub num_queues: u16,
    /// Virtio features acknowledged, hex.
    pub features: String,
    /// EVENT_IDX in use.
    pub event_idx: bool,
    /// Indirect descriptors in use.
    pub indirect: bool,
    /// Virtqueue size used.
    pub queue_size: u16,
}

/// The whole report, fio-shaped (`jobs[0].read.iops`, ...).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The program.
    #[serde(rename = "fio version")]
    pub version: String,
    /// Unix time at the end.
    pub timestamp: u64,
    /// The backend.
    pub backend: BackendReport,
    /// One job.
    pub jobs: Vec<JobReport>,
}

fn dir(h: &Histogram, ios: u64, bytes: u64, secs: f64, runtime_ms: u64) -> DirReport {
    let rate = |x: u64| if secs > 0.0 { x as f64 / secs } else { 0.0 };
    DirReport {
        io_bytes: bytes,
        io_kbytes: bytes / 1024,
        bw_bytes: rate(bytes).round() as u64,
        bw: (rate(bytes) / 1024.0).round() as u64,
        iops: round3(rate(ios)),
        runtime: if ios > 0 { runtime_ms } else { 0 },
        total_ios: ios,
        clat_ns: Lat::of(h),
        lat_ns: Lat {
            percentile: None,
            ..Lat::of(h)
        },
    }
}

fn per_io(n: u64, ios: u64) -> f64 {
    if ios == 0 {
        0.0
    } else {
        (n as f64 / ios as f64 * 1000.0).round() / 1000.0
    }
}

/// Merge the queues' results into the report.
pub fn build(job: &Job, backend: BackendReport, results: &[QueueResult], secs: f64) -> Report {
    let runtime_ms = (secs * 1000.0).round() as u64;
    let mut h = [Histogram::new(), Histogram::new()];
    let mut ios = [0u64; 2];
    let mut bytes = [0u64; 2];
    let mut verify = VerifyResult::default();
    let mut io_errors = 0;
    let mut first_io_errors = Vec::new();
    let (mut kicks, mut calls, mut completions) = (0, 0, 0);
    for r in results {
        for d in 0..2 {
            h[d].merge(&r.dirs[d].clat);
            ios[d] += r.dirs[d].ios;
            bytes[d] += r.dirs[d].bytes;
        }
        io_errors += r.io_errors;
        first_io_errors.extend(r.first_io_errors.iter().cloned());
        verify.blocks_checked += r.verify.blocks_checked;
        verify.pass_checked += r.verify.pass_checked;
        verify.unverifiable += r.verify.unverifiable;
        verify.errors += r.verify.errors;
        verify
            .first_errors
            .extend(r.verify.first_errors.iter().cloned());
        kicks += r.kicks;
        calls += r.calls;
        completions += r.completions;
    }
    first_io_errors.truncate(10);
    verify.first_errors.truncate(10);
    let failed = io_errors > 0 || verify.errors > 0;
    let queues = results
        .iter()
        .map(|r| QueueReport {
            queue: r.queue,
            iops: round3(if secs > 0.0 {
                (r.dirs[0].ios + r.dirs[1].ios) as f64 / secs
            } else {
                0.0
            }),
            calls_per_io: per_io(r.calls, r.completions),
        })
        .collect();
    Report {
        version: format!("vssd-loadgen-{}", env!("CARGO_PKG_VERSION")),
        timestamp: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        backend,
        jobs: vec![JobReport {
            jobname: "loadgen".into(),
            error: i32::from(failed),
            job_options: JobOptions {
                rw: job.rw.name().into(),
                bs: job.bs.to_string(),
                iodepth: job.iodepth.to_string(),
                numjobs: job.queues.to_string(),
                runtime: format!("{}", job.runtime.as_secs_f64()),
                ramp_time: format!("{}", job.ramp.as_secs_f64()),
                size: job.size.to_string(),
                rwmixread: job.rw.read_percent(job.rwmixread).to_string(),
                verify: if job.verify { "1" } else { "0" }.into(),
            },
            read: dir(&h[0], ios[0], bytes[0], secs, runtime_ms),
            write: dir(&h[1], ios[1], bytes[1], secs, runtime_ms),
            job_runtime: runtime_ms,
            io_errors,
            first_io_errors,
            notifications: Notifications {
                kicks,
                calls,
                completions,
                calls_per_io: per_io(calls, completions),
                kicks_per_io: per_io(kicks, completions),
            },
            verify: job.verify.then_some(verify),
            queues,
        }],
    }
}

fn usec(ns: u64) -> String {
    let us = ns as f64 / 1000.0;
    if us >= 100.0 {
        format!("{us:.0}")
    } else {
        format!("{us:.1}")
    }
}

fn human_rate(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e4 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// The report as a few lines of text.
pub fn text(r: &Report) -> String {
    let mut out = String::new();
    let b = &r.backend;
    for j in &r.jobs {
        let o = &j.job_options;
        let _ = writeln!(
            out,
            "loadgen: rw={} bs={} iodepth={} queues={} runtime={}s on {} ({}, {} queue(s) offered, queue size {}{}{})",
            o.rw,
            format_size(o.bs.parse().unwrap_or(0)),
            o.iodepth,
            o.numjobs,
            o.runtime,
            b.socket,
            format_size(b.capacity),
            b.num_queues,
            b.queue_size,
            if b.event_idx { ", event_idx" } else { "" },
            if b.indirect { ", indirect" } else { "" },
        );
        for (name, d) in [("read", &j.read), ("write", &j.write)] {
            if d.total_ios == 0 {
                continue;
            }
            let _ = writeln!(
                out,
                "  {name}: IOPS={}, BW={}/s ({:.1} MB/s)",
                human_rate(d.iops),
                format_size(d.bw_bytes),
                d.bw_bytes as f64 / 1e6
            );
            let c = &d.clat_ns;
            let _ = writeln!(
                out,
                "    clat (usec): min={}, max={}, avg={}, stdev={}",
                usec(c.min),
                usec(c.max),
                usec(c.mean as u64),
                usec(c.stddev as u64)
            );
            let _ = writeln!(
                out,
                "    clat percentiles (usec): 50th=[{}], 90th=[{}], 99th=[{}], 99.9th=[{}], 99.99th=[{}]",
                usec(c.at(50.0)),
                usec(c.at(90.0)),
                usec(c.at(99.0)),
                usec(c.at(99.9)),
                usec(c.at(99.99))
            );
        }
        let n = &j.notifications;
        let _ = writeln!(
            out,
            "  notifications: {:.3} interrupts/IO, {:.3} kicks/IO ({} completions)",
            n.calls_per_io, n.kicks_per_io, n.completions
        );
        if let Some(v) = &j.verify {
            let _ = writeln!(
                out,
                "  verify: {} blocks checked ({} in the read-back pass), {} errors{}",
                v.blocks_checked,
                v.pass_checked,
                v.errors,
                if v.unverifiable > 0 {
                    format!(", {} blocks held foreign data", v.unverifiable)
                } else {
                    String::new()
                }
            );
            for e in &v.first_errors {
                let _ = writeln!(out, "    {e}");
            }
        }
        if j.io_errors > 0 {
            let _ = writeln!(out, "  I/O errors: {}", j.io_errors);
            for e in &j.first_io_errors {
                let _ = writeln!(out, "    {e}");
            }
        }
    }
    out
}
