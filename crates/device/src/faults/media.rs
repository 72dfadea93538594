//! The NAND's wear models behind `vssd ctl fault add media-wear`: how
//! likely a read is to be uncorrectable, and how likely a block is to fail
//! its erase, as the NAND wears and its data ages. Pure functions of the
//! profile and of a block's erase count and data age; the device draws
//! from them with the device's seed (`lib.rs`).
//!
//! **Raw bit-error rate.** Hetzler's measured error-rate surface of 3x nm
//! MLC NAND (S. Hetzler, "The error rate surface for MLC NAND flash",
//! smorgastor.drhetzler.com, 2012) has the form of a power law in the data
//! age over an offset that grows with the P/E cycles, and rises "about
//! 20,000×" from 1 cycle at age 0 to 3,000 cycles (the rated endurance) and
//! one year; the same page gives the design point: the NAND is specified
//! for one year of retention at its rated cycles with an uncorrectable bit
//! error rate (UBER) of 10⁻¹⁵ (a sector failure rate of 4.1 × 10⁻¹² for 512
//! bytes), which its BCH-15 code over 4,291 bits meets up to a raw rate of
//! 3.4 × 10⁻⁴. Schroeder et al. (FAST 2016, "Flash Reliability in
//! Production: The Expected and the Unexpected") found in the field that
//! the raw rate grows with wear "at a much slower rate ... than the
//! exponential rate commonly assumed": linearly here. So, for a block with
//! `c` erases holding data `a` old, with `C` the rated cycles:
//!
//! ```text
//! RBER(c, a) = r0 · (1 + (W − 1) · c / C) · (1 + R · (a / 1 year)^k)
//! r0 = RBER_spec / 20,000,   W · (1 + R) = 20,000
//! ```
//!
//! where `RBER_spec` is the raw rate at which the preset's ECC (`[reliability]
//! ecc_bits`, `ecc_codeword`) just meets UBER 10⁻¹⁵, so every preset meets
//! its NAND's specification at its rated cycles after a year, and the
//! surface has Hetzler's 20,000× span. The split between wear and age
//! (`W` = 20: the rated cycles alone raise the rate 20×, a year of
//! retention the rest) and the age exponent `k` = 0.5 are assumptions: the
//! page gives the shape, not these numbers. Retention errors being the
//! larger part follows Cai et al. (DATE 2012, "Error Patterns in MLC NAND
//! Flash Memory"): retention and program-interference errors dominate.
//! Presets without rated cycles use their cell type's (SLC 100,000: the
//! Samsung NAND reliability FAQ; MLC 5,000: the K9G8G08U0M data sheet;
//! TLC 1,000, an assumption).
//!
//! **Uncorrectable codewords.** With `n` bits per codeword (data plus
//! BCH parity, `t · (⌈log₂ data bits⌉ + 1)` bits) and `t` correctable,
//! bit errors are Poisson with mean `n · RBER` (the binomial's limit for
//! small rates); the codeword fails when more than `t` occur. A mapping
//! unit fails when any of its codewords does.
//!
//! **Grown bad blocks.** A NAND data sheet bounds the blocks that go bad
//! over the rated endurance, factory ones included: Micron's SLC parts
//! keep at least 4,016 of 4,096 blocks (2 %), its MLC parts 3,936 of 4,096
//! (3.9 %); Samsung's NAND FAQ allows 2 % for SLC. vssd takes that whole
//! margin as the expected share of blocks failing by the rated cycles (an
//! upper bound: the factory ones are in it), with a failure rate per erase
//! rising as `(c / C)²` (Weibull-like wear-out; the exponent is an
//! assumption): `h(c) = f · 3 / C · (c / C)²` per erase, so that
//! `∫₀^C h = f`.

use vssd_profile::{CellType, Profile};

/// One year, ns.
const YEAR_NS: f64 = 365.0 * 86_400e9;
/// UBER a NAND is specified for at its rated cycles and one year of data
/// retention (Hetzler, as above).
pub const SPEC_UBER: f64 = 1e-15;
/// RBER growth from (1 cycle, age 0) to (rated cycles, one year) (Hetzler).
pub const SURFACE_SPAN: f64 = 20_000.0;
/// Growth with the rated cycles alone (assumption, see the module docs).
pub const WEAR_SPAN: f64 = 20.0;
/// Exponent of the data age (assumption).
pub const AGE_EXPONENT: f64 = 0.5;
/// Exponent of the bad-block hazard in the erase count (assumption).
pub const HAZARD_EXPONENT: f64 = 2.0;

/// The wear models of one drive.
#[derive(Debug, Clone)]
pub struct MediaModel {
    /// Correctable bits per codeword.
    pub ecc_bits: u32,
    /// Data bytes per codeword.
    pub codeword_bytes: u64,
    /// Bits per codeword, parity included.
    pub codeword_bits: f64,
    /// Rated P/E cycles (the preset's, or its cell type's).
    pub rated_cycles: f64,
    /// The raw bit-error rate at which the ECC just meets [`SPEC_UBER`].
    pub rber_spec: f64,
    /// RBER of a fresh block with fresh data.
    pub rber0: f64,
    /// Share of blocks failing by the rated cycles.
    pub bad_block_share: f64,
}

/// `P(X > t)` for `X` Poisson with mean `lambda`.
pub fn poisson_tail(lambda: f64, t: u32) -> f64 {
    if lambda <= 0.0 {
        return 0.0;
    }
    if lambda > f64::from(t) + 60.0 * (f64::from(t) + 1.0).sqrt() + 60.0 {
        return 1.0;
    }
    // ln of the first term, e^−λ λ^(t+1) / (t+1)!, then the series.
    let mut ln_term = -lambda;
    for i in 1..=t + 1 {
        ln_term += lambda.ln() - f64::from(i).ln();
    }
    let mut term = ln_term.exp();
    let mut sum = 0.0;
    let mut i = f64::from(t) + 1.0;
    for _ in 0..100_000 {
        sum += term;
        i += 1.0;
        term *= lambda / i;
        if term < sum * 1e-17 || term == 0.0 {
            break;
        }
    }
    sum.min(1.0)
}

impl MediaModel {
    /// The models of a drive of `profile`.
    pub fn of(profile: &Profile) -> MediaModel {
        let r = &profile.reliability;
        let (t, bytes) = r.ecc();
        let data_bits = bytes as f64 * 8.0;
        let parity = f64::from(t) * (data_bits.log2().ceil() + 1.0);
        let codeword_bits = data_bits + parity;
        let rated = match profile.wear.rated_pe_cycles {
            0 => match r.cell {
                CellType::Slc => 100_000.0,
                CellType::Mlc => 5_000.0,
                CellType::Tlc => 1_000.0,
            },
            c => f64::from(c),
        };
        let target = SPEC_UBER * data_bits;
        // The codeword failure rate rises with the RBER: bisect in log space.
        let (mut lo, mut hi) = (1e-15f64, 0.5f64);
        for _ in 0..200 {
            let mid = (lo * hi).sqrt();
            if poisson_tail(codeword_bits * mid, t) < target {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let bad_block_share = match r.cell {
            CellType::Slc => 80.0 / 4096.0,
            CellType::Mlc | CellType::Tlc => 160.0 / 4096.0,
        };
        MediaModel {
            ecc_bits: t,
            codeword_bytes: bytes,
            codeword_bits,
            rated_cycles: rated,
            rber_spec: lo,
            rber0: lo / SURFACE_SPAN,
            bad_block_share,
        }
    }

    /// The raw bit-error rate of a block with `erases` holding data
    /// `age_ns` old.
    pub fn rber(&self, erases: u32, age_ns: u64) -> f64 {
        let wear = 1.0 + (WEAR_SPAN - 1.0) * f64::from(erases) / self.rated_cycles;
        let age = (age_ns as f64 / YEAR_NS).powf(AGE_EXPONENT);
        let retention = 1.0 + (SURFACE_SPAN / WEAR_SPAN - 1.0) * age;
        self.rber0 * wear * retention
    }

    /// The probability that a codeword is uncorrectable at raw rate `rber`.
    pub fn codeword_failure(&self, rber: f64) -> f64 {
        poisson_tail(self.codeword_bits * rber.min(0.5), self.ecc_bits)
    }

    /// The probability that a read of a mapping unit of `unit_bytes` fails:
    /// any of its codewords uncorrectable, at `acceleration` times the raw
    /// rate.
    pub fn unit_failure(
        &self,
        erases: u32,
        age_ns: u64,
        acceleration: f64,
        unit_bytes: u64,
    ) -> f64 {
        let p = self.codeword_failure(self.rber(erases, age_ns) * acceleration);
        let n = unit_bytes.div_ceil(self.codeword_bytes).max(1) as f64;
        -(n * (-p).ln_1p()).exp_m1()
    }

    /// The probability that one erase of a block with `erases` erases
    /// (before it) fails, `acceleration` times the model's rate (at most 1).
    pub fn erase_failure(&self, erases: f64, acceleration: f64) -> f64 {
        let x = erases / self.rated_cycles;
        (self.bad_block_share * (HAZARD_EXPONENT + 1.0) / self.rated_cycles
            * x.powf(HAZARD_EXPONENT)
            * acceleration)
            .min(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(preset: &str) -> MediaModel {
        MediaModel::of(&Profile::load(preset).unwrap())
    }

    #[test]
    fn the_ecc_limit_matches_hetzlers_figure() {
        // BCH-15 over a 512-byte sector: Hetzler gives 3.4e-4 as the raw
        // rate at which it meets UBER 1e-15, assuming random errors.
        let mut p = Profile::load("sata-mlc-2011").unwrap();
        p.reliability.ecc_bits = 15;
        p.reliability.ecc_codeword = vssd_profile::Bytes(512);
        let m = MediaModel::of(&p);
        assert_eq!(m.codeword_bits, 4291.0, "4,096 data + 195 parity bits");
        assert!(
            (m.rber_spec / 3.4e-4 - 1.0).abs() < 0.05,
            "{:e}",
            m.rber_spec
        );
        let sector = m.codeword_failure(m.rber_spec);
        assert!((sector / 4.1e-12 - 1.0).abs() < 0.01, "{sector:e}");
    }

    #[test]
    fn errors_rise_with_wear_and_age_and_meet_the_spec_at_a_year() {
        for preset in [
            "sata-mlc-2011",
            "sata-slc-2009",
            "nvme-tlc",
            "intel-320-120",
        ] {
            let m = model(preset);
            let rated = m.rated_cycles as u32;
            let fresh = m.rber(0, 0);
            let worn = m.rber(rated, 0);
            let year = m.rber(rated, YEAR_NS as u64);
            assert!(fresh < worn && worn < year, "{preset}");
            assert!((year / m.rber_spec - 1.0).abs() < 1e-9, "{preset}");
            assert!((year / fresh / SURFACE_SPAN - 1.0).abs() < 1e-9);
            // A fresh drive practically never fails a read; at its spec
            // point a 4 KiB unit fails at the specified UBER.
            assert!(m.unit_failure(0, 0, 1.0, 4096) < 1e-18, "{preset}");
            let at_spec = m.unit_failure(rated, YEAR_NS as u64, 1.0, 4096);
            let want = SPEC_UBER * 4096.0 * 8.0;
            assert!((at_spec / want - 1.0).abs() < 0.05, "{preset}: {at_spec:e}");
            // Acceleration makes errors visible.
            assert!(m.unit_failure(rated, 0, 1e8, 4096) > 0.01, "{preset}");
        }
    }

    #[test]
    fn the_bad_block_hazard_adds_up_to_the_data_sheet_margin() {
        let m = model("sata-mlc-2011");
        let c = m.rated_cycles as u32;
        let total: f64 = (0..c).map(|e| m.erase_failure(f64::from(e), 1.0)).sum();
        assert!((total / m.bad_block_share - 1.0).abs() < 0.01, "{total}");
        assert!(m.erase_failure(0.0, 1.0) == 0.0);
        assert!(m.erase_failure(1e9, 1e9) <= 1.0);
    }

    #[test]
    fn the_poisson_tail_is_right_where_it_can_be_checked() {
        // P(X > 0) = 1 − e^−λ; P(X > 1) = 1 − e^−λ (1 + λ).
        for l in [1e-6f64, 0.01, 0.5, 3.0] {
            let p0 = -(-l).exp_m1();
            assert!((poisson_tail(l, 0) / p0 - 1.0).abs() < 1e-9, "{l}");
            let p1 = 1.0 - (-l).exp() * (1.0 + l);
            if p1 > 1e-9 {
                assert!((poisson_tail(l, 1) / p1 - 1.0).abs() < 1e-6, "{l}");
            }
        }
        assert_eq!(poisson_tail(0.0, 3), 0.0);
        assert_eq!(poisson_tail(1e6, 3), 1.0);
    }
}
