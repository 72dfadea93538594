//! SVG charts of a benchmark run, drawn from [`BenchResults`] alone:
//!
//! - [`throughput`]: bandwidth over time, one line per fio phase (x: seconds
//!   into the phase), as the reviews draw "fresh / used / after TRIM";
//! - [`surfaces`]: HD Tune-style throughput over disk position, one line per
//!   surface phase;
//! - [`drive`]: write amplification and free blocks over the run, with the
//!   phases marked;
//! - [`sim_vs_guest_throughput`], [`sim_vs_guest_surfaces`]: the guest's
//!   lines solid and the simulator's dashed, one colour per phase.
//!
//! Charts are 800×450 SVG documents. Text is left to the viewer's
//! `sans-serif` font (plotters' naive layout, no system fonts needed), and
//! lines use the Okabe–Ito palette, which stays distinct with the common
//! colour-vision deficiencies. Any data draws: non-finite values are left
//! out, empty inputs give no chart (`None`).

use plotters::prelude::*;

pub use vssd_chart::Chart;
use vssd_chart::draw::*;
use vssd_chart::numfmt::{fmt_bytes, truncate};
use vssd_chart::{GRID, HEADER_H, HEIGHT, INK, MUTED, PALETTE, PLOT_LEFT, WIDTH, colour};

use super::results::{BenchResults, Mode, PhaseResult};

/// Write amplification over time, only where the host wrote since the
/// previous sample: an idle or read-only stretch has none (not 0), so the
/// line breaks there (a NaN point splits it).
fn waf_points(samples: &[super::results::DriveSample]) -> Vec<(f64, f64)> {
    let mut waf: Vec<(f64, f64)> = Vec::new();
    let mut prev_host: Option<u64> = None;
    for s in samples {
        let wrote = prev_host.is_none_or(|h| s.host_written_bytes > h);
        prev_host = Some(s.host_written_bytes);
        if wrote && s.waf.is_finite() && s.waf > 0.0 {
            waf.push((s.t_s, s.waf));
        } else if waf.last().is_some_and(|p| p.1.is_finite()) {
            waf.push((s.t_s, f64::NAN));
        }
    }
    waf
}

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
        x_desc: "Time into the phase (s)".into(),
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
                let mut l = Line::solid(label, colour(i), pts);
                l.dashed = dir == Some("read");
                lines.push(l);
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
        x_desc: "Time into the phase (s)".into(),
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

/// The guest's series (solid) and the simulator's (dashed), phase by phase
/// (`sim-vs-guest-throughput.svg`); `None` without a simulator run or
/// without a phase that has a series in both.
pub fn sim_vs_guest_throughput(r: &BenchResults) -> Option<Chart> {
    let sim = r.sim.as_deref()?;
    overlay(r, sim, "sim-vs-guest-throughput.svg", Kind::Series)
}

/// The guest's surfaces (solid) and the simulator's (dashed)
/// (`sim-vs-guest-surface.svg`).
pub fn sim_vs_guest_surfaces(r: &BenchResults) -> Option<Chart> {
    let sim = r.sim.as_deref()?;
    overlay(r, sim, "sim-vs-guest-surface.svg", Kind::Surface)
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Series,
    Surface,
}

fn overlay(r: &BenchResults, sim: &BenchResults, file: &str, kind: Kind) -> Option<Chart> {
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
    let mut lines = Vec::new();
    let mut legend = Vec::new();
    for p in &r.phases {
        let Some(s) = sim.phase(&p.name) else {
            continue;
        };
        let sim_lines = get(s);
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
            });
            lines.push(Line::solid(label.clone(), c, pts));
            lines.push(Line {
                label,
                colour: c,
                dashed: true,
                points: sim_pts.clone(),
            });
        }
    }
    if lines.is_empty() {
        return None;
    }
    legend.push(Legend {
        label: "guest".into(),
        colour: INK,
        dashed: false,
    });
    legend.push(Legend {
        label: "simulator".into(),
        colour: INK,
        dashed: true,
    });
    let (what, x_desc) = match kind {
        Kind::Series => (
            "throughput per phase".to_string(),
            "Time into the phase (s)".to_string(),
        ),
        Kind::Surface => ("surface".to_string(), axis.desc()),
    };
    let title = format!("{}: simulator vs guest, {what}", r.scenario);
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

/// "profile P · 1 GiB · virtio · guest (kvm, Linux 6.1)" or "... · simulator".
pub(crate) fn subtitle(r: &BenchResults) -> String {
    let mut parts = vec![format!("profile {}", r.profile), fmt_bytes(r.capacity)];
    match r.mode {
        Mode::Guest => {
            parts.push(format!("{} bus", r.bus.name()));
            let mut how = Vec::new();
            if let Some(a) = &r.environment.accel {
                how.push(a.clone());
            }
            if let Some(k) = &r.environment.guest_kernel {
                how.push(format!("Linux {k}"));
            }
            if how.is_empty() {
                parts.push("guest".into());
            } else {
                parts.push(format!("guest ({})", how.join(", ")));
            }
        }
        Mode::Sim => parts.push("simulator (model time)".into()),
    }
    if r.incomplete.is_some() {
        parts.push("INCOMPLETE".into());
    }
    parts.join(" · ")
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

/// WAF and free blocks over the run, one panel each, phases marked
/// (`drive.svg`).
pub fn drive(r: &BenchResults) -> Option<Chart> {
    let samples: Vec<_> = r
        .samples
        .iter()
        .filter(|s| s.t_s.is_finite() && s.t_s.abs() <= 1e15)
        .copied()
        .collect();
    if samples.is_empty() {
        return None;
    }
    // Phase spans: (start, end, phase index), from the samples' phase tags.
    let mut spans: Vec<(f64, f64, usize)> = Vec::new();
    for s in &samples {
        match spans.last_mut() {
            Some(last) if last.2 == s.phase => last.1 = s.t_s,
            Some(last) => {
                last.1 = s.t_s;
                spans.push((s.t_s, s.t_s, s.phase));
            }
            None => spans.push((s.t_s, s.t_s, s.phase)),
        }
    }
    let phase_name = |i: usize| {
        r.phases
            .get(i)
            .map(|p| p.name.clone())
            .unwrap_or_else(|| format!("phase {i}"))
    };
    let waf = waf_points(&samples);
    let free: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| (s.t_s, s.free_blocks as f64))
        .collect();
    let total = samples.iter().map(|s| s.total_blocks).max().unwrap_or(0);

    let title = format!("{}: write amplification and free blocks", r.scenario);
    let sub = subtitle(r);
    let svg = to_svg(|root| {
        let (header, body) = root.split_vertically(HEADER_H);
        draw_header(&header, &title, &sub)?;
        let (top, bottom) = body.split_vertically((HEIGHT - HEADER_H) * 45 / 100);
        let (x0, x1) = x_range(samples.iter().map(|s| s.t_s));
        let (_, waf_hi) = range(
            waf.iter()
                .map(|p| p.1)
                .filter(|v| v.is_finite())
                .chain([1.0]),
            true,
        );
        let free_hi = if total > 0 {
            total as f64
        } else {
            range(free.iter().map(|p| p.1), true).1
        };
        let xs = x1 - x0;
        let xf = move |v: &f64| tick(*v, xs);
        let blank = |_: &f64| String::new();
        let free_desc = if total > 0 {
            format!("Free blocks (of {total})")
        } else {
            "Free blocks".to_string()
        };
        let panels = [
            (&top, waf_hi, "WAF", waf.as_slice(), PALETTE[1], false),
            (
                &bottom,
                free_hi,
                free_desc.as_str(),
                free.as_slice(),
                PALETTE[0],
                true,
            ),
        ];
        let mut label_at = Vec::new();
        for (area, hi, desc, pts, c, is_bottom) in panels {
            let ys = hi;
            let yf = move |v: &f64| tick(*v, ys);
            let mut chart = ChartBuilder::on(area)
                .margin_top(if is_bottom { 4 } else { 24 })
                .margin_right(28)
                .margin_left(8)
                .x_label_area_size(if is_bottom { 46 } else { 4 })
                .y_label_area_size(PLOT_LEFT as u32 - 8)
                .build_cartesian_2d(x0..x1, 0.0..hi)?;
            // Every other phase shaded, so each phase's span is visible.
            for (k, (a, b, _)) in spans.iter().enumerate() {
                if k % 2 == 1 {
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(*a, 0.0), (*b, hi)],
                        RGBColor(0, 0, 0).mix(0.045).filled(),
                    )))?;
                }
            }
            let mut mesh = chart.configure_mesh();
            mesh.y_desc(desc)
                .x_labels(10)
                .y_labels(5)
                .y_label_formatter(&yf)
                .label_style(text_style(16, &INK))
                .axis_desc_style(text_style(17, &INK))
                .bold_line_style(GRID)
                .light_line_style(TRANSPARENT)
                .axis_style(MUTED);
            if is_bottom {
                mesh.x_desc("Time since the start of the run (s)")
                    .x_label_formatter(&xf);
            } else {
                mesh.x_label_formatter(&blank);
            }
            mesh.draw()?;
            for (a, _, _) in spans.iter().skip(1) {
                chart.draw_series(DashedLineSeries::new(
                    [(*a, 0.0), (*a, hi)],
                    4,
                    4,
                    MUTED.stroke_width(1),
                ))?;
            }
            let style = ShapeStyle {
                color: c.to_rgba(),
                filled: false,
                stroke_width: 2,
            };
            for segment in pts.split(|p| !p.1.is_finite()) {
                let seg = clamp_points(segment, (x0, x1), (0.0, hi));
                if seg.len() == 1 {
                    chart.draw_series(seg.iter().map(|p| Circle::new(*p, 3, style.filled())))?;
                } else if seg.len() > 1 {
                    chart.draw_series(LineSeries::new(seg, style))?;
                }
            }
            if !is_bottom {
                label_at = spans
                    .iter()
                    .map(|(a, b, i)| {
                        let (px0, py) = chart.backend_coord(&(*a, hi));
                        let (px1, _) = chart.backend_coord(&(*b, hi));
                        (px0, px1, py, *i)
                    })
                    .collect();
            }
        }
        // Phase names above the top panel: at the start of the phase, or
        // further right within it, on one of two rows; left out when
        // neither fits.
        let mut row_end = [i32::MIN; 2];
        for (px0, px1, py, i) in label_at {
            let name = truncate(&phase_name(i), 18);
            let w = text_width(&name, 14);
            let start = px0 + 3;
            let limit = (px1 - 3).max(start + w).min(WIDTH as i32 - 4);
            let Some((row, x)) = (0..2)
                .map(|k| (k, start.max(row_end[k].saturating_add(8))))
                .find(|(_, x)| x + w <= limit)
            else {
                continue;
            };
            row_end[row] = x + w;
            let y = py - 22 + row as i32 * 11;
            root.draw(&Text::new(name, (x, y), text_style(14, &MUTED)))?;
        }
        Ok(())
    })?;
    Some(Chart {
        file_name: "drive.svg".into(),
        title,
        svg,
    })
}

#[cfg(test)]
mod tests {
    use super::super::results::DriveSample;

    #[test]
    fn write_amplification_breaks_where_the_host_did_not_write() {
        let at = |t: f64, waf: f64, host: u64| DriveSample {
            t_s: t,
            phase: 0,
            waf,
            free_blocks: 0,
            total_blocks: 0,
            host_written_bytes: host,
            nand_bytes_programmed: 0,
        };
        // Writing, then idle (no new host bytes, waf 0), then writing again.
        let pts = super::waf_points(&[
            at(0.0, 1.5, 10),
            at(1.0, 2.0, 20),
            at(2.0, 0.0, 20),
            at(3.0, 0.0, 20),
            at(4.0, 3.0, 30),
        ]);
        assert_eq!(pts.len(), 4, "{pts:?}");
        assert_eq!(pts[..2], [(0.0, 1.5), (1.0, 2.0)]);
        assert!(pts[2].1.is_nan(), "one break for the idle stretch: {pts:?}");
        assert_eq!(pts[3], (4.0, 3.0));
        assert!(pts.iter().all(|p| p.1 != 0.0));
    }

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
