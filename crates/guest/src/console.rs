//! Reading the guest's serial console: the markers printed by the `/init`
//! that `vm-images/build-guest.sh` writes (keep both in step):
//!
//! ```text
//! VSSD-BEGIN <token> kernel=... cpus=N uptime=S
//! <the script's stdout and stderr>
//! VSSD-EXIT <token> <status> uptime=S
//! ```
//!
//! and `VSSD-ERROR <token> <reason>` when init fails before the script runs.
//! The token is chosen per run, so a script printing marker-like text cannot
//! confuse the parser.

/// What the console shows so far.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Console {
    /// The script has started (`VSSD-BEGIN` seen).
    pub began: bool,
    /// The init reported a failure before running the script.
    pub init_error: Option<String>,
    /// The script finished: its output and exit status.
    pub finished: Option<(String, i32)>,
    /// The script's output so far, complete lines only (a prefix of the
    /// final output), once it has started.
    pub lines_so_far: Option<String>,
}

/// Parses a (possibly partial) console log for the markers of `token`.
pub(super) fn parse(log: &str, token: &str) -> Console {
    let text = log.replace('\r', "");
    let mut console = Console::default();
    let error_marker = format!("VSSD-ERROR {token} ");
    if let Some(pos) = find_line_start(&text, &error_marker, 0) {
        let rest = &text[pos + error_marker.len()..];
        // Only a complete line: the reason may still be being written.
        if let Some(end) = rest.find('\n') {
            console.init_error = Some(rest[..end].trim().to_string());
        }
    }
    let begin_marker = format!("VSSD-BEGIN {token} ");
    let Some(begin) = find_line_start(&text, &begin_marker, 0) else {
        return console;
    };
    let Some(eol) = text[begin..].find('\n') else {
        return console;
    };
    console.began = true;
    let out_start = begin + eol + 1;
    // The exit marker may follow output that did not end with a newline.
    let exit_marker = format!("VSSD-EXIT {token} ");
    let exit_rel = text[out_start..].find(&exit_marker);
    let so_far = &text[out_start..out_start + exit_rel.unwrap_or(text.len() - out_start)];
    let complete = so_far.rfind('\n').map_or(0, |i| i + 1);
    console.lines_so_far = Some(so_far[..complete].to_string());
    let Some(exit_rel) = exit_rel else {
        return console;
    };
    let exit_pos = out_start + exit_rel;
    let after = &text[exit_pos + exit_marker.len()..];
    let Some(line_end) = after.find('\n') else {
        return console; // status line not complete yet
    };
    let status = after[..line_end]
        .split_whitespace()
        .next()
        .and_then(|s| s.parse::<i32>().ok());
    if let Some(status) = status {
        console.finished = Some((text[out_start..exit_pos].to_string(), status));
    }
    console
}

/// Byte offset of the first occurrence of `needle` at the start of a line.
fn find_line_start(text: &str, needle: &str, from: usize) -> Option<usize> {
    let mut start = from;
    while let Some(rel) = text[start..].find(needle) {
        let pos = start + rel;
        if pos == 0 || text.as_bytes()[pos - 1] == b'\n' {
            return Some(pos);
        }
        start = pos + needle.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOT: &str = "[    0.000000] Linux version 6.1\r\n[ 1.0] Command line: vssd.token=t1\r\n";

    #[test]
    fn nothing_yet() {
        assert_eq!(parse(BOOT, "t1"), Console::default());
        // A begin line still being written does not count.
        assert!(!parse(&format!("{BOOT}VSSD-BEGIN t1 kern"), "t1").began);
    }

    #[test]
    fn output_and_status() {
        let log = format!(
            "{BOOT}VSSD-BEGIN t1 kernel=6.1 cpus=2 uptime=4.0\r\nhello\r\nworld\r\nVSSD-EXIT t1 7 uptime=5.0\r\n[ 5.1] reboot: Power down\r\n"
        );
        let c = parse(&log, "t1");
        assert!(c.began);
        assert_eq!(c.finished, Some(("hello\nworld\n".to_string(), 7)));
        assert_eq!(c.init_error, None);
    }

    #[test]
    fn output_without_final_newline() {
        let log = format!("{BOOT}VSSD-BEGIN t1 x\nabcVSSD-EXIT t1 0 uptime=1\n");
        assert_eq!(parse(&log, "t1").finished, Some(("abc".to_string(), 0)));
    }

    #[test]
    fn other_tokens_and_fake_markers_ignored() {
        let log = format!(
            "{BOOT}VSSD-BEGIN t1 x\nVSSD-EXIT t2 3\n  VSSD-BEGIN t1 y\nVSSD-EXIT t1 1 uptime=1\n"
        );
        let c = parse(&log, "t1");
        assert_eq!(
            c.finished,
            Some(("VSSD-EXIT t2 3\n  VSSD-BEGIN t1 y\n".to_string(), 1))
        );
        assert_eq!(parse(&log, "t3"), Console::default());
    }

    #[test]
    fn lines_so_far_grow_as_a_prefix() {
        let full =
            format!("{BOOT}VSSD-BEGIN t1 x\nline 1\nline 2\npartialVSSD-EXIT t1 0 uptime=1\n");
        let final_output = parse(&full, "t1").finished.unwrap().0;
        assert_eq!(final_output, "line 1\nline 2\npartial");
        let mut last = String::new();
        for cut in 0..=full.len() {
            if let Some(so_far) = parse(&full[..cut], "t1").lines_so_far {
                assert!(
                    so_far.starts_with(&last) && final_output.starts_with(&so_far),
                    "{so_far:?}"
                );
                assert!(so_far.is_empty() || so_far.ends_with('\n'));
                last = so_far;
            }
        }
        assert_eq!(last, "line 1\nline 2\n");
    }

    #[test]
    fn incomplete_exit_line_waits() {
        let log = format!("{BOOT}VSSD-BEGIN t1 x\nout\nVSSD-EXIT t1 1");
        let c = parse(&log, "t1");
        assert!(c.began);
        assert_eq!(c.finished, None);
    }

    #[test]
    fn init_error() {
        let log =
            format!("{BOOT}VSSD-ERROR t1 cannot mount the host root\nVSSD-EXIT t1 255 uptime=3\n");
        let c = parse(&log, "t1");
        assert_eq!(c.init_error.as_deref(), Some("cannot mount the host root"));
        assert!(!c.began);
    }
}
