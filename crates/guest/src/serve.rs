//! A `vssd serve` child process for the demo and the bench: started
//! with its sockets in a private scratch directory, for one bus; stopped
//! with SIGTERM when dropped, however the caller ends.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Disk;
use crate::bus::Bus;
use vssd_ctl::protocol::{CtlRequest, StatsReport};
use vssd_profile::Identity;

/// Errors starting or talking to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum ServeProcessError {
    /// Starting it failed.
    #[error("cannot start {exe}: {source}")]
    Spawn {
        /// The program.
        exe: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It exited or never listened.
    #[error("vssd serve {0}")]
    NotReady(String),
    /// A control request failed.
    #[error(transparent)]
    Ctl(#[from] vssd_ctl::CtlError),
}

/// Wait until the daemon listens on `listen` and answers on `control`;
/// an early exit is an error carrying its log.
fn wait_ready(
    child: &mut Child,
    listen: &Path,
    control: &Path,
    log: &Path,
) -> Result<(), ServeProcessError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if listen.exists() && UnixStream::connect(control).is_ok() {
            return Ok(());
        }
        if let Ok(Some(st)) = child.try_wait() {
            let log = std::fs::read_to_string(log).unwrap_or_default();
            return Err(ServeProcessError::NotReady(format!(
                "exited early ({st}): {}",
                log.trim()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(ServeProcessError::NotReady(
        "did not create its sockets within 30 s".into(),
    ))
}

/// A running `vssd serve`.
pub struct ServeProcess {
    child: Child,
    /// Its scratch directory (sockets, log).
    pub dir: PathBuf,
    /// The vhost-user socket (virtio bus).
    pub vhost: PathBuf,
    /// The NBD socket (sata, nvme buses).
    pub nbd: PathBuf,
    /// The control socket.
    pub control: PathBuf,
    /// Its standard error.
    pub log: PathBuf,
    bus: Bus,
    queues: u16,
    identity: Identity,
}

impl ServeProcess {
    /// Start `exe serve` for `bus` with `args` (profile, capacity, data...),
    /// its sockets in `dir` (which must exist and be private).
    pub fn start(
        exe: &Path,
        dir: &Path,
        bus: Bus,
        queues: u16,
        args: &[String],
    ) -> Result<ServeProcess, ServeProcessError> {
        let vhost = dir.join("vhost.sock");
        let nbd = dir.join("nbd.sock");
        let control = dir.join("control.sock");
        let log = dir.join("serve.log");
        let logf = std::fs::File::create(&log).map_err(|source| ServeProcessError::Spawn {
            exe: exe.into(),
            source,
        })?;
        let mut cmd = Command::new(exe);
        cmd.arg("serve").arg("--control").arg(&control);
        if bus.uses_nbd() {
            cmd.arg("--nbd").arg(format!("unix:{}", nbd.display()));
        } else {
            cmd.arg("--socket")
                .arg(&vhost)
                .args(["--queues", &queues.to_string()]);
        }
        let child = cmd
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(logf)
            .spawn()
            .map_err(|source| ServeProcessError::Spawn {
                exe: exe.into(),
                source,
            })?;
        let mut child = child;
        let listen = if bus.uses_nbd() { &nbd } else { &vhost };
        wait_ready(&mut child, listen, &control, &log)?;
        // The identity the guest sees on SATA and NVMe comes from the
        // daemon itself, so the QEMU properties and `ctl stats` agree.
        let identity = match vssd_ctl::stats(&control) {
            Ok(r) => r.drive.identity,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e.into());
            }
        };
        let Some(identity) = identity else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ServeProcessError::NotReady(
                "reports no drive identity".into(),
            ));
        };
        Ok(ServeProcess {
            child,
            dir: dir.into(),
            vhost,
            nbd,
            control,
            log,
            bus,
            queues,
            identity,
        })
    }

    /// The disk to attach to the guest.
    pub fn disk(&self) -> Disk {
        self.bus
            .disk(&self.vhost, &self.nbd, self.queues, &self.identity)
    }

    /// The identity the drive reports.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The drive's statistics.
    pub fn stats(&self) -> Result<StatsReport, ServeProcessError> {
        Ok(vssd_ctl::stats(&self.control)?)
    }

    /// Drive time since the daemon's trace started, ns (the clock of its
    /// records); `None` if no trace is being taken.
    pub fn trace_now_ns(&self) -> Result<Option<u64>, ServeProcessError> {
        let v = vssd_ctl::request(&self.control, &CtlRequest::TraceStatus)?;
        let active = v["active"].as_bool().unwrap_or(false);
        Ok(active.then(|| v["now_ns"].as_u64().unwrap_or(0)))
    }

    /// Back to a fresh drive.
    pub fn secure_erase(&self) -> Result<(), ServeProcessError> {
        vssd_ctl::request(&self.control, &CtlRequest::SecureErase)?;
        Ok(())
    }

    /// Let the drive idle `ns` of model time at once (`{"cmd":"idle"}`).
    pub fn idle(&self, ns: u64) -> Result<(), ServeProcessError> {
        vssd_ctl::request(&self.control, &CtlRequest::Idle { ns })?;
        Ok(())
    }

    /// The injected faults, the power state and the latest cut's losses
    /// (`{"cmd":"fault-list"}`).
    pub fn faults(&self) -> Result<vssd_ctl::protocol::FaultReport, ServeProcessError> {
        let v = vssd_ctl::request(&self.control, &CtlRequest::FaultList)?;
        serde_json::from_value(v)
            .map_err(|e| ServeProcessError::from(vssd_ctl::CtlError::Protocol(e.to_string())))
    }

    /// Add a fault (`{"cmd":"fault-add"}`).
    pub fn fault_add(&self, fault: vssd_ctl::protocol::FaultSpec) -> Result<(), ServeProcessError> {
        vssd_ctl::request(&self.control, &CtlRequest::FaultAdd { fault })?;
        Ok(())
    }

    /// Remove one fault or all (`{"cmd":"fault-clear"}`).
    pub fn fault_clear(&self, id: Option<u64>) -> Result<(), ServeProcessError> {
        vssd_ctl::request(&self.control, &CtlRequest::FaultClear { id })?;
        Ok(())
    }

    /// Cut the power now or arm a cut (`{"cmd":"power-cut"}`).
    pub fn power_cut(
        &self,
        trigger: vssd_ctl::protocol::CutTrigger,
    ) -> Result<(), ServeProcessError> {
        vssd_ctl::request(
            &self.control,
            &CtlRequest::PowerCut {
                trigger,
                restart_after_ms: None,
            },
        )?;
        Ok(())
    }

    /// Power back on (`{"cmd":"power-on"}`).
    pub fn power_on(&self) -> Result<(), ServeProcessError> {
        vssd_ctl::request(&self.control, &CtlRequest::PowerOn)?;
        Ok(())
    }

    /// SIGTERM and wait (5 s, then SIGKILL). True if it exited 0.
    pub fn stop(&mut self) -> bool {
        // SAFETY: kill(2) on our own child's pid, no memory involved.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}
