//! The items of the corpus file format: sources, protocols and their
//! steps, the drive states, the metrics, figures and curves, shared by
//! corpus files ([`crate::corpus`]) and procedure files ([`crate::shape`]),
//! and the job-text checks the loader applies to every protocol.

use serde::Deserialize;

use super::ValidateError;
use vssd_profile::size::parse_size;

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

/// The longest a corpus job may run, ns of drive time: a day (the
/// longest published procedure runs an hour).
pub const MAX_JOB_NS: u64 = 86_400 * 1_000_000_000;

/// A protocol's fio job, checked when the corpus loads: it parses (its
/// offsets from the end made absolute for a nominal 1 TiB drive), and it
/// is bounded (a day of drive time, a thousand passes or capacities), so
/// no corpus file keeps `vssd validate` busy without end. `at` names it.
pub(crate) fn check_job(job: &str, at: &str) -> Result<(), String> {
    let text = from_the_end(job, 1 << 40).map_err(|e| format!("{at}: {e}"))?;
    let jf = vssd_sim::jobfile::parse(&text, at).map_err(|e| e.to_string())?;
    for j in &jf.jobs {
        let long = |what: &str, ns: u64| -> Result<(), String> {
            if ns > MAX_JOB_NS {
                return Err(format!(
                    "{at}: job [{}]: {what} of {} s is more than a corpus job may run (a day of drive time)",
                    j.name,
                    ns / 1_000_000_000
                ));
            }
            Ok(())
        };
        long("runtime", j.runtime_ns.unwrap_or(0))?;
        long("ramp_time", j.ramp_ns)?;
        long("startdelay", j.startdelay_ns)?;
        let too_much = j.loops > 1000
            || j.number_ios.is_some_and(|n| n > 1 << 34)
            || match j.io_size {
                Some(vssd_sim::jobfile::SizeSpec::Bytes(b)) => b > 1 << 50,
                Some(vssd_sim::jobfile::SizeSpec::Percent(p)) => p > 100_000.0,
                None => false,
            };
        if too_much {
            return Err(format!(
                "{at}: job [{}]: more than a thousand passes or capacities of I/O (loops, io_size, number_ios)",
                j.name
            ));
        }
    }
    Ok(())
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

/// A job file whose negative `offset=`s (`offset=-10g`: 10 GB before the
/// end of the drive, as a partition at the end of a disk) and `size=`s
/// (`size=-10g`: all but the last 10 GB) are made absolute for a drive of
/// `cap` bytes (1 MiB aligned).
pub fn from_the_end(text: &str, cap: u64) -> Result<String, String> {
    const MIB: u64 = 1 << 20;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.split_once('=') {
            Some((k, v)) if matches!(k.trim(), "offset" | "size") && v.trim().starts_with('-') => {
                let key = k.trim();
                let back = parse_size(v.trim().trim_start_matches('-'))
                    .map_err(|e| format!("{key}={}: {e}", v.trim()))?;
                if back >= cap {
                    return Err(format!(
                        "{key}={}: not less than the drive's {cap} bytes",
                        v.trim()
                    ));
                }
                out.push_str(&format!("{key}={}\n", (cap - back) / MIB * MIB));
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    Ok(out)
}
