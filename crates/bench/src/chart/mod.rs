//! SVG charts of a benchmark run, drawn from [`BenchResults`] alone:
//!
//! - [`throughput`]: bandwidth over time, one line per fio phase (x: seconds
//!   into the phase), as the reviews draw "fresh / used / after TRIM";
//! - [`surfaces`]: HD Tune-style throughput over disk position, one line per
//!   surface phase;
//! - [`drive`]: write amplification and free blocks over the run, with the
//!   phases marked;
//! - [`sim_vs_guest_throughput`], [`sim_vs_guest_surfaces`]: the guest's
//!   lines solid and the simulator's prediction dashed, one colour per
//!   phase, and the replayed trace as crosses where it differs from the
//!   guest.
//!
//! Charts are 800×450 SVG documents. Text is left to the viewer's
//! `sans-serif` font (plotters' naive layout, no system fonts needed), and
//! lines use the Okabe–Ito palette, which stays distinct with the common
//! colour-vision deficiencies. Any data draws: non-finite values are left
//! out, empty inputs give no chart (`None`).

use plotters::prelude::RGBColor;
pub use vssd_chart::Chart;
use vssd_chart::draw::*;
use vssd_chart::numfmt::fmt_bytes;
use vssd_chart::{INK, colour};

use super::results::{BenchResults, Mode, PhaseResult};

mod caption;
mod drive;

use caption::subtitle;
pub use drive::drive;

/// Every chart of a run: its own, and with a simulator run attached, the
/// overlays and the simulator's own charts (prefixed `sim-`).
pub fn charts(r: &BenchResults) -> Vec<Chart> {
    let mut out: Vec<Chart> = [throughput(r), surfaces(r), drive(r)]
        .into_iter()
        .flatten()
        .collect();
    if let Some(sim) = r.sim.as_deref() {
        out.extend(sim_vs_guest_throughput(r));
        out.extend(sim_vs_guest_surfaces(r));
        for mut c in [throughput(sim), surfaces(sim), drive(sim)]
            .into_iter()
            .flatten()
        {
            c.file_name = format!("sim-{}", c.file_name);
            c.title = format!("Simulator run: {}", c.title);
            out.push(c);
        }
    }
    out
}

/// Bandwidth over time of every phase with a series (`throughput.svg`).
pub fn throughput(r: &BenchResults) -> Option<Chart> {
    let mut lines = Vec::new();
    let mut marks = Vec::new();
    for p in &r.phases {
        for (dir, pts) in series_lines(p) {
            let label = match dir {
                Some(d) => format!("{} ({d})", p.name),
                None => p.name.clone(),
            };
            let c = colour(lines.len());
            if dir != Some("read") {
                marks.extend(drop_mark(p, c));
            }
            lines.push(Line::solid(label, c, pts));
        }
    }
    let title = format!("{}: throughput over time per phase", r.scenario);
    let plot = Plot {
        title: title.clone(),
        subtitle: subtitle(r),
        x_desc: series_x_desc(r),
        y_desc: format!("{} (MB/s)", direction_word(r, Kind::Series)),
        legend: lines.iter().map(Line::legend).collect(),
        lines,
        x_end: None,
        marks,
    };
    render("throughput.svg", title, &plot)
}

/// Where phase `p`'s writes dropped for good (an SLC cache running out;
/// `metrics::write_drop`), as a mark in its line's colour `c`.
fn drop_mark(p: &PhaseResult, c: RGBColor) -> Option<Mark> {
    let at = *p.metrics.get("write_drop_s")?;
    let bytes = *p.metrics.get("write_drop_bytes")?;
    Some(Mark {
        x: at,
        label: format!("{}: drop after {}", p.name, fmt_bytes(bytes as u64)),
        colour: c,
    })
}

/// Several runs' throughput over time in one chart (`vssd bench compare
/// --chart`): every phase with a series, one colour per run, labelled
/// with the run's profile (and the phase when a run has several).
pub fn runs_throughput(runs: &[&BenchResults]) -> Option<Chart> {
    let mut lines = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let phases: Vec<&PhaseResult> = r
            .phases
            .iter()
            .filter(|p| !series_lines(p).is_empty())
            .collect();
        for p in &phases {
            for (dir, pts) in series_lines(p) {
                let mut label = r.profile.clone();
                if phases.len() > 1 {
                    label = format!("{label}: {}", p.name);
                }
                if let Some(d) = dir {
                    label = format!("{label} ({d})");
                }
                lines.push(if dir == Some("read") {
                    Line::dashed(label, colour(i), pts)
                } else {
                    Line::solid(label, colour(i), pts)
                });
            }
        }
    }
    let first = runs.first()?;
    let same_scenario = runs.iter().all(|r| r.scenario == first.scenario);
    let title = if same_scenario {
        format!(
            "{}: throughput over time, {} runs",
            first.scenario,
            runs.len()
        )
    } else {
        format!("throughput over time, {} runs", runs.len())
    };
    let capacities: Vec<u64> = runs.iter().map(|r| r.capacity).collect();
    let subtitle = if capacities.iter().all(|c| *c == capacities[0]) {
        format!(
            "{} · {}",
            fmt_bytes(capacities[0]),
            runs.iter()
                .map(|r| r.profile.as_str())
                .collect::<Vec<_>>()
                .join(" · ")
        )
    } else {
        runs.iter()
            .map(|r| format!("{} {}", r.profile, fmt_bytes(r.capacity)))
            .collect::<Vec<_>>()
            .join(" · ")
    };
    let words: Vec<&str> = runs
        .iter()
        .map(|r| direction_word(r, Kind::Series))
        .collect();
    let y_word = if words.iter().all(|w| *w == words[0]) {
        words[0]
    } else {
        "Throughput"
    };
    let plot = Plot {
        title: title.clone(),
        subtitle,
        x_desc: "Time into the phase (drive s)".into(),
        y_desc: format!("{y_word} (MB/s)"),
        legend: lines.iter().map(Line::legend).collect(),
        lines,
        x_end: None,
        marks: Vec::new(),
    };
    render("runs-throughput.svg", title, &plot)
}

/// HD Tune-style throughput over disk position (`surface.svg`).
pub fn surfaces(r: &BenchResults) -> Option<Chart> {
    let axis = PositionAxis::new(r.capacity);
    let mut lines = Vec::new();
    for p in &r.phases {
        if let Some(pts) = surface_line(p, &axis) {
            lines.push(Line::solid(p.name.clone(), colour(lines.len()), pts));
        }
    }
    let title = format!("{}: {}", r.scenario, surface_title(r));
    let plot = Plot {
        title: title.clone(),
        subtitle: subtitle(r),
        x_desc: axis.desc(),
        y_desc: format!("{} (MB/s)", direction_word(r, Kind::Surface)),
        legend: lines.iter().map(Line::legend).collect(),
        lines,
        x_end: axis.end(),
        marks: Vec::new(),
    };
    render("surface.svg", title, &plot)
}

/// The guest's series (solid) and the simulator's prediction (dashed),
/// phase by phase, with the replayed trace's points where they differ
/// from the guest's (`sim-vs-guest-throughput.svg`); `None` without a
/// simulator run or without a phase that has a series in both.
pub fn sim_vs_guest_throughput(r: &BenchResults) -> Option<Chart> {
    overlay(r, "sim-vs-guest-throughput.svg", Kind::Series)
}

/// The guest's surfaces (solid), the simulator's prediction (dashed), the
/// replayed trace where it differs (crosses) (`sim-vs-guest-surface.svg`).
pub fn sim_vs_guest_surfaces(r: &BenchResults) -> Option<Chart> {
    overlay(r, "sim-vs-guest-surface.svg", Kind::Surface)
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Series,
    Surface,
}

/// `y` of the line through `pts` (sorted by x) at `x`, flat beyond its ends.
fn y_at(pts: &[(f64, f64)], x: f64) -> Option<f64> {
    let i = pts.partition_point(|p| p.0 < x);
    match (i.checked_sub(1).and_then(|j| pts.get(j)), pts.get(i)) {
        (Some(a), Some(b)) if b.0 > a.0 => Some(a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0)),
        (_, Some(b)) => Some(b.1),
        (Some(a), None) => Some(a.1),
        (None, None) => None,
    }
}

/// The points of `replayed` more than `tol` away from the guest's line.
fn differing(guest: &[(f64, f64)], replayed: &[(f64, f64)], tol: f64) -> Vec<(f64, f64)> {
    let mut g = guest.to_vec();
    g.sort_by(|a, b| a.0.total_cmp(&b.0));
    replayed
        .iter()
        .copied()
        .filter(|(x, y)| y_at(&g, *x).is_some_and(|gy| (y - gy).abs() > tol))
        .collect()
}

/// The guest's lines against the simulator's prediction (the run of the
/// scenario's own jobs: `predicted`, or `sim` when it is not a replay),
/// and against the trace's replay only where it differs from the guest:
/// the replay reproduces the guest's completions by construction, so
/// drawn whole it would hide under the guest's line.
fn overlay(r: &BenchResults, file: &str, kind: Kind) -> Option<Chart> {
    let prediction = r.predicted.as_deref().or(r.sim.as_deref())?;
    let replay = r.predicted.as_ref().and(r.sim.as_deref());
    let axis = PositionAxis::new(r.capacity);
    let get = |p: &PhaseResult| -> Vec<DirLine> {
        match kind {
            Kind::Series => series_lines(p),
            Kind::Surface => surface_line(p, &axis)
                .map(|l| (None, l))
                .into_iter()
                .collect(),
        }
    };
    let y_max = r
        .phases
        .iter()
        .flat_map(|p| {
            get(p)
                .into_iter()
                .flat_map(|(_, l)| l.into_iter().map(|q| q.1))
        })
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let mut lines = Vec::new();
    let mut legend = Vec::new();
    let mut any_replay = false;
    for p in &r.phases {
        let Some(s) = prediction.phase(&p.name) else {
            continue;
        };
        let sim_lines = get(s);
        let replay_lines = replay.and_then(|x| x.phase(&p.name)).map(get);
        for (dir, pts) in get(p) {
            let Some((_, sim_pts)) = sim_lines.iter().find(|(d, _)| *d == dir) else {
                continue;
            };
            let c = colour(legend.len());
            let label = match dir {
                Some(d) => format!("{} ({d})", p.name),
                None => p.name.clone(),
            };
            legend.push(Legend {
                label: label.clone(),
                colour: c,
                dashed: false,
                markers: false,
            });
            let off = replay_lines
                .as_ref()
                .and_then(|v| v.iter().find(|(d, _)| *d == dir))
                .map(|(_, rp)| differing(&pts, rp, 0.02 * y_max))
                .unwrap_or_default();
            lines.push(Line::solid(label.clone(), c, pts));
            lines.push(Line::dashed(label.clone(), c, sim_pts.clone()));
            if !off.is_empty() {
                any_replay = true;
                lines.push(Line::markers(label, c, off));
            }
        }
    }
    if lines.is_empty() {
        return None;
    }
    legend.push(Legend {
        label: "guest".into(),
        colour: INK,
        dashed: false,
        markers: false,
    });
    legend.push(Legend {
        label: "simulator's prediction".into(),
        colour: INK,
        dashed: true,
        markers: false,
    });
    if any_replay {
        legend.push(Legend {
            label: "trace replayed, where not as the guest".into(),
            colour: INK,
            dashed: false,
            markers: true,
        });
    }
    let (what, x_desc) = match kind {
        Kind::Series => ("throughput per phase".to_string(), series_x_desc(r)),
        Kind::Surface => ("surface".to_string(), axis.desc()),
    };
    let title = format!("{}: simulator's prediction vs guest, {what}", r.scenario);
    let plot = Plot {
        title: title.clone(),
        subtitle: subtitle(r),
        x_desc,
        y_desc: format!("{} (MB/s)", direction_word(r, kind)),
        lines,
        legend,
        x_end: (kind == Kind::Surface).then(|| axis.end()).flatten(),
        marks: Vec::new(),
    };
    render(file, title, &plot)
}

/// The throughput charts' x axis: time into the phase, in the drive's
/// time (a dilated guest run's series are converted to it).
fn series_x_desc(r: &BenchResults) -> String {
    match r.mode {
        Mode::Guest if r.time_scale != 1.0 => format!(
            "Time into the phase (drive s; wall clock ÷ {})",
            r.time_scale
        ),
        Mode::Guest => "Time into the phase (s)".into(),
        Mode::Sim => "Time into the phase (model s)".into(),
    }
}

/// A line of a phase: its direction (`write`, `read`; `None` when the
/// phase moved data one way only) and its (x, MB/s) points.
type DirLine = (Option<&'static str>, Vec<(f64, f64)>);

/// Lines of a phase's series: the directions it moved data in, as
/// (seconds into the phase at the end of each interval, MB/s). The
/// direction is named only when the phase both read and wrote.
fn series_lines(p: &PhaseResult) -> Vec<DirLine> {
    let Some(s) = &p.series else {
        return Vec::new();
    };
    let dt = if s.interval_s.is_finite() && s.interval_s > 0.0 {
        s.interval_s
    } else {
        1.0
    };
    let active = |v: &[f64]| v.iter().any(|x| x.is_finite() && *x > 0.0);
    let to_pts = |v: &[f64]| -> Vec<(f64, f64)> {
        v.iter()
            .enumerate()
            .map(|(i, b)| ((i + 1) as f64 * dt, b / 1e6))
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect()
    };
    let (r, w) = (active(&s.read_bytes_s), active(&s.write_bytes_s));
    let mut out = Vec::new();
    if r && w {
        out.push((Some("write"), to_pts(&s.write_bytes_s)));
        out.push((Some("read"), to_pts(&s.read_bytes_s)));
    } else if r {
        out.push((None, to_pts(&s.read_bytes_s)));
    } else if !s.write_bytes_s.is_empty() {
        out.push((None, to_pts(&s.write_bytes_s)));
    } else if !s.read_bytes_s.is_empty() {
        out.push((None, to_pts(&s.read_bytes_s)));
    }
    out.retain(|(_, pts)| !pts.is_empty());
    out
}

/// A surface phase as (position on the x axis, MB/s), in position order.
fn surface_line(p: &PhaseResult, axis: &PositionAxis) -> Option<Vec<(f64, f64)>> {
    let s = p.surface.as_ref()?;
    let mut pts: Vec<(f64, f64)> = s
        .points
        .iter()
        .map(|pt| (axis.x(pt.offset, pt.position), pt.bytes_s / 1e6))
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    (!pts.is_empty()).then_some(pts)
}

/// "Write", "Read" or "Throughput", from what the lines of that kind measure.
fn direction_word(r: &BenchResults, kind: Kind) -> &'static str {
    let (mut reads, mut writes) = (false, false);
    for p in &r.phases {
        match kind {
            Kind::Series => {
                for (dir, _) in series_lines(p) {
                    match dir {
                        Some(_) => (reads, writes) = (true, true),
                        None => {
                            let s = p.series.as_ref();
                            if s.is_some_and(|s| s.read_bytes_s.iter().any(|x| *x > 0.0)) {
                                reads = true
                            } else {
                                writes = true
                            }
                        }
                    }
                }
            }
            Kind::Surface => match p.surface.as_ref().map(|s| s.op.as_str()) {
                Some("read") => reads = true,
                Some("write") => writes = true,
                Some(_) => (reads, writes) = (true, true),
                None => {}
            },
        }
    }
    match (reads, writes) {
        (false, true) => "Write throughput",
        (true, false) => "Read throughput",
        _ => "Throughput",
    }
}

fn surface_title(r: &BenchResults) -> String {
    let surfaces: Vec<_> = r.phases.iter().filter_map(|p| p.surface.as_ref()).collect();
    let Some(first) = surfaces.first() else {
        return "surface test (HD Tune-style)".into();
    };
    let same = surfaces
        .iter()
        .all(|s| s.op == first.op && s.block == first.block);
    if same {
        format!(
            "{} surface (HD Tune-style, {} blocks)",
            first.op,
            fmt_bytes(first.block)
        )
    } else {
        "surface tests (HD Tune-style)".into()
    }
}

/// Where along the drive a surface point is: GiB or MiB from the start,
/// or % of capacity when the capacity is unknown.
struct PositionAxis {
    capacity: u64,
    unit: f64,
    name: &'static str,
}

impl PositionAxis {
    fn new(capacity: u64) -> Self {
        const GIB: u64 = 1 << 30;
        match capacity {
            0 => PositionAxis {
                capacity,
                unit: 0.0,
                name: "%",
            },
            c if c >= GIB => PositionAxis {
                capacity,
                unit: GIB as f64,
                name: "GiB",
            },
            _ => PositionAxis {
                capacity,
                unit: (1u64 << 20) as f64,
                name: "MiB",
            },
        }
    }

    fn x(&self, offset: u64, position: f64) -> f64 {
        if self.unit == 0.0 {
            position * 100.0
        } else {
            offset as f64 / self.unit
        }
    }

    /// The drive's end on this axis.
    fn end(&self) -> Option<f64> {
        Some(if self.unit == 0.0 {
            100.0
        } else {
            self.capacity as f64 / self.unit
        })
    }

    fn desc(&self) -> String {
        if self.unit == 0.0 {
            "Position (% of capacity)".into()
        } else {
            format!("Position ({})", self.name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Several runs in one chart: a line per run and phase with a
    /// series, labelled with its profile (and phase, when a run has
    /// several), one colour per run; no run with a series, no chart.
    #[test]
    fn runs_share_one_throughput_chart() {
        let a = crate::testdata::used_state();
        let mut b = a.clone();
        b.profile = "nvme-tlc".into();
        let with_series = a
            .phases
            .iter()
            .filter(|p| !series_lines(p).is_empty())
            .count();
        assert!(with_series > 1);
        let c = runs_throughput(&[&a, &b]).unwrap();
        assert_eq!(c.file_name, "runs-throughput.svg");
        for r in [&a, &b] {
            for p in a.phases.iter().filter(|p| !series_lines(p).is_empty()) {
                let label = format!("{}: {}", r.profile, p.name);
                assert!(c.svg.contains(&label), "{label}");
            }
        }
        let mut none = a.clone();
        for p in &mut none.phases {
            p.series = None;
        }
        assert!(runs_throughput(&[&none]).is_none());
    }
}
