//! The period mechanisms' parameters: mapping policy (page or hybrid
//! log-block), TRIM cost, data reduction, SLC cache and wear. Every section
//! is optional; its default is "off" (the plain page-mapped drive), and a
//! section left at its default is not written back, so a profile without
//! these sections reads, prints and behaves exactly as before.

use serde::{Deserialize, Serialize};

use super::{Bytes, Profile, ProfileError, invalid};

pub(super) fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// How logical units are mapped to NAND.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MappingPolicy {
    /// Page-level FTL: every unit anywhere (log-structured), GC reclaims.
    #[default]
    Page,
    /// Hybrid log-block FTL: block-mapped data blocks plus a pool of
    /// page-mapped log blocks, reclaimed by switch / partial / full merges.
    Hybrid,
}

/// `[mapping]`: the FTL's mapping policy.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Mapping {
    /// `page` (default) or `hybrid`.
    pub policy: MappingPolicy,
    /// Hybrid: how many logical blocks one log block may take writes for.
    /// 1 is BAST (one log block per logical block: every random write to
    /// another block evicts a log block); larger values combine random
    /// writes to several logical blocks into one log block (FAST/KAST-style
    /// write-combining), at the price of merging all of them on eviction.
    pub log_associativity: u32,
    /// Hybrid: at most this many log blocks (0 = every spare block).
    /// A JMicron JMF602-class controller has only a handful.
    pub max_log_blocks: u32,
    /// Hybrid: a merge copies the whole logical block, pages never
    /// written included, as a controller without a per-page valid map
    /// does (the JMicron JMF602: a 4 KiB random write costs a superblock's
    /// read and program even on a new drive). Default: only written units
    /// are copied.
    #[serde(skip_serializing_if = "is_default")]
    pub whole_block_merges: bool,
    /// Page mapping: DRAM for the mapping table, in bytes. 0 (default):
    /// the whole table is in DRAM. Otherwise the table lives in NAND as
    /// translation pages (one NAND page of `entry_bytes` entries each) and
    /// only this many bytes of them are cached (DFTL-style, see
    /// docs/model.md): a request whose translation page is not cached
    /// waits for a NAND read of it, and a changed page is written back
    /// when it leaves the cache.
    #[serde(skip_serializing_if = "is_default")]
    pub cache_bytes: Bytes,
    /// Bytes per mapping entry in a translation page (default 4; more
    /// where each entry carries metadata beside the address).
    #[serde(skip_serializing_if = "is_default")]
    pub entry_bytes: u32,
    /// Page mapping, DRAM-less NVMe controllers: the Host Memory Buffer,
    /// bytes of the host's memory the drive is given for translation
    /// pages, on top of its on-chip `cache_bytes` (which must be set: the
    /// controller's SRAM share). 0 (default): none, as a host that gives
    /// none (`--hmb 0`). `--hmb SIZE` overrides it; `--capacity` scales it
    /// with the drive like `cache_bytes` (see docs/model.md).
    #[serde(skip_serializing_if = "is_default")]
    pub hmb_bytes: Bytes,
}

impl Mapping {
    /// Bytes per mapping entry in a translation page.
    pub fn entry_bytes(&self) -> u32 {
        if self.entry_bytes == 0 {
            4
        } else {
            self.entry_bytes
        }
    }
}

/// `[trim]`: what a TRIM costs the controller.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Trim {
    /// Non-queued TRIM: SATA DATA SET MANAGEMENT before SATA 3.1 (no
    /// SEND FPDMA QUEUED). The host drains the NCQ queue first: the TRIM
    /// starts only once every outstanding command has completed, and no
    /// other command starts until it has completed. Ignored on NVMe
    /// interfaces (deallocate is always queued).
    pub non_queued: bool,
    /// Controller time per TRIM command, ns.
    pub command_ns: u64,
    /// Controller time per LBA range of a TRIM command, ns.
    pub range_ns: u64,
    /// Controller time per mapping unit actually freed (mapped before the
    /// TRIM): the mapping-table update, ns.
    pub freed_unit_ns: u64,
    /// Deferred release (a guess at SandForce's incomplete TRIM recovery;
    /// see docs/model.md): TRIM clears the logical map at once (trimmed
    /// LBAs read as unmapped), but the flash the data occupies stays valid
    /// for GC, which keeps copying it, until the controller releases it:
    /// when the LBA is written again, or in TRIM order at
    /// `release_per_unit_written`. Page mapping only.
    #[serde(skip_serializing_if = "is_default")]
    pub deferred_release: bool,
    /// With `deferred_release`: trimmed units released per unit the host
    /// writes (0: only when their LBA is written again).
    #[serde(skip_serializing_if = "is_default")]
    pub release_per_unit_written: f64,
}

/// `[reduction]`: SandForce-style data reduction.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Reduction {
    /// Compress written data before it reaches NAND.
    pub enabled: bool,
    /// The most one NAND page can hold, in mapping units per unit of space
    /// (2 = data compressed to half fills a page with twice the units).
    /// The model's reverse map grows by this factor.
    pub max_ratio: u32,
    /// Fraction of a unit's size kept for metadata even when its data
    /// compresses away entirely (0 to 0.5).
    pub min_fraction: f64,
}

/// SLC cache sizing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SlcMode {
    /// No SLC cache.
    #[default]
    Off,
    /// A fixed cache of `size` bytes.
    Static,
    /// Up to `size` bytes, shrinking as the drive fills: blocks run in SLC
    /// mode only while the NAND has room for them beyond the mapped data.
    Dynamic,
}

/// `[slc_cache]`: fast SLC-mode writes on TLC/QLC NAND, folded later.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlcCache {
    /// `off`, `static` or `dynamic`.
    pub mode: SlcMode,
    /// Host data the cache holds at most (static: always; dynamic: on an
    /// empty drive).
    pub size: Bytes,
    /// Program time of a page in SLC mode, µs.
    pub t_prog_us: f64,
    /// Bits per cell of the native mode (3 TLC, 4 QLC): an SLC-mode block
    /// holds 1/bits of its native capacity.
    pub bits_per_cell: u32,
    /// Dynamic cache: the part of `size` that is always there (the static
    /// SLC taken from the spare area, e.g. Samsung's 6 GB "default
    /// TurboWrite"); only the rest shrinks as the drive fills. 0 (default):
    /// all of it is dynamic.
    #[serde(skip_serializing_if = "is_default")]
    pub static_size: Bytes,
    /// Dynamic cache: bytes of free user capacity (exported capacity not
    /// holding data) the dynamic part needs per byte it holds, so it
    /// shrinks as user data fills the drive (heise on Samsung's QLC
    /// drives: the SLC region "benötigt dazu die vierfache Größe an
    /// normaler Flash-Kapazität"). 0 (default): the rule before it, NAND
    /// not holding mapped data (less the GC reserve) over `bits_per_cell`.
    #[serde(skip_serializing_if = "is_default")]
    pub free_per_byte: f64,
    /// What the drive does when the cache is full and the host keeps
    /// writing (default `direct`).
    #[serde(skip_serializing_if = "is_default")]
    pub when_full: WhenFull,
    /// Sense time of a page in SLC mode, µs (one threshold instead of the
    /// native mode's 7 or 15: QLC and TLC read faster from SLC-mode
    /// blocks). 0 (default): the NAND's `t_read_us`.
    #[serde(skip_serializing_if = "is_default")]
    pub t_read_us: f64,
}

/// `[slc_cache] when_full`: what a drive does with host writes once its
/// SLC cache is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WhenFull {
    /// Host data goes to native (TLC/QLC) blocks at the native program
    /// time; the cache is folded in idle time, or by GC when blocks run
    /// out ("direct-to-die", the 850 EVO and 870 QVO behaviour).
    #[default]
    Direct,
    /// The drive folds the oldest SLC-mode block into native blocks in the
    /// foreground, paced with the host's writes, and keeps taking host data
    /// in SLC mode ("the drive will start flushing SLC back to TLC", as
    /// TechPowerUp describes Samsung's NVMe drives); while the cache is
    /// below its size, as before. Once the dynamic cache has shrunk below
    /// what it holds (a fuller drive), host data goes direct.
    Fold,
}

/// `[wear]`: endurance and its effects.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Wear {
    /// Rated program/erase cycles per block (0 = no wear indicator).
    pub rated_pe_cycles: u32,
    /// Program time grows by this fraction at the rated cycles, linearly
    /// (0 = no growth).
    pub prog_growth: f64,
    /// Erase time grows by this fraction at the rated cycles.
    pub erase_growth: f64,
    /// What the drive does once its mean erase count reaches the rated
    /// cycles (default: keeps going).
    #[serde(skip_serializing_if = "is_default")]
    pub end_of_life: EndOfLife,
}

/// `[wear] end_of_life`: a drive's behaviour at its rated P/E cycles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndOfLife {
    /// Writes go on (until blocks fail, which is not modelled).
    #[default]
    KeepGoing,
    /// The drive turns read-only: writes, write-zeroes and discards fail,
    /// reads work (Intel's client drives of the period).
    ReadOnly,
}

/// `[reliability]`: how the drive behaves when its power goes
/// (`vssd ctl power-cut`) and what its NAND's error model is (`vssd ctl
/// fault add media-wear`); see docs/faults.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Reliability {
    /// Power-loss protection (capacitors that let the drive program its
    /// write buffer after the power goes, as the Intel 320 had): a power
    /// cut loses nothing acknowledged.
    pub power_loss_protection: bool,
    /// The drive lies about flushes: FLUSH (and FUA) complete at once
    /// without programming the write buffer, so they protect nothing
    /// from a power cut. Off by default; no preset sets it.
    pub flush_lies: bool,
    /// Zheng et al. (FAST 2013) "shorn writes": the probability that a
    /// write a cut loses is instead cut at a sector boundary inside it, its
    /// first sectors programmed, the rest lost. 0 (off) in every preset.
    pub shorn_write_probability: f64,
    /// Zheng et al. "unserializable writes": the probability that a write
    /// a cut would lose was programmed anyway (out of order), so a later
    /// write survives an earlier lost one. 0 (off) in every preset.
    pub unserializable_write_probability: f64,
    /// Zheng et al. "metadata corruption": the probability that a cut
    /// also loses the mapping-table updates of the last
    /// `mapping_loss_window_ms`, so writes already durable there (flushed
    /// ones too) read their old data again. 0 (off) in every preset.
    pub mapping_loss_probability: f64,
    /// How far back (drive time, ms) a lost mapping update reaches.
    pub mapping_loss_window_ms: u64,
    /// The NAND's cell type, for the raw bit-error model of `fault add
    /// media-wear` (default `mlc`).
    pub cell: CellType,
    /// Bits the ECC corrects per codeword (0: the cell type's default).
    pub ecc_bits: u32,
    /// Data bytes per ECC codeword (0: the cell type's default).
    pub ecc_codeword: Bytes,
}

impl Default for Reliability {
    fn default() -> Self {
        Reliability {
            power_loss_protection: false,
            flush_lies: false,
            shorn_write_probability: 0.0,
            unserializable_write_probability: 0.0,
            mapping_loss_probability: 0.0,
            mapping_loss_window_ms: 1000,
            cell: CellType::Mlc,
            ecc_bits: 0,
            ecc_codeword: Bytes(0),
        }
    }
}

impl Reliability {
    /// The ECC: (correctable bits, data bytes) per codeword.
    pub fn ecc(&self) -> (u32, u64) {
        let (bits, bytes) = self.cell.default_ecc();
        (
            if self.ecc_bits > 0 {
                self.ecc_bits
            } else {
                bits
            },
            if self.ecc_codeword.0 > 0 {
                self.ecc_codeword.0
            } else {
                bytes
            },
        )
    }
}

/// `[reliability] cell`: bits per NAND cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CellType {
    /// One bit per cell.
    Slc,
    /// Two bits per cell.
    #[default]
    Mlc,
    /// Three bits per cell.
    Tlc,
}

impl CellType {
    /// The ECC a controller of the period used with this NAND when the
    /// profile does not say: (correctable bits, data bytes) per codeword.
    /// SLC 1 bit / 512 B and MLC 4 bits / 512 B are the NAND makers'
    /// requirements of the 50 nm era (Samsung's NAND reliability FAQ rates
    /// SLC "@1-bit error allowable"; the K9G8G08U0M MLC data sheet: "5K
    /// program/erase cycles (with 4bit/512byte ECC)"); TLC 40 bits / 1 KiB
    /// is an assumption (the BCH strength of TLC controllers before LDPC).
    /// Sources in docs/faults.md.
    pub fn default_ecc(self) -> (u32, u64) {
        match self {
            CellType::Slc => (1, 512),
            CellType::Mlc => (4, 512),
            CellType::Tlc => (40, 1024),
        }
    }

    /// The name used in profiles.
    pub fn name(self) -> &'static str {
        match self {
            CellType::Slc => "slc",
            CellType::Mlc => "mlc",
            CellType::Tlc => "tlc",
        }
    }
}

/// `[controller]`: controller traits that are not timings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Controller {
    /// Free-form: the controller this profile models (documentation).
    pub name: String,
    /// No DRAM cache for the mapping (JMicron JMF602-class): the write
    /// buffer, if any, is the controller's SRAM and data cannot wait there
    /// for a merge. Documentation only; the consequences are the profile's
    /// `buffer.size` and hybrid mapping.
    pub dram_less: bool,
}

fn range_u(origin: &str, field: &str, v: u64, lo: u64, hi: u64) -> Result<(), ProfileError> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(invalid(
            origin,
            field,
            v,
            &format!("allowed range {lo}..={hi}"),
        ))
    }
}

fn range_f(origin: &str, field: &str, v: f64, lo: f64, hi: f64) -> Result<(), ProfileError> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err(invalid(origin, field, v, &format!("{lo} to {hi}")))
    }
}

/// `[spec]`: the figures the drive's vendor published, which `vssd
/// calibrate` compares the model with (documentation; no effect on the
/// model). 0 = not published.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Spec {
    /// Sequential read, MB/s (10^6 bytes/s).
    pub seq_read_mb_s: f64,
    /// Sequential write, MB/s.
    pub seq_write_mb_s: f64,
    /// 4 KiB random read IOPS at QD 32.
    pub rand_read_iops: f64,
    /// 4 KiB random write IOPS at QD 32.
    pub rand_write_iops: f64,
    /// Where the figures come from.
    pub source: String,
}

/// Check the period sections' own ranges (geometry-dependent checks are
/// in `validate.rs`).
pub(super) fn validate(p: &Profile, origin: &str) -> Result<(), ProfileError> {
    let m = &p.mapping;
    if m.policy == MappingPolicy::Hybrid {
        range_u(
            origin,
            "mapping.log_associativity",
            m.log_associativity as u64,
            1,
            4096,
        )?;
    } else if m.log_associativity != 0 || m.max_log_blocks != 0 {
        return Err(invalid(
            origin,
            "mapping.log_associativity",
            m.log_associativity,
            "only with mapping.policy = \"hybrid\"",
        ));
    }
    range_u(
        origin,
        "mapping.max_log_blocks",
        m.max_log_blocks as u64,
        0,
        1 << 20,
    )?;
    if m.whole_block_merges && m.policy != MappingPolicy::Hybrid {
        return Err(invalid(
            origin,
            "mapping.whole_block_merges",
            true,
            "only with mapping.policy = \"hybrid\"",
        ));
    }
    if m.cache_bytes.0 != 0 || m.entry_bytes != 0 || m.hmb_bytes.0 != 0 {
        if m.policy != MappingPolicy::Page {
            return Err(invalid(
                origin,
                "mapping.cache_bytes",
                m.cache_bytes.0,
                "only with mapping.policy = \"page\" (hybrid mapping keeps its block map in SRAM)",
            ));
        }
        let page = p.geometry.page_size.0;
        let e = m.entry_bytes() as u64;
        if e < 2 || e > page / 4 || !(page / e).is_power_of_two() || !page.is_multiple_of(e) {
            return Err(invalid(
                origin,
                "mapping.entry_bytes",
                e,
                "2 to a quarter of the page size, dividing it into a power of two",
            ));
        }
        if m.hmb_bytes.0 > 1 << 40 {
            return Err(invalid(
                origin,
                "mapping.hmb_bytes",
                m.hmb_bytes.0,
                "0 (none) up to 1 TiB, with mapping.cache_bytes set",
            ));
        }
        if m.cache_bytes.0 < page || m.cache_bytes.0 > 1 << 40 {
            return Err(invalid(
                origin,
                "mapping.cache_bytes",
                m.cache_bytes.0,
                &format!("0 (the whole map in DRAM) or one NAND page ({page} bytes) up to 1 TiB"),
            ));
        }
    }
    let t = &p.trim;
    range_u(origin, "trim.command_ns", t.command_ns, 0, 100_000_000)?;
    range_u(origin, "trim.range_ns", t.range_ns, 0, 10_000_000)?;
    range_u(origin, "trim.freed_unit_ns", t.freed_unit_ns, 0, 100_000)?;
    range_f(
        origin,
        "trim.release_per_unit_written",
        t.release_per_unit_written,
        0.0,
        1e6,
    )?;
    if !t.deferred_release && t.release_per_unit_written != 0.0 {
        return Err(invalid(
            origin,
            "trim.release_per_unit_written",
            t.release_per_unit_written,
            "only with trim.deferred_release = true",
        ));
    }
    if t.deferred_release && m.policy == MappingPolicy::Hybrid {
        return Err(invalid(
            origin,
            "trim.deferred_release",
            true,
            "only with page mapping",
        ));
    }
    let r = &p.reduction;
    if r.enabled {
        range_u(origin, "reduction.max_ratio", r.max_ratio as u64, 1, 8)?;
        range_f(origin, "reduction.min_fraction", r.min_fraction, 0.0, 0.5)?;
    } else if r.max_ratio != 0 || r.min_fraction != 0.0 {
        return Err(invalid(
            origin,
            "reduction.max_ratio",
            r.max_ratio,
            "only with reduction.enabled = true",
        ));
    }
    let s = &p.slc_cache;
    if s.mode != SlcMode::Off {
        range_u(
            origin,
            "slc_cache.bits_per_cell",
            s.bits_per_cell as u64,
            2,
            4,
        )?;
        range_f(origin, "slc_cache.t_prog_us", s.t_prog_us, 1.0, 100_000.0)?;
        if s.size.0 == 0 {
            return Err(invalid(
                origin,
                "slc_cache.size",
                0,
                "a positive size with slc_cache.mode static or dynamic",
            ));
        }
        range_f(
            origin,
            "slc_cache.free_per_byte",
            s.free_per_byte,
            0.0,
            100.0,
        )?;
        if s.static_size.0 > s.size.0 {
            return Err(invalid(
                origin,
                "slc_cache.static_size",
                s.static_size.0,
                &format!("at most slc_cache.size ({} bytes)", s.size.0),
            ));
        }
        if s.mode == SlcMode::Static && (s.static_size.0 != 0 || s.free_per_byte != 0.0) {
            return Err(invalid(
                origin,
                "slc_cache.static_size",
                s.static_size.0,
                "static_size and free_per_byte are for mode = \"dynamic\"",
            ));
        }
    } else if s.static_size.0 != 0
        || s.free_per_byte != 0.0
        || s.when_full != WhenFull::Direct
        || s.t_read_us != 0.0
    {
        return Err(invalid(
            origin,
            "slc_cache.mode",
            "\"off\"",
            "static_size, free_per_byte and when_full need an SLC cache",
        ));
    }
    let sp = &p.spec;
    for (field, v) in [
        ("spec.seq_read_mb_s", sp.seq_read_mb_s),
        ("spec.seq_write_mb_s", sp.seq_write_mb_s),
        ("spec.rand_read_iops", sp.rand_read_iops),
        ("spec.rand_write_iops", sp.rand_write_iops),
    ] {
        range_f(origin, field, v, 0.0, 1e7)?;
    }
    let w = &p.wear;
    range_u(
        origin,
        "wear.rated_pe_cycles",
        w.rated_pe_cycles as u64,
        0,
        10_000_000,
    )?;
    range_f(origin, "wear.prog_growth", w.prog_growth, 0.0, 10.0)?;
    range_f(origin, "wear.erase_growth", w.erase_growth, 0.0, 10.0)?;
    if (w.prog_growth > 0.0 || w.erase_growth > 0.0) && w.rated_pe_cycles == 0 {
        return Err(invalid(
            origin,
            "wear.rated_pe_cycles",
            0,
            "must be set (1..=10000000) when wear.prog_growth or wear.erase_growth is",
        ));
    }
    if w.end_of_life != EndOfLife::KeepGoing && w.rated_pe_cycles == 0 {
        return Err(invalid(
            origin,
            "wear.rated_pe_cycles",
            0,
            "must be set (1..=10000000) when wear.end_of_life is",
        ));
    }
    let r = &p.reliability;
    for (field, v) in [
        (
            "reliability.shorn_write_probability",
            r.shorn_write_probability,
        ),
        (
            "reliability.unserializable_write_probability",
            r.unserializable_write_probability,
        ),
        (
            "reliability.mapping_loss_probability",
            r.mapping_loss_probability,
        ),
    ] {
        range_f(origin, field, v, 0.0, 1.0)?;
    }
    range_u(
        origin,
        "reliability.mapping_loss_window_ms",
        r.mapping_loss_window_ms,
        1,
        3_600_000,
    )?;
    range_u(origin, "reliability.ecc_bits", r.ecc_bits as u64, 0, 4096)?;
    if r.ecc_codeword.0 != 0
        && !(r.ecc_codeword.0.is_power_of_two() && (512..=16384).contains(&r.ecc_codeword.0))
    {
        return Err(invalid(
            origin,
            "reliability.ecc_codeword",
            r.ecc_codeword.0,
            "a power of two from 512 to 16384 bytes (0: the cell type's default)",
        ));
    }
    Ok(())
}
