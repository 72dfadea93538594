//! Estimating how compressible a write's data is, for drives that reduce
//! data (`[reduction]`). Pure: the caller hands over the bytes.
//!
//! A cheap bounded-cost estimate: at most [`SAMPLE_BYTES`] from the start
//! of the payload and as many from its middle are compressed with LZ4 (the
//! kind of fast compressor a SandForce-class controller runs in hardware);
//! the saving on the sample is the payload's [`Payload::Compressible`]
//! percentage. All-zero samples are [`Payload::Zeroes`]. Measured cost
//! (`cargo bench --bench sim`, `payload_estimate`): a few µs per request,
//! whatever its size.

use super::Payload;

/// Bytes compressed from each of the two sample positions.
pub const SAMPLE_BYTES: usize = 4096;

/// How compressible `sample` is (the bytes the caller sampled from a write).
pub fn estimate(sample: &[u8]) -> Payload {
    if sample.is_empty() {
        return Payload::Unknown;
    }
    if sample.iter().all(|&b| b == 0) {
        return Payload::Zeroes;
    }
    let compressed = lz4_flex::block::compress(sample).len();
    let saved = sample.len().saturating_sub(compressed) * 100 / sample.len();
    Payload::Compressible {
        percent: saved.min(100) as u8,
    }
}

/// The sample [`estimate`] should see from a payload of `len` bytes: up
/// to two ranges `(offset, bytes)`, at its start and in its middle.
pub fn sample_ranges(len: u64) -> [(u64, usize); 2] {
    let n = (SAMPLE_BYTES as u64).min(len);
    let mid = if len >= 2 * SAMPLE_BYTES as u64 {
        (len / 2 / 512 * 512, SAMPLE_BYTES)
    } else {
        (0, 0)
    };
    [(0, n as usize), mid]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroes_text_and_random_data() {
        assert_eq!(estimate(&[0u8; 8192]), Payload::Zeroes);
        assert_eq!(estimate(&[]), Payload::Unknown);
        let text: Vec<u8> = b"the quick brown fox jumps over the lazy dog "
            .iter()
            .cycle()
            .take(8192)
            .copied()
            .collect();
        match estimate(&text) {
            Payload::Compressible { percent } => assert!(percent > 80, "{percent}"),
            p => panic!("{p:?}"),
        }
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let random: Vec<u8> = (0..8192)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        match estimate(&random) {
            Payload::Compressible { percent } => assert!(percent < 5, "{percent}"),
            p => panic!("{p:?}"),
        }
        assert_eq!(sample_ranges(4096), [(0, 4096), (0, 0)]);
        assert_eq!(sample_ranges(1 << 20), [(0, 4096), (1 << 19, 4096)]);
    }
}
