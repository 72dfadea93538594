//! The vhost-user-blk listener: one QEMU at a time, forever.
//! `VhostUserDaemon` is single-use, so a fresh backend is built per
//! connection while the drive lives on.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use ::vhost::vhost_user::Listener;
use log::{info, warn};
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

/// Wait until `a` or `b` is readable.
pub fn poll_two(a: i32, b: i32) -> io::Result<()> {
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

pub fn serve_loop(
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
        if let Err(e) = daemon.start(listener) {
            warn!("accepting a frontend failed: {e}");
            // Do not spin if accept keeps failing (e.g. out of file descriptors).
            thread::sleep(Duration::from_millis(100));
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
