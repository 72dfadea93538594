//! Every profile field against a physically meaningful range.
//!
//! A value the parser accepts can still describe no drive at all: a link of
//! 1e-9 MB/s (a run that never ends), a channel of 1e-15 MB/s, a NAND read
//! of a femtosecond. Each numeric field has a range that covers real drives
//! from 2008 SATA to current NVMe with room to spare; `0` keeps its special
//! meaning where the field has one. `docs/model.md` lists the ranges.
//! Fields are checked in dependency order, so a wrong value is blamed on
//! its own field, not on one checked against it.

use crate::size::format_size;

use super::{MappingPolicy, Profile, ProfileError, SlcMode, invalid};

/// `lo..=hi`, or exactly 0 when `zero` names what 0 means.
struct FloatRange {
    lo: f64,
    hi: f64,
    unit: &'static str,
    zero: Option<&'static str>,
}

impl FloatRange {
    fn check(&self, origin: &str, field: &str, v: f64) -> Result<(), ProfileError> {
        let ok =
            v.is_finite() && ((v >= self.lo && v <= self.hi) || (self.zero.is_some() && v == 0.0));
        if ok {
            return Ok(());
        }
        let allowed = match self.zero {
            Some(z) => format!("0 ({z}) or {} to {} {}", self.lo, self.hi, self.unit),
            None => format!("{} to {} {}", self.lo, self.hi, self.unit),
        };
        Err(invalid(origin, field, v, &allowed))
    }
}

fn int_range(
    origin: &str,
    field: &str,
    v: u64,
    lo: u64,
    hi: u64,
    unit: &str,
) -> Result<(), ProfileError> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        let unit = if unit.is_empty() {
            String::new()
        } else {
            format!(" {unit}")
        };
        Err(invalid(
            origin,
            field,
            v,
            &format!("allowed range {lo}..={hi}{unit}"),
        ))
    }
}

/// `Ok` if `ok`, else the error that names the field, its value and what
/// is allowed.
fn require(
    origin: &str,
    ok: bool,
    field: &str,
    value: String,
    allowed: &str,
) -> Result<(), ProfileError> {
    if ok {
        Ok(())
    } else {
        Err(invalid(origin, field, value, allowed))
    }
}

/// Link and channel bandwidth: 1 MB/s (a 2000s USB stick) to 100 GB/s
/// (beyond PCIe 5.0 x16).
const BANDWIDTH_MB_S: (f64, f64) = (1.0, 100_000.0);
/// Blocks per plane at the very least: a drive needs some blocks to rotate.
pub const MIN_BLOCKS_PER_PLANE: u32 = 8;
/// Blocks kept aside on each die besides the GC thresholds (open and spare).
const SPARE_BLOCKS: u32 = 4;

impl Profile {
    /// Check every field against its allowed range; the error names the
    /// field, its value and the range. Sections are checked in dependency
    /// order: a field checked against another comes after it.
    pub fn validate(&self, origin: &str) -> Result<(), ProfileError> {
        if self.name.is_empty() {
            return Err(invalid(origin, "name", "\"\"", "must not be empty"));
        }
        self.validate_host(origin)?;
        self.validate_geometry(origin)?;
        self.validate_gc(origin)?;
        self.validate_capacity(origin)?;
        self.validate_nand(origin)?;
        self.validate_buffer(origin)?;
        self.validate_period(origin)
    }

    /// The host interface: link, queue depth, command costs.
    fn validate_host(&self, origin: &str) -> Result<(), ProfileError> {
        let h = &self.host;
        FloatRange {
            lo: BANDWIDTH_MB_S.0,
            hi: BANDWIDTH_MB_S.1,
            unit: "MB/s",
            zero: Some("the interface's default"),
        }
        .check(origin, "host.bandwidth_mb_s", h.bandwidth_mb_s)?;
        int_range(
            origin,
            "host.queue_depth",
            h.queue_depth as u64,
            1,
            1024,
            "commands",
        )?;
        int_range(
            origin,
            "host.command_overhead_ns",
            h.command_overhead_ns,
            0,
            10_000_000,
            "ns (10 ms)",
        )?;
        for (field, v) in [
            ("host.read_command_ns", h.read_command_ns),
            ("host.write_command_ns", h.write_command_ns),
        ] {
            int_range(origin, field, v, 0, 10_000_000, "ns (10 ms)")?;
        }
        int_range(
            origin,
            "host.trim_ns_per_unit",
            h.trim_ns_per_unit,
            0,
            100_000,
            "ns (100 µs)",
        )?;
        int_range(
            origin,
            "host.read_ahead_bytes",
            h.read_ahead_bytes,
            0,
            1 << 30,
            "bytes (1 GiB)",
        )?;
        Ok(())
    }

    /// The geometry, each field on its own, then page size, mapping unit
    /// and raw capacity against each other.
    fn validate_geometry(&self, origin: &str) -> Result<(), ProfileError> {
        let g = &self.geometry;
        int_range(origin, "geometry.channels", g.channels as u64, 1, 64, "")?;
        int_range(
            origin,
            "geometry.dies_per_channel",
            g.dies_per_channel as u64,
            1,
            64,
            "",
        )?;
        int_range(
            origin,
            "geometry.planes_per_die",
            g.planes_per_die as u64,
            1,
            8,
            "",
        )?;
        int_range(
            origin,
            "geometry.pages_per_block",
            g.pages_per_block as u64,
            2,
            16384,
            "",
        )?;
        int_range(
            origin,
            "geometry.blocks_per_plane",
            g.blocks_per_plane as u64,
            MIN_BLOCKS_PER_PLANE as u64,
            u32::MAX as u64,
            "",
        )?;
        let ps = g.page_size.0;
        require(
            origin,
            ps.is_power_of_two() && (512..=65536).contains(&ps),
            "geometry.page_size",
            format_size(ps),
            "a power of two from 512B to 64KiB",
        )?;
        let mu = g.mapping_unit.0;
        require(
            origin,
            mu.is_power_of_two() && mu >= 512 && mu <= ps,
            "geometry.mapping_unit",
            format_size(mu),
            &format!(
                "a power of two from 512B to the page size ({})",
                format_size(ps)
            ),
        )?;
        let raw = self.raw_capacity();
        require(
            origin,
            (raw / mu) < (1u64 << 32) - 1,
            "geometry.blocks_per_plane",
            g.blocks_per_plane.to_string(),
            "raw capacity must be at most 2^32 - 2 mapping units",
        )?;
        Ok(())
    }

    /// GC thresholds and idle time (before the capacity check that depends
    /// on them).
    fn validate_gc(&self, origin: &str) -> Result<(), ProfileError> {
        let g = &self.geometry;
        let gc = &self.gc;
        int_range(
            origin,
            "gc.fg_threshold_blocks",
            gc.fg_threshold_blocks as u64,
            1,
            1024,
            "blocks per die",
        )?;
        int_range(
            origin,
            "gc.bg_target_blocks",
            gc.bg_target_blocks as u64,
            0,
            4096,
            "blocks per die",
        )?;
        let most = g.blocks_per_plane - SPARE_BLOCKS;
        for (field, v) in [
            ("gc.fg_threshold_blocks", gc.fg_threshold_blocks),
            ("gc.bg_target_blocks", gc.bg_target_blocks),
        ] {
            require(
                origin,
                v <= most,
                field,
                v.to_string(),
                &format!(
                    "at most geometry.blocks_per_plane - {SPARE_BLOCKS} = {most} (open and spare blocks per die)"
                ),
            )?;
        }
        FloatRange {
            lo: 0.1,
            hi: 3_600_000.0,
            unit: "ms",
            zero: Some("no background GC"),
        }
        .check(origin, "gc.bg_idle_ms", gc.bg_idle_ms)?;
        FloatRange {
            lo: 0.0,
            hi: 100.0,
            unit: "percent of the spare blocks",
            zero: Some("no reserve"),
        }
        .check(origin, "gc.reserve_pct", gc.reserve_pct)?;
        FloatRange {
            lo: 0.001,
            hi: 1.0,
            unit: "of idle time",
            zero: None,
        }
        .check(origin, "gc.bg_duty", gc.bg_duty)?;
        let h = &self.host;
        FloatRange {
            lo: 0.001,
            hi: 60_000.0,
            unit: "ms",
            zero: Some("no pauses"),
        }
        .check(origin, "host.pause_ms", h.pause_ms)?;
        require(
            origin,
            (h.pause_every_bytes == 0) == (h.pause_ms == 0.0),
            "host.pause_every_bytes",
            h.pause_every_bytes.to_string(),
            "set together with host.pause_ms (both 0: no housekeeping pauses)",
        )?;
        require(
            origin,
            h.pause_every_bytes == 0 || h.pause_every_bytes >= 1 << 20,
            "host.pause_every_bytes",
            h.pause_every_bytes.to_string(),
            "at least 1 MiB between pauses (0: none)",
        )?;
        int_range(origin, "host.read_op_ns", h.read_op_ns, 0, 10_000_000, "ns")?;
        Ok(())
    }

    /// The exported capacity: a whole number of mapping units that leaves
    /// room for GC after retired blocks.
    fn validate_capacity(&self, origin: &str) -> Result<(), ProfileError> {
        let g = &self.geometry;
        let gc = &self.gc;
        let mu = g.mapping_unit.0;
        let exp = g.exported_capacity.0;
        require(
            origin,
            exp > 0 && exp.is_multiple_of(mu),
            "geometry.exported_capacity",
            exp.to_string(),
            &format!("a positive multiple of the mapping unit ({mu} bytes)"),
        )?;
        require(
            origin,
            exp / mu < (1u64 << 32) - 1,
            "geometry.exported_capacity",
            format_size(exp),
            "at most 2^32 - 2 mapping units",
        )?;
        let block_bytes = self.block_bytes();
        let dies = self.dies() as u64;
        // Retired blocks are spread over the dies; the die that lost the
        // most sets the room every die has (data is striped over all).
        let retired_most = (g.retired_blocks as u64).div_ceil(dies);
        require(
            origin,
            retired_most < g.blocks_per_plane as u64,
            "geometry.retired_blocks",
            g.retired_blocks.to_string(),
            &format!(
                "fewer than geometry.blocks_per_plane ({}) on every die",
                g.blocks_per_plane
            ),
        )?;
        let room = dies * (g.blocks_per_plane as u64 - retired_most) * block_bytes;
        let reserve = dies * (gc.fg_threshold_blocks as u64 + 2) * block_bytes;
        require(
            origin,
            exp + reserve <= room,
            "geometry.exported_capacity",
            format_size(exp),
            &format!(
                "must leave room for GC: at most {} (raw capacity, less retired blocks on the die with the most) minus {} (fg_threshold_blocks + 2 blocks on each die)",
                format_size(room),
                format_size(reserve)
            ),
        )?;
        Ok(())
    }

    /// NAND timings and channel bandwidth.
    fn validate_nand(&self, origin: &str) -> Result<(), ProfileError> {
        // NAND: 0 is "no modelled time" (the `instant` preset); otherwise
        // from 1 µs (faster than any NAND) to well beyond the slowest QLC.
        let n = &self.nand;
        for (field, v, hi) in [
            ("nand.t_read_us", n.t_read_us, 10_000.0),
            ("nand.t_prog_us", n.t_prog_us, 100_000.0),
            ("nand.t_erase_us", n.t_erase_us, 1_000_000.0),
        ] {
            FloatRange {
                lo: 1.0,
                hi,
                unit: "µs",
                zero: Some("no modelled time"),
            }
            .check(origin, field, v)?;
        }
        FloatRange {
            lo: BANDWIDTH_MB_S.0,
            hi: BANDWIDTH_MB_S.1,
            unit: "MB/s",
            zero: Some("instantaneous transfers"),
        }
        .check(origin, "nand.channel_mb_s", n.channel_mb_s)?;
        Ok(())
    }

    /// The write buffer: none, or at least two multi-plane pages per die.
    fn validate_buffer(&self, origin: &str) -> Result<(), ProfileError> {
        let g = &self.geometry;
        let ps = g.page_size.0;
        let b = self.buffer.size.0;
        let min_buf = 2 * self.dies() as u64 * g.planes_per_die as u64 * ps;
        require(
            origin,
            b == 0 || (b >= min_buf && b <= (64u64 << 30)),
            "buffer.size",
            format_size(b),
            &format!(
                "0 (no write buffer) or from {} (two multi-plane pages per die) to 64GiB",
                format_size(min_buf)
            ),
        )?;
        Ok(())
    }

    /// The period sections: their own ranges, then against the geometry.
    fn validate_period(&self, origin: &str) -> Result<(), ProfileError> {
        super::period::validate(self, origin)?;
        super::thermal::validate(self, origin)?;
        super::identity::validate(self, origin)?;
        self.validate_fit(origin)?;
        let g = &self.geometry;
        let block_bytes = self.block_bytes();
        if self.mapping.policy == MappingPolicy::Hybrid {
            // A logical block is one block on every die (a superblock); the
            // pool needs the data blocks, one log block and one spare for merges.
            let sb = self.dies() as u64 * block_bytes;
            let lsbs = g.exported_capacity.0.div_ceil(sb);
            require(
                origin,
                lsbs + 2 <= g.blocks_per_plane as u64,
                "geometry.exported_capacity",
                format_size(g.exported_capacity.0),
                &format!(
                    "with hybrid mapping, at most {} superblocks of {} (blocks_per_plane - 2)",
                    g.blocks_per_plane.saturating_sub(2),
                    format_size(sb)
                ),
            )?;
            require(
                origin,
                !self.reduction.enabled && self.slc_cache.mode == SlcMode::Off,
                "mapping.policy",
                "\"hybrid\"".into(),
                "hybrid mapping does not combine with data reduction or an SLC cache",
            )?;
            require(
                origin,
                g.retired_blocks == 0,
                "geometry.retired_blocks",
                g.retired_blocks.to_string(),
                "0 with hybrid mapping (superblocks span every die)",
            )?;
            require(
                origin,
                !self.nand.independent_plane_reads,
                "nand.independent_plane_reads",
                "true".into(),
                "independent plane reads are modelled with page mapping only",
            )?;
        }
        if self.reduction.enabled {
            let units = self.raw_capacity() / g.mapping_unit.0 * self.reduction.max_ratio as u64;
            require(
                origin,
                units < (1u64 << 32) - 1,
                "reduction.max_ratio",
                self.reduction.max_ratio.to_string(),
                "raw capacity times max_ratio must be at most 2^32 - 2 mapping units",
            )?;
            require(
                origin,
                self.slc_cache.mode == SlcMode::Off,
                "reduction.enabled",
                "true".into(),
                "data reduction does not combine with an SLC cache",
            )?;
        }
        let s = &self.slc_cache;
        if s.mode != SlcMode::Off {
            let bits = s.bits_per_cell as u64;
            require(
                origin,
                g.pages_per_block as u64 >= bits && (g.pages_per_block as u64).is_multiple_of(bits),
                "slc_cache.bits_per_cell",
                bits.to_string(),
                &format!(
                    "must divide geometry.pages_per_block ({})",
                    g.pages_per_block
                ),
            )?;
            // SLC blocks hold 1/bits of their native capacity; a static
            // cache lives in the spare area.
            let spare = self
                .in_service_capacity()
                .saturating_sub(g.exported_capacity.0);
            let most = spare / 2 / bits;
            require(
                origin,
                s.mode == SlcMode::Dynamic || s.size.0 <= most,
                "slc_cache.size",
                format_size(s.size.0),
                &format!(
                    "a static cache must fit in half the spare area: at most {}",
                    format_size(most)
                ),
            )?;
            require(
                origin,
                s.size.0 <= self.raw_capacity() / bits,
                "slc_cache.size",
                format_size(s.size.0),
                &format!(
                    "at most the raw capacity in SLC mode ({})",
                    format_size(self.raw_capacity() / bits)
                ),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::Profile;

    fn with(field_line: &str, replacement: &str) -> String {
        let p = Profile::load("sata-mlc-2011").unwrap();
        let t = p.to_toml();
        assert!(t.contains(field_line), "{field_line} not in\n{t}");
        t.replace(field_line, replacement)
    }

    fn err(text: &str) -> String {
        Profile::from_toml(text, "t.toml").unwrap_err().to_string()
    }

    /// Hardening 5: absurd but representable values are refused, naming the field.
    #[test]
    fn absurd_values_name_their_field() {
        for (line, bad, field) in [
            (
                "bandwidth_mb_s = 450.0",
                "bandwidth_mb_s = 1e-9",
                "host.bandwidth_mb_s",
            ),
            (
                "bandwidth_mb_s = 450.0",
                "bandwidth_mb_s = 1e-15",
                "host.bandwidth_mb_s",
            ),
            (
                "bandwidth_mb_s = 450.0",
                "bandwidth_mb_s = 1e9",
                "host.bandwidth_mb_s",
            ),
            (
                "bandwidth_mb_s = 450.0",
                "bandwidth_mb_s = nan",
                "host.bandwidth_mb_s",
            ),
            (
                "channel_mb_s = 166.0",
                "channel_mb_s = 1e-15",
                "nand.channel_mb_s",
            ),
            ("t_read_us = 50.0", "t_read_us = 1e-9", "nand.t_read_us"),
            ("t_prog_us = 1400.0", "t_prog_us = 1e12", "nand.t_prog_us"),
            (
                "t_erase_us = 3000.0",
                "t_erase_us = -1.0",
                "nand.t_erase_us",
            ),
            ("t_erase_us = 3000.0", "t_erase_us = inf", "nand.t_erase_us"),
            ("bg_idle_ms = 100.0", "bg_idle_ms = 1e-12", "gc.bg_idle_ms"),
            ("bg_idle_ms = 100.0", "bg_idle_ms = 1e12", "gc.bg_idle_ms"),
            (
                "command_overhead_ns = 25000",
                "command_overhead_ns = 99000000",
                "host.command_overhead_ns",
            ),
            (
                "trim_ns_per_unit = 2",
                "trim_ns_per_unit = 900000",
                "host.trim_ns_per_unit",
            ),
            ("queue_depth = 32", "queue_depth = 0", "host.queue_depth"),
            ("channels = 8", "channels = 65", "geometry.channels"),
            (
                "blocks_per_plane = 2048",
                "blocks_per_plane = 3",
                "geometry.blocks_per_plane",
            ),
            // Hardening 8: the GC field is blamed, not blocks_per_plane.
            (
                "bg_target_blocks = 4",
                "bg_target_blocks = 5000",
                "gc.bg_target_blocks",
            ),
            (
                "bg_target_blocks = 4",
                "bg_target_blocks = 2045",
                "gc.bg_target_blocks",
            ),
            (
                "fg_threshold_blocks = 2",
                "fg_threshold_blocks = 2000",
                "gc.fg_threshold_blocks",
            ),
        ] {
            let e = err(&with(line, bad));
            assert!(e.contains(&format!("`{field}`")), "{bad}: {e}");
        }
        // The edges of the ranges are accepted, and so is each special 0.
        for (line, good) in [
            ("bandwidth_mb_s = 450.0", "bandwidth_mb_s = 1.0"),
            ("bandwidth_mb_s = 450.0", "bandwidth_mb_s = 0.0"),
            ("channel_mb_s = 166.0", "channel_mb_s = 100000.0"),
            ("t_read_us = 50.0", "t_read_us = 0.0"),
            ("bg_idle_ms = 100.0", "bg_idle_ms = 0.0"),
            ("bg_target_blocks = 4", "bg_target_blocks = 2044"),
        ] {
            Profile::from_toml(&with(line, good), "t.toml")
                .unwrap_or_else(|e| panic!("{good}: {e}"));
        }
    }
}
