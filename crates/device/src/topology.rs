//! What every frontend tells its client about the drive's geometry, in
//! bytes; each frontend maps it to its own wire format (virtio-blk config
//! space, NBD block-size constraints, ...).

use vssd_profile::Profile;

/// Bytes per sector: the logical block every frontend exposes.
pub const SECTOR: u64 = 512;

/// Largest single discard / write-zeroes range the drive accepts, bytes
/// (rounded down to whole pages, never above the drive).
pub const MAX_TRIM_RANGE: u64 = 1 << 30;

/// Largest optimal I/O size advertised.
const MAX_OPT_IO: u64 = 4 << 20;

/// The drive's block sizes and limits, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topology {
    /// Exported bytes.
    pub capacity: u64,
    /// Smallest addressable unit (512).
    pub logical_block: u64,
    /// The NAND page: writes smaller than this cost a read-modify-write.
    pub physical_block: u64,
    /// Smallest efficient I/O (one page).
    pub min_io: u64,
    /// Optimal I/O: one page on every plane of every die (capped at 4 MiB).
    pub opt_io: u64,
    /// Discards are best aligned to and sized in multiples of this (one page).
    pub discard_granularity: u64,
    /// Largest discard range, bytes (a multiple of the granularity).
    pub max_discard_range: u64,
    /// Largest write-zeroes range, bytes.
    pub max_write_zeroes_range: u64,
    /// Unmapping write-zeroes deallocates (reads return zeros after either).
    pub write_zeroes_may_unmap: bool,
    /// Trimmed and never-written LBAs read as zeros (`read_after_trim =
    /// "zeros"`): NBD block status may then say ZERO for a hole.
    pub unmapped_reads_zero: bool,
    /// The drive has a volatile write cache (FLUSH matters).
    pub write_cache: bool,
    /// Commands the drive accepts at once (NCQ 32 for SATA).
    pub queue_depth: u32,
}

impl Topology {
    /// Derive the topology from a profile (its exported capacity included).
    pub fn of(profile: &Profile) -> Topology {
        let g = &profile.geometry;
        let zeros = profile.identity().read_after_trim == vssd_profile::ReadAfterTrim::Zeros;
        let capacity = g.exported_capacity.0;
        let page = g.page_size.0.max(SECTOR);
        let stripe = page
            * u64::from(g.channels)
            * u64::from(g.dies_per_channel)
            * u64::from(g.planes_per_die);
        let max_range = {
            let m = MAX_TRIM_RANGE.min(capacity.max(SECTOR));
            (m / page).max(1) * page
        };
        Topology {
            capacity,
            logical_block: SECTOR,
            physical_block: page,
            min_io: page,
            opt_io: stripe.clamp(page, MAX_OPT_IO.max(page)),
            discard_granularity: page,
            max_discard_range: max_range,
            max_write_zeroes_range: max_range,
            write_zeroes_may_unmap: zeros,
            unmapped_reads_zero: zeros,
            write_cache: profile.buffer.size.0 > 0,
            queue_depth: profile.host.queue_depth.max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_follows_the_profile() {
        let p = Profile::load_with_capacity("sata-mlc-2011", Some(8 << 30)).unwrap();
        let t = Topology::of(&p);
        assert_eq!(t.capacity, 8 << 30);
        assert_eq!(t.physical_block, 8192);
        assert_eq!(t.discard_granularity, 8192);
        assert_eq!(t.max_discard_range % t.discard_granularity, 0);
        assert!(t.max_discard_range <= 1 << 30);
        assert!(t.opt_io >= t.min_io && t.opt_io <= 4 << 20);
        assert!(t.write_cache);
        assert_eq!(t.queue_depth, 32);
        let tiny = Profile::load_with_capacity("instant", Some(64 << 20)).unwrap();
        assert!(Topology::of(&tiny).max_discard_range <= 64 << 20);
    }
}
