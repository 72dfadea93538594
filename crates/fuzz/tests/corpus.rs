#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! Every fuzz target over its committed corpus (`fuzz/corpus/TARGET/`):
//! the seeds, what fuzzing runs found worth keeping, and every input that
//! once crashed a target (`regression-*`). Plain tests on the stable
//! toolchain, in every `cargo test`; the coverage-guided runs are
//! `scripts/fuzz.sh`.

use std::path::PathBuf;

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

#[test]
fn every_target_runs_its_corpus_without_a_panic() {
    let mut total = 0;
    let mut failed = Vec::new();
    for &(name, target) in vssd_fuzz::TARGETS {
        let dir = corpus_dir(name);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{name}: no corpus in {}", dir.display());
        for f in &files {
            let data = std::fs::read(f).unwrap();
            if std::panic::catch_unwind(|| target(&data)).is_err() {
                failed.push(f.display().to_string());
            }
            total += 1;
        }
    }
    assert!(failed.is_empty(), "inputs that panic: {failed:#?}");
    eprintln!("{total} corpus inputs, no panic");
}

#[test]
fn the_fuzz_binaries_are_the_targets() {
    // fuzz/Cargo.toml has one [[bin]] per target and fuzz_targets/NAME.rs
    // calls vssd_fuzz::NAME: nothing is fuzzed that is not tested here.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for &(name, _) in vssd_fuzz::TARGETS {
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml has no binary {name}"
        );
        let src = std::fs::read_to_string(root.join(format!("fuzz_targets/{name}.rs"))).unwrap();
        assert!(
            src.contains(&format!("vssd_fuzz::{name}(")),
            "{name}: {src}"
        );
    }
    let bins = manifest.matches("[[bin]]").count();
    assert_eq!(bins, vssd_fuzz::TARGETS.len(), "one binary per target");
}
