//! Scenario files: the drive, the guest, and an ordered list of phases, in
//! TOML. Everything is checked when the file is loaded — unknown phase
//! kinds or fields, missing or invalid job files, bad sizes, bad or
//! dangling assertions — with the file, the line and what is wrong, before
//! anything boots.
//!
//! ```toml
//! name = "trim-recovery"
//! description = "..."
//! strict = true        # an inconclusive check fails the run (CI)
//! [drive]
//! profile = "sata-slc-2009"
//! capacity = "1G"
//! [guest]
//! bus = "sata"
//! [[phase]]
//! kind = "secure-erase"
//! [[phase]]
//! name = "fresh"
//! kind = "surface"
//! op = "write"
//! [[phase]]
//! name = "random"
//! kind = "fio"
//! job = "random-write-4k.fio"
//! [[phase]]
//! kind = "expect"
//! checks = ["random.write_iops > 1000"]
//! ```

use std::path::Path;

use serde::Deserialize;

use super::expr::Assertion;
use vssd_ctl::protocol::{CutTrigger, FaultSpec, Step};
use vssd_guest::bus::Bus;
use vssd_guest::fs::Fs;
use vssd_profile::Profile;
use vssd_profile::size::parse_size;

mod phases;

/// Built-in scenarios: (name, TOML).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "used-state",
        include_str!("../../../../scenarios/used-state.toml"),
    ),
    (
        "trim-recovery",
        include_str!("../../../../scenarios/trim-recovery.toml"),
    ),
    (
        "partition-retention",
        include_str!("../../../../scenarios/partition-retention.toml"),
    ),
    (
        "power-loss",
        include_str!("../../../../scenarios/power-loss.toml"),
    ),
    (
        "cache-cliff",
        include_str!("../../../../scenarios/cache-cliff.toml"),
    ),
];

/// Built-in fio job files, usable by name from any scenario: (name, text).
pub const BUILTIN_JOBS: &[(&str, &str)] = &[
    (
        "seq-write-128k.fio",
        include_str!("../../../../scenarios/jobs/seq-write-128k.fio"),
    ),
    (
        "random-write-4k.fio",
        include_str!("../../../../scenarios/jobs/random-write-4k.fio"),
    ),
    (
        "random-write-4k-2x.fio",
        include_str!("../../../../scenarios/jobs/random-write-4k-2x.fio"),
    ),
    (
        "fill-seq-1m.fio",
        include_str!("../../../../scenarios/jobs/fill-seq-1m.fio"),
    ),
    (
        "retention-layout.fio",
        include_str!("../../../../scenarios/jobs/retention-layout.fio"),
    ),
    (
        "retention-random.fio",
        include_str!("../../../../scenarios/jobs/retention-random.fio"),
    ),
    (
        "retention-seq.fio",
        include_str!("../../../../scenarios/jobs/retention-seq.fio"),
    ),
    (
        "retention-fill.fio",
        include_str!("../../../../scenarios/jobs/retention-fill.fio"),
    ),
    (
        "cache-cliff-empty.fio",
        include_str!("../../../../scenarios/jobs/cache-cliff-empty.fio"),
    ),
    (
        "fill-70.fio",
        include_str!("../../../../scenarios/jobs/fill-70.fio"),
    ),
    (
        "cache-cliff-70.fio",
        include_str!("../../../../scenarios/jobs/cache-cliff-70.fio"),
    ),
];

/// The environment variable job files name the drive with
/// (`filename=${VSSD_DEV}`); fio expands it.
pub const DEV_VAR: &str = "VSSD_DEV";

/// What is wrong with a scenario.
#[derive(Debug, thiserror::Error)]
#[error("{origin}: {msg}")]
pub struct ScenarioError {
    /// `file:line` (or the built-in's name).
    pub origin: String,
    /// What is wrong.
    pub msg: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    tolerance: Option<f64>,
    #[serde(default)]
    strict: bool,
    drive: DriveSpec,
    #[serde(default)]
    guest: GuestSpec,
    #[serde(rename = "phase", default)]
    phases: Vec<phases::PhaseSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DriveSpec {
    profile: String,
    capacity: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct GuestSpec {
    bus: Option<Bus>,
}

/// What a `fault` phase does: `ctl fault add` or `ctl fault clear`.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultAction {
    /// Register a fault.
    Add(FaultSpec),
    /// Remove one fault (by id) or all of them.
    Clear(Option<u64>),
}

/// Files a `files` phase writes, for the `fsck` phase that checks them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSet {
    /// Index of the `files` phase.
    pub phase: usize,
    /// Files.
    pub count: u32,
    /// Bytes per file.
    pub size: u64,
    /// Each file fsynced before the next is written.
    pub fsync: bool,
}

/// Where a guest's `files` phases mount the filesystem.
pub const FS_MOUNT: &str = "/tmp/vssd-fs";

/// How a `trim` phase sends TRIM, the ways an OS does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TrimMethod {
    /// `blkdiscard` of a range (default: the whole disk).
    Blkdiscard,
    /// `mkfs` of the filesystem, which discards the whole disk first.
    Mkfs,
    /// A new filesystem (made without discard), mounted, `fstrim`: all its free space.
    Fstrim,
}

/// What a surface pass does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SurfaceOp {
    /// Read.
    Read,
    /// Write (destroys data).
    Write,
}

/// A checked phase.
#[derive(Debug, Clone)]
pub struct Phase {
    /// Unique name.
    pub name: String,
    /// Line of its `[[phase]]` header.
    pub line: usize,
    /// What it does.
    pub kind: PhaseKind,
}

/// What a phase does, checked.
#[derive(Debug, Clone)]
pub enum PhaseKind {
    /// Back to a fresh drive (host side, control socket).
    SecureErase,
    /// Age the drive in model time (host side).
    Precondition {
        /// Its steps in order (trim everything, sequential fill, random
        /// writes), as `vssd ctl precondition` sends them.
        steps: Vec<Step>,
    },
    /// A fio job file, run unchanged (`filename=${VSSD_DEV}`).
    Fio {
        /// Where it came from.
        origin: String,
        /// Its text.
        text: String,
    },
    /// TRIM the ways an OS sends it.
    Trim {
        /// How.
        method: TrimMethod,
        /// Filesystem (mkfs, fstrim).
        fs: Fs,
        /// Range (blkdiscard).
        offset: u64,
        /// Length (blkdiscard; 0 = to the end).
        length: u64,
    },
    /// HD Tune-style pass.
    Surface {
        /// Read or write.
        op: SurfaceOp,
        /// Request size.
        block: u64,
        /// Bytes per position.
        burst: u64,
        /// Positions.
        positions: u32,
        /// Requests in flight within a burst.
        depth: u32,
    },
    /// Nothing for a while.
    Idle {
        /// How long.
        seconds: f64,
    },
    /// Assertions over earlier phases.
    Expect {
        /// Parsed.
        checks: Vec<Assertion>,
    },
    /// Add or clear a media fault or a stall (control socket, at the
    /// phase's start).
    Fault {
        /// What.
        action: FaultAction,
    },
    /// Cut the drive's power now or arm a cut (control socket, at the
    /// phase's start; the guest waits a second for it).
    PowerCut {
        /// When.
        trigger: CutTrigger,
    },
    /// Power back on (host side: the guest boots again afterwards, as a
    /// machine does after a power cut).
    PowerOn,
    /// ext4 files written in the guest (mkfs and mount first, or on the
    /// filesystem an earlier `files` phase mounted).
    Files {
        /// mkfs.ext4 and mount first.
        mkfs: bool,
        /// `mount -o` options (e.g. `barrier=0`).
        mount_options: String,
        /// Files.
        count: u32,
        /// Bytes per file.
        size: u64,
        /// `conv=fsync` per file.
        fsync: bool,
    },
    /// e2fsck (replay, then a read-only check) and every file of the
    /// earlier `files` phases read back.
    Fsck {
        /// The files to check.
        sets: Vec<FileSet>,
    },
}

impl PhaseKind {
    /// The kind's name as written in scenario files.
    pub fn name(&self) -> &'static str {
        match self {
            PhaseKind::SecureErase => "secure-erase",
            PhaseKind::Precondition { .. } => "precondition",
            PhaseKind::Fio { .. } => "fio",
            PhaseKind::Trim { .. } => "trim",
            PhaseKind::Surface { .. } => "surface",
            PhaseKind::Idle { .. } => "idle",
            PhaseKind::Expect { .. } => "expect",
            PhaseKind::Fault { .. } => "fault",
            PhaseKind::PowerCut { .. } => "power-cut",
            PhaseKind::PowerOn => "power-on",
            PhaseKind::Files { .. } => "files",
            PhaseKind::Fsck { .. } => "fsck",
        }
    }

    /// Runs on the host, not in the guest.
    pub fn host_side(&self) -> bool {
        matches!(
            self,
            PhaseKind::SecureErase
                | PhaseKind::Precondition { .. }
                | PhaseKind::Expect { .. }
                | PhaseKind::PowerOn
        )
    }

    /// Only a guest run measures this kind's own metrics: the simulator
    /// has no data to lose and no filesystem to check.
    pub fn guest_only_metrics(&self) -> bool {
        matches!(
            self,
            PhaseKind::Fault { .. }
                | PhaseKind::PowerCut { .. }
                | PhaseKind::PowerOn
                | PhaseKind::Files { .. }
                | PhaseKind::Fsck { .. }
        )
    }

    /// Metrics a phase of this kind provides, besides the drive's.
    pub fn metrics(&self) -> &'static [&'static str] {
        match self {
            PhaseKind::Fio { .. } => &[
                "write_bw",
                "read_bw",
                "write_iops",
                "read_iops",
                "write_clat_mean",
                "read_clat_mean",
                "write_clat_p99",
                "read_clat_p99",
                "write_drop_s",
                "write_drop_bytes",
                "write_bw_before_drop",
                "write_bw_after_drop",
            ],
            PhaseKind::Surface { .. } => &[
                "mean_bw",
                "median_bw",
                "min_bw",
                "max_bw",
                "first_bw",
                "last_bw",
            ],
            PhaseKind::Trim { .. } => &["trim_bytes", "freed_bytes", "trim_cmds"],
            PhaseKind::Fault { .. } => FAULT_METRICS,
            PhaseKind::PowerCut { .. } | PhaseKind::PowerOn => POWER_METRICS,
            PhaseKind::Files { .. } => &["files_written", "power_lost"],
            PhaseKind::Fsck { .. } => &[
                "fsck_clean",
                "fsck_fixed",
                "files_checked",
                "files_intact",
                "files_lost",
                "synced_files_lost",
            ],
            _ => &[],
        }
    }
}

/// Metrics of a `fault` phase: the fault registry at the phase's end.
pub const FAULT_METRICS: &[&str] = &[
    "faults_active",
    "errors_injected",
    "read_errors_injected",
    "write_errors_injected",
    "stalls_injected",
];

/// Metrics of `power-cut` and `power-on` phases: the power audit at the
/// phase's end (the latest cut's losses).
pub const POWER_METRICS: &[&str] = &[
    "powered",
    "armed",
    "cuts",
    "lost_writes",
    "lost_acked_writes",
    "lost_bytes",
    "protected",
    "pending_writes",
];

/// Metrics every phase has: the drive over the phase.
pub const DRIVE_METRICS: &[&str] = &[
    "waf",
    "host_written",
    "nand_written",
    "free_blocks",
    "wall_s",
    "model_s",
];

/// A checked scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Where it came from (file path or `built-in NAME`).
    pub origin: String,
    /// Its TOML text.
    pub text: String,
    /// The profile as named in the file (or overridden).
    pub profile_name: String,
    /// The drive.
    pub profile: Profile,
    /// Exported bytes.
    pub capacity: u64,
    /// The guest's bus.
    pub bus: Bus,
    /// Sim vs guest tolerance (fraction).
    pub tolerance: f64,
    /// `strict = true`: an inconclusive expectation fails a run (as
    /// `bench run --strict` does; `--no-strict` overrides it).
    pub strict: bool,
    /// The phases.
    pub phases: Vec<Phase>,
}

/// Overrides from the command line.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--capacity`.
    pub capacity: Option<u64>,
    /// `--profile`.
    pub profile: Option<String>,
    /// `--bus`.
    pub bus: Option<Bus>,
}

/// Line (1-based) of the `n`-th `[[phase]]` header of `text`.
fn phase_line(text: &str, n: usize) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("[[phase]]"))
        .nth(n)
        .map(|(i, _)| i + 1)
        .unwrap_or(1)
}

/// A size (`1M`) or a percentage of `capacity` (`90%`, rounded down to 4 KiB).
pub fn size_or_percent(s: &str, capacity: u64) -> Result<u64, String> {
    match s.trim().strip_suffix('%') {
        Some(p) => {
            let f: f64 = p
                .trim()
                .parse()
                .map_err(|_| format!("bad percentage {s:?}"))?;
            if !(0.0..=100.0).contains(&f) {
                return Err(format!("{s:?}: a percentage from 0 to 100"));
            }
            Ok(((capacity as f64 * f / 100.0) as u64) / 4096 * 4096)
        }
        None => parse_size(s).map_err(|e| e.to_string()),
    }
}

fn builtin_job(name: &str) -> Option<&'static str> {
    BUILTIN_JOBS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
}

/// The text of a job file for the simulator: `${VSSD_DEV}` stands for the
/// drive, which the simulator does not need to name.
pub fn job_for_sim(text: &str) -> String {
    text.replace(&format!("${{{DEV_VAR}}}"), "vssd-drive")
}

impl Scenario {
    /// A built-in scenario or a file.
    pub fn load(name_or_path: &str, ov: &Overrides) -> Result<Scenario, ScenarioError> {
        if let Some((n, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            return Self::parse(text, &format!("built-in {n}"), None, ov);
        }
        let path = Path::new(name_or_path);
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            origin: name_or_path.to_string(),
            msg: format!(
                "{e} (built-in scenarios: {})",
                BUILTIN
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })?;
        Self::parse(&text, name_or_path, path.parent(), ov)
    }

    /// Parse and check `text`; job files are looked up in `dir`, then
    /// among the built-in ones.
    pub fn parse(
        text: &str,
        origin: &str,
        dir: Option<&Path>,
        ov: &Overrides,
    ) -> Result<Scenario, ScenarioError> {
        let err = |line: usize, msg: String| ScenarioError {
            origin: format!("{origin}:{line}"),
            msg,
        };
        let spec: FileSpec = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].lines().count().max(1))
                .unwrap_or(1);
            err(line, e.message().to_string())
        })?;
        let profile_name = ov.profile.clone().unwrap_or(spec.drive.profile.clone());
        let capacity = match (ov.capacity, &spec.drive.capacity) {
            (Some(c), _) => Some(c),
            (None, Some(c)) => {
                Some(parse_size(c).map_err(|e| err(1, format!("[drive] capacity: {e}")))?)
            }
            (None, None) => None,
        };
        let profile = Profile::load_with_capacity(&profile_name, capacity)
            .and_then(|p| p.check_memory().map(|()| p))
            .map_err(|e| err(1, format!("[drive]: {e}")))?;
        let capacity = profile.geometry.exported_capacity.0;
        let tolerance = spec.tolerance.unwrap_or(0.10);
        if !(tolerance.is_finite() && tolerance > 0.0 && tolerance <= 1.0) {
            return Err(err(1, format!("tolerance {tolerance} must be in (0, 1]")));
        }
        if spec.phases.is_empty() {
            return Err(err(1, "no [[phase]]".into()));
        }
        let mut phases: Vec<Phase> = Vec::new();
        for (i, p) in spec.phases.into_iter().enumerate() {
            let line = phase_line(text, i);
            let cx = phases::Context {
                capacity,
                dir,
                earlier: &phases,
            };
            let (name, kind) = p.check(&cx).map_err(|m| err(line, m))?;
            let name = name.unwrap_or_else(|| format!("{}-{}", kind.name(), i + 1));
            if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == '.') {
                return Err(err(line, format!("phase name {name:?}: no spaces or dots")));
            }
            if phases.iter().any(|p| p.name == name) {
                return Err(err(line, format!("two phases named {name:?}")));
            }
            phases.push(Phase { name, line, kind });
        }
        Ok(Scenario {
            name: spec.name,
            description: spec.description,
            origin: origin.to_string(),
            text: text.to_string(),
            profile_name,
            profile,
            capacity,
            bus: ov.bus.or(spec.guest.bus).unwrap_or(Bus::Virtio),
            tolerance,
            strict: spec.strict,
            phases,
        })
    }

    /// Groups of phases: consecutive guest-side phases run in one boot.
    pub fn segments(&self) -> Vec<std::ops::Range<usize>> {
        let mut v = Vec::new();
        let mut i = 0;
        while i < self.phases.len() {
            if self.phases[i].kind.host_side() {
                v.push(i..i + 1);
                i += 1;
            } else {
                let s = i;
                while i < self.phases.len() && !self.phases[i].kind.host_side() {
                    i += 1;
                }
                v.push(s..i);
            }
        }
        v
    }
}

/// Where a built-in scenario's job names resolve, for `bench show`.
pub fn builtin_text(name: &str) -> Option<&'static str> {
    BUILTIN
        .iter()
        .chain(BUILTIN_JOBS)
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
}

#[cfg(test)]
mod tests;
