//! `vssd serve`: the vhost-user-blk daemon.
//!
//! Opens the drive (store + model, FTL state from the state dir), the
//! control socket and the vhost-user socket, then serves one QEMU at a time
//! forever: `VhostUserDaemon` is single-use, so a fresh backend is built per
//! connection while the drive lives on. SIGINT/SIGTERM deliver pending
//! completions, disconnect, sync the data, save the FTL state and exit 0.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;
use log::{info, warn};
use thiserror::Error;
use vhost::vhost_user::Listener;
use vhost_user_backend::{ShutdownHandle, VhostUserDaemon};
use vm_memory::{GuestMemoryAtomic, GuestMemoryMmap};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::eventfd::{EFD_NONBLOCK, EventFd};

use crate::ctl::server;
use crate::device::files::{self, DirLock, FileError};
use crate::device::{DataLocation, Device, DeviceError, DeviceOptions, Frontend};
use crate::frontend::vhost_user_blk::BlkBackend;
use crate::profile::{Profile, ProfileError};
use crate::size::{format_size, parse_size};

/// `vssd serve` arguments.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// vhost-user socket to listen on (QEMU: `-chardev socket,path=PATH`).
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
    /// Drive profile: a preset name (`vssd profiles`) or a TOML file.
    #[arg(long, value_name = "P")]
    pub profile: String,
    /// Exported capacity (geometry scaled, over-provisioning kept), e.g. `8G`.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub capacity: Option<u64>,
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
    /// Control socket for `vssd ctl`, mode 0600 [default: SOCKET.ctl].
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
    /// Group allowed to connect to the vhost-user socket (e.g. `libvirt-qemu`,
    /// `kvm`): the socket gets this group and mode 0660.
    #[arg(long, value_name = "GROUP")]
    pub socket_group: Option<String>,
    /// Mode of the vhost-user socket, octal [default: 0600, or 0660 with --socket-group].
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub socket_mode: Option<u32>,
    /// Request queues offered to the guest (QEMU's `num-queues` must not exceed it).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub queues: u16,
    /// Largest virtqueue size accepted; QEMU's `queue-size` (128 unless set) must not exceed it.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub queue_size: u16,
    /// Run the queue threads SCHED_FIFO (priority 1) so completions are not
    /// delayed by busy vCPU threads (needs CAP_SYS_NICE; they only ever sleep
    /// or do short work).
    #[arg(long)]
    pub realtime: bool,
    /// Seed of the model's random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Parse an octal permission mode (`0660`, `660`); no special bits.
fn parse_mode(s: &str) -> Result<u32, String> {
    let t = s.trim_start_matches("0o");
    match u32::from_str_radix(t, 8) {
        Ok(m) if m <= 0o777 => Ok(m),
        _ => Err(format!(
            "{s:?} is not an octal permission mode between 0000 and 0777"
        )),
    }
}

/// Resolve a group name (or number) to its gid.
fn group_id(name: &str) -> Result<u32, ServeError> {
    if let Ok(n) = name.parse::<u32>() {
        return Ok(n);
    }
    let c = std::ffi::CString::new(name)
        .map_err(|_| ServeError::Usage(format!("--socket-group {name:?}: not a group name")))?;
    let mut grp: libc::group = unsafe_zeroed_group();
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut out: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; `buf` outlives it and
    // its length is passed; the result is read only through `out`.
    let r =
        unsafe { libc::getgrnam_r(c.as_ptr(), &mut grp, buf.as_mut_ptr(), buf.len(), &mut out) };
    if r != 0 || out.is_null() {
        return Err(ServeError::Usage(format!(
            "--socket-group {name:?}: no such group on this host"
        )));
    }
    Ok(grp.gr_gid)
}

fn unsafe_zeroed_group() -> libc::group {
    // SAFETY: `libc::group` is plain data (integers and pointers); all-zero
    // is a valid value that getgrnam_r overwrites.
    unsafe { std::mem::zeroed() }
}

/// Give a socket its final mode and group.
fn set_socket_access(path: &Path, mode: u32, gid: Option<u32>) -> Result<(), ServeError> {
    use std::os::unix::fs::PermissionsExt;
    let err = |source| ServeError::Bind {
        path: path.into(),
        source,
    };
    if let Some(g) = gid {
        std::os::unix::fs::lchown(path, None, Some(g)).map_err(err)?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(err)
}

/// Bind a unix socket created private (umask 0177 while binding), before
/// any other thread runs.
fn bind_private<T>(path: &Path, bind: impl FnOnce() -> io::Result<T>) -> Result<T, ServeError> {
    // SAFETY: umask only swaps the process file-mode mask; no other thread yet.
    let old = unsafe { libc::umask(0o177) };
    let r = bind();
    // SAFETY: restores the previous mask.
    unsafe { libc::umask(old) };
    r.map_err(|source| ServeError::Bind {
        path: path.into(),
        source,
    })
}

/// Errors of `vssd serve` (startup problems mostly).
#[derive(Debug, Error)]
pub enum ServeError {
    /// The profile does not load.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// Another process listens on the socket path.
    #[error("{0} is in use by a running process (another vssd or qemu-storage-daemon?)")]
    SocketInUse(PathBuf),
    /// Something that is not a socket is at the path.
    #[error("{0} exists and is not a socket; refusing to replace it")]
    NotASocket(PathBuf),
    /// The socket's directory does not exist.
    #[error("cannot create socket {path}: directory {dir} does not exist")]
    NoSocketDir {
        /// The socket.
        path: PathBuf,
        /// Its missing directory.
        dir: PathBuf,
    },
    /// Binding or preparing a socket failed.
    #[error("cannot listen on {path}")]
    Bind {
        /// The socket.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Bad option values.
    #[error("{0}")]
    Usage(String),
    /// Opening the drive failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The state directory is unusable (or locked by another daemon).
    #[error("state directory")]
    StateDir(#[from] FileError),
    /// vhost-user setup failed.
    #[error("vhost-user: {0}")]
    Vhost(String),
    /// Thread, signal or eventfd setup failed.
    #[error("daemon setup")]
    Setup(#[source] io::Error),
}

/// Refuse a path held by a live listener or by a non-socket; remove a stale socket.
fn claim_socket_path(path: &Path) -> Result<(), ServeError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(ServeError::NoSocketDir {
            path: path.into(),
            dir: dir.into(),
        });
    }
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(ServeError::Bind {
            path: path.into(),
            source,
        }),
        Ok(m) if !m.file_type().is_socket() => Err(ServeError::NotASocket(path.into())),
        Ok(_) => {
            if UnixStream::connect(path).is_ok() {
                return Err(ServeError::SocketInUse(path.into()));
            }
            std::fs::remove_file(path).map_err(|source| ServeError::Bind {
                path: path.into(),
                source,
            })
        }
    }
}

extern "C" fn ignore_signal(_: libc::c_int) {}

fn block_signals() -> io::Result<libc::sigset_t> {
    // A shell starts background jobs with SIGINT ignored, and an ignored
    // signal is discarded instead of becoming pending for sigwait: install
    // a (never run: the signals are blocked) handler so `kill -INT` works.
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installs an async-signal-safe no-op handler.
        unsafe { libc::signal(sig, ignore_signal as *const () as libc::sighandler_t) };
    }
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it and
    // pthread_sigmask only changes this thread's mask (inherited by threads
    // spawned afterwards, so only the signal thread receives them).
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        let r = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(set)
    }
}

fn wait_signal(set: &libc::sigset_t) -> i32 {
    let mut sig: libc::c_int = 0;
    // SAFETY: `set` is an initialised sigset and `sig` a valid out-pointer.
    let r = unsafe { libc::sigwait(set, &mut sig) };
    if r == 0 { sig } else { 0 }
}

struct Conn {
    backend: BlkBackend,
    handle: Option<ShutdownHandle>,
}

/// Deliver pending completions (bounded wait), then disconnect the frontend.
fn stop_connection(conn: &Conn) {
    conn.backend.drain();
    let start = Instant::now();
    while conn.backend.pending() > 0 && start.elapsed() < Duration::from_secs(2) {
        thread::sleep(Duration::from_millis(5));
    }
    if let Some(h) = &conn.handle {
        h.shutdown();
    }
}

fn poll_two(a: i32, b: i32) -> io::Result<()> {
    let mut fds = [
        libc::pollfd {
            fd: a,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: b,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: `fds` is a valid array of two pollfd structures.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if r >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Run the daemon until SIGINT/SIGTERM.
pub fn run(args: ServeArgs) -> Result<(), ServeError> {
    let sigset = block_signals().map_err(ServeError::Setup)?;
    let profile = Profile::load_with_capacity(&args.profile, args.capacity)?;
    if !args.queue_size.is_power_of_two() {
        return Err(ServeError::Usage(format!(
            "--queue-size {} must be a power of two",
            args.queue_size
        )));
    }
    let control = args
        .control
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.ctl", args.socket.display())));
    let gid = args.socket_group.as_deref().map(group_id).transpose()?;
    let socket_mode = args
        .socket_mode
        .unwrap_or(if gid.is_some() { 0o660 } else { 0o600 });
    let mut _state_lock = None;
    let (data, state_file) = match (&args.state_dir, &args.backing, args.memory) {
        (Some(dir), _, _) => {
            files::private_dir(dir)?;
            _state_lock = Some(DirLock::acquire(dir)?);
            (
                DataLocation::File(dir.join("disk.img")),
                Some(dir.join("ftl.state")),
            )
        }
        (None, Some(f), _) => (DataLocation::File(f.clone()), None),
        (None, None, true) => (DataLocation::Memory, None),
        (None, None, false) => (
            DataLocation::File(PathBuf::from(format!("{}.img", args.socket.display()))),
            None,
        ),
    };

    claim_socket_path(&args.socket)?;
    claim_socket_path(&control)?;

    let device = Arc::new(Device::open(DeviceOptions {
        profile,
        data: data.clone(),
        state_file,
        seed: args.seed,
    })?);

    // Sockets are bound private, then given their final mode (the control
    // socket stays 0600).
    let ctl_listener = bind_private(&control, || UnixListener::bind(&control))?;
    let mut listener = bind_private(&args.socket, || {
        Listener::new(&args.socket, false).map_err(|e| io::Error::other(e.to_string()))
    })?;
    set_socket_access(&args.socket, socket_mode, gid)?;

    let frontend = device.register_frontend(
        "vhost-user-blk",
        args.socket.display().to_string(),
        if args.queues == 1 {
            "1 queue".to_string()
        } else {
            format!("{} queues", args.queues)
        },
    );
    server::spawn(ctl_listener, device.clone()).map_err(ServeError::Setup)?;
    spawn_sampler(&device).map_err(ServeError::Setup)?;

    info!(
        "vssd: {} ({}) on {} [{} queue(s)], control {}, data {}",
        device.profile().name,
        format_size(device.capacity()),
        args.socket.display(),
        args.queues,
        control.display(),
        match &data {
            DataLocation::File(p) => p.display().to_string(),
            DataLocation::Memory => "in memory".into(),
        }
    );

    let stopping = Arc::new(AtomicBool::new(false));
    let current: Arc<Mutex<Option<Conn>>> = Arc::new(Mutex::new(None));
    let wake = EventFd::new(EFD_NONBLOCK).map_err(ServeError::Setup)?;
    {
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
    }

    let result = serve_loop(
        &args,
        &device,
        &frontend,
        &mut listener,
        &wake,
        &stopping,
        &current,
    );

    info!("syncing data and saving drive state");
    let closed = device.close();
    let _ = std::fs::remove_file(&control);
    drop(listener); // removes the vhost-user socket
    result?;
    closed?;
    info!("vssd: stopped cleanly");
    Ok(())
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

fn serve_loop(
    args: &ServeArgs,
    device: &Arc<Device>,
    frontend: &Frontend,
    listener: &mut Listener,
    wake: &EventFd,
    stopping: &AtomicBool,
    current: &Mutex<Option<Conn>>,
) -> Result<(), ServeError> {
    let vhost = |e: &dyn std::fmt::Display| ServeError::Vhost(e.to_string());
    loop {
        poll_two(listener.as_raw_fd(), wake.as_raw_fd()).map_err(ServeError::Setup)?;
        if stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        let backend = BlkBackend::new(
            device.clone(),
            frontend.clone(),
            args.queues,
            args.queue_size,
            args.realtime,
        )
        .map_err(ServeError::Setup)?;
        let mem = GuestMemoryAtomic::new(GuestMemoryMmap::new());
        let mut daemon = VhostUserDaemon::new("vssd-vhost".into(), backend.clone(), mem)
            .map_err(|e| vhost(&e))?;
        for (i, h) in daemon.get_epoll_handlers().iter().enumerate() {
            h.register_listener(backend.timer_fd(i), EventSet::IN, backend.timer_event_id())
                .map_err(ServeError::Setup)?;
        }
        if let Err(e) = daemon.start(listener) {
            warn!("accepting a frontend failed: {e}");
            // Do not spin if accept keeps failing (e.g. out of file descriptors).
            thread::sleep(Duration::from_millis(100));
            continue;
        }
        {
            let mut cur = current.lock().unwrap_or_else(|e| e.into_inner());
            let conn = Conn {
                backend: backend.clone(),
                handle: daemon.shutdown_handle(),
            };
            if stopping.load(Ordering::SeqCst) {
                stop_connection(&conn);
            }
            *cur = Some(conn);
        }
        let r = daemon.wait();
        *current.lock().unwrap_or_else(|e| e.into_inner()) = None;
        match r {
            Ok(())
            | Err(vhost_user_backend::Error::HandleRequest(
                vhost::vhost_user::Error::Disconnected | vhost::vhost_user::Error::PartialMessage,
            )) => info!("frontend disconnected; waiting for the next one"),
            Err(e) => warn!("frontend connection ended: {e}; waiting for the next one"),
        }
        // Dropping the daemon stops its queue threads; the drive lives on.
        backend.reset_pending();
        drop(daemon);
    }
}
