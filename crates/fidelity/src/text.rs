//! `vssd validate`'s report as text: every figure with its error (and its
//! value under each reading of an assumed preparation), every shape held
//! or not, each preset's held-out and training summaries, then all
//! presets'.

use crate::judge::Report;

pub(crate) fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{:.0} %", v * 100.0))
}

fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The report as text: every figure, then the summaries.
pub fn text(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    if let Some(c) = r.capacity {
        let _ = writeln!(
            o,
            "(every drive at {} bytes instead of its own capacity: a quick check, not the published table)\n",
            c
        );
    }
    for p in &r.presets {
        let _ = writeln!(o, "{}: {}", p.preset, p.drive);
        if p.fitted {
            let _ = writeln!(
                o,
                "  (fitted: a held-out figure is simulated with the fit that left its source out)"
            );
        }
        for n in &p.notes {
            let _ = writeln!(o, "  note: {n}");
        }
        if p.figures.is_empty() {
            let _ = writeln!(
                o,
                "  no published figures in the corpus (see its coverage note)"
            );
        }
        let _ = writeln!(
            o,
            "  {:<44} {:<12} {:<17} {:>10} {:>10} {:>8}  held out",
            "figure", "state", "metric", "published", "simulated", "error"
        );
        for j in p.figures.iter().filter(|_| !p.figures.is_empty()) {
            let _ = writeln!(
                o,
                "  {:<44} {:<12} {:<17} {:>10} {:>10} {:>8}  {}",
                vssd_chart::numfmt::truncate(&j.figure, 44),
                j.state.name(),
                format!("{} ({})", j.metric.name(), j.unit)
                    .chars()
                    .take(17)
                    .collect::<String>(),
                num(j.published),
                j.simulated.map_or_else(|| "—".into(), num),
                j.error
                    .map_or_else(|| "—".into(), |e| format!("{:+.0} %", e * 100.0)),
                if j.other_drive {
                    "no (other drive)"
                } else if j.held_out {
                    "yes"
                } else {
                    "no (trained)"
                }
            );
            if !j.readings.is_empty() {
                let rs: Vec<String> = j
                    .readings
                    .iter()
                    .map(|r| {
                        format!(
                            "{} {}",
                            r.reading,
                            r.simulated.map_or_else(|| "—".into(), num)
                        )
                    })
                    .collect();
                let _ = writeln!(o, "    readings: {}", rs.join(", "));
            }
        }
        shapes(&mut o, p);
        let h = &p.held_out;
        let _ = writeln!(
            o,
            "  held out: {} figures, median |error| {}, p90 {}, within ±25 %: {}; training: {} figures, median |error| {}\n",
            h.figures,
            pct(h.median_abs_error),
            pct(h.p90_abs_error),
            pct(h.within_25pct),
            p.training.figures,
            pct(p.training.median_abs_error),
        );
    }
    if r.presets.len() == 1 {
        // The preset's own summary above says it all.
        return o;
    }
    let all = format!("all {} presets", r.presets.len());
    let h = &r.overall_held_out;
    let _ = writeln!(
        o,
        "{all}, held out: {} figures, median |error| {}, p90 {}, within ±25 %: {}",
        h.figures,
        pct(h.median_abs_error),
        pct(h.p90_abs_error),
        pct(h.within_25pct)
    );
    let t = &r.overall_training;
    let _ = writeln!(
        o,
        "{all}, training (spec sheets, fitted sources): {} figures, median |error| {}",
        t.figures,
        pct(t.median_abs_error)
    );
    let s = &r.overall_shapes;
    let _ = writeln!(
        o,
        "{all}, shapes: {} of {} held on their drives",
        s.held, s.shapes
    );
    for q in &r.quorum_shapes {
        let _ = writeln!(
            o,
            "shape {} (at least {} of its drives): {} — passed {}, failed {}",
            q.shape,
            q.at_least,
            if q.held { "held" } else { "NOT HELD" },
            list(&q.passed),
            list(&q.failed)
        );
    }
    o
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// A preset's shapes: each held or not, with the check's values.
fn shapes(o: &mut String, p: &crate::judge::PresetResult) {
    use std::fmt::Write as _;
    if p.shapes.is_empty() {
        return;
    }
    let _ = writeln!(o, "  {:<40} {:<14} {:<9} check", "shape", "state", "held");
    for s in &p.shapes {
        let held = match s.held {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "no value",
        };
        let _ = writeln!(
            o,
            "  {:<40} {:<14} {:<9} {}{}",
            vssd_chart::numfmt::truncate(&s.shape, 40),
            s.state.name(),
            held,
            s.detail,
            match s.at_least {
                Some(n) => format!("  (judged across its drives: at least {n})"),
                None => String::new(),
            }
        );
        if !s.readings.is_empty() {
            let rs: Vec<String> = s
                .readings
                .iter()
                .map(|r| {
                    let h = match r.simulated {
                        Some(v) if v > 0.5 => "held",
                        Some(_) => "not held",
                        None => "no value",
                    };
                    format!("{} {h}", r.reading)
                })
                .collect();
            let _ = writeln!(o, "    readings: {}", rs.join(", "));
        }
    }
    let h = &p.shapes_held;
    let _ = writeln!(o, "  shapes: {} of {} held on this drive", h.held, h.shapes);
}
