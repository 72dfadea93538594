//! Size strings: `4k`, `128KiB`, `16G`, `16GB`, `1.5GiB`, `512`.
//!
//! **vssd's convention** (command line and profile TOML), [`parse_size`]:
//! a bare unit letter or an IEC unit is binary, a unit ending in `B` without
//! `i` is decimal (SI), in any letter case:
//!
//! | written | means |
//! |---|---|
//! | `16G`, `16g`, `16GiB`, `16Gi` | 16 × 2^30 = 17179869184 bytes |
//! | `16GB`, `16gb` | 16 × 10^9 = 16000000000 bytes |
//! | `4k`, `4KiB` | 4096 bytes; `4kB`, `4KB` = 4000 bytes |
//!
//! This is QEMU's reading of `16G` and the SI/IEC standards' reading of
//! `GB` and `GiB`. Where vssd applies a capacity it prints the exact byte
//! count ([`describe_size`]).
//!
//! **fio job files** follow fio instead ([`parse_size_fio`]): with fio's
//! default `kb_base=1024`, `k` and `KB` are 1024 and `KiB` is 1000 (fio's
//! "compatibility mode"); with `kb_base=1000`, `k` and `KB` are 1000 and
//! `KiB` is 1024. A job file must mean in the simulator what it means to fio.

use thiserror::Error;

/// A size string could not be parsed.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SizeError {
    /// The string is empty.
    #[error("empty size")]
    Empty,
    /// The number part is not a number.
    #[error("invalid size {0:?}: expected a number with an optional unit (4k, 128KiB, 16G, 16GB)")]
    Invalid(String),
    /// The unit is unknown.
    #[error(
        "invalid size {0:?}: unknown unit {1:?} (binary: k, m, g, t, p or KiB, MiB, GiB, TiB, PiB; decimal: kB, MB, GB, TB, PB)"
    )]
    Suffix(String, String),
    /// The value does not fit in 64 bits.
    #[error("size {0:?} is too large")]
    Overflow(String),
}

/// How a unit is written: bare letter, IEC (`KiB`, `Ki`) or SI (`KB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Bare,
    Iec,
    Si,
}

/// Split `s` into number and unit: (number text, power of the unit, style).
fn split(s: &str) -> Result<(&str, u32, Style), SizeError> {
    let t = s.trim();
    if t.is_empty() {
        return Err(SizeError::Empty);
    }
    let at = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(at);
    if num.is_empty() {
        return Err(SizeError::Invalid(s.to_string()));
    }
    let u = unit.trim().to_ascii_lowercase();
    let (letter, rest) = match u.char_indices().nth(1) {
        Some((i, _)) => u.split_at(i),
        None => (u.as_str(), ""),
    };
    let pow = match letter {
        "" => return Ok((num, 0, Style::Bare)),
        "b" if rest.is_empty() => return Ok((num, 0, Style::Bare)),
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        "p" => 5,
        _ => return Err(SizeError::Suffix(s.to_string(), unit.trim().to_string())),
    };
    let style = match rest {
        "" => Style::Bare,
        "i" | "ib" => Style::Iec,
        "b" => Style::Si,
        _ => return Err(SizeError::Suffix(s.to_string(), unit.trim().to_string())),
    };
    Ok((num, pow, style))
}

fn scale(s: &str, num: &str, base: u64, pow: u32) -> Result<u64, SizeError> {
    let mult = base
        .checked_pow(pow)
        .ok_or_else(|| SizeError::Overflow(s.to_string()))?;
    if num.contains('.') {
        let v: f64 = num.parse().map_err(|_| SizeError::Invalid(s.to_string()))?;
        let bytes = v * mult as f64;
        if !bytes.is_finite() || bytes >= u64::MAX as f64 {
            return Err(SizeError::Overflow(s.to_string()));
        }
        Ok(bytes.round() as u64)
    } else {
        let v: u64 = num.parse().map_err(|_| SizeError::Invalid(s.to_string()))?;
        v.checked_mul(mult)
            .ok_or_else(|| SizeError::Overflow(s.to_string()))
    }
}

/// Parse a size in vssd's convention (see the module documentation):
/// `16G` and `16GiB` are binary, `16GB` is decimal.
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let (num, pow, style) = split(s)?;
    let base = if style == Style::Si { 1000 } else { 1024 };
    scale(s, num, base, pow)
}

/// Parse a size as fio does with the given `kb_base` (1024, fio's default,
/// or 1000): with 1024, `k`/`KB` are 1024 and `KiB` is 1000; with 1000 the
/// other way round.
pub fn parse_size_fio(s: &str, kb_base: u32) -> Result<u64, SizeError> {
    let (num, pow, style) = split(s)?;
    let (plain, iec) = if kb_base == 1000 {
        (1000, 1024)
    } else {
        (1024, 1000)
    };
    let base = if style == Style::Iec { iec } else { plain };
    scale(s, num, base, pow)
}

/// Whether `s` is written with an IEC unit (`KiB`, `Gi`, ...).
pub fn has_iec_unit(s: &str) -> bool {
    matches!(split(s), Ok((_, p, Style::Iec)) if p > 0)
}

/// Format bytes with a binary suffix, exact when possible (`128KiB`, `1.50GiB`).
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 5] = [
        ("PiB", 1 << 50),
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (name, unit) in UNITS {
        if bytes >= unit {
            if bytes.is_multiple_of(unit) {
                return format!("{}{}", bytes / unit, name);
            }
            return format!("{:.2}{}", bytes as f64 / unit as f64, name);
        }
    }
    format!("{bytes}B")
}

/// A size for people, with its exact byte count: `16GiB (17179869184 bytes)`.
pub fn describe_size(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    format!("{} ({bytes} bytes)", format_size(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_suffixes() {
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("128KiB"), Ok(128 * 1024));
        assert_eq!(parse_size("16G"), Ok(16 << 30));
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size(" 2m "), Ok(2 << 20));
    }

    #[test]
    fn one_convention_binary_unless_si() {
        assert_eq!(parse_size("16g"), Ok(16 << 30));
        assert_eq!(parse_size("16Gi"), Ok(16 << 30));
        assert_eq!(parse_size("16GB"), Ok(16_000_000_000));
        assert_eq!(parse_size("16gb"), Ok(16_000_000_000));
        assert_eq!(parse_size("4kB"), Ok(4000));
        assert_eq!(parse_size("1TB"), Ok(1_000_000_000_000));
        assert_eq!(parse_size("512B"), Ok(512));
        assert_eq!(parse_size("512b"), Ok(512));
    }

    #[test]
    fn fio_units_follow_kb_base() {
        assert_eq!(parse_size_fio("4k", 1024), Ok(4096));
        assert_eq!(parse_size_fio("4KB", 1024), Ok(4096));
        assert_eq!(parse_size_fio("4KiB", 1024), Ok(4000));
        assert_eq!(parse_size_fio("4k", 1000), Ok(4000));
        assert_eq!(parse_size_fio("4KiB", 1000), Ok(4096));
        assert_eq!(parse_size_fio("1g", 1024), Ok(1 << 30));
        assert!(has_iec_unit("4KiB") && !has_iec_unit("4k") && !has_iec_unit("4"));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_size("").is_err());
        assert!(parse_size("k").is_err());
        assert!(parse_size("4x").is_err());
        assert!(parse_size("4kx").is_err());
        assert!(parse_size("4bb").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("99999999999P").is_err());
        assert!(parse_size("99999999999PB").is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(format_size(128 * 1024), "128KiB");
        assert_eq!(format_size(3 << 29), "1.50GiB");
        assert_eq!(format_size(100), "100B");
        assert_eq!(describe_size(16 << 30), "16GiB (17179869184 bytes)");
        assert_eq!(describe_size(512), "512 bytes");
    }

    proptest::proptest! {
        /// Whatever the text, parsing never panics; a bare number is bytes.
        #[test]
        fn never_panics(s in "[0-9.]{0,6}[a-zA-Z ]{0,4}", n in 0u64..1 << 40) {
            let _ = parse_size(&s);
            let _ = parse_size_fio(&s, 1000);
            proptest::prop_assert_eq!(parse_size(&n.to_string()), Ok(n));
        }
    }
}
