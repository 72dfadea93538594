//! What fio's output looks like, for the reports that imitate it (the
//! simulator's and the load generator's JSON).

use serde::Serialize;
use serde::ser::SerializeMap;

/// The fio version whose JSON the reports follow (its `fio version` key).
pub const FIO_VERSION: &str = "fio-3.33";

/// fio's default completion-latency percentiles (`percentile_list`).
pub const DEFAULT_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// Percentile values, serialised as fio does: an ordered map
/// `{"1.000000": v, ...}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Percentiles(pub Vec<(f64, u64)>);

impl Percentiles {
    /// The value at percentile `p` of the listed ones, if listed.
    pub fn at(&self, p: f64) -> Option<u64> {
        self.0
            .iter()
            .find(|(q, _)| (*q - p).abs() < 1e-9)
            .map(|(_, v)| *v)
    }
}

impl Serialize for Percentiles {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (p, v) in &self.0 {
            m.serialize_entry(&format!("{p:.6}"), v)?;
        }
        m.end()
    }
}
