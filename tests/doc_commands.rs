#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! Every command line in README.md and docs/*.md works when pasted as is.
//!
//! The `sh` code blocks of each document run in order in one bash session
//! (`set -euo pipefail`), from the repository's root, with the built
//! `vssd` first on the `PATH`; background jobs a document starts are
//! killed when it ends. A block preceded by `<!-- doc-test: skip (why) -->`
//! is not run (say why in the comment). `text` and `console` blocks are
//! output, not commands.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{guest_lock, init_logging, require_program};

/// One `sh` block.
#[derive(Debug)]
struct Block {
    line: usize,
    code: String,
    skip: Option<String>,
}

fn blocks(md: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = md.lines().enumerate().peekable();
    let mut skip: Option<String> = None;
    while let Some((i, l)) = lines.next() {
        let t = l.trim();
        if let Some(rest) = t.strip_prefix("<!-- doc-test: skip") {
            skip = Some(rest.trim_end_matches("-->").trim().to_string());
            continue;
        }
        if let Some(lang) = t.strip_prefix("```") {
            let mut code = String::new();
            for (_, l) in lines.by_ref() {
                if l.trim_start().starts_with("```") {
                    break;
                }
                code.push_str(l);
                code.push('\n');
            }
            if lang.trim() == "sh" {
                out.push(Block {
                    line: i + 1,
                    code,
                    skip: skip.take(),
                });
            }
            skip = None;
            continue;
        }
        if !t.is_empty() {
            skip = None;
        }
    }
    out
}

fn docs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut v = vec![root.join("README.md")];
    let mut d: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    d.sort();
    v.extend(d);
    v
}

#[test]
fn block_extraction() {
    let md =
        "x\n<!-- doc-test: skip (slow) -->\n```sh\na\n```\n```text\nb\n```\n\n```sh\nc\nd\n```\n";
    let b = blocks(md);
    assert_eq!(b.len(), 2);
    assert_eq!(b[0].skip.as_deref(), Some("(slow)"));
    assert_eq!(b[1].code, "c\nd\n");
    assert_eq!(b[1].line, 10);
    assert!(b[1].skip.is_none());
}

#[test]
fn documented_commands_work_as_pasted() {
    init_logging();
    require_program("qemu-system-x86_64");
    let _g = guest_lock();
    vssd::guest::ensure_image().expect("building the test guest");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_vssd"), bin.path().join("vssd")).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for doc in docs() {
        let md = std::fs::read_to_string(&doc).unwrap();
        let bs = blocks(&md);
        let mut script = String::from(
            "set -euo pipefail\ntrap 'rc=$?; set +e; j=$(jobs -p); [ -z \"$j\" ] || { kill $j; wait $j; } 2>/dev/null; exit $rc' EXIT\n",
        );
        let mut n = 0;
        for b in &bs {
            if let Some(why) = &b.skip {
                assert!(
                    why.len() > 2,
                    "{}:{}: a skipped block must say why",
                    doc.display(),
                    b.line
                );
                continue;
            }
            script.push_str(&format!("echo '@@BLOCK {}' >&2\n{}", b.line, b.code));
            n += 1;
        }
        if n == 0 {
            continue;
        }
        let t0 = Instant::now();
        let out = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .current_dir(root)
            .env("PATH", &path)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr
            .lines()
            .filter_map(|l| l.strip_prefix("@@BLOCK "))
            .next_back()
            .unwrap_or("?");
        assert!(
            out.status.success(),
            "{}: the block at line {last} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
            doc.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            stderr
        );
        eprintln!(
            "{}: {n} blocks ran in {:.1} s",
            doc.display(),
            t0.elapsed().as_secs_f64()
        );
        assert!(t0.elapsed() < Duration::from_secs(1200));
        ran += n;
    }
    assert!(ran > 0);
}
