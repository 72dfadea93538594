#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! `scripts/install-deps.sh` installs what the tests run, and nothing it
//! does not need: every program a test or the kit starts by name is in the
//! list the script checks after installing, and every `apt-get install`
//! leaves recommended packages out (QEMU's would bring a GTK display, mesa
//! and gstreamer; blktrace's ffmpeg).

use std::collections::BTreeSet;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `TOOLS=( ... )` list of the script.
fn checked_tools(script: &str) -> BTreeSet<String> {
    let start = script.find("TOOLS=(").expect("a TOOLS=( ... ) list") + "TOOLS=(".len();
    let end = start + script[start..].find(')').unwrap();
    script[start..end]
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Rust files under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The string literal following each occurrence of `call` (such as
/// `require_program("`) in `text`.
fn literals<'a>(text: &'a str, call: &str) -> Vec<&'a str> {
    text.match_indices(call)
        .filter_map(|(i, _)| {
            let rest = &text[i + call.len()..];
            rest.find('"').map(|end| &rest[..end])
        })
        .collect()
}

#[test]
fn the_script_installs_what_the_tests_run_without_recommends() {
    let script = std::fs::read_to_string(root().join("scripts/install-deps.sh")).unwrap();
    let tools = checked_tools(&script);
    let mut files = Vec::new();
    rust_files(&root().join("tests"), &mut files);
    rust_files(&root().join("crates"), &mut files);
    rust_files(&root().join("src"), &mut files);
    let mut missing = BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for call in ["require_program(\"", "Command::new(\""] {
            for prog in literals(&text, call) {
                // Shells are everywhere; the guest's own QEMU binary is
                // `$VSSD_QEMU` or qemu-system-x86_64.
                let name = |c: char| c.is_ascii_alphanumeric() || "._+-".contains(c);
                if ["sh", "bash"].contains(&prog) || prog.is_empty() || !prog.chars().all(name) {
                    continue;
                }
                if !tools.contains(prog) {
                    missing.insert(format!("{prog} ({})", f.display()));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "programs the tests run that scripts/install-deps.sh does not check for: {missing:?}"
    );
    for must in ["virsh", "libvirtd", "systemd-analyze", "setpriv"] {
        assert!(tools.contains(must), "{must} not in TOOLS");
    }
    // Every install leaves recommended packages out.
    let installs: Vec<&str> = script
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("apt-get install") && !l.starts_with('#') && !l.contains("die "))
        .collect();
    assert!(!installs.is_empty());
    for i in installs {
        assert!(i.contains("--no-install-recommends"), "{i}");
    }
}
