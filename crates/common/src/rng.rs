//! Seeded randomness for the simulator: a small PRNG and a random
//! permutation of block indices (fio's "random map" without a bitmap).
//!
//! Both are written here rather than taken from a crate so a seed keeps
//! producing the same run whatever crate versions are in the lock file.

/// SplitMix64 step: used to expand seeds and to derive sub-seeds.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Mix several values into one seed.
pub fn derive_seed(parts: &[u64]) -> u64 {
    let mut s = 0x5EED_F10F_u64;
    let mut out = 0;
    for &p in parts {
        s ^= p;
        out = splitmix64(&mut s);
    }
    out
}

/// xoshiro256** (Blackman & Vigna): fast, good statistical quality, 256-bit state.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// Seed via SplitMix64, as the algorithm's authors recommend.
    pub fn new(seed: u64) -> Rng {
        let mut sm = seed;
        let s = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        Rng { s }
    }

    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let r = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        r
    }

    /// Uniform in `0..n` (`n > 0`), unbiased (Lemire's multiply with rejection).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let mut m = (self.next_u64() as u128) * (n as u128);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = (self.next_u64() as u128) * (n as u128);
            }
        }
        (m >> 64) as u64
    }
}

/// A seeded bijection on `0..n`, walked in order: each call to [`Perm::next_index`]
/// yields an index not yet seen in this pass, and a pass covers every index
/// exactly once. After a pass the permutation is re-keyed (a new order).
///
/// The bijection is on `k`-bit integers (`2^k >= n`), built from rounds of
/// multiplication by an odd constant and xor-shift-right, both invertible
/// modulo `2^k`; outputs `>= n` are skipped, fewer than half on average.
/// Constant memory and a few ns per call, whatever `n` is.
#[derive(Debug, Clone)]
pub struct Perm {
    n: u64,
    bits: u32,
    mask: u64,
    counter: u64,
    keys: [u64; 6],
    rng: Rng,
    passes: u64,
}

impl Perm {
    /// A permutation of `0..n` (`n >= 1`).
    pub fn new(n: u64, seed: u64) -> Perm {
        assert!(n >= 1);
        let bits = (64 - (n - 1).leading_zeros()).max(1);
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let mut p = Perm {
            n,
            bits,
            mask,
            counter: 0,
            keys: [0; 6],
            rng: Rng::new(seed),
            passes: 0,
        };
        p.rekey();
        p
    }

    fn rekey(&mut self) {
        for k in self.keys.iter_mut() {
            *k = self.rng.next_u64();
        }
        // Multipliers must be odd.
        self.keys[0] |= 1;
        self.keys[2] |= 1;
        self.keys[4] |= 1;
    }

    /// Apply the bijection to a `bits`-bit value.
    #[inline]
    fn mix(&self, mut x: u64) -> u64 {
        let m = self.mask;
        let s1 = (self.bits / 2).max(1);
        let s2 = (self.bits / 3).max(1);
        x = (x.wrapping_mul(self.keys[0]).wrapping_add(self.keys[1])) & m;
        x ^= x >> s1;
        x = (x.wrapping_mul(self.keys[2]).wrapping_add(self.keys[3])) & m;
        x ^= x >> s2;
        x = (x.wrapping_mul(self.keys[4]).wrapping_add(self.keys[5])) & m;
        x ^= x >> s1;
        x
    }

    /// The next index of the current pass (starting a new pass when one ends).
    #[inline]
    pub fn next_index(&mut self) -> u64 {
        loop {
            if self.counter > self.mask {
                self.counter = 0;
                self.passes += 1;
                self.rekey();
            }
            let y = self.mix(self.counter);
            self.counter += 1;
            if y < self.n {
                return y;
            }
        }
    }

    /// Completed passes.
    pub fn passes(&self) -> u64 {
        self.passes
    }
}

#[cfg(test)]
mod tests {
    use super::{Perm, Rng};
    use proptest::prelude::{prop_assert, proptest};

    #[test]
    fn rng_is_deterministic_and_spread() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut c = Rng::new(43);
        assert_ne!(Rng::new(42).next_u64(), c.next_u64());
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[a.below(10) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }

    proptest! {
        /// Every pass of the permutation visits every index exactly once.
        #[test]
        fn perm_covers_each_index_once_per_pass(n in 1u64..5000, seed: u64) {
            let mut p = Perm::new(n, seed);
            for pass in 0..2 {
                let mut seen = vec![false; n as usize];
                for _ in 0..n {
                    let i = p.next_index() as usize;
                    prop_assert!(i < n as usize);
                    prop_assert!(!seen[i], "index {} twice in pass {}", i, pass);
                    seen[i] = true;
                }
            }
        }
    }

    #[test]
    fn perm_is_not_the_identity() {
        let mut p = Perm::new(1 << 20, 7);
        let first: Vec<u64> = (0..16).map(|_| p.next_index()).collect();
        let sequential = first.windows(2).filter(|w| w[1] == w[0] + 1).count();
        assert!(sequential < 3, "{first:?}");
    }
}
