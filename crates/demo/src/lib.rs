//! `vssd demo`: vssd's main jobs end to end. Starts `vssd serve`, boots the
//! test guest on it over the chosen bus, and runs one scenario:
//!
//! - [`used_state`] (default): fresh, used (after random writes), trimmed;
//! - [`trim_passthrough`]: does a filesystem's TRIM reach the drive through
//!   this bus and driver, and what does it free? (protocol P2, made exact).

pub mod trim_passthrough;
pub mod used_state;

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use thiserror::Error;

use vssd_guest::bus::Bus;
pub use vssd_guest::fs::Fs;
use vssd_guest::serve::{ServeProcess, ServeProcessError};
use vssd_guest::{GuestError, ensure_image};
use vssd_profile::size::{format_size, parse_size};
use vssd_profile::{Profile, ProfileError};

/// What the demo shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Sequential writes fresh, after random writes, after a whole-disk TRIM.
    UsedState,
    /// A filesystem's deleted files: TRIM with `mount -o discard`, with
    /// `fstrim`, with neither; what reached the drive and what it freed.
    TrimPassthrough,
}

/// `vssd demo` options.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// What to show.
    #[arg(long, value_enum, default_value = "used-state")]
    pub scenario: Scenario,
    /// How the guest sees the drive: virtio-blk (vhost-user), a SATA SSD on
    /// AHCI, or NVMe (both through NBD).
    #[arg(long, value_enum, default_value = "virtio")]
    pub bus: Bus,
    /// Filesystem of the trim-passthrough scenario.
    #[arg(long, value_enum, default_value = "ext4")]
    pub fs: Fs,
    /// Drive profile (preset name or TOML file).
    #[arg(long, default_value = "sata-mlc-2011")]
    pub profile: String,
    /// Exported capacity: small, so the random-write phases take minutes, yet
    /// large against the drive's write buffer (32 MiB on sata-mlc-2011),
    /// which would otherwise absorb much of each quarter's writes.
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    pub capacity: u64,
    /// Random 4 KiB writes in each "age the drive" phase, as a multiple of
    /// the capacity (used-state) or of the files written (trim-passthrough).
    #[arg(long, default_value_t = 1.5)]
    pub random_passes: f64,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Give up after this many seconds (per guest boot).
    #[arg(long, default_value_t = 1200)]
    pub timeout: u64,
}

/// Errors of the demo.
#[derive(Debug, Error)]
pub enum DemoError {
    /// The profile is invalid.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// Building or running the guest failed.
    #[error(transparent)]
    Guest(#[from] GuestError),
    /// Starting or talking to `vssd serve` failed.
    #[error(transparent)]
    Serve(#[from] ServeProcessError),
    /// Local files (scratch directory).
    #[error("{0}")]
    Io(String),
    /// Printing the result failed.
    #[error("writing the result")]
    Output(#[source] vssd_common::cli_out::StdoutError),
    /// The guest script failed.
    #[error("the guest script failed (status {status}); its output:\n{output}")]
    Script {
        /// Exit status.
        status: i32,
        /// What it printed.
        output: String,
    },
    /// fio's output could not be read.
    #[error("could not read fio's result for phase {phase}: {why}")]
    Fio {
        /// Phase name.
        phase: String,
        /// Why.
        why: String,
    },
}

/// What every scenario needs: the drive, a scratch directory, messages.
pub struct Env {
    /// The drive's profile at the chosen capacity.
    pub profile: Profile,
    /// Private scratch directory (sockets, logs), removed at the end.
    pub dir: tempfile::TempDir,
    exe: PathBuf,
    args_profile: String,
    capacity: u64,
    bus: Bus,
    quiet: bool,
}

impl Env {
    /// A progress message on stderr (not in JSON mode).
    pub fn say(&self, m: &str) {
        if !self.quiet {
            eprintln!("vssd demo: {m}");
        }
    }

    /// Print the result on stdout.
    pub fn print(&self, text: &str) -> Result<(), DemoError> {
        vssd_common::cli_out::print(&format!("{text}\n")).map_err(DemoError::Output)
    }

    /// Start `vssd serve` for the bus: data in memory, SCHED_FIFO
    /// completion threads (they keep completions on time while the guest's
    /// vCPUs use every core; a warning where that is not permitted).
    pub fn start_serve(&self) -> Result<ServeProcess, DemoError> {
        self.say(&format!(
            "starting vssd serve: profile {}, {} (predicted fresh sequential write {:.0} MB/s), {} bus",
            self.profile.name,
            format_size(self.capacity),
            self.profile.predict().seq_write_bytes_s / 1e6,
            self.bus
        ));
        let args = [
            "--profile".to_string(),
            self.args_profile.clone(),
            "--capacity".to_string(),
            self.capacity.to_string(),
            "--memory".to_string(),
            "--realtime".to_string(),
        ];
        Ok(ServeProcess::start(
            &self.exe,
            self.dir.path(),
            self.bus,
            2,
            &args,
        )?)
    }
}

/// Run the demo.
pub fn run(args: DemoArgs) -> Result<(), DemoError> {
    let profile = Profile::load_with_capacity(&args.profile, Some(args.capacity))?;
    let dir = tempfile::Builder::new()
        .prefix("vssd-demo-")
        .tempdir()
        .map_err(|e| DemoError::Io(format!("creating a scratch directory: {e}")))?;
    let exe = std::env::current_exe()
        .map_err(|e| DemoError::Io(format!("finding the vssd binary: {e}")))?;
    let env = Env {
        profile,
        dir,
        exe,
        args_profile: args.profile.clone(),
        capacity: args.capacity,
        bus: args.bus,
        quiet: args.json,
    };
    env.say("preparing the test guest (first run downloads a Debian kernel)");
    ensure_image()?;
    match args.scenario {
        Scenario::UsedState => used_state::run(&args, &env),
        Scenario::TrimPassthrough => trim_passthrough::run(&args, &env),
    }
}

/// The model's mean bandwidth for `bytes` of sequential writes on a fresh
/// drive whose write buffer is empty when they start (the demos pause
/// before each measured write, and the buffer drains meanwhile).
pub(crate) fn write_from_empty_buffer(profile: &Profile, bytes: u64) -> f64 {
    let p = profile.predict();
    from_empty_buffer(
        bytes,
        profile.buffer.size.0,
        p.seq_write_bytes_s,
        p.link_bytes_s,
    )
}

/// Mean bandwidth of writing `bytes` sequentially at `sustained` bytes/s
/// when a write buffer of `buffer` bytes starts empty: the buffer fills at
/// the rate data arrives above what the NAND programs, so the writing ends
/// `buffer` bytes early, or at the link's pace if that is slower.
fn from_empty_buffer(bytes: u64, buffer: u64, sustained: f64, link: f64) -> f64 {
    if sustained <= 0.0 {
        return 0.0;
    }
    let nand_s = bytes.saturating_sub(buffer) as f64 / sustained;
    let link_s = if link.is_finite() && link > 0.0 {
        bytes as f64 / link
    } else {
        0.0
    };
    let t = nand_s.max(link_s);
    if t > 0.0 { bytes as f64 / t } else { sustained }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drained_buffer_lifts_a_quarter_above_the_sustained_rate() {
        // 256 MiB at 175 MB/s with a 32 MiB buffer over a 600 MB/s link:
        // the NAND needs to take only 224 MiB in the quarter's time.
        let q = from_empty_buffer(256 << 20, 32 << 20, 175e6, 600e6);
        let want = (256u64 << 20) as f64 / ((224u64 << 20) as f64 / 175e6);
        assert!((q - want).abs() < 1.0, "{q} vs {want}");
        assert!(q > 199e6 && q < 201e6, "{q}");
        // A buffer as large as the quarter: the link sets the pace.
        let q = from_empty_buffer(32 << 20, 64 << 20, 175e6, 600e6);
        assert!((q - 600e6).abs() < 1.0, "{q}");
        // No buffer: the sustained rate.
        let q = from_empty_buffer(256 << 20, 0, 175e6, f64::INFINITY);
        assert!((q - 175e6).abs() < 1.0, "{q}");
    }
}
