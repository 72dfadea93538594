//! Signals: SIGINT and SIGTERM are blocked in every thread and taken by
//! one signal thread with `sigwait`.

use std::io;

extern "C" fn ignore_signal(_: libc::c_int) {}

pub fn block_signals() -> io::Result<libc::sigset_t> {
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

pub fn wait_signal(set: &libc::sigset_t) -> i32 {
    let mut sig: libc::c_int = 0;
    // SAFETY: `set` is an initialised sigset and `sig` a valid out-pointer.
    let r = unsafe { libc::sigwait(set, &mut sig) };
    if r == 0 { sig } else { 0 }
}
