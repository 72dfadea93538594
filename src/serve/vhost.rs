//! The vhost-user-blk listener: one QEMU at a time, forever.
//! `VhostUserDaemon` is single-use, so a fresh backend is built per
//! connection while the drive lives on. A power cut (`ctl power-cut`)
//! closes the connection at once, without delivering the completions
//! still due (a drive without power completes nothing), and nobody listens
//! on the socket until power-on: a frontend's connect() is refused, as
//! when the daemon is down. QEMU started with `reconnect=N` retries every
//! N seconds and gets its device back at power-on. (A connection accepted
//! and closed at once would not do: QEMU 7.2 takes that for a protocol
//! error and stops reconnecting.)

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use ::vhost::vhost_user::Listener;
use log::{debug, info, warn};
use vhost_user_backend::{ShutdownHandle, VhostUserDaemon};
use vm_memory::{GuestMemoryAtomic, GuestMemoryMmap};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::eventfd::EventFd;

use super::{ServeArgs, ServeError};
use vssd_device::{Device, Frontend};
use vssd_frontend::vhost_user_blk::BlkBackend;

pub struct Conn {
    backend: BlkBackend,
    handle: Option<ShutdownHandle>,
}

/// Deliver pending completions (bounded wait), then disconnect the frontend.
pub fn stop_connection(conn: &Conn) {
    conn.backend.drain();
    let start = Instant::now();
    while conn.backend.pending() > 0 && start.elapsed() < Duration::from_secs(2) {
        thread::sleep(Duration::from_millis(5));
    }
    if let Some(h) = &conn.handle {
        h.shutdown();
    }
}

/// Wait until `fd` is readable.
pub fn poll_one(fd: i32) -> io::Result<()> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, -1) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Wait until one of `fds` is readable: which are.
pub fn poll_any(fds: &[i32]) -> io::Result<Vec<bool>> {
    let mut fds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd structures.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if r >= 0 {
            return Ok(fds.iter().map(|p| p.revents != 0).collect());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Close the connection now: a power cut. Its pending completions are
/// not delivered (they are counted as abandoned when the backend resets).
fn cut_connection(conn: &Conn) {
    if let Some(h) = &conn.handle {
        h.shutdown();
    }
}

/// Makes a new listener on the vhost-user socket (at power-on).
pub type Rebind = Arc<dyn Fn() -> Result<Listener, ServeError> + Send + Sync>;

/// Serve vhost-user frontends on `listener` until `stopping`. While the
/// drive's power is off the listener is closed (`None`); at power-on,
/// before `power-on` answers, `rebind` makes a new one, which this loop
/// takes up.
#[allow(clippy::too_many_arguments)]
pub fn serve_loop(
    args: &ServeArgs,
    device: &Arc<Device>,
    frontend: &Frontend,
    listener: &mut Option<Listener>,
    rebind: Rebind,
    wake: &EventFd,
    stopping: &AtomicBool,
    current: &Arc<Mutex<Option<Conn>>>,
) -> Result<(), ServeError> {
    let vhost = |e: &dyn std::fmt::Display| ServeError::Vhost(e.to_string());
    // Wakes this loop when the power goes or comes back.
    let power_evt = EventFd::new(vmm_sys_util::eventfd::EFD_NONBLOCK).map_err(ServeError::Setup)?;
    // The listener bound at power-on, for this loop to take up.
    let ready: Arc<Mutex<Option<Listener>>> = Arc::new(Mutex::new(None));
    {
        let ready = ready.clone();
        let evt = power_evt.try_clone().map_err(ServeError::Setup)?;
        device.on_power_on(move || {
            match rebind() {
                Ok(l) => *ready.lock().unwrap_or_else(|e| e.into_inner()) = Some(l),
                Err(e) => warn!("power on: cannot listen on the vhost-user socket again: {e}"),
            }
            let _ = evt.write(1);
        });
    }
    // A power cut closes the connection, as a real one does.
    {
        let current = current.clone();
        let evt = power_evt.try_clone().map_err(ServeError::Setup)?;
        device.on_power_cut(move || {
            if let Some(c) = current.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                info!("power cut: closing the vhost-user connection");
                cut_connection(c);
            }
            let _ = evt.write(1);
        });
    }
    loop {
        if !device.powered() {
            if listener.take().is_some() {
                info!("power off: nobody listens on the vhost-user socket until power-on");
            }
            while !device.powered() && !stopping.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(20));
            }
            if stopping.load(Ordering::SeqCst) {
                return Ok(());
            }
            continue;
        }
        // A listener bound at power-on replaces any older one (the power
        // may have gone and come back before this loop saw it go).
        if let Some(l) = ready.lock().unwrap_or_else(|e| e.into_inner()).take() {
            *listener = Some(l);
            info!("power on: listening on the vhost-user socket again");
        }
        let Some(l) = listener.as_mut() else {
            // Power is on but binding failed (logged): try again shortly.
            thread::sleep(Duration::from_millis(20));
            continue;
        };
        let ready_fds = poll_any(&[l.as_raw_fd(), wake.as_raw_fd(), power_evt.as_raw_fd()])
            .map_err(ServeError::Setup)?;
        let _ = power_evt.read();
        if stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        if !device.powered() {
            continue;
        }
        if !ready_fds.first().copied().unwrap_or(false) {
            // Woken by a power event, not by a frontend: accept would
            // block on a listener nobody is connecting to (after a
            // power-on, the new listener is taken up above first).
            continue;
        }
        let backend = BlkBackend::new(
            device.clone(),
            frontend.clone(),
            args.queues,
            args.queue_size,
            args.timing(device.profile()),
        )
        .map_err(ServeError::Setup)?;
        let mem = GuestMemoryAtomic::new(GuestMemoryMmap::new());
        let mut daemon = VhostUserDaemon::new("vssd-vhost".into(), backend.clone(), mem)
            .map_err(|e| vhost(&e))?;
        for (i, h) in daemon.get_epoll_handlers().iter().enumerate() {
            h.register_listener(backend.timer_fd(i), EventSet::IN, backend.timer_event_id())
                .map_err(ServeError::Setup)?;
        }
        if let Err(e) = daemon.start(l) {
            warn!("accepting a frontend failed: {e}");
            // Do not spin if accept keeps failing (e.g. out of file descriptors).
            thread::sleep(Duration::from_millis(100));
            continue;
        }
        if !device.powered() {
            // The power went as it connected: no device.
            debug!("the drive's power went as a frontend connected; closing it");
            daemon.request_shutdown();
            let _ = daemon.wait();
            backend.reset_pending();
            drop(daemon);
            continue;
        }
        backend.client_arrived();
        {
            let mut cur = current.lock().unwrap_or_else(|e| e.into_inner());
            let conn = Conn {
                backend: backend.clone(),
                handle: daemon.shutdown_handle(),
            };
            if stopping.load(Ordering::SeqCst) {
                stop_connection(&conn);
            }
            // The power may have gone between the check above and here.
            if !device.powered() {
                cut_connection(&conn);
            }
            *cur = Some(conn);
        }
        let r = daemon.wait();
        backend.client_left();
        *current.lock().unwrap_or_else(|e| e.into_inner()) = None;
        match r {
            Ok(())
            | Err(vhost_user_backend::Error::HandleRequest(
                ::vhost::vhost_user::Error::Disconnected
                | ::vhost::vhost_user::Error::PartialMessage,
            )) => info!("frontend disconnected; waiting for the next one"),
            Err(e) => warn!("frontend connection ended: {e}; waiting for the next one"),
        }
        // Dropping the daemon stops its queue threads; the drive lives on.
        backend.reset_pending();
        drop(daemon);
    }
}
