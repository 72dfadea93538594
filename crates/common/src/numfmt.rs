//! Numbers as the reports and charts print them.

/// `v` with `decimals` decimals and thousands separators; `n/a` when not finite.
pub fn fmt_num(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    let s = format!("{:.*}", decimals, v.abs());
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (s.as_str(), None),
    };
    let mut out = String::new();
    if v < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.push('-');
    }
    let digits = int.len();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (digits - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

/// A size in binary units: `512 B`, `128 KiB`, `1 GiB`, `74.5 GiB`.
pub fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = b as f64;
    let mut k = 0;
    while v >= 1024.0 && k < UNITS.len() - 1 {
        v /= 1024.0;
        k += 1;
    }
    let num = if k == 0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v < 10.0 {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else if v < 100.0 {
        let s = format!("{v:.1}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.0}")
    };
    format!("{num} {}", UNITS[k])
}

/// MB/s (10⁶ bytes/s) from bytes/s, without the unit.
pub fn fmt_mbs(bytes_s: f64) -> String {
    fmt_num(bytes_s / 1e6, 1)
}

/// A ratio, two decimals.
pub fn fmt_ratio(r: f64) -> String {
    fmt_num(r, 2)
}

/// A signed fraction as a percentage: `+6.8 %`.
pub fn fmt_pct(f: f64) -> String {
    if !f.is_finite() {
        return "n/a".into();
    }
    let sign = if f > 0.0 { "+" } else { "" };
    format!("{sign}{} %", fmt_num(f * 100.0, 1))
}

/// `s` cut to at most `max` characters, an ellipsis marking the cut.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}
