//! The Prometheus text encoding of one scrape: metric families of
//! counters, gauges and histograms, with labels.

use prometheus_client::encoding::{DescriptorEncoder, EncodeCounterValue, NoLabelSet};
use prometheus_client::metrics::MetricType;

use vssd_device::hist::{Histogram, Summary};

/// Histogram buckets: 2^10 ns (~1 µs) .. 2^34 ns (~17 s).
const LO_BITS: u32 = 10;
const HI_BITS: u32 = 34;

/// A metric family's labels, one row per member.
pub(super) type Labels = Vec<(&'static str, String)>;

/// Nanoseconds as seconds, Prometheus' unit of time.
pub(super) fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The scrape being encoded, one metric family per call.
pub(super) struct Enc<'a, 'b> {
    pub(super) e: &'a mut DescriptorEncoder<'b>,
}

impl Enc<'_, '_> {
    pub(super) fn counter(&mut self, name: &str, help: &str, v: u64) -> std::fmt::Result {
        let mut m = self
            .e
            .encode_descriptor(name, help, None, MetricType::Counter)?;
        m.encode_counter::<NoLabelSet, _, u64>(&v, None)
    }

    pub(super) fn counter_f(&mut self, name: &str, help: &str, v: f64) -> std::fmt::Result {
        let mut m = self
            .e
            .encode_descriptor(name, help, None, MetricType::Counter)?;
        m.encode_counter::<NoLabelSet, _, f64>(&v, None)
    }

    pub(super) fn gauge(&mut self, name: &str, help: &str, v: f64) -> std::fmt::Result {
        let mut m = self
            .e
            .encode_descriptor(name, help, None, MetricType::Gauge)?;
        m.encode_gauge(&v)
    }

    /// A counter family; `V` is u64 for counts, f64 for seconds.
    pub(super) fn counters<V: EncodeCounterValue>(
        &mut self,
        name: &str,
        help: &str,
        rows: &[(Labels, V)],
    ) -> std::fmt::Result {
        let mut m = self
            .e
            .encode_descriptor(name, help, None, MetricType::Counter)?;
        for (l, v) in rows {
            m.encode_family(l)?
                .encode_counter::<NoLabelSet, V, u64>(v, None)?;
        }
        Ok(())
    }

    pub(super) fn gauges(
        &mut self,
        name: &str,
        help: &str,
        rows: &[(Labels, f64)],
    ) -> std::fmt::Result {
        let mut m = self
            .e
            .encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (l, v) in rows {
            if l.is_empty() {
                m.encode_gauge(v)?;
            } else {
                m.encode_family(l)?.encode_gauge(v)?;
            }
        }
        Ok(())
    }

    pub(super) fn histograms(
        &mut self,
        name: &str,
        help: &str,
        rows: &[(Labels, &Histogram)],
    ) -> std::fmt::Result {
        let mut m = self
            .e
            .encode_descriptor(name, help, None, MetricType::Histogram)?;
        for (l, h) in rows {
            let buckets: Vec<(f64, u64)> = h
                .pow2_buckets(LO_BITS, HI_BITS)
                .into_iter()
                .map(|(le, n)| (if le == u64::MAX { f64::MAX } else { secs(le) }, n))
                .collect();
            let count = buckets.iter().map(|b| b.1).sum();
            if l.is_empty() {
                m.encode_histogram::<NoLabelSet>(secs(h.sum()), count, &buckets, None)?;
            } else {
                m.encode_family(l)?.encode_histogram::<NoLabelSet>(
                    secs(h.sum()),
                    count,
                    &buckets,
                    None,
                )?;
            }
        }
        Ok(())
    }
}

/// A latency summary as `quantile`-labelled rows added to `base`.
pub(super) fn quantiles(base: &Labels, s: &Summary) -> Vec<(Labels, f64)> {
    [
        ("0.5", s.p50_ns),
        ("0.9", s.p90_ns),
        ("0.99", s.p99_ns),
        ("0.999", s.p999_ns),
        ("1", s.max_ns),
    ]
    .iter()
    .map(|(q, v)| {
        let mut l = base.clone();
        l.push(("quantile", (*q).to_string()));
        (l, secs(*v))
    })
    .collect()
}
