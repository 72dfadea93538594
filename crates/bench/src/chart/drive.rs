//! The drive chart (`drive.svg`): write amplification and free blocks over
//! the run, one panel each, phases marked and named.

use plotters::prelude::*;

use vssd_chart::draw::*;
use vssd_chart::numfmt::truncate;
use vssd_chart::{Chart, GRID, HEADER_H, HEIGHT, INK, MUTED, PALETTE, PLOT_LEFT, WIDTH};

use super::caption::subtitle;
use crate::results::{BenchResults, DriveSample, Mode};

/// Write amplification over time, only where the host wrote since the
/// previous sample: an idle or read-only stretch has none (not 0), so the
/// line breaks there (a NaN point splits it).
fn waf_points(samples: &[DriveSample]) -> Vec<(f64, f64)> {
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
        // A line under the chart for the names of phases too short to
        // carry their own.
        let (body, key_area) = body.split_vertically(HEIGHT - HEADER_H - KEY_H);
        let (top, bottom) = body.split_vertically((HEIGHT - HEADER_H - KEY_H) * 45 / 100);
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
        let x_desc = match r.mode {
            Mode::Guest if r.time_scale != 1.0 => format!(
                "Time since the start of the run (wall clock ÷ {}, s)",
                r.time_scale
            ),
            Mode::Guest => "Time since the start of the run (s)".to_string(),
            Mode::Sim => "Model time since the start of the run (s)".to_string(),
        };
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
                .margin_top(if is_bottom { 4 } else { 34 })
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
                mesh.x_desc(x_desc.as_str()).x_label_formatter(&xf);
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
        draw_phase_labels(root, &key_area, &label_at, &phase_name)?;
        Ok(())
    })?;
    Some(Chart {
        file_name: "drive.svg".into(),
        title,
        svg,
    })
}

/// Height of the drive chart's key line, px.
const KEY_H: u32 = 20;
/// The phase labels' text size.
const LABEL_FONT: u32 = 13;

/// Phase names above the drive chart's top panel, each within its own
/// span (`label_at`: span's left and right pixel, the panel's top, the
/// phase), on one of two rows (the lower first); a span too narrow for its name gets the
/// phase's number (as in the report's phases table), and the key line
/// under the chart names those phases.
fn draw_phase_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    key_area: &DrawingArea<DB, plotters::coord::Shift>,
    label_at: &[(i32, i32, i32, usize)],
    phase_name: &dyn Fn(usize) -> String,
) -> vssd_chart::draw::DrawResult<DB> {
    let right = WIDTH as i32 - 4;
    let mut row_end = [i32::MIN; 2];
    let mut keyed: Vec<usize> = Vec::new();
    let spot = |row_end: &[i32; 2], lo: i32, w: i32, limit: i32| {
        (0..2)
            .map(|k| (k, lo.max(row_end[k].saturating_add(6))))
            .find(|(_, x)| x + w <= limit)
    };
    for &(px0, px1, py, i) in label_at {
        let name = truncate(&phase_name(i), 18);
        let lo = px0 + 3;
        let placed = match spot(
            &row_end,
            lo,
            text_width(&name, LABEL_FONT),
            px1.min(right) - 2,
        ) {
            Some(s) => Some((name, s)),
            None => {
                keyed.push(i);
                let num = (i + 1).to_string();
                let w = text_width(&num, LABEL_FONT);
                spot(&row_end, lo, w, right).map(|s| (num, s))
            }
        };
        if let Some((text, (row, x))) = placed {
            row_end[row] = x + text_width(&text, LABEL_FONT);
            let y = py - 17 - row as i32 * 14;
            root.draw(&Text::new(text, (x, y), text_style(LABEL_FONT, &MUTED)))?;
        }
    }
    if !keyed.is_empty() {
        let key = keyed
            .iter()
            .map(|i| format!("{} {}", i + 1, phase_name(*i)))
            .collect::<Vec<_>>()
            .join(" · ");
        key_area.draw(&Text::new(
            truncate(&format!("Phases: {key}"), 110),
            (PLOT_LEFT, 2),
            text_style(LABEL_FONT, &MUTED),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
