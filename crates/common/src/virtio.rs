//! The virtio features of vssd's vhost-user-blk device (besides
//! vhost-user's `PROTOCOL_FEATURES`), as bit numbers: the frontend offers
//! exactly these, and the load generator asks for the same list. One list
//! here, below both, so they cannot drift apart.

use virtio_bindings::virtio_blk::{
    VIRTIO_BLK_F_BLK_SIZE, VIRTIO_BLK_F_CONFIG_WCE, VIRTIO_BLK_F_DISCARD, VIRTIO_BLK_F_FLUSH,
    VIRTIO_BLK_F_MQ, VIRTIO_BLK_F_SEG_MAX, VIRTIO_BLK_F_SIZE_MAX, VIRTIO_BLK_F_TOPOLOGY,
    VIRTIO_BLK_F_WRITE_ZEROES,
};
use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::virtio_ring::{VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC};

/// The virtio-blk features the device offers, as bit numbers.
pub const OFFERED_FEATURES: [u32; 12] = [
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
];

/// The feature mask of a list of bit numbers.
pub fn feature_bits(bits: &[u32]) -> u64 {
    bits.iter().fold(0u64, |acc, bit| acc | (1u64 << bit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mask_has_one_bit_per_feature() {
        let m = feature_bits(&OFFERED_FEATURES);
        assert_eq!(m.count_ones() as usize, OFFERED_FEATURES.len());
        assert_ne!(m & (1 << VIRTIO_F_VERSION_1), 0);
    }
}
