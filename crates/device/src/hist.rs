//! The device's latency histograms and their summaries. The histogram is
//! [`vssd_common::hist::AtomicHistogram`]: the simulator's buckets (1.6 %
//! wide), recorded from any thread.

use serde::{Deserialize, Serialize};

pub use vssd_common::hist::AtomicHistogram as Histogram;

/// Percentiles of a histogram, in ns.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Values recorded.
    pub count: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest value (exact).
    pub max_ns: u64,
}

impl Summary {
    /// Count, mean and the usual percentiles of `h`.
    pub fn of(h: &Histogram) -> Summary {
        let count = h.count();
        Summary {
            count,
            mean_ns: if count == 0 {
                0.0
            } else {
                h.sum() as f64 / count as f64
            },
            p50_ns: h.quantile(0.50),
            p90_ns: h.quantile(0.90),
            p99_ns: h.quantile(0.99),
            p999_ns: h.quantile(0.999),
            max_ns: h.max(),
        }
    }
}
