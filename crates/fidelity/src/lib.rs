//! `vssd validate`: the presets against what independent people measured
//! on their drives.
//!
//! The corpus ([`corpus`], `validation/*.toml`) holds every published
//! figure found for each named preset's drive, with its source and the
//! protocol that produced it written as simulator input. Each protocol
//! runs on a fresh simulated drive ([`run`]); each figure's simulated value
//! is compared with the published one. A figure is *held out* unless the
//! preset was fitted to its source (its spec sheet, which `vssd
//! calibrate` checks, or a source the corpus file lists in `fitted_to`):
//! the summaries count held-out figures only. See `docs/validation.md`.

pub mod chart;
pub mod corpus;
pub mod fit;
pub mod run;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;
use serde::Serialize;
use thiserror::Error;

use corpus::{CorpusFile, Metric, State};
use vssd_common::cli_out::{self, StdoutError};
use vssd_profile::size::parse_size;
use vssd_profile::{Profile, ProfileError};

/// What can go wrong.
#[derive(Debug, Error)]
pub enum ValidateError {
    /// A corpus file is malformed.
    #[error("{origin}: {msg}")]
    Corpus {
        /// The file.
        origin: String,
        /// What is wrong.
        msg: String,
    },
    /// A protocol could not run.
    #[error("{origin}: {msg}")]
    Run {
        /// File and protocol.
        origin: String,
        /// What failed.
        msg: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A preset could not be loaded.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// No corpus file for the preset asked for.
    #[error("no corpus file for {0:?} (presets with one: {1})")]
    NoCorpus(String, String),
    /// Standard output failed.
    #[error(transparent)]
    Stdout(#[from] StdoutError),
}

/// `vssd validate` arguments.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Presets to validate (default with --all: every preset with a corpus file).
    #[arg(value_name = "PRESET")]
    pub presets: Vec<String>,
    /// Every preset with a corpus file.
    #[arg(long)]
    pub all: bool,
    /// Every figure as JSON (`preset`, `source`, `published`, `simulated`, `held_out`, ...).
    #[arg(long)]
    pub json: bool,
    /// Run every drive at this capacity instead of its own: absolute spans,
    /// amounts and durations shrink with it, so each protocol writes the
    /// same share of the drive (a quick check, not the published table).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub capacity: Option<u64>,
    /// A directory of corpus files instead of the built-in corpus.
    #[arg(long, value_name = "DIR")]
    pub corpus: Option<PathBuf>,
    /// A directory of fit records (`PRESET.toml`, written by `vssd
    /// calibrate --fit --write DIR`) instead of the built-in ones.
    #[arg(long, value_name = "DIR")]
    pub fits: Option<PathBuf>,
    /// Write a chart per preset (`PRESET.svg`: simulated against published)
    /// into this directory.
    #[arg(long, value_name = "DIR")]
    pub charts: Option<PathBuf>,
    /// Protocols run at once (default: the machine's cores).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Seed of the model and the jobs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// One figure judged.
#[derive(Debug, Clone, Serialize)]
pub struct Judged {
    /// The preset.
    pub preset: String,
    /// The figure's id.
    pub figure: String,
    /// Its source's id.
    pub source: String,
    /// Publication and title.
    pub publication: String,
    /// The source's address.
    pub url: String,
    /// The drive's state.
    pub state: State,
    /// What is measured.
    pub metric: Metric,
    /// The metric's unit.
    pub unit: &'static str,
    /// Published, in `unit`.
    pub published: f64,
    /// Simulated, in `unit` (`None` when the run gave nothing).
    pub simulated: Option<f64>,
    /// (simulated − published) / published.
    pub error: Option<f64>,
    /// The preset was not fitted to this figure's source.
    pub held_out: bool,
    /// The source left out of the fit whose values simulated this figure
    /// (its own: the fold that never saw it); none when simulated on the
    /// preset as it is.
    pub fold: Option<String>,
    /// A figure read off a curve's printed average.
    pub from_curve: bool,
    /// Measured on another drive (another controller or firmware): shown,
    /// but neither fitted to nor counted among the held-out figures.
    pub other_drive: bool,
}

/// The statistics of a set of figures' errors.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Summary {
    /// Figures with a simulated value.
    pub figures: usize,
    /// Median |error|.
    pub median_abs_error: Option<f64>,
    /// 90th percentile of |error|.
    pub p90_abs_error: Option<f64>,
    /// Share of figures within ±25 %.
    pub within_25pct: Option<f64>,
    /// Figures per state.
    pub states: BTreeMap<String, usize>,
}

impl Summary {
    /// Over `figs`.
    pub fn of<'a>(figs: impl Iterator<Item = &'a Judged>) -> Summary {
        let mut errs = Vec::new();
        let mut states = BTreeMap::new();
        for f in figs {
            if let Some(e) = f.error {
                errs.push(e.abs());
                *states.entry(f.state.name().to_string()).or_insert(0) += 1;
            }
        }
        errs.sort_by(f64::total_cmp);
        let q = |p: f64| -> Option<f64> {
            if errs.is_empty() {
                return None;
            }
            // Nearest rank.
            let i = ((p * errs.len() as f64).ceil() as usize).clamp(1, errs.len()) - 1;
            Some(errs[i])
        };
        Summary {
            figures: errs.len(),
            median_abs_error: if errs.is_empty() {
                None
            } else if errs.len() % 2 == 1 {
                Some(errs[errs.len() / 2])
            } else {
                Some((errs[errs.len() / 2 - 1] + errs[errs.len() / 2]) / 2.0)
            },
            p90_abs_error: q(0.9),
            within_25pct: (!errs.is_empty())
                .then(|| errs.iter().filter(|e| **e <= 0.25).count() as f64 / errs.len() as f64),
            states,
        }
    }
}

/// A preset's result.
#[derive(Debug, Clone, Serialize)]
pub struct PresetResult {
    /// The preset.
    pub preset: String,
    /// The drive.
    pub drive: String,
    /// What was published for it.
    pub coverage: String,
    /// Every figure.
    pub figures: Vec<Judged>,
    /// Judged through a current fit record (held-out figures from their
    /// folds).
    pub fitted: bool,
    /// What to know about how it was judged (a missing or stale fit).
    pub notes: Vec<String>,
    /// Held-out figures.
    pub held_out: Summary,
    /// Training figures (spec sheets and sources the preset was fitted to).
    pub training: Summary,
    /// Figures measured on other drives (reported apart).
    pub other_drives: Summary,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The capacity every drive ran at, when overridden.
    pub capacity: Option<u64>,
    /// Per preset.
    pub presets: Vec<PresetResult>,
    /// Held-out figures of every preset.
    pub overall_held_out: Summary,
    /// Training figures of every preset.
    pub overall_training: Summary,
    /// Figures of other drives, every preset.
    pub overall_other_drives: Summary,
}

/// Run the corpus files' protocols (in parallel, `jobs` at once) and judge
/// every figure.
///
/// A preset with free parameters and a fit record in `fits` is judged as
/// the fit says: a figure of a held-out source with the values of the fold
/// that left that source out; every other figure with the preset's own
/// (fitted on everything). Without a record, every figure is judged on
/// the preset as it is, held out unless its source is a spec sheet or
/// listed in `fitted_to`.
pub fn validate(
    files: &[CorpusFile],
    fits: &BTreeMap<String, fit::FitRecord>,
    capacity: Option<u64>,
    seed: u64,
    jobs: usize,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<Report, ValidateError> {
    // Each preset's drives: the preset (variant None) and, where a fit
    // record has folds, the fold of each held-out source (Some(source)).
    struct Drive {
        file: usize,
        fold: Option<String>,
        /// At the preset's own capacity, the fold's values applied.
        base: Profile,
    }
    let mut drives: Vec<Drive> = Vec::new();
    let mut notes: Vec<Vec<String>> = vec![Vec::new(); files.len()];
    let mut fitted = vec![false; files.len()];
    // Per file: which drive judges each source's figures, and whether
    // they are held out.
    let mut judged_by: Vec<BTreeMap<String, (usize, bool)>> = vec![BTreeMap::new(); files.len()];
    for (fi, f) in files.iter().enumerate() {
        let own = Profile::load(&f.preset)?;
        let preset_drive = drives.len();
        drives.push(Drive {
            file: fi,
            fold: None,
            base: own.clone(),
        });
        let record = fits.get(&own.name).filter(|_| !own.fit.is_empty());
        if !own.fit.is_empty() && record.is_none() {
            notes[fi].push(format!(
                "{} declares free parameters but has no fit record: figures judged on the preset as it is",
                f.preset
            ));
        }
        fitted[fi] = record.is_some();
        if let Some(r) = record
            && let Some(why) = r.stale(&own)
        {
            notes[fi].push(format!(
                "the fit record is stale ({why}): re-run `vssd calibrate --fit {}`",
                f.preset
            ));
        }
        for s in &f.source {
            let trained = f.trained_on(s);
            let entry = match record {
                _ if trained => (preset_drive, false),
                None => (preset_drive, true),
                Some(r) => match r.fold_for(&s.id) {
                    Some(fold) => {
                        drives.push(Drive {
                            file: fi,
                            fold: Some(s.id.clone()),
                            base: r.apply(&own, &fold.fit)?,
                        });
                        (drives.len() - 1, true)
                    }
                    // A source added after the fit never reached it.
                    None if !r.all.trained_on.contains(&s.id) => (preset_drive, true),
                    // Fitted on, and no fold left it out: not held out.
                    None => (preset_drive, false),
                },
            };
            judged_by[fi].insert(s.id.clone(), entry);
        }
    }
    // The protocols each drive runs: those of the sources it judges that
    // some figure or curve uses, each on the drive its source measured.
    let mut work: Vec<(usize, &corpus::Protocol)> = Vec::new();
    for (di, d) in drives.iter().enumerate() {
        let f = &files[d.file];
        for p in &f.protocol {
            let used = f.figure.iter().any(|g| g.protocol == p.id)
                || f.curve
                    .iter()
                    .any(|c| c.protocol == p.id && c.published_mean.is_some());
            if used && judged_by[d.file].get(&p.source).map(|e| e.0) == Some(di) {
                work.push((di, p));
            }
        }
    }
    let sized: Vec<(Profile, f64)> = work
        .iter()
        .map(|&(di, p)| run::drive_for(&drives[di].base, p, capacity))
        .collect::<Result<_, _>>()?;
    let mut tasks = Vec::new();
    let mut labels: Vec<&str> = Vec::new();
    let mut task_of: BTreeMap<(usize, String), usize> = BTreeMap::new();
    for (&(di, p), (profile, scale)) in work.iter().zip(&sized) {
        let f = &files[drives[di].file];
        task_of.insert((di, p.id.clone()), tasks.len());
        labels.push(&f.preset);
        tasks.push(run::Task {
            profile,
            scale: *scale,
            protocol: p,
            origin: format!("validation/{}.toml", f.preset),
        });
    }
    let results = run::run_all(&tasks, seed, jobs, &|n, total| {
        progress(
            n,
            total,
            labels.get(n.saturating_sub(1)).copied().unwrap_or(""),
        );
    })?;
    let mut presets = Vec::new();
    for (fi, f) in files.iter().enumerate() {
        let mut figures = Vec::new();
        let mut judge = |id: &str,
                         protocol: &str,
                         step: &str,
                         job: Option<&str>,
                         state: State,
                         metric: Metric,
                         published: f64,
                         from_curve: bool| {
            let src = f.source_of(protocol);
            let other = f
                .protocol(protocol)
                .is_some_and(|p| p.other_drive.is_some());
            let (drive, held_out) = src
                .and_then(|s| judged_by[fi].get(&s.id).copied())
                .unwrap_or((usize::MAX, false));
            let simulated = task_of
                .get(&(drive, protocol.to_string()))
                .and_then(|&t| results.get(t))
                .and_then(|r| r.get(step))
                .and_then(|r| r.value(metric, job))
                .filter(|v| v.is_finite());
            figures.push(Judged {
                preset: f.preset.clone(),
                figure: id.into(),
                source: src.map(|s| s.id.clone()).unwrap_or_default(),
                publication: src
                    .map(|s| format!("{}: {}", s.publication, s.title))
                    .unwrap_or_default(),
                url: src.and_then(|s| s.url.clone()).unwrap_or_default(),
                state,
                metric,
                unit: metric.unit(),
                published,
                simulated,
                error: simulated.map(|v| (v - published) / published),
                held_out: held_out && !other,
                fold: drives.get(drive).and_then(|d| d.fold.clone()),
                from_curve,
                other_drive: other,
            });
        };
        for g in &f.figure {
            let published = g.published * g.metric.factor(&g.unit).unwrap_or(1.0);
            judge(
                &g.id,
                &g.protocol,
                &g.step,
                g.job.as_deref(),
                g.state,
                g.metric,
                published,
                false,
            );
        }
        for c in &f.curve {
            if let Some(m) = c.published_mean {
                judge(&c.id, &c.protocol, &c.step, None, c.state, c.y, m, true);
            }
        }
        presets.push(PresetResult {
            preset: f.preset.clone(),
            drive: f.drive.clone(),
            coverage: f.coverage.clone(),
            fitted: fitted[fi] && notes[fi].is_empty(),
            notes: std::mem::take(&mut notes[fi]),
            held_out: Summary::of(figures.iter().filter(|j| j.held_out)),
            training: Summary::of(figures.iter().filter(|j| !j.held_out && !j.other_drive)),
            other_drives: Summary::of(figures.iter().filter(|j| j.other_drive)),
            figures,
        });
    }
    let all = || presets.iter().flat_map(|p| p.figures.iter());
    Ok(Report {
        capacity,
        overall_held_out: Summary::of(all().filter(|j| j.held_out)),
        overall_training: Summary::of(all().filter(|j| !j.held_out && !j.other_drive)),
        overall_other_drives: Summary::of(all().filter(|j| j.other_drive)),
        presets,
    })
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{:.0} %", v * 100.0))
}

fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The report as text: every figure, then the summaries.
pub fn text(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    if let Some(c) = r.capacity {
        let _ = writeln!(
            o,
            "(every drive at {} bytes instead of its own capacity: a quick check, not the published table)\n",
            c
        );
    }
    for p in &r.presets {
        let _ = writeln!(o, "{}: {}", p.preset, p.drive);
        if p.fitted {
            let _ = writeln!(
                o,
                "  (fitted: a held-out figure is simulated with the fit that left its source out)"
            );
        }
        for n in &p.notes {
            let _ = writeln!(o, "  note: {n}");
        }
        if p.figures.is_empty() {
            let _ = writeln!(
                o,
                "  no published figures in the corpus (see its coverage note)\n"
            );
            continue;
        }
        let _ = writeln!(
            o,
            "  {:<44} {:<12} {:<17} {:>10} {:>10} {:>8}  held out",
            "figure", "state", "metric", "published", "simulated", "error"
        );
        for j in &p.figures {
            let _ = writeln!(
                o,
                "  {:<44} {:<12} {:<17} {:>10} {:>10} {:>8}  {}",
                vssd_chart::numfmt::truncate(&j.figure, 44),
                j.state.name(),
                format!("{} ({})", j.metric.name(), j.unit)
                    .chars()
                    .take(17)
                    .collect::<String>(),
                num(j.published),
                j.simulated.map_or_else(|| "—".into(), num),
                j.error
                    .map_or_else(|| "—".into(), |e| format!("{:+.0} %", e * 100.0)),
                if j.other_drive {
                    "no (other drive)"
                } else if j.held_out {
                    "yes"
                } else {
                    "no (trained)"
                }
            );
        }
        let h = &p.held_out;
        let _ = writeln!(
            o,
            "  held out: {} figures, median |error| {}, p90 {}, within ±25 %: {}; training: {} figures, median |error| {}\n",
            h.figures,
            pct(h.median_abs_error),
            pct(h.p90_abs_error),
            pct(h.within_25pct),
            p.training.figures,
            pct(p.training.median_abs_error),
        );
    }
    let h = &r.overall_held_out;
    let _ = writeln!(
        o,
        "all presets, held out: {} figures, median |error| {}, p90 {}, within ±25 %: {}",
        h.figures,
        pct(h.median_abs_error),
        pct(h.p90_abs_error),
        pct(h.within_25pct)
    );
    let t = &r.overall_training;
    let _ = writeln!(
        o,
        "all presets, training (spec sheets, fitted sources): {} figures, median |error| {}",
        t.figures,
        pct(t.median_abs_error)
    );
    o
}

/// The states in the chart's legend order.
const STATES: [State; 6] = [
    State::Fresh,
    State::PartiallyUsed,
    State::Used,
    State::AfterTrim,
    State::SteadyState,
    State::AfterIdle,
];

/// A preset's chart: every figure with a simulated value, published
/// against simulated, coloured by state, filled when held out.
pub fn chart(p: &PresetResult) -> Option<String> {
    use crate::chart::{ScatterPoint, validation};
    let points: Vec<ScatterPoint<'_>> = p
        .figures
        .iter()
        .filter_map(|j| {
            Some(ScatterPoint {
                x: j.published,
                y: j.simulated?,
                group: j.state.name(),
                filled: j.held_out,
            })
        })
        .collect();
    let groups: Vec<&str> = STATES.iter().map(|s| s.name()).collect();
    let subtitle = format!(
        "{} figures ({} held out): median |error| {}, within ±25 %: {}",
        points.len(),
        p.held_out.figures,
        pct(p.held_out.median_abs_error),
        pct(p.held_out.within_25pct),
    );
    validation(
        &format!("{}: simulated vs published", p.preset),
        &subtitle,
        &groups,
        &points,
    )
}

/// `vssd validate`.
pub fn run_cli(a: ValidateArgs) -> Result<(), ValidateError> {
    let mut files = corpus::load(a.corpus.as_deref())?;
    if !a.all || !a.presets.is_empty() {
        let known = files
            .iter()
            .map(|f| f.preset.clone())
            .collect::<Vec<_>>()
            .join(", ");
        for p in &a.presets {
            if !files.iter().any(|f| &f.preset == p) {
                return Err(ValidateError::NoCorpus(p.clone(), known));
            }
        }
        if a.presets.is_empty() {
            return Err(ValidateError::NoCorpus(String::new(), known));
        }
        files.retain(|f| a.presets.contains(&f.preset));
    }
    let jobs = a.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let tty = !a.json && std::io::stderr().is_terminal();
    let bar = tty.then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} validate [{bar:30}] {pos}/{len} protocols, {elapsed} elapsed, ETA {eta}: {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        b
    });
    let fits = fit::load(a.fits.as_deref())?;
    let report = validate(
        &files,
        &fits,
        a.capacity,
        a.seed,
        jobs,
        &|n, total, preset| {
            if let Some(b) = &bar {
                b.set_length(total as u64);
                b.set_position(n as u64);
                b.set_message(preset.to_string());
            }
        },
    )?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if let Some(dir) = &a.charts {
        std::fs::create_dir_all(dir).map_err(|e| ValidateError::Io {
            path: dir.display().to_string(),
            source: e,
        })?;
        for p in &report.presets {
            if let Some(svg) = chart(p) {
                let path = dir.join(format!("{}.svg", p.preset));
                std::fs::write(&path, svg).map_err(|e| ValidateError::Io {
                    path: path.display().to_string(),
                    source: e,
                })?;
            }
        }
    }
    let out = if a.json {
        serde_json::to_string_pretty(&report).unwrap_or_else(|e| {
            serde_json::json!({ "error": format!("the report could not be serialised: {e}") })
                .to_string()
        }) + "\n"
    } else {
        text(&report)
    };
    let mut w = cli_out::stdout();
    use std::io::Write as _;
    w.write_all(out.as_bytes())
        .map_err(|e| ValidateError::Stdout(e.into()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_corpus_parses_and_names_real_presets() {
        let files = corpus::load(None).unwrap();
        assert_eq!(files.len(), corpus::BUILT_IN.len());
        for f in &files {
            Profile::load(&f.preset).unwrap();
        }
        let n: usize = files.iter().map(|f| f.figure.len()).sum();
        assert!(n >= 70, "{n} figures");
    }

    #[test]
    fn summaries_use_nearest_ranks() {
        let j = |e: f64| Judged {
            preset: "p".into(),
            figure: "f".into(),
            source: "s".into(),
            publication: String::new(),
            url: String::new(),
            state: State::Fresh,
            metric: Metric::WriteMbS,
            unit: "MB/s",
            published: 100.0,
            simulated: Some(100.0 * (1.0 + e)),
            error: Some(e),
            held_out: true,
            fold: None,
            from_curve: false,
            other_drive: false,
        };
        let figs: Vec<Judged> = [0.05, -0.10, 0.30, 0.02, -0.50]
            .into_iter()
            .map(j)
            .collect();
        let s = Summary::of(figs.iter());
        assert_eq!(s.figures, 5);
        assert_eq!(s.median_abs_error, Some(0.10));
        assert_eq!(s.p90_abs_error, Some(0.50));
        assert_eq!(s.within_25pct, Some(0.6));
        assert_eq!(Summary::of([].iter()), Summary::default());
    }

    /// A corpus file of one source and one protocol (one fio step "m"),
    /// `extra` in the protocol's table.
    fn one_protocol(extra: &str) -> String {
        format!(
            r#"
preset = "crucial-m4-128"
drive = "d"
coverage = "c"
[[source]]
id = "s"
publication = "p"
title = "t"
url = "u"
kind = "review"
[[protocol]]
id = "p1"
source = "s"
description = "d"
{extra}
  [[protocol.step]]
  kind = "fio"
  name = "m"
  job = "[m]\nrw=write\nbs=128k\nsize=1g\n"
"#
        )
    }

    #[test]
    fn bad_corpus_files_get_clear_errors() {
        let base = one_protocol("");
        let fig = |extra: &str| {
            format!("{base}[[figure]]\nid = \"f\"\nprotocol = \"p1\"\nstate = \"fresh\"\n{extra}")
        };
        assert!(
            CorpusFile::parse(
                &fig("step = \"m\"\nmetric = \"write_mb_s\"\npublished = 10\nunit = \"MB/s\"\n"),
                "x"
            )
            .is_ok()
        );
        for (extra, want) in [
            (
                "step = \"nope\"\nmetric = \"write_mb_s\"\npublished = 10\nunit = \"MB/s\"\n",
                "no step named",
            ),
            (
                "step = \"m\"\nmetric = \"write_mb_s\"\npublished = 10\nunit = \"IOPS\"\n",
                "does not measure",
            ),
            (
                "step = \"m\"\nmetric = \"write_mb_s\"\npublished = -1\nunit = \"MB/s\"\n",
                "positive",
            ),
            (
                "step = \"m\"\nmetric = \"speed\"\npublished = 1\nunit = \"MB/s\"\n",
                "unknown variant",
            ),
            (
                "step = \"m\"\nmetric = \"write_mb_s\"\npublished = 1\nunit = \"MB/s\"\ncolour = 1\n",
                "unknown field",
            ),
        ] {
            let e = CorpusFile::parse(&fig(extra), "x").unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn another_capacity_and_another_drive_are_checked() {
        let with = one_protocol;
        let drive = "[protocol.drive]
why = \"the 256 GB\"
set = { \"geometry.dies_per_channel\" = 4, \"geometry.exported_capacity\" = 256060514304 }
";
        let f = CorpusFile::parse(&with(drive), "x").unwrap();
        let d = f.protocol[0].drive.as_ref().unwrap();
        let p = d.apply(&Profile::load("crucial-m4-128").unwrap()).unwrap();
        assert_eq!(
            (p.dies(), p.geometry.exported_capacity.0),
            (32, 256060514304)
        );
        for (extra, want) in [
            (
                format!("other_drive = \"x\"\n{drive}"),
                "exclude each other",
            ),
            (
                "[protocol.drive]\nwhy = \"w\"\nset = {}\n".to_string(),
                "at least one field",
            ),
            // The changed drive must still be a valid profile.
            (
                drive.replace("256060514304", "1000000000000"),
                "geometry.exported_capacity",
            ),
            (
                drive.replace("geometry.dies_per_channel", "geometry.dies"),
                "numeric field",
            ),
        ] {
            let e = CorpusFile::parse(&with(&extra), "x")
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{extra}: {e}");
        }
    }

    #[test]
    fn a_scaled_run_judges_figures() {
        let files = corpus::load(None).unwrap();
        let f: Vec<CorpusFile> = files
            .into_iter()
            .filter(|f| f.preset == "intel-x25m-g2")
            .collect();
        let r = validate(&f, &BTreeMap::new(), Some(2 << 30), 0, 2, &|_, _, _| {}).unwrap();
        let p = &r.presets[0];
        assert!(p.figures.iter().all(|j| j.simulated.is_some()), "{p:?}");
        assert!(p.held_out.figures > 0 && p.training.figures > 0);
    }
}
