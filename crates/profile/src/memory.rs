//! How much memory the model of a profile needs, checked before it is
//! built: a profile whose every value is in range can still describe a
//! drive whose mapping tables do not fit (2^32 units of 512 bytes need
//! more than 32 GiB), and building it would abort the process on a failed
//! allocation instead of saying so.

use super::{Profile, ProfileError};

/// The model's memory for `p`, bytes, as `Ssd::memory_bytes` counts it
/// once built (mapping tables, live bitmap, per-block and per-die state,
/// GC scratch), within a few per cent.
pub fn model_bytes(p: &Profile) -> u64 {
    let g = &p.geometry;
    let dies = u64::from(g.channels) * u64::from(g.dies_per_channel);
    let blocks = dies * u64::from(g.blocks_per_plane);
    let mu = g.mapping_unit.0.max(1);
    let units_per_block =
        u64::from(g.planes_per_die) * u64::from(g.pages_per_block) * g.page_size.0 / mu;
    // Data reduction packs up to max_ratio units into a unit of flash: the
    // reverse map has that many slots per unit.
    let ratio = if p.reduction.enabled {
        u64::from(p.reduction.max_ratio.max(1))
    } else {
        1
    };
    let physical = blocks.saturating_mul(units_per_block).saturating_mul(ratio);
    let logical = g.exported_capacity.0 / mu;
    // The packed tables store x + 1 in the fewest bits that hold it.
    let bits = u64::from(64 - (physical.max(logical) + 1).leading_zeros());
    let tables = (logical + physical).saturating_mul(bits) / 8 + physical / 8;
    let per_block = blocks * 29;
    let buckets = dies * (units_per_block + 1) * 4;
    let gc_scratch =
        units_per_block * 8 + u64::from(g.planes_per_die) * u64::from(g.pages_per_block) * 16;
    let reduction = if p.reduction.enabled {
        logical + blocks * 4
    } else {
        0
    };
    let deferred = if p.trim.deferred_release {
        logical / 8
    } else {
        0
    };
    tables + per_block + buckets + gc_scratch + reduction + deferred
}

/// Memory this machine has available now (`MemAvailable` in
/// /proc/meminfo), bytes; `None` where it cannot be read.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

impl Profile {
    /// Refuse, with how much memory the model would need, a profile whose
    /// model does not fit in the memory this machine has available. Call
    /// before building a model from a user's profile.
    pub fn check_memory(&self) -> Result<(), ProfileError> {
        self.check_memory_against(available_bytes())
    }

    fn check_memory_against(&self, have: Option<u64>) -> Result<(), ProfileError> {
        let need = model_bytes(self);
        match have {
            Some(have) if need > have => Err(ProfileError::TooBig {
                profile: self.name.clone(),
                need,
                have,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_is_the_order_of_the_built_models() {
        // A 1 TiB drive at 4 KiB units is about 7.7 bytes per unit
        // (docs/performance.md); a preset at its own size a few hundred MB.
        let p = Profile::load_with_capacity("sata-mlc-2011", Some(1 << 40)).unwrap();
        let per_unit = model_bytes(&p) as f64 / ((1u64 << 40) / 4096) as f64;
        assert!((6.0..9.0).contains(&per_unit), "{per_unit}");
        // Every value in range, tables of 2^32 units of 512 bytes: tens of GB.
        let mut big = Profile::load("sata-mlc-2011").unwrap();
        big.geometry.mapping_unit.0 = 512;
        big.geometry.page_size.0 = 512;
        big.geometry.blocks_per_plane = 65_000;
        big.geometry.pages_per_block = 16_384;
        big.geometry.exported_capacity.0 = 1 << 40;
        assert!(model_bytes(&big) > 8 << 30);
    }

    #[test]
    fn a_model_too_big_for_the_machine_is_a_clear_error() {
        let p = Profile::load("intel-x25m-g2").unwrap();
        let e = p
            .check_memory_against(Some(64 << 20))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("its model would need about") && e.contains("64MiB"),
            "{e}"
        );
        assert!(p.check_memory_against(Some(64 << 30)).is_ok());
        assert!(p.check_memory_against(None).is_ok());
    }
}
