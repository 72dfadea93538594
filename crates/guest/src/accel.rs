//! Choosing the QEMU accelerator: KVM when it really works, TCG otherwise.
//!
//! `/dev/kvm` opening is not enough: on some hosts (nested virtualisation)
//! KVM guests hang right after the kernel starts. So the first time, a
//! probe ([`probe_kvm`]) tries KVM in steps, each bounded, cheapest first:
//! the KVM API answers and creates a VM (milliseconds); the guest kernel
//! alone boots to its "no root" panic and QEMU exits ([`probe_kernel`]:
//! about a second where KVM works, given up after 3 s without a line on
//! the console, which is what a hanging KVM shows); then the whole guest
//! runs `true`. The verdict is cached in the image directory, keyed by
//! guest kernel, QEMU version and host kernel, and `VSSD_ACCEL=kvm|tcg`
//! skips all of it.

use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::image::GuestImage;
use super::{Guest, GuestError, Result, io_err};

/// Name of the verdict cache file in the image directory. One line per key:
/// `guest-kernel-release TAB qemu-version TAB host-kernel-release TAB kvm|tcg`
/// (benches/guest-vs-qsd.sh reads it too).
const VERDICT_FILE: &str = "accel-verdict";

/// A QEMU accelerator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// Hardware virtualisation (`-accel kvm`).
    Kvm,
    /// Multi-threaded binary translation (`-accel tcg,thread=multi`).
    Tcg,
}

impl Accel {
    /// The value of QEMU's `-accel` option.
    pub fn qemu_arg(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg,thread=multi",
        }
    }

    /// `kvm` or `tcg`.
    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

impl FromStr for Accel {
    type Err = GuestError;

    fn from_str(s: &str) -> Result<Accel> {
        match s.trim() {
            "kvm" => Ok(Accel::Kvm),
            "tcg" => Ok(Accel::Tcg),
            other => Err(GuestError::Config(format!(
                "unknown accelerator {other:?} (expected kvm or tcg)"
            ))),
        }
    }
}

/// The QEMU system emulator: `$VSSD_QEMU`, else `qemu-system-x86_64`.
pub(super) fn qemu_binary() -> OsString {
    std::env::var_os("VSSD_QEMU")
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "qemu-system-x86_64".into())
}

/// First line of `qemu-system-x86_64 --version`; the error tells how to
/// install QEMU when it is missing.
pub fn qemu_version() -> Result<String> {
    let qemu = qemu_binary();
    let missing = |source| GuestError::MissingProgram {
        program: qemu.to_string_lossy().into(),
        source,
    };
    let out = Command::new(&qemu)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(missing)?;
    if !out.status.success() {
        return Err(missing(std::io::Error::other(format!(
            "`--version` exited with {}",
            out.status
        ))));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string())
}

/// Verdicts already reached by this process.
static DETECTED: Mutex<Option<(String, Accel)>> = Mutex::new(None);

/// The accelerator to use for `image`: `$VSSD_ACCEL` if set, TCG when
/// `/dev/kvm` cannot be opened, else the (cached) verdict of `probe`, a
/// test boot under KVM (the runner's [`super::detect_accel`] supplies it).
pub(super) fn detect_with(image: &GuestImage, probe: fn(&GuestImage) -> Accel) -> Result<Accel> {
    if let Some(forced) = std::env::var_os("VSSD_ACCEL").filter(|s| !s.is_empty()) {
        return forced.to_string_lossy().parse();
    }
    let version = qemu_version()?;
    if let Err(e) = OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        log::info!("using TCG: /dev/kvm: {e}");
        return Ok(Accel::Tcg);
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let key = format!("{}\t{}\t{}", image.kernel_release, version, host.trim());

    let mut detected = DETECTED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((k, accel)) = detected.as_ref()
        && *k == key
    {
        return Ok(*accel);
    }
    let lock_path = image.dir.join(".accel.lock");
    let lock =
        File::create(&lock_path).map_err(io_err(format!("creating {}", lock_path.display())))?;
    // SAFETY: flock on a file descriptor we own and keep open; no memory involved.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(GuestError::Io {
            what: format!("locking {}", lock_path.display()),
            source: std::io::Error::last_os_error(),
        });
    }
    let verdict_path = image.dir.join(VERDICT_FILE);
    let cached = std::fs::read_to_string(&verdict_path).unwrap_or_default();
    let accel = match cached
        .lines()
        .find_map(|l| l.strip_prefix(&key)?.strip_prefix('\t'))
    {
        Some(v) => v.parse()?,
        None => {
            let accel = probe(image);
            log::info!(
                "KVM verdict cached in {} (delete the line to probe again, or set VSSD_ACCEL)",
                verdict_path.display()
            );
            let mut f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&verdict_path)
                .map_err(io_err(format!("opening {}", verdict_path.display())))?;
            writeln!(f, "{key}\t{}", accel.name())
                .map_err(io_err(format!("writing {}", verdict_path.display())))?;
            accel
        }
    };
    drop(lock);
    *detected = Some((key, accel));
    Ok(accel)
}

/// A working KVM shows the kernel's first console line within a second
/// of QEMU starting (TCG within 0.6 s on a busy 2-core host); a KVM that
/// hangs at the kernel's start shows none, ever.
const FIRST_OUTPUT: Duration = Duration::from_secs(3);
/// The kernel-only boot, to its panic, under KVM: about a second.
const KERNEL_BOOT: Duration = Duration::from_secs(15);
/// The whole guest running `true` under KVM: 1-3 s.
const GUEST_BOOT: Duration = Duration::from_secs(20);

/// KVM's ioctls (`linux/kvm.h`: `_IO(KVMIO, 0x00)` and `_IO(KVMIO, 0x01)`).
const KVM_GET_API_VERSION: u64 = 0xAE00;
const KVM_CREATE_VM: u64 = 0xAE01;

/// Whether the KVM API answers and makes a VM.
fn kvm_api() -> std::result::Result<(), String> {
    let kvm = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .map_err(|e| format!("/dev/kvm: {e}"))?;
    // SAFETY: KVM_GET_API_VERSION takes no argument and touches no memory.
    let v = unsafe { libc::ioctl(kvm.as_raw_fd(), KVM_GET_API_VERSION as _, 0) };
    if v != 12 {
        return Err(format!("KVM API version {v}, not 12"));
    }
    // SAFETY: KVM_CREATE_VM's argument is the machine type (0: default); it
    // returns a new file descriptor or -1, and touches no memory of ours.
    let vm = unsafe { libc::ioctl(kvm.as_raw_fd(), KVM_CREATE_VM as _, 0) };
    if vm < 0 {
        return Err(format!(
            "KVM cannot create a VM: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: `vm` is a file descriptor the kernel just gave us, owned by
    // nothing else; closing it destroys the empty VM.
    drop(unsafe { OwnedFd::from_raw_fd(vm) });
    Ok(())
}

/// Whether the guest's kernel boots under `accel`: QEMU boots it with no
/// initramfs and no disk, so it panics for want of a root filesystem and
/// QEMU exits (`panic=-1`, `-no-reboot`). Fails, killing QEMU, when the
/// console shows nothing within 3 s of QEMU starting or the panic does not
/// come within 15 s; returns how long it took.
pub fn probe_kernel(image: &GuestImage, accel: Accel) -> std::result::Result<Duration, String> {
    kernel_boot(&qemu_binary(), image, accel, FIRST_OUTPUT, KERNEL_BOOT)
}

fn kernel_boot(
    qemu: &OsStr,
    image: &GuestImage,
    accel: Accel,
    first_output: Duration,
    within: Duration,
) -> std::result::Result<Duration, String> {
    let dir = tempfile::Builder::new()
        .prefix("vssd-kvm-probe-")
        .tempdir()
        .map_err(|e| format!("a scratch directory: {e}"))?;
    let log = dir.path().join("console.log");
    let mut serial = OsString::from("file:");
    serial.push(&log);
    let start = Instant::now();
    let mut child = Command::new(qemu)
        .args([
            "-nodefaults",
            "-no-user-config",
            "-no-reboot",
            "-display",
            "none",
        ])
        .args(["-accel", accel.qemu_arg(), "-smp", "1", "-m", "128"])
        .arg("-kernel")
        .arg(&image.kernel)
        .args(["-append", "console=ttyS0 earlyprintk=serial,ttyS0 panic=-1"])
        .arg("-serial")
        .arg(serial)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", qemu.to_string_lossy()))?;
    let console = || std::fs::read(&log).unwrap_or_default();
    let verdict = loop {
        if let Ok(Some(status)) = child.try_wait() {
            let text = String::from_utf8_lossy(&console()).into_owned();
            break if text.contains("Kernel panic") {
                Ok(start.elapsed())
            } else {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                let first = err.lines().next().unwrap_or("").trim().to_string();
                Err(format!(
                    "QEMU exited ({status}) before the kernel's end: {first}"
                ))
            };
        }
        let t = start.elapsed();
        if t > first_output && console().is_empty() {
            break Err(format!(
                "no console output from the kernel within {first_output:?}"
            ));
        }
        if t > within {
            break Err(format!(
                "the kernel did not finish booting within {within:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    verdict
}

/// The probe behind [`super::detect_accel`]: TCG at the first step that
/// fails (see the module's documentation).
pub(super) fn probe_kvm(image: &GuestImage) -> Accel {
    if let Err(why) = kvm_api() {
        log::warn!("KVM does not work here ({why}): using TCG");
        return Accel::Tcg;
    }
    log::info!(
        "probing KVM: the guest kernel alone (no console line within {FIRST_OUTPUT:?}: it does not work)"
    );
    match probe_kernel(image, Accel::Kvm) {
        Ok(t) => log::info!("the kernel booted under KVM in {:.1} s", t.as_secs_f64()),
        Err(why) => {
            log::warn!("KVM does not work here ({why}): using TCG");
            return Accel::Tcg;
        }
    }
    log::info!("probing KVM: the whole guest (up to {GUEST_BOOT:?})");
    match Guest::new()
        .memory_mib(256)
        .run_with(image, Accel::Kvm, "true", GUEST_BOOT, &mut |_| {})
    {
        Ok(run) if run.exit_code == 0 => {
            log::info!(
                "KVM works (probe boot {:.1} s): using KVM",
                run.total_time.as_secs_f64()
            );
            Accel::Kvm
        }
        Ok(run) => {
            log::warn!("KVM probe script exited {}: using TCG", run.exit_code);
            Accel::Tcg
        }
        Err(e) => {
            // A failed probe is expected on such hosts: don't keep its files.
            if let GuestError::Timeout { run_dir, .. } | GuestError::QemuExited { run_dir, .. } = &e
            {
                let _ = std::fs::remove_dir_all(run_dir);
            }
            let first = e.to_string().lines().next().unwrap_or("").to_string();
            log::warn!("KVM does not work here ({first}): using TCG");
            Accel::Tcg
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A QEMU that prints nothing (as a hanging KVM guest) is given up on
    /// at the first-output deadline, and killed.
    #[test]
    fn a_silent_boot_is_given_up_early() {
        let d = tempfile::tempdir().unwrap();
        let fake = d.path().join("qemu");
        std::fs::write(&fake, "#!/bin/sh\nexec sleep 60\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let image = GuestImage {
            dir: d.path().into(),
            kernel: d.path().join("vmlinux"),
            initrd: d.path().join("initrd.cpio"),
            kernel_release: "x".into(),
        };
        let t = Instant::now();
        let e = kernel_boot(
            fake.as_os_str(),
            &image,
            Accel::Kvm,
            Duration::from_millis(300),
            Duration::from_secs(60),
        )
        .unwrap_err();
        assert!(e.contains("no console output"), "{e}");
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the fake QEMU was not killed"
        );
        // A QEMU that fails at once says why.
        std::fs::write(
            &fake,
            "#!/bin/sh\necho 'failed to set MSR 0x10a' >&2; exit 1\n",
        )
        .unwrap();
        let e = kernel_boot(
            fake.as_os_str(),
            &image,
            Accel::Kvm,
            Duration::from_secs(3),
            Duration::from_secs(60),
        )
        .unwrap_err();
        assert!(e.contains("failed to set MSR"), "{e}");
    }

    #[test]
    fn accel_names_round_trip() {
        for a in [Accel::Kvm, Accel::Tcg] {
            assert_eq!(a.name().parse::<Accel>().unwrap(), a);
        }
        assert!("hvf".parse::<Accel>().is_err());
        assert_eq!(Accel::Tcg.qemu_arg(), "tcg,thread=multi");
    }
}
