//! SVG charts as vssd draws them: 800×450 documents with a header, axes,
//! lines and a legend, in a palette that stays distinct with the common
//! colour-vision deficiencies; and numbers as its reports print them.
//!
//! - [`draw`]: a [`draw::Plot`] of lines rendered to a [`Chart`], and the
//!   pieces (header, legend, axis ranges, ticks) charts of their own use;
//! - [`numfmt`]: thousands separators, binary sizes, MB/s, ratios,
//!   percentages, cut labels.
//!
//! `vssd bench` draws its runs with it (`vssd-bench`), `vssd validate` its
//! presets' figures (`vssd-fidelity`). Text is left to the viewer's
//! `sans-serif` font (plotters' naive layout, no system fonts needed).
//! Drawing never fails a report: a chart that cannot be drawn is logged
//! and left out.

use plotters::prelude::RGBColor;

pub mod draw;
pub use vssd_common::numfmt;

/// Chart width, px.
pub const WIDTH: u32 = 800;
/// Chart height, px.
pub const HEIGHT: u32 = 450;

/// One drawn chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// File name in the output directory (`throughput.svg`, `sim-drive.svg`, ...).
    pub file_name: String,
    /// What it shows, one line (figure caption, alt text).
    pub title: String,
    /// The SVG document.
    pub svg: String,
}

/// Okabe–Ito, in an order that reads well on white (yellow last).
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
    RGBColor(240, 228, 66),  // yellow
];
/// Text and axes.
pub const INK: RGBColor = RGBColor(34, 34, 34);
/// Subtitles, secondary text, axis lines.
pub const MUTED: RGBColor = RGBColor(102, 102, 102);
/// Grid lines.
pub const GRID: RGBColor = RGBColor(224, 224, 224);
/// The font family (the viewer's).
pub const FONT: &str = "sans-serif";
/// Left edge of the plotting area (y label area + margin), px.
pub const PLOT_LEFT: i32 = 78;
/// Height of the title and subtitle, px.
pub const HEADER_H: u32 = 58;

/// The `i`-th colour of the palette (it repeats after eight).
pub fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}
