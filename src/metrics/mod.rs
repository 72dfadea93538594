//! `vssd serve --metrics ADDR`: the drive's counters, latency and lateness
//! in the Prometheus text format, for the dashboards users already have.
//!
//! Every scrape builds the same [`StatsReport`] as `vssd ctl stats`
//! (so the numbers are the same: counters, gauges, and the percentiles as
//! `*_quantile_seconds` gauges), plus the latency and lateness histograms
//! as Prometheus histograms with power-of-two buckets from 1 µs to ~17 s.
//! Encoding is `prometheus-client`'s (`encode`: the metric families;
//! `report`: what a scrape holds); the HTTP side (`http`) is a minimal
//! one-request-per-connection server (`GET /metrics`), up to 8 requests
//! at once, each with a 10 s deadline for the whole request.
//!
//! [`StatsReport`]: vssd_device::StatsReport

mod encode;
mod http;
mod report;
#[cfg(test)]
mod tests;

use std::fmt::Write as _;
use std::sync::{Arc, Weak};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use vssd_device::Device;

pub use http::{MetricsError, spawn};

/// The collector: one report per scrape.
#[derive(Debug)]
struct DeviceCollector {
    device: Weak<Device>,
}

impl Collector for DeviceCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Some(dev) = self.device.upgrade() else {
            return Ok(());
        };
        let r = dev.report();
        report::encode_report(&dev, &r, &mut encode::Enc { e: &mut encoder })
    }
}

/// The metrics of `device` in the Prometheus text format.
pub fn render(device: &Arc<Device>) -> String {
    let mut reg = Registry::default();
    reg.register_collector(Box::new(DeviceCollector {
        device: Arc::downgrade(device),
    }));
    let mut out = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &reg) {
        let _ = writeln!(out, "# encoding failed: {e}");
    }
    out
}
