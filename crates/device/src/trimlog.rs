//! The TRIM log: the most recent discards (and write-zeroes) as the drive
//! received them, for seeing exactly what a driver or filesystem sends:
//! range sizes, alignment, batching, and what each freed in the FTL.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Records kept (oldest dropped first).
pub const TRIM_LOG_LEN: usize = 16384;

/// One discard or write-zeroes command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrimRecord {
    /// Sequence number (from 1, never reused).
    pub seq: u64,
    /// Model time of submission, ns.
    pub model_ns: u64,
    /// Wall-clock time of submission, Unix ms.
    pub wall_unix_ms: u64,
    /// Frontend and connection (`nbd unix:/run/vssd.sock #3`).
    pub source: String,
    /// `discard`, `write-zeroes-unmap` or `write-zeroes`.
    pub kind: String,
    /// The ranges of the command, `(offset, length)` in bytes.
    pub ranges: Vec<(u64, u64)>,
    /// Bytes that were mapped and are now free.
    pub freed_bytes: u64,
    /// Bytes of whole mapping units that were not mapped anyway.
    pub already_unmapped_bytes: u64,
}

/// A bounded ring of [`TrimRecord`]s.
#[derive(Debug, Default)]
pub struct TrimLog {
    inner: Mutex<(u64, VecDeque<TrimRecord>)>,
}

impl TrimLog {
    /// Append a record (its `seq` is assigned here).
    pub fn push(&self, mut r: TrimRecord) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.0 += 1;
        r.seq = g.0;
        if g.1.len() == TRIM_LOG_LEN {
            g.1.pop_front();
        }
        g.1.push_back(r);
    }

    /// Records with `seq > after`, at most `max`, oldest first; and the
    /// number of records after `after` that were already dropped.
    pub fn since(&self, after: u64, max: usize) -> (Vec<TrimRecord>, u64) {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let first = g.1.front().map(|r| r.seq).unwrap_or(g.0 + 1);
        let lost = first.saturating_sub(after + 1);
        let v =
            g.1.iter()
                .filter(|r| r.seq > after)
                .take(max)
                .cloned()
                .collect();
        (v, lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(offset: u64) -> TrimRecord {
        TrimRecord {
            seq: 0,
            model_ns: 0,
            wall_unix_ms: 0,
            source: "t".into(),
            kind: "discard".into(),
            ranges: vec![(offset, 4096)],
            freed_bytes: 4096,
            already_unmapped_bytes: 0,
        }
    }

    #[test]
    fn ring_is_bounded_and_reports_losses() {
        let l = TrimLog::default();
        for i in 0..(TRIM_LOG_LEN as u64 + 10) {
            l.push(rec(i));
        }
        let (v, lost) = l.since(0, 5);
        assert_eq!(lost, 10);
        assert_eq!(v[0].seq, 11);
        assert_eq!(v.len(), 5);
        let (v, lost) = l.since(TRIM_LOG_LEN as u64 + 8, 100);
        assert_eq!((v.len(), lost), (2, 0));
        assert!(l.since(TRIM_LOG_LEN as u64 + 10, 100).0.is_empty());
    }
}
