//! Building (or finding in the cache) the guest kernel and initramfs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use super::{GuestError, Result, io_err};

/// A built test guest: what QEMU needs for `-kernel` / `-initrd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestImage {
    /// The cache directory holding the files below.
    pub dir: PathBuf,
    /// The kernel for `-kernel`: `vmlinux` (ELF, PVH entry: no in-guest
    /// decompression, boots seconds faster under TCG) when the build could
    /// extract it, else `vmlinuz` (the Debian bzImage).
    pub kernel: PathBuf,
    /// The initramfs (`initrd.cpio`: busybox, modules, `/init`).
    pub initrd: PathBuf,
    /// The kernel release, e.g. `6.1.0-57-amd64`.
    pub kernel_release: String,
}

/// The image cache directory: `$VSSD_GUEST_DIR`, else
/// `<crate>/vm-images/cache`.
pub fn guest_dir() -> PathBuf {
    match std::env::var_os("VSSD_GUEST_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vm-images/cache"),
    }
}

/// The build script, found relative to this crate's sources.
fn build_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vm-images/build-guest.sh")
}

/// Images already ensured by this process, per cache directory.
static ENSURED: Mutex<Vec<GuestImage>> = Mutex::new(Vec::new());

/// Makes sure the test guest is built in [`guest_dir`] and returns it.
///
/// Runs `vm-images/build-guest.sh DIR` once per process and directory (the
/// script itself is cached on disk, so an unchanged guest costs ~0.1 s; a
/// first build downloads ~70 MB of Debian packages and takes ~10-30 s).
/// Concurrent callers, in this process or others, are serialised.
pub fn ensure_image() -> Result<GuestImage> {
    let dir = guest_dir();
    let mut ensured = ENSURED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(image) = ensured.iter().find(|i| i.dir == dir) {
        return Ok(image.clone());
    }
    let image = build(&dir)?;
    ensured.push(image.clone());
    Ok(image)
}

fn build(dir: &Path) -> Result<GuestImage> {
    let script = build_script();
    log::debug!(
        "ensuring test guest in {} with {}",
        dir.display(),
        script.display()
    );
    let out = Command::new("bash")
        .arg(&script)
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|source| GuestError::MissingProgram {
            program: "bash".into(),
            source,
        })?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in stderr.lines() {
        log::info!("{line}");
    }
    if !out.status.success() {
        return Err(GuestError::ImageBuild {
            script,
            status: out.status.to_string(),
            stderr: tail_lines(&stderr, 30),
        });
    }
    let release_file = dir.join("kernel-release");
    let kernel_release = std::fs::read_to_string(&release_file)
        .map_err(io_err(format!("reading {}", release_file.display())))?
        .trim()
        .to_string();
    let image = GuestImage {
        dir: dir.to_path_buf(),
        kernel: [dir.join("vmlinux"), dir.join("vmlinuz")]
            .into_iter()
            .find(|k| k.is_file())
            .unwrap_or_else(|| dir.join("vmlinuz")),
        initrd: dir.join("initrd.cpio"),
        kernel_release,
    };
    for file in [&image.kernel, &image.initrd] {
        if !file.is_file() {
            return Err(GuestError::ImageBuild {
                script,
                status: "success".into(),
                stderr: format!("{} is missing after the build", file.display()),
            });
        }
    }
    Ok(image)
}

/// The last `n` lines of `text`.
pub(super) fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
