//! `vssd validate`'s judgement: every figure of the corpus simulated on
//! the drive that may judge it (the preset, or the fold of its fit that
//! never saw the figure's source) and compared with its published value;
//! the summaries count held-out figures apart from training ones.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::ValidateError;
use crate::corpus::{CorpusFile, Metric, Protocol, State};
use crate::fit::FitRecord;
use crate::run::{self, StepResult};
use crate::shape::Shape;
use vssd_profile::Profile;

/// One figure judged.
#[derive(Debug, Clone, Serialize)]
pub struct Judged {
    /// `figure` (beside the shapes' `shape` in the JSON).
    pub kind: &'static str,
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
    /// Where the protocol has several readings of what its source left
    /// unstated: the simulated value under each (the first is `simulated`'s).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub readings: Vec<ReadingValue>,
}

/// A value under one reading of a protocol.
#[derive(Debug, Clone, Serialize)]
pub struct ReadingValue {
    /// The reading.
    pub reading: String,
    /// The simulated value (a figure's), or 1 / 0 (a shape held or not).
    pub simulated: Option<f64>,
}

/// One shape judged on one drive.
#[derive(Debug, Clone, Serialize)]
pub struct ShapeJudged {
    /// `shape`.
    pub kind: &'static str,
    /// The preset.
    pub preset: String,
    /// The shape's id.
    pub shape: String,
    /// Its source's id.
    pub source: String,
    /// The statement.
    pub statement: String,
    /// The drive's state it is about.
    pub state: State,
    /// The check.
    pub check: String,
    /// The check with the simulated values.
    pub detail: String,
    /// Whether the check passed (`None`: a value it needs is missing).
    pub held: Option<bool>,
    /// Judged across its drives: holds when at least this many pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_least: Option<usize>,
    /// The preset was not fitted to its source.
    pub held_out: bool,
    /// The fold that simulated it (none: the preset as it is).
    pub fold: Option<String>,
    /// Whether it holds under each reading of its protocol (when several).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub readings: Vec<ReadingValue>,
}

/// Shapes held and not.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ShapeSummary {
    /// Judged (a value missing counts as not held).
    pub shapes: usize,
    /// Held.
    pub held: usize,
}

impl ShapeSummary {
    fn of<'a>(shapes: impl Iterator<Item = &'a ShapeJudged>) -> ShapeSummary {
        let mut s = ShapeSummary::default();
        for j in shapes.filter(|j| j.at_least.is_none()) {
            s.shapes += 1;
            s.held += usize::from(j.held == Some(true));
        }
        s
    }
}

/// A shape that excepts some drives without naming them, judged across
/// the drives it covers.
#[derive(Debug, Clone, Serialize)]
pub struct QuorumJudged {
    /// `shape`.
    pub kind: &'static str,
    /// The shape's id.
    pub shape: String,
    /// The statement.
    pub statement: String,
    /// Drives passing its check, of those it covers.
    pub passed: Vec<String>,
    /// Those not.
    pub failed: Vec<String>,
    /// It holds when at least this many pass.
    pub at_least: usize,
    /// Whether it held.
    pub held: bool,
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
    /// Every shape covering the drive.
    pub shapes: Vec<ShapeJudged>,
    /// Shapes held, of those judged on this drive alone.
    pub shapes_held: ShapeSummary,
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
    /// Shapes judged on one drive each, every preset.
    pub overall_shapes: ShapeSummary,
    /// Shapes judged across their drives.
    pub quorum_shapes: Vec<QuorumJudged>,
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
    fits: &BTreeMap<String, FitRecord>,
    capacity: Option<u64>,
    seed: u64,
    jobs: usize,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<Report, ValidateError> {
    let mut plan = Plan::new(files, fits)?;
    let runs = plan.run(files, capacity, seed, jobs, progress)?;
    let presets: Vec<PresetResult> = files
        .iter()
        .enumerate()
        .map(|(fi, f)| plan.judge(fi, f, &runs))
        .collect();
    let all = || presets.iter().flat_map(|p| p.figures.iter());
    let quorum_shapes = quorum(&presets);
    Ok(Report {
        capacity,
        overall_held_out: Summary::of(all().filter(|j| j.held_out)),
        overall_training: Summary::of(all().filter(|j| !j.held_out && !j.other_drive)),
        overall_other_drives: Summary::of(all().filter(|j| j.other_drive)),
        overall_shapes: ShapeSummary::of(presets.iter().flat_map(|p| p.shapes.iter())),
        quorum_shapes,
        presets,
    })
}

/// The shapes judged across their drives (`at_least`), from each drive's result.
fn quorum(presets: &[PresetResult]) -> Vec<QuorumJudged> {
    let mut by: BTreeMap<String, QuorumJudged> = BTreeMap::new();
    for s in presets.iter().flat_map(|p| p.shapes.iter()) {
        let Some(n) = s.at_least else { continue };
        let q = by.entry(s.shape.clone()).or_insert_with(|| QuorumJudged {
            kind: "shape",
            shape: s.shape.clone(),
            statement: s.statement.clone(),
            passed: Vec::new(),
            failed: Vec::new(),
            at_least: n,
            held: false,
        });
        if s.held == Some(true) {
            q.passed.push(s.preset.clone());
        } else {
            q.failed.push(s.preset.clone());
        }
    }
    by.into_values()
        .map(|mut q| {
            q.held = q.passed.len() >= q.at_least;
            q
        })
        .collect()
}

/// A drive the figures of one corpus file are simulated on: the preset
/// (`fold` None) or, where a fit record has folds, the fold of one
/// held-out source.
struct Drive {
    file: usize,
    fold: Option<String>,
    /// At the preset's own capacity, the fold's values applied.
    base: Profile,
}

/// Which drive judges which figures, per corpus file.
struct Plan {
    drives: Vec<Drive>,
    /// Per file: what to know about how it was judged.
    notes: Vec<Vec<String>>,
    /// Per file: judged through a fit record.
    fitted: Vec<bool>,
    /// Per file: which drive judges each source's figures, and whether
    /// they are held out.
    judged_by: Vec<BTreeMap<String, (usize, bool)>>,
}

/// What the protocols gave: each (drive, protocol)'s task, and each task's
/// step results.
struct Runs {
    /// (drive, protocol, reading: none for its default) → task.
    task_of: BTreeMap<(usize, String, Option<String>), usize>,
    results: Vec<BTreeMap<String, StepResult>>,
}

impl Runs {
    /// What `drive`'s run of `protocol` under `reading` gave.
    fn of(
        &self,
        drive: usize,
        protocol: &str,
        reading: Option<&str>,
    ) -> Option<&BTreeMap<String, StepResult>> {
        let key = (drive, protocol.to_string(), reading.map(str::to_string));
        self.task_of.get(&key).and_then(|&t| self.results.get(t))
    }
}

impl Plan {
    /// The drives of every file, and which judges each source.
    fn new(
        files: &[CorpusFile],
        fits: &BTreeMap<String, FitRecord>,
    ) -> Result<Plan, ValidateError> {
        let mut plan = Plan {
            drives: Vec::new(),
            notes: vec![Vec::new(); files.len()],
            fitted: vec![false; files.len()],
            judged_by: vec![BTreeMap::new(); files.len()],
        };
        for (fi, f) in files.iter().enumerate() {
            plan.add_file(fi, f, fits)?;
        }
        Ok(plan)
    }

    /// File `fi`'s preset, its fit record's folds, and the drive of each
    /// of its sources.
    fn add_file(
        &mut self,
        fi: usize,
        f: &CorpusFile,
        fits: &BTreeMap<String, FitRecord>,
    ) -> Result<(), ValidateError> {
        let own = Profile::load(&f.preset)?;
        let preset_drive = self.drives.len();
        self.drives.push(Drive {
            file: fi,
            fold: None,
            base: own.clone(),
        });
        let record = fits.get(&own.name).filter(|_| !own.fit.is_empty());
        // A record whose values cannot apply judges nothing.
        let record = match record.map(|r| r.check_values(&own)) {
            Some(Err(why)) => {
                self.notes[fi].push(format!(
                    "the fit record of {} is unusable ({why}): figures judged on the preset as it is",
                    f.preset
                ));
                None
            }
            _ => record,
        };
        if !own.fit.is_empty() && record.is_none() {
            self.notes[fi].push(format!(
                "{} declares free parameters but has no fit record: figures judged on the preset as it is",
                f.preset
            ));
        }
        self.fitted[fi] = record.is_some();
        if let Some(r) = record
            && let Some(why) = r.stale(&own)
        {
            self.notes[fi].push(format!(
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
                        self.drives.push(Drive {
                            file: fi,
                            fold: Some(s.id.clone()),
                            base: r.apply(&own, &fold.fit)?,
                        });
                        (self.drives.len() - 1, true)
                    }
                    // A source added after the fit never reached it.
                    None if !r.all.trained_on.contains(&s.id) => (preset_drive, true),
                    // Fitted on, and no fold left it out: not held out.
                    None => (preset_drive, false),
                },
            };
            self.judged_by[fi].insert(s.id.clone(), entry);
        }
        Ok(())
    }

    /// The protocols each drive runs: those of the sources it judges that
    /// some figure, curve or shape uses, each on the drive its source
    /// measured; on the preset's own drive (no fold) also every other
    /// reading of a protocol that has several.
    fn protocols<'a>(
        &self,
        files: &'a [CorpusFile],
    ) -> Vec<(usize, &'a Protocol, Option<&'a str>)> {
        let mut work = Vec::new();
        for (di, d) in self.drives.iter().enumerate() {
            let f = &files[d.file];
            for p in &f.protocol {
                let used = f.figure.iter().any(|g| g.protocol == p.id)
                    || f.shape.iter().any(|s| s.protocol == p.id)
                    || f.curve
                        .iter()
                        .any(|c| c.protocol == p.id && c.published_mean.is_some());
                let judged_here = self.judged_by[d.file].get(&p.source).map(|e| e.0) == Some(di);
                if used && judged_here {
                    work.push((di, p, None));
                }
                if used && d.fold.is_none() {
                    for r in p.reading.iter().skip(1) {
                        work.push((di, p, Some(r.name.as_str())));
                    }
                }
            }
        }
        work
    }

    /// Every protocol on its drive (sized to `capacity`, if given), `jobs`
    /// at once.
    fn run(
        &self,
        files: &[CorpusFile],
        capacity: Option<u64>,
        seed: u64,
        jobs: usize,
        progress: &(dyn Fn(usize, usize, &str) + Sync),
    ) -> Result<Runs, ValidateError> {
        let work = self.protocols(files);
        let sized: Vec<(Profile, f64)> = work
            .iter()
            .map(|&(di, p, _)| run::drive_for(&self.drives[di].base, p, capacity))
            .collect::<Result<_, _>>()?;
        let mut tasks = Vec::new();
        let mut labels: Vec<&str> = Vec::new();
        let mut task_of = BTreeMap::new();
        for (&(di, p, reading), (profile, scale)) in work.iter().zip(&sized) {
            let f = &files[self.drives[di].file];
            task_of.insert((di, p.id.clone(), reading.map(str::to_string)), tasks.len());
            labels.push(&f.preset);
            tasks.push(run::Task {
                profile,
                scale: *scale,
                protocol: p,
                reading,
                origin: f.origin.clone(),
            });
        }
        let results = run::run_all(&tasks, seed, jobs, &|n, total| {
            progress(
                n,
                total,
                labels.get(n.saturating_sub(1)).copied().unwrap_or(""),
            );
        })?;
        Ok(Runs { task_of, results })
    }

    /// File `fi`'s figures and curves judged, and their summaries.
    fn judge(&mut self, fi: usize, f: &CorpusFile, runs: &Runs) -> PresetResult {
        let mut figures = Vec::new();
        for g in &f.figure {
            figures.push(self.judged(
                fi,
                f,
                runs,
                Published {
                    id: &g.id,
                    protocol: &g.protocol,
                    step: &g.step,
                    job: g.job.as_deref(),
                    state: g.state,
                    metric: g.metric,
                    value: g.published * g.metric.factor(&g.unit).unwrap_or(1.0),
                    from_curve: false,
                },
            ));
        }
        for c in &f.curve {
            if let Some(m) = c.published_mean {
                figures.push(self.judged(
                    fi,
                    f,
                    runs,
                    Published {
                        id: &c.id,
                        protocol: &c.protocol,
                        step: &c.step,
                        job: None,
                        state: c.state,
                        metric: c.y,
                        value: m,
                        from_curve: true,
                    },
                ));
            }
        }
        let shapes: Vec<ShapeJudged> = f
            .shape
            .iter()
            .map(|sh| self.judged_shape(fi, f, runs, sh))
            .collect();
        PresetResult {
            shapes_held: ShapeSummary::of(shapes.iter()),
            shapes,
            preset: f.preset.clone(),
            drive: f.drive.clone(),
            coverage: f.coverage.clone(),
            fitted: self.fitted[fi] && self.notes[fi].is_empty(),
            notes: std::mem::take(&mut self.notes[fi]),
            held_out: Summary::of(figures.iter().filter(|j| j.held_out)),
            training: Summary::of(figures.iter().filter(|j| !j.held_out && !j.other_drive)),
            other_drives: Summary::of(figures.iter().filter(|j| j.other_drive)),
            figures,
        }
    }

    /// Published figure `p` of file `fi`, judged against what its drive's
    /// run of its protocol gave.
    fn judged(&self, fi: usize, f: &CorpusFile, runs: &Runs, p: Published<'_>) -> Judged {
        let src = f.source_of(p.protocol);
        let other = f
            .protocol(p.protocol)
            .is_some_and(|p| p.other_drive.is_some());
        let (drive, held_out) = src
            .and_then(|s| self.judged_by[fi].get(&s.id).copied())
            .unwrap_or((usize::MAX, false));
        let value = |r: Option<&BTreeMap<String, StepResult>>| {
            r.and_then(|r| r.get(p.step))
                .and_then(|r| r.value(p.metric, p.job))
                .filter(|v| v.is_finite())
        };
        let simulated = value(runs.of(drive, p.protocol, None));
        let readings = f
            .protocol(p.protocol)
            .filter(|pr| pr.reading.len() > 1)
            .map(|pr| {
                let own = self.own_drive(fi);
                pr.reading
                    .iter()
                    .enumerate()
                    .map(|(i, r)| ReadingValue {
                        reading: r.name.clone(),
                        simulated: if i == 0 {
                            value(runs.of(own, p.protocol, None))
                        } else {
                            value(runs.of(own, p.protocol, Some(&r.name)))
                        },
                    })
                    .collect()
            })
            .unwrap_or_default();
        Judged {
            kind: "figure",
            readings,
            preset: f.preset.clone(),
            figure: p.id.into(),
            source: src.map(|s| s.id.clone()).unwrap_or_default(),
            publication: src
                .map(|s| format!("{}: {}", s.publication, s.title))
                .unwrap_or_default(),
            url: src.and_then(|s| s.url.clone()).unwrap_or_default(),
            state: p.state,
            metric: p.metric,
            unit: p.metric.unit(),
            published: p.value,
            simulated,
            error: simulated.map(|v| (v - p.value) / p.value),
            held_out: held_out && !other,
            fold: self.drives.get(drive).and_then(|d| d.fold.clone()),
            from_curve: p.from_curve,
            other_drive: other,
        }
    }
}

impl Plan {
    /// The drive of file `fi`'s preset as it ships (no fold).
    fn own_drive(&self, fi: usize) -> usize {
        self.drives
            .iter()
            .position(|d| d.file == fi && d.fold.is_none())
            .unwrap_or(usize::MAX)
    }

    /// Shape `sh` of file `fi`, judged on the drive of its source (the
    /// fold that never saw it, if fitted), and under every reading of its
    /// protocol on the preset as it ships.
    fn judged_shape(&self, fi: usize, f: &CorpusFile, runs: &Runs, sh: &Shape) -> ShapeJudged {
        let src = f.source_of(&sh.protocol);
        let (drive, held_out) = src
            .and_then(|s| self.judged_by[fi].get(&s.id).copied())
            .unwrap_or((usize::MAX, false));
        let check = sh.assertion().ok();
        let eval = |r: Option<&BTreeMap<String, StepResult>>| -> (Option<bool>, String) {
            let (Some(a), Some(r)) = (&check, r) else {
                return (None, "not run".into());
            };
            let get = |step: &str, m: &str| r.get(step).and_then(|s| s.measure(m));
            let missing = a.refs().iter().any(|(st, m)| get(st, m).is_none());
            let (ok, detail) = a.check(&get);
            (if missing { None } else { Some(ok) }, detail)
        };
        let (held, detail) = eval(runs.of(drive, &sh.protocol, None));
        let readings = f
            .protocol(&sh.protocol)
            .filter(|p| p.reading.len() > 1)
            .map(|p| {
                let own = self.own_drive(fi);
                p.reading
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let rd = (i > 0).then_some(r.name.as_str());
                        ReadingValue {
                            reading: r.name.clone(),
                            simulated: eval(runs.of(own, &sh.protocol, rd))
                                .0
                                .map(|h| f64::from(u8::from(h))),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        ShapeJudged {
            kind: "shape",
            preset: f.preset.clone(),
            shape: sh.id.clone(),
            source: src.map(|s| s.id.clone()).unwrap_or_default(),
            statement: sh.statement.clone(),
            state: sh.state,
            check: sh.check.clone(),
            detail,
            held,
            at_least: sh.at_least,
            held_out,
            fold: self.drives.get(drive).and_then(|d| d.fold.clone()),
            readings,
        }
    }
}

/// A published figure (or a curve's printed average) and where it was
/// measured: a protocol's step (and job).
#[derive(Clone, Copy)]
struct Published<'a> {
    id: &'a str,
    protocol: &'a str,
    step: &'a str,
    job: Option<&'a str>,
    state: State,
    metric: Metric,
    /// In the metric's unit.
    value: f64,
    from_curve: bool,
}
