//! The verdicts of a scenario's `expect` phases on a run — pass, fail, or
//! inconclusive where the guest, not the drive, set a figure or the
//! simulator cannot measure it — and the same as JUnit XML for CI.

use crate::results::{BenchResults, ExpectResult, Mode, Verdict};
use crate::scenario::{PhaseKind, Scenario};

/// Evaluate the scenario's `expect` phases on `r`. An assertion that
/// reads a throughput or latency figure of a phase the comparison marked
/// guest-bound is inconclusive: the emulated host, not the drive, set
/// that figure, so it neither passes nor fails, unless `r` is a strict
/// run, which it fails.
pub fn evaluate(sc: &Scenario, r: &BenchResults) -> Vec<ExpectResult> {
    let get = |p: &str, m: &str| r.phase(p).and_then(|ph| ph.metrics.get(m)).copied();
    let guest_bound = |phase: &str, metric: &str| {
        r.comparison
            .iter()
            .any(|c| c.guest_bound && c.phase == phase)
            && sc
                .phases
                .iter()
                .find(|p| p.name == phase)
                .is_some_and(|p| p.kind.metrics().contains(&metric))
    };
    sc.phases
        .iter()
        .filter_map(|p| match &p.kind {
            PhaseKind::Expect { checks } => Some(checks),
            _ => None,
        })
        .flatten()
        .map(|a| {
            let (passed, detail) = a.check(&get);
            let mut bound: Vec<String> = a
                .refs()
                .into_iter()
                .filter(|(p, m)| guest_bound(p, m))
                .map(|(p, _)| p)
                .collect();
            bound.sort();
            bound.dedup();
            // The simulator does not lose data or run a filesystem: what
            // faults and power cuts did is a guest run's to measure.
            let mut unsimulated: Vec<String> = a
                .refs()
                .into_iter()
                .filter(|(p, m)| {
                    r.mode == Mode::Sim
                        && sc.phases.iter().any(|q| {
                            q.name == *p
                                && q.kind.guest_only_metrics()
                                && q.kind.metrics().contains(&m.as_str())
                        })
                })
                .map(|(p, _)| p)
                .collect();
            unsimulated.dedup();
            let host_bound = host_bound(r, a, passed);
            let inconclusive = if !unsimulated.is_empty() {
                Some(format!(
                    "inconclusive (not simulated): {} measured only in a guest run (the simulator has no data to lose and no filesystem)",
                    unsimulated.join(", ")
                ))
            } else if !bound.is_empty() {
                Some(format!(
                    "inconclusive (guest-bound): the guest could not keep the drive busy in {} \
                     (its requests were in the drive at under half the simulator's queue depth), \
                     so the emulated host, not the drive, set the figure; run with KVM or a \
                     larger --time-scale",
                    bound.join(", ")
                ))
            } else {
                host_bound
            };
            ExpectResult {
                text: a.text.clone(),
                passed: passed && inconclusive.is_none(),
                detail,
                inconclusive,
                strict: r.strict,
            }
        })
        .collect()
}

/// A guest run's assertion `a` judged again on the drive's side: each
/// throughput figure (`*_bw`) of a fio or surface phase replaced by the
/// bytes the drive moved per second it had the guest's requests
/// (`drive_bw`), which a busy host that slows the guest does not change.
/// When that verdict differs from the guest's (`passed`), the host, not
/// the drive, decided the assertion: why it is inconclusive.
fn host_bound(r: &BenchResults, a: &vssd_common::expr::Assertion, passed: bool) -> Option<String> {
    if r.mode != Mode::Guest {
        return None;
    }
    let drive_bw = |p: &str| {
        r.phase(p)
            .filter(|ph| matches!(ph.kind.as_str(), "fio" | "surface"))
            .and_then(|ph| ph.metrics.get("drive_bw"))
            .copied()
    };
    let swapped = |m: &str| m.ends_with("_bw") && m != "drive_bw";
    let refs = a.refs();
    if !refs
        .iter()
        .any(|(p, m)| swapped(m) && drive_bw(p).is_some())
    {
        return None;
    }
    let get = |p: &str, m: &str| match drive_bw(p) {
        Some(v) if swapped(m) => Some(v),
        _ => r.phase(p).and_then(|ph| ph.metrics.get(m)).copied(),
    };
    let (drive_passed, detail) = a.check(&get);
    (drive_passed != passed).then(|| {
        format!(
            "inconclusive (guest-bound): the guest's figures say {} but the drive's own say {} \
             (each phase's bytes per second the drive had the guest's requests, drive_bw: {detail}): \
             the host slowed the guest in some phase more than in another, so the guest's \
             figures do not show the drive; run with KVM, a larger --time-scale or a quieter host",
            if passed { "PASS" } else { "FAIL" },
            if drive_passed { "PASS" } else { "FAIL" },
        )
    })
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Seconds as JUnit's `time` attributes carry them: three decimals.
fn junit_time(s: f64) -> String {
    format!("{:.3}", if s.is_finite() { s.max(0.0) } else { 0.0 })
}

/// The wall-clock seconds of the phases assertion `text` reads (the
/// names before a `.` in it that are phases of `r`).
fn read_phases_s(r: &BenchResults, text: &str) -> f64 {
    r.phases
        .iter()
        .filter(|p| {
            text.match_indices(&format!("{}.", p.name)).any(|(i, _)| {
                text[..i]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'))
            })
        })
        .map(|p| p.wall_s)
        .filter(|s| s.is_finite())
        .sum()
}

/// The `expect` verdicts as JUnit XML: an inconclusive assertion is a
/// skipped test case whose message says why, or in a strict run a failed
/// one with the same message. The suite's `time` is the run's on the wall
/// clock, a test case's the wall time of the phases it reads; the suite's
/// properties say what ran (scenario, profile, capacity, bus, K, mode,
/// strict).
pub fn junit(r: &BenchResults) -> String {
    let failures =
        r.expects.iter().filter(|e| e.failed()).count() + usize::from(r.incomplete.is_some());
    let skipped = r
        .expects
        .iter()
        .filter(|e| e.verdict() == Verdict::Inconclusive && !e.failed())
        .count();
    let total_s = if r.duration_s > 0.0 {
        r.duration_s
    } else {
        r.phases.iter().map(|p| p.wall_s).sum()
    };
    let mut x = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"vssd bench {}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{}\">\n",
        xml_escape(&r.scenario),
        r.expects.len() + usize::from(r.incomplete.is_some()),
        junit_time(total_s),
    );
    x.push_str("  <properties>\n");
    let props = [
        ("scenario", r.scenario.clone()),
        ("profile", r.profile.clone()),
        ("capacity", r.capacity.to_string()),
        ("bus", r.bus.name().to_string()),
        (
            "mode",
            match r.mode {
                crate::results::Mode::Guest => "guest",
                crate::results::Mode::Sim => "simulator",
            }
            .to_string(),
        ),
        ("time_scale", r.time_scale.to_string()),
        ("strict", r.strict.to_string()),
    ];
    for (k, v) in props {
        x.push_str(&format!(
            "    <property name=\"{k}\" value=\"{}\"/>\n",
            xml_escape(&v)
        ));
    }
    if let Some(why) = &r.time_scale_reason {
        x.push_str(&format!(
            "    <property name=\"time_scale_reason\" value=\"{}\"/>\n",
            xml_escape(why)
        ));
    }
    x.push_str("  </properties>\n");
    for e in &r.expects {
        x.push_str(&format!(
            "  <testcase classname=\"{}\" name=\"{}\" time=\"{}\"",
            xml_escape(&r.scenario),
            xml_escape(&e.text),
            junit_time(read_phases_s(r, &e.text))
        ));
        match (e.verdict(), &e.inconclusive) {
            (Verdict::Pass, _) => x.push_str("/>\n"),
            (Verdict::Inconclusive, Some(why)) if e.strict => x.push_str(&format!(
                ">\n    <failure type=\"inconclusive\" message=\"{}\"/>\n  </testcase>\n",
                xml_escape(&format!("strict run: {why} [{}]", e.detail))
            )),
            (Verdict::Inconclusive, Some(why)) => x.push_str(&format!(
                ">\n    <skipped message=\"{}\"/>\n  </testcase>\n",
                xml_escape(&format!("{why} [{}]", e.detail))
            )),
            _ => x.push_str(&format!(
                ">\n    <failure message=\"{}\"/>\n  </testcase>\n",
                xml_escape(&e.detail)
            )),
        }
    }
    if let Some(why) = &r.incomplete {
        x.push_str(&format!(
            "  <testcase classname=\"{}\" name=\"run completes\" time=\"{}\">\n    <failure message=\"{}\"/>\n  </testcase>\n",
            xml_escape(&r.scenario),
            junit_time(total_s),
            xml_escape(why)
        ));
    }
    x.push_str("</testsuite>\n");
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Mode;
    use crate::scenario::Overrides;
    use crate::sim_vs_guest::compare_runs;
    use crate::simrun;
    use crate::summary::summary;

    /// `trim-recovery` at 256 MiB and its simulator run.
    fn trim_recovery_in_the_simulator() -> (Scenario, BenchResults) {
        let sc = Scenario::load(
            "trim-recovery",
            &Overrides {
                capacity: Some(256 << 20),
                ..Overrides::default()
            },
        )
        .unwrap();
        let r = simrun::run(&sc, 1, None, &mut |_, _| {}).unwrap();
        (sc, r)
    }

    #[test]
    fn sim_only_trim_recovery_meets_its_expectations() {
        let (sc, mut r) = trim_recovery_in_the_simulator();
        r.expects = evaluate(&sc, &r);
        for e in &r.expects {
            assert!(e.passed, "{} [{}]", e.text, e.detail);
        }
        let x = junit(&r);
        assert!(x.contains("tests=\"3\" failures=\"0\""), "{x}");
        assert!(
            x.contains("<property name=\"scenario\" value=\"trim-recovery\"/>"),
            "{x}"
        );
        assert!(x.contains("<testcase classname=\"trim-recovery\" name=\"used.median_bw &lt; 0.8 * fresh.median_bw\" time=\""), "{x}");
    }

    #[test]
    fn an_expectation_on_a_guest_bound_phase_is_inconclusive_everywhere() {
        let (sc, mut r) = trim_recovery_in_the_simulator();
        // As a guest run's comparison would mark it: "used" guest-bound.
        let sim = r.clone();
        r.comparison = compare_runs(&r, &sim, sc.tolerance);
        for c in &mut r.comparison {
            c.guest_bound = c.phase == "used";
        }
        // And make the one that does not read "used" fail.
        r.phases
            .iter_mut()
            .find(|p| p.name == "trimmed")
            .unwrap()
            .metrics
            .insert("median_bw".into(), 1.0);
        r.expects = evaluate(&sc, &r);
        let v: Vec<_> = r.expects.iter().map(|e| e.verdict()).collect();
        assert_eq!(
            v,
            [Verdict::Inconclusive, Verdict::Fail, Verdict::Pass],
            "{:?}",
            r.expects
        );
        assert!(
            r.expects[0]
                .inconclusive
                .as_deref()
                .unwrap()
                .contains("used")
        );
        assert!(!r.expects[0].passed && !r.expects[0].failed());
        assert_eq!(r.inconclusive(), 1);
        let x = junit(&r);
        assert!(
            x.contains("tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""),
            "{x}"
        );
        assert!(
            x.contains("<skipped message=\"inconclusive (guest-bound): the guest could not keep the drive busy in used"),
            "{x}"
        );
        assert_eq!(x.matches("<failure").count(), 1, "{x}");
        let text = summary(&r);
        assert!(
            text.contains("INCONCLUSIVE (guest-bound) used.median_bw < 0.8 * fresh.median_bw"),
            "{text}"
        );
        let dir = tempfile::tempdir().unwrap();
        crate::report::write_outputs(dir.path(), &r).unwrap();
        let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
        assert!(
            html.contains("<td class=\"inconclusive\">INCONCLUSIVE (guest-bound)</td>"),
            "report.html"
        );
        // Without the failure, the run passes with one inconclusive.
        r.phases
            .iter_mut()
            .find(|p| p.name == "trimmed")
            .unwrap()
            .metrics
            .insert("median_bw".into(), 1e12);
        r.expects = evaluate(&sc, &r);
        assert!(r.passed());
        assert!(junit(&r).contains("failures=\"0\" errors=\"0\" skipped=\"1\""));
        assert!(summary(&r).contains("3 checks: 2 passed, 0 failed, 1 not judged (inconclusive)"));
        // Strict: the inconclusive one fails, everywhere, with its reason.
        r.strict = true;
        r.expects = evaluate(&sc, &r);
        assert!(!r.passed());
        assert_eq!(
            r.expects[0].label(),
            "FAIL (strict): INCONCLUSIVE (guest-bound)"
        );
        let x = junit(&r);
        assert!(
            x.contains("failures=\"1\" errors=\"0\" skipped=\"0\""),
            "{x}"
        );
        assert!(
            x.contains("<failure type=\"inconclusive\" message=\"strict run: inconclusive (guest-bound): the guest could not keep the drive busy in used"),
            "{x}"
        );
        assert!(
            x.contains("<property name=\"strict\" value=\"true\"/>"),
            "{x}"
        );
        let text = summary(&r);
        assert!(
            text.contains("FAIL (strict): INCONCLUSIVE (guest-bound) used.median_bw"),
            "{text}"
        );
        assert!(
            text.contains("1 not judged (inconclusive), which fails a strict run"),
            "{text}"
        );
        crate::report::write_outputs(dir.path(), &r).unwrap();
        let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
        assert!(html.contains("Failed (strict)"), "report.html");
    }

    /// A busy host slowed the guest in the trimmed pass only: its median
    /// says no recovery, the drive's own bytes per busy second say
    /// recovered. The host decided it: inconclusive, not failed; where
    /// the drive agrees with the guest, the guest's verdict stands.
    #[test]
    fn the_drives_own_figures_overrule_a_host_that_slowed_the_guest() {
        let (sc, mut r) = trim_recovery_in_the_simulator();
        r.mode = Mode::Guest;
        let set = |r: &mut BenchResults, p: &str, m: &str, v: f64| {
            r.phases
                .iter_mut()
                .find(|x| x.name == p)
                .unwrap()
                .metrics
                .insert(m.into(), v);
        };
        set(&mut r, "fresh", "median_bw", 250e6);
        set(&mut r, "used", "median_bw", 40e6);
        set(&mut r, "trimmed", "median_bw", 200e6);
        set(&mut r, "fresh", "drive_bw", 270e6);
        set(&mut r, "used", "drive_bw", 50e6);
        set(&mut r, "trimmed", "drive_bw", 268e6);
        r.expects = evaluate(&sc, &r);
        let v: Vec<_> = r.expects.iter().map(|e| e.verdict()).collect();
        assert_eq!(
            v,
            [Verdict::Pass, Verdict::Inconclusive, Verdict::Pass],
            "{:?}",
            r.expects
        );
        let why = r.expects[1].inconclusive.as_deref().unwrap();
        assert!(
            why.contains("the guest's figures say FAIL but the drive's own say PASS"),
            "{why}"
        );
        // The drive did not recover either: the failure stands.
        set(&mut r, "trimmed", "drive_bw", 150e6);
        r.expects = evaluate(&sc, &r);
        assert_eq!(r.expects[1].verdict(), Verdict::Fail);
    }

    #[test]
    fn a_failing_expectation_is_reported_with_its_numbers() {
        let text = "name = \"t\"\n[drive]\nprofile = \"sata-mlc-2011\"\ncapacity = \"256M\"\n\
            [[phase]]\nname = \"fresh\"\nkind = \"surface\"\nop = \"write\"\npositions = 8\n\
            [[phase]]\nkind = \"expect\"\nchecks = [\"fresh.mean_bw > 1e12\"]\n";
        let sc = Scenario::parse(text, "t.toml", None, &Overrides::default()).unwrap();
        let mut r = simrun::run(&sc, 1, None, &mut |_, _| {}).unwrap();
        r.expects = evaluate(&sc, &r);
        assert!(!r.passed());
        assert!(
            r.expects[0].detail.contains("fresh.mean_bw = "),
            "{}",
            r.expects[0].detail
        );
        assert!(junit(&r).contains("<failure message="));
    }
}
