//! `vssd calibrate PRESET --fit`: fit the preset (or read a record of a
//! fit, `--record`), print its values, folds and held-out figures, and
//! write the record (`--write`) or the fitted values into the preset's
//! file (`--update-preset`).

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::Path;

use super::FitRecord;
use super::search::{HeldOut, Settings, fit_preset, held_out_figures};
use crate::ValidateError;
use crate::corpus::{self, CorpusFile};
use vssd_profile::Profile;

/// `vssd calibrate PRESET --fit`.
pub fn run_cli(a: vssd_sim::calibrate::CalibrateArgs) -> Result<(), ValidateError> {
    let Some(name) = a.profile.as_deref() else {
        return Err(ValidateError::NoCorpus(String::new(), String::new()));
    };
    let base = Profile::load(name)?;
    let file = corpus_file(&base, name, a.corpus.as_deref())?;
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
    let bar = std::io::stderr().is_terminal().then(spinner);
    let record = match &a.record {
        Some(path) => recorded(path, &base)?,
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
    let mut o = report(&base, &record, &held);
    if let Some(dir) = &a.write {
        let path = write_record(dir, &record)?;
        let _ = writeln!(o, "  fit record written to {}", path.display());
    }
    if let Some(path) = &a.update_preset {
        update_preset(path, &record)?;
        let _ = writeln!(o, "  fitted values written into {}", path.display());
    }
    vssd_common::cli_out::print(&o)?;
    Ok(())
}

/// The corpus file of preset `base` (asked for as `name`: the corpus file
/// names the preset, or the profile file given).
fn corpus_file(
    base: &Profile,
    name: &str,
    dir: Option<&Path>,
) -> Result<CorpusFile, ValidateError> {
    let files = corpus::load(dir)?;
    let known = files
        .iter()
        .map(|f| f.preset.clone())
        .collect::<Vec<_>>()
        .join(", ");
    files
        .into_iter()
        .find(|f| f.preset == base.name || f.preset == name)
        .ok_or_else(|| ValidateError::NoCorpus(base.name.clone(), known))
}

/// The fit's progress on a terminal.
fn spinner() -> indicatif::ProgressBar {
    let b = indicatif::ProgressBar::new_spinner();
    b.set_style(
        indicatif::ProgressStyle::with_template("{spinner} fit {msg} ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    b.enable_steady_tick(std::time::Duration::from_millis(120));
    b
}

/// The fit record at `path` (`--record`), which must be a fit of `base`
/// over its free parameters.
fn recorded(path: &Path, base: &Profile) -> Result<FitRecord, ValidateError> {
    let origin = path.display().to_string();
    let text = corpus::read_toml_file(path)?;
    let r = FitRecord::parse(&text, &origin)?;
    let other = r.other_params(base);
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
    // Checked before anything runs or is written.
    r.check_values(base)
        .map_err(|msg| ValidateError::Corpus { origin, msg })?;
    Ok(r)
}

/// What the fit found, as printed: each parameter (preset, fitted, range),
/// the fit on every source and each fold, the held-out figures and their
/// summary.
fn report(base: &Profile, record: &FitRecord, held: &[HeldOut]) -> String {
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
    o.push_str(&held_out_text(held));
    o
}

/// The held-out figures, each from the fold without its source, and their
/// median error at this capacity.
fn held_out_text(held: &[HeldOut]) -> String {
    let mut o = String::new();
    let mut errs = Vec::new();
    let _ = writeln!(
        o,
        "  held-out figures (each from the fold without its source):"
    );
    for h in held {
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
    o
}

/// `--write DIR`: the record as `DIR/PRESET.toml`; its path.
fn write_record(dir: &Path, record: &FitRecord) -> Result<std::path::PathBuf, ValidateError> {
    std::fs::create_dir_all(dir).map_err(|e| ValidateError::Io {
        path: dir.display().to_string(),
        source: e,
    })?;
    let path = dir.join(format!("{}.toml", record.preset));
    std::fs::write(&path, record.to_toml()).map_err(|e| ValidateError::Io {
        path: path.display().to_string(),
        source: e,
    })?;
    Ok(path)
}

/// `--update-preset FILE`: the fitted values written into the profile
/// file, its comments and layout kept, checked to load back as the fit.
fn update_preset(path: &Path, record: &FitRecord) -> Result<(), ValidateError> {
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
    std::fs::write(path, new).map_err(io)
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
