//! Fitting a preset's free parameters to its drive's published figures,
//! with leave-one-source-out validation (`vssd calibrate --fit`).
//!
//! A preset declares its free parameters, each with a physical range, in
//! `[[fit]]` ([`vssd_profile::FitParam`]); everything else in it comes
//! from a source. The fit searches those parameters to minimise the mean
//! |ln(simulated / published)| over the training figures of the preset's
//! corpus file, running each protocol in the simulator. It is run once per
//! held-out source, on every figure but that source's (a *fold*), and once
//! on every figure (the values the preset ships with). A figure's held-out
//! error comes only from the fold that never saw its source; `vssd
//! validate` reads the folds from the fit record
//! (`validation/fits/PRESET.toml`) and runs each held-out source with its
//! fold's values.
//!
//! Spec sheets and the sources a corpus file lists in `fitted_to` are
//! training figures in every fold: they were used to set the preset's
//! other parameters, so they are never held out.

//!
//! - this module: the fit records (`validation/fits/*.toml`);
//! - `search`: the search, per fold, and the held-out figures it gives;
//! - `cli`: `vssd calibrate --fit` (and `--write`, `--update-preset`,
//!   `--record`).

mod cli;
mod search;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ValidateError;
pub use cli::{run_cli, update_toml};
pub use search::{HeldOut, Settings, fit, fit_preset, held_out_figures, held_out_sources};
use vssd_profile::Profile;

/// Every fit, as recorded (`validation/fits/*.toml`).
pub const BUILT_IN: &[(&str, &str)] = &[
    (
        "intel-x25m-g1",
        include_str!("../../../../validation/fits/intel-x25m-g1.toml"),
    ),
    (
        "intel-x25m-g2",
        include_str!("../../../../validation/fits/intel-x25m-g2.toml"),
    ),
    (
        "samsung-pb22j",
        include_str!("../../../../validation/fits/samsung-pb22j.toml"),
    ),
    (
        "ocz-core-v2",
        include_str!("../../../../validation/fits/ocz-core-v2.toml"),
    ),
    (
        "crucial-m4-128",
        include_str!("../../../../validation/fits/crucial-m4-128.toml"),
    ),
    (
        "intel-320-120",
        include_str!("../../../../validation/fits/intel-320-120.toml"),
    ),
    (
        "intel-510-120",
        include_str!("../../../../validation/fits/intel-510-120.toml"),
    ),
    (
        "ocz-vertex3-120",
        include_str!("../../../../validation/fits/ocz-vertex3-120.toml"),
    ),
    (
        "nvme-tlc-slc-cache",
        include_str!("../../../../validation/fits/nvme-tlc-slc-cache.toml"),
    ),
    (
        "samsung-870qvo-1tb",
        include_str!("../../../../validation/fits/samsung-870qvo-1tb.toml"),
    ),
    (
        "wd-blue-1tb-sata",
        include_str!("../../../../validation/fits/wd-blue-1tb-sata.toml"),
    ),
    (
        "wd-sn580-1tb",
        include_str!("../../../../validation/fits/wd-sn580-1tb.toml"),
    ),
    (
        "samsung-980pro-1tb",
        include_str!("../../../../validation/fits/samsung-980pro-1tb.toml"),
    ),
];

/// The objective, in words (recorded with every fit).
pub const OBJECTIVE: &str = "mean over the training figures of |ln(simulated / published)|, capped at ln 3 (a figure off by more than a factor of three counts as that), each figure weighted 1; a training shape not held counts as a figure at the cap, one held as an exact figure";

/// The most one figure adds to the objective: ln 3. A figure no
/// parameter can bring within a factor of three (a mechanism the model
/// lacks, such as a firmware pause behind a maximum latency) then stops
/// steering the parameters the other figures do depend on.
const CAP: f64 = 1.098_612_288_668_109_8;

/// What a fit found for one set of training figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fitted {
    /// The parameters' values, in the record's `params` order.
    pub values: Vec<f64>,
    /// The objective at those values.
    pub loss: f64,
    /// The sources whose figures it was fitted to.
    pub trained_on: Vec<String>,
    /// Training figures.
    pub figures: usize,
    /// Simulator evaluations the search took.
    pub evaluations: usize,
}

/// One fold: the fit that never saw `held_out`'s figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fold {
    /// The source left out.
    pub held_out: String,
    /// The fit on the rest.
    #[serde(flatten)]
    pub fit: Fitted,
}

/// A preset's fit record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitRecord {
    /// The preset.
    pub preset: String,
    /// The capacity the protocols ran at during the search, bytes.
    pub capacity: u64,
    /// What was minimised.
    pub objective: String,
    /// The free parameters' keys, in order.
    pub params: Vec<String>,
    /// The fit on every figure: the values the preset ships with.
    pub all: Fitted,
    /// One fold per held-out source.
    #[serde(default)]
    pub fold: Vec<Fold>,
}

impl FitRecord {
    /// Parse a record.
    pub fn parse(text: &str, origin: &str) -> Result<FitRecord, ValidateError> {
        toml::from_str(text).map_err(|e| ValidateError::Corpus {
            origin: origin.into(),
            msg: e.to_string(),
        })
    }

    /// The record as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_else(|e| format!("# not written: {e}\n"))
    }

    /// `profile`'s free parameters, joined, where they are not the record's.
    fn other_params(&self, profile: &Profile) -> Option<String> {
        let keys: Vec<&str> = profile.fit.iter().map(|p| p.key.as_str()).collect();
        (keys != self.params.iter().map(String::as_str).collect::<Vec<_>>())
            .then(|| keys.join(", "))
    }

    /// Whether the record's values can be applied to `profile`: one value
    /// per free parameter in the fit on every source and in each fold,
    /// each a finite number within its parameter's range (integer fields
    /// are held rounded: half a unit beyond the range is allowed).
    pub fn check_values(&self, profile: &Profile) -> Result<(), String> {
        let fits = std::iter::once(("the fit on every source".to_string(), &self.all)).chain(
            self.fold
                .iter()
                .map(|f| (format!("the fold without {}", f.held_out), &f.fit)),
        );
        for (what, fit) in fits {
            if fit.values.len() != self.params.len() {
                return Err(format!(
                    "{what} has {} values for {} parameters ({})",
                    fit.values.len(),
                    self.params.len(),
                    self.params.join(", ")
                ));
            }
            for (k, v) in self.params.iter().zip(&fit.values) {
                if !v.is_finite() {
                    return Err(format!("{what}: {k} = {v} is not a finite number"));
                }
                if let Some(fp) = profile.fit.iter().find(|p| &p.key == k) {
                    let slack = 0.5_f64.max(1e-9 * fp.max.abs());
                    if *v < fp.min - slack || *v > fp.max + slack {
                        return Err(format!(
                            "{what}: {k} = {v} is outside its range {}..{}",
                            fp.min, fp.max
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The fold that left `source` out.
    pub fn fold_for(&self, source: &str) -> Option<&Fold> {
        self.fold.iter().find(|f| f.held_out == source)
    }

    /// Why the record does not describe `profile` any more (its free
    /// parameters or their values changed since the fit), if it does not.
    pub fn stale(&self, profile: &Profile) -> Option<String> {
        if let Some(keys) = self.other_params(profile) {
            return Some(format!(
                "the preset's free parameters are [{keys}], the fit's [{}]",
                self.params.join(", ")
            ));
        }
        for (k, want) in self.params.iter().zip(&self.all.values) {
            let have = profile.param(k)?;
            if (have - want).abs() > 1e-9 * want.abs().max(1.0) {
                return Some(format!("{k} is {have} in the preset, {want} in the fit"));
            }
        }
        None
    }

    /// `base` with the values of `fit`.
    pub fn apply(&self, base: &Profile, fit: &Fitted) -> Result<Profile, ValidateError> {
        let mut p = base.clone();
        for (k, v) in self.params.iter().zip(&fit.values) {
            p = p.with_param(k, *v)?;
        }
        Ok(p)
    }
}

/// The records of `dir` (`*.toml`), or the built-in ones, by preset.
pub fn load(dir: Option<&Path>) -> Result<BTreeMap<String, FitRecord>, ValidateError> {
    let texts: Vec<(String, String)> = match dir {
        None => BUILT_IN
            .iter()
            .map(|(name, text)| (format!("validation/fits/{name}.toml"), text.to_string()))
            .collect(),
        Some(d) => super::corpus::toml_files(d)?,
    };
    let mut out = BTreeMap::new();
    for (origin, text) in &texts {
        let r = FitRecord::parse(text, origin)?;
        out.insert(r.preset.clone(), r);
    }
    Ok(out)
}
