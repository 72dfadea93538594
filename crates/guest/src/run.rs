//! The QEMU launcher: command line, boot, timeout, result.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::accel::{Accel, detect_with, probe_kvm, qemu_binary};
use super::console::{self, Console};
use super::image::{GuestImage, ensure_image, tail_lines};
use super::{GuestError, Result, io_err};
use vssd_profile::Identity;
use vssd_profile::identity::qemu_opt_value;
use vssd_qemu::{AhciPort, Attach, NbdServer, QemuOpt};

/// The id of the AHCI controller the SATA disks share.
const AHCI: &str = "ahci";

/// A disk attached to the guest. The guest names disks in the order they
/// are given, per kind: `/dev/vda`, `/dev/vdb`...; `/dev/sda`...;
/// `/dev/nvme0n1`, `/dev/nvme1n1`...
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disk {
    /// A vhost-user-blk backend (vssd serve, qemu-storage-daemon) on a
    /// unix socket; the guest sees a virtio-blk disk (`/dev/vdX`).
    VhostUserBlk {
        /// The backend's vhost-user socket.
        socket: PathBuf,
        /// Number of virtqueues; at most what the backend offers.
        num_queues: u16,
    },
    /// An NBD export presented as a SATA SSD on an AHCI controller
    /// (`/dev/sdX`, non-rotational, TRIM passed through).
    NbdSata {
        /// The NBD server's unix socket.
        socket: PathBuf,
        /// The export name.
        export: String,
        /// What the drive reports in ATA IDENTIFY (model, serial,
        /// firmware, WWN): `ide-hd` properties.
        identity: Identity,
    },
    /// An NBD export presented as an NVMe controller with one namespace
    /// (`/dev/nvmeNn1`, deallocate passed through).
    NbdNvme {
        /// The NBD server's unix socket.
        socket: PathBuf,
        /// The export name.
        export: String,
        /// What the controller reports; QEMU 7.2 takes only the serial
        /// (see [`Identity::nvme_properties`]).
        identity: Identity,
    },
}

/// Configuration of one guest boot; build it, then call
/// [`Guest::run_script`] (as often as needed: each call is a fresh boot).
#[derive(Debug, Clone)]
pub struct Guest {
    memory_mib: u32,
    smp: u32,
    disks: Vec<Disk>,
    accel: Option<Accel>,
    kernel_args: Vec<String>,
    console_log: Option<PathBuf>,
    cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    power_loss: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    vhost_reconnect: Option<u32>,
}

impl Default for Guest {
    fn default() -> Self {
        Self::new()
    }
}

/// What a guest run produced.
#[derive(Debug, Clone)]
pub struct GuestRun {
    /// The script's standard output and error, interleaved, exactly as
    /// printed between the console markers (`\r` removed).
    pub output: String,
    /// The script's exit status (`sh` convention: 128+N after signal N).
    pub exit_code: i32,
    /// From starting QEMU to the script starting in the guest.
    pub boot_time: Duration,
    /// From starting QEMU to QEMU exiting.
    pub total_time: Duration,
    /// The accelerator the guest ran with.
    pub accel: Accel,
    /// The full serial console log (kernel messages included).
    pub console: String,
    /// The machine lost its power ([`Guest::power_loss_on`]): QEMU was
    /// killed, `output` is what the script printed until then and
    /// `exit_code` is [`POWER_LOST`].
    pub powered_off: bool,
}

/// [`GuestRun::exit_code`] of a run whose machine lost its power.
pub const POWER_LOST: i32 = -1;

impl GuestRun {
    /// Fails with a readable message (output included) unless the script
    /// exited with status 0.
    pub fn expect_success(&self) -> &Self {
        assert_eq!(
            self.exit_code, 0,
            "guest script failed with status {}; its output:\n{}",
            self.exit_code, self.output
        );
        self
    }
}

/// Boots a default [`Guest`] (no disks) and runs `script` in it.
pub fn run_script(script: &str, timeout: Duration) -> Result<GuestRun> {
    Guest::new().run_script(script, timeout)
}

impl Guest {
    /// A guest with 1 GiB of shared memory, 2 vCPUs, no disks, and the
    /// accelerator chosen by [`detect_accel`].
    pub fn new() -> Self {
        Guest {
            memory_mib: 1024,
            smp: 2,
            disks: Vec::new(),
            accel: None,
            kernel_args: Vec::new(),
            console_log: None,
            cancel: None,
            power_loss: None,
            vhost_reconnect: None,
        }
    }

    /// Guest memory in MiB (a memfd shared with vhost-user backends).
    pub fn memory_mib(mut self, mib: u32) -> Self {
        self.memory_mib = mib;
        self
    }

    /// Number of vCPUs.
    pub fn smp(mut self, cpus: u32) -> Self {
        self.smp = cpus;
        self
    }

    /// Attaches a disk (see [`Disk`] for the guest's device names).
    pub fn disk(mut self, disk: Disk) -> Self {
        self.disks.push(disk);
        self
    }

    /// Forces an accelerator instead of detecting one.
    pub fn accel(mut self, accel: Accel) -> Self {
        self.accel = Some(accel);
        self
    }

    /// Adds a kernel command-line argument (no whitespace).
    pub fn kernel_arg(mut self, arg: impl Into<String>) -> Self {
        self.kernel_args.push(arg.into());
        self
    }

    /// Stop the run (QEMU killed, [`GuestError::Cancelled`]) as soon as
    /// `flag` becomes true, e.g. from a Ctrl-C handler.
    pub fn cancel_on(mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Self {
        self.cancel = Some(flag);
        self
    }

    /// The machine loses its power as soon as `flag` becomes true: QEMU is
    /// killed and the run returns what the script printed so far
    /// ([`GuestRun::powered_off`]). A test sets it when the drive's power
    /// goes, so the guest stops with its drive as a machine does, instead
    /// of waiting on a disk that is gone.
    pub fn power_loss_on(mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Self {
        self.power_loss = Some(flag);
        self
    }

    /// QEMU reconnects to vhost-user backends that close the connection,
    /// trying every `seconds` (`-chardev socket,...,reconnect=N`): the
    /// device comes back when the backend takes connections again.
    pub fn vhost_reconnect(mut self, seconds: u32) -> Self {
        self.vhost_reconnect = Some(seconds);
        self
    }

    /// Also keeps the serial console log at `path` (overwritten per run).
    pub fn console_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.console_log = Some(path.into());
        self
    }

    /// The QEMU arguments (without the binary) for a boot of `image` that
    /// runs the host file `script_path`, with markers tagged `token`, the
    /// console written to `console_log`.
    pub fn qemu_args(
        &self,
        image: &GuestImage,
        accel: Accel,
        script_path: &Path,
        token: &str,
        console_log: &Path,
    ) -> Result<Vec<OsString>> {
        if self.memory_mib < 128 || self.smp == 0 {
            return Err(GuestError::Config(format!(
                "need at least 128 MiB and 1 vCPU (got {} MiB, {} vCPUs)",
                self.memory_mib, self.smp
            )));
        }
        let script = script_path.to_str().filter(|s| cmdline_safe(s)).ok_or_else(|| {
            GuestError::Config(format!(
                "script path {} cannot go on a kernel command line (spaces, quotes or non-UTF-8); set TMPDIR to a plain path",
                script_path.display()
            ))
        })?;
        // mitigations=off: a throw-away test guest; Spectre/Meltdown mitigations
        // make every guest syscall markedly slower under TCG.
        let mut append = format!(
            "console=ttyS0 panic=-1 mitigations=off vssd.script={script} vssd.token={token}"
        );
        for arg in &self.kernel_args {
            if !cmdline_safe(arg) {
                return Err(GuestError::Config(format!(
                    "kernel argument {arg:?} has whitespace or quotes"
                )));
            }
            append.push(' ');
            append.push_str(arg);
        }
        let mut args: Vec<OsString> = Vec::new();
        let mut push = |parts: &[&str]| args.extend(parts.iter().map(OsString::from));
        push(&[
            "-nodefaults",
            "-no-user-config",
            "-no-reboot",
            "-display",
            "none",
        ]);
        push(&["-accel", accel.qemu_arg()]);
        push(&["-smp", &self.smp.to_string()]);
        let mut opts = vssd_qemu::shared_memory("mem", u64::from(self.memory_mib));
        opts.push(("-kernel", path_opt(&image.kernel)?));
        opts.push(("-initrd", path_opt(&image.initrd)?));
        opts.push(("-append", append));
        opts.push((
            "-chardev",
            format!(
                "file,id=console,path={}",
                qemu_opt_value(&path_opt(console_log)?)
            ),
        ));
        opts.push(("-serial", "chardev:console".into()));
        opts.push((
            "-virtfs",
            "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
                .into(),
        ));
        opts.extend(self.disk_options()?);
        for (opt, value) in opts {
            push(&[opt, &value]);
        }
        Ok(args)
    }

    /// The QEMU options of the disks, in order: disk `i` is `disk{i}`, the
    /// SATA ones on the ports of one AHCI controller.
    fn disk_options(&self) -> Result<Vec<QemuOpt>> {
        let mut opts = Vec::new();
        let mut sata_port = 0;
        for (i, disk) in self.disks.iter().enumerate() {
            let attach = match disk {
                Disk::VhostUserBlk { socket, num_queues } => Attach::VhostUserBlk {
                    socket,
                    queues: *num_queues,
                    reconnect_s: self.vhost_reconnect,
                },
                Disk::NbdSata {
                    socket,
                    export,
                    identity,
                } => {
                    if sata_port == 0 {
                        opts.push(vssd_qemu::ahci_controller(AHCI));
                    }
                    if sata_port == 6 {
                        return Err(GuestError::Config(
                            "at most 6 SATA disks (AHCI ports)".into(),
                        ));
                    }
                    sata_port += 1;
                    Attach::NbdSata {
                        server: NbdServer::Unix(socket),
                        export,
                        identity,
                        ahci: AhciPort::Port {
                            controller: AHCI,
                            port: sata_port - 1,
                        },
                    }
                }
                Disk::NbdNvme {
                    socket,
                    export,
                    identity,
                } => Attach::NbdNvme {
                    server: NbdServer::Unix(socket),
                    export,
                    identity,
                },
            };
            opts.extend(
                attach
                    .options(&format!("disk{i}"))
                    .map_err(|e| GuestError::Config(e.to_string()))?,
            );
        }
        Ok(opts)
    }

    /// Boots the guest, runs `script` with `/bin/sh` in the host-root
    /// chroot, and powers off. Errors if QEMU cannot start, exits early, or
    /// the whole run exceeds `timeout` (QEMU is then killed); errors carry
    /// the tail of the console log. A script failing is not an error: see
    /// [`GuestRun::exit_code`].
    pub fn run_script(&self, script: &str, timeout: Duration) -> Result<GuestRun> {
        self.run_script_streaming(script, timeout, |_| {})
    }

    /// [`Guest::run_script`], also passing each line of the script's output
    /// to `on_line` as it appears on the console (within ~50 ms), for
    /// progress displays. A last line without a newline is passed at the end.
    pub fn run_script_streaming(
        &self,
        script: &str,
        timeout: Duration,
        mut on_line: impl FnMut(&str),
    ) -> Result<GuestRun> {
        let image = ensure_image()?;
        let accel = match self.accel {
            Some(a) => a,
            None => detect_accel(&image)?,
        };
        self.run_with(&image, accel, script, timeout, &mut on_line)
    }

    /// [`Guest::run_script`] with the image and accelerator given.
    pub(super) fn run_with(
        &self,
        image: &GuestImage,
        accel: Accel,
        script: &str,
        timeout: Duration,
        on_line: &mut dyn FnMut(&str),
    ) -> Result<GuestRun> {
        let run_dir = RunDir::create()?;
        let script_path = run_dir.path.join("script.sh");
        std::fs::write(&script_path, script)
            .map_err(io_err(format!("writing {}", script_path.display())))?;
        let console_path = match &self.console_log {
            Some(p) => p.clone(),
            None => run_dir.path.join("console.log"),
        };
        let stderr_path = run_dir.path.join("qemu.stderr");
        let token = run_dir.token.clone();
        let args = self.qemu_args(image, accel, &script_path, &token, &console_path)?;
        let qemu = qemu_binary();
        log::debug!("starting {} {:?}", qemu.to_string_lossy(), args);
        let stderr_file = File::create(&stderr_path)
            .map_err(io_err(format!("creating {}", stderr_path.display())))?;
        let start = Instant::now();
        let child = Command::new(&qemu)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr_file)
            .spawn()
            .map_err(|source| GuestError::MissingProgram {
                program: qemu.to_string_lossy().into(),
                source,
            })?;
        let mut child = KillOnDrop(child);

        let mut boot_time = None;
        let mut streamed = 0; // bytes of output already passed to on_line
        let mut finished_at: Option<Instant> = None;
        let poll = Duration::from_millis(50);
        let status = loop {
            if let Some(status) = child.0.try_wait().map_err(io_err("waiting for QEMU"))? {
                break status;
            }
            let log = read_lossy(&console_path);
            let c = console::parse(&log, &token);
            if boot_time.is_none() && c.began {
                boot_time = Some(start.elapsed());
                log::debug!("guest script started after {:?}", start.elapsed());
            }
            if let Some(so_far) = &c.lines_so_far {
                so_far[streamed..].lines().for_each(&mut *on_line);
                streamed = so_far.len();
            }
            if let Some(reason) = c.init_error {
                return Err(GuestError::GuestInit {
                    reason,
                    console_tail: tail_lines(&log, 40),
                });
            }
            if c.finished.is_some() {
                // Normally QEMU exits right after the poweroff; don't hang if not.
                let t = *finished_at.get_or_insert_with(Instant::now);
                if t.elapsed() > Duration::from_secs(10) {
                    log::warn!("guest finished but QEMU did not exit; killing it");
                    child.kill();
                    break child.0.wait().map_err(io_err("waiting for QEMU"))?;
                }
            }
            if self
                .cancel
                .as_ref()
                .is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
            {
                child.kill();
                let _ = child.0.wait();
                return Err(GuestError::Cancelled);
            }
            if c.finished.is_none()
                && self
                    .power_loss
                    .as_ref()
                    .is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
            {
                child.kill();
                let _ = child.0.wait();
                let log = read_lossy(&console_path);
                let c = console::parse(&log, &token);
                let output = c.lines_so_far.unwrap_or_default();
                output
                    .get(streamed..)
                    .unwrap_or("")
                    .lines()
                    .for_each(&mut *on_line);
                log::info!(
                    "guest ({}): the machine lost its power after {:.1} s",
                    accel.name(),
                    start.elapsed().as_secs_f64()
                );
                return Ok(GuestRun {
                    output,
                    exit_code: POWER_LOST,
                    boot_time: boot_time.unwrap_or_else(|| start.elapsed()),
                    total_time: start.elapsed(),
                    accel,
                    console: log,
                    powered_off: true,
                });
            }
            if start.elapsed() > timeout {
                child.kill();
                let log = read_lossy(&console_path);
                return Err(GuestError::Timeout {
                    timeout,
                    run_dir: run_dir.keep(),
                    stderr: stderr_note(&stderr_path),
                    console_tail: tail_lines(&log, 40),
                });
            }
            std::thread::sleep(poll);
        };
        let total_time = start.elapsed();
        let log = read_lossy(&console_path);
        let c: Console = console::parse(&log, &token);
        if let Some(reason) = c.init_error {
            return Err(GuestError::GuestInit {
                reason,
                console_tail: tail_lines(&log, 40),
            });
        }
        let Some((output, exit_code)) = c.finished else {
            return Err(GuestError::QemuExited {
                status: status.to_string(),
                run_dir: run_dir.keep(),
                stderr: stderr_note(&stderr_path),
                console_tail: tail_lines(&log, 40),
            });
        };
        output
            .get(streamed..)
            .unwrap_or("")
            .lines()
            .for_each(&mut *on_line);
        let boot_time = boot_time.unwrap_or(total_time);
        log::info!(
            "guest ({}) ran script: exit {exit_code}, boot {:.1} s, total {:.1} s",
            accel.name(),
            boot_time.as_secs_f64(),
            total_time.as_secs_f64()
        );
        Ok(GuestRun {
            output,
            exit_code,
            boot_time,
            total_time,
            accel,
            console: log,
            powered_off: false,
        })
    }
}

/// A path as UTF-8 for a QEMU option.
fn path_opt(path: &Path) -> Result<String> {
    path.to_str()
        .map(str::to_string)
        .ok_or_else(|| GuestError::Config(format!("path {} is not UTF-8", path.display())))
}

/// Whether `s` can be one kernel command-line word.
fn cmdline_safe(s: &str) -> bool {
    !s.is_empty()
        && !s
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c == '\'' || c.is_control())
}

fn read_lossy(path: &Path) -> String {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn stderr_note(path: &Path) -> String {
    let text = read_lossy(path);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!("\n--- QEMU stderr ---\n{}", tail_lines(text, 20))
    }
}

/// Kills QEMU if the run is abandoned (error, panic in the caller's thread).
struct KillOnDrop(Child);

impl KillOnDrop {
    fn kill(&mut self) {
        let _ = self.0.kill();
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A per-run directory (script, console log, QEMU stderr) under the
/// system temp directory; removed when the run succeeds, kept on failure.
struct RunDir {
    path: PathBuf,
    token: String,
    keep: bool,
}

impl RunDir {
    fn create() -> Result<RunDir> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let token = format!(
            "{:x}{:x}{:08x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            nanos
        );
        let path = std::env::temp_dir().join(format!("vssd-guest-{token}"));
        std::fs::create_dir(&path).map_err(io_err(format!("creating {}", path.display())))?;
        Ok(RunDir {
            path,
            token,
            keep: false,
        })
    }

    /// Keeps the directory for post-mortem and returns its path.
    fn keep(mut self) -> PathBuf {
        self.keep = true;
        self.path.clone()
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// The accelerator to use for `image`: `$VSSD_ACCEL` if set, TCG when
/// `/dev/kvm` cannot be opened, else the (cached) result of the KVM probe:
/// a few seconds at most where KVM hangs (see the accelerator module).
pub fn detect_accel(image: &GuestImage) -> Result<Accel> {
    detect_with(image, probe_kvm)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> GuestImage {
        GuestImage {
            dir: "/c".into(),
            kernel: "/c/vmlinuz".into(),
            initrd: "/c/initrd.cpio".into(),
            kernel_release: "6.1.0-57-amd64".into(),
        }
    }

    fn args(g: &Guest) -> Result<Vec<String>> {
        g.qemu_args(
            &image(),
            Accel::Tcg,
            Path::new("/tmp/r/script.sh"),
            "tok",
            Path::new("/tmp/r/con.log"),
        )
        .map(|v| v.into_iter().map(|s| s.into_string().unwrap()).collect())
    }

    fn joined(g: &Guest) -> String {
        args(g).unwrap().join(" ")
    }

    #[test]
    fn base_command_line() {
        let a = joined(&Guest::new().memory_mib(512).smp(2));
        assert!(a.contains("-accel tcg,thread=multi -smp 2 -m 512M"));
        assert!(a.contains(
            "-object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem"
        ));
        assert!(a.contains(
            "-append console=ttyS0 panic=-1 mitigations=off vssd.script=/tmp/r/script.sh vssd.token=tok"
        ));
        assert!(a.contains("-chardev file,id=console,path=/tmp/r/con.log -serial chardev:console"));
        assert!(a.contains("mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"));
    }

    #[test]
    fn disks_command_lines() {
        let id = |serial: &str| Identity {
            model: "M, X".into(),
            serial: serial.into(),
            firmware: "F1".into(),
            wwn: None,
            smart: vssd_profile::SmartSet::Generic,
            read_after_trim: Default::default(),
        };
        let g = Guest::new()
            .disk(Disk::VhostUserBlk {
                socket: "/s/v,1.sock".into(),
                num_queues: 2,
            })
            .disk(Disk::NbdSata {
                socket: "/s/n.sock".into(),
                export: "d".into(),
                identity: id("S1"),
            })
            .disk(Disk::NbdNvme {
                socket: "/s/n.sock".into(),
                export: "e".into(),
                identity: id("VSSD1"),
            })
            .disk(Disk::NbdSata {
                socket: "/s/m.sock".into(),
                export: "f".into(),
                identity: id("S3"),
            });
        let a = joined(&g);
        assert!(a.contains(
            "-chardev socket,id=disk0,path=/s/v,,1.sock -device vhost-user-blk-pci,chardev=disk0,num-queues=2"
        ));
        assert_eq!(a.matches("-device ahci,id=ahci").count(), 1);
        assert!(a.contains(
            "-blockdev driver=nbd,node-name=disk1-nbd,server.type=unix,server.path=/s/n.sock,export=d,discard=unmap \
             -blockdev driver=raw,node-name=disk1-raw,file=disk1-nbd,discard=unmap \
             -device ide-hd,id=disk1,drive=disk1-raw,bus=ahci.0,rotation_rate=1,discard_granularity=512,model=M,, X,serial=S1,ver=F1"
        ));
        assert!(a.contains(
            "-blockdev driver=nbd,node-name=disk2-nbd,server.type=unix,server.path=/s/n.sock,export=e,discard=unmap \
             -device nvme,id=disk2,drive=disk2-nbd,serial=VSSD1"
        ));
        assert!(a.contains("drive=disk3-raw,bus=ahci.1,"));
    }

    #[test]
    fn bad_configs_rejected() {
        assert!(args(&Guest::new().memory_mib(64)).is_err());
        assert!(args(&Guest::new().kernel_arg("a b")).is_err());
        assert!(
            args(&Guest::new().disk(Disk::VhostUserBlk {
                socket: "/s".into(),
                num_queues: 0
            }))
            .is_err()
        );
        let r = Guest::new().qemu_args(
            &image(),
            Accel::Kvm,
            Path::new("/tmp/a b/s.sh"),
            "t",
            Path::new("/l"),
        );
        assert!(matches!(r, Err(GuestError::Config(_))));
    }
}
