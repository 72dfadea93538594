//! `vssd serve`: the emulated drive served to QEMU over vhost-user-blk
//! and/or NBD.
//!
//! Opens the drive (store + model, FTL state from the state dir), the
//! control socket and the listeners, then serves until SIGINT/SIGTERM:
//! pending completions are delivered, clients disconnected, the data
//! synced, the FTL state saved, and the process exits 0.
//!
//! - [`vhost`]: the vhost-user-blk listener (one QEMU at a time);
//! - [`sockets`]: socket paths, private binding, modes and groups;
//! - [`signals`]: the signal thread;
//! - [`pidfile`]: the `--pidfile`;
//! - [`notify`]: readiness for systemd (`Type=notify`);
//! - [`error`]: the errors, [`ServeError`].

pub mod error;
pub mod notify;
pub mod pidfile;
pub mod signals;
pub mod sockets;
pub mod vhost;

pub use self::error::ServeError;

use std::io;
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use ::vhost::vhost_user::Listener;
use clap::Args;
use log::{info, warn};
use vmm_sys_util::eventfd::{EFD_NONBLOCK, EventFd};

use self::signals::{block_signals, wait_signal};
use self::sockets::{bind_socket, claim_socket_path, group_id, parse_mode};
use self::vhost::{Conn, stop_connection};
use vssd_common::clock::TimeScale;
use vssd_ctl::server;
use vssd_device::completion::{SchedPolicy, Timing};
use vssd_device::files::{self, DirLock};
use vssd_device::{DataLocation, Device, DeviceError, DeviceOptions};
use vssd_frontend::nbd::{NbdAddr, NbdListener, NbdServer};
use vssd_profile::Profile;
use vssd_profile::size::{format_size, parse_size};

use self::pidfile::PidFile;

/// `vssd serve` arguments.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// vhost-user-blk socket to listen on (QEMU: `-chardev socket,path=PATH`
    /// with `-device vhost-user-blk-pci`).
    #[arg(long, value_name = "PATH", required_unless_present = "nbd")]
    pub socket: Option<PathBuf>,
    /// Also (or only) serve the drive over NBD at `unix:PATH` (or a socket
    /// path starting with `/` or `.`) or `tcp:HOST:PORT` (repeatable), for
    /// QEMU's NBD client (SATA `ide-hd`, `nvme`) and libnbd's tools.
    /// Export name: empty or `vssd`.
    #[arg(long = "nbd", value_name = "ADDR", value_parser = parse_nbd_addr)]
    pub nbd: Vec<NbdAddr>,
    /// Allow `--nbd tcp:` on an address other than loopback (anyone who can
    /// reach it can read and write the drive: there is no authentication).
    #[arg(long)]
    pub nbd_listen_any: bool,
    /// Bytes of request and reply buffers all NBD connections may hold
    /// together (READ data waiting to be sent, WRITE payloads arriving);
    /// each connection holds at most 64 MiB. A connection over either
    /// limit is not read from until its replies go out. At least 32M.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "512M")]
    pub nbd_buffer_limit: u64,
    /// Drive profile: a preset name (`vssd profiles`) or a TOML file.
    #[arg(long, value_name = "P")]
    pub profile: String,
    /// Exported capacity (geometry scaled, usable spare area kept in proportion), e.g. `8G`.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub capacity: Option<u64>,
    /// Host Memory Buffer the host gives a DRAM-less NVMe drive, at the
    /// preset's own capacity (`--capacity` scales it): replaces the
    /// profile's `mapping.hmb_bytes`; 0 models a host that gives none.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub hmb: Option<u64>,
    /// Serial number the drive reports instead of its profile's (for two
    /// drives of one preset in one guest); `vssd qemu-args --serial` must
    /// then be given the same.
    #[arg(long, value_name = "S")]
    pub serial: Option<String>,
    /// Sparse backing file for the data (created if missing).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["memory", "state_dir"])]
    pub backing: Option<PathBuf>,
    /// Keep the data in memory only (lost on exit).
    #[arg(long, conflicts_with = "state_dir")]
    pub memory: bool,
    /// Directory for the backing file (`disk.img`) and the FTL state (`ftl.state`),
    /// which is saved on exit and loaded on start.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Write the daemon's pid to FILE (mode 0600), locked while it runs and
    /// removed when it exits; refused while another daemon holds it.
    #[arg(long, value_name = "FILE")]
    pub pidfile: Option<PathBuf>,
    /// Control socket for `vssd ctl`, mode 0600 [default: SOCKET.ctl, or the
    /// first unix NBD socket's path + `.ctl`].
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
    /// Group allowed to connect to the vhost-user and unix NBD sockets (e.g.
    /// `libvirt-qemu`, `kvm`): the sockets get this group and mode 0660.
    #[arg(long, value_name = "GROUP")]
    pub socket_group: Option<String>,
    /// Mode of the vhost-user and unix NBD sockets, octal [default: 0600, or
    /// 0660 with --socket-group].
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub socket_mode: Option<u32>,
    /// Request queues offered to the guest (QEMU's `num-queues` must not exceed it).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub queues: u16,
    /// Largest virtqueue size accepted; QEMU's `queue-size` (128 unless set) must not exceed it.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub queue_size: u16,
    /// Scheduling of the threads that serve requests and deliver
    /// completions: `normal`; `batch` (a woken thread does not preempt busy
    /// vCPU threads: fewer guest interrupts, completions possibly late);
    /// `realtime` (SCHED_FIFO priority 1: due completions preempt
    /// everything; needs CAP_SYS_NICE); `auto`: `batch` for a drive that
    /// models no time (`instant`), `normal` otherwise.
    #[arg(long, value_name = "POLICY", default_value = "auto", value_parser = sched_parser())]
    pub sched: SchedPolicy,
    /// Same as `--sched realtime`.
    #[arg(long, conflicts_with = "sched")]
    pub realtime: bool,
    /// When the next completion of a queue is due within this many
    /// microseconds, its thread spins (polling the clock and the ring)
    /// instead of sleeping on its timer, which it arms that much early:
    /// wake-up latency no longer adds to completion times, for up to this
    /// much CPU time per wake-up. 0 always sleeps.
    #[arg(long, value_name = "US", default_value_t = vssd_device::completion::DEFAULT_SPIN_NS / 1000)]
    pub spin_us: u64,
    /// Seed of the model's random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Time dilation: the drive model's clock runs K times slower than the
    /// wall clock (1 to 1000, e.g. `4` or `2.5`), so that a guest too slow
    /// to keep the drive busy (emulated CPU, TCG) keeps a K-times slower
    /// drive busy. Requests complete K times later in wall time; `ctl
    /// stats`, the metrics and the TRIM log report the drive's own time.
    #[arg(long, value_name = "K", default_value_t = TimeScale::ONE)]
    pub time_scale: TimeScale,
    /// Record every request the drive receives to FILE from the start (a
    /// new file, mode 0600; see `vssd ctl trace` to start and stop it
    /// later, `vssd trace` to read, convert and replay it).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Size limit of the trace file: recording stops there, with a warning.
    #[arg(long, value_name = "SIZE", default_value = "4G", value_parser = parse_size)]
    pub trace_limit: u64,
    /// Serve the drive's statistics in the Prometheus text format at
    /// `http://ADDR/metrics` (e.g. `127.0.0.1:9187`): counters, latency
    /// and lateness histograms, the same numbers as `vssd ctl stats`.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Allow `--metrics` on an address other than loopback.
    #[arg(long)]
    pub metrics_listen_any: bool,
}

impl ServeArgs {
    /// How completion-delivering threads wait (`--sched`, `--realtime`,
    /// `--spin-us`) for a drive of `profile` (`auto` depends on whether it
    /// models time).
    pub fn timing(&self, profile: &Profile) -> Timing {
        let sched = if self.realtime {
            SchedPolicy::Realtime
        } else {
            self.sched
        };
        Timing {
            sched: sched.resolve(profile.models_time()),
            spin_ns: self.spin_us.saturating_mul(1000),
        }
    }
}

/// Bind every `--nbd` address (unix sockets private, then given their mode).
fn bind_nbd(
    args: &ServeArgs,
    mode: u32,
    gid: Option<u32>,
) -> Result<Vec<(NbdAddr, NbdListener)>, ServeError> {
    let mut out = Vec::new();
    for addr in &args.nbd {
        let l = match addr {
            NbdAddr::Unix(p) => {
                claim_socket_path(p)?;
                let l = bind_socket(p, mode, gid, |p| UnixListener::bind(p))?;
                NbdListener::Unix(l)
            }
            NbdAddr::Tcp(a) => {
                if !a.ip().is_loopback() && !args.nbd_listen_any {
                    return Err(ServeError::Usage(format!(
                        "--nbd {addr} is not a loopback address: NBD has no authentication, \
                         so anyone who reaches it can read and write the drive; add \
                         --nbd-listen-any if that is really wanted"
                    )));
                }
                let l = TcpListener::bind(a).map_err(|source| ServeError::Nbd {
                    addr: addr.to_string(),
                    source,
                })?;
                NbdListener::Tcp(l)
            }
        };
        out.push((addr.clone(), l));
    }
    Ok(out)
}

/// The path other default paths derive from: the vhost-user socket, or the
/// first unix NBD socket.
fn base_path(args: &ServeArgs) -> Option<PathBuf> {
    args.socket.clone().or_else(|| {
        args.nbd.iter().find_map(|a| match a {
            NbdAddr::Unix(p) => Some(p.clone()),
            NbdAddr::Tcp(_) => None,
        })
    })
}

/// Run the daemon until SIGINT/SIGTERM: check the arguments, open the
/// drive, bind every socket, start the services, serve, shut down.
pub fn run(args: ServeArgs) -> Result<(), ServeError> {
    let sigset = block_signals().map_err(ServeError::Setup)?;
    // First, so a second daemon on the same pid file stops before it
    // touches anything; removed when `run` returns, however it does.
    let _pidfile = args.pidfile.as_deref().map(PidFile::create).transpose()?;
    let profile = checked_profile(&args)?;
    let base = base_path(&args);
    let control = control_path(&args, base.as_deref())?;
    let gid = args.socket_group.as_deref().map(group_id).transpose()?;
    let socket_mode = args
        .socket_mode
        .unwrap_or(if gid.is_some() { 0o660 } else { 0o600 });
    let (data, state_file, _state_lock) = data_location(&args, base.as_deref())?;

    if let Some(s) = &args.socket {
        claim_socket_path(s)?;
    }
    claim_socket_path(&control)?;

    let device = Arc::new(Device::open(DeviceOptions {
        profile,
        data: data.clone(),
        state_file,
        seed: args.seed,
        time_scale: args.time_scale,
    })?);

    // Sockets are bound in a private directory, given their final mode
    // there (the control socket 0600) and renamed into place. The control
    // socket comes last: once it answers, every listener is ready.
    let mut vhost_listener = match &args.socket {
        Some(s) => Some(bind_vhost(s, socket_mode, gid)?),
        None => None,
    };
    let nbd_listeners = bind_nbd(&args, socket_mode, gid)?;
    let ctl_listener = bind_socket(&control, 0o600, None, |p| UnixListener::bind(p))?;
    let nbd = start_services(&args, &device, ctl_listener, nbd_listeners)?;
    log_start(&args, &device, &control, &data);
    notify::notify("READY=1");

    let stopping = Arc::new(AtomicBool::new(false));
    let current: Arc<Mutex<Option<Conn>>> = Arc::new(Mutex::new(None));
    let wake = EventFd::new(EFD_NONBLOCK).map_err(ServeError::Setup)?;
    spawn_signal_thread(sigset, &stopping, &current, &wake)?;

    let result = match &args.socket {
        Some(socket) => {
            let fe = device.register_frontend(
                "vhost-user-blk",
                socket.display().to_string(),
                if args.queues == 1 {
                    "1 queue".to_string()
                } else {
                    format!("{} queues", args.queues)
                },
            );
            let socket = socket.clone();
            let rebind: vhost::Rebind = Arc::new(move || bind_vhost(&socket, socket_mode, gid));
            vhost::serve_loop(
                &args,
                &device,
                &fe,
                &mut vhost_listener,
                rebind,
                &wake,
                &stopping,
                &current,
            )
        }
        None => {
            // NBD only: its threads serve; wait for the signal.
            while !stopping.load(Ordering::SeqCst) {
                let _ = vhost::poll_one(std::os::fd::AsRawFd::as_raw_fd(&wake));
            }
            Ok(())
        }
    };

    notify::notify("STOPPING=1");
    let closed = shut_down(&args, &device, &nbd, &control, vhost_listener);
    result?;
    closed?;
    info!("vssd: stopped cleanly");
    Ok(())
}

/// The profile to serve, and the arguments checked against it.
fn checked_profile(args: &ServeArgs) -> Result<Profile, ServeError> {
    let mut profile = Profile::load_with_hmb(&args.profile, args.capacity, args.hmb)?;
    if let Some(s) = &args.serial {
        profile = profile.with_serial(s)?;
    }
    profile.check_memory()?;
    if !args.queue_size.is_power_of_two() {
        return Err(ServeError::Usage(format!(
            "--queue-size {} must be a power of two",
            args.queue_size
        )));
    }
    if args.nbd_buffer_limit < vssd_frontend::nbd::budget::MIN_TOTAL {
        return Err(ServeError::Usage(format!(
            "--nbd-buffer-limit {} is below {}: a single NBD request may need that much",
            format_size(args.nbd_buffer_limit),
            format_size(vssd_frontend::nbd::budget::MIN_TOTAL)
        )));
    }
    Ok(profile)
}

/// Where the control socket goes: `--control`, or the first socket's path
/// with `.ctl` added.
fn control_path(args: &ServeArgs, base: Option<&Path>) -> Result<PathBuf, ServeError> {
    match (&args.control, base) {
        (Some(c), _) => Ok(c.clone()),
        (None, Some(b)) => Ok(PathBuf::from(format!("{}.ctl", b.display()))),
        (None, None) => Err(ServeError::Usage(
            "with only TCP NBD listeners, say where the control socket goes: --control PATH".into(),
        )),
    }
}

/// Where the data and the FTL state go, and the state directory's lock
/// (held until the daemon exits).
fn data_location(
    args: &ServeArgs,
    base: Option<&Path>,
) -> Result<(DataLocation, Option<PathBuf>, Option<DirLock>), ServeError> {
    Ok(match (&args.state_dir, &args.backing, args.memory, base) {
        (Some(dir), _, _, _) => {
            files::private_dir(dir)?;
            let lock = DirLock::acquire(dir)?;
            (
                DataLocation::File(dir.join("disk.img")),
                Some(dir.join("ftl.state")),
                Some(lock),
            )
        }
        (None, Some(f), _, _) => (DataLocation::File(f.clone()), None, None),
        (None, None, true, _) => (DataLocation::Memory, None, None),
        (None, None, false, Some(b)) => (
            DataLocation::File(PathBuf::from(format!("{}.img", b.display()))),
            None,
            None,
        ),
        (None, None, false, None) => {
            return Err(ServeError::Usage(
                "with only TCP NBD listeners, say where the data goes: --state-dir DIR, \
                 --backing FILE or --memory"
                    .into(),
            ));
        }
    })
}

/// Bind the vhost-user socket (at start, and again after a power cut).
/// The listener does not know its path (it would remove what is there when
/// dropped): [`shut_down`] removes the socket.
fn bind_vhost(socket: &Path, mode: u32, gid: Option<u32>) -> Result<Listener, ServeError> {
    bind_socket(socket, mode, gid, |p| {
        UnixListener::bind(p).map(Listener::from)
    })
}

/// An NBD address as `--nbd` takes it (and `vssd qemu-args --nbd`):
/// `unix:PATH`, `tcp:HOST:PORT`, or a socket path starting with `/` or `.`.
pub fn parse_nbd_addr(s: &str) -> Result<NbdAddr, String> {
    if s.starts_with('/') || s.starts_with('.') {
        Ok(NbdAddr::Unix(s.into()))
    } else if s.starts_with("unix:") || s.starts_with("tcp:") {
        s.parse()
    } else {
        Err(format!(
            "{s:?}: an NBD address is unix:PATH, tcp:HOST:PORT (e.g. tcp:127.0.0.1:10809) \
             or a socket path starting with / or ."
        ))
    }
}

/// Start what runs beside the vhost-user loop: the trace, the metrics, the
/// control server, the counter sampler, the power timer and the NBD
/// listeners.
fn start_services(
    args: &ServeArgs,
    device: &Arc<Device>,
    ctl_listener: UnixListener,
    nbd_listeners: Vec<(NbdAddr, NbdListener)>,
) -> Result<NbdServer, ServeError> {
    if let Some(t) = &args.trace {
        device
            .trace_start(t, args.trace_limit)
            .map_err(ServeError::Trace)?;
    }
    if let Some(addr) = args.metrics {
        crate::metrics::spawn(addr, args.metrics_listen_any, device)?;
    }
    server::spawn(ctl_listener, device.clone()).map_err(ServeError::Setup)?;
    spawn_sampler(device).map_err(ServeError::Setup)?;
    Device::spawn_power_timer(device).map_err(ServeError::Setup)?;
    let nbd =
        NbdServer::new(args.timing(device.profile())).with_buffer_limit(args.nbd_buffer_limit);
    for (addr, l) in nbd_listeners {
        let fe = device.register_frontend("nbd", addr.to_string(), "export \"\" or \"vssd\"");
        nbd.spawn(device.clone(), fe, addr.clone(), l)
            .map_err(|source| ServeError::Nbd {
                addr: addr.to_string(),
                source,
            })?;
    }
    Ok(nbd)
}

/// Say what is served where.
fn log_start(args: &ServeArgs, device: &Device, control: &Path, data: &DataLocation) {
    let mut listening: Vec<String> = Vec::new();
    if let Some(s) = &args.socket {
        listening.push(format!(
            "vhost-user-blk {} [{} queue(s)]",
            s.display(),
            args.queues
        ));
    }
    listening.extend(args.nbd.iter().map(|a| format!("NBD {a}")));
    info!(
        "vssd: {} ({}) on {}; control {}, data {}",
        device.profile().name,
        format_size(device.capacity()),
        listening.join(", "),
        control.display(),
        match data {
            DataLocation::File(p) => p.display().to_string(),
            DataLocation::Memory => "in memory".into(),
        }
    );
    if !args.time_scale.is_one() {
        info!(
            "time dilation: the drive's clock runs {}× slower than the wall clock \
             (requests complete {}× later; ctl stats and the metrics report the drive's time)",
            args.time_scale, args.time_scale
        );
    }
}

/// The signal thread: the first SIGINT or SIGTERM stops the daemon (wakes
/// the serving loop and stops the vhost-user connection).
fn spawn_signal_thread(
    sigset: libc::sigset_t,
    stopping: &Arc<AtomicBool>,
    current: &Arc<Mutex<Option<Conn>>>,
    wake: &EventFd,
) -> Result<(), ServeError> {
    let stopping = stopping.clone();
    let current = current.clone();
    let wake = wake.try_clone().map_err(ServeError::Setup)?;
    thread::Builder::new()
        .name("vssd-signals".into())
        .spawn(move || {
            loop {
                let sig = wait_signal(&sigset);
                if sig == 0 {
                    continue;
                }
                if stopping.swap(true, Ordering::SeqCst) {
                    warn!(
                        "signal {sig}: already shutting down, still saving the drive state \
                             (SIGKILL exits without saving)"
                    );
                    continue;
                }
                info!("signal {sig}: finishing in-flight requests and shutting down");
                let _ = wake.write(1);
                let cur = current.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(c) = cur.as_ref() {
                    stop_connection(c);
                }
            }
        })
        .map_err(ServeError::Setup)?;
    Ok(())
}

/// Shut down after serving: drain NBD, stop the trace, sync and save the
/// drive, remove the sockets. The drive's closing result.
fn shut_down(
    args: &ServeArgs,
    device: &Device,
    nbd: &NbdServer,
    control: &Path,
    vhost_listener: Option<Listener>,
) -> Result<(), DeviceError> {
    nbd.drain_and_close(Duration::from_secs(2));
    if args.memory {
        info!("stopping: a memory drive keeps nothing after exit");
    } else if args.state_dir.is_some() {
        info!("syncing data and saving drive state");
    } else {
        info!("syncing data (no state directory: the FTL state is not saved)");
    }
    let was_tracing = device.trace_status().active;
    let traced = device.trace_stop();
    if let (true, Some(p)) = (was_tracing, &traced.path) {
        info!(
            "trace {p} closed: {} requests{}",
            traced.records,
            if traced.dropped > 0 {
                format!(", {} not recorded", traced.dropped)
            } else {
                String::new()
            }
        );
    }
    let closed = device.close();
    let _ = std::fs::remove_file(control);
    for a in &args.nbd {
        if let NbdAddr::Unix(p) = a {
            let _ = std::fs::remove_file(p);
        }
    }
    drop(vhost_listener);
    if let Some(s) = &args.socket {
        let _ = std::fs::remove_file(s);
    }
    closed
}

/// Sample the drive's counters each second (recent write amplification).
fn spawn_sampler(device: &Arc<Device>) -> io::Result<()> {
    let weak = Arc::downgrade(device);
    thread::Builder::new()
        .name("vssd-sampler".into())
        .spawn(move || {
            while let Some(d) = weak.upgrade() {
                d.sample();
                drop(d);
                thread::sleep(Duration::from_secs(1));
            }
        })
        .map(|_| ())
}

/// `--sched`: one of [`SchedPolicy::NAMES`] (clap lists them in errors and help).
fn sched_parser() -> impl clap::builder::TypedValueParser<Value = SchedPolicy> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(SchedPolicy::NAMES.map(|(n, _)| n))
        .map(|s| SchedPolicy::from_name(&s).unwrap_or_default())
}
