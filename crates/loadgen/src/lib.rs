//! `vssd loadgen`: a vhost-user-blk driver of our own (the part QEMU and
//! the guest's virtio-blk driver play) that drives any vhost-user-blk
//! backend — `vssd serve`, `qemu-storage-daemon --export
//! type=vhost-user-blk` — without a guest, and measures it as fio would.
//!
//! - [`vring`]: the driver side of a split virtqueue (indirect chains,
//!   event indices);
//! - [`driver`]: the vhost-user conversation, shared memory, queues;
//! - [`blk`]: single virtio-blk requests (tests, one-off commands);
//! - [`job`]: the I/O pattern; [`worker`]: one queue's load on its own
//!   thread; [`verify`]: self-describing data blocks for `--verify`;
//! - [`report`]: fio-shaped JSON and text; [`malformed`]: the
//!   malformed-request mode (`--malformed`).

pub mod blk;
pub mod driver;
pub mod job;
pub mod malformed;
pub mod report;
pub mod verify;
pub mod vring;
pub mod worker;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use virtio_bindings::virtio_ring::{VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC};

pub use driver::{BlkDriver, BlkInfo, DriverError, DriverOptions};
pub use job::{Job, Rw};
pub use report::Report;

use vssd_common::cli_out::{self, StdoutError};
use vssd_common::clock::monotonic_ns;
use vssd_profile::size::parse_size;
use worker::{MAX_SEGMENTS, Window, Worker, slot_bytes};

/// `vssd loadgen` arguments.
#[derive(Debug, Clone, Args)]
pub struct LoadgenArgs {
    /// The backend's vhost-user socket (`vssd serve --socket`,
    /// `qemu-storage-daemon --export type=vhost-user-blk,addr.path=...`).
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
    /// I/O pattern.
    #[arg(long, value_enum, default_value_t = Rw::Randread)]
    pub rw: Rw,
    /// Percentage of reads with `--rw randrw`.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub rwmixread: u8,
    /// Block size (a multiple of 512), e.g. `4k`, `128k`.
    #[arg(long, value_name = "SIZE", default_value = "4k", value_parser = parse_size)]
    pub bs: u64,
    /// Requests in flight per queue.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub iodepth: u16,
    /// Queues to drive, one thread each (at most what the backend offers).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub queues: u16,
    /// Seconds measured.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub runtime: f64,
    /// Seconds run before measuring starts (fio's `ramp_time`).
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub ramp: f64,
    /// Bytes of the disk to use, from `--offset` [default: the rest of
    /// the disk]. Split evenly between the queues.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub size: Option<u64>,
    /// First byte of the disk to use.
    #[arg(long, value_name = "SIZE", default_value = "0", value_parser = parse_size)]
    pub offset: u64,
    /// Stop each queue after it has transferred this many bytes (fio's
    /// `io_size`, per queue), or at `--runtime`, whichever comes first.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub io_size: Option<u64>,
    /// Check data: writes carry self-describing blocks, reads are checked
    /// against what this run last wrote there (or, for blocks it did not
    /// write, against their own header: zeros or an earlier `--verify`
    /// run's blocks of the same `--bs` pass), and at the end every block
    /// written is read back and checked. A mismatch fails the run.
    #[arg(long)]
    pub verify: bool,
    /// Print the report as fio-shaped JSON.
    #[arg(long)]
    pub json: bool,
    /// Virtqueue size [default: 128, or more for deep queues].
    #[arg(long, value_name = "N")]
    pub queue_size: Option<u16>,
    /// Do not use indirect descriptors even if the backend offers them
    /// (each request then takes 3 ring descriptors).
    #[arg(long)]
    pub no_indirect: bool,
    /// Do not negotiate VIRTIO_RING_F_EVENT_IDX (the backend then signals
    /// every used-ring update unless told not to).
    #[arg(long)]
    pub no_event_idx: bool,
    /// Seed of the offsets (and verify generations).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Instead of a workload, send malformed requests (out-of-range
    /// sectors, bad descriptor layouts, unknown types, oversized
    /// segments), print the status each gets and check that the backend
    /// keeps serving; fails if a request gets OK or the backend stops.
    #[arg(long, conflicts_with = "verify")]
    pub malformed: bool,
    /// Give up when a queue has requests in flight and sees no completion
    /// for this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub stall_timeout: f64,
}

/// Errors of `vssd loadgen`.
#[derive(Debug, thiserror::Error)]
pub enum LoadgenError {
    /// Bad option values.
    #[error("{0}")]
    Usage(String),
    /// The driver failed.
    #[error("driving {socket}")]
    Driver {
        /// The socket.
        socket: PathBuf,
        /// Why.
        #[source]
        source: DriverError,
    },
    /// A worker thread panicked.
    #[error("a queue thread failed: {0}")]
    Thread(String),
    /// Requests failed or data did not verify (the report says which).
    #[error("{0}")]
    Failed(String),
    /// Writing the report failed.
    #[error(transparent)]
    Stdout(#[from] StdoutError),
}

fn secs(s: f64, what: &str) -> Result<Duration, LoadgenError> {
    Duration::try_from_secs_f64(s)
        .map_err(|_| LoadgenError::Usage(format!("{what} must be a number of seconds ≥ 0")))
}

/// Virtqueue size for `iodepth` requests: 128 (QEMU's default) or the
/// next power of two that holds them (3 descriptors each without indirect).
pub fn default_queue_size(iodepth: u16, indirect: bool) -> u16 {
    let per = if indirect { 1 } else { 3 };
    (u32::from(iodepth) * per)
        .next_power_of_two()
        .clamp(128, 32768) as u16
}

/// Run the load against the backend and return the report (not printed).
pub fn run_job(args: &LoadgenArgs) -> Result<Report, LoadgenError> {
    let drv = |source| LoadgenError::Driver {
        socket: args.socket.clone(),
        source,
    };
    if args.bs == 0 || !args.bs.is_multiple_of(512) || args.bs > u64::from(u32::MAX) {
        return Err(LoadgenError::Usage(format!(
            "--bs {} must be a non-zero multiple of 512 (below 4 GiB)",
            args.bs
        )));
    }
    if args.verify && args.bs < verify::HEADER as u64 {
        return Err(LoadgenError::Usage(
            "--verify needs --bs of 512 or more".into(),
        ));
    }
    let runtime = secs(args.runtime, "--runtime")?;
    let ramp = secs(args.ramp, "--ramp")?;
    let stall = secs(args.stall_timeout, "--stall-timeout")?;

    // Queue size: from the iodepth, assuming indirect descriptors unless
    // refused (the backend's offer is only known after connecting, so a
    // backend without them gets a larger queue asked up front when needed).
    let qsize = args
        .queue_size
        .unwrap_or_else(|| default_queue_size(args.iodepth, false));
    if !qsize.is_power_of_two() {
        return Err(LoadgenError::Usage(format!(
            "--queue-size {qsize} must be a power of two"
        )));
    }
    let stride = slot_bytes(args.bs);
    let per_queue = stride * u64::from(args.iodepth);
    let rings = vring::ring_bytes(qsize) * u64::from(args.queues);
    let mem_bytes = (rings.div_ceil(4096) * 4096 + per_queue * u64::from(args.queues) + (2 << 20))
        .next_multiple_of(2 << 20);
    let mut d = BlkDriver::connect(
        &args.socket,
        &DriverOptions {
            queues: args.queues,
            queue_size: qsize,
            mem_bytes,
            event_idx: !args.no_event_idx,
            declared_mem_bytes: None,
        },
    )
    .map_err(drv)?;
    let info = *d.info();
    let indirect = !args.no_indirect && info.features & (1 << VIRTIO_RING_F_INDIRECT_DESC) != 0;
    let seg_bytes = if info.size_max > 0 {
        u64::from(info.size_max) & !511
    } else {
        args.bs
    }
    .max(512);
    let segments = args.bs.div_ceil(seg_bytes);
    if segments > MAX_SEGMENTS || (info.seg_max > 0 && segments > u64::from(info.seg_max)) {
        return Err(LoadgenError::Usage(format!(
            "--bs {} needs {segments} data segments of at most {seg_bytes} bytes; \
             the backend takes {} (seg_max) and loadgen {MAX_SEGMENTS}",
            args.bs, info.seg_max
        )));
    }
    let need = if indirect { 1 } else { segments + 2 } * u64::from(args.iodepth);
    if need > u64::from(qsize) {
        return Err(LoadgenError::Usage(format!(
            "--iodepth {} needs {need} descriptors per queue: use --queue-size {}",
            args.iodepth,
            need.next_power_of_two()
        )));
    }
    if args.offset >= info.capacity || !args.offset.is_multiple_of(args.bs) {
        return Err(LoadgenError::Usage(format!(
            "--offset {} must be a multiple of --bs inside the disk ({} bytes)",
            args.offset, info.capacity
        )));
    }
    let size = args
        .size
        .unwrap_or(info.capacity - args.offset)
        .min(info.capacity - args.offset);
    if size / args.bs < u64::from(args.queues) {
        return Err(LoadgenError::Usage(format!(
            "--size {} holds fewer blocks of {} than there are queues",
            size, args.bs
        )));
    }
    let job = Job {
        rw: args.rw,
        rwmixread: args.rwmixread,
        bs: args.bs,
        iodepth: args.iodepth,
        queues: args.queues,
        runtime,
        ramp,
        offset: args.offset,
        size,
        verify: args.verify,
        seed: args.seed,
        indirect,
        io_limit: args.io_size.map(|b| b.div_ceil(args.bs)),
    };
    let slots_base = d.alloc(per_queue * u64::from(args.queues)).map_err(drv)?;
    let mem = d.memory().clone();
    let queues = d.take_queues();
    let progress: Vec<AtomicU64> = (0..args.queues).map(|_| AtomicU64::new(0)).collect();
    let stop = AtomicBool::new(false);

    let t0 = monotonic_ns();
    let window = Window {
        start_ns: t0 + ramp.as_nanos() as u64,
        end_ns: t0 + (ramp + runtime).as_nanos() as u64,
    };
    let show = !args.json && std::io::stderr().is_terminal();
    let outcome = std::thread::scope(|s| {
        let handles: Vec<_> = queues
            .into_iter()
            .enumerate()
            .map(|(i, vq)| {
                let (job, mem, progress, stop) = (&job, &mem, &progress[i], &stop);
                let at = slots_base + i as u64 * per_queue;
                std::thread::Builder::new()
                    .name(format!("loadgen-q{i}"))
                    .spawn_scoped(s, move || {
                        Worker::new(i as u16, mem, vq, job, at, seg_bytes, progress)
                            .run(window, stall, stop)
                    })
            })
            .collect();
        if show {
            show_progress(&handles, &progress, ramp + runtime);
        }
        let mut results = Vec::new();
        let mut vqs = Vec::new();
        let mut first_err = None;
        for h in handles {
            match h {
                Ok(h) => match h.join() {
                    Ok(Ok((r, vq))) => {
                        results.push(r);
                        vqs.push(vq);
                    }
                    Ok(Err(e)) => {
                        stop.store(true, Ordering::Relaxed);
                        first_err.get_or_insert(drv(e));
                    }
                    Err(_) => {
                        stop.store(true, Ordering::Relaxed);
                        first_err.get_or_insert(LoadgenError::Thread("panicked".into()));
                    }
                },
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    first_err.get_or_insert(LoadgenError::Thread(e.to_string()));
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok((results, vqs)),
        }
    });
    let (results, vqs) = outcome?;
    let finished = monotonic_ns().min(window.end_ns);
    d.return_queues(vqs);
    let backend = report::BackendReport {
        socket: args.socket.display().to_string(),
        capacity: info.capacity,
        num_queues: info.num_queues,
        features: format!("{:#x}", info.features),
        event_idx: info.features & (1 << VIRTIO_RING_F_EVENT_IDX) != 0,
        indirect,
        queue_size: qsize,
    };
    let measured = finished.saturating_sub(window.start_ns) as f64 / 1e9;
    Ok(report::build(&job, backend, &results, measured))
}

fn show_progress<T>(
    handles: &[std::io::Result<std::thread::ScopedJoinHandle<'_, T>>],
    progress: &[AtomicU64],
    total: Duration,
) {
    let bar = indicatif::ProgressBar::new(total.as_millis() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {elapsed_precise} {wide_bar} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let start = Instant::now();
    let mut last = (Instant::now(), 0u64);
    while handles
        .iter()
        .any(|h| h.as_ref().is_ok_and(|h| !h.is_finished()))
    {
        std::thread::sleep(Duration::from_millis(250));
        let done: u64 = progress.iter().map(|p| p.load(Ordering::Relaxed)).sum();
        let now = Instant::now();
        let dt = now.duration_since(last.0).as_secs_f64();
        if dt > 0.0 {
            bar.set_message(format!("{:.0} IOPS", (done - last.1) as f64 / dt));
        }
        last = (now, done);
        bar.set_position(start.elapsed().as_millis() as u64);
    }
    bar.finish_and_clear();
}

/// `vssd loadgen`: run, print, and fail if requests failed or data did
/// not verify.
pub fn run(args: LoadgenArgs) -> Result<(), LoadgenError> {
    if args.malformed {
        let r =
            malformed::run(&args.socket, args.queues).map_err(|source| LoadgenError::Driver {
                socket: args.socket.clone(),
                source,
            })?;
        if args.json {
            cli_out::print(&format!(
                "{}\n",
                serde_json::to_string_pretty(&r).unwrap_or_default()
            ))?;
        } else {
            cli_out::print(&malformed::text(&r))?;
        }
        return if r.passed {
            Ok(())
        } else {
            Err(LoadgenError::Failed(
                "the backend answered a malformed request with OK, or stopped serving".into(),
            ))
        };
    }
    let r = run_job(&args)?;
    if args.json {
        cli_out::print(&format!(
            "{}\n",
            serde_json::to_string_pretty(&r).unwrap_or_default()
        ))?;
    } else {
        cli_out::print(&report::text(&r))?;
    }
    let j = &r.jobs[0];
    let verify_errors = j.verify.as_ref().map_or(0, |v| v.errors);
    if j.io_errors > 0 || verify_errors > 0 {
        return Err(LoadgenError::Failed(format!(
            "{} request(s) failed, {} block(s) did not verify",
            j.io_errors, verify_errors
        )));
    }
    Ok(())
}
