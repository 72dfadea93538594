//! How faithful the presets are: `vssd validate` (the presets against
//! what independent people measured on their drives) and `vssd calibrate
//! --fit` (the presets' free parameters fitted to those measurements,
//! leave-one-source-out).
//!
//! The corpus ([`corpus`], `validation/*.toml`) holds every published
//! figure found for each named preset's drive, with its source and the
//! protocol that produced it written as simulator input. Each protocol
//! runs on a fresh simulated drive ([`run`]); each figure's simulated value
//! is compared with the published one ([`judge`]). A figure is *held out*
//! unless the preset was fitted to its source (its spec sheet, which `vssd
//! calibrate` checks, or a source the corpus file lists in `fitted_to`):
//! the summaries count held-out figures only. [`fit`] fits a preset and
//! keeps the records (`validation/fits/*.toml`) by which `vssd validate`
//! judges each held-out figure on the fold that never saw its source;
//! [`text()`] and [`chart`] show the result. See `docs/validation.md`.

pub mod chart;
pub mod corpus;
pub mod fit;
mod format;
pub mod judge;
mod load;
pub mod run;
pub mod shape;
pub mod text;

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;
use thiserror::Error;

pub use judge::{Judged, PresetResult, Report, Summary, validate};
pub use text::text;
use vssd_common::cli_out::{self, StdoutError};
use vssd_profile::ProfileError;
use vssd_profile::size::parse_size;

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
    /// Write each preset's summary (figures, held-out median and share
    /// within ±25 %, shapes held) to this file, the one `vssd profiles`
    /// shows (`validation/summary.toml`). Needs --all at full size.
    #[arg(long, value_name = "FILE")]
    pub write_summary: Option<PathBuf>,
}

/// `vssd validate`.
pub fn run_cli(a: ValidateArgs) -> Result<(), ValidateError> {
    if a.write_summary.is_some() && (!a.all || a.capacity.is_some() || !a.presets.is_empty()) {
        return Err(ValidateError::Run {
            origin: "--write-summary".into(),
            msg: "the summary vssd profiles shows is of every preset at its own size: use it with --all and without --capacity".into(),
        });
    }
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
            if let Some(svg) = chart::of_preset(p) {
                let path = dir.join(format!("{}.svg", p.preset));
                std::fs::write(&path, svg).map_err(|e| ValidateError::Io {
                    path: path.display().to_string(),
                    source: e,
                })?;
            }
        }
    }
    if let Some(path) = &a.write_summary {
        write_summary(path, &report)?;
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
mod tests;

/// `--write-summary`: each preset's line of `validation/summary.toml`.
fn write_summary(path: &std::path::Path, r: &Report) -> Result<(), ValidateError> {
    use vssd_profile::validated::{Summary as Profiles, Validated};
    let mut s = Profiles {
        made_by: "vssd validate --all --write-summary validation/summary.toml (every preset at its own capacity, the fit records of validation/fits)".into(),
        ..Profiles::default()
    };
    for p in &r.presets {
        s.preset.insert(
            p.preset.clone(),
            Validated {
                figures: p.figures.len(),
                held_out: p.held_out.figures,
                median_abs_error: p.held_out.median_abs_error,
                within_25pct: p.held_out.within_25pct,
                shapes: p.shapes_held.shapes,
                shapes_held: p.shapes_held.held,
            },
        );
    }
    let text = toml::to_string(&s).map_err(|e| ValidateError::Run {
        origin: path.display().to_string(),
        msg: e.to_string(),
    })?;
    std::fs::write(path, text).map_err(|e| ValidateError::Io {
        path: path.display().to_string(),
        source: e,
    })
}
