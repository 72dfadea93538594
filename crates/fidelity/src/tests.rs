//! Tests of `vssd validate`: the built-in corpus, summaries, corpus-file
//! errors, and judged runs at another capacity.

use std::collections::BTreeMap;

use super::*;
use crate::corpus::{CorpusFile, Metric, State};
use vssd_profile::Profile;

#[test]
fn the_built_in_corpus_parses_and_names_real_presets() {
    let files = corpus::load(None).unwrap();
    assert_eq!(files.len(), corpus::BUILT_IN.len());
    for f in &files {
        Profile::load(&f.preset).unwrap();
    }
    let n: usize = files.iter().map(|f| f.figure.len()).sum();
    assert!(n >= 70, "{n} figures");
}

/// `validation/summary.toml` (what `vssd profiles` prints) was written by
/// a run of today's corpus: every corpus preset has its line, with as many
/// figures and shapes as its file holds. A corpus change without
/// `vssd validate --all --write-summary validation/summary.toml` fails here.
#[test]
fn the_shipped_summary_matches_the_corpus() {
    let summary = vssd_profile::validated::summary();
    assert!(
        summary.made_by.starts_with("vssd validate --all"),
        "validation/summary.toml was not written by vssd validate: {:?}",
        summary.made_by
    );
    for f in corpus::load(None).unwrap() {
        let v = summary
            .preset
            .get(&f.preset)
            .unwrap_or_else(|| panic!("validation/summary.toml has no line for {}", f.preset));
        let figures = f.figure.len()
            + f.curve
                .iter()
                .filter(|c| c.published_mean.is_some())
                .count();
        assert_eq!(
            v.figures, figures,
            "{}: figures in the summary vs the corpus",
            f.preset
        );
        // Shapes judged across drives (`at_least`) are not any one drive's.
        let own = f.shape.iter().filter(|s| s.at_least.is_none()).count();
        assert_eq!(
            v.shapes, own,
            "{}: shapes in the summary vs the corpus",
            f.preset
        );
        assert!(
            v.held_out <= v.figures && v.shapes_held <= v.shapes,
            "{}: {v:?}",
            f.preset
        );
    }
}

#[test]
fn summaries_use_nearest_ranks() {
    let j = |e: f64| Judged {
        kind: "figure",
        readings: Vec::new(),
        preset: "p".into(),
        figure: "f".into(),
        source: "s".into(),
        publication: String::new(),
        url: String::new(),
        state: State::Fresh,
        metric: Metric::WriteMbS,
        unit: "MB/s",
        published: 100.0,
        simulated: Some(100.0 * (1.0 + e)),
        error: Some(e),
        held_out: true,
        fold: None,
        from_curve: false,
        other_drive: false,
    };
    let figs: Vec<Judged> = [0.05, -0.10, 0.30, 0.02, -0.50]
        .into_iter()
        .map(j)
        .collect();
    let s = Summary::of(figs.iter());
    assert_eq!(s.figures, 5);
    assert_eq!(s.median_abs_error, Some(0.10));
    assert_eq!(s.p90_abs_error, Some(0.50));
    assert_eq!(s.within_25pct, Some(0.6));
    assert_eq!(Summary::of([].iter()), Summary::default());
}

/// A corpus file of one source and one protocol (one fio step "m"),
/// `extra` in the protocol's table.
fn one_protocol(extra: &str) -> String {
    format!(
        r#"
preset = "crucial-m4-128"
drive = "d"
coverage = "c"
[[source]]
id = "s"
publication = "p"
title = "t"
url = "u"
kind = "review"
[[protocol]]
id = "p1"
source = "s"
description = "d"
{extra}
  [[protocol.step]]
  kind = "fio"
  name = "m"
  job = "[m]\nrw=write\nbs=128k\nsize=1g\n"
"#
    )
}

#[test]
fn bad_corpus_files_get_clear_errors() {
    let base = one_protocol("");
    let fig = |extra: &str| {
        format!("{base}[[figure]]\nid = \"f\"\nprotocol = \"p1\"\nstate = \"fresh\"\n{extra}")
    };
    assert!(
        CorpusFile::parse(
            &fig("step = \"m\"\nmetric = \"write_mb_s\"\npublished = 10\nunit = \"MB/s\"\n"),
            "x"
        )
        .is_ok()
    );
    for (extra, want) in [
        (
            "step = \"nope\"\nmetric = \"write_mb_s\"\npublished = 10\nunit = \"MB/s\"\n",
            "no step named",
        ),
        (
            "step = \"m\"\nmetric = \"write_mb_s\"\npublished = 10\nunit = \"IOPS\"\n",
            "does not measure",
        ),
        (
            "step = \"m\"\nmetric = \"write_mb_s\"\npublished = -1\nunit = \"MB/s\"\n",
            "positive",
        ),
        (
            "step = \"m\"\nmetric = \"speed\"\npublished = 1\nunit = \"MB/s\"\n",
            "unknown variant",
        ),
        (
            "step = \"m\"\nmetric = \"write_mb_s\"\npublished = 1\nunit = \"MB/s\"\ncolour = 1\n",
            "unknown field",
        ),
    ] {
        let e = CorpusFile::parse(&fig(extra), "x").unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn another_capacity_and_another_drive_are_checked() {
    let with = one_protocol;
    let drive = "[protocol.drive]
why = \"the 256 GB\"
set = { \"geometry.dies_per_channel\" = 4, \"geometry.exported_capacity\" = 256060514304 }
";
    let f = CorpusFile::parse(&with(drive), "x").unwrap();
    let d = f.protocol[0].drive.as_ref().unwrap();
    let p = d.apply(&Profile::load("crucial-m4-128").unwrap()).unwrap();
    assert_eq!(
        (p.dies(), p.geometry.exported_capacity.0),
        (32, 256060514304)
    );
    for (extra, want) in [
        (
            format!("other_drive = \"x\"\n{drive}"),
            "exclude each other",
        ),
        (
            "[protocol.drive]\nwhy = \"w\"\nset = {}\n".to_string(),
            "at least one field",
        ),
        // The changed drive must still be a valid profile.
        (
            drive.replace("256060514304", "1000000000000"),
            "geometry.exported_capacity",
        ),
        (
            drive.replace("geometry.dies_per_channel", "geometry.dies"),
            "numeric field",
        ),
    ] {
        let e = CorpusFile::parse(&with(&extra), "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{extra}: {e}");
    }
}

#[test]
fn a_scaled_run_judges_figures() {
    let files = corpus::load(None).unwrap();
    let f: Vec<CorpusFile> = files
        .into_iter()
        .filter(|f| f.preset == "intel-x25m-g2")
        .collect();
    let r = validate(&f, &BTreeMap::new(), Some(2 << 30), 0, 2, &|_, _, _| {}).unwrap();
    let p = &r.presets[0];
    assert!(p.figures.iter().all(|j| j.simulated.is_some()), "{p:?}");
    assert!(p.held_out.figures > 0 && p.training.figures > 0);
}
