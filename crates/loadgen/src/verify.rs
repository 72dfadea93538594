//! `--verify`: self-describing data blocks and the generation table.
//!
//! Every block written under `--verify` starts with a 24-byte header —
//! a magic number, the block's byte offset on the disk and a generation
//! number — and the rest is a pseudo-random pattern derived from offset
//! and generation. So any block can be checked on its own (the header says
//! what the rest must be, and where the block belongs), and the writer's
//! table of the generation it last wrote to each block says whether what
//! comes back is the latest data or stale.

/// First word of a verify block.
pub const MAGIC: u64 = 0x5653_5344_4C47_5631; // "VSSDLGV1"
/// Bytes of the header (magic, offset, generation).
pub const HEADER: usize = 24;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fill `buf` (a whole block, a multiple of 8 bytes) with the block for
/// `offset` at generation `gen`.
pub fn fill(buf: &mut [u8], offset: u64, generation: u32) {
    let mut x = mix(offset ^ (u64::from(generation) << 40) ^ MAGIC);
    for (i, w) in buf.chunks_exact_mut(8).enumerate() {
        let v = match i {
            0 => MAGIC,
            1 => offset,
            2 => u64::from(generation),
            _ => {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                x ^ (x >> 29)
            }
        };
        w.copy_from_slice(&v.to_le_bytes());
    }
}

/// What a block read back holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// A verify block for `offset` at generation `generation`, intact.
    Block {
        /// Offset in its header.
        offset: u64,
        /// Generation in its header.
        generation: u32,
    },
    /// All zeros (never written, discarded).
    Zeros,
    /// A verify header whose body does not match it (torn or corrupt).
    Corrupt {
        /// Offset in its header.
        offset: u64,
        /// Generation in its header.
        generation: u32,
    },
    /// Anything else.
    Foreign,
}

fn word(buf: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&buf[8 * i..8 * i + 8]);
    u64::from_le_bytes(w)
}

/// Classify a block read back. `scratch` is reused to regenerate it.
pub fn inspect(buf: &[u8], scratch: &mut Vec<u8>) -> Found {
    if buf.len() < HEADER || word(buf, 0) != MAGIC {
        return if buf.iter().all(|&b| b == 0) {
            Found::Zeros
        } else {
            Found::Foreign
        };
    }
    let offset = word(buf, 1);
    let Ok(generation) = u32::try_from(word(buf, 2)) else {
        return Found::Foreign;
    };
    scratch.resize(buf.len(), 0);
    fill(scratch, offset, generation);
    if scratch[..] == buf[..] {
        Found::Block { offset, generation }
    } else {
        Found::Corrupt { offset, generation }
    }
}

/// Per-block state of one queue's region: the generation last written
/// (0 = not written by this run) and whether a request on it is in flight.
#[derive(Debug)]
pub struct GenTable {
    /// Bit 31: busy; bits 0..31: generation.
    slots: Vec<u32>,
    next: u32,
}

const BUSY: u32 = 1 << 31;

impl GenTable {
    /// A table for `blocks` blocks; generations start from `first` (so
    /// consecutive runs use different ones).
    pub fn new(blocks: u64, first: u32) -> GenTable {
        GenTable {
            // vec![0; n] comes from zeroed pages: untouched parts cost nothing.
            slots: vec![0; blocks as usize],
            next: (first & !BUSY).max(1),
        }
    }

    /// Blocks.
    pub fn len(&self) -> u64 {
        self.slots.len() as u64
    }

    /// No blocks.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Whether a request on block `i` is in flight.
    pub fn busy(&self, i: u64) -> bool {
        self.slots[i as usize] & BUSY != 0
    }

    /// Mark block `i` in flight.
    pub fn set_busy(&mut self, i: u64) {
        self.slots[i as usize] |= BUSY;
    }

    /// Mark block `i` idle again.
    pub fn clear_busy(&mut self, i: u64) {
        self.slots[i as usize] &= !BUSY;
    }

    /// The generation last written to block `i` (0: none).
    pub fn generation(&self, i: u64) -> u32 {
        self.slots[i as usize] & !BUSY
    }

    /// Record that block `i` now holds generation `g`.
    pub fn set_generation(&mut self, i: u64, g: u32) {
        let busy = self.slots[i as usize] & BUSY;
        self.slots[i as usize] = busy | (g & !BUSY);
    }

    /// A fresh generation number (never 0).
    pub fn next_generation(&mut self) -> u32 {
        let g = self.next;
        self.next = (self.next + 1) & !BUSY;
        if self.next == 0 {
            self.next = 1;
        }
        g
    }

    /// Blocks written in this run, in order.
    pub fn written(&self) -> impl Iterator<Item = u64> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| **s & !BUSY != 0)
            .map(|(i, _)| i as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_describe_themselves() {
        let mut b = vec![0u8; 4096];
        let mut s = Vec::new();
        assert_eq!(inspect(&b, &mut s), Found::Zeros);
        fill(&mut b, 8192, 7);
        assert_eq!(
            inspect(&b, &mut s),
            Found::Block {
                offset: 8192,
                generation: 7
            }
        );
        let mut other = vec![0u8; 4096];
        fill(&mut other, 8192, 8);
        assert_ne!(b, other, "generations differ in the body too");
        b[100] ^= 1;
        assert_eq!(
            inspect(&b, &mut s),
            Found::Corrupt {
                offset: 8192,
                generation: 7
            }
        );
        b[0] ^= 1;
        assert_eq!(inspect(&b, &mut s), Found::Foreign);
    }

    #[test]
    fn generations_and_busy_bits() {
        let mut t = GenTable::new(4, u32::MAX);
        let g = t.next_generation();
        assert!(g != 0 && g & BUSY == 0);
        t.set_busy(2);
        t.set_generation(2, g);
        assert!(t.busy(2));
        assert_eq!(t.generation(2), g);
        t.clear_busy(2);
        assert!(!t.busy(2));
        assert_eq!(t.written().collect::<Vec<_>>(), vec![2]);
        for _ in 0..10 {
            assert_ne!(t.next_generation(), 0);
        }
    }
}
