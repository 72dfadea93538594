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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ValidateError;
use super::corpus::{CorpusFile, Metric};
use super::run::{self, StepResult, Task};
use vssd_profile::{FitParam, Profile};

/// Every fit, as recorded (`validation/fits/*.toml`).
pub const BUILT_IN: &[(&str, &str)] = &[
    (
        "intel-x25m-g1",
        include_str!("../../../validation/fits/intel-x25m-g1.toml"),
    ),
    (
        "intel-x25m-g2",
        include_str!("../../../validation/fits/intel-x25m-g2.toml"),
    ),
    (
        "samsung-pb22j",
        include_str!("../../../validation/fits/samsung-pb22j.toml"),
    ),
    (
        "ocz-core-v2",
        include_str!("../../../validation/fits/ocz-core-v2.toml"),
    ),
    (
        "crucial-m4-128",
        include_str!("../../../validation/fits/crucial-m4-128.toml"),
    ),
    (
        "intel-320-120",
        include_str!("../../../validation/fits/intel-320-120.toml"),
    ),
    (
        "intel-510-120",
        include_str!("../../../validation/fits/intel-510-120.toml"),
    ),
    (
        "ocz-vertex3-120",
        include_str!("../../../validation/fits/ocz-vertex3-120.toml"),
    ),
    (
        "nvme-tlc-slc-cache",
        include_str!("../../../validation/fits/nvme-tlc-slc-cache.toml"),
    ),
];

/// The objective, in words (recorded with every fit).
pub const OBJECTIVE: &str = "mean over the training figures of |ln(simulated / published)|, capped at ln 3 (a figure off by more than a factor of three counts as that), each figure weighted 1";

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

// ------------------------------------------------------------ the search

/// One figure the objective looks at: where its value comes from.
#[derive(Debug, Clone)]
struct Target {
    id: String,
    source: String,
    protocol: usize,
    step: String,
    job: Option<String>,
    metric: Metric,
    published: f64,
}

/// The figures of `f` a fit can use: every figure with a protocol, and
/// every curve's printed average.
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
                step: g.step.clone(),
                job: g.job.clone(),
                metric: g.metric,
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
                step: c.step.clone(),
                job: None,
                metric: c.y,
                published: m,
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
                origin: self.origin.clone(),
            })
            .collect();
        let results = run::run_all(&tasks, self.settings.seed, self.settings.jobs, &|_, _| {})?;
        let by_protocol: BTreeMap<usize, &BTreeMap<String, StepResult>> =
            self.protocols.iter().copied().zip(results.iter()).collect();
        Ok(self
            .targets
            .iter()
            .map(|t| {
                by_protocol
                    .get(&t.protocol)
                    .and_then(|r| r.get(&t.step))
                    .and_then(|r| r.value(t.metric, t.job.as_deref()))
                    .filter(|x| x.is_finite() && *x > 0.0)
            })
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
        origin: format!("validation/{}.toml", file.preset),
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

// ------------------------------------------------------------- reporting

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
            origin: format!("validation/{}.toml", file.preset),
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

/// Set `values` of `keys` in the profile TOML `text`, keeping its comments
/// and layout (integers where the field holds an integer or a size).
pub fn update_toml(text: &str, keys: &[String], values: &[f64]) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| format!("{e}"))?;
    for (k, v) in keys.iter().zip(values) {
        let (section, field) = k
            .split_once('.')
            .ok_or_else(|| format!("{k}: not section.field"))?;
        if doc.get(section).is_none() {
            doc[section] = toml_edit::table();
        }
        let t = doc[section]
            .as_table_like_mut()
            .ok_or_else(|| format!("{section}: not a table"))?;
        let current = t.get(field).and_then(|i| i.as_value());
        let new = match current {
            Some(c) if c.is_float() => toml_edit::value(*v),
            // A size: written as one where it is exact ("16MiB").
            Some(c) if c.is_str() && v.round() >= 0.0 => {
                let text = vssd_profile::size::format_size(v.round() as u64);
                if text.contains('.') {
                    toml_edit::value(v.round() as i64)
                } else {
                    toml_edit::value(text)
                }
            }
            None if v.fract() != 0.0 => toml_edit::value(*v),
            _ => toml_edit::value(v.round() as i64),
        };
        // Replace the value in place: the key, and the comment lines above
        // it (the key's decor), stay; so does a comment after the value.
        let decor = current.map(|x| x.decor().clone());
        match t.get_mut(field) {
            Some(item) => *item = new,
            None => {
                t.insert(field, new);
            }
        }
        if let (Some(d), Some(val)) = (decor, t.get_mut(field).and_then(|i| i.as_value_mut())) {
            *val.decor_mut() = d;
        }
    }
    Ok(doc.to_string())
}

/// `vssd calibrate PRESET --fit`.
pub fn run_cli(a: vssd_sim::calibrate::CalibrateArgs) -> Result<(), ValidateError> {
    use std::fmt::Write as _;
    use std::io::IsTerminal;
    let Some(name) = a.profile.as_deref() else {
        return Err(ValidateError::NoCorpus(String::new(), String::new()));
    };
    let base = Profile::load(name)?;
    let files = super::corpus::load(a.corpus.as_deref())?;
    let known = files
        .iter()
        .map(|f| f.preset.clone())
        .collect::<Vec<_>>()
        .join(", ");
    // The corpus file names the preset, or the profile file given.
    let file = files
        .into_iter()
        .find(|f| f.preset == base.name || f.preset == name)
        .ok_or_else(|| ValidateError::NoCorpus(base.name.clone(), known))?;
    let settings = Settings {
        capacity: a.capacity.unwrap_or(4 << 30),
        max_evals: a.evals.max(1),
        jobs: a.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        }),
        seed: 0,
    };
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_style(
            indicatif::ProgressStyle::with_template("{spinner} fit {msg} ({elapsed})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        b.enable_steady_tick(std::time::Duration::from_millis(120));
        b
    });
    let record = match &a.record {
        Some(path) => {
            let origin = path.display().to_string();
            let text = super::corpus::read_toml_file(path)?;
            let r = FitRecord::parse(&text, &origin)?;
            let other = r.other_params(&base);
            if r.preset != base.name || other.is_some() {
                return Err(ValidateError::Corpus {
                    origin,
                    msg: format!(
                        "a fit of {} over [{}], not of {} over [{}]",
                        r.preset,
                        r.params.join(", "),
                        base.name,
                        other.unwrap_or_else(|| r.params.join(", "))
                    ),
                });
            }
            r
        }
        None => fit_preset(&file, &base, &settings, &|what, n, l| {
            if let Some(b) = &bar {
                b.set_message(format!("{what}: {n} evaluations, loss {l:.3}"));
            }
        })?,
    };
    if let Some(b) = &bar {
        b.set_message("held-out figures".to_string());
    }
    let held = held_out_figures(&file, &base, &record, &settings)?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}: fitted at {} bytes, objective: {}",
        record.preset, record.capacity, record.objective
    );
    let _ = writeln!(
        o,
        "  {:<34} {:>14} {:>14}   range",
        "parameter", "preset", "fitted"
    );
    for (i, p) in base.fit.iter().enumerate() {
        let _ = writeln!(
            o,
            "  {:<34} {:>14.6} {:>14.6}   {}..{}{}",
            p.key,
            base.param(&p.key).unwrap_or(f64::NAN),
            record.all.values[i],
            p.min,
            p.max,
            if p.log { " (log)" } else { "" }
        );
    }
    let _ = writeln!(
        o,
        "  every source: {} figures, loss {:.3} ({} evaluations)",
        record.all.figures, record.all.loss, record.all.evaluations
    );
    for f in &record.fold {
        let _ = writeln!(
            o,
            "  without {:<28} {} figures, loss {:.3}, values [{}]",
            f.held_out,
            f.fit.figures,
            f.fit.loss,
            f.fit
                .values
                .iter()
                .map(|v| format!("{v:.4}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let mut errs = Vec::new();
    let _ = writeln!(
        o,
        "  held-out figures (each from the fold without its source):"
    );
    for h in &held {
        let e = h.simulated.map(|s| (s - h.published) / h.published);
        if let Some(e) = e {
            errs.push(e.abs());
        }
        let _ = writeln!(
            o,
            "    {:<44} {:<26} {:>10.4} {:>10} {:>8}",
            h.figure,
            h.source,
            h.published,
            h.simulated.map_or("—".into(), |s| format!("{s:.4}")),
            e.map_or("—".into(), |e| format!("{:+.0} %", e * 100.0))
        );
    }
    errs.sort_by(f64::total_cmp);
    if !errs.is_empty() {
        let med = if errs.len() % 2 == 1 {
            errs[errs.len() / 2]
        } else {
            (errs[errs.len() / 2 - 1] + errs[errs.len() / 2]) / 2.0
        };
        let within = errs.iter().filter(|e| **e <= 0.25).count() as f64 / errs.len() as f64;
        let _ = writeln!(
            o,
            "  held out at this capacity: {} figures, median |error| {:.0} %, within ±25 %: {:.0} %",
            errs.len(),
            med * 100.0,
            within * 100.0
        );
    }
    if let Some(dir) = &a.write {
        std::fs::create_dir_all(dir).map_err(|e| ValidateError::Io {
            path: dir.display().to_string(),
            source: e,
        })?;
        let path = dir.join(format!("{}.toml", record.preset));
        std::fs::write(&path, record.to_toml()).map_err(|e| ValidateError::Io {
            path: path.display().to_string(),
            source: e,
        })?;
        let _ = writeln!(o, "  fit record written to {}", path.display());
    }
    if let Some(path) = &a.update_preset {
        let io = |e: std::io::Error| ValidateError::Io {
            path: path.display().to_string(),
            source: e,
        };
        let text = std::fs::read_to_string(path).map_err(io)?;
        let new = update_toml(&text, &record.params, &record.all.values).map_err(|msg| {
            ValidateError::Corpus {
                origin: path.display().to_string(),
                msg,
            }
        })?;
        // What we write must still be this profile, with the fitted values.
        let check = Profile::from_toml(&new, &path.display().to_string())?;
        if record.stale(&check).is_some() {
            return Err(ValidateError::Corpus {
                origin: path.display().to_string(),
                msg: "the updated file does not hold the fitted values".into(),
            });
        }
        std::fs::write(path, new).map_err(io)?;
        let _ = writeln!(o, "  fitted values written into {}", path.display());
    }
    vssd_common::cli_out::print(&o)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::update_toml;

    #[test]
    fn an_update_keeps_comments_and_writes_each_kind_of_number() {
        let text = "[host]\n# Why this value.\nwrite_command_ns = 100 # after\n\n[nand]\n# Program time.\nt_prog_us = 900.0\n\n[buffer]\n# A size.\nsize = \"1MiB\"\n";
        let keys: Vec<String> = [
            "host.write_command_ns",
            "nand.t_prog_us",
            "buffer.size",
            "host.read_ahead_bytes",
            "mapping.cache_bytes",
        ]
        .iter()
        .map(|k| k.to_string())
        .collect();
        let out = update_toml(text, &keys, &[250.4, 1100.0, 2097152.0, 131072.0, 1000.5]).unwrap();
        for want in [
            "# Why this value.\nwrite_command_ns = 250 # after\n",
            "# Program time.\nt_prog_us = 1100.0\n",
            "# A size.\nsize = \"2MiB\"\n",
            "read_ahead_bytes = 131072\n",
            "[mapping]\ncache_bytes = 1000.5\n",
        ] {
            assert!(out.contains(want), "{want:?} not in:\n{out}");
        }
        // A size that is not a whole unit is written in bytes.
        let out = update_toml(text, &keys[2..3], &[1_000_000.0]).unwrap();
        assert!(out.contains("# A size.\nsize = 1000000\n"), "{out}");
        assert!(update_toml(text, &["nodot".to_string()], &[1.0]).is_err());
    }
}
