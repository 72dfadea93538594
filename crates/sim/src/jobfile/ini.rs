//! The INI reader: fio's job-file grammar, without any knowledge of options.
//!
//! `[section]` headers, `key=value` or bare `key` lines, comments starting
//! with `#` or `;` (whole lines, or after whitespace). What the options mean
//! is [`super::options`]' business.

use super::JobFileError;

/// One `key[=value]` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The key as written.
    pub key: String,
    /// The value, trimmed; `None` for a bare `key` line.
    pub value: Option<String>,
    /// The value as fio keeps it to print (`job options` in its JSON): the
    /// text after `=`, blanks at its end removed but not at its start.
    pub raw_value: Option<String>,
    /// 1-based line number.
    pub line: usize,
}

/// A `[name]` section and its entries in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The name between the brackets, trimmed (`global` for globals).
    pub name: String,
    /// 1-based line number of the header.
    pub line: usize,
    /// Its entries.
    pub entries: Vec<Entry>,
}

impl Section {
    /// Whether this is a `[global]` section.
    pub fn is_global(&self) -> bool {
        self.name == "global"
    }
}

fn syntax(origin: &str, line: usize, msg: String) -> JobFileError {
    JobFileError::Syntax {
        origin: origin.into(),
        line,
        msg,
    }
}

/// Split a job file's text into sections; `origin` names it in messages.
pub fn read(text: &str, origin: &str) -> Result<Vec<Section>, JobFileError> {
    let mut out: Vec<Section> = Vec::new();
    for (idx, raw) in text.lines().enumerate() {
        let lineno = idx + 1;
        let line = strip_comment(raw).trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let Some(name) = rest.strip_suffix(']') else {
                return Err(syntax(
                    origin,
                    lineno,
                    format!("section header {line:?} lacks a closing `]`"),
                ));
            };
            let name = name.trim();
            if name.is_empty() {
                return Err(syntax(origin, lineno, "empty section name".into()));
            }
            out.push(Section {
                name: name.to_string(),
                line: lineno,
                entries: Vec::new(),
            });
            continue;
        }
        if line.starts_with("include ") || line == "include" {
            return Err(syntax(
                origin,
                lineno,
                "`include` directives are not supported; pass several job files instead".into(),
            ));
        }
        let (key, value, raw_value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().to_string()), Some(v.to_string())),
            None => (line, None, None),
        };
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(syntax(
                origin,
                lineno,
                format!("expected `key=value`, `key` or `[section]`, found {line:?}"),
            ));
        }
        if value.as_deref().is_some_and(|v| v.contains('$')) {
            return Err(JobFileError::Option {
                origin: origin.into(),
                line: lineno,
                key: key.into(),
                msg: "`$` substitutions (environment variables, $ncpus, ...) are not supported"
                    .into(),
            });
        }
        let Some(sec) = out.last_mut() else {
            return Err(syntax(
                origin,
                lineno,
                format!("option `{key}` outside any section"),
            ));
        };
        sec.entries.push(Entry {
            key: key.to_string(),
            value,
            raw_value,
            line: lineno,
        });
    }
    Ok(out)
}

/// Remove a `#` or `;` comment: a whole line, or trailing after whitespace.
fn strip_comment(line: &str) -> &str {
    let t = line.trim_start();
    if t.starts_with('#') || t.starts_with(';') {
        return "";
    }
    let b = line.as_bytes();
    for i in 1..b.len() {
        if (b[i] == b'#' || b[i] == b';') && b[i - 1].is_ascii_whitespace() {
            return &line[..i];
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_entries_and_comments() {
        let s = read(
            "; c\n[global]\nbs=4k # trailing\n\n[a]\ndirect\nx = y;z\n",
            "t",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        assert!(s[0].is_global());
        assert_eq!(
            s[0].entries,
            [Entry {
                key: "bs".into(),
                value: Some("4k".into()),
                raw_value: Some("4k".into()),
                line: 3
            }]
        );
        assert_eq!((s[1].name.as_str(), s[1].line), ("a", 5));
        assert_eq!(s[1].entries[0].value, None);
        assert_eq!(s[1].entries[1].value.as_deref(), Some("y;z"));
        assert_eq!(s[1].entries[1].raw_value.as_deref(), Some(" y;z"));
    }
}
