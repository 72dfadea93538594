//! Tests of the reports: every file written, charts, CSVs, Markdown and
//! HTML, degenerate runs.

use super::csv::csv_field;
use super::*;
use crate::results::{DriveSample, PhaseResult, Series, Surface, SurfacePoint};
use crate::testdata;
use std::collections::BTreeSet;

fn fixture_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/bench-trim-recovery.json")
}

fn names(files: &[PathBuf]) -> BTreeSet<String> {
    files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Parses an SVG as XML; returns the texts it draws and how many
/// line-like elements it has.
fn svg_summary(svg: &str) -> (Vec<String>, usize) {
    let doc = roxmltree::Document::parse(svg).expect("SVG parses as XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let texts = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(|t| t.trim().to_string()))
        .collect();
    let lines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") || n.has_tag_name("path"))
        .count();
    (texts, lines)
}

/// Regenerates the example fixture from the hand-built run:
/// `cargo test --lib regenerate_bench_fixture -- --ignored`.
#[test]
#[ignore]
fn regenerate_bench_fixture() {
    let json = serde_json::to_string_pretty(&testdata::trim_recovery()).unwrap();
    std::fs::create_dir_all(fixture_path().parent().unwrap()).unwrap();
    std::fs::write(fixture_path(), json + "\n").unwrap();
}

/// Writes the hand-built runs' reports under the target directory to
/// look at: `cargo test --lib render_bench_examples -- --ignored`.
#[test]
#[ignore]
fn render_bench_examples() {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    for r in [testdata::trim_recovery(), testdata::used_state()] {
        let dir = target.join("bench-report-examples").join(&r.scenario);
        write_outputs(&dir, &r).unwrap();
        eprintln!("{}", dir.display());
    }
}

#[test]
fn trim_recovery_with_sim_writes_every_file() {
    let r = testdata::trim_recovery();
    let dir = tempfile::tempdir().unwrap();
    let files = write_outputs(dir.path(), &r).unwrap();
    let expected: BTreeSet<String> = [
        "results.json",
        "surface-fresh.csv",
        "series-random.csv",
        "surface-used.csv",
        "surface-trimmed.csv",
        "drive-samples.csv",
        "sim-surface-fresh.csv",
        "sim-series-random.csv",
        "sim-surface-used.csv",
        "sim-surface-trimmed.csv",
        "sim-drive-samples.csv",
        "throughput.svg",
        "surface.svg",
        "drive.svg",
        "sim-vs-guest-throughput.svg",
        "sim-vs-guest-surface.svg",
        "sim-throughput.svg",
        "sim-surface.svg",
        "sim-drive.svg",
        "report.md",
        "report.html",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(names(&files), expected);
    for f in &files {
        assert!(f.starts_with(dir.path()));
        assert!(std::fs::metadata(f).unwrap().len() > 0, "{}", f.display());
    }
    // results.json reads back as the same run (floats to within
    // serde_json's parsing precision).
    let back = read_results(dir.path()).unwrap();
    let phases = |r: &BenchResults| r.phases.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
    assert_eq!(phases(&back), phases(&r));
    assert_eq!(back.samples.len(), r.samples.len());
    assert_eq!(back.expects, r.expects);
    assert_eq!(back.sim.as_ref().map(|s| s.phases.len()), Some(7));
}

#[test]
fn svgs_parse_and_draw_the_phases() {
    let r = testdata::trim_recovery();
    let dir = tempfile::tempdir().unwrap();
    write_outputs(dir.path(), &r).unwrap();
    let (texts, lines) = svg_summary(&read(dir.path(), "surface.svg"));
    for want in [
        "fresh",
        "used",
        "trimmed",
        "Position (GiB)",
        "Write throughput (MB/s)",
    ] {
        assert!(
            texts.iter().any(|t| t == want),
            "surface.svg lacks {want:?}: {texts:?}"
        );
    }
    assert!(
        texts
            .iter()
            .any(|t| t.contains("sata-slc-2009") && t.contains("1 GiB"))
    );
    assert!(lines >= 3);
    let (texts, _) = svg_summary(&read(dir.path(), "throughput.svg"));
    assert!(texts.iter().any(|t| t == "random"));
    assert!(texts.iter().any(|t| t == "Time into the phase (s)"));
    let (texts, _) = svg_summary(&read(dir.path(), "drive.svg"));
    assert!(texts.iter().any(|t| t == "WAF"));
    assert!(texts.iter().any(|t| t.starts_with("Free blocks (of 4096)")));
    assert!(
        texts.iter().any(|t| t == "random"),
        "phase labels: {texts:?}"
    );
    let overlay = read(dir.path(), "sim-vs-guest-surface.svg");
    let (texts, _) = svg_summary(&overlay);
    for want in ["fresh", "used", "trimmed", "guest", "simulator"] {
        assert!(texts.iter().any(|t| t == want), "overlay lacks {want:?}");
    }
    let (texts, _) = svg_summary(&read(dir.path(), "sim-surface.svg"));
    assert!(texts.iter().any(|t| t.contains("simulator (model time)")));
}

#[test]
fn csv_columns_and_rows() {
    let r = testdata::trim_recovery();
    let dir = tempfile::tempdir().unwrap();
    write_outputs(dir.path(), &r).unwrap();
    let series = read(dir.path(), "series-random.csv");
    let mut lines = series.lines();
    assert_eq!(lines.next(), Some("t_s,read_bytes_s,write_bytes_s"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 120);
    assert_eq!(rows[0][0], "1");
    assert_eq!(rows[0][1], "", "no reads: empty cells");
    let w: f64 = rows[0][2].parse().unwrap();
    let want = r
        .phase("random")
        .unwrap()
        .series
        .as_ref()
        .unwrap()
        .write_bytes_s[0];
    assert!((w / want - 1.0).abs() < 1e-11, "{w} vs {want}: 12 digits");

    let surface = read(dir.path(), "surface-used.csv");
    assert_eq!(surface.lines().next(), Some("offset,position,bytes_s"));
    assert_eq!(surface.lines().count(), 101);
    for l in surface.lines().skip(1) {
        let cells: Vec<f64> = l.split(',').map(|c| c.parse().unwrap()).collect();
        assert_eq!(cells.len(), 3);
        assert!((0.0..1.0).contains(&cells[1]));
    }
    let samples = read(dir.path(), "drive-samples.csv");
    assert_eq!(
        samples.lines().next(),
        Some(
            "t_s,phase,phase_name,waf,free_blocks,total_blocks,host_written_bytes,nand_bytes_programmed"
        )
    );
    assert_eq!(samples.lines().count(), r.samples.len() + 1);
    assert!(samples.lines().any(|l| l.contains(",random,")));
    let sim_samples = read(dir.path(), "sim-drive-samples.csv");
    assert_eq!(
        sim_samples.lines().count(),
        r.sim.as_ref().unwrap().samples.len() + 1
    );
}

#[test]
fn markdown_has_the_key_tables() {
    let r = testdata::trim_recovery();
    let dir = tempfile::tempdir().unwrap();
    write_outputs(dir.path(), &r).unwrap();
    let md = read(dir.path(), "report.md");
    assert!(md.starts_with("# vssd bench: trim-recovery\n"));
    assert!(md.contains("**Passed:** all 2 expectations held."));
    assert!(md.contains("| Guest kernel | 6.1.0-27-amd64 |"));
    assert!(md.contains("| Accelerator | kvm |"));
    assert!(md.contains("| Bus | sata |"));
    // Key figures: used and trimmed against fresh.
    assert!(md.contains(
        "| Phase | Workload | Write MB/s | × baseline | Surface median MB/s | × baseline | Surface mean MB/s | × baseline | Write IOPS | × baseline | Baseline |"
    ));
    let row = |name: &str| {
        md.lines()
            .find(|l| l.starts_with(&format!("| {name} | surface write 128 KiB |")))
            .unwrap_or_else(|| panic!("no key row for {name}"))
            .to_string()
    };
    // The surface's median's ratio (the statistic its checks use).
    let ratio = |line: &str| -> f64 { line.split(" | ").nth(5).unwrap().parse().unwrap() };
    assert_eq!(ratio(&row("fresh")), 1.0);
    assert!(ratio(&row("used")) < 0.5);
    assert!(ratio(&row("trimmed")) > 0.9);
    assert!(row("used").ends_with("| fresh |"));
    // TRIM audit.
    assert!(md.contains("## TRIM audit"));
    assert!(md.contains("| trim | 256 | 0 | 1 GiB | 993 MiB | 31 MiB | 97"));
    // Expectations.
    assert!(md.contains("| PASS | trimmed.mean_bw >= 0.9 \\* fresh.mean_bw |"));
    // Simulator vs guest.
    assert!(md.contains("## Simulator vs guest"));
    assert!(md.contains("| Phase | Metric | Guest | Simulator | Difference | Within tolerance |"));
    assert!(
        md.lines()
            .any(|l| l.starts_with("| trimmed | median_bw |") && l.ends_with("| PASS |"))
    );
    assert!(md.contains("| Phase | Guest idle before (drive s) | Sim idle before (s) |"));
    // Charts linked.
    for c in [
        "throughput.svg",
        "surface.svg",
        "drive.svg",
        "sim-vs-guest-surface.svg",
        "sim-drive.svg",
    ] {
        assert!(md.contains(&format!("]({c})")), "{c} not linked");
    }
    // Every table row has as many cells as its header.
    let mut cols = 0;
    for l in md.lines() {
        if !l.starts_with('|') {
            cols = 0;
            continue;
        }
        let n = l.replace("\\|", "").matches('|').count();
        if cols == 0 {
            cols = n;
        }
        assert_eq!(n, cols, "{l}");
    }
}

#[test]
fn html_is_self_contained() {
    let r = testdata::trim_recovery();
    let dir = tempfile::tempdir().unwrap();
    let files = write_outputs(dir.path(), &r).unwrap();
    let html = read(dir.path(), "report.html");
    let svgs = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "svg"))
        .count();
    assert_eq!(html.matches("<svg").count(), svgs);
    assert!(!html.contains("<script"));
    assert!(!html.contains("<link"));
    assert!(!html.contains("src="));
    assert!(!html.contains("url("));
    // The only address is the SVG namespace.
    assert_eq!(
        html.matches("http").count(),
        html.matches("http://www.w3.org/2000/svg").count()
    );
    assert!(html.contains("<td class=\"pass\">PASS</td>"));
    assert!(html.contains("<h2>TRIM audit</h2>"));
    assert!(html.trim_end().ends_with("</html>"));
}

#[test]
fn used_state_three_fio_phases_no_sim() {
    let r = testdata::used_state();
    let dir = tempfile::tempdir().unwrap();
    let files = names(&write_outputs(dir.path(), &r).unwrap());
    for f in [
        "series-fresh.csv",
        "series-random.csv",
        "series-used.csv",
        "throughput.svg",
        "drive.svg",
    ] {
        assert!(files.contains(f), "{f}");
    }
    assert!(
        !files
            .iter()
            .any(|f| f.starts_with("sim-") || f.starts_with("surface"))
    );
    let (texts, _) = svg_summary(&read(dir.path(), "throughput.svg"));
    for p in ["fresh", "random", "used"] {
        assert!(texts.iter().any(|t| t == p), "{p}");
    }
    let md = read(dir.path(), "report.md");
    assert!(!md.contains("## Simulator vs guest"));
    assert!(!md.contains("## TRIM audit"));
    // used vs fresh: same workload (fio write 1M); random alone.
    let used = md
        .lines()
        .find(|l| l.starts_with("| used | fio write 1M |"))
        .unwrap();
    assert!(used.ends_with("| fresh |"), "{used}");
    let random = md
        .lines()
        .find(|l| l.starts_with("| random | fio randwrite 4k |"))
        .unwrap();
    assert!(random.ends_with("| — |"), "{random}");
}

#[test]
fn fixture_renders() {
    let r = read_results(&fixture_path()).expect("fixture parses");
    assert_eq!(r.scenario, "trim-recovery");
    assert!(r.sim.is_some());
    let dir = tempfile::tempdir().unwrap();
    let files = write_outputs(dir.path(), &r).unwrap();
    assert!(names(&files).contains("sim-vs-guest-surface.svg"));
}

#[test]
fn unsafe_and_clashing_phase_names_stay_in_the_directory() {
    let mut r = testdata::used_state();
    let names_in = [
        "../../etc/passwd",
        "Fresh",
        "fresh",
        "",
        "дрос/сель",
        ".hidden",
    ];
    let template = r.phases[0].clone();
    r.phases = names_in
        .iter()
        .map(|n| PhaseResult {
            name: n.to_string(),
            ..template.clone()
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let files = write_outputs(dir.path(), &r).unwrap();
    for f in &files {
        assert_eq!(f.parent(), Some(dir.path()), "{}", f.display());
    }
    let series: Vec<String> = names(&files)
        .into_iter()
        .filter(|n| n.starts_with("series-"))
        .collect();
    assert_eq!(series.len(), names_in.len(), "{series:?}");
    assert_eq!(file_stem("../../etc/passwd"), "etc_passwd");
    assert_eq!(file_stem(".hidden"), "hidden");
    assert_eq!(file_stem(""), "phase");
    assert_eq!(file_stem("a b\tc"), "a_b_c");
}

#[test]
fn degenerate_runs_do_not_panic() {
    let mut r = testdata::used_state();
    // Nothing at all.
    let mut empty = r.clone();
    empty.phases.clear();
    empty.samples.clear();
    empty.expects.clear();
    empty.capacity = 0;
    empty.incomplete = Some("guest did not boot".into());
    let dir = tempfile::tempdir().unwrap();
    let files = names(&write_outputs(dir.path(), &empty).unwrap());
    assert!(files.contains("report.md") && files.contains("drive-samples.csv"));
    assert!(!files.iter().any(|f| f.ends_with(".svg")));
    let md = read(dir.path(), "report.md");
    assert!(md.contains("**Incomplete:**"));

    // NaN, infinities, empty series and surfaces, a zero interval,
    // samples pointing past the phases, a sim with nothing in it.
    r.phases[0].series = Some(Series {
        interval_s: 0.0,
        read_bytes_s: vec![f64::NAN, f64::INFINITY],
        write_bytes_s: vec![],
    });
    r.phases[1].series = Some(Series::default());
    r.phases[2].metrics.insert("write_bw".into(), f64::NAN);
    r.phases[2].surface = Some(Surface {
        op: "weird".into(),
        block: 0,
        burst: 0,
        points: vec![SurfacePoint {
            offset: u64::MAX,
            position: f64::NAN,
            bytes_s: -1.0,
            start_s: Some(f64::NAN),
        }],
        started_uptime_s: Some(f64::INFINITY),
        lead_s: Some(-1.0),
    });
    r.samples.push(DriveSample {
        t_s: f64::NAN,
        phase: 99,
        waf: f64::INFINITY,
        free_blocks: u64::MAX,
        total_blocks: 0,
        host_written_bytes: 0,
        nand_bytes_programmed: 0,
    });
    r.tolerance = f64::NAN;
    let mut sim = empty.clone();
    sim.mode = crate::results::Mode::Sim;
    r.sim = Some(Box::new(sim));
    let dir = tempfile::tempdir().unwrap();
    write_outputs(dir.path(), &r).unwrap();
    for f in std::fs::read_dir(dir.path()).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "svg") {
            svg_summary(&std::fs::read_to_string(&f).unwrap());
        }
    }
}

#[test]
fn markdown_escapes() {
    assert_eq!(md_escape("write_bw"), "write_bw");
    assert_eq!(md_escape("_x_ a|b <i> *"), "\\_x\\_ a\\|b \\<i> \\*");
    assert_eq!(md_escape("a\nb"), "a b");
}

#[test]
fn formats() {
    assert_eq!(fmt_bytes(0), "0 B");
    assert_eq!(fmt_bytes(128 << 10), "128 KiB");
    assert_eq!(fmt_bytes(1 << 30), "1 GiB");
    assert_eq!(fmt_bytes(80_000_000_000), "74.5 GiB");
    assert_eq!(fmt_bytes(u64::MAX), "16 EiB");
    assert_eq!(fmt_num(1234567.891, 1), "1,234,567.9");
    assert_eq!(fmt_num(-0.01, 1), "0.0");
    assert_eq!(fmt_num(-1500.0, 0), "-1,500");
    assert_eq!(fmt_num(f64::NAN, 1), "n/a");
    assert_eq!(fmt_mbs(174e6), "174.0");
    assert_eq!(fmt_pct(0.068), "+6.8 %");
    assert_eq!(fmt_pct(-0.5), "-50.0 %");
    assert_eq!(fmt_metric("write_bw", 82e6), "82.0 MB/s");
    assert_eq!(fmt_metric("read_iops", 41523.4), "41,523 IOPS");
    assert_eq!(fmt_metric("write_bw_min", 28.6e6), "28.6 MB/s");
    assert_eq!(fmt_metric("iops_mean", 100.0), "100 IOPS");
    assert_eq!(fmt_metric("clat_mean_ns", 250_000.0), "250.0 µs");
    assert_eq!(fmt_metric("trimmed_bytes", 1073741824.0), "1 GiB");
    assert_eq!(fmt_metric("host_written", 1073741824.0), "1 GiB");
    assert_eq!(fmt_metric("write_clat_p99", 2_500_000.0), "2.50 ms");
    assert_eq!(fmt_unix(0), "1970-01-01 00:00 UTC");
    assert_eq!(fmt_unix(1_764_554_400), "2025-12-01 02:00 UTC");
    assert_eq!(fmt_unix(951_782_400), "2000-02-29 00:00 UTC");
    assert_eq!(csv_field("a,b"), "\"a,b\"");
    assert_eq!(super::csv::csv_num(3.0 * 0.2), "0.6");
    assert_eq!(super::csv::csv_num(0.1 + 0.2), "0.3");
    assert_eq!(super::csv::csv_num(123_456_789.5), "123456789.5");
    assert_eq!(super::csv::csv_num(2.5e9), "2500000000");
    assert_eq!(super::csv::csv_num(-0.0), "0");
    assert_eq!(super::csv::csv_num(1.25), "1.25");
    assert_eq!(super::csv::csv_num(f64::NAN), "");
    assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
}

#[test]
fn key_values_fall_back_to_fio_json_and_surface_points() {
    let r = testdata::trim_recovery();
    let mut random = r.phase("random").unwrap().clone();
    let bw = random.metrics.remove("write_bw").unwrap();
    assert!(
        !nonzero(key_value(&random, "read_bw")),
        "fio's 0 reads are no figure"
    );
    let from_fio = key_value(&random, "write_bw").unwrap();
    assert!((from_fio - bw).abs() <= 1.0, "{from_fio} vs {bw}");
    let mut fresh = r.phase("fresh").unwrap().clone();
    let (mean, median) = (fresh.metrics["mean_bw"], fresh.metrics["median_bw"]);
    assert_eq!(key_value(&fresh, "median_bw"), Some(median));
    // A surface is no fio phase: no write_bw of its own.
    assert_eq!(key_value(&fresh, "write_bw"), None);
    fresh.metrics.remove("mean_bw");
    assert!((key_value(&fresh, "mean_bw").unwrap() - mean).abs() < 1e-3);
    assert_eq!(key_value(&fresh, "read_bw"), None);
}

/// A replayed comparison with the job files' prediction: the table gets
/// the prediction and its difference, the replayed paragraph says what
/// each tests.
#[test]
fn a_replayed_comparison_shows_the_prediction_beside_it() {
    let mut r = testdata::trim_recovery();
    for c in &mut r.comparison {
        c.replayed = true;
        c.predicted = Some(c.guest * 1.25);
    }
    let dir = tempfile::tempdir().unwrap();
    write_outputs(dir.path(), &r).unwrap();
    let md = read(dir.path(), "report.md");
    assert!(md.contains(
        "| Phase | Metric | Guest | Simulator | Difference | Within tolerance | Predicted (job files) | Prediction's difference |"
    ));
    let row = md
        .lines()
        .find(|l| l.starts_with("| used | median_bw |"))
        .unwrap();
    assert!(row.ends_with("| +25.0 % |"), "{row}");
    assert!(md.contains("checks that the daemon delivered each completion when its model said"));
}

#[test]
fn comparisons_computed_when_the_run_has_none() {
    let mut r = testdata::trim_recovery();
    let given = r.comparison.clone();
    r.comparison.clear();
    let computed = comparisons(&r);
    for c in &given {
        let d = computed
            .iter()
            .find(|x| x.phase == c.phase && x.metric == c.metric)
            .unwrap();
        assert!((d.difference - c.difference).abs() < 1e-12);
        assert_eq!(d.within, c.within);
    }
}

mod prop {
    use super::*;
    use crate::results::{BenchResults, Mode};
    use proptest::prelude::*;

    fn num() -> impl Strategy<Value = f64> {
        prop_oneof![
            4 => 0.0..1e10f64,
            1 => Just(f64::NAN),
            1 => Just(f64::INFINITY),
            1 => Just(-1.0),
            1 => Just(0.0),
            1 => Just(1e300),
        ]
    }

    fn phase() -> impl Strategy<Value = PhaseResult> {
        (
            "[a-zA-Z0-9 ./_|*<>&\"é-]{0,12}",
            prop_oneof![Just("fio"), Just("surface"), Just("trim"), Just("idle")],
            proptest::option::of((
                num(),
                proptest::collection::vec(num(), 0..20),
                proptest::collection::vec(num(), 0..20),
            )),
            proptest::option::of(proptest::collection::vec(
                (any::<u64>(), num(), num()),
                0..20,
            )),
            proptest::collection::btree_map("[a-z_]{1,10}", num(), 0..4),
            proptest::option::of((any::<u32>(), any::<u32>())),
        )
            .prop_map(|(name, kind, series, surface, metrics, trim)| {
                let mut p = testdata::used_state().phases[0].clone();
                p.name = name;
                p.kind = kind.into();
                p.fio = None;
                p.metrics = metrics;
                p.series = series.map(|(interval_s, r, w)| Series {
                    interval_s,
                    read_bytes_s: r,
                    write_bytes_s: w,
                });
                p.surface = surface.map(|pts| Surface {
                    op: "write".into(),
                    block: 131072,
                    burst: 1 << 20,
                    points: pts
                        .into_iter()
                        .map(|(offset, position, bytes_s)| SurfacePoint {
                            offset,
                            position,
                            bytes_s,
                            start_s: None,
                        })
                        .collect(),
                    started_uptime_s: None,
                    lead_s: None,
                });
                p.trim = trim.map(|(a, b)| vssd_device::report::TrimReport {
                    discard_cmds: u64::from(a),
                    requested_bytes: u64::from(a) * 4096,
                    freed_bytes: u64::from(b) * 4096,
                    ..Default::default()
                });
                p
            })
    }

    fn run() -> impl Strategy<Value = BenchResults> {
        (
            proptest::collection::vec(phase(), 0..5),
            proptest::collection::vec((num(), 0usize..7, num(), any::<u16>(), any::<u16>()), 0..30),
            any::<u64>(),
            any::<bool>(),
        )
            .prop_map(|(phases, samples, capacity, sim)| {
                let mut r = testdata::used_state();
                r.phases = phases;
                r.capacity = capacity;
                r.samples = samples
                    .into_iter()
                    .map(|(t_s, phase, waf, free, total)| DriveSample {
                        t_s,
                        phase,
                        waf,
                        free_blocks: u64::from(free),
                        total_blocks: u64::from(total),
                        host_written_bytes: 0,
                        nand_bytes_programmed: 0,
                    })
                    .collect();
                if sim {
                    let mut s = r.clone();
                    s.mode = Mode::Sim;
                    r.sim = Some(Box::new(s));
                }
                r
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn any_run_renders(r in run(), other in run()) {
            let dir = tempfile::tempdir().unwrap();
            let files = write_outputs(dir.path(), &r).unwrap();
            for f in &files {
                prop_assert_eq!(f.parent(), Some(dir.path()));
                if f.extension().is_some_and(|e| e == "svg") {
                    svg_summary(&std::fs::read_to_string(f).unwrap());
                }
            }
            let _ = crate::compare::compare(&r, &other);
        }
    }
}
