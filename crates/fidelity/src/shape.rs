//! Shapes: the qualitative statements of the published procedures (P1,
//! P2, P3) as checks a simulated run must pass.
//!
//! A shape quotes its statement, names the drives it covers and the
//! protocol (the procedure as steps), and gives the check as one
//! comparison over `STEP.MEASURE` references (`seq-used.first30s_write_mb_s
//! < 0.8 * seq-fresh.write_mb_s`), with why its threshold reads the
//! statement fairly. Measures are the figures' metrics of a step
//! (`write_mb_s`, `write_lat_max_ms`, ...) and what is read off the
//! step's throughput over time ([`measure_names`]).
//!
//! Shapes common to several drives (a review that tested four) live in a
//! procedure file (`validation/procedures/*.toml`) that each covered
//! drive's corpus file includes (`procedures = ["p3-retention-2011"]`):
//! its sources, protocols and shapes join the corpus file's.

use std::collections::BTreeSet;

use serde::Deserialize;
use vssd_common::expr::Assertion;

use crate::format::{Figure, Protocol, Source, State, Step};

/// One qualitative statement and its check.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    /// Unique within the corpus file (and the procedure file).
    pub id: String,
    /// The protocol whose steps the check refers to.
    pub protocol: String,
    /// The statement as published (quoted, or summarised with where it stands).
    pub statement: String,
    /// The drives it covers, where not every drive of its procedure.
    #[serde(default)]
    pub presets: Vec<String>,
    /// The drive's state the statement is about.
    pub state: State,
    /// One comparison over `STEP.MEASURE` references.
    pub check: String,
    /// Why the threshold reads the statement fairly.
    pub why: String,
    /// Holds when at least this many of the drives it covers pass (a
    /// statement that excepts one drive without naming it: "all drives
    /// but one"). Judged across its drives; not a fit target.
    #[serde(default)]
    pub at_least: Option<usize>,
}

impl Shape {
    /// The check, parsed.
    pub fn assertion(&self) -> Result<Assertion, String> {
        Assertion::parse(&self.check).map_err(|e| e.to_string())
    }

    /// Whether it covers `preset` (every drive of its file when it names none).
    pub fn covers(&self, preset: &str) -> bool {
        self.presets.is_empty() || self.presets.iter().any(|p| p == preset)
    }

    /// Check it against its protocol: the check parses, and every
    /// reference names a fio step of the protocol and a known measure.
    pub fn check_against(&self, p: &Protocol) -> Result<(), String> {
        let a = self.assertion()?;
        let steps: BTreeSet<&str> = p
            .steps(None)
            .filter(|s| matches!(s, Step::Fio { .. }))
            .filter_map(Step::name)
            .collect();
        for (step, m) in a.refs() {
            if !steps.contains(step.as_str()) {
                return Err(format!(
                    "{step:?} is not a named fio step of protocol {:?} (its steps: {})",
                    p.id,
                    steps.iter().copied().collect::<Vec<_>>().join(", ")
                ));
            }
            if !is_measure(&m) {
                return Err(format!("{step}.{m}: no such measure ({})", measure_names()));
            }
        }
        if self.statement.trim().is_empty() || self.why.trim().is_empty() {
            return Err("a shape needs its statement and why its check reads it fairly".into());
        }
        Ok(())
    }
}

/// A procedure file (`validation/procedures/NAME.toml`): a published
/// procedure that covered several drives, with its sources, protocols,
/// shapes and figures, included by each covered drive's corpus file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcedureFile {
    /// Its name, as corpus files include it.
    pub procedure: String,
    /// What it is, in words.
    pub title: String,
    /// The presets of the drives it covers.
    pub presets: Vec<String>,
    /// Where it comes from.
    #[serde(default)]
    pub source: Vec<Source>,
    /// Its protocols.
    #[serde(default)]
    pub protocol: Vec<Protocol>,
    /// Its statements.
    #[serde(default)]
    pub shape: Vec<Shape>,
    /// Figures it published for every drive it covers (rare: most are per drive).
    #[serde(default)]
    pub figure: Vec<Figure>,
}

/// Throughput over time, as a shape reads it: the base measures and the
/// windows over the step's bandwidth log.
const SERIES: &[&str] = &["write_mb_s", "read_mb_s"];

/// Whether `m` is a measure a shape can refer to: a figure's metric, a
/// window of the throughput (`first30s_write_mb_s`, `last30s_...`,
/// `min10s_...`, `max10s_...`), `write_gb` / `read_gb` (moved in the
/// step), `write_gb_before_drop` / `write_s_before_drop`.
pub fn is_measure(m: &str) -> bool {
    crate::format::Metric::from_name(m).is_some()
        || window(m).is_some()
        || matches!(m, "write_gb" | "read_gb")
}

/// A window measure: (kind, seconds, base metric).
pub fn window(m: &str) -> Option<(&'static str, f64, &'static str)> {
    for kind in ["first", "last", "min", "max"] {
        let Some(rest) = m.strip_prefix(kind) else {
            continue;
        };
        let (secs, base) = rest.split_once("s_")?;
        let secs: f64 = secs
            .parse()
            .ok()
            .filter(|s: &f64| *s > 0.0 && s.is_finite())?;
        let base = SERIES.iter().find(|b| **b == base)?;
        return Some((kind, secs, base));
    }
    None
}

/// The measures, for messages.
pub fn measure_names() -> String {
    "a figure metric (write_mb_s, read_mb_s, write_lat_max_ms, waf, write_gb_before_drop, ...), \
     firstNs_/lastNs_/minNs_/maxNs_ + write_mb_s or read_mb_s (N seconds), write_gb, read_gb"
        .into()
}
