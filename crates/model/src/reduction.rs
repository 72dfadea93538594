//! Data reduction (`[reduction]`): per logical unit, its compressed size,
//! and per block, the slots it took when it was closed; a NAND page holds
//! up to `reduction_factor` times its units.

use super::Payload;
use super::geo::Geo;

/// Compressed sizes (empty without reduction).
#[derive(Debug, Clone)]
pub(crate) struct Reduction {
    /// Per logical unit: its compressed size in 1/256 of a unit, minus 1.
    compressed_size: Vec<u8>,
    /// Per block: the slots it took when it was closed.
    block_slots: Vec<u32>,
    /// Compressed size (1/256 of a unit, 1..=256) of the units of the
    /// write being placed.
    current_size: u32,
}

impl Reduction {
    /// Every unit incompressible, every block empty.
    pub(crate) fn new(g: &Geo) -> Reduction {
        let on = g.reduction_factor > 1;
        Reduction {
            compressed_size: if on {
                vec![255; g.logical_units as usize]
            } else {
                Vec::new()
            },
            block_slots: if on { vec![0; g.blocks()] } else { Vec::new() },
            current_size: 256,
        }
    }

    /// Whether the drive reduces data.
    #[inline(always)]
    pub(crate) fn enabled(&self) -> bool {
        !self.block_slots.is_empty()
    }

    /// The next units written hold `payload`: their compressed size, in
    /// 1/256 of a unit (1..=256), is returned and used for them.
    pub(crate) fn start_write(&mut self, g: &Geo, payload: Payload) -> u32 {
        let min = ((g.min_fraction * 256.0).ceil() as u32).clamp(1, 256);
        let c = match payload {
            Payload::Unknown => 256,
            Payload::Zeroes => 0,
            Payload::Compressible { percent } => 256 * (100 - percent.min(100) as u32) / 100,
        };
        self.current_size = c.clamp(min, 256);
        self.current_size
    }

    /// Host unit `lpn` now holds data of the write being placed.
    #[inline]
    pub(crate) fn assign(&mut self, lpn: u64) {
        self.compressed_size[lpn as usize] = (self.current_size - 1) as u8;
    }

    /// Compressed size of `lpn`, in 1/256 of a unit (1..=256).
    #[inline(always)]
    pub(crate) fn unit_size(&self, lpn: u64) -> u32 {
        self.compressed_size[lpn as usize] as u32 + 1
    }

    /// The slots block `b` took when it was closed.
    #[inline(always)]
    pub(crate) fn block_slots(&self, b: u32) -> u32 {
        self.block_slots[b as usize]
    }

    /// Block `b` is closed with `placed` units (if reducing).
    #[inline]
    pub(crate) fn close(&mut self, b: u32, placed: u32) {
        if !self.block_slots.is_empty() {
            self.block_slots[b as usize] = placed;
        }
    }

    /// Block `b` is erased (if reducing).
    #[inline]
    pub(crate) fn erase(&mut self, b: u32) {
        if !self.block_slots.is_empty() {
            self.block_slots[b as usize] = 0;
        }
    }

    /// Per block slots and per unit sizes, to save.
    pub(crate) fn tables(&self) -> (&[u32], &[u8]) {
        (&self.block_slots, &self.compressed_size)
    }

    /// Take loaded tables of the same shapes; a block can take at most
    /// `units_per_block` slots.
    pub(crate) fn restore(
        &mut self,
        block_slots: Vec<u32>,
        sizes: Vec<u8>,
        units_per_block: u32,
    ) -> Result<(), &'static str> {
        if block_slots.len() != self.block_slots.len() || sizes.len() != self.compressed_size.len()
        {
            return Err("data reduction tables of the wrong size");
        }
        if block_slots.iter().any(|&c| c > units_per_block) {
            return Err("block slot count beyond the block");
        }
        self.block_slots = block_slots;
        self.compressed_size = sizes;
        Ok(())
    }

    /// Every full block (`full(b)`) holds at most the slots it took.
    pub(crate) fn check(
        &self,
        full: impl Fn(u32) -> bool,
        valid: impl Fn(u32) -> u32,
    ) -> Result<(), String> {
        if let Some(b) = (0..self.block_slots.len() as u32)
            .find(|&b| full(b) && valid(b) > self.block_slots[b as usize])
        {
            return Err(format!("block {b}: more valid units than slots it took"));
        }
        Ok(())
    }

    /// Same sizes (a saved and loaded drive).
    #[cfg(test)]
    pub(crate) fn same_sizes(&self, other: &Reduction) -> bool {
        self.compressed_size == other.compressed_size
    }
}
