//! A fixed-width bit-packed array of unsigned integers.
//!
//! The mapping tables hold one entry per mapping unit; packing each entry in
//! exactly as many bits as the largest value needs keeps the whole model under
//! 8 bytes per mapping unit (a 128 GiB drive with 4 KiB units needs 26-bit
//! entries both ways). Zero-initialised storage comes from the allocator's
//! zeroed pages, so creating a large table is lazy and fast.

/// `len` entries of `width` bits each, all zero at creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedVec {
    words: Vec<u64>,
    width: u32,
    mask: u64,
    len: usize,
}

/// Bits needed to store every value in `0..=max`.
pub fn bits_for(max: u64) -> u32 {
    (64 - max.leading_zeros()).max(1)
}

impl PackedVec {
    /// A zeroed array able to hold values up to `max`.
    pub fn new(len: usize, max: u64) -> PackedVec {
        let width = bits_for(max);
        let bits = len as u128 * width as u128;
        // One spare word so a read straddling the last boundary stays in bounds.
        let nwords = (bits.div_ceil(64) + 1) as usize;
        PackedVec {
            words: vec![0u64; nwords],
            width,
            mask: if width == 64 {
                u64::MAX
            } else {
                (1u64 << width) - 1
            },
            len,
        }
    }

    /// Rebuild from saved words (see [`PackedVec::words`]).
    pub fn from_words(words: Vec<u64>, len: usize, max: u64) -> Option<PackedVec> {
        let v = PackedVec::new(0, max);
        let bits = len as u128 * v.width as u128;
        if words.len() != (bits.div_ceil(64) + 1) as usize {
            return None;
        }
        Some(PackedVec { words, len, ..v })
    }

    /// The raw storage, for persistence.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Heap bytes used.
    pub fn heap_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// Entry `i`. Panics if `i >= len` (an internal invariant, never host input).
    #[inline]
    pub fn get(&self, i: usize) -> u64 {
        debug_assert!(i < self.len);
        let bit = i * self.width as usize;
        let w = bit >> 6;
        let sh = (bit & 63) as u32;
        let lo = self.words[w] >> sh;
        let v = if sh + self.width > 64 {
            lo | (self.words[w + 1] << (64 - sh))
        } else {
            lo
        };
        v & self.mask
    }

    /// Load the words holding entries `idx` so later accesses hit the cache;
    /// the loads are independent, so their misses overlap.
    pub fn warm(&self, idx: &[u64]) {
        let mut acc = 0u64;
        for &i in idx {
            acc ^= self.words[(i as usize * self.width as usize) >> 6];
        }
        std::hint::black_box(acc);
    }

    /// Set entry `i` to `v` (which must fit in the width).
    #[inline]
    pub fn set(&mut self, i: usize, v: u64) {
        debug_assert!(i < self.len);
        debug_assert!(v <= self.mask);
        let bit = i * self.width as usize;
        let w = bit >> 6;
        let sh = (bit & 63) as u32;
        self.words[w] = (self.words[w] & !(self.mask << sh)) | (v << sh);
        if sh + self.width > 64 {
            let hi_bits = sh + self.width - 64;
            let hi_mask = (1u64 << hi_bits) - 1;
            self.words[w + 1] = (self.words[w + 1] & !hi_mask) | (v >> (64 - sh));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn widths() {
        assert_eq!(bits_for(0), 1);
        assert_eq!(bits_for(1), 1);
        assert_eq!(bits_for(2), 2);
        assert_eq!(bits_for((1 << 25) + 1), 26);
        assert_eq!(bits_for(u64::MAX), 64);
    }

    proptest! {
        #[test]
        fn behaves_like_a_vec(max in 1u64..u64::MAX, ops in proptest::collection::vec((0usize..200, any::<u64>()), 1..300)) {
            let mut p = PackedVec::new(200, max);
            let mut v = vec![0u64; 200];
            for (i, x) in ops {
                let x = x % max.saturating_add(1).max(1);
                let x = if max == u64::MAX { x } else { x.min(max) };
                p.set(i, x);
                v[i] = x;
                prop_assert_eq!(p.get(i), x);
            }
            for (i, x) in v.iter().enumerate() {
                prop_assert_eq!(p.get(i), *x);
            }
        }
    }
}
