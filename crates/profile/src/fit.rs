//! `[[fit]]`: the free parameters of a preset, each with the physical
//! range it may take, which `vssd calibrate --fit` searches against the
//! published measurements of the drive (`docs/validation.md`). Everything
//! else in a preset is set from a source and is not fitted.
//!
//! A parameter is named by its dotted path in the profile's TOML
//! (`host.write_command_ns`, `mapping.cache_bytes`, ...): [`Profile::param`]
//! reads it, [`Profile::with_param`] returns a copy with it changed and
//! validated like any profile.

use serde::{Deserialize, Serialize};

use super::{Profile, ProfileError, invalid};

/// One free parameter and its range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitParam {
    /// Dotted path of a numeric field (`section.field`).
    pub key: String,
    /// Smallest physical value.
    pub min: f64,
    /// Largest physical value.
    pub max: f64,
    /// Search on a logarithmic scale (ranges spanning decades).
    #[serde(default)]
    pub log: bool,
    /// Why the range: what bounds it physically, and why the value is not
    /// published.
    pub why: String,
}

/// A numeric field's value in the profile's TOML (a size counts).
fn number(v: &toml::Value) -> Option<f64> {
    match v {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        toml::Value::String(s) => crate::size::parse_size(s).ok().map(|b| b as f64),
        _ => None,
    }
}

impl Profile {
    fn as_table(&self) -> Result<toml::Table, ProfileError> {
        toml::Table::try_from(self).map_err(|e| ProfileError::Parse {
            origin: self.name.clone(),
            message: e.to_string(),
        })
    }

    /// The profile's TOML table with `section.field` set to `v`.
    fn table_with(&self, section: &str, field: &str, v: toml::Value) -> Option<toml::Table> {
        let mut t = self.as_table().ok()?;
        let s = t
            .entry(section.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        s.as_table_mut()?.insert(field.to_string(), v);
        Some(t)
    }

    /// Whether `section.field` takes `v` (the serde shape only, no validation).
    fn takes(&self, section: &str, field: &str, v: toml::Value) -> bool {
        self.table_with(section, field, v)
            .is_some_and(|t| Profile::deserialize(t).is_ok())
    }

    /// The value of the numeric field at `key` (a dotted path), or `None`
    /// when there is no such numeric field. A field left at its default
    /// (and so not written) reads as that default, 0.
    pub fn param(&self, key: &str) -> Option<f64> {
        let (section, field) = key.split_once('.')?;
        let t = self.as_table().ok()?;
        match t.get(section) {
            Some(toml::Value::Table(s)) if s.contains_key(field) => s.get(field).and_then(number),
            Some(toml::Value::Table(_)) | None => {
                // Not written: at its default, if the profile has the field.
                (self.takes(section, field, toml::Value::Integer(0))
                    || self.takes(section, field, toml::Value::Float(0.0)))
                .then_some(0.0)
            }
            _ => None,
        }
    }

    /// A copy with the numeric field at `key` set to `value` (rounded for
    /// integer fields, to whole KiB for sizes), validated as any profile is.
    pub fn with_param(&self, key: &str, value: f64) -> Result<Profile, ProfileError> {
        self.with_params(&[(key, value)])
    }

    /// A copy with every field of `changes` set ([`Profile::with_param`]),
    /// validated once all are (so fields that must agree can change
    /// together: dies and exported capacity).
    pub fn with_params(&self, changes: &[(&str, f64)]) -> Result<Profile, ProfileError> {
        let mut t = self.as_table()?;
        for &(key, value) in changes {
            let bad = |allowed: &str| invalid(&self.name, key, value, allowed);
            if !value.is_finite() {
                return Err(bad("a finite number"));
            }
            let (section, field) = key
                .split_once('.')
                .filter(|(s, f)| !s.is_empty() && !f.is_empty() && !f.contains('.'))
                .ok_or_else(|| bad("a dotted path section.field"))?;
            let integer = |v: f64| {
                if v < 0.0 || v > i64::MAX as f64 {
                    None
                } else {
                    Some(toml::Value::Integer(v.round() as i64))
                }
            };
            let current = t.get(section).and_then(|s| s.get(field)).cloned();
            let new = match current {
                Some(toml::Value::Float(_)) => toml::Value::Float(value),
                Some(toml::Value::Integer(_)) => {
                    integer(value).ok_or_else(|| bad("a non-negative integer"))?
                }
                // A size: whole KiB.
                Some(toml::Value::String(s)) if crate::size::parse_size(&s).is_ok() => {
                    integer((value / 1024.0).round() * 1024.0)
                        .ok_or_else(|| bad("a size in bytes"))?
                }
                Some(_) => return Err(bad("a numeric field of the profile")),
                // Not written (at its default): whichever number it takes,
                // a float first (a float field also takes an integer, and
                // rounding 0.03 to 0 would change the value).
                None if self.takes(section, field, toml::Value::Float(value)) => {
                    toml::Value::Float(value)
                }
                None => match integer(value) {
                    Some(i) if self.takes(section, field, i.clone()) => i,
                    _ => return Err(bad("a numeric field of the profile")),
                },
            };
            let s = t
                .entry(section.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            s.as_table_mut()
                .ok_or_else(|| bad("a field of a section"))?
                .insert(field.to_string(), new);
        }
        let text = toml::to_string(&t).map_err(|e| ProfileError::Parse {
            origin: self.name.clone(),
            message: e.to_string(),
        })?;
        Profile::from_toml(&text, &self.name)
    }

    /// The `[[fit]]` declarations are sound: each names a numeric field,
    /// once, with a range that holds the profile's own value.
    pub(crate) fn validate_fit(&self, origin: &str) -> Result<(), ProfileError> {
        let mut seen = std::collections::BTreeSet::new();
        for (i, p) in self.fit.iter().enumerate() {
            let field = format!("fit[{i}] ({})", p.key);
            if !seen.insert(p.key.as_str()) {
                return Err(invalid(origin, &field, &p.key, "each key once"));
            }
            if !(p.min.is_finite() && p.max.is_finite() && p.min < p.max) {
                return Err(invalid(
                    origin,
                    &field,
                    format!("{}..{}", p.min, p.max),
                    "finite min < max",
                ));
            }
            if p.log && p.min <= 0.0 {
                return Err(invalid(origin, &field, p.min, "min > 0 on a log scale"));
            }
            if p.why.trim().is_empty() {
                return Err(invalid(
                    origin,
                    &field,
                    "\"\"",
                    "a reason for the range (`why`)",
                ));
            }
            // The value itself may lie outside the range on a scaled
            // drive (`--capacity` scales sizes): the presets' own values
            // are checked against their ranges by the presets' tests.
            self.param(&p.key)
                .ok_or_else(|| invalid(origin, &field, &p.key, "a numeric field of the profile"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_read_and_set_by_their_dotted_path() {
        let p = Profile::load("sata-mlc-2011").unwrap();
        assert_eq!(p.param("nand.t_prog_us"), Some(p.nand.t_prog_us));
        assert_eq!(p.param("buffer.size"), Some(p.buffer.size.0 as f64));
        // A section left at its default reads as the default.
        assert_eq!(p.param("mapping.cache_bytes"), Some(0.0));
        assert_eq!(p.param("trim.release_per_unit_written"), Some(0.0));
        assert_eq!(p.param("nand.nothing"), None);
        assert_eq!(p.param("name"), None);

        let q = p.with_param("host.command_overhead_ns", 12345.6).unwrap();
        assert_eq!(q.host.command_overhead_ns, 12346, "integers are rounded");
        let q = p.with_param("nand.t_prog_us", 987.5).unwrap();
        assert_eq!(q.nand.t_prog_us, 987.5);
        let q = p.with_param("buffer.size", 5_000_000.0).unwrap();
        assert_eq!(q.buffer.size.0, 5_000_192, "sizes are whole KiB");
        let q = p
            .with_param("mapping.cache_bytes", 4.0 * 1048576.0)
            .unwrap();
        assert_eq!(q.mapping.cache_bytes.0, 4 << 20);
        assert_eq!(q.param("mapping.cache_bytes"), Some((4 << 20) as f64));
        // Everything else is unchanged.
        assert_eq!(q.with_param("mapping.cache_bytes", 0.0).unwrap(), p);
        // A float field left unwritten keeps the fraction (it also takes an
        // integer, and 0.03 once rounded to 0, out of its range).
        let q = p.with_param("gc.bg_duty", 0.03).unwrap();
        assert_eq!(q.gc.bg_duty, 0.03);
    }

    #[test]
    fn bad_parameters_are_refused_with_the_reason() {
        let p = Profile::load("sata-mlc-2011").unwrap();
        for (key, v, want) in [
            ("nand", 1.0, "section.field"),
            ("nand.t_prog_us.x", 1.0, "section.field"),
            ("nand.nothing", 1.0, "numeric field"),
            ("host.interface", 1.0, "numeric field"),
            ("host.command_overhead_ns", -5.0, "non-negative"),
            ("host.command_overhead_ns", f64::NAN, "finite"),
            // The profile's own rules still apply.
            ("host.queue_depth", 0.0, "host.queue_depth"),
        ] {
            let e = p.with_param(key, v).unwrap_err().to_string();
            assert!(e.contains(want), "{key}: {e}");
        }
    }

    #[test]
    fn fit_declarations_are_checked() {
        let base = Profile::load("sata-mlc-2011").unwrap().to_toml();
        let with = |decl: &str| Profile::from_toml(&format!("{base}\n{decl}"), "t.toml");
        assert!(
            with("[[fit]]\nkey = \"nand.t_prog_us\"\nmin = 500\nmax = 2000\nwhy = \"w\"\n").is_ok()
        );
        for (decl, want) in [
            (
                "key = \"nand.t_prog_us\"\nmin = 2000\nmax = 500\nwhy = \"w\"",
                "min < max",
            ),
            (
                "key = \"nand.t_prog_us\"\nmin = 0\nmax = 500\nlog = true\nwhy = \"w\"",
                "log",
            ),
            (
                "key = \"nand.t_prog_us\"\nmin = 1\nmax = 500\nwhy = \" \"",
                "why",
            ),
            (
                "key = \"nand.bogus\"\nmin = 1\nmax = 500\nwhy = \"w\"",
                "numeric field",
            ),
        ] {
            let e = with(&format!("[[fit]]\n{decl}\n")).unwrap_err().to_string();
            assert!(e.contains(want), "{decl}: {e}");
        }
        let twice = "[[fit]]\nkey = \"nand.t_prog_us\"\nmin = 1\nmax = 5000\nwhy = \"w\"\n";
        let e = with(&format!("{twice}{twice}")).unwrap_err().to_string();
        assert!(e.contains("each key once"), "{e}");
    }

    #[test]
    fn every_preset_holds_its_free_parameters_inside_their_ranges() {
        for name in crate::presets::NAMES {
            let p = Profile::load(name).unwrap();
            for f in &p.fit {
                let v = p.param(&f.key).unwrap();
                assert!(
                    v >= f.min.floor() && v <= f.max.ceil(),
                    "{name}: {} = {v} outside {}..{}",
                    f.key,
                    f.min,
                    f.max
                );
            }
        }
    }
}
