//! virtio-blk feature bits and configuration space derived from the drive.

use vhost::vhost_user::message::VhostUserVirtioFeatures;
use virtio_bindings::virtio_blk::{
    VIRTIO_BLK_F_BLK_SIZE, VIRTIO_BLK_F_CONFIG_WCE, VIRTIO_BLK_F_DISCARD, VIRTIO_BLK_F_FLUSH,
    VIRTIO_BLK_F_MQ, VIRTIO_BLK_F_SEG_MAX, VIRTIO_BLK_F_SIZE_MAX, VIRTIO_BLK_F_TOPOLOGY,
    VIRTIO_BLK_F_WRITE_ZEROES,
};
use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::virtio_ring::{VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC};

use super::request::{Limits, SECTOR};
use crate::profile::Profile;

/// Offset of `wce` in `struct virtio_blk_config`.
pub const WCE_OFFSET: usize = 32;
/// Bytes of config space we describe (through the secure-erase fields, which stay 0).
pub const CONFIG_LEN: usize = 72;
/// Largest segment the guest may put in one descriptor.
pub const SIZE_MAX: u32 = 1 << 20;
/// Most data segments per request.
pub const SEG_MAX: u32 = 126;
/// Most discard segments per request.
pub const MAX_DISCARD_SEG: u32 = 32;

/// Features, config bytes and request limits of one drive.
#[derive(Debug, Clone)]
pub struct BlkConfig {
    /// Offered virtio features (with VHOST_USER_F_PROTOCOL_FEATURES).
    pub features: u64,
    /// The initial config space.
    pub bytes: [u8; CONFIG_LEN],
    /// Limits requests are validated against.
    pub limits: Limits,
}

impl BlkConfig {
    /// Derive everything from the profile and the queue setup.
    pub fn new(profile: &Profile, capacity: u64, num_queues: u16, write_cache: bool) -> BlkConfig {
        let page = profile.geometry.page_size.0.max(SECTOR);
        let page_sectors = (page / SECTOR) as u32;
        let stripe = page
            * u64::from(profile.geometry.channels)
            * u64::from(profile.geometry.dies_per_channel)
            * u64::from(profile.geometry.planes_per_die);
        let opt_io_sectors = (stripe.min(4 << 20) / SECTOR) as u32;
        let capacity_sectors = capacity / SECTOR;
        // Largest discard / write-zeroes segment: 1 GiB, in whole pages, never above the disk.
        let max_seg_sectors = {
            let m = ((1u64 << 30) / SECTOR).min(capacity_sectors.max(1)) as u32;
            (m / page_sectors).max(1) * page_sectors
        };
        let physical_block_exp = page_sectors.trailing_zeros() as u8;

        let mut b = [0u8; CONFIG_LEN];
        b[0..8].copy_from_slice(&capacity_sectors.to_le_bytes());
        b[8..12].copy_from_slice(&SIZE_MAX.to_le_bytes());
        b[12..16].copy_from_slice(&SEG_MAX.to_le_bytes());
        // 16..20 geometry: unused (no VIRTIO_BLK_F_GEOMETRY).
        b[20..24].copy_from_slice(&(SECTOR as u32).to_le_bytes());
        b[24] = physical_block_exp;
        b[25] = 0; // alignment_offset
        b[26..28].copy_from_slice(&(page_sectors.min(u16::MAX as u32) as u16).to_le_bytes());
        b[28..32].copy_from_slice(&opt_io_sectors.to_le_bytes());
        b[WCE_OFFSET] = u8::from(write_cache);
        b[34..36].copy_from_slice(&num_queues.to_le_bytes());
        b[36..40].copy_from_slice(&max_seg_sectors.to_le_bytes());
        b[40..44].copy_from_slice(&MAX_DISCARD_SEG.to_le_bytes());
        b[44..48].copy_from_slice(&page_sectors.to_le_bytes());
        b[48..52].copy_from_slice(&max_seg_sectors.to_le_bytes());
        b[52..56].copy_from_slice(&1u32.to_le_bytes());
        b[56] = 1; // write_zeroes_may_unmap

        let features = [
            VIRTIO_F_VERSION_1,
            VIRTIO_RING_F_EVENT_IDX,
            VIRTIO_RING_F_INDIRECT_DESC,
            VIRTIO_BLK_F_SIZE_MAX,
            VIRTIO_BLK_F_SEG_MAX,
            VIRTIO_BLK_F_BLK_SIZE,
            VIRTIO_BLK_F_TOPOLOGY,
            VIRTIO_BLK_F_FLUSH,
            VIRTIO_BLK_F_CONFIG_WCE,
            VIRTIO_BLK_F_MQ,
            VIRTIO_BLK_F_DISCARD,
            VIRTIO_BLK_F_WRITE_ZEROES,
        ]
        .iter()
        .fold(0u64, |acc, bit| acc | (1u64 << bit))
            | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits();

        BlkConfig {
            features,
            bytes: b,
            limits: Limits {
                capacity_sectors,
                max_data_len: u64::from(SIZE_MAX) * u64::from(SEG_MAX),
                max_discard_sectors: max_seg_sectors,
                max_discard_seg: MAX_DISCARD_SEG,
                max_write_zeroes_sectors: max_seg_sectors,
                max_write_zeroes_seg: 1,
            },
        }
    }

    /// Exactly `size` bytes of config space from `offset` (zero past what we describe).
    pub fn read(bytes: &[u8], offset: u32, size: u32) -> Vec<u8> {
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

    #[test]
    fn config_matches_profile() {
        let p = Profile::load_with_capacity("sata-mlc-2011", Some(8 << 30)).unwrap();
        let c = BlkConfig::new(&p, 8 << 30, 2, true);
        assert_eq!(
            u64::from_le_bytes(c.bytes[0..8].try_into().unwrap()),
            (8 << 30) / 512
        );
        assert_eq!(c.bytes[24], 4); // 8 KiB pages = 2^4 sectors
        assert_eq!(c.bytes[WCE_OFFSET], 1);
        assert_eq!(u16::from_le_bytes([c.bytes[34], c.bytes[35]]), 2);
        assert_eq!(c.limits.max_discard_sectors % 16, 0);
        // QEMU 7.2 asks for 57 bytes; larger and offset reads are padded.
        assert_eq!(BlkConfig::read(&c.bytes, 0, 57).len(), 57);
        assert_eq!(BlkConfig::read(&c.bytes, 60, 100).len(), 100);
        assert_eq!(BlkConfig::read(&c.bytes, 1000, 4), vec![0; 4]);
        assert_ne!(c.features & (1 << VIRTIO_BLK_F_DISCARD), 0);
    }
}
