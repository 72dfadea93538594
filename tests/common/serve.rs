//! A `vssd serve` child process for integration tests: started with its
//! sockets in a scratch directory, stopped with SIGTERM (killed on drop).

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use vssd::ctl::protocol::{CtlRequest, StatsReport};

/// The binary under test.
pub const VSSD: &str = env!("CARGO_BIN_EXE_vssd");

/// A running `vssd serve`.
pub struct Serve {
    child: Option<Child>,
    /// The vhost-user socket.
    pub socket: PathBuf,
    /// The control socket.
    pub control: PathBuf,
    /// Its standard error.
    pub log: PathBuf,
}

impl Serve {
    /// `vssd serve --socket DIR/vhost.sock --control DIR/ctl.sock ARGS`,
    /// waiting until both sockets answer.
    pub fn start(dir: &Path, args: &[&str]) -> Serve {
        Self::start_with(dir, args, true)
    }

    /// `vssd serve --control DIR/ctl.sock ARGS` (no vhost-user socket
    /// unless `vhost`), waiting until the control socket answers: the
    /// daemon binds it last, so every listener is ready then.
    pub fn start_with(dir: &Path, args: &[&str], vhost: bool) -> Serve {
        Self::start_env(dir, args, vhost, &[])
    }

    /// [`Serve::start_with`] with extra environment variables.
    pub fn start_env(dir: &Path, args: &[&str], vhost: bool, env: &[(&str, &str)]) -> Serve {
        let socket = dir.join("vhost.sock");
        let control = dir.join("ctl.sock");
        let log = dir.join(format!(
            "serve-{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        let logf = std::fs::File::create(&log).expect("creating the daemon's log");
        let mut cmd = Command::new(VSSD);
        cmd.arg("serve");
        if vhost {
            cmd.arg("--socket").arg(&socket);
        }
        let mut child = cmd
            .arg("--control")
            .arg(&control)
            .args(args)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(logf)
            .spawn()
            .expect("starting vssd serve");
        let t = Instant::now();
        while UnixStream::connect(&control).is_err() {
            if let Ok(Some(st)) = child.try_wait() {
                panic!(
                    "vssd serve exited ({st}): {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "vssd serve did not create its sockets"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Serve {
            child: Some(child),
            socket,
            control,
            log,
        }
    }

    /// `ctl stats` as JSON.
    pub fn stats(&self) -> serde_json::Value {
        vssd::ctl::request(&self.control, &CtlRequest::Stats).expect("ctl stats")
    }

    /// `ctl stats`, typed.
    pub fn report(&self) -> StatsReport {
        vssd::ctl::stats(&self.control).expect("ctl stats")
    }

    /// The daemon's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Send `signal`.
    pub fn signal(&self, signal: i32) {
        if let Some(c) = &self.child {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(c.id() as libc::pid_t, signal) };
        }
    }

    /// SIGTERM, then wait (20 s at most): the exit code and the log.
    pub fn stop(&mut self) -> (i32, String) {
        self.signal(libc::SIGTERM);
        let Some(mut child) = self.child.take() else {
            return (-1, self.log_text());
        };
        let t = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().expect("wait") {
                break st;
            }
            if t.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                panic!("vssd serve did not exit within 20 s:\n{}", self.log_text());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (status.code().unwrap_or(-1), self.log_text())
    }

    /// SIGTERM; the daemon must exit 0 (state saved).
    pub fn stop_ok(mut self) {
        let (code, log) = self.stop();
        assert_eq!(code, 0, "vssd serve exited with {code}:\n{log}");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // A failed assertion must not leave the daemon running.
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
