//! Drive profiles: every parameter of the model, loaded from TOML and validated.
//!
//! A profile is either a built-in preset (see [`presets`]) or a TOML file with
//! the same fields. [`Profile::load`] accepts either a preset name or a path.
//! Validation errors name the field and the allowed range.

mod fit;
pub mod identity;
pub mod memory;
mod period;
pub mod presets;
mod scale;
pub mod size;
mod thermal;
mod validate;
pub mod validated;

use period::is_default;
pub use period::{
    CellType, Controller, EndOfLife, Mapping, MappingPolicy, Reduction, Reliability, SlcCache,
    SlcMode, Spec, Trim, Wear, WhenFull,
};
pub use thermal::{Thermal, ThrottleLevel};

pub use fit::FitParam;
pub use identity::{Identity, IdentitySpec, ReadAfterTrim, SmartSet};
pub use validate::MIN_BLOCKS_PER_PLANE;

use serde::{Deserialize, Serialize};
use std::path::Path;
use thiserror::Error;

use crate::size::{describe_size, format_size, parse_size};

/// Errors from loading or validating a profile.
#[derive(Debug, Error)]
pub enum ProfileError {
    /// Not a preset name and not a readable file. The file's error is the
    /// [`source`](std::error::Error::source), not repeated in the message.
    #[error(
        "profile {name:?} is neither a built-in preset nor a readable file{}; presets: {presets}",
        suggestion.as_ref().map(|s| format!(" (did you mean {s:?}?)")).unwrap_or_default()
    )]
    NotFound {
        /// What the user gave.
        name: String,
        /// The closest preset name, if one is close.
        suggestion: Option<String>,
        /// Comma-separated list of preset names.
        presets: String,
        /// Why the file could not be read.
        #[source]
        source: std::io::Error,
    },
    /// `--capacity` is below the smallest capacity the profile scales to.
    #[error(
        "--capacity {}: too small for profile {profile}: the smallest capacity it scales to is {}",
        describe_size(*requested),
        describe_size(*minimum)
    )]
    CapacityTooSmall {
        /// The profile's name.
        profile: String,
        /// What was asked for, bytes.
        requested: u64,
        /// The smallest capacity that works, bytes.
        minimum: u64,
    },
    /// The drive's model would not fit in this machine's memory.
    #[error(
        "profile {profile}: its model would need about {} of memory (mapping tables and block state), more than the {} this machine has available; use a larger mapping unit or page, or a smaller capacity (--capacity)",
        describe_size(*need),
        describe_size(*have)
    )]
    TooBig {
        /// The profile's name.
        profile: String,
        /// Bytes the model needs.
        need: u64,
        /// Bytes available.
        have: u64,
    },
    /// The TOML does not parse or has fields of the wrong type.
    #[error("profile {origin}: {message}")]
    Parse {
        /// File or preset name.
        origin: String,
        /// The parser's message (it names the line and key).
        message: String,
    },
    /// A field is outside its allowed range.
    #[error("profile {origin}: field `{field}` = {value}: {allowed}")]
    Invalid {
        /// File or preset name.
        origin: String,
        /// Dotted field name, e.g. `geometry.pages_per_block`.
        field: String,
        /// The offending value.
        value: String,
        /// The allowed range or rule.
        allowed: String,
    },
}

/// A size field written as a string with a suffix (`"8KiB"`) or a plain integer of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bytes(pub u64);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let exact = format_size(self.0);
        if exact.contains('.') {
            s.serialize_u64(self.0)
        } else {
            s.serialize_str(&exact)
        }
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(v) => Ok(Bytes(v)),
            Raw::Str(s) => parse_size(&s).map(Bytes).map_err(serde::de::Error::custom),
        }
    }
}

/// Host interface kind; sets the default usable link bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Interface {
    /// SATA 1.5 Gb/s.
    #[serde(rename = "sata-1.5g")]
    Sata1_5,
    /// SATA 3 Gb/s.
    #[serde(rename = "sata-3g")]
    Sata3,
    /// SATA 6 Gb/s.
    #[serde(rename = "sata-6g")]
    Sata6,
    /// NVMe over PCIe 3.0 x4.
    #[serde(rename = "pcie3-x4")]
    Pcie3x4,
    /// NVMe over PCIe 4.0 x4.
    #[serde(rename = "pcie4-x4")]
    Pcie4x4,
    /// No link limit beyond `bandwidth_mb_s` (used by `instant`).
    #[serde(rename = "none")]
    None,
}

impl Interface {
    /// Usable bandwidth in MB/s (10^6 bytes/s) from the reference tables.
    pub fn default_bandwidth_mb_s(self) -> f64 {
        match self {
            Interface::Sata1_5 => 140.0,
            Interface::Sata3 => 280.0,
            Interface::Sata6 => 550.0,
            Interface::Pcie3x4 => 3500.0,
            Interface::Pcie4x4 => 7000.0,
            Interface::None => 0.0,
        }
    }

    /// Whether this is a SATA link (32-tag NCQ).
    pub fn is_sata(self) -> bool {
        matches!(
            self,
            Interface::Sata1_5 | Interface::Sata3 | Interface::Sata6
        )
    }
}

/// Host side: link, queueing, controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Interface kind.
    pub interface: Interface,
    /// Usable link bandwidth in MB/s; 0 = the interface's default (or unlimited for `none`).
    #[serde(default)]
    pub bandwidth_mb_s: f64,
    /// Commands the drive accepts at once (32 for SATA NCQ).
    pub queue_depth: u32,
    /// Controller time per command, in ns; the controller handles one command at a time.
    pub command_overhead_ns: u64,
    /// Controller time per mapping unit trimmed, in ns.
    #[serde(default)]
    pub trim_ns_per_unit: u64,
    /// Controller time per read command, ns (0 = `command_overhead_ns`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub read_command_ns: u64,
    /// Controller time per write command, ns (0 = `command_overhead_ns`):
    /// firmware work per write (mapping updates), which capped the random
    /// write IOPS of many early controllers.
    #[serde(default, skip_serializing_if = "is_default")]
    pub write_command_ns: u64,
    /// Read look-ahead, bytes (0 = none): when a read starts where the
    /// previous one ended, the drive had already begun reading it from
    /// NAND when that previous read arrived, up to this many bytes ahead
    /// (ATA's read look-ahead, SET FEATURES 0xAA, on by default).
    #[serde(default, skip_serializing_if = "is_default")]
    pub read_ahead_bytes: u64,
    /// Controller time per NAND read operation it issues, ns (0 = none):
    /// a read of data written at random costs one operation per dpage its
    /// units sit in, where data written in order costs one per dpage read,
    /// so reads of a fragmented drive pay for the scatter.
    #[serde(default, skip_serializing_if = "is_default")]
    pub read_op_ns: u64,
    /// Host bytes written between firmware housekeeping pauses (0 = none):
    /// every this many, the drive holds every command for `pause_ms`
    /// (metadata and map checkpoints: the 350-900 ms worst-case write
    /// latencies reviews measured).
    #[serde(default, skip_serializing_if = "is_default")]
    pub pause_every_bytes: u64,
    /// How long a housekeeping pause holds the drive, ms.
    #[serde(default, skip_serializing_if = "is_default")]
    pub pause_ms: f64,
}

/// Flash geometry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Geometry {
    /// Independent channels (buses) from controller to NAND.
    pub channels: u32,
    /// Dies (LUNs) per channel.
    pub dies_per_channel: u32,
    /// Planes per die; multi-plane operations program or read one page per plane at once.
    pub planes_per_die: u32,
    /// Erase blocks per plane.
    pub blocks_per_plane: u32,
    /// Pages per erase block.
    pub pages_per_block: u32,
    /// NAND page size.
    pub page_size: Bytes,
    /// Mapping unit (logical page) size: a divisor of the page size, at least 512 bytes.
    pub mapping_unit: Bytes,
    /// Capacity exported to the host; the rest of the raw NAND is over-provisioning.
    pub exported_capacity: Bytes,
    /// Blocks retired from service, as factory bad blocks are: the FTL
    /// never uses them. Spread over the dies (the first `retired_blocks %
    /// dies` dies lose one more than the others). `--capacity` sets it so
    /// the scaled drive's spare area is its exact share, not rounded to a
    /// whole block on every die. Page mapping only.
    #[serde(default, skip_serializing_if = "is_default")]
    pub retired_blocks: u32,
}

/// NAND timings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nand {
    /// Page read time (tR), µs.
    pub t_read_us: f64,
    /// Page program time (tPROG), µs.
    pub t_prog_us: f64,
    /// Block erase time (tBERS), µs.
    pub t_erase_us: f64,
    /// Channel transfer rate, MB/s (0 = instantaneous).
    pub channel_mb_s: f64,
    /// The planes of a die read independently (independent / asynchronous
    /// plane reads of recent 3D NAND): a read of one plane's page does not
    /// occupy the die's other planes, so one die serves up to
    /// `planes_per_die` random reads at once. Programs and erases still
    /// take the whole die. Page mapping only.
    #[serde(default, skip_serializing_if = "is_default")]
    pub independent_plane_reads: bool,
}

/// DRAM write buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Buffer {
    /// Write-buffer size; 0 = writes complete only when programmed.
    pub size: Bytes,
}

/// Garbage-collection victim policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GcPolicy {
    /// Fewest valid pages first.
    Greedy,
    /// Highest age × (1 − u) / 2u first (Rosenblum & Ousterhout, LFS).
    CostBenefit,
}

/// Garbage collection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gc {
    /// Victim selection.
    pub policy: GcPolicy,
    /// At or below this many free blocks on a die, foreground GC runs in
    /// steps paced with the host's writes (host writes stall only when a die
    /// is down to its last free block).
    pub fg_threshold_blocks: u32,
    /// Host idle time after which background GC starts, ms (0 = no background GC).
    pub bg_idle_ms: f64,
    /// Background GC works until each die has this many free blocks (above
    /// the reserve, `reserve_pct`).
    pub bg_target_blocks: u32,
    /// A share of each die's spare blocks (its over-provisioning), percent,
    /// that GC keeps free on top of `fg_threshold_blocks`: foreground GC
    /// starts while this much spare is still free, so the drive slows
    /// before its pool is down to its last blocks (0 = none).
    #[serde(default, skip_serializing_if = "is_default")]
    pub reserve_pct: f64,
    /// The share of idle time background GC works, in (0, 1] (1 = all of
    /// it, the default): after each victim it collects in idle time, a die
    /// rests for as long as the victim took times (1 / duty − 1), so idle
    /// recovery takes minutes where the firmware paces it.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub bg_duty: f64,
}

fn one() -> f64 {
    1.0
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}

/// A complete drive profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Short name (preset name or user's).
    pub name: String,
    /// One line saying what the profile represents.
    #[serde(default)]
    pub description: String,
    /// Host link and controller.
    pub host: Host,
    /// Geometry.
    pub geometry: Geometry,
    /// NAND timings.
    pub nand: Nand,
    /// Write buffer.
    pub buffer: Buffer,
    /// Garbage collection.
    pub gc: Gc,
    /// Mapping policy (default: page-level).
    #[serde(default, skip_serializing_if = "is_default")]
    pub mapping: Mapping,
    /// TRIM cost (default: `host.trim_ns_per_unit` only, queued).
    #[serde(default, skip_serializing_if = "is_default")]
    pub trim: Trim,
    /// Data reduction (default: off).
    #[serde(default, skip_serializing_if = "is_default")]
    pub reduction: Reduction,
    /// SLC cache (default: off).
    #[serde(default, skip_serializing_if = "is_default")]
    pub slc_cache: SlcCache,
    /// Wear (default: no indicator, no latency growth).
    #[serde(default, skip_serializing_if = "is_default")]
    pub wear: Wear,
    /// Controller description.
    #[serde(default, skip_serializing_if = "is_default")]
    pub controller: Controller,
    /// Power-loss behaviour (default: no protection, honest flushes).
    #[serde(default, skip_serializing_if = "is_default")]
    pub reliability: Reliability,
    /// Temperature and thermal throttling (default: none).
    #[serde(default, skip_serializing_if = "is_default")]
    pub thermal: Thermal,
    /// What the drive reports about itself: model, serial, firmware, WWN,
    /// SMART attribute set (defaults: see [`Profile::identity`]).
    #[serde(default, skip_serializing_if = "is_default")]
    pub identity: IdentitySpec,
    /// Published figures (`vssd calibrate` compares with them).
    #[serde(default, skip_serializing_if = "is_default")]
    pub spec: Spec,
    /// The free parameters, with their physical ranges, that `vssd
    /// calibrate --fit` searches against the drive's published
    /// measurements (`[[fit]]`; none: nothing is fitted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fit: Vec<FitParam>,
}

/// Capacity overrides keep at least this many blocks on each die.
pub const MIN_BLOCKS_PER_DIE: u64 = 64;

/// Predicted throughput figures derived analytically from a profile's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Predicted {
    /// Sequential write bandwidth on a fresh drive, bytes/s.
    pub seq_write_bytes_s: f64,
    /// Sequential read bandwidth, bytes/s.
    pub seq_read_bytes_s: f64,
    /// Limit set by the host link, bytes/s (infinite when unlimited).
    pub link_bytes_s: f64,
    /// Limit set by NAND programming on all dies, bytes/s.
    pub nand_program_bytes_s: f64,
    /// Limit set by the channels, bytes/s.
    pub channel_bytes_s: f64,
}

fn invalid(origin: &str, field: &str, value: impl ToString, allowed: &str) -> ProfileError {
    ProfileError::Invalid {
        origin: origin.to_string(),
        field: field.to_string(),
        value: value.to_string(),
        allowed: allowed.to_string(),
    }
}

impl Profile {
    /// Whether the drive's commands take any modelled time (false for
    /// `instant`: every command completes as soon as it is submitted).
    pub fn models_time(&self) -> bool {
        let (h, n) = (&self.host, &self.nand);
        let untimed = h.interface == Interface::None
            && h.bandwidth_mb_s == 0.0
            && h.command_overhead_ns == 0
            && h.read_command_ns == 0
            && h.write_command_ns == 0
            && h.trim_ns_per_unit == 0
            && n.t_read_us == 0.0
            && n.t_prog_us == 0.0
            && n.t_erase_us == 0.0
            && n.channel_mb_s == 0.0
            && self.trim == Trim::default();
        !untimed
    }

    /// Load a preset by name, or else a TOML file by path.
    pub fn load(name_or_path: &str) -> Result<Profile, ProfileError> {
        if let Some(text) = presets::get(name_or_path) {
            return Profile::from_toml(text, name_or_path);
        }
        let text = std::fs::read_to_string(Path::new(name_or_path)).map_err(|source| {
            ProfileError::NotFound {
                name: name_or_path.to_string(),
                suggestion: presets::closest(name_or_path).map(str::to_string),
                presets: presets::NAMES.join(", "),
                source,
            }
        })?;
        Profile::from_toml(&text, name_or_path)
    }

    /// Load, then override the exported capacity if `capacity` is given.
    pub fn load_with_capacity(
        name_or_path: &str,
        capacity: Option<u64>,
    ) -> Result<Profile, ProfileError> {
        let p = Profile::load(name_or_path)?;
        match capacity {
            Some(c) => {
                let q = p.with_capacity(c)?;
                let g = &q.geometry;
                log::info!(
                    "profile {}: exported capacity {} applied: {} blocks of {} pages per plane, {} retired, over-provisioning {:.1} %",
                    q.name,
                    describe_size(c),
                    g.blocks_per_plane,
                    g.pages_per_block,
                    g.retired_blocks,
                    q.op_ratio() * 100.0
                );
                Ok(q)
            }
            None => Ok(p),
        }
    }

    /// Load, give the drive a Host Memory Buffer of `hmb` bytes if given
    /// (`--hmb`, at the preset's own capacity; 0: the host gives none),
    /// then override the exported capacity if `capacity` is given (which
    /// scales the buffer with the drive).
    pub fn load_with_hmb(
        name_or_path: &str,
        capacity: Option<u64>,
        hmb: Option<u64>,
    ) -> Result<Profile, ProfileError> {
        let Some(hmb) = hmb else {
            return Profile::load_with_capacity(name_or_path, capacity);
        };
        let p = Profile::load(name_or_path)?.with_hmb(hmb)?;
        match capacity {
            Some(c) => p.with_capacity(c),
            None => Ok(p),
        }
    }

    /// A copy with a Host Memory Buffer of `bytes` (0: none). Only for a
    /// profile whose map is cached (`mapping.cache_bytes` set: a DRAM-less
    /// controller).
    pub fn with_hmb(&self, bytes: u64) -> Result<Profile, ProfileError> {
        let origin = format!("{} (--hmb {})", self.name, format_size(bytes));
        if self.mapping.cache_bytes.0 == 0 {
            return Err(invalid(
                &origin,
                "--hmb",
                bytes,
                "this profile keeps its whole map in DRAM (mapping.cache_bytes = 0): a host memory buffer is for DRAM-less profiles",
            ));
        }
        let mut p = self.clone();
        p.mapping.hmb_bytes = Bytes(bytes);
        p.validate(&origin)?;
        Ok(p)
    }

    /// Parse and validate TOML text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Profile, ProfileError> {
        let p: Profile = toml::from_str(text).map_err(|e| ProfileError::Parse {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        p.validate(origin)?;
        Ok(p)
    }

    /// Serialise as TOML a user can copy and edit. (Every field is a plain
    /// value or table TOML can hold, so this does not fail; if a future
    /// field could not be written, the text says so instead of panicking.)
    pub fn to_toml(&self) -> String {
        toml::to_string(self)
            .unwrap_or_else(|e| format!("# this profile could not be written as TOML: {e}\n"))
    }

    /// Raw NAND capacity in bytes.
    pub fn raw_capacity(&self) -> u64 {
        let g = &self.geometry;
        g.channels as u64
            * g.dies_per_channel as u64
            * g.planes_per_die as u64
            * g.blocks_per_plane as u64
            * g.pages_per_block as u64
            * g.page_size.0
    }

    /// Bytes of one block (on every plane of a die).
    pub fn block_bytes(&self) -> u64 {
        let g = &self.geometry;
        g.planes_per_die as u64 * g.pages_per_block as u64 * g.page_size.0
    }

    /// Raw NAND capacity in service: [`Profile::raw_capacity`] less the
    /// retired blocks.
    pub fn in_service_capacity(&self) -> u64 {
        self.raw_capacity()
            .saturating_sub(self.geometry.retired_blocks as u64 * self.block_bytes())
    }

    /// Over-provisioning ratio: (raw in service − exported) / exported.
    pub fn op_ratio(&self) -> f64 {
        let e = self.geometry.exported_capacity.0 as f64;
        (self.in_service_capacity() as f64 - e) / e
    }

    /// Number of dies.
    pub fn dies(&self) -> u32 {
        self.geometry.channels * self.geometry.dies_per_channel
    }

    /// Usable link bandwidth in bytes/s; `f64::INFINITY` when unlimited.
    pub fn link_bytes_s(&self) -> f64 {
        let mb = if self.host.bandwidth_mb_s > 0.0 {
            self.host.bandwidth_mb_s
        } else {
            self.host.interface.default_bandwidth_mb_s()
        };
        if mb > 0.0 { mb * 1e6 } else { f64::INFINITY }
    }

    /// Analytic throughput figures of a fresh drive from the parameters alone:
    /// the minimum of host link, channel and NAND die limits, with the
    /// controller's per-command time for 128 KiB commands.
    pub fn predict(&self) -> Predicted {
        let g = &self.geometry;
        let dies = self.dies() as f64;
        let die_page = g.planes_per_die as f64 * g.page_size.0 as f64;
        let xfer_s = |bytes: f64| {
            if self.nand.channel_mb_s > 0.0 {
                bytes / (self.nand.channel_mb_s * 1e6)
            } else {
                0.0
            }
        };
        // A die programs one multi-plane page per (transfer + tPROG); the channel
        // is busy only for the transfer, shared by the dies on it.
        let die_prog_s = xfer_s(die_page) + self.nand.t_prog_us * 1e-6;
        let nand_program = if die_prog_s > 0.0 {
            dies * die_page / die_prog_s
        } else {
            f64::INFINITY
        };
        let channel = if self.nand.channel_mb_s > 0.0 {
            g.channels as f64 * self.nand.channel_mb_s * 1e6
        } else {
            f64::INFINITY
        };
        let die_read_s = xfer_s(die_page) + self.nand.t_read_us * 1e-6;
        let nand_read = if die_read_s > 0.0 {
            dies * die_page / die_read_s
        } else {
            f64::INFINITY
        };
        let link = self.link_bytes_s();
        let cmd = 128.0 * 1024.0;
        let ctrl = if self.host.command_overhead_ns > 0 {
            cmd / (self.host.command_overhead_ns as f64 * 1e-9)
        } else {
            f64::INFINITY
        };
        Predicted {
            seq_write_bytes_s: link.min(channel).min(nand_program).min(ctrl),
            seq_read_bytes_s: link.min(channel).min(nand_read).min(ctrl),
            link_bytes_s: link,
            nand_program_bytes_s: nand_program,
            channel_bytes_s: channel,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_presets_load_and_roundtrip() {
        for name in presets::NAMES {
            let p = Profile::load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            let again = Profile::from_toml(&p.to_toml(), "roundtrip").unwrap();
            assert_eq!(p, again, "{name} round-trips through TOML");
            assert!(p.raw_capacity() > p.geometry.exported_capacity.0);
        }
    }

    #[test]
    fn only_the_instant_profile_models_no_time() {
        for name in presets::NAMES {
            let p = Profile::load(name).unwrap();
            assert_eq!(p.models_time(), *name != "instant", "{name}");
        }
    }

    #[test]
    fn retired_blocks_are_checked() {
        let p = Profile::load("sata-mlc-2011")
            .unwrap()
            .with_capacity(1 << 30)
            .unwrap();
        let set = |n: u32| {
            let mut q = p.clone();
            q.geometry.retired_blocks = n;
            Profile::from_toml(&q.to_toml(), "t.toml")
        };
        assert!(set(p.dies() * 3).is_ok());
        let e = set(p.dies() * 30).unwrap_err().to_string();
        assert!(
            e.contains("geometry.exported_capacity") && e.contains("retired"),
            "{e}"
        );
        let e = set(p.dies() * p.geometry.blocks_per_plane)
            .unwrap_err()
            .to_string();
        assert!(e.contains("geometry.retired_blocks"), "{e}");
        let k5 = Profile::load("solidata-k5-64").unwrap();
        let mut q = k5.clone();
        q.geometry.retired_blocks = 1;
        let e = Profile::from_toml(&q.to_toml(), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("geometry.retired_blocks") && e.contains("hybrid"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_field() {
        let p = Profile::load("sata-mlc-2011").unwrap();
        let text = p
            .to_toml()
            .replace("pages_per_block = 256", "pages_per_block = 1");
        let e = Profile::from_toml(&text, "t.toml").unwrap_err().to_string();
        assert!(e.contains("geometry.pages_per_block"), "{e}");
        assert!(e.contains("2..=16384"), "{e}");
        let text = p.to_toml().replace("[gc]", "[gc]\nbogus = 1");
        let e = Profile::from_toml(&text, "t.toml").unwrap_err().to_string();
        assert!(e.contains("bogus"), "{e}");
        assert!(Profile::load("no-such-profile").is_err());
        assert!(p.with_capacity(1000).is_err());
    }

    #[test]
    fn unknown_names_get_a_suggestion_and_their_cause_once() {
        let e = Profile::load("sata-mlc-201").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("did you mean \"sata-mlc-2011\"?"), "{msg}");
        let cause = std::error::Error::source(&e).unwrap().to_string();
        assert!(!msg.contains(&cause), "{msg} repeats {cause}");
    }
}
