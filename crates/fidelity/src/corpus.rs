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

/// A publication.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// Short id, referenced by protocols.
    pub id: String,
    /// Publication (AnandTech, hardware.fr, ...).
    pub publication: String,
    /// Author, where known.
    #[serde(default)]
    pub author: Option<String>,
    /// Title.
    pub title: String,
    /// Address, where a copy is online (none for articles known only
    /// from their text).
    #[serde(default)]
    pub url: Option<String>,
    /// Publication date (YYYY, YYYY-MM or YYYY-MM-DD).
    #[serde(default)]
    pub date: Option<String>,
    /// Pages or sections.
    #[serde(default)]
    pub pages: Option<String>,
    /// Drive firmware, where the source says.
    #[serde(default)]
    pub firmware: Option<String>,
    /// `review`, `paper`, `white-paper`, `spec-sheet`, `forum`.
    pub kind: SourceKind,
}

/// What kind of source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// An independent review.
    Review,
    /// A paper.
    Paper,
    /// A vendor white paper.
    WhitePaper,
    /// A vendor spec sheet (the presets were calibrated on these).
    SpecSheet,
    /// A forum post or a repost of a review.
    Forum,
}

/// A measurement procedure, as steps on one drive.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Protocol {
    /// Unique within the file.
    pub id: String,
    /// The source it follows.
    pub source: String,
    /// What the source did, in words.
    pub description: String,
    /// What had to be assumed.
    #[serde(default)]
    pub assumptions: Option<String>,
    /// The source measured another capacity of the same drive (same
    /// controller, NAND and firmware, another number of dies): the preset
    /// runs this protocol with these fields changed.
    #[serde(default)]
    pub drive: Option<DriveChange>,
    /// The source measured another drive (another controller or firmware):
    /// why its figures are kept. They are judged and shown, but neither
    /// fitted to nor counted among the preset's held-out figures.
    #[serde(default)]
    pub other_drive: Option<String>,
    /// Readings of what the source left unstated; the first is the one
    /// argued for (figures, shapes and fits use it). None: one reading.
    #[serde(default)]
    pub reading: Vec<Reading>,
    /// The steps, in order, from a fresh drive.
    pub step: Vec<Step>,
}

impl Protocol {
    /// The reading figures use: the first, if there are several.
    pub fn default_reading(&self) -> Option<&str> {
        self.reading.first().map(|r| r.name.as_str())
    }

    /// Its steps under `reading` (the default when `None`).
    pub fn steps<'a>(&'a self, reading: Option<&'a str>) -> impl Iterator<Item = &'a Step> + 'a {
        let r = reading.or(self.default_reading());
        self.step.iter().filter(move |s| {
            let rs = s.readings();
            rs.is_empty() || r.is_some_and(|r| rs.iter().any(|x| x == r))
        })
    }
}

/// How the measured drive differs from the preset's (`[protocol.drive]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriveChange {
    /// What the measured drive is and where its differences come from.
    pub why: String,
    /// Profile fields by dotted path (`geometry.dies_per_channel`) and
    /// their values on the measured drive.
    pub set: std::collections::BTreeMap<String, f64>,
}

impl DriveChange {
    /// `p` as the measured drive.
    pub fn apply(&self, p: &vssd_profile::Profile) -> Result<vssd_profile::Profile, ValidateError> {
        let changes: Vec<(&str, f64)> = self.set.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        Ok(p.with_params(&changes)?)
    }
}

/// One step of a protocol.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Step {
    /// A secure erase: a fresh drive.
    SecureErase {
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
        /// The readings it belongs to (default: every reading).
        #[serde(default)]
        readings: Vec<String>,
    },
    /// fio jobs (fio syntax; an `offset` written negative counts back
    /// from the end of the drive).
    Fio {
        /// The name figures refer to.
        #[serde(default)]
        name: Option<String>,
        /// The job file's text.
        job: String,
        /// The readings it belongs to (default: every reading).
        #[serde(default)]
        readings: Vec<String>,
    },
    /// One TRIM of a range (a quick format, blkdiscard).
    Trim {
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
        /// Start: bytes (fio sizes) or a percentage of the drive.
        #[serde(default = "zero")]
        offset: String,
        /// Length: bytes or a percentage.
        #[serde(default = "whole")]
        length: String,
        /// The readings it belongs to (default: every reading).
        #[serde(default)]
        readings: Vec<String>,
    },
    /// No host I/O for a while (background GC may run).
    Idle {
        /// Optional name.
        #[serde(default)]
        name: Option<String>,
        /// Seconds.
        seconds: f64,
        /// The readings it belongs to (default: every reading).
        #[serde(default)]
        readings: Vec<String>,
    },
}

/// One reading of what a source left unstated (its preparation, how long
/// a measuring pass ran): a protocol's steps may belong to some readings
/// only, and every reading runs, to show how far a result depends on it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reading {
    /// Its name (`full-pass`, `random-on-erased`, ...).
    pub name: String,
    /// What it assumes, and for the first (the one figures, shapes and
    /// fits use) why the docs argue for it.
    pub description: String,
}

fn zero() -> String {
    "0".into()
}

fn whole() -> String {
    "100%".into()
}

impl Step {
    /// The step's name, if it has one.
    pub fn name(&self) -> Option<&str> {
        match self {
            Step::SecureErase { name, .. }
            | Step::Fio { name, .. }
            | Step::Trim { name, .. }
            | Step::Idle { name, .. } => name.as_deref(),
        }
    }

    /// The readings it belongs to (empty: every one).
    pub fn readings(&self) -> &[String] {
        match self {
            Step::SecureErase { readings, .. }
            | Step::Fio { readings, .. }
            | Step::Trim { readings, .. }
            | Step::Idle { readings, .. } => readings,
        }
    }
}

/// The drive's state when a figure was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// New or secure-erased.
    Fresh,
    /// Partly written.
    PartiallyUsed,
    /// After random writes, filled, "dirty".
    Used,
    /// After a TRIM.
    AfterTrim,
    /// In steady state under the workload.
    SteadyState,
    /// After idle time.
    AfterIdle,
}

impl State {
    /// As written in the corpus.
    pub fn name(self) -> &'static str {
        match self {
            State::Fresh => "fresh",
            State::PartiallyUsed => "partially-used",
            State::Used => "used",
            State::AfterTrim => "after-trim",
            State::SteadyState => "steady-state",
            State::AfterIdle => "after-idle",
        }
    }
}

/// What a figure measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Write throughput, 10^6 bytes/s.
    WriteMbS,
    /// Read throughput, 10^6 bytes/s.
    ReadMbS,
    /// Write IOPS.
    WriteIops,
    /// Read IOPS.
    ReadIops,
    /// Read plus write IOPS of a mixed job.
    MixedIops,
    /// Mean write completion latency, µs.
    WriteLatMeanUs,
    /// Mean read completion latency, µs.
    ReadLatMeanUs,
    /// Largest write completion latency, ms.
    WriteLatMaxMs,
    /// Largest read completion latency, ms.
    ReadLatMaxMs,
    /// The job's duration, s (file copies written as fio jobs).
    CopySeconds,
    /// Write amplification of the step (NAND bytes programmed / host bytes written).
    Waf,
    /// GB (10^9 bytes) written before the write throughput first drops:
    /// the first 10-second window below 80 % of the first 10 seconds (the
    /// step's whole amount when it never drops).
    WriteGbBeforeDrop,
    /// Seconds before that drop (the step's duration when none).
    WriteSBeforeDrop,
    /// Mean write throughput from that drop to the end of the job, 10^6
    /// bytes/s (a post-cache rate; the whole job's when it never drops).
    WriteMbSAfterDrop,
    /// The drive's temperature at the end of the step, °C (`[thermal]`).
    TempEndC,
}

impl Metric {
    /// As written in the corpus.
    pub fn name(self) -> &'static str {
        match self {
            Metric::WriteMbS => "write_mb_s",
            Metric::ReadMbS => "read_mb_s",
            Metric::WriteIops => "write_iops",
            Metric::ReadIops => "read_iops",
            Metric::MixedIops => "mixed_iops",
            Metric::WriteLatMeanUs => "write_lat_mean_us",
            Metric::ReadLatMeanUs => "read_lat_mean_us",
            Metric::WriteLatMaxMs => "write_lat_max_ms",
            Metric::ReadLatMaxMs => "read_lat_max_ms",
            Metric::CopySeconds => "copy_seconds",
            Metric::Waf => "waf",
            Metric::WriteGbBeforeDrop => "write_gb_before_drop",
            Metric::WriteSBeforeDrop => "write_s_before_drop",
            Metric::WriteMbSAfterDrop => "write_mb_s_after_drop",
            Metric::TempEndC => "temp_end_c",
        }
    }

    /// Every metric.
    pub const ALL: [Metric; 15] = [
        Metric::WriteMbS,
        Metric::ReadMbS,
        Metric::WriteIops,
        Metric::ReadIops,
        Metric::MixedIops,
        Metric::WriteLatMeanUs,
        Metric::ReadLatMeanUs,
        Metric::WriteLatMaxMs,
        Metric::ReadLatMaxMs,
        Metric::CopySeconds,
        Metric::Waf,
        Metric::WriteGbBeforeDrop,
        Metric::WriteSBeforeDrop,
        Metric::WriteMbSAfterDrop,
        Metric::TempEndC,
    ];

    /// The metric called `name` (as written in the corpus).
    pub fn from_name(name: &str) -> Option<Metric> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The metric's own unit.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::WriteMbS | Metric::ReadMbS | Metric::WriteMbSAfterDrop => "MB/s",
            Metric::TempEndC => "C",
            Metric::WriteIops | Metric::ReadIops | Metric::MixedIops => "IOPS",
            Metric::WriteLatMeanUs | Metric::ReadLatMeanUs => "us",
            Metric::WriteLatMaxMs | Metric::ReadLatMaxMs => "ms",
            Metric::CopySeconds | Metric::WriteSBeforeDrop => "s",
            Metric::Waf => "ratio",
            Metric::WriteGbBeforeDrop => "GB",
        }
    }

    /// The factor from `unit` to the metric's own unit, if they measure the same thing.
    pub fn factor(self, unit: &str) -> Option<f64> {
        let u = unit.trim();
        let own = self.unit();
        if u.eq_ignore_ascii_case(own) {
            return Some(1.0);
        }
        Some(match (own, u) {
            ("MB/s", "MiB/s") => 1.048_576,
            ("MB/s", "KB/s") => 1e-3,
            ("MB/s", "GB/s") => 1e3,
            ("IOPS", "KIOPS") => 1e3,
            ("us", "µs") => 1.0,
            ("us", "ms") => 1e3,
            ("ms", "us" | "µs") => 1e-3,
            ("ms", "s") => 1e3,
            ("s", "min") => 60.0,
            ("GB", "GiB") => 1.073_741_824,
            ("GB", "TB") => 1e3,
            ("C", "°C") => 1.0,
            _ => return None,
        })
    }
}

/// One published figure.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    /// Unique within the file.
    pub id: String,
    /// The protocol that produced it.
    pub protocol: String,
    /// The named step whose result it is.
    pub step: String,
    /// The fio job within that step (default: its first).
    #[serde(default)]
    pub job: Option<String>,
    /// The drive's state.
    pub state: State,
    /// What it measures.
    pub metric: Metric,
    /// The published number, in `unit`.
    pub published: f64,
    /// Its unit as published.
    pub unit: String,
    /// Where it stands in the source.
    #[serde(default)]
    pub quote: Option<String>,
    /// Anything else.
    #[serde(default)]
    pub note: Option<String>,
}

/// A published curve (points read off a chart).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Curve {
    /// Unique within the file.
    pub id: String,
    /// The protocol.
    pub protocol: String,
    /// The named step.
    pub step: String,
    /// The drive's state.
    pub state: State,
    /// `position_pct`, `seconds` or `gb_written`.
    pub x: String,
    /// The metric on the y axis.
    pub y: Metric,
    /// `[x, y]` points.
    pub points: Vec<[f64; 2]>,
    /// The average the source printed, if any (judged like a figure).
    #[serde(default)]
    pub published_mean: Option<f64>,
    /// Anything else.
    #[serde(default)]
    pub note: Option<String>,
}

impl CorpusFile {
    /// Parse and check a corpus file: references resolve, names are
    /// unique, units fit their metrics, the numbers are positive.
    pub fn parse(text: &str, origin: &str) -> Result<CorpusFile, ValidateError> {
        let c: CorpusFile = toml::from_str(text).map_err(|e| ValidateError::Corpus {
            origin: origin.into(),
            msg: e.to_string(),
        })?;
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
