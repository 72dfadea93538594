//! The search: each fold's free parameters fitted to its training figures
//! by minimising [`OBJECTIVE`](super::OBJECTIVE) over simulator runs of
//! their protocols, and the held-out figures the folds give.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use super::{CAP, FitRecord, Fitted, Fold, OBJECTIVE};
use crate::ValidateError;
use crate::corpus::{CorpusFile, Metric};
use crate::run::{self, StepResult, Task};
use vssd_common::expr::Assertion;
use vssd_profile::{FitParam, Profile};

/// One figure (or shape) the objective looks at: where its value comes from.
#[derive(Debug, Clone)]
struct Target {
    id: String,
    source: String,
    protocol: usize,
    what: Measure,
    published: f64,
}

/// What a target reads off its protocol's run.
#[derive(Debug, Clone)]
enum Measure {
    /// A figure's metric of a step (and job).
    Figure {
        step: String,
        job: Option<String>,
        metric: Metric,
    },
    /// A shape's check: 1 held, e^-CAP (a figure at the cap) not held.
    Shape(Assertion),
}

impl Measure {
    /// Its simulated value in `r` (a protocol's step results).
    fn value(&self, r: &BTreeMap<String, StepResult>) -> Option<f64> {
        match self {
            Measure::Figure { step, job, metric } => r
                .get(step)
                .and_then(|r| r.value(*metric, job.as_deref()))
                .filter(|x| x.is_finite() && *x > 0.0),
            Measure::Shape(a) => {
                let get = |st: &str, m: &str| r.get(st).and_then(|s| s.measure(m));
                Some(if a.check(&get).0 { 1.0 } else { (-CAP).exp() })
            }
        }
    }
}

/// The figures of `f` a fit can use: every figure with a protocol, every
/// curve's printed average, and every shape judged on this drive alone
/// (a shape not held costs what a figure off by the cap does).
fn targets(f: &CorpusFile) -> Vec<Target> {
    let pidx = |id: &str| f.protocol.iter().position(|p| p.id == id);
    let mut out = Vec::new();
    // Another drive's figures are never fitted to.
    let pidx = |id: &str| pidx(id).filter(|&p| f.protocol[p].other_drive.is_none());
    for g in &f.figure {
        if let (Some(p), Some(k)) = (pidx(&g.protocol), g.metric.factor(&g.unit)) {
            out.push(Target {
                id: g.id.clone(),
                source: f.protocol[p].source.clone(),
                protocol: p,
                what: Measure::Figure {
                    step: g.step.clone(),
                    job: g.job.clone(),
                    metric: g.metric,
                },
                published: g.published * k,
            });
        }
    }
    for c in &f.curve {
        if let (Some(p), Some(m)) = (pidx(&c.protocol), c.published_mean) {
            out.push(Target {
                id: c.id.clone(),
                source: f.protocol[p].source.clone(),
                protocol: p,
                what: Measure::Figure {
                    step: c.step.clone(),
                    job: None,
                    metric: c.y,
                },
                published: m,
            });
        }
    }
    for sh in f.shape.iter().filter(|s| s.at_least.is_none()) {
        if let (Some(p), Ok(a)) = (pidx(&sh.protocol), sh.assertion()) {
            out.push(Target {
                id: sh.id.clone(),
                source: f.protocol[p].source.clone(),
                protocol: p,
                what: Measure::Shape(a),
                published: 1.0,
            });
        }
    }
    out
}

/// The sources that may be held out: not spec sheets, not listed in
/// `fitted_to`, with at least one figure.
pub fn held_out_sources(f: &CorpusFile) -> Vec<String> {
    let used: BTreeSet<String> = targets(f).into_iter().map(|t| t.source).collect();
    f.source
        .iter()
        .filter(|s| !f.trained_on(s) && used.contains(&s.id))
        .map(|s| s.id.clone())
        .collect()
}

/// Settings of a fit.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Capacity to run the protocols at (bytes).
    pub capacity: u64,
    /// Most simulator evaluations per search.
    pub max_evals: usize,
    /// Protocols run at once.
    pub jobs: usize,
    /// Seed of the model and the jobs.
    pub seed: u64,
}

/// Evaluates parameter vectors on a set of training figures.
struct Objective<'a> {
    file: &'a CorpusFile,
    base: &'a Profile,
    params: &'a [FitParam],
    targets: Vec<Target>,
    protocols: Vec<usize>,
    settings: &'a Settings,
    origin: String,
    memo: HashMap<Vec<u64>, f64>,
    evals: usize,
}

impl Objective<'_> {
    /// Physical values of the normalised coordinates `u` (0..1 each).
    fn values(&self, u: &[f64]) -> Vec<f64> {
        self.params
            .iter()
            .zip(u)
            .map(|(p, &x)| {
                let x = x.clamp(0.0, 1.0);
                if p.log {
                    (p.min.ln() + x * (p.max.ln() - p.min.ln())).exp()
                } else {
                    p.min + x * (p.max - p.min)
                }
            })
            .collect()
    }

    /// The training figures' simulated values at physical values `v`.
    fn simulate(&self, v: &[f64]) -> Result<Vec<Option<f64>>, ValidateError> {
        let mut base = self.base.clone();
        for (fp, x) in self.params.iter().zip(v) {
            base = base.with_param(&fp.key, *x)?;
        }
        // Each protocol on the drive its source measured.
        let sized: Vec<(Profile, f64)> = self
            .protocols
            .iter()
            .map(|&i| run::drive_for(&base, &self.file.protocol[i], Some(self.settings.capacity)))
            .collect::<Result<_, _>>()?;
        let tasks: Vec<Task<'_>> = self
            .protocols
            .iter()
            .zip(&sized)
            .map(|(&i, (profile, scale))| Task {
                profile,
                scale: *scale,
                protocol: &self.file.protocol[i],
                reading: None,
                origin: self.origin.clone(),
            })
            .collect();
        let results = run::run_all(&tasks, self.settings.seed, self.settings.jobs, &|_, _| {})?;
        let by_protocol: BTreeMap<usize, &BTreeMap<String, StepResult>> =
            self.protocols.iter().copied().zip(results.iter()).collect();
        Ok(self
            .targets
            .iter()
            .map(|t| by_protocol.get(&t.protocol).and_then(|r| t.what.value(r)))
            .collect())
    }

    /// The objective at normalised coordinates `u` (memoised).
    fn loss(&mut self, u: &[f64]) -> Result<f64, ValidateError> {
        let key: Vec<u64> = u.iter().map(|x| x.to_bits()).collect();
        if let Some(l) = self.memo.get(&key) {
            return Ok(*l);
        }
        let v = self.values(u);
        // A point the profile's own rules refuse (a buffer smaller than
        // two pages per die, ...) is outside the search space.
        let l = match self.simulate(&v) {
            Ok(sims) => loss_of(&self.targets, &sims),
            Err(ValidateError::Profile(_)) => f64::INFINITY,
            Err(e) => return Err(e),
        };
        self.evals += 1;
        self.memo.insert(key, l);
        Ok(l)
    }
}

fn loss_of(targets: &[Target], sims: &[Option<f64>]) -> f64 {
    if targets.is_empty() {
        return 0.0;
    }
    let sum: f64 = targets
        .iter()
        .zip(sims)
        .map(|(t, s)| s.map_or(CAP, |s| (s / t.published).ln().abs().min(CAP)))
        .sum();
    sum / targets.len() as f64
}

/// Fit `base`'s free parameters to the figures of `file` not from
/// `leave_out`, starting from the middle of each range: a coordinate
/// pattern search on the normalised parameters (log-scaled where declared),
/// its step halved whenever no move along any axis improves the
/// objective, until the step is 1/128 of a range or the evaluations run
/// out. Deterministic: the same inputs give the same fit.
pub fn fit(
    file: &CorpusFile,
    base: &Profile,
    leave_out: Option<&str>,
    settings: &Settings,
    progress: &dyn Fn(usize, f64),
) -> Result<Fitted, ValidateError> {
    let targets: Vec<Target> = targets(file)
        .into_iter()
        .filter(|t| Some(t.source.as_str()) != leave_out)
        .collect();
    let protocols: Vec<usize> = targets
        .iter()
        .map(|t| t.protocol)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let trained_on: Vec<String> = targets
        .iter()
        .map(|t| t.source.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut obj = Objective {
        file,
        base,
        params: &base.fit,
        targets,
        protocols,
        settings,
        origin: file.origin.clone(),
        memo: HashMap::new(),
        evals: 0,
    };
    // Every search starts in the middle of each range (on its scale), not
    // at the preset's value: that value came from an earlier fit on every
    // source, and a fold starting there would carry what its left-out
    // source taught it wherever the remaining figures do not move it.
    let mut u = vec![0.5; base.fit.len()];
    let mut best = obj.loss(&u)?;
    progress(obj.evals, best);
    let mut step = 0.25;
    while step >= 1.0 / 128.0 && obj.evals < settings.max_evals {
        let mut improved = false;
        for i in 0..u.len() {
            for dir in [1.0, -1.0] {
                let mut c = u.clone();
                c[i] = (u[i] + dir * step).clamp(0.0, 1.0);
                if c[i] == u[i] || obj.evals >= settings.max_evals {
                    continue;
                }
                let l = obj.loss(&c)?;
                progress(obj.evals, best.min(l));
                if l < best - 1e-9 {
                    best = l;
                    u = c;
                    improved = true;
                    break;
                }
            }
        }
        if !improved {
            step /= 2.0;
        }
    }
    // As the profile holds them (integer fields rounded).
    let mut values = Vec::new();
    let mut p = base.clone();
    for (fp, v) in base.fit.iter().zip(obj.values(&u)) {
        p = p.with_param(&fp.key, v)?;
        values.push(p.param(&fp.key).unwrap_or(v));
    }
    Ok(Fitted {
        values,
        loss: best,
        figures: obj.targets.len(),
        trained_on,
        evaluations: obj.evals,
    })
}

/// The whole fit of a preset: one fold per held-out source, then the fit
/// on every figure. `progress(what, evaluations, best loss)`.
pub fn fit_preset(
    file: &CorpusFile,
    base: &Profile,
    settings: &Settings,
    progress: &dyn Fn(&str, usize, f64),
) -> Result<FitRecord, ValidateError> {
    if base.fit.is_empty() {
        return Err(ValidateError::Run {
            origin: base.name.clone(),
            msg: "the preset declares no free parameters ([[fit]])".into(),
        });
    }
    let sources = held_out_sources(file);
    let mut folds = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        let what = format!("fold {}/{} (without {s})", i + 1, sources.len());
        let fit = fit(file, base, Some(s), settings, &|n, l| progress(&what, n, l))?;
        folds.push(Fold {
            held_out: s.clone(),
            fit,
        });
    }
    let all = fit(file, base, None, settings, &|n, l| {
        progress("every source", n, l)
    })?;
    Ok(FitRecord {
        preset: base.name.clone(),
        capacity: settings.capacity.min(base.geometry.exported_capacity.0),
        objective: OBJECTIVE.into(),
        params: base.fit.iter().map(|p| p.key.clone()).collect(),
        all,
        fold: folds,
    })
}

/// A held-out figure as its fold simulated it, at the fit's capacity.
#[derive(Debug, Clone, Serialize)]
pub struct HeldOut {
    /// The figure.
    pub figure: String,
    /// Its source (the fold's left-out source).
    pub source: String,
    /// Published, in the metric's unit.
    pub published: f64,
    /// Simulated with the fold's values.
    pub simulated: Option<f64>,
}

/// Every held-out figure of `record`'s folds, simulated with its fold's
/// values at `settings.capacity`.
pub fn held_out_figures(
    file: &CorpusFile,
    base: &Profile,
    record: &FitRecord,
    settings: &Settings,
) -> Result<Vec<HeldOut>, ValidateError> {
    let mut out = Vec::new();
    for fold in &record.fold {
        let profile = record.apply(base, &fold.fit)?;
        let all = targets(file);
        let mine: Vec<Target> = all
            .into_iter()
            .filter(|t| t.source == fold.held_out)
            .collect();
        let obj = Objective {
            file,
            base: &profile,
            params: &[],
            protocols: mine
                .iter()
                .map(|t| t.protocol)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
            targets: mine,
            settings,
            origin: file.origin.clone(),
            memo: HashMap::new(),
            evals: 0,
        };
        let sims = obj.simulate(&[])?;
        for (t, s) in obj.targets.iter().zip(sims) {
            out.push(HeldOut {
                figure: t.id.clone(),
                source: t.source.clone(),
                published: t.published,
                simulated: s,
            });
        }
    }
    Ok(out)
}
