//! Helpers shared by the integration tests that boot guests.
//!
//! Each test binary that includes this module (`mod common;`) may use only
//! part of it.
#![allow(dead_code)]

pub mod serve;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Serialises guest boots within one test binary: two TCG guests at once
/// on a 2-core CI machine only make both slower.
pub fn guest_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A process's resident memory, bytes (`VmRSS` in /proc/PID/status).
pub fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

/// A process's open file descriptors.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Logs from the library (`RUST_LOG=debug cargo test ...`), once.
pub fn init_logging() {
    let _ = env_logger::builder().is_test(true).try_init();
}

/// Fails the test with installation advice unless `program` runs.
pub fn require_program(program: &str) {
    let ok = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "`{program} --version` does not run: install the test dependencies with scripts/install-deps.sh"
    );
}

/// A scratch directory (sockets, logs), removed on drop.
pub fn scratch_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("vssd-test-")
        .tempdir()
        .expect("creating a scratch directory")
}

/// A `qemu-storage-daemon` process, killed (and its image file removed)
/// on drop.
pub struct StorageDaemon {
    child: Child,
    image: Option<PathBuf>,
    stderr: PathBuf,
}

impl StorageDaemon {
    /// Exports a new sparse file of `size` bytes on /dev/shm over
    /// vhost-user-blk at `socket` with `queues` queues.
    pub fn vhost_user_blk(dir: &Path, size: u64, socket: &Path, queues: u16) -> StorageDaemon {
        let image = shm_image(size);
        let args = vec![
            "--blockdev".to_string(),
            format!(
                "driver=file,node-name=f0,filename={},discard=unmap",
                image.display()
            ),
            "--export".to_string(),
            format!(
                "type=vhost-user-blk,id=e0,node-name=f0,addr.type=unix,addr.path={},writable=on,num-queues={queues}",
                socket.display()
            ),
        ];
        Self::start(dir, args, Some(image), socket)
    }

    /// Exports a new sparse file of `size` bytes on /dev/shm over NBD at
    /// `socket`, under each of the `names` (all the same data).
    pub fn nbd(dir: &Path, size: u64, socket: &Path, names: &[&str]) -> StorageDaemon {
        let image = shm_image(size);
        let mut args = vec![
            "--blockdev".to_string(),
            format!(
                "driver=file,node-name=f0,filename={},discard=unmap",
                image.display()
            ),
            "--nbd-server".to_string(),
            format!("addr.type=unix,addr.path={}", socket.display()),
        ];
        for (i, name) in names.iter().enumerate() {
            args.push("--export".into());
            args.push(format!(
                "type=nbd,id=e{i},node-name=f0,name={name},writable=on"
            ));
        }
        Self::start(dir, args, Some(image), socket)
    }

    fn start(
        dir: &Path,
        args: Vec<String>,
        image: Option<PathBuf>,
        socket: &Path,
    ) -> StorageDaemon {
        require_program("qemu-storage-daemon");
        let stderr = dir.join("qsd.stderr");
        let child = Command::new("qemu-storage-daemon")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("creating qsd.stderr"))
            .spawn()
            .expect("starting qemu-storage-daemon (install it with scripts/install-deps.sh)");
        let mut qsd = StorageDaemon {
            child,
            image,
            stderr,
        };
        let start = Instant::now();
        while !socket.exists() {
            if let Ok(Some(status)) = qsd.child.try_wait() {
                panic!(
                    "qemu-storage-daemon {args:?} exited with {status}: {}",
                    std::fs::read_to_string(&qsd.stderr).unwrap_or_default()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "qemu-storage-daemon did not create {socket:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        qsd
    }
}

impl Drop for StorageDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(image) = &self.image {
            let _ = std::fs::remove_file(image);
        }
    }
}

/// A new sparse file of `size` bytes in /dev/shm (tmpfs: fast, no disk).
fn shm_image(size: u64) -> PathBuf {
    let file = tempfile::Builder::new()
        .prefix("vssd-test-")
        .suffix(".img")
        .tempfile_in("/dev/shm")
        .expect("creating an image file in /dev/shm");
    file.as_file().set_len(size).expect("sizing the image file");
    let (_, path) = file.keep().expect("keeping the image file");
    path
}
