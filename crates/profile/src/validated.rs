//! How faithful each named preset is, as the last full-size `vssd
//! validate --all` found it (`validation/summary.toml`, written by
//! `vssd validate --all --write-summary`): `vssd profiles` and `vssd
//! profiles show` print it beside each preset, so a user sees how good a
//! preset is where they pick it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One preset's line of the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Validated {
    /// Published figures in its corpus (held out, training and other drives').
    pub figures: usize,
    /// Of them, held out (judged by a fit that never saw their source).
    pub held_out: usize,
    /// Median |error| of the held-out figures (none without any).
    #[serde(default)]
    pub median_abs_error: Option<f64>,
    /// Share of held-out figures within ±25 %.
    #[serde(default)]
    pub within_25pct: Option<f64>,
    /// Shapes (qualitative statements) judged on this drive.
    #[serde(default)]
    pub shapes: usize,
    /// Of them, held.
    #[serde(default)]
    pub shapes_held: usize,
}

/// The summary file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    /// How it was made.
    pub made_by: String,
    /// Per preset.
    #[serde(default)]
    pub preset: BTreeMap<String, Validated>,
}

/// The summary shipped with vssd.
pub const BUILT_IN: &str = include_str!("../../../validation/summary.toml");

/// The built-in summary (empty if it does not parse: a test keeps it parsing).
pub fn summary() -> Summary {
    toml::from_str(BUILT_IN).unwrap_or_default()
}

/// What to tell a user about `preset`'s fidelity, in one line.
pub fn describe(preset: &str) -> String {
    match summary().preset.get(preset) {
        Some(v) if v.held_out > 0 => format!(
            "validated: {} published figures, {} held out: median |error| {:.0} %, {:.0} % within ±25 %; {} of {} shapes held",
            v.figures,
            v.held_out,
            v.median_abs_error.unwrap_or(f64::NAN) * 100.0,
            v.within_25pct.unwrap_or(f64::NAN) * 100.0,
            v.shapes_held,
            v.shapes
        ),
        Some(v) if v.figures > 0 => format!(
            "validated on training figures only: {} published figures, none held out; {} of {} shapes held",
            v.figures, v.shapes_held, v.shapes
        ),
        Some(v) if v.shapes > 0 => format!(
            "unvalidated: no published measurement (its procedure's screenshots hold none); {} of {} shapes held",
            v.shapes_held, v.shapes
        ),
        Some(_) => "unvalidated: no published measurement".into(),
        None => "unvalidated: a class preset, not one drive (no corpus)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_summary_parses_and_covers_every_named_preset() {
        let s: Summary = toml::from_str(BUILT_IN).expect("validation/summary.toml parses");
        assert!(s.preset.contains_key("intel-x25m-g1"), "{s:?}");
        assert!(describe("intel-x25m-g1").starts_with("validated"));
        assert!(describe("instant").contains("class preset"));
    }
}
