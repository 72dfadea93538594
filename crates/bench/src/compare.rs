//! `vssd bench compare`: two runs' key tables side by side (two drivers,
//! two profiles, two buses, guest and simulator...), phases matched by
//! name, each figure with the ratio B / A.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

use super::report::{
    KEY_METRICS, comparisons, fmt_bytes, fmt_metric, fmt_pct, fmt_ratio, fmt_unix, key_figures,
    key_value, md_escape, nonzero, read_results,
};
use super::results::{BenchResults, Mode, PhaseResult};

/// The two runs' key tables side by side, as Markdown: what ran, per
/// phase every figure of A and B with B / A, the ratios to each run's
/// baseline, the TRIM audit, the expectations and the simulator-vs-guest
/// differences. Phases are matched by name; a phase only one run has is
/// listed as such.
pub fn compare(a: &BenchResults, b: &BenchResults) -> String {
    let (la, lb) = labels(a, b);
    let runs = Runs {
        a,
        b,
        la: &la,
        lb: &lb,
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# vssd bench compare: {} vs {}\n",
        md_escape(&la),
        md_escape(&lb)
    );
    let names = phase_names(a, b);
    runs.what_ran(&mut out);
    runs.figures(&mut out, &names);
    runs.baseline_ratios(&mut out, &names);
    runs.trim_audit(&mut out, &names);
    runs.expectations(&mut out);
    runs.sim_vs_guest(&mut out);
    out
}

/// The two runs and their column labels.
struct Runs<'a> {
    a: &'a BenchResults,
    b: &'a BenchResults,
    la: &'a str,
    lb: &'a str,
}

impl Runs<'_> {
    /// What ran: scenario, mode, drive, bus, environment, result.
    fn what_ran(&self, out: &mut String) {
        let (a, b) = (self.a, self.b);
        let _ = writeln!(out, "## What ran\n");
        let row = |k: &str, f: &dyn Fn(&BenchResults) -> String| {
            let (x, y) = (f(a), f(b));
            let mark = if x == y { "" } else { " (differs)" };
            vec![format!("{k}{mark}"), x, y]
        };
        let opt = |s: &Option<String>| s.clone().unwrap_or_else(|| "—".into());
        let rows = vec![
            row("Scenario", &|r| r.scenario.clone()),
            row("Mode", &|r| mode(r).into()),
            row("Profile", &|r| r.profile.clone()),
            row("Capacity", &|r| fmt_bytes(r.capacity)),
            row("Bus", &|r| match r.mode {
                Mode::Guest => r.bus.name().into(),
                Mode::Sim => "—".into(),
            }),
            row("Accelerator", &|r| opt(&r.environment.accel)),
            row("Guest kernel", &|r| opt(&r.environment.guest_kernel)),
            row("vssd", &|r| r.environment.vssd.clone()),
            row("QEMU", &|r| opt(&r.environment.qemu)),
            row("fio", &|r| opt(&r.environment.fio)),
            row("Started", &|r| fmt_unix(r.started_unix)),
            row("Result", &|r| result(r)),
        ];
        table(out, &["", self.la, self.lb], &[false, false, false], rows);
    }

    /// Every figure, phase by phase, with B / A.
    fn figures(&self, out: &mut String, names: &[String]) {
        let (a, b) = (self.a, self.b);
        let mut rows = Vec::new();
        for name in names {
            let (pa, pb) = (a.phase(name), b.phase(name));
            let metrics = metric_names(pa, pb);
            if metrics.is_empty() {
                continue;
            }
            for m in metrics {
                let va = pa.and_then(|p| key_value(p, &m));
                let vb = pb.and_then(|p| key_value(p, &m));
                let cell = |p: Option<&PhaseResult>, v: Option<f64>| match (p, v) {
                    (None, _) => "(no phase)".to_string(),
                    (Some(_), None) => "—".to_string(),
                    (Some(_), Some(v)) => fmt_metric(&m, v),
                };
                let ratio = match (va, vb) {
                    (Some(x), Some(y)) if x != 0.0 && x.is_finite() && y.is_finite() => {
                        fmt_ratio(y / x)
                    }
                    _ => "—".into(),
                };
                rows.push(vec![
                    name.clone(),
                    m.clone(),
                    cell(pa, va),
                    cell(pb, vb),
                    ratio,
                ]);
            }
        }
        if !rows.is_empty() {
            let _ = writeln!(out, "## Figures per phase\n");
            let _ = writeln!(
                out,
                "Phases matched by name; B / A is the second run's figure over the first's.\n"
            );
            table(
                out,
                &["Phase", "Metric", self.la, self.lb, "B / A"],
                &[false, false, true, true, true],
                rows,
            );
        }
    }

    /// Each run against its own baseline (fresh): does B recover like A?
    fn baseline_ratios(&self, out: &mut String, names: &[String]) {
        let (a, b) = (self.a, self.b);
        let (ka, ra) = key_figures(a);
        let (kb, rb) = key_figures(b);
        let keys: Vec<&str> = KEY_METRICS
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| ka.iter().chain(&kb).any(|(x, _)| x == k))
            .collect();
        let ratio_of =
            |rows: &[super::report::KeyRow], present: &[(&str, &str)], phase: &str, key: &str| {
                let row = rows.iter().find(|r| r.phase == phase)?;
                let i = present.iter().position(|(k, _)| *k == key)?;
                Some((row.values[i].1?, row.baseline.clone()?))
            };
        let mut rows = Vec::new();
        for name in names {
            for key in &keys {
                let x = ratio_of(&ra, &ka, name, key);
                let y = ratio_of(&rb, &kb, name, key);
                if x.is_none() && y.is_none() {
                    continue;
                }
                let cell = |v: &Option<(f64, String)>| match v {
                    Some((r, base)) => format!("{} × {base}", fmt_ratio(*r)),
                    None => "—".into(),
                };
                rows.push(vec![name.clone(), key.to_string(), cell(&x), cell(&y)]);
            }
        }
        if !rows.is_empty() {
            let _ = writeln!(out, "## Ratios to each run's baseline\n");
            let _ = writeln!(
                out,
                "Each phase's figure over its run's baseline for the same workload (the phase named like “fresh”, else the first).\n"
            );
            table(
                out,
                &["Phase", "Metric", self.la, self.lb],
                &[false, false, true, true],
                rows,
            );
        }
    }

    /// What each run's TRIM phases freed of what they requested.
    fn trim_audit(&self, out: &mut String, names: &[String]) {
        let (a, b) = (self.a, self.b);
        let mut rows = Vec::new();
        for name in names {
            let ta = a.phase(name).and_then(|p| p.trim.as_ref());
            let tb = b.phase(name).and_then(|p| p.trim.as_ref());
            let is_trim = [a.phase(name), b.phase(name)]
                .iter()
                .flatten()
                .any(|p| p.kind == "trim");
            if !is_trim || (ta.is_none() && tb.is_none()) {
                continue;
            }
            let cell = |t: Option<&vssd_device::report::TrimReport>| match t {
                Some(t) => format!(
                    "{} freed of {} requested ({} commands)",
                    fmt_bytes(t.freed_bytes),
                    fmt_bytes(t.requested_bytes),
                    t.discard_cmds + t.write_zeroes_cmds
                ),
                None => "—".into(),
            };
            rows.push(vec![name.clone(), cell(ta), cell(tb)]);
        }
        if !rows.is_empty() {
            let _ = writeln!(out, "## TRIM audit\n");
            table(
                out,
                &["Phase", self.la, self.lb],
                &[false, false, false],
                rows,
            );
        }
    }

    /// The expectations' verdicts, matched by their text.
    fn expectations(&self, out: &mut String) {
        let (a, b) = (self.a, self.b);
        let texts: Vec<&str> = {
            let mut seen = BTreeSet::new();
            a.expects
                .iter()
                .chain(&b.expects)
                .map(|e| e.text.as_str())
                .filter(|t| seen.insert(*t))
                .collect()
        };
        if !texts.is_empty() {
            let verdict = |r: &BenchResults, t: &str| match r.expects.iter().find(|e| e.text == t) {
                Some(e) => format!("{} ({})", e.label(), e.detail),
                None => "—".into(),
            };
            let rows = texts
                .iter()
                .map(|t| vec![t.to_string(), verdict(a, t), verdict(b, t)])
                .collect();
            let _ = writeln!(out, "## Expectations\n");
            table(
                out,
                &["Assertion", self.la, self.lb],
                &[false, false, false],
                rows,
            );
        }
    }

    /// Simulator vs guest, per run.
    fn sim_vs_guest(&self, out: &mut String) {
        let (a, b) = (self.a, self.b);
        let (ca, cb) = (comparisons(a), comparisons(b));
        if !ca.is_empty() || !cb.is_empty() {
            let mut keys: Vec<(String, String)> = Vec::new();
            for c in ca.iter().chain(&cb) {
                let k = (c.phase.clone(), c.metric.clone());
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
            let cell = |cs: &[super::results::PhaseComparison], k: &(String, String)| {
                cs.iter()
                    .find(|c| c.phase == k.0 && c.metric == k.1)
                    .map(|c| format!("{} ({})", fmt_pct(c.difference), c.verdict()))
                    .unwrap_or_else(|| "—".into())
            };
            let rows = keys
                .iter()
                .map(|k| vec![k.0.clone(), k.1.clone(), cell(&ca, k), cell(&cb, k)])
                .collect();
            let _ = writeln!(out, "## Simulator vs guest\n");
            let _ = writeln!(
                out,
                "(simulator − guest) / guest in each run, and whether within its tolerance.\n"
            );
            table(
                out,
                &["Phase", "Metric", self.la, self.lb],
                &[false, false, true, true],
                rows,
            );
        }
    }
}

/// [`compare`] of two output directories (or `results.json` files).
pub fn compare_dirs(a: &Path, b: &Path) -> io::Result<String> {
    Ok(compare(&read_results(a)?, &read_results(b)?))
}

fn mode(r: &BenchResults) -> &'static str {
    match r.mode {
        Mode::Guest => "guest",
        Mode::Sim => "simulator",
    }
}

fn result(r: &BenchResults) -> String {
    let failed = r.expects.iter().filter(|e| e.failed()).count();
    match (&r.incomplete, failed) {
        (Some(why), _) => format!("incomplete ({why})"),
        (None, 0) if r.inconclusive() > 0 => format!(
            "passed ({} expectations, {} inconclusive: guest-bound)",
            r.expects.len(),
            r.inconclusive()
        ),
        (None, 0) => format!("passed ({} expectations)", r.expects.len()),
        (None, n) => format!("failed ({n} of {} expectations)", r.expects.len()),
    }
}

/// Column labels: "A" and "B", with what tells the runs apart.
fn labels(a: &BenchResults, b: &BenchResults) -> (String, String) {
    let traits: [&dyn Fn(&BenchResults) -> String; 6] = [
        &|r| r.scenario.clone(),
        &|r| mode(r).into(),
        &|r| r.profile.clone(),
        &|r| fmt_bytes(r.capacity),
        &|r| r.bus.name().into(),
        &|r| r.environment.guest_kernel.clone().unwrap_or_default(),
    ];
    let differing: Vec<_> = traits.iter().filter(|f| f(a) != f(b)).take(2).collect();
    let label = |name: &str, r: &BenchResults| {
        let parts: Vec<String> = differing
            .iter()
            .map(|f| f(r))
            .filter(|s| !s.is_empty())
            .collect();
        if parts.is_empty() {
            name.to_string()
        } else {
            format!("{name} ({})", parts.join(", "))
        }
    };
    (label("A", a), label("B", b))
}

/// Phase names in A's order, then those only B has.
fn phase_names(a: &BenchResults, b: &BenchResults) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for p in a.phases.iter().chain(&b.phases) {
        if !names.contains(&p.name) {
            names.push(p.name.clone());
        }
    }
    names
}

/// The figures either phase has (`metrics`, else the key figures derived
/// from fio's JSON or the surface), throughput first; figures that are 0
/// or missing in both are left out.
fn metric_names(a: Option<&PhaseResult>, b: Option<&PhaseResult>) -> Vec<String> {
    let phases: Vec<&PhaseResult> = [a, b].into_iter().flatten().collect();
    let mut names: BTreeSet<String> = phases
        .iter()
        .flat_map(|p| p.metrics.keys().cloned())
        .collect();
    if names.is_empty() {
        names = KEY_METRICS.iter().map(|(k, _)| k.to_string()).collect();
    }
    const FIRST: [&str; 7] = [
        "write_bw",
        "read_bw",
        "median_bw",
        "mean_bw",
        "write_iops",
        "read_iops",
        "waf",
    ];
    let mut out: Vec<String> = FIRST
        .iter()
        .map(|k| k.to_string())
        .filter(|k| names.contains(k))
        .collect();
    out.extend(names.into_iter().filter(|k| !FIRST.contains(&k.as_str())));
    out.retain(|k| phases.iter().any(|p| nonzero(key_value(p, k))));
    out
}

fn table(out: &mut String, head: &[&str], numeric: &[bool], rows: Vec<Vec<String>>) {
    let cells: Vec<String> = head.iter().map(|h| md_escape(h)).collect();
    let _ = writeln!(out, "| {} |", cells.join(" | "));
    let sep: Vec<&str> = numeric
        .iter()
        .map(|n| if *n { "---:" } else { "---" })
        .collect();
    let _ = writeln!(out, "| {} |", sep.join(" | "));
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| md_escape(c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata;
    use vssd_guest::bus::Bus;

    /// Prints a comparison to look at: `cargo test --lib print_comparison -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn print_comparison() {
        let a = testdata::trim_recovery();
        let mut b = a.clone();
        b.bus = Bus::Nvme;
        println!("{}", compare(&a, &b));
    }

    #[test]
    fn two_buses_side_by_side() {
        let a = testdata::trim_recovery();
        let mut b = a.clone();
        b.bus = Bus::Nvme;
        // B's driver passes less TRIM: the surface after it stays lower.
        let t = b.phases.iter_mut().find(|p| p.name == "trimmed").unwrap();
        let bw = t.metrics["mean_bw"];
        t.metrics.insert("mean_bw".into(), bw * 0.5);
        b.phases.retain(|p| p.name != "check");
        b.expects[1].passed = false;

        let md = compare(&a, &b);
        assert!(
            md.starts_with("# vssd bench compare: A (sata) vs B (nvme)\n"),
            "{md}"
        );
        assert!(md.contains("| Bus (differs) | sata | nvme |"));
        assert!(md.contains("| Scenario | trim-recovery | trim-recovery |"));
        assert!(md.contains("| Phase | Metric | A (sata) | B (nvme) | B / A |"));
        let row = |phase: &str, metric: &str| {
            md.lines()
                .find(|l| l.starts_with(&format!("| {phase} | {metric} |")))
                .unwrap_or_else(|| panic!("no row {phase} {metric}"))
                .to_string()
        };
        assert!(row("fresh", "mean_bw").ends_with("| 1.00 |"));
        assert!(row("trimmed", "mean_bw").ends_with("| 0.50 |"));
        assert!(row("random", "write_bw").ends_with("| 1.00 |"));
        assert!(
            !md.contains("| random | read_bw |"),
            "zeros in both runs are left out"
        );
        assert!(row("random", "write_iops").ends_with("| 1.00 |"));
        // Ratios to each run's own baseline.
        assert!(md.contains("## Ratios to each run's baseline"));
        let r = md
            .lines()
            .skip_while(|l| !l.starts_with("## Ratios to each run's baseline"))
            .find(|l| l.starts_with("| trimmed | mean_bw |"))
            .expect("baseline ratio row");
        assert!(
            r.contains("0.98 × fresh") && r.contains("0.49 × fresh"),
            "{r}"
        );
        // TRIM audit and expectations matched.
        assert!(md.contains("| trim | 993 MiB freed of 1 GiB requested (256 commands) |"));
        assert!(md.lines().any(|l| {
            l.starts_with("| trimmed.mean_bw >= 0.9 \\* fresh.mean_bw | PASS")
                && l.contains("| FAIL")
        }));
        // A phase only A has.
        assert!(md.contains("| Result (differs) |"));
        // Simulator differences of both runs.
        assert!(md.contains("## Simulator vs guest"));
    }

    #[test]
    fn different_scenarios_and_empty_runs() {
        let a = testdata::used_state();
        let b = testdata::trim_recovery();
        let md = compare(&a, &b);
        assert!(md.contains("A (used-state"), "{md}");
        assert!(md.contains("| used | write_bw |"));
        assert!(md.contains("| used | mean_bw |"));
        assert!(md.contains("| fresh | write_iops |"));
        let mut empty = a.clone();
        empty.phases.clear();
        empty.expects.clear();
        let md = compare(&empty, &empty);
        assert!(md.contains("## What ran"));
        assert!(!md.contains("## Figures per phase"));
        let md = compare(&empty, &b);
        assert!(md.contains("(no phase)"));
    }

    #[test]
    fn compare_dirs_reads_results_json() {
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = testdata::used_state();
        let mut b = a.clone();
        b.profile = "sata-mlc-2011".into();
        crate::report::write_outputs(da.path(), &a).unwrap();
        crate::report::write_outputs(db.path(), &b).unwrap();
        let md = compare_dirs(da.path(), &db.path().join("results.json")).unwrap();
        assert!(
            md.contains("A (sata-mlc-2009) vs B (sata-mlc-2011)"),
            "{md}"
        );
        assert!(compare_dirs(da.path(), Path::new("/nonexistent")).is_err());
    }
}
