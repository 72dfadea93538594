//! `vssd validate`'s chart: each figure of a preset as a point, published
//! against simulated on log axes (figures of any unit side by side), with
//! the diagonal and the ±25 % band. Filled points are held out, hollow ones
//! are training figures; the colour is the group (the drive's state).
//! Drawn with `vssd-chart`'s pieces (header, palette, text).

use plotters::prelude::*;

use crate::corpus::State;
use crate::judge::PresetResult;
use crate::text::pct;

use vssd_chart::draw::{LEGEND_ROW, draw_header, text_style, text_width, to_svg};
use vssd_chart::numfmt::truncate;
use vssd_chart::{GRID, HEADER_H, INK, MUTED, PLOT_LEFT, colour};

/// The states in the chart's legend order.
const STATES: [State; 6] = [
    State::Fresh,
    State::PartiallyUsed,
    State::Used,
    State::AfterTrim,
    State::SteadyState,
    State::AfterIdle,
];

/// A preset's chart: every figure with a simulated value, published
/// against simulated, coloured by state, filled when held out.
pub fn of_preset(p: &PresetResult) -> Option<String> {
    let points: Vec<ScatterPoint<'_>> = p
        .figures
        .iter()
        .filter_map(|j| {
            Some(ScatterPoint {
                x: j.published,
                y: j.simulated?,
                group: j.state.name(),
                filled: j.held_out,
                label: &j.figure,
            })
        })
        .collect();
    let groups: Vec<&str> = STATES.iter().map(|s| s.name()).collect();
    let subtitle = format!(
        "{} figures ({} held out): median |error| {}, within ±25 %: {}",
        points.len(),
        p.held_out.figures,
        pct(p.held_out.median_abs_error),
        pct(p.held_out.within_25pct),
    );
    validation(
        &format!("{}: simulated vs published", p.preset),
        &subtitle,
        &groups,
        &points,
    )
}

/// One figure: published (x) against simulated (y), in its group (the
/// drive's state: one colour each), filled when held out.
#[derive(Debug, Clone, Copy)]
pub struct ScatterPoint<'a> {
    /// Published value.
    pub x: f64,
    /// Simulated value.
    pub y: f64,
    /// Group name (the legend's entry).
    pub group: &'a str,
    /// Drawn filled (held out) or hollow (training).
    pub filled: bool,
    /// Its name beside it, where there is room.
    pub label: &'a str,
}

/// The chart of one preset's figures: `groups` in legend order (`None`
/// when no point is drawable).
pub fn validation(
    title: &str,
    subtitle: &str,
    groups: &[&str],
    points: &[ScatterPoint<'_>],
) -> Option<String> {
    let pts: Vec<&ScatterPoint<'_>> = points
        .iter()
        .filter(|p| p.x > 0.0 && p.y > 0.0 && p.x.is_finite() && p.y.is_finite())
        .collect();
    if pts.is_empty() {
        return None;
    }
    let lo = pts
        .iter()
        .flat_map(|p| [p.x, p.y])
        .fold(f64::INFINITY, f64::min)
        / 2.0;
    let hi = pts.iter().flat_map(|p| [p.x, p.y]).fold(0.0, f64::max) * 2.0;
    let title = truncate(title, 70);
    let shown: Vec<&str> = groups
        .iter()
        .copied()
        .filter(|g| pts.iter().any(|p| p.group == *g))
        .collect();
    to_svg(|root| {
        let (header, body) = root.split_vertically(HEADER_H);
        draw_header(&header, &title, subtitle)?;
        let legend_h = (LEGEND_ROW + 8) as u32;
        let h = body.dim_in_pixel().1;
        let (plot, legend) = body.split_vertically(h.saturating_sub(legend_h));
        let mut chart = ChartBuilder::on(&plot)
            .margin_top(6)
            .margin_right(28)
            .margin_left(8)
            .x_label_area_size(46)
            .y_label_area_size(PLOT_LEFT as u32 - 8)
            .build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("published (each figure in its own unit)")
            .y_desc("simulated")
            .x_labels(8)
            .y_labels(8)
            .x_label_formatter(&|v| short(*v))
            .y_label_formatter(&|v| short(*v))
            .label_style(text_style(16, &INK))
            .axis_desc_style(text_style(17, &INK))
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .axis_style(MUTED)
            .draw()?;
        // The ±25 % band and the diagonal.
        let band = ShapeStyle {
            color: MUTED.to_rgba(),
            filled: false,
            stroke_width: 1,
        };
        for f in [0.75, 1.25] {
            chart.draw_series(DashedLineSeries::new(
                [(lo, lo * f), (hi, hi * f)],
                6,
                4,
                band,
            ))?;
        }
        chart.draw_series(LineSeries::new([(lo, lo), (hi, hi)], &INK))?;
        for (i, g) in groups.iter().enumerate() {
            let c = colour(i);
            for p in pts.iter().filter(|p| p.group == *g) {
                let style = if p.filled {
                    c.filled()
                } else {
                    c.stroke_width(2)
                };
                chart.draw_series(std::iter::once(Circle::new((p.x, p.y), 5, style)))?;
            }
        }
        let at: Vec<(i32, i32)> = pts
            .iter()
            .map(|p| chart.backend_coord(&(p.x, p.y)))
            .collect();
        let area = chart.plotting_area().get_pixel_range();
        for (text, (x, y)) in place_labels(&pts, &at, &area) {
            root.draw(&Text::new(text, (x, y), text_style(LABEL_FONT, &MUTED)))?;
        }
        // Legend: one entry per state present, then the marker meanings.
        let mut x = 16;
        for g in &shown {
            let i = groups.iter().position(|t| t == g).unwrap_or(0);
            legend.draw(&Circle::new((x + 5, 12), 5, colour(i).filled()))?;
            legend.draw(&Text::new(*g, (x + 16, 3), text_style(17, &INK)))?;
            x += 30 + 9 * g.len() as i32;
        }
        legend.draw(&Text::new(
            "filled: held out, hollow: training; dashed: ±25 %",
            (x + 10, 3),
            text_style(17, &MUTED),
        ))?;
        Ok(())
    })
}

/// Size of the points' names.
const LABEL_FONT: u32 = 13;

/// Where each point's name goes (text, top-left pixel): beside the point,
/// right of it or else left, above, below, or at a corner, within the plot's `area`
/// and clear of every point and of the names placed before it; the
/// points furthest off the diagonal first, the names that do not fit left
/// out (the text report lists every figure).
fn place_labels(
    pts: &[&ScatterPoint<'_>],
    at: &[(i32, i32)],
    area: &(std::ops::Range<i32>, std::ops::Range<i32>),
) -> Vec<(String, (i32, i32))> {
    let off = |p: &ScatterPoint<'_>| (p.y / p.x).ln().abs();
    let mut order: Vec<usize> = (0..pts.len()).collect();
    order.sort_by(|a, b| off(pts[*b]).total_cmp(&off(pts[*a])));
    let h = LABEL_FONT as i32;
    // Boxes taken: the points (radius 5 and a margin), then the names.
    let mut taken: Vec<(i32, i32, i32, i32)> = at
        .iter()
        .map(|(x, y)| (x - 7, y - 7, x + 7, y + 7))
        .collect();
    let mut out = Vec::new();
    for i in order {
        let text = truncate(pts[i].label, 28);
        let w = text_width(&text, LABEL_FONT);
        let (px, py) = at[i];
        let spots = [
            (px + 9, py - h / 2),
            (px - 9 - w, py - h / 2),
            (px - w / 2, py - 9 - h),
            (px - w / 2, py + 9),
            (px + 7, py - 7 - h),
            (px + 7, py + 7),
            (px - 7 - w, py - 7 - h),
            (px - 7 - w, py + 7),
        ];
        let clear = |(x, y): (i32, i32)| {
            x >= area.0.start
                && x + w <= area.0.end
                && y >= area.1.start
                && y + h <= area.1.end
                && taken
                    .iter()
                    .all(|b| x + w <= b.0 || x >= b.2 || y + h <= b.1 || y >= b.3)
        };
        if let Some((x, y)) = spots.into_iter().find(|s| clear(*s)) {
            taken.push((x - 2, y - 1, x + w + 2, y + h + 1));
            out.push((text, (x, y)));
        }
    }
    out
}

/// Axis labels on a log scale: 0.5, 20, 3k, 40k.
fn short(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{:.1}k", v / 1000.0)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names go beside their points without covering another point or
    /// name; where not all fit, the point furthest off the diagonal keeps
    /// its name.
    #[test]
    fn names_do_not_collide_and_the_furthest_off_comes_first() {
        let p = |x: f64, y: f64, label| ScatterPoint {
            x,
            y,
            group: "fresh",
            filled: true,
            label,
        };
        // Three points in a row 10 px apart: room for one name beside
        // them, the one 4× off.
        let pts = [
            p(100.0, 101.0, "on"),
            p(100.0, 400.0, "off"),
            p(100.0, 110.0, "near"),
        ];
        let refs: Vec<&ScatterPoint<'_>> = pts.iter().collect();
        let at = [(100, 100), (100, 110), (100, 120)];
        let placed = place_labels(&refs, &at, &(0..130, 0..400));
        assert_eq!(
            placed.first().map(|l| l.0.as_str()),
            Some("off"),
            "{placed:?}"
        );
        let h = LABEL_FONT as i32;
        let boxes: Vec<(i32, i32, i32, i32)> = placed
            .iter()
            .map(|(t, (x, y))| (*x, *y, x + text_width(t, LABEL_FONT), y + h))
            .collect();
        for (i, a) in boxes.iter().enumerate() {
            for (px, py) in at {
                assert!(
                    !(px > a.0 && px < a.2 && py > a.1 && py < a.3),
                    "{placed:?} covers ({px}, {py})"
                );
            }
            for b in &boxes[i + 1..] {
                assert!(
                    a.2 <= b.0 || b.2 <= a.0 || a.3 <= b.1 || b.3 <= a.1,
                    "{placed:?}"
                );
            }
            assert!(a.0 >= 0 && a.2 <= 130, "{placed:?} outside the plot");
        }
    }
}
