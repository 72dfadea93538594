//! A fixed-width bit-packed array of unsigned integers, and a bitmap.
//!
//! The mapping tables hold one entry per mapping unit; packing each entry in
//! exactly as many bits as the largest value needs keeps the whole model under
//! 8 bytes per mapping unit (a 128 GiB drive with 4 KiB units needs 26-bit
//! entries both ways). Zero-initialised storage comes from the allocator's
//! zeroed pages, so creating a large table is lazy and fast.

/// A fixed number of bits, 64 to a word, all clear at creation (the live
/// units of the NAND; the units trimmed but not released). Indexing past
/// the end panics: an internal invariant, never host input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bitmap {
    words: Vec<u64>,
}

impl Bitmap {
    /// `len` clear bits.
    pub fn new(len: u64) -> Bitmap {
        Bitmap {
            words: vec![0; len.div_ceil(64) as usize],
        }
    }

    /// Whether it has no storage (a bitmap of no bits: the feature is off).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Bit `i`.
    #[inline]
    pub fn get(&self, i: u64) -> bool {
        (self.words[(i >> 6) as usize] >> (i & 63)) & 1 != 0
    }

    /// Set bit `i`.
    #[inline]
    pub fn set(&mut self, i: u64) {
        self.words[(i >> 6) as usize] |= 1u64 << (i & 63);
    }

    /// Clear bit `i`.
    #[inline]
    pub fn clear(&mut self, i: u64) {
        self.words[(i >> 6) as usize] &= !(1u64 << (i & 63));
    }

    /// Bits set.
    pub fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| w.count_ones() as u64).sum()
    }

    /// The set bits, in order.
    pub fn iter_ones(&self) -> impl Iterator<Item = u64> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &bits)| {
            let mut b = bits;
            std::iter::from_fn(move || {
                (b != 0).then(|| {
                    let i = w as u64 * 64 + b.trailing_zeros() as u64;
                    b &= b - 1;
                    i
                })
            })
        })
    }

    /// The storage words (bit `i` is bit `i % 64` of word `i / 64`).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// The storage words, to fill from a saved state.
    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }

    /// Heap bytes used.
    pub fn heap_bytes(&self) -> usize {
        self.words.capacity() * 8
    }
}

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

    /// Entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bits per entry.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// The words holding entries (without the spare word): entries
    /// `64 k .. 64 (k + 1)` are exactly words `width k .. width (k + 1)`.
    pub fn data_words(&self) -> &[u64] {
        &self.words[..self.words.len() - 1]
    }

    /// The words holding entries, to fill them in place (persistence).
    /// Bits past the last entry must stay zero: see [`PackedVec::clear_tail`].
    pub fn data_words_mut(&mut self) -> &mut [u64] {
        let n = self.words.len() - 1;
        &mut self.words[..n]
    }

    /// Zero the bits after the last entry (and the spare word), which
    /// [`PackedVec::data_words_mut`] may have set.
    pub fn clear_tail(&mut self) {
        let used = self.len as u128 * self.width as u128;
        let w = (used / 64) as usize;
        let sh = (used % 64) as u32;
        if sh > 0 {
            self.words[w] &= (1u64 << sh) - 1;
            self.words[w + 1..].fill(0);
        } else {
            self.words[w..].fill(0);
        }
    }

    /// Call `f(i, v)` for every entry `v` ≠ 0, in order, skipping zeroed
    /// storage 64 entries at a time (fast on sparse tables); stops at the
    /// first error.
    pub fn try_for_each_nonzero<E>(
        &self,
        mut f: impl FnMut(usize, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        let w = self.width as usize;
        for (g, words) in self.data_words().chunks(w).enumerate() {
            if words.iter().all(|&x| x == 0) {
                continue;
            }
            for i in g * 64..((g + 1) * 64).min(self.len) {
                let v = self.get(i);
                if v != 0 {
                    f(i, v)?;
                }
            }
        }
        Ok(())
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

    /// Load the words holding entries `start..start + n` (one load per
    /// cache line), so that later accesses hit the cache: the loads are
    /// independent, so their misses overlap.
    pub fn warm_range(&self, start: usize, n: usize) {
        if n == 0 {
            return;
        }
        let w = self.width as usize;
        let first = (start * w) >> 6;
        let last = ((start + n) * w - 1) >> 6;
        let mut acc = 0u64;
        let mut i = first;
        while i <= last {
            acc ^= self.words[i];
            i += 8;
        }
        acc ^= self.words[last];
        std::hint::black_box(acc);
    }

    /// Whether every run of `n` entries starting at a multiple of `n`
    /// starts and ends on a word boundary.
    pub fn word_aligned(&self, n: usize) -> bool {
        (n * self.width as usize).is_multiple_of(64)
    }

    /// Copy entries `src..src + n` to `dst..dst + n` (which must not
    /// overlap them), a word at a time. Both ranges must start and end on
    /// word boundaries (see [`PackedVec::word_aligned`]).
    pub fn copy_aligned(&mut self, src: usize, dst: usize, n: usize) {
        let w = self.width as usize;
        assert!((src * w).is_multiple_of(64) && (dst * w).is_multiple_of(64));
        assert!((n * w).is_multiple_of(64));
        debug_assert!(src + n <= self.len && dst + n <= self.len);
        debug_assert!(src + n <= dst || dst + n <= src);
        let (s, d, k) = (src * w / 64, dst * w / 64, n * w / 64);
        self.words.copy_within(s..s + k, d);
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
    fn bitmap_sets_clears_counts_and_walks_its_bits() {
        let mut b = Bitmap::new(130);
        assert_eq!(b.words().len(), 3);
        for i in [0, 63, 64, 129] {
            b.set(i);
        }
        b.set(5);
        b.clear(5);
        assert!(b.get(63) && b.get(64) && !b.get(5) && !b.get(1));
        assert_eq!(b.count_ones(), 4);
        assert_eq!(b.iter_ones().collect::<Vec<_>>(), [0, 63, 64, 129]);
        assert!(Bitmap::default().is_empty() && !b.is_empty());
    }

    #[test]
    fn nonzero_walk_and_tail() {
        for width_max in [1u64, 5, (1 << 29) - 1, u64::MAX] {
            let mut p = PackedVec::new(1000, width_max);
            let set = [0usize, 63, 64, 200, 511, 512, 999];
            for &i in &set {
                p.set(i, (i as u64 % width_max.min(1000)) + 1);
            }
            let mut seen = Vec::new();
            p.try_for_each_nonzero(|i, v| {
                assert_eq!(p.get(i), v);
                seen.push(i);
                Ok::<_, ()>(())
            })
            .unwrap();
            assert_eq!(seen, set);
            let before = p.clone();
            if !(1000 * p.width()).is_multiple_of(64) {
                // A stray bit after the last entry.
                let n = p.data_words_mut().len();
                p.data_words_mut()[n - 1] |= 1 << 63;
                assert_ne!(p, before);
            }
            p.clear_tail();
            assert_eq!(p, before);
            for i in 0..1000 {
                assert_eq!(p.get(i), before.get(i));
            }
        }
    }

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
