#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! `vssd validate` on the whole corpus at a scaled capacity (2 GiB: each
//! protocol's spans, amounts and durations shrink with the drive). The
//! model is deterministic, so every figure's simulated value is checked
//! against the table recorded in `tests/fixtures/validation-2g.json`; a
//! model change that moves a figure fails here and is re-recorded on
//! purpose (`VSSD_RECORD_VALIDATION=1 cargo test --release --test validate`),
//! with the full-size table in docs/validation.md re-run alongside.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/validation-2g.json")
}

fn run_validate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vssd"))
        .arg("validate")
        .args(args)
        .env("RUST_LOG", "error")
        .output()
        .expect("vssd runs")
}

#[test]
fn the_scaled_corpus_reproduces_the_recorded_table() {
    let out = run_validate(&["--all", "--capacity", "2G", "--json", "--jobs", "2"]);
    assert!(
        out.status.success(),
        "vssd validate failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut now = BTreeMap::new();
    for p in v["presets"].as_array().unwrap() {
        for f in p["figures"].as_array().unwrap() {
            let key = format!(
                "{}/{}",
                f["preset"].as_str().unwrap(),
                f["figure"].as_str().unwrap()
            );
            // Every figure names its source and says whether it is held out.
            assert!(f["source"].as_str().is_some_and(|s| !s.is_empty()), "{key}");
            assert!(f["held_out"].is_boolean(), "{key}");
            assert!(f["published"].as_f64().is_some_and(|x| x > 0.0), "{key}");
            let sim = f["simulated"]
                .as_f64()
                .unwrap_or_else(|| panic!("{key}: no simulated value"));
            now.insert(key, sim);
        }
    }
    assert!(now.len() >= 70, "{} figures", now.len());
    if std::env::var_os("VSSD_RECORD_VALIDATION").is_some() {
        std::fs::write(
            fixture(),
            serde_json::to_string_pretty(&now).unwrap() + "\n",
        )
        .unwrap();
        return;
    }
    let recorded: BTreeMap<String, f64> =
        serde_json::from_str(&std::fs::read_to_string(fixture()).unwrap()).unwrap();
    let mut moved = Vec::new();
    for (k, want) in &recorded {
        match now.get(k) {
            None => moved.push(format!("{k}: gone")),
            // Deterministic: the margin covers only floating-point noise.
            Some(got) if (got - want).abs() > 1e-6 * want.abs().max(1.0) => {
                moved.push(format!("{k}: recorded {want}, now {got}"));
            }
            Some(_) => {}
        }
    }
    for k in now.keys().filter(|k| !recorded.contains_key(*k)) {
        moved.push(format!("{k}: new, not recorded"));
    }
    assert!(
        moved.is_empty(),
        "figures moved (re-record with VSSD_RECORD_VALIDATION=1 if intended, and re-run the full-size table):\n{}",
        moved.join("\n")
    );
    // The summaries are there, and count held-out figures only.
    let h = &v["overall_held_out"];
    assert!(h["figures"].as_u64().unwrap() > 0);
    assert!(h["median_abs_error"].as_f64().is_some());
}

#[test]
fn unknown_presets_and_bad_corpora_are_clear_errors() {
    let out = run_validate(&["no-such-drive"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no corpus file for \"no-such-drive\"") && err.contains("intel-x25m-g1"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.toml"),
        "preset = \"intel-x25m-g1\"\ndrive = \"d\"\ncoverage = \"c\"\n[[figure]]\nid = \"f\"\n",
    )
    .unwrap();
    let out = run_validate(&["--all", "--corpus", dir.path().to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml") && err.contains("missing field"),
        "{err}"
    );
}

#[test]
fn charts_are_written_per_preset() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_validate(&[
        "intel-x25m-g1",
        "--capacity",
        "2G",
        "--charts",
        dir.path().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = std::fs::read_to_string(dir.path().join("intel-x25m-g1.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("simulated vs published"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("held out:") && text.contains("at-2738-randwrite-used"));
}
