//! `vssd validate`'s chart: each figure of a preset as a point, published
//! against simulated on log axes (figures of any unit side by side), with
//! the diagonal and the ±25 % band. Filled points are held out, hollow ones
//! are training figures; the colour is the group (the drive's state).
//! Drawn with `vssd-chart`'s pieces (header, palette, text).

use plotters::prelude::*;

use crate::corpus::State;
use crate::judge::PresetResult;
use crate::text::pct;

use vssd_chart::draw::{LEGEND_ROW, draw_header, text_style, to_svg};
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
