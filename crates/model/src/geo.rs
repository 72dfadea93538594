//! Geometry and timing constants derived once from a profile.
//!
//! Everything the FTL and the timelines need per operation is here in the
//! model's own units (units, dpages, blocks; ns), so the hot paths do no
//! profile lookups or unit conversions.

use vssd_profile::{GcPolicy, MappingPolicy, Profile, SlcMode};

/// Derived geometry and timing constants.
#[derive(Debug, Clone)]
pub(crate) struct Geo {
    pub(crate) dies: u32,
    pub(crate) channels: u32,
    pub(crate) planes: u32,
    pub(crate) blocks_per_die: u32,
    pub(crate) pages_per_block: u32,
    pub(crate) units_per_page: u32,
    pub(crate) units_per_dpage: u32,
    pub(crate) units_per_block: u32,
    pub(crate) unit_bytes: u64,
    pub(crate) dpage_bytes: u64,
    pub(crate) logical_units: u64,
    pub(crate) physical_units: u64,
    /// Blocks retired from service (`geometry.retired_blocks`): the last
    /// blocks of each die, spread so dies differ by at most one.
    pub(crate) retired: u32,
    /// Physical units in blocks that are in service.
    pub(crate) in_service_units: u64,
    pub(crate) capacity: u64,
    pub(crate) t_read: u64,
    pub(crate) t_prog: u64,
    pub(crate) t_erase: u64,
    chan_ns_per_byte: f64,
    link_ns_per_byte: f64,
    pub(crate) cmd_ns: u64,
    pub(crate) cmd_read_ns: u64,
    pub(crate) cmd_write_ns: u64,
    /// Read look-ahead in bytes (0: none).
    pub(crate) read_ahead: u64,
    pub(crate) trim_ns_per_unit: u64,
    pub(crate) queue_depth: usize,
    pub(crate) buffer_units: u64,
    /// Free blocks per die at or below which foreground GC runs:
    /// `fg_threshold_blocks` plus the reserve (`reserve_pct` of the die's
    /// spare blocks).
    pub(crate) fg_threshold: u32,
    /// Of `fg_threshold`, the reserve (a GC policy margin, not blocks the
    /// data needs: retiring grown bad blocks may eat into it).
    pub(crate) reserve: u32,
    /// Free blocks per die background GC works towards: `bg_target_blocks`
    /// plus the reserve.
    pub(crate) bg_target: u32,
    pub(crate) bg_idle_ns: u64,
    /// Share of idle time background GC works (1: all of it).
    pub(crate) bg_duty: f64,
    /// Controller time per NAND read operation, ns (0: none).
    pub(crate) read_op_ns: u64,
    /// Host bytes between housekeeping pauses (0: none), and their length, ns.
    pub(crate) pause_every: u64,
    pub(crate) pause_ns: u64,
    pub(crate) policy: GcPolicy,
    // ------------------------------------------------ period mechanisms
    /// TRIM is non-queued (SATA DSM before 3.1): drains the queue, blocks.
    pub(crate) trim_non_queued: bool,
    /// The profile has a `[trim]` section: TRIM costs per command, range
    /// and freed unit, and drops trimmed data from the write buffer.
    /// Without one, TRIM keeps its earlier flat per-unit cost.
    pub(crate) trim_model: bool,
    pub(crate) trim_cmd_ns: u64,
    pub(crate) trim_range_ns: u64,
    pub(crate) trim_freed_ns: u64,
    /// Deferred release of trimmed flash, and its rate per unit written.
    pub(crate) deferred_release: bool,
    pub(crate) release_rate: f64,
    /// Wear: rated P/E cycles (0 = off) and latency growth at them.
    pub(crate) rated_pe: u32,
    pub(crate) prog_growth: f64,
    pub(crate) erase_growth: f64,
    /// Data reduction: the reverse map holds `reduction_factor` slots per physical unit
    /// (1 = no reduction); a NAND page holds `physical_units_per_dpage` units' worth.
    pub(crate) reduction_factor: u32,
    pub(crate) physical_units_per_dpage: u32,
    pub(crate) min_fraction: f64,
    /// SLC cache: mode, SLC-mode program time, bits per native cell, and
    /// the most host units the cache holds.
    pub(crate) slc: SlcMode,
    pub(crate) t_prog_slc: u64,
    pub(crate) slc_bits: u32,
    pub(crate) slc_units: u64,
    /// Hybrid mapping.
    pub(crate) hybrid: bool,
    /// Planes read independently ([`vssd_profile::Nand::independent_plane_reads`]).
    pub(crate) plane_reads: bool,
    pub(crate) log_assoc: u32,
    pub(crate) max_log_blocks: u32,
    /// Hybrid: merges copy whole logical blocks, unwritten pages included.
    pub(crate) whole_block_merges: bool,
    /// Mapping cache: translation pages that fit in the DRAM (0: the whole
    /// map is in DRAM), log2 of the logical units one translation page
    /// maps, and the bytes of one (a NAND page).
    pub(crate) map_cache_pages: u64,
    pub(crate) map_tpage_shift: u32,
    pub(crate) map_page_bytes: u64,
    // ------------------------------------------- precomputed for hot paths
    /// log2 of `units_per_block`, `units_per_dpage` and `channels` when a
    /// power of two (the usual case), else [`NOT_POW2`]: a shift instead of
    /// a 64-bit division on every unit a merge or GC moves.
    upb_shift: u32,
    upd_shift: u32,
    ch_shift: u32,
    dies_shift: u32,
    /// `ceil(2^64 / blocks_per_die)`: block / blocks_per_die as a multiply
    /// (exact for every u32 block; see [`div_by_magic`]).
    bpd_magic: u64,
    /// Channel transfer time of one dpage.
    pub(crate) dpage_chan_ns: u64,
}

/// Marks a divisor that is not a power of two.
const NOT_POW2: u32 = u32::MAX;

/// `ceil(2^64 / d)` for `d` ≥ 2 (0 for `d` < 2, which divides directly).
fn magic_of(d: u32) -> u64 {
    if d < 2 { 0 } else { u64::MAX / d as u64 + 1 }
}

/// `n / d` from `magic = magic_of(d)`: exact for every 32-bit `n` and
/// `d` ≥ 2 (Lemire, Kaser and Kurz, "Faster remainder by direct
/// computation", 2019), a multiply instead of a division.
#[inline]
fn div_by_magic(n: u32, magic: u64) -> u32 {
    ((magic as u128 * n as u128) >> 64) as u32
}

fn shift_of(d: u32) -> u32 {
    if d.is_power_of_two() {
        d.trailing_zeros()
    } else {
        NOT_POW2
    }
}

impl Geo {
    pub(crate) fn new(p: &Profile) -> Geo {
        let g = &p.geometry;
        let dies = g.channels * g.dies_per_channel;
        let reduction_factor = if p.reduction.enabled {
            p.reduction.max_ratio.max(1)
        } else {
            1
        };
        let units_per_page = (g.page_size.0 / g.mapping_unit.0) as u32 * reduction_factor;
        let units_per_dpage = units_per_page * g.planes_per_die;
        let units_per_block = units_per_dpage * g.pages_per_block;
        let blocks_per_die = g.blocks_per_plane;
        let physical_units = dies as u64 * blocks_per_die as u64 * units_per_block as u64;
        let retired = g.retired_blocks;
        let us = |v: f64| (v * 1000.0).round() as u64;
        let per_byte = |mb_s: f64| {
            if mb_s > 0.0 && mb_s.is_finite() {
                1e3 / mb_s
            } else {
                0.0
            }
        };
        let link = p.link_bytes_s();
        let chan_ns_per_byte = per_byte(p.nand.channel_mb_s);
        let dpage_bytes = g.page_size.0 * g.planes_per_die as u64;
        // The reserve: a share of each die's spare blocks (what is not
        // needed for the exported capacity), kept free besides the
        // foreground threshold; never more than leaves room to work.
        // In bytes of NAND: with data reduction a block's units are slots
        // for compressed data, not raw capacity.
        let block_bytes = dpage_bytes * g.pages_per_block as u64;
        let raw =
            (dies as u64 * blocks_per_die as u64).saturating_sub(retired as u64) * block_bytes;
        let spare_blocks =
            (raw.saturating_sub(g.exported_capacity.0) / block_bytes / dies as u64) as f64;
        let reserve = ((p.gc.reserve_pct / 100.0 * spare_blocks).round() as u32)
            .min(blocks_per_die.saturating_sub(p.gc.fg_threshold_blocks + 4));
        Geo {
            dies,
            channels: g.channels,
            planes: g.planes_per_die,
            blocks_per_die,
            pages_per_block: g.pages_per_block,
            units_per_page,
            units_per_dpage,
            units_per_block,
            unit_bytes: g.mapping_unit.0,
            dpage_bytes,
            logical_units: g.exported_capacity.0 / g.mapping_unit.0,
            physical_units,
            retired,
            in_service_units: physical_units - retired as u64 * units_per_block as u64,
            capacity: g.exported_capacity.0,
            t_read: us(p.nand.t_read_us),
            t_prog: us(p.nand.t_prog_us),
            t_erase: us(p.nand.t_erase_us),
            chan_ns_per_byte,
            link_ns_per_byte: if link.is_finite() { 1e9 / link } else { 0.0 },
            cmd_ns: p.host.command_overhead_ns,
            cmd_read_ns: match p.host.read_command_ns {
                0 => p.host.command_overhead_ns,
                v => v,
            },
            cmd_write_ns: match p.host.write_command_ns {
                0 => p.host.command_overhead_ns,
                v => v,
            },
            read_ahead: p.host.read_ahead_bytes,
            trim_ns_per_unit: p.host.trim_ns_per_unit,
            queue_depth: p.host.queue_depth as usize,
            buffer_units: p.buffer.size.0 / g.mapping_unit.0,
            fg_threshold: p.gc.fg_threshold_blocks + reserve,
            reserve,
            bg_target: p.gc.bg_target_blocks + reserve,
            bg_idle_ns: (p.gc.bg_idle_ms * 1e6).round() as u64,
            bg_duty: p.gc.bg_duty,
            read_op_ns: p.host.read_op_ns,
            pause_every: p.host.pause_every_bytes,
            pause_ns: us(p.host.pause_ms * 1000.0),
            policy: p.gc.policy,
            trim_non_queued: p.host.interface.is_sata() && p.trim.non_queued,
            trim_model: p.trim != vssd_profile::Trim::default(),
            trim_cmd_ns: p.trim.command_ns,
            trim_range_ns: p.trim.range_ns,
            trim_freed_ns: p.trim.freed_unit_ns,
            deferred_release: p.trim.deferred_release,
            release_rate: p.trim.release_per_unit_written,
            rated_pe: p.wear.rated_pe_cycles,
            prog_growth: p.wear.prog_growth,
            erase_growth: p.wear.erase_growth,
            reduction_factor,
            physical_units_per_dpage: units_per_dpage / reduction_factor,
            min_fraction: p.reduction.min_fraction,
            slc: p.slc_cache.mode,
            t_prog_slc: us(p.slc_cache.t_prog_us),
            slc_bits: p.slc_cache.bits_per_cell.max(1),
            slc_units: p.slc_cache.size.0 / g.mapping_unit.0,
            hybrid: p.mapping.policy == MappingPolicy::Hybrid,
            plane_reads: p.nand.independent_plane_reads && g.planes_per_die > 1,
            log_assoc: p.mapping.log_associativity.max(1),
            max_log_blocks: p.mapping.max_log_blocks,
            whole_block_merges: p.mapping.whole_block_merges,
            map_cache_pages: (p.mapping.cache_bytes.0 + p.mapping.hmb_bytes.0) / g.page_size.0,
            map_tpage_shift: (g.page_size.0 / p.mapping.entry_bytes() as u64)
                .max(1)
                .trailing_zeros(),
            map_page_bytes: g.page_size.0,
            upb_shift: shift_of(units_per_block),
            upd_shift: shift_of(units_per_dpage),
            ch_shift: shift_of(g.channels),
            dies_shift: shift_of(dies),
            bpd_magic: magic_of(blocks_per_die),
            dpage_chan_ns: (dpage_bytes as f64 * chan_ns_per_byte) as u64,
        }
    }

    /// Total blocks (a block spans the planes of a die).
    #[inline]
    pub(crate) fn blocks(&self) -> usize {
        self.dies as usize * self.blocks_per_die as usize
    }

    /// Blocks retired on `die`: `retired / dies`, one more on the first
    /// `retired % dies` dies.
    #[inline]
    pub(crate) fn retired_on(&self, die: u32) -> u32 {
        self.retired / self.dies + u32::from(die < self.retired % self.dies)
    }

    /// Whether `block` is retired from service (the last
    /// [`Geo::retired_on`] blocks of its die).
    pub(crate) fn is_retired(&self, block: u32) -> bool {
        let die = self.die_of_block(block);
        block - die * self.blocks_per_die >= self.blocks_per_die - self.retired_on(die)
    }

    /// Channel transfer time of `bytes`.
    #[inline]
    pub(crate) fn chan_ns(&self, bytes: u64) -> u64 {
        (bytes as f64 * self.chan_ns_per_byte) as u64
    }

    /// Host link transfer time of `bytes`.
    #[inline]
    pub(crate) fn link_ns(&self, bytes: u64) -> u64 {
        (bytes as f64 * self.link_ns_per_byte) as u64
    }

    /// The channel a die sits on, and its lane (position) on that channel.
    #[inline]
    pub(crate) fn channel_of(&self, die: usize) -> (usize, usize) {
        if self.ch_shift != NOT_POW2 {
            return (die & ((1 << self.ch_shift) - 1), die >> self.ch_shift);
        }
        let ch = self.channels as usize;
        (die % ch, die / ch)
    }

    #[inline]
    pub(crate) fn die_of_block(&self, block: u32) -> u32 {
        if self.bpd_magic != 0 {
            return div_by_magic(block, self.bpd_magic);
        }
        block / self.blocks_per_die
    }

    #[inline]
    pub(crate) fn block_of_ppn(&self, ppn: u64) -> u32 {
        if self.upb_shift != NOT_POW2 {
            return (ppn >> self.upb_shift) as u32;
        }
        (ppn / self.units_per_block as u64) as u32
    }

    /// `x / units_per_dpage` and `x % units_per_dpage`.
    #[inline]
    pub(crate) fn split_dpage(&self, x: u32) -> (u32, u32) {
        if self.upd_shift != NOT_POW2 {
            return (x >> self.upd_shift, x & ((1 << self.upd_shift) - 1));
        }
        (x / self.units_per_dpage, x % self.units_per_dpage)
    }

    /// `x % dies` and `x / dies`: the die and page of the `x`-th dpage of a
    /// stripe over every die.
    #[inline]
    pub(crate) fn split_dies(&self, x: u32) -> (u32, u32) {
        if self.dies_shift != NOT_POW2 {
            return (x & ((1 << self.dies_shift) - 1), x >> self.dies_shift);
        }
        (x % self.dies, x / self.dies)
    }

    /// The dpage (physical unit / `units_per_dpage`) holding `ppn`.
    #[inline]
    pub(crate) fn dpage_of_ppn(&self, ppn: u64) -> u64 {
        if self.upd_shift != NOT_POW2 {
            return ppn >> self.upd_shift;
        }
        ppn / self.units_per_dpage as u64
    }

    /// The physical unit at `slot` of dpage `page` of `block`.
    #[inline]
    pub(crate) fn ppn(&self, block: u32, page: u32, slot: u32) -> u64 {
        block as u64 * self.units_per_block as u64
            + page as u64 * self.units_per_dpage as u64
            + slot as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn division_by_magic_is_exact() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for d in (2..300u32).chain([1101, 16384, 65_521, 1 << 20, u32::MAX - 1, u32::MAX]) {
            let m = magic_of(d);
            for n in [0, 1, d - 1, d, d.saturating_add(1), u32::MAX - 1, u32::MAX] {
                assert_eq!(div_by_magic(n, m), n / d, "{n} / {d}");
            }
            for _ in 0..2000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let n = x as u32;
                assert_eq!(div_by_magic(n, m), n / d, "{n} / {d}");
            }
        }
    }
}
