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

/// `vssd ARGS` with only errors logged.
fn vssd(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vssd"))
        .args(args)
        .env("RUST_LOG", "error")
        .output()
        .expect("vssd runs")
}

/// `vssd ARGS`, which must succeed (its standard error is the message).
fn vssd_ok(args: &[&str]) -> std::process::Output {
    let out = vssd(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn run_validate(args: &[&str]) -> std::process::Output {
    vssd(&[&["validate"], args].concat())
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
        // Shapes: 1 held, 0 not, -1 no value (a moved shape fails too).
        for sh in p["shapes"].as_array().unwrap() {
            let key = format!(
                "{}/shape:{}",
                sh["preset"].as_str().unwrap(),
                sh["shape"].as_str().unwrap()
            );
            assert_eq!(sh["kind"], "shape", "{key}");
            assert!(
                sh["statement"].as_str().is_some_and(|s| !s.is_empty()),
                "{key}"
            );
            let held = match sh["held"].as_bool() {
                Some(true) => 1.0,
                Some(false) => 0.0,
                None => -1.0,
            };
            now.insert(key, held);
        }
    }
    assert!(
        now.keys().filter(|k| k.contains("/shape:")).count() >= 20,
        "shapes: {:?}",
        now.keys()
            .filter(|k| k.contains("/shape:"))
            .collect::<Vec<_>>()
    );
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
    // A fio job's mistake names the file it is in (it used to name the
    // built-in validation/ file), and a job without end is refused.
    let protocol = |job: &str| {
        format!(
            "preset = \"intel-x25m-g1\"\ndrive = \"d\"\ncoverage = \"c\"\n\
             [[source]]\nid = \"s\"\npublication = \"p\"\ntitle = \"t\"\nkind = \"review\"\n\
             [[protocol]]\nid = \"p\"\nsource = \"s\"\ndescription = \"d\"\n\
             [[protocol.step]]\nkind = \"fio\"\nname = \"m\"\njob = \"\"\"\n{job}\"\"\"\n\
             [[figure]]\nid = \"f\"\nprotocol = \"p\"\nstep = \"m\"\nstate = \"fresh\"\n\
             metric = \"write_mb_s\"\npublished = 1.0\nunit = \"MB/s\"\n"
        )
    };
    for (job, why) in [
        ("[m]\nrw=sideways\n", "`rw`"),
        (
            "[m]\nrw=write\nruntime=1000000000\ntime_based\n",
            "a day of drive time",
        ),
        ("[m]\nrw=write\nloops=100000\n", "a thousand passes"),
    ] {
        std::fs::remove_file(dir.path().join("bad.toml")).ok();
        std::fs::write(dir.path().join("job.toml"), protocol(job)).unwrap();
        let out = run_validate(&["--all", "--corpus", dir.path().to_str().unwrap()]);
        assert!(!out.status.success(), "{job}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("job.toml") && !err.contains("validation/") && err.contains(why),
            "{job}: {err}"
        );
    }
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

/// `vssd calibrate --fit` end to end on a corpus made from the model
/// itself: two sources, each a random-write rate that the firmware time
/// per write sets, "published" as a profile with 100 µs per write
/// simulated them. Starting from 300 µs, every fold (which sees only the
/// other source) and the fit on both find 100 µs again; `vssd validate`
/// then judges each source's figure with the fold that left it out, and
/// `--update-preset` writes the value into the profile file.
#[test]
fn the_fit_recovers_a_known_parameter_with_every_source_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = vssd(&["profiles", "show", "sata-mlc-2011"]);
    let base = String::from_utf8(base.stdout).unwrap();
    let base: String = base
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let profile = |ns: u64, fit: bool| {
        let mut t = base.replace("[host]\n", &format!("[host]\nwrite_command_ns = {ns}\n"));
        t = t.replace("name = \"sata-mlc-2011\"", "name = \"fit-test\"");
        if fit {
            t.push_str(
                "\n[[fit]]\nkey = \"host.write_command_ns\"\nmin = 20000\nmax = 1000000\nlog = true\nwhy = \"test\"\n",
            );
        }
        t
    };
    let truth = d.join("truth.toml");
    std::fs::write(&truth, profile(100_000, false)).unwrap();
    let job = |qd: u32| {
        format!(
            "[m]\nrw=randwrite\nbs=4k\niodepth={qd}\nsize=256m\nruntime=2\ntime_based\nnorandommap\n"
        )
    };
    // What the "true" drive does under each protocol.
    let iops = |qd: u32| -> f64 {
        let jf = d.join(format!("qd{qd}.fio"));
        std::fs::write(&jf, job(qd)).unwrap();
        let out = vssd_ok(&[
            "sim",
            "--profile",
            truth.to_str().unwrap(),
            "--capacity",
            "1G",
            "--output-format",
            "json",
            jf.to_str().unwrap(),
        ]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["jobs"][0]["write"]["iops"].as_f64().unwrap()
    };
    let (a, b) = (iops(1), iops(4));
    assert!(a > 0.0 && b > a, "{a} {b}");
    let fitted = d.join("fitted.toml");
    std::fs::write(&fitted, profile(300_000, true)).unwrap();
    let corpus = d.join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    let source = |id: &str| {
        format!(
            "[[source]]\nid = \"{id}\"\npublication = \"p\"\ntitle = \"t\"\nkind = \"review\"\n"
        )
    };
    let protocol = |id: &str, src: &str, qd: u32| {
        format!(
            "[[protocol]]\nid = \"{id}\"\nsource = \"{src}\"\ndescription = \"d\"\n  [[protocol.step]]\n  kind = \"fio\"\n  name = \"m\"\n  job = \"\"\"\n{}\"\"\"\n",
            job(qd)
        )
    };
    let figure = |id: &str, p: &str, v: f64| {
        format!(
            "[[figure]]\nid = \"{id}\"\nprotocol = \"{p}\"\nstep = \"m\"\nstate = \"fresh\"\nmetric = \"write_iops\"\npublished = {v}\nunit = \"IOPS\"\n"
        )
    };
    std::fs::write(
        corpus.join("fit-test.toml"),
        format!(
            "preset = \"{}\"\ndrive = \"d\"\ncoverage = \"c\"\n{}{}{}{}{}{}",
            fitted.display(),
            source("s1"),
            source("s2"),
            protocol("p1", "s1", 1),
            protocol("p2", "s2", 4),
            figure("f1", "p1", a),
            figure("f2", "p2", b),
        ),
    )
    .unwrap();
    let fits = d.join("fits");
    let out = vssd_ok(&[
        "calibrate",
        fitted.to_str().unwrap(),
        "--fit",
        "--capacity",
        "1G",
        "--corpus",
        corpus.to_str().unwrap(),
        "--write",
        fits.to_str().unwrap(),
        "--update-preset",
        fitted.to_str().unwrap(),
        "--jobs",
        "2",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("without s1") && text.contains("without s2"),
        "{text}"
    );
    let record: toml::Table = std::fs::read_to_string(fits.join("fit-test.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let near = |v: &toml::Value| {
        let x = v.as_array().unwrap()[0].as_float().unwrap();
        assert!(
            (x / 100_000.0 - 1.0).abs() < 0.03,
            "fitted {x} ns, want 100000"
        );
    };
    near(&record["all"]["values"]);
    let folds = record["fold"].as_array().unwrap();
    assert_eq!(folds.len(), 2);
    for f in folds {
        near(&f["values"]);
        assert_eq!(f["trained_on"].as_array().unwrap().len(), 1, "{f}");
    }
    // The profile file now holds the value fitted on both sources.
    let updated = std::fs::read_to_string(&fitted).unwrap();
    assert!(!updated.contains("write_command_ns = 300000"), "{updated}");
    // validate judges each figure with the fold that never saw its source.
    let validate = |json: bool| {
        let mut args = vec!["--all", "--corpus", corpus.to_str().unwrap()];
        args.extend(["--fits", fits.to_str().unwrap(), "--capacity", "1G"]);
        if json {
            args.push("--json");
        }
        run_validate(&args)
    };
    let out = validate(true);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &v["presets"][0];
    assert_eq!(p["fitted"], true, "{p}");
    assert!(p["notes"].as_array().unwrap().is_empty(), "{p}");
    for f in p["figures"].as_array().unwrap() {
        assert_eq!(f["held_out"], true);
        assert_eq!(f["fold"], f["source"], "{f}");
        assert!(f["error"].as_f64().unwrap().abs() < 0.03, "{f}");
    }
    // A preset changed after its fit is flagged, not silently judged.
    std::fs::write(&fitted, profile(250_000, true)).unwrap();
    let out = validate(false);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the fit record is stale"), "{text}");
    // The record applied again without a search makes it current.
    let apply = |record: &std::path::Path| {
        vssd(&[
            "calibrate",
            fitted.to_str().unwrap(),
            "--fit",
            "--capacity",
            "1G",
            "--corpus",
            corpus.to_str().unwrap(),
            "--record",
            record.to_str().unwrap(),
            "--update-preset",
            fitted.to_str().unwrap(),
            "--jobs",
            "2",
        ])
    };
    let out = apply(&fits.join("fit-test.toml"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&validate(false).stdout).to_string();
    assert!(!text.contains("stale"), "{text}");
    // A record of another preset is refused, and the file left as it was.
    let before = std::fs::read_to_string(&fitted).unwrap();
    let other = d.join("other.toml");
    std::fs::write(
        &other,
        std::fs::read_to_string(fits.join("fit-test.toml"))
            .unwrap()
            .replace("preset = \"fit-test\"", "preset = \"intel-x25m-g1\""),
    )
    .unwrap();
    let out = apply(&other);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not of fit-test"), "{err}");
    assert_eq!(std::fs::read_to_string(&fitted).unwrap(), before);
    // Records whose values cannot apply are refused before anything is
    // written (one of them used to panic, a nan was written as 0).
    let good = std::fs::read_to_string(fits.join("fit-test.toml")).unwrap();
    let first_values = good
        .lines()
        .find(|l| l.trim_start().starts_with("values = ["))
        .unwrap()
        .to_string();
    for (values, why) in [
        ("values = []", "0 values for 1 parameters"),
        ("values = [nan]", "not a finite number"),
        ("values = [1e15]", "outside its range"),
        ("values = [100000.0, 1.0]", "2 values for 1 parameters"),
    ] {
        let bad = d.join("bad.toml");
        std::fs::write(&bad, good.replacen(&first_values, values, 1)).unwrap();
        let out = apply(&bad);
        assert!(!out.status.success(), "{values}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(why) && !err.contains("panicked"),
            "{values}: {err}"
        );
        assert_eq!(
            std::fs::read_to_string(&fitted).unwrap(),
            before,
            "{values}"
        );
    }
}

#[test]
fn a_fit_needs_free_parameters() {
    let out = vssd(&["calibrate", "mtron-mobi-3500", "--fit"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no free parameters"), "{err}");
}
