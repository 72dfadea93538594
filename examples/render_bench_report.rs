#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! Render a `vssd bench` report from a `results.json`, without running
//! anything: `cargo run --example render_bench_report -- [RESULTS_JSON] [OUT_DIR]`.
//! Defaults: `tests/fixtures/bench-trim-recovery.json` into
//! `target/bench-report-example/`. Prints the files written.

use std::path::PathBuf;

use vssd::bench::report::{read_results, write_outputs};

fn main() {
    let mut args = std::env::args_os().skip(1);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let input = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("tests/fixtures/bench-trim-recovery.json"));
    let out = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/bench-report-example"));
    let results = match read_results(&input) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("render_bench_report: {}: {e}", input.display());
            std::process::exit(1);
        }
    };
    match write_outputs(&out, &results) {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
        }
        Err(e) => {
            eprintln!("render_bench_report: {}: {e}", out.display());
            std::process::exit(1);
        }
    }
}
