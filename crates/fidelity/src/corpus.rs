//! The measurement corpus: one TOML file per preset (`validation/*.toml`),
//! every figure independent reviewers published for the preset's drive,
//! with the protocol that produced it as simulator input, and the shapes
//! (qualitative statements as checks, [`crate::shape`]) of the procedures
//! that covered it, some shared with other drives through procedure files
//! (`validation/procedures/*.toml`). The format is described in
//! `docs/validation.md`.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::ValidateError;
use crate::format::check_job;
pub use crate::format::{
    Curve, DriveChange, Figure, MAX_JOB_NS, Metric, Protocol, Reading, Source, SourceKind, State,
    Step,
};
use crate::shape::Shape;

/// The corpus shipped with vssd (`validation/` in the repository).
pub const BUILT_IN: &[(&str, &str)] = &[
    (
        "intel-x25m-g1",
        include_str!("../../../validation/intel-x25m-g1.toml"),
    ),
    (
        "intel-x25m-g2",
        include_str!("../../../validation/intel-x25m-g2.toml"),
    ),
    (
        "samsung-pb22j",
        include_str!("../../../validation/samsung-pb22j.toml"),
    ),
    (
        "ocz-core-v2",
        include_str!("../../../validation/ocz-core-v2.toml"),
    ),
    (
        "solidata-k5-64",
        include_str!("../../../validation/solidata-k5-64.toml"),
    ),
    (
        "mtron-mobi-3500",
        include_str!("../../../validation/mtron-mobi-3500.toml"),
    ),
    (
        "crucial-m4-128",
        include_str!("../../../validation/crucial-m4-128.toml"),
    ),
    (
        "intel-320-120",
        include_str!("../../../validation/intel-320-120.toml"),
    ),
    (
        "intel-510-120",
        include_str!("../../../validation/intel-510-120.toml"),
    ),
    (
        "ocz-vertex3-120",
        include_str!("../../../validation/ocz-vertex3-120.toml"),
    ),
    (
        "nvme-tlc-slc-cache",
        include_str!("../../../validation/nvme-tlc-slc-cache.toml"),
    ),
    (
        "samsung-870qvo-1tb",
        include_str!("../../../validation/samsung-870qvo-1tb.toml"),
    ),
    (
        "wd-blue-1tb-sata",
        include_str!("../../../validation/wd-blue-1tb-sata.toml"),
    ),
    (
        "wd-sn580-1tb",
        include_str!("../../../validation/wd-sn580-1tb.toml"),
    ),
    (
        "samsung-980pro-1tb",
        include_str!("../../../validation/samsung-980pro-1tb.toml"),
    ),
];

/// One preset's corpus file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorpusFile {
    /// Where it was read from (`validation/PRESET.toml`, or a `--corpus`
    /// directory's file): errors about its protocols name it.
    #[serde(skip)]
    pub origin: String,
    /// The vssd preset the figures judge.
    pub preset: String,
    /// The real drive, as reviewed.
    pub drive: String,
    /// What was and was not published for it.
    pub coverage: String,
    /// Sources the preset's parameters were fitted to besides spec sheets
    /// (their figures are training figures, not held out).
    #[serde(default)]
    pub fitted_to: Vec<String>,
    /// Procedure files whose sources, protocols, shapes and figures join
    /// this file's (`validation/procedures/NAME.toml`).
    #[serde(default)]
    pub procedures: Vec<String>,
    /// Where the figures come from.
    #[serde(default)]
    pub source: Vec<Source>,
    /// How they were measured.
    #[serde(default)]
    pub protocol: Vec<Protocol>,
    /// Single published figures.
    #[serde(default)]
    pub figure: Vec<Figure>,
    /// Published curves (read off charts).
    #[serde(default)]
    pub curve: Vec<Curve>,
    /// Qualitative statements and their checks.
    #[serde(default)]
    pub shape: Vec<Shape>,
}

impl CorpusFile {
    /// Parse and check a corpus file: references resolve, names are
    /// unique, units fit their metrics, the numbers are positive.
    pub fn parse(text: &str, origin: &str) -> Result<CorpusFile, ValidateError> {
        let mut c: CorpusFile = toml::from_str(text).map_err(|e| ValidateError::Corpus {
            origin: origin.into(),
            msg: e.to_string(),
        })?;
        c.origin = origin.into();
        c.check(origin)?;
        Ok(c)
    }

    pub(crate) fn check(&self, origin: &str) -> Result<(), ValidateError> {
        let err = |msg: String| ValidateError::Corpus {
            origin: origin.into(),
            msg,
        };
        let mut ids = BTreeSet::new();
        for s in &self.source {
            if !ids.insert(("source", s.id.as_str())) {
                return Err(err(format!("source {:?} is defined twice", s.id)));
            }
        }
        for f in &self.fitted_to {
            if !ids.contains(&("source", f.as_str())) {
                return Err(err(format!("fitted_to names unknown source {f:?}")));
            }
        }
        for p in &self.protocol {
            if !ids.insert(("protocol", p.id.as_str())) {
                return Err(err(format!("protocol {:?} is defined twice", p.id)));
            }
            if !ids.contains(&("source", p.source.as_str())) {
                return Err(err(format!(
                    "protocol {:?} names unknown source {:?}",
                    p.id, p.source
                )));
            }
            if let Some(d) = &p.drive {
                if p.other_drive.is_some() {
                    return Err(err(format!(
                        "protocol {:?}: drive (another capacity of this drive) and other_drive (another drive) exclude each other",
                        p.id
                    )));
                }
                if d.set.is_empty() || d.why.trim().is_empty() {
                    return Err(err(format!(
                        "protocol {:?}: drive needs `why` and at least one field in `set`",
                        p.id
                    )));
                }
                let base = vssd_profile::Profile::load(&self.preset)
                    .map_err(|e| err(format!("protocol {:?}: {e}", p.id)))?;
                d.apply(&base)
                    .map_err(|e| err(format!("protocol {:?}: drive: {e}", p.id)))?;
            }
            let known: BTreeSet<&str> = p.reading.iter().map(|r| r.name.as_str()).collect();
            if known.len() != p.reading.len() {
                return Err(err(format!(
                    "protocol {:?}: a reading is named twice",
                    p.id
                )));
            }
            let all: Vec<Option<&str>> = if p.reading.is_empty() {
                vec![None]
            } else {
                p.reading.iter().map(|r| Some(r.name.as_str())).collect()
            };
            for r in &all {
                let mut names = BTreeSet::new();
                for s in p.steps(*r) {
                    if let Some(n) = s.name()
                        && !names.insert(n)
                    {
                        return Err(err(format!(
                            "protocol {:?}: step {n:?} is named twice{}",
                            p.id,
                            r.map(|r| format!(" in reading {r:?}")).unwrap_or_default()
                        )));
                    }
                }
            }
            for s in &p.step {
                if let Some(r) = s.readings().iter().find(|r| !known.contains(r.as_str())) {
                    return Err(err(format!(
                        "protocol {:?}: a step belongs to reading {r:?}, which the protocol does not name",
                        p.id
                    )));
                }
                if let Step::Fio { name, job, .. } = s {
                    check_job(
                        job,
                        &format!(
                            "protocol {} step {}",
                            p.id,
                            name.as_deref().unwrap_or("(unnamed)")
                        ),
                    )
                    .map_err(&err)?;
                }
                if let Step::Idle { seconds, .. } = s
                    && !(seconds.is_finite() && *seconds >= 0.0 && *seconds <= 30.0 * 86400.0)
                {
                    return Err(err(format!(
                        "protocol {:?}: idle seconds {seconds} must be 0..=2592000",
                        p.id
                    )));
                }
            }
        }
        let step_of = |proto: &str, step: &str| -> Result<&Step, ValidateError> {
            let p = self
                .protocol
                .iter()
                .find(|p| p.id == proto)
                .ok_or_else(|| err(format!("unknown protocol {proto:?}")))?;
            p.steps(None)
                .find(|s| s.name() == Some(step))
                .ok_or_else(|| err(format!("protocol {proto:?} has no step named {step:?}")))
        };
        for f in &self.figure {
            if !ids.insert(("figure", f.id.as_str())) {
                return Err(err(format!("figure {:?} is defined twice", f.id)));
            }
            let s = step_of(&f.protocol, &f.step)
                .map_err(|e| err(format!("figure {:?}: {e}", f.id)))?;
            if !matches!(s, Step::Fio { .. }) {
                return Err(err(format!(
                    "figure {:?}: step {:?} is not a fio step",
                    f.id, f.step
                )));
            }
            if f.metric.factor(&f.unit).is_none() {
                return Err(err(format!(
                    "figure {:?}: unit {:?} does not measure {} ({})",
                    f.id,
                    f.unit,
                    f.metric.name(),
                    f.metric.unit()
                )));
            }
            if !(f.published.is_finite() && f.published > 0.0) {
                return Err(err(format!(
                    "figure {:?}: published value {} must be a positive number",
                    f.id, f.published
                )));
            }
        }
        for sh in &self.shape {
            if !ids.insert(("shape", sh.id.as_str())) {
                return Err(err(format!("shape {:?} is defined twice", sh.id)));
            }
            let p = self.protocol(&sh.protocol).ok_or_else(|| {
                err(format!(
                    "shape {:?}: unknown protocol {:?}",
                    sh.id, sh.protocol
                ))
            })?;
            sh.check_against(p)
                .map_err(|e| err(format!("shape {:?}: {e}", sh.id)))?;
        }
        for c in &self.curve {
            if !ids.insert(("curve", c.id.as_str())) {
                return Err(err(format!("curve {:?} is defined twice", c.id)));
            }
            step_of(&c.protocol, &c.step).map_err(|e| err(format!("curve {:?}: {e}", c.id)))?;
            if !matches!(c.x.as_str(), "position_pct" | "seconds" | "gb_written") {
                return Err(err(format!(
                    "curve {:?}: x must be position_pct, seconds or gb_written, not {:?}",
                    c.id, c.x
                )));
            }
        }
        Ok(())
    }

    /// The protocol named `id`.
    pub fn protocol(&self, id: &str) -> Option<&Protocol> {
        self.protocol.iter().find(|p| p.id == id)
    }

    /// The source of a protocol.
    pub fn source_of(&self, protocol: &str) -> Option<&Source> {
        let p = self.protocol.iter().find(|p| p.id == protocol)?;
        self.source.iter().find(|s| s.id == p.source)
    }

    /// Whether the preset was fitted to this source (spec sheets always:
    /// the presets are calibrated on their spec figures).
    pub fn trained_on(&self, s: &Source) -> bool {
        s.kind == SourceKind::SpecSheet || self.fitted_to.contains(&s.id)
    }
}

pub use crate::load::{load, read_toml_file, toml_files};
