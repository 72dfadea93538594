//! Size strings as fio and QEMU write them: `4k`, `128KiB`, `16G`, `1.5GiB`, `512`.
//!
//! Following fio's default (`kb_base=1024`), `k`, `KB` and `KiB` all mean 1024;
//! an explicit decimal form is not needed by any job file we support.

use thiserror::Error;

/// A size string could not be parsed.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SizeError {
    /// The string is empty.
    #[error("empty size")]
    Empty,
    /// The number part is not a number.
    #[error("invalid size {0:?}: expected a number with an optional suffix (4k, 128KiB, 16G)")]
    Invalid(String),
    /// The suffix is unknown.
    #[error("invalid size {0:?}: unknown suffix {1:?} (use k, m, g, t, KiB, MiB, GiB, TiB)")]
    Suffix(String, String),
    /// The value does not fit in 64 bits.
    #[error("size {0:?} is too large")]
    Overflow(String),
}

/// Parse a size with an optional binary suffix into bytes.
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    if t.is_empty() {
        return Err(SizeError::Empty);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(SizeError::Invalid(s.to_string()));
    }
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        "p" | "pb" | "pib" => 1 << 50,
        other => return Err(SizeError::Suffix(s.to_string(), other.to_string())),
    };
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
    fn rejects_garbage() {
        assert!(parse_size("").is_err());
        assert!(parse_size("k").is_err());
        assert!(parse_size("4x").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("99999999999P").is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(format_size(128 * 1024), "128KiB");
        assert_eq!(format_size(3 << 29), "1.50GiB");
        assert_eq!(format_size(100), "100B");
    }
}
