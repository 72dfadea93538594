//! Drawing: a plot of lines with legend, axes and header, as SVG; and the
//! pieces of it that charts of their own (`vssd validate`'s scatter) use.

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::numfmt::{fmt_num, truncate};
use crate::{Chart, FONT, GRID, HEADER_H, HEIGHT, INK, MUTED, PLOT_LEFT, WIDTH};

/// One line of a [`Plot`].
pub struct Line {
    /// Its legend entry.
    pub label: String,
    /// Its colour.
    pub colour: RGBColor,
    /// Dashed (a simulator's line beside a guest's solid one).
    pub dashed: bool,
    /// Its points drawn as crosses, unconnected (values shown only where
    /// they differ from another line's).
    pub markers: bool,
    /// Its points, (x, y); a NaN y breaks the line.
    pub points: Vec<(f64, f64)>,
}

impl Line {
    /// A solid line.
    pub fn solid(label: String, colour: RGBColor, points: Vec<(f64, f64)>) -> Line {
        Line {
            label,
            colour,
            dashed: false,
            markers: false,
            points,
        }
    }

    /// A dashed line.
    pub fn dashed(label: String, colour: RGBColor, points: Vec<(f64, f64)>) -> Line {
        Line {
            dashed: true,
            ..Line::solid(label, colour, points)
        }
    }

    /// Crosses at its points, unconnected.
    pub fn markers(label: String, colour: RGBColor, points: Vec<(f64, f64)>) -> Line {
        Line {
            markers: true,
            ..Line::solid(label, colour, points)
        }
    }

    /// Its legend entry.
    pub fn legend(&self) -> Legend {
        Legend {
            label: self.label.clone(),
            colour: self.colour,
            dashed: self.dashed,
            markers: self.markers,
        }
    }
}

/// One entry of a legend.
pub struct Legend {
    /// The text.
    pub label: String,
    /// The line's colour.
    pub colour: RGBColor,
    /// Drawn dashed.
    pub dashed: bool,
    /// Drawn as a cross.
    pub markers: bool,
}

/// A chart of lines: header, axes, lines, legend.
pub struct Plot {
    /// The header's first line.
    pub title: String,
    /// The header's second line.
    pub subtitle: String,
    /// The x axis' description.
    pub x_desc: String,
    /// The y axis' description.
    pub y_desc: String,
    /// The lines, drawn in order.
    pub lines: Vec<Line>,
    /// The legend's entries, in order.
    pub legend: Vec<Legend>,
    /// The x axis ends here at least (capacity, for positions); without
    /// it, at the last point. It starts at 0.
    pub x_end: Option<f64>,
    /// Vertical marks at points of interest (where a cache ran out),
    /// drawn dashed over the lines with their labels at the top.
    pub marks: Vec<Mark>,
}

/// A vertical mark of a [`Plot`]: a dashed line at `x`, labelled.
pub struct Mark {
    /// Where, on the x axis.
    pub x: f64,
    /// What it marks (drawn beside the line's top).
    pub label: String,
    /// Its colour (the line it belongs to).
    pub colour: RGBColor,
}

/// What drawing on a backend `DB` returns.
pub type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// `plot` as the chart `file` (its caption `title`); `None` when it has no
/// point to draw or could not be drawn.
pub fn render(file: &str, title: String, plot: &Plot) -> Option<Chart> {
    if plot.lines.iter().all(|l| l.points.is_empty()) {
        return None;
    }
    to_svg(|root| draw_plot(root, plot)).map(|svg| Chart {
        file_name: file.into(),
        title,
        svg,
    })
}

/// Draws into a fresh SVG document; a drawing error is logged and gives
/// no chart rather than failing the report.
pub fn to_svg(
    draw: impl FnOnce(
        &DrawingArea<SVGBackend<'_>, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<std::io::Error>>,
) -> Option<String> {
    let mut svg = String::new();
    let res = {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)
            .and_then(|_| draw(&root))
            .and_then(|_| root.present())
            .map_err(|e| e.to_string())
    };
    match res {
        Ok(()) => Some(svg),
        Err(e) => {
            log::warn!("chart not drawn: {e}");
            None
        }
    }
}

/// The font at `size` in `colour`.
pub fn text_style(size: u32, colour: &RGBColor) -> TextStyle<'static> {
    (FONT, size).into_font().color(colour)
}

/// Rough text width for the SVG's sans-serif at plotters' `size`, px.
pub fn text_width(s: &str, size: u32) -> i32 {
    (s.chars().count() as f64 * f64::from(size) / 1.24 * 0.56).ceil() as i32
}

/// The title (bold) and subtitle at the top of a chart.
pub fn draw_header<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    subtitle: &str,
) -> DrawResult<DB> {
    let title = truncate(title, 70);
    area.draw(&Text::new(
        title,
        (16, 10),
        (FONT, 23).into_font().style(FontStyle::Bold).color(&INK),
    ))?;
    area.draw(&Text::new(
        truncate(subtitle, 100),
        (16, 36),
        text_style(17, &MUTED),
    ))
}

/// Legend text size.
pub const LEGEND_FONT: u32 = 17;
/// Height of a legend row, px.
pub const LEGEND_ROW: i32 = 22;

/// Legend entries laid out in rows under the chart: (entry, x, row).
pub fn legend_layout(entries: &[Legend]) -> Vec<(&Legend, i32, i32)> {
    let mut out = Vec::new();
    let (mut x, mut row) = (PLOT_LEFT, 0);
    for e in entries {
        let w = 34 + text_width(&truncate(&e.label, 40), LEGEND_FONT) + 24;
        if x + w > WIDTH as i32 - 8 && x > PLOT_LEFT {
            x = PLOT_LEFT;
            row += 1;
        }
        out.push((e, x, row));
        x += w;
    }
    out
}

/// Height the legend's rows take, px.
pub fn legend_height(entries: &[Legend]) -> u32 {
    match legend_layout(entries).last() {
        None => 0,
        Some((_, _, row)) => ((row + 1) * LEGEND_ROW + 8) as u32,
    }
}

/// The legend: a line sample and its label per entry, in rows.
pub fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[Legend],
) -> DrawResult<DB> {
    for (e, x, row) in legend_layout(entries) {
        let y = 4 + row * LEGEND_ROW + 9;
        let style = ShapeStyle {
            color: e.colour.to_rgba(),
            filled: false,
            stroke_width: 3,
        };
        if e.markers {
            let style = ShapeStyle {
                stroke_width: 2,
                ..style
            };
            area.draw(&Cross::new((x + 15, y), 5, style))?;
        } else if e.dashed {
            for dx in [0, 12, 24] {
                area.draw(&PathElement::new(vec![(x + dx, y), (x + dx + 7, y)], style))?;
            }
        } else {
            area.draw(&PathElement::new(vec![(x, y), (x + 30, y)], style))?;
        }
        area.draw(&Text::new(
            truncate(&e.label, 40),
            (x + 38, y - 8),
            text_style(LEGEND_FONT, &INK),
        ))?;
    }
    Ok(())
}

/// Rounds up to 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 × 10ⁿ.
pub fn nice_ceil(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let e = 10f64.powf(v.log10().floor());
    for m in [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0] {
        let c = m * e;
        if c >= v * (1.0 - 1e-12) && c.is_finite() {
            return c;
        }
    }
    v
}

/// Axis range over values: from 0 (or below, for negatives) to a round
/// number above the largest, never empty.
pub fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero {
        lo = lo.min(0.0);
    }
    // Keep within what the axis arithmetic can handle.
    const LIMIT: f64 = 1e15;
    lo = lo.clamp(-LIMIT, LIMIT);
    hi = hi.clamp(-LIMIT, LIMIT);
    let hi = if hi > 0.0 {
        nice_ceil(hi * if from_zero { 1.05 } else { 1.0 })
    } else {
        hi
    };
    let lo = if lo < 0.0 { -nice_ceil(-lo) } else { lo };
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        (lo - 0.5, hi + 0.5)
    } else {
        (lo, hi)
    }
}

/// The x axis: from 0 (or the first value, if negative) to the last value
/// exactly, as the reviews' time and position axes run; never empty.
pub fn x_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (0.0f64, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    const LIMIT: f64 = 1e15;
    let (lo, hi) = (lo.clamp(-LIMIT, LIMIT), hi.clamp(-LIMIT, LIMIT));
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        (lo, lo + 1.0)
    } else {
        (lo, hi)
    }
}

/// Points kept within the axes: plotters' pixel arithmetic overflows on
/// points far outside them (only absurd values are ever that far).
pub fn clamp_points(points: &[(f64, f64)], x: (f64, f64), y: (f64, f64)) -> Vec<(f64, f64)> {
    points
        .iter()
        .map(|(a, b)| (a.clamp(x.0, x.1), b.clamp(y.0, y.1)))
        .collect()
}

/// Tick label for a value on an axis spanning `span`.
pub fn tick(v: f64, span: f64) -> String {
    if span >= 20.0 || span <= 0.0 || !span.is_finite() {
        fmt_num(v, 0)
    } else if span >= 2.0 {
        fmt_num(v, 1)
    } else {
        fmt_num(v, 2)
    }
}

/// `plot` drawn onto `root`.
pub fn draw_plot<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, plot: &Plot) -> DrawResult<DB> {
    let (header, rest) = root.split_vertically(HEADER_H);
    draw_header(&header, &plot.title, &plot.subtitle)?;
    let legend_h = legend_height(&plot.legend);
    let rest_h = rest.dim_in_pixel().1;
    let (body, legend) = rest.split_vertically(rest_h.saturating_sub(legend_h));

    let xs = plot.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let (x0, x1) = x_range(xs.chain(plot.x_end));
    let ys = plot.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
    let (y0, y1) = range(ys, true);

    let mut chart = ChartBuilder::on(&body)
        .margin_top(6)
        .margin_right(28)
        .margin_left(8)
        .x_label_area_size(46)
        .y_label_area_size(PLOT_LEFT as u32 - 8)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    let (xs, ys) = (x1 - x0, y1 - y0);
    let xf = move |v: &f64| tick(*v, xs);
    let yf = move |v: &f64| tick(*v, ys);
    chart
        .configure_mesh()
        .x_desc(plot.x_desc.as_str())
        .y_desc(plot.y_desc.as_str())
        .x_labels(10)
        .y_labels(8)
        .x_label_formatter(&xf)
        .y_label_formatter(&yf)
        .label_style(text_style(16, &INK))
        .axis_desc_style(text_style(17, &INK))
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(MUTED)
        .draw()?;

    let clamped: Vec<Vec<(f64, f64)>> = plot
        .lines
        .iter()
        .map(|l| clamp_points(&l.points, (x0, x1), (y0, y1)))
        .collect();
    for (l, pts) in plot.lines.iter().zip(&clamped) {
        let style = ShapeStyle {
            color: l.colour.to_rgba(),
            filled: false,
            stroke_width: 2,
        };
        let pts = pts.clone();
        if l.markers {
            chart.draw_series(pts.iter().map(|p| Cross::new(*p, 5, style)))?;
        } else if pts.len() == 1 {
            chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, style.filled())))?;
        } else if l.dashed {
            chart.draw_series(DashedLineSeries::new(pts, 7, 5, style))?;
        } else {
            chart.draw_series(LineSeries::new(pts, style))?;
        }
    }
    draw_marks(&mut chart, &plot.marks, (x0, x1), (y0, y1))?;
    // A line drawn over exactly by a later one would vanish: ring its
    // points (a dozen at most) so it can be seen underneath.
    for (i, l) in plot.lines.iter().enumerate() {
        if l.markers || clamped[i].len() < 2 || !hidden_under_later(&clamped, i, y1 - y0) {
            continue;
        }
        let style = ShapeStyle {
            color: l.colour.to_rgba(),
            filled: false,
            stroke_width: 2,
        };
        let step = clamped[i].len().div_ceil(12).max(1);
        chart.draw_series(
            clamped[i]
                .iter()
                .step_by(step)
                .map(|p| Circle::new(*p, 5, style)),
        )?;
    }
    draw_legend(&legend, &plot.legend)
}

/// The plot's marks: a dashed vertical line each, its label at the top
/// right of it (left of it past the middle), each label a line lower
/// than the one before so that close marks stay readable.
fn draw_marks<DB: DrawingBackend>(
    chart: &mut ChartContext<
        '_,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    marks: &[Mark],
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> DrawResult<DB> {
    for (i, m) in marks.iter().enumerate() {
        if !(m.x.is_finite() && m.x >= x0 && m.x <= x1) {
            continue;
        }
        let style = ShapeStyle {
            color: m.colour.to_rgba(),
            filled: false,
            stroke_width: 1,
        };
        chart.draw_series(DashedLineSeries::new([(m.x, y0), (m.x, y1)], 4, 4, style))?;
        let label = truncate(&m.label, 48);
        let right = m.x - x0 <= (x1 - x0) / 2.0;
        let dx = if right {
            4
        } else {
            -4 - text_width(&label, 13)
        };
        let at = (dx, 4 + 16 * i as i32);
        chart.draw_series(std::iter::once(
            EmptyElement::at((m.x, y1)) + Text::new(label, at, text_style(13, &m.colour)),
        ))?;
    }
    Ok(())
}

/// Whether line `i` lies under a line drawn after it: the same x values
/// and every y within half a per cent of the axis span.
pub fn hidden_under_later(lines: &[Vec<(f64, f64)>], i: usize, y_span: f64) -> bool {
    let a = &lines[i];
    let tol = 0.005 * y_span.abs().max(f64::MIN_POSITIVE);
    lines[i + 1..].iter().any(|b| {
        b.len() == a.len()
            && a.iter().zip(b).all(|(p, q)| {
                (p.0 - q.0).abs() <= 1e-9 * (1.0 + p.0.abs()) && (p.1 - q.1).abs() <= tol
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::colour;

    #[test]
    fn a_line_under_an_identical_later_line_is_found() {
        let a = vec![(0.0, 100.0), (1.0, 200.0), (2.0, 150.0)];
        let same = vec![(0.0, 100.2), (1.0, 199.9), (2.0, 150.0)];
        let other = vec![(0.0, 100.0), (1.0, 120.0), (2.0, 150.0)];
        let lines = vec![a.clone(), other.clone(), same];
        assert!(hidden_under_later(&lines, 0, 250.0));
        assert!(!hidden_under_later(&lines, 1, 250.0));
        assert!(!hidden_under_later(&lines, 2, 250.0), "last is on top");
        assert!(!hidden_under_later(&[a, other], 0, 250.0));
    }

    #[test]
    fn nice_ceil_rounds_up_to_round_numbers() {
        assert_eq!(nice_ceil(174.0), 200.0);
        assert_eq!(nice_ceil(82.0), 100.0);
        assert_eq!(nice_ceil(1.0), 1.0);
        assert_eq!(nice_ceil(0.0), 1.0);
        assert_eq!(nice_ceil(f64::NAN), 1.0);
        assert!(nice_ceil(f64::MAX).is_finite());
    }

    #[test]
    fn range_is_never_empty() {
        assert_eq!(range([5.0, 5.0].into_iter(), false), (4.5, 5.5));
        assert_eq!(range(std::iter::empty(), true), (0.0, 1.0));
        assert_eq!(
            range([f64::NAN, f64::INFINITY].into_iter(), true),
            (0.0, 1.0)
        );
        let (lo, hi) = range([-3.0, 7.0].into_iter(), true);
        assert!(lo <= -3.0 && hi >= 7.0);
    }

    #[test]
    fn legend_wraps_rows() {
        let entries: Vec<Legend> = (0..12)
            .map(|i| Legend {
                label: format!("phase number {i}"),
                colour: colour(i),
                dashed: false,
                markers: false,
            })
            .collect();
        let layout = legend_layout(&entries);
        assert!(layout.last().unwrap().2 >= 1);
        assert!(layout.iter().all(|(_, x, _)| *x < WIDTH as i32));
    }
}
