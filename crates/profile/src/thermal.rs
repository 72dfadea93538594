//! `[thermal]`: the drive's temperature and its thermal throttling (see
//! "Thermal throttling" in docs/model.md). Off by default (`tau_s = 0`):
//! a profile without the section has no temperature and never throttles.

use serde::{Deserialize, Serialize};

use super::{Profile, ProfileError, invalid};

/// One throttle step: at or above `at_c` the drive caps its host
/// transfers at these rates (a vendor's "Light" / "Heavy" bands).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ThrottleLevel {
    /// Temperature the step starts at, °C.
    pub at_c: f64,
    /// Host reads at most this fast in the step, MB/s (0: no cap).
    pub read_mb_s: f64,
    /// Host writes at most this fast in the step, MB/s (0: no cap).
    pub write_mb_s: f64,
}

/// `[thermal]`: a lumped thermal model. The drive's temperature relaxes
/// towards `ambient_c + c_per_w × power` with time constant `tau_s`, where
/// the power is `idle_w` plus the energy of the NAND programs, NAND reads
/// and host-link bytes of each interval over its length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thermal {
    /// Air around the drive, °C.
    pub ambient_c: f64,
    /// Power with nothing to do (controller and NAND awake), W.
    pub idle_w: f64,
    /// Thermal resistance from the sensor to the air, °C per W.
    pub c_per_w: f64,
    /// Thermal time constant, s (0: no thermal model). `--capacity`
    /// scales it with the drive, as protocols' durations are scaled.
    pub tau_s: f64,
    /// Energy per NAND byte programmed (host data, GC and folding copies,
    /// map write-backs), nJ.
    pub program_nj_per_byte: f64,
    /// Energy per NAND byte read, nJ.
    pub read_nj_per_byte: f64,
    /// Energy per byte over the host link (controller and PHY), nJ.
    pub link_nj_per_byte: f64,
    /// A step is left once the temperature is this far below its `at_c`.
    pub hysteresis_c: f64,
    /// NVMe Warning Composite Temperature Threshold (WCTEMP), °C (0: none;
    /// reported in the health log's warning time).
    pub warning_c: f64,
    /// NVMe Critical Composite Temperature Threshold (CCTEMP), °C (0: none).
    pub critical_c: f64,
    /// The throttle steps, in rising temperature (`[[thermal.level]]`).
    #[serde(rename = "level", skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<ThrottleLevel>,
}

impl Default for Thermal {
    fn default() -> Self {
        Thermal {
            ambient_c: 25.0,
            idle_w: 0.0,
            c_per_w: 0.0,
            tau_s: 0.0,
            program_nj_per_byte: 0.0,
            read_nj_per_byte: 0.0,
            link_nj_per_byte: 0.0,
            hysteresis_c: 2.0,
            warning_c: 0.0,
            critical_c: 0.0,
            levels: Vec::new(),
        }
    }
}

impl Thermal {
    /// Whether the drive has a thermal model.
    pub fn enabled(&self) -> bool {
        self.tau_s > 0.0
    }
}

fn range(origin: &str, field: &str, v: f64, lo: f64, hi: f64) -> Result<(), ProfileError> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err(invalid(origin, field, v, &format!("{lo} to {hi}")))
    }
}

/// Check `[thermal]`.
pub(super) fn validate(p: &Profile, origin: &str) -> Result<(), ProfileError> {
    let t = &p.thermal;
    if !t.enabled() {
        if *t != Thermal::default() {
            return Err(invalid(
                origin,
                "thermal.tau_s",
                t.tau_s,
                "0.001 to 100000 s when [thermal] sets anything",
            ));
        }
        return Ok(());
    }
    range(origin, "thermal.tau_s", t.tau_s, 0.001, 100_000.0)?;
    range(origin, "thermal.ambient_c", t.ambient_c, -40.0, 100.0)?;
    range(origin, "thermal.idle_w", t.idle_w, 0.0, 100.0)?;
    range(origin, "thermal.c_per_w", t.c_per_w, 0.0, 1000.0)?;
    range(
        origin,
        "thermal.program_nj_per_byte",
        t.program_nj_per_byte,
        0.0,
        1000.0,
    )?;
    range(
        origin,
        "thermal.read_nj_per_byte",
        t.read_nj_per_byte,
        0.0,
        1000.0,
    )?;
    range(
        origin,
        "thermal.link_nj_per_byte",
        t.link_nj_per_byte,
        0.0,
        1000.0,
    )?;
    range(origin, "thermal.hysteresis_c", t.hysteresis_c, 0.0, 50.0)?;
    range(origin, "thermal.warning_c", t.warning_c, 0.0, 200.0)?;
    range(origin, "thermal.critical_c", t.critical_c, 0.0, 200.0)?;
    if t.levels.len() > 4 {
        return Err(invalid(
            origin,
            "thermal.level",
            t.levels.len(),
            "at most 4 throttle steps",
        ));
    }
    let mut last = f64::NEG_INFINITY;
    for (i, l) in t.levels.iter().enumerate() {
        let f = |name: &str| format!("thermal.level[{i}].{name}");
        range(origin, &f("at_c"), l.at_c, 0.0, 200.0)?;
        range(origin, &f("read_mb_s"), l.read_mb_s, 0.0, 100_000.0)?;
        range(origin, &f("write_mb_s"), l.write_mb_s, 0.0, 100_000.0)?;
        if l.at_c <= last {
            return Err(invalid(
                origin,
                &f("at_c"),
                l.at_c,
                "steps in rising temperature",
            ));
        }
        last = l.at_c;
    }
    Ok(())
}
