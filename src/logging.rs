//! Logs on standard error (`RUST_LOG` filters them, `info` by default): as
//! env_logger's text lines, or (`--log-format json`) as JSON lines for a
//! log shipper — one object per event with `timestamp` (RFC 3339, UTC,
//! microseconds), `level` (`ERROR`, `WARN`, `INFO`, `DEBUG`, `TRACE`),
//! `target` (the Rust module that logged it) and `message`.

use std::io::Write;

/// How log events are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// env_logger's lines: `[TIME LEVEL target] message`.
    #[default]
    Text,
    /// One JSON object per line: timestamp, level, target, message.
    Json,
}

/// Start logging in `format`.
pub fn init(format: LogFormat) {
    let mut b = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"));
    if format == LogFormat::Json {
        b.format(|buf, record| {
            let line = json_line(
                &buf.timestamp_micros().to_string(),
                record.level(),
                record.target(),
                &record.args().to_string(),
            );
            writeln!(buf, "{line}")
        });
    }
    b.init();
}

/// One event as a JSON object (no newline).
pub fn json_line(timestamp: &str, level: log::Level, target: &str, message: &str) -> String {
    let s = |v: &str| serde_json::Value::from(v).to_string();
    format!(
        "{{\"timestamp\":{},\"level\":{},\"target\":{},\"message\":{}}}",
        s(timestamp),
        s(level.as_str()),
        s(target),
        s(message)
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn one_object_per_event_whatever_the_message() {
        let l = json_line(
            "2026-01-02T03:04:05.000006Z",
            log::Level::Warn,
            "vssd::serve",
            "two\nlines, \"quoted\" \u{1} and \\",
        );
        assert!(!l.contains('\n'), "{l}");
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        assert_eq!(v["timestamp"], "2026-01-02T03:04:05.000006Z");
        assert_eq!(v["level"], "WARN");
        assert_eq!(v["target"], "vssd::serve");
        assert_eq!(v["message"], "two\nlines, \"quoted\" \u{1} and \\");
        assert_eq!(v.as_object().unwrap().len(), 4);
    }
}
