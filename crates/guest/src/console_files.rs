//! Files a guest script hands back to the host on the console: the script
//! prints each between `@@FILE PATH` and `@@FILE-END` lines after its timed
//! part (fio's JSON, logs, fsck output), and the host reads them out of
//! the script's output.

use std::collections::BTreeMap;

/// The shell loop that prints every existing file matching `patterns`
/// (shell globs, separated by spaces) for [`read`].
pub fn print_command(patterns: &str) -> String {
    format!(
        "for f in {patterns}; do\n  [ -e \"$f\" ] || continue\n  echo \"@@FILE $f\"\n  cat \"$f\"\n  echo\n  echo \"@@FILE-END\"\ndone\n"
    )
}

/// The files a script printed with [`print_command`]: path → contents.
pub fn read(output: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut lines = output.lines();
    while let Some(l) = lines.next() {
        if let Some(path) = l.strip_prefix("@@FILE ") {
            let mut text = String::new();
            for l in lines.by_ref() {
                if l == "@@FILE-END" {
                    break;
                }
                text.push_str(l);
                text.push('\n');
            }
            out.insert(path.trim().to_string(), text);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn printed_files_read_back() {
        let out =
            "noise\n@@FILE /tmp/a.json\n{\"x\": 1}\n\n@@FILE-END\n@@FILE /tmp/b\n@@FILE-END\n";
        let f = read(out);
        assert_eq!(f["/tmp/a.json"], "{\"x\": 1}\n\n");
        assert_eq!(f["/tmp/b"], "");
        assert!(
            print_command("/tmp/a*.json /tmp/b").starts_with("for f in /tmp/a*.json /tmp/b; do\n")
        );
    }
}
