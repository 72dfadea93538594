//! Choosing the QEMU accelerator: KVM when it really works, TCG otherwise.
//!
//! `/dev/kvm` opening is not enough: on some hosts (nested virtualisation)
//! KVM guests hang right after the kernel starts. So the first time, a
//! probe boots the guest under KVM running `true` with a short timeout; the
//! verdict is cached in the image directory, keyed by guest kernel, QEMU
//! version and host kernel, and `VSSD_ACCEL=kvm|tcg` skips all of it.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::Mutex;

use super::image::GuestImage;
use super::{GuestError, Result, io_err};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accel_names_round_trip() {
        for a in [Accel::Kvm, Accel::Tcg] {
            assert_eq!(a.name().parse::<Accel>().unwrap(), a);
        }
        assert!("hvf".parse::<Accel>().is_err());
        assert_eq!(Accel::Tcg.qemu_arg(), "tcg,thread=multi");
    }
}
