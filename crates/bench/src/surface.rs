//! HD Tune-style surface passes: at N positions spread over the whole
//! drive, write (or read) a burst of bytes in fixed-size requests and time
//! it; the result is throughput against position, the curve HD Tune draws.
//! HD Tune keeps one request in flight; `depth` > 1 keeps several, which
//! hides an emulator's per-request overhead behind the drive's own time.
//!
//! In a guest this is `vssd surface` (the host's own vssd binary, which the
//! test guest can run from the host root it mounts): O_DIRECT I/O on the
//! block device, timed with the monotonic clock. In the simulator the same
//! requests go to the model at the same positions, each starting when the
//! previous one completes.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use super::results::{Surface, SurfacePoint};
use super::scenario::SurfaceOp;
use vssd_profile::size::parse_size;
use vssd_sim::{SimError, Simulation};

/// `vssd surface` arguments.
#[derive(Debug, Args)]
pub struct SurfaceArgs {
    /// The block device (e.g. /dev/sda inside a guest). Writing destroys its data.
    #[arg(long, value_name = "DEV")]
    pub device: PathBuf,
    /// `read` or `write`.
    #[arg(long, value_enum, default_value = "read")]
    pub op: SurfaceOpArg,
    /// Request size.
    #[arg(long, default_value = "128k", value_parser = parse_size)]
    pub block: u64,
    /// Bytes per position.
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    pub burst: u64,
    /// Positions over the drive.
    #[arg(long, default_value_t = 64)]
    pub positions: u32,
    /// Requests in flight at once within a burst (1: as HD Tune does).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub depth: u32,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `--op` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SurfaceOpArg {
    /// Read.
    Read,
    /// Write (destroys data).
    Write,
}

/// Offsets of `n` bursts of `burst` bytes spread evenly over `capacity`,
/// aligned to `block`.
pub fn positions(capacity: u64, burst: u64, block: u64, n: u32) -> Vec<u64> {
    let n = u64::from(n.max(1));
    let span = capacity.saturating_sub(burst);
    (0..n)
        .map(|i| {
            let off = if n == 1 { 0 } else { span * i / (n - 1) };
            off / block.max(1) * block.max(1)
        })
        .collect()
}

fn point(capacity: u64, offset: u64, burst: u64, ns: u64, start_ns: u64) -> SurfacePoint {
    SurfacePoint {
        offset,
        position: offset as f64 / capacity.max(1) as f64,
        bytes_s: burst as f64 / (ns.max(1) as f64 / 1e9),
        start_s: Some(start_ns as f64 / 1e9),
    }
}

/// Linux native asynchronous I/O (`io_setup`, `io_submit`,
/// `io_getevents`): several O_DIRECT requests in flight from one thread,
/// as fio's libaio engine does.
mod aio {
    use std::io;

    /// `struct iocb` (linux/aio_abi.h), little-endian layout.
    #[repr(C)]
    #[derive(Default)]
    struct IoCb {
        aio_data: u64,
        aio_key: u32,
        aio_rw_flags: i32,
        aio_lio_opcode: u16,
        aio_reqprio: i16,
        aio_fildes: u32,
        aio_buf: u64,
        aio_nbytes: u64,
        aio_offset: i64,
        aio_reserved2: u64,
        aio_flags: u32,
        aio_resfd: u32,
    }

    /// `struct io_event`.
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct IoEvent {
        data: u64,
        obj: u64,
        res: i64,
        res2: i64,
    }

    const IOCB_CMD_PREAD: u16 = 0;
    const IOCB_CMD_PWRITE: u16 = 1;

    /// An AIO context (destroyed on drop).
    pub struct Context {
        id: libc::c_ulong,
    }

    impl Context {
        /// A context for `depth` requests in flight.
        pub fn new(depth: usize) -> io::Result<Context> {
            let mut id: libc::c_ulong = 0;
            // SAFETY: io_setup writes the new context id into `id`.
            let r = unsafe { libc::syscall(libc::SYS_io_setup, depth as libc::c_long, &mut id) };
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(Context { id })
        }

        /// Submit one read or write of `len` bytes at `buf` to `offset` of
        /// `fd`, tagged `data`. The buffer must stay valid until its
        /// completion is returned by [`Context::wait`].
        pub fn submit(
            &self,
            fd: i32,
            write: bool,
            buf: *mut u8,
            len: usize,
            offset: u64,
            data: u64,
        ) -> io::Result<()> {
            let mut cb = IoCb {
                aio_data: data,
                aio_lio_opcode: if write {
                    IOCB_CMD_PWRITE
                } else {
                    IOCB_CMD_PREAD
                },
                aio_fildes: fd as u32,
                aio_buf: buf as u64,
                aio_nbytes: len as u64,
                aio_offset: offset as i64,
                ..IoCb::default()
            };
            let mut list = [&mut cb as *mut IoCb];
            // SAFETY: one valid iocb; the kernel copies it during the call.
            // The buffer it points to outlives the request: the caller keeps
            // it until `wait` returns the completion.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_io_submit,
                    self.id,
                    1 as libc::c_long,
                    list.as_mut_ptr(),
                )
            };
            if r != 1 {
                return Err(if r < 0 {
                    io::Error::last_os_error()
                } else {
                    io::Error::other("io_submit took no request")
                });
            }
            Ok(())
        }

        /// Wait for at least `min` (at most `max`) completions: (data, result).
        pub fn wait(&self, min: usize, max: usize) -> io::Result<Vec<(u64, i64)>> {
            let mut ev = vec![IoEvent::default(); max.max(1)];
            loop {
                // SAFETY: `ev` holds `max` io_event slots for the kernel to fill.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_io_getevents,
                        self.id,
                        min as libc::c_long,
                        ev.len() as libc::c_long,
                        ev.as_mut_ptr(),
                        std::ptr::null_mut::<libc::timespec>(),
                    )
                };
                if r < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(e);
                }
                return Ok(ev[..r as usize].iter().map(|e| (e.data, e.res)).collect());
            }
        }
    }

    impl Drop for Context {
        fn drop(&mut self) {
            // SAFETY: destroys our own context. io_destroy cancels or waits
            // for every request still in flight before returning, and the
            // context is dropped before the buffers it used (declared after
            // them), so no request outlives its buffer.
            unsafe {
                libc::syscall(libc::SYS_io_destroy, self.id);
            }
        }
    }
}

/// Incompressible contents for written blocks (xorshift).
fn fill_random(buf: &mut [u8]) {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// The boot clock (`CLOCK_BOOTTIME`, what `/proc/uptime` shows), seconds.
fn boot_clock_s() -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9)
}

/// Measure a real block device (O_DIRECT, queue depth 1).
pub fn run_device(a: &SurfaceArgs) -> io::Result<Surface> {
    if a.block == 0
        || !a.block.is_multiple_of(4096)
        || a.burst < a.block
        || !a.burst.is_multiple_of(a.block)
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "block must be a multiple of 4 KiB and burst a multiple of block",
        ));
    }
    let write = a.op == SurfaceOpArg::Write;
    let mut file: File = OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_DIRECT)
        .open(&a.device)?;
    let capacity = file.seek(SeekFrom::End(0))?;
    let f = file;
    if capacity < a.burst * 2 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is too small for bursts of {} bytes",
                a.device.display(),
                a.burst
            ),
        ));
    }
    // O_DIRECT needs aligned buffers: 4 KiB-aligned windows of larger
    // ones, one per request in flight.
    let depth = a.depth.max(1) as usize;
    let mut raws: Vec<Vec<u8>> = (0..depth)
        .map(|_| vec![0u8; a.block as usize + 4096])
        .collect();
    let mut bufs: Vec<&mut [u8]> = raws
        .iter_mut()
        .map(|r| {
            let off = r.as_ptr().align_offset(4096);
            &mut r[off..off + a.block as usize]
        })
        .collect();
    if write {
        for b in bufs.iter_mut() {
            fill_random(b);
        }
    }
    let blocks = a.burst / a.block;
    let ctx = aio::Context::new(depth)?;
    // One untimed read first: the first I/O through a freshly started
    // guest's block path costs an emulator far more than the drive (QEMU
    // translating that code for the first time), and would show as a dip
    // at position 0 that the drive did not cause. A read leaves the
    // drive's state as it is.
    {
        let buf = &mut bufs[0];
        ctx.submit(f.as_raw_fd(), false, buf.as_mut_ptr(), buf.len(), 0, 0)?;
        for (_, res) in ctx.wait(1, 1)? {
            if res < 0 {
                return Err(io::Error::from_raw_os_error(-res as i32));
            }
        }
        if write {
            fill_random(buf);
        }
    }
    let mut points = Vec::new();
    let started_uptime_s = boot_clock_s();
    let pass = Instant::now();
    for pos in positions(capacity, a.burst, a.block, a.positions) {
        let t0 = Instant::now();
        let mut next = 0u64; // next block to issue
        let mut free: Vec<usize> = (0..depth).collect();
        let mut in_flight = 0usize;
        while next < blocks || in_flight > 0 {
            while next < blocks
                && let Some(slot) = free.pop()
            {
                let buf = &mut bufs[slot];
                ctx.submit(
                    f.as_raw_fd(),
                    write,
                    buf.as_mut_ptr(),
                    buf.len(),
                    pos + next * a.block,
                    slot as u64,
                )?;
                next += 1;
                in_flight += 1;
            }
            for (slot, res) in ctx.wait(1, in_flight)? {
                in_flight -= 1;
                if res != a.block as i64 {
                    return Err(if res < 0 {
                        io::Error::from_raw_os_error(-res as i32)
                    } else {
                        io::Error::other(format!("short transfer: {res} of {} bytes", a.block))
                    });
                }
                free.push(slot as usize);
            }
        }
        points.push(point(
            capacity,
            pos,
            a.burst,
            t0.elapsed().as_nanos() as u64,
            t0.duration_since(pass).as_nanos() as u64,
        ));
    }
    Ok(Surface {
        op: if write { "write" } else { "read" }.into(),
        block: a.block,
        burst: a.burst,
        points,
        started_uptime_s,
        lead_s: None,
    })
}

/// One surface pass: `positions` bursts of `burst` bytes in `block`-byte
/// requests, `depth` in flight.
#[derive(Debug, Clone, Copy)]
pub struct Pass {
    /// Read or write.
    pub op: SurfaceOp,
    /// Request size, bytes.
    pub block: u64,
    /// Bytes per position.
    pub burst: u64,
    /// Positions over the drive.
    pub positions: u32,
    /// Requests in flight within a burst.
    pub depth: u32,
}

/// The same pass in the simulator, each burst a fio job (`offset`,
/// `size` = the burst, `bs`, `iodepth`) run by the simulator's engine on
/// `sim`'s drive, from its current time. Each burst starts when the
/// previous one ends or, with `starts` (a guest's measured burst start
/// times, seconds from the pass's start), not before the guest started
/// it: the drive then gets the same idle time between bursts as in the
/// guest.
pub fn run_model(
    sim: &mut Simulation,
    pass_of: &Pass,
    starts: Option<&[f64]>,
) -> Result<Surface, SimError> {
    run_model_qd(sim, pass_of, starts).map(|(s, _)| s)
}

/// [`run_model`], and the requests in the drive on average during the
/// bursts (Little's law over each burst's completion latencies), the
/// figure a guest's pass is compared with.
pub fn run_model_qd(
    sim: &mut Simulation,
    pass_of: &Pass,
    starts: Option<&[f64]>,
) -> Result<(Surface, f64), SimError> {
    let Pass {
        op,
        block,
        burst,
        positions: n,
        depth,
    } = *pass_of;
    let capacity = sim.ssd().capacity();
    let pass = sim.now_ns();
    let rw = match op {
        SurfaceOp::Read => "read",
        SurfaceOp::Write => "write",
    };
    let mut points = Vec::new();
    let (mut in_drive_s, mut busy_s) = (0.0, 0.0);
    for (i, pos) in positions(capacity, burst, block, n).into_iter().enumerate() {
        if let Some(&s) = starts.and_then(|s| s.get(i))
            && s.is_finite()
            && s > 0.0
        {
            let at = pass + (s * 1e9) as u64;
            sim.idle(at.saturating_sub(sim.now_ns()));
        }
        let t0 = sim.now_ns();
        let job = format!(
            "[surface-{i}]\nrw={rw}\nbs={block}\noffset={pos}\nsize={burst}\niodepth={}\n",
            depth.max(1)
        );
        let jobs = vssd_sim::jobfile::parse(&job, "surface pass")?;
        let report = sim.run(&jobs.jobs)?;
        let took = sim.now_ns() - t0;
        let v: serde_json::Value =
            serde_json::from_str(&vssd_sim::report::json(&report)).unwrap_or_default();
        in_drive_s += super::metrics::fio_queue_depth(&v) * took as f64 / 1e9;
        busy_s += took as f64 / 1e9;
        points.push(point(capacity, pos, burst, took, t0 - pass));
    }
    let qd = if busy_s > 0.0 {
        in_drive_s / busy_s
    } else {
        0.0
    };
    Ok((
        Surface {
            op: rw.into(),
            block,
            burst,
            points,
            started_uptime_s: None,
            lead_s: None,
        },
        qd,
    ))
}

/// `vssd surface`.
pub fn run(a: SurfaceArgs) -> Result<(), super::BenchError> {
    let s = run_device(&a)
        .map_err(|e| super::BenchError::Io(format!("{}: {e}", a.device.display())))?;
    let text = if a.json {
        serde_json::to_string(&s).unwrap_or_default() + "\n"
    } else {
        let mut t = format!(
            "{} {} of {} in {}-byte requests at {} positions\n{:>8} {:>16} {:>10}\n",
            a.device.display(),
            s.op,
            vssd_profile::size::format_size(s.burst),
            s.block,
            s.points.len(),
            "position",
            "offset",
            "MB/s"
        );
        for p in &s.points {
            t.push_str(&format!(
                "{:>7.1}% {:>16} {:>10.1}\n",
                p.position * 100.0,
                p.offset,
                p.bytes_s / 1e6
            ));
        }
        t
    };
    vssd_common::cli_out::print(&text).map_err(super::BenchError::Output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vssd_model::Ssd;
    use vssd_profile::Profile;

    #[test]
    fn positions_cover_the_drive_aligned() {
        let p = positions(1 << 30, 1 << 20, 128 << 10, 64);
        assert_eq!(p.len(), 64);
        assert_eq!(p[0], 0);
        assert!(p[63] + (1 << 20) <= 1 << 30);
        assert!(p[63] > (1 << 30) - (2 << 20));
        assert!(p.iter().all(|o| o % (128 << 10) == 0));
        assert!(p.windows(2).all(|w| w[0] < w[1]));
    }

    fn pass(depth: u32) -> Pass {
        Pass {
            op: SurfaceOp::Write,
            block: 128 << 10,
            burst: 1 << 20,
            positions: 32,
            depth,
        }
    }

    #[test]
    fn model_surface_sees_the_used_state() {
        let prof = Profile::load_with_capacity("sata-slc-2009", Some(512 << 20)).unwrap();
        let mut sim = Simulation::new(&prof, 1);
        let fresh = run_model(&mut sim, &pass(1), None).unwrap();
        let now = sim.now_ns();
        let aged = sim.ssd_mut().precondition(
            now,
            &vssd_model::Precondition::Random {
                bs: 4096,
                amount: 1 << 30,
            },
            1,
        );
        sim.idle(aged.saturating_sub(now));
        let used = run_model(&mut sim, &pass(4), None).unwrap();
        let used1 = run_model(&mut sim, &pass(1), None).unwrap();
        let mean =
            |s: &Surface| s.points.iter().map(|p| p.bytes_s).sum::<f64>() / s.points.len() as f64;
        assert!(mean(&used1) < mean(&fresh));
        assert!(
            mean(&used) < mean(&fresh),
            "used {} fresh {}",
            mean(&used),
            mean(&fresh)
        );
    }

    #[test]
    fn a_guests_gaps_between_bursts_are_replayed() {
        let prof = Profile::load_with_capacity("sata-slc-2009", Some(512 << 20)).unwrap();
        let used = |starts: Option<&[f64]>| {
            let mut ssd = Ssd::new(&prof, 1);
            let now = ssd.precondition(
                0,
                &vssd_model::Precondition::Random {
                    bs: 4096,
                    amount: 1 << 30,
                },
                1,
            );
            let mut sim = Simulation::with_ssd(ssd, now, 1);
            let s = run_model(&mut sim, &pass(4), starts).unwrap();
            (s, now)
        };
        let (tight, _) = used(None);
        // A guest that left 20 ms between bursts: the drive's write buffer
        // drains in between, so more bursts go at the link's speed.
        let starts: Vec<f64> = (0..32).map(|i| f64::from(i) * 0.02).collect();
        let (spaced, _) = used(Some(&starts));
        for (p, s) in spaced.points.iter().zip(&starts) {
            let at = p.start_s.unwrap();
            assert!(at >= *s - 1e-9, "burst started at {at}, the guest at {s}");
        }
        let fast = |s: &Surface| s.points.iter().filter(|p| p.bytes_s > 200e6).count();
        assert!(
            fast(&spaced) > fast(&tight),
            "spaced {} tight {}",
            fast(&spaced),
            fast(&tight)
        );
        // Back to back, each burst starts where the previous one ended.
        for w in tight.points.windows(2) {
            let d = w[1].start_s.unwrap() - w[0].start_s.unwrap();
            assert!((d - (1 << 20) as f64 / w[0].bytes_s).abs() < 1e-6, "{d}");
        }
    }

    #[test]
    fn device_surface_on_a_file() {
        // A regular file on a filesystem that supports O_DIRECT stands in for a disk.
        let d = tempfile::tempdir_in(
            std::env::var("CARGO_TARGET_TMPDIR").unwrap_or_else(|_| ".".into()),
        )
        .unwrap();
        let f = d.path().join("disk");
        std::fs::File::create(&f)
            .unwrap()
            .set_len(16 << 20)
            .unwrap();
        let a = SurfaceArgs {
            device: f,
            op: SurfaceOpArg::Write,
            block: 64 << 10,
            burst: 256 << 10,
            positions: 8,
            depth: 2,
            json: true,
        };
        match run_device(&a) {
            Ok(s) => {
                assert_eq!(s.points.len(), 8);
                assert!(s.points.iter().all(|p| p.bytes_s > 0.0));
            }
            // tmpfs and some overlay filesystems refuse O_DIRECT.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => panic!("{e}"),
        }
    }
}
