//! virtio-blk feature bits (the list is `vssd_common::virtio`'s, shared
//! with the load generator) and configuration space, mapped from the
//! device's [`Topology`]. The config space is `virtio-bindings`'
//! `virtio_blk_config` made byte-addressable through `ByteValued`, so no
//! offset is counted by hand.

use std::mem::offset_of;

use vhost::vhost_user::message::VhostUserVirtioFeatures;
use virtio_bindings::virtio_blk::virtio_blk_config;
use vm_memory::ByteValued;

use super::request::Limits;
use vssd_common::virtio::{OFFERED_FEATURES, feature_bits};
use vssd_device::{SECTOR, Topology};

/// Largest segment the guest may put in one descriptor.
pub const SIZE_MAX: u32 = 1 << 20;
/// Most data segments per request.
pub const SEG_MAX: u32 = 126;
/// Most discard segments per request.
pub const MAX_DISCARD_SEG: u32 = 32;
/// Offset of the writeback flag (`wce`), the only field the guest may write.
pub const WCE_OFFSET: usize = offset_of!(virtio_blk_config, wce);

/// `struct virtio_blk_config` as bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[repr(transparent)]
pub struct ConfigSpace(pub virtio_blk_config);

// SAFETY: `virtio_blk_config` is `repr(C, packed)` and made only of
// integers and arrays of integers, so it has no padding and every bit
// pattern is a valid value.
unsafe impl ByteValued for ConfigSpace {}

/// Features, config space and request limits of one drive.
#[derive(Debug, Clone)]
pub struct BlkConfig {
    /// Offered virtio features (with VHOST_USER_F_PROTOCOL_FEATURES).
    pub features: u64,
    /// The initial config space.
    pub space: ConfigSpace,
    /// Limits requests are validated against.
    pub limits: Limits,
}

fn sectors32(bytes: u64) -> u32 {
    (bytes / SECTOR).min(u64::from(u32::MAX)) as u32
}

impl BlkConfig {
    /// Map the drive's topology to virtio-blk.
    pub fn new(t: &Topology, num_queues: u16) -> BlkConfig {
        let page_sectors = sectors32(t.physical_block).max(1);
        let capacity_sectors = t.capacity / SECTOR;
        let max_discard = sectors32(t.max_discard_range);
        let max_write_zeroes = sectors32(t.max_write_zeroes_range);
        let c = virtio_blk_config {
            capacity: capacity_sectors.to_le(),
            size_max: SIZE_MAX.to_le(),
            seg_max: SEG_MAX.to_le(),
            blk_size: (t.logical_block as u32).to_le(),
            physical_block_exp: page_sectors.trailing_zeros() as u8,
            alignment_offset: 0,
            min_io_size: (sectors32(t.min_io).min(u32::from(u16::MAX)) as u16).to_le(),
            opt_io_size: sectors32(t.opt_io).to_le(),
            wce: u8::from(t.write_cache),
            num_queues: num_queues.to_le(),
            max_discard_sectors: max_discard.to_le(),
            max_discard_seg: MAX_DISCARD_SEG.to_le(),
            discard_sector_alignment: sectors32(t.discard_granularity).max(1).to_le(),
            max_write_zeroes_sectors: max_write_zeroes.to_le(),
            max_write_zeroes_seg: 1u32.to_le(),
            write_zeroes_may_unmap: u8::from(t.write_zeroes_may_unmap),
            ..Default::default()
        };

        let features =
            feature_bits(&OFFERED_FEATURES) | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits();

        BlkConfig {
            features,
            space: ConfigSpace(c),
            limits: Limits {
                capacity_sectors,
                max_data_len: u64::from(SIZE_MAX) * u64::from(SEG_MAX),
                max_discard_sectors: max_discard,
                max_discard_seg: MAX_DISCARD_SEG,
                max_write_zeroes_sectors: max_write_zeroes,
                max_write_zeroes_seg: 1,
            },
        }
    }

    /// Exactly `size` bytes of `space` from `offset` (zero past its end).
    pub fn read(space: &ConfigSpace, offset: u32, size: u32) -> Vec<u8> {
        let bytes = space.as_slice();
        let mut out = vec![0u8; size as usize];
        let start = offset as usize;
        if start < bytes.len() {
            let n = (bytes.len() - start).min(out.len());
            out[..n].copy_from_slice(&bytes[start..start + n]);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vssd_profile::Profile;

    #[test]
    fn config_matches_topology() {
        let p = Profile::load_with_capacity("sata-mlc-2011", Some(8 << 30)).unwrap();
        let c = BlkConfig::new(&Topology::of(&p), 2);
        let b = c.space.as_slice();
        assert_eq!(b.len(), 96);
        assert_eq!(
            u64::from_le_bytes(b[0..8].try_into().unwrap()),
            (8 << 30) / 512
        );
        assert_eq!(b[24], 4); // 8 KiB pages = 2^4 sectors
        assert_eq!(WCE_OFFSET, 32);
        assert_eq!(b[WCE_OFFSET], 1);
        assert_eq!(u16::from_le_bytes([b[34], b[35]]), 2);
        assert_eq!(c.limits.max_discard_sectors % 16, 0);
        assert_eq!(u32::from_le_bytes(b[44..48].try_into().unwrap()), 16); // discard alignment
        assert_eq!(b[56], 1); // write_zeroes_may_unmap
        // QEMU 7.2 asks for 57 bytes; larger and offset reads are padded.
        assert_eq!(BlkConfig::read(&c.space, 0, 57).len(), 57);
        assert_eq!(BlkConfig::read(&c.space, 60, 100).len(), 100);
        assert_eq!(BlkConfig::read(&c.space, 1000, 4), vec![0; 4]);
        assert_ne!(
            c.features & (1 << virtio_bindings::virtio_blk::VIRTIO_BLK_F_DISCARD),
            0
        );
    }
}
