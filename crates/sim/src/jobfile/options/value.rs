//! An option's value as written, and the kinds of value fio options take:
//! sizes (in the job's `kb_base`), integers, booleans, percentages, times.

use super::super::{JobFileError, SizeSpec};
use vssd_profile::size::parse_size_fio;

/// One `key=value` (or bare `key`) line being applied: the value and what
/// an error about it must name.
pub(super) struct Value<'a> {
    /// The option's name as written (errors name it so).
    pub key: &'a str,
    /// Its name in lower case: which of an option's names was used.
    pub name: &'a str,
    /// The value; `None` for a bare `key` line.
    pub text: Option<&'a str>,
    /// The job's `kb_base` when the line is applied (1024 or 1000).
    pub kb: u32,
    /// File name (or other origin label).
    pub origin: &'a str,
    /// 1-based line number.
    pub line: usize,
}

impl<'a> Value<'a> {
    /// An error about this option.
    pub fn err(&self, msg: impl Into<String>) -> JobFileError {
        err(self.origin, self.line, self.key, msg)
    }

    /// The value, which must be present and non-empty.
    pub fn need(&self) -> Result<&'a str, JobFileError> {
        self.text
            .filter(|v| !v.is_empty())
            .ok_or_else(|| self.err("needs a value"))
    }

    /// The value as written, or `default` on a bare `key` line.
    pub fn text_or(&self, default: &'a str) -> &'a str {
        self.text.unwrap_or(default)
    }

    /// A size in `v` (a part of the value), in the job's `kb_base`.
    pub fn parse_size(&self, v: &str) -> Result<u64, JobFileError> {
        parse_size_fio(v, self.kb).map_err(|x| self.err(x.to_string()))
    }

    /// The value as a size.
    pub fn size(&self) -> Result<u64, JobFileError> {
        self.parse_size(self.need()?)
    }

    /// The value as a non-negative integer.
    pub fn int(&self) -> Result<u64, JobFileError> {
        let v = self.need()?;
        v.parse::<u64>()
            .map_err(|_| self.err(format!("{v:?} is not a non-negative integer")))
    }

    /// The value as a boolean; a bare `key` line is `true`.
    pub fn flag(&self) -> Result<bool, JobFileError> {
        match self.text.map(|v| v.to_ascii_lowercase()) {
            None => Ok(true),
            Some(v) => match v.as_str() {
                "" | "1" | "true" | "yes" | "on" => Ok(true),
                "0" | "false" | "no" | "off" => Ok(false),
                _ => Err(self.err(format!("{v:?} is not a boolean (0 or 1)"))),
            },
        }
    }

    /// A size, or a percentage of the device (`50%`): in (0, 100], or
    /// [0, 100] if `zero_ok`.
    pub fn size_or_pct(&self, zero_ok: bool) -> Result<SizeSpec, JobFileError> {
        let v = self.need()?;
        if let Some(p) = v.strip_suffix('%') {
            let p: f64 = p
                .trim()
                .parse()
                .map_err(|_| self.err(format!("{v:?} is not a percentage")))?;
            if !((p > 0.0 || (zero_ok && p == 0.0)) && p <= 100.0) {
                let lo = if zero_ok { "[0" } else { "(0" };
                return Err(self.err(format!("{v:?}: a percentage must be in {lo}, 100]")));
            }
            Ok(SizeSpec::Percent(p))
        } else {
            Ok(SizeSpec::Bytes(self.parse_size(v)?))
        }
    }

    /// The value as a time ([`parse_time`]).
    pub fn time(&self, default_unit_ns: u64) -> Result<u64, JobFileError> {
        parse_time(self.need()?, default_unit_ns).map_err(|m| self.err(m))
    }
}

/// An error about option `key` at `origin:line`.
pub(super) fn err(origin: &str, line: usize, key: &str, msg: impl Into<String>) -> JobFileError {
    JobFileError::Option {
        origin: origin.into(),
        line,
        key: key.into(),
        msg: msg.into(),
    }
}

/// Parse a time such as `30`, `500ms`, `2m`, `10us`; a bare number is in
/// `default_unit_ns`.
pub fn parse_time(v: &str, default_unit_ns: u64) -> Result<u64, String> {
    let t = v.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("{v:?} is not a time (examples: 30, 500ms, 2m)"));
    }
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" => default_unit_ns,
        "ns" | "nsec" => 1,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" | "hour" => 3_600_000_000_000,
        "d" | "day" => 86_400_000_000_000,
        u => {
            return Err(format!(
                "{v:?}: unknown time unit {u:?} (us, ms, s, m, h, d)"
            ));
        }
    };
    let x: f64 = num
        .parse()
        .map_err(|_| format!("{v:?} is not a time (examples: 30, 500ms, 2m)"))?;
    let ns = x * mult as f64;
    if !ns.is_finite() || ns >= u64::MAX as f64 / 2.0 {
        return Err(format!("{v:?} is too long"));
    }
    Ok(ns.round() as u64)
}
