//! `vssd bench`: benchmark scenarios run in a guest and in the simulator,
//! and what they produce: [`results`] (the data), [`chart`] (SVG charts),
//! [`report`] (the output directory: JSON, CSV, charts, Markdown and HTML)
//! and [`compare`] (two runs side by side).

pub mod chart;
pub mod compare;
pub mod report;
pub mod results;

#[cfg(test)]
mod testdata;
