//! Control-socket protocol: one JSON object per line each way.
//!
//! Requests: `{"cmd":"stats"}`, `{"cmd":"smart"}`, `{"cmd":"secure-erase"}`,
//! `{"cmd":"idle","ns":5000000000}`,
//! `{"cmd":"trace-start","path":"/abs/file.vssdtrace","limit":1073741824}`,
//! `{"cmd":"trace-stop"}`, `{"cmd":"trace-status"}`,
//! `{"cmd":"precondition","steps":[{"step":"fill-seq","bs":131072},
//! {"step":"random","bs":4096,"amount":"2x"}],"seed":1,"progress":true}`.
//! Replies: `{"ok":true,"result":{...}}` or `{"ok":false,"error":"..."}`;
//! a precondition asked with `"progress":true` is preceded by progress
//! lines `{"progress":{"step":0,"steps":2,"done_bytes":…,"total_bytes":…}}`.
//! Closing the connection cancels a running precondition.
//! Faults: `{"cmd":"fault-add","fault":{"kind":"read-error","offset":4096,"length":512}}`,
//! `{"cmd":"fault-add","fault":{"kind":"stall","ms":50,"every_ms":1000}}`,
//! `{"cmd":"fault-list"}`, `{"cmd":"fault-clear","id":3}` (without `id`: all).
//! Power: `{"cmd":"power-cut","trigger":{"when":"now"}}` (or
//! `{"when":"after-writes","writes":N}`, `{"when":"after-ms","ms":T}`,
//! `{"when":"at","ms":T}` (absolute drive time), `{"when":"random","seed":S}`),
//! optionally with `"restart_after_ms":R` (automatic power-on R ms of drive
//! time after the cut), `{"cmd":"power-on"}`.
//!
//! The result types ([`StatsReport`], [`EraseResult`], [`PreconditionResult`])
//! are shared by the daemon, which builds them, and the client, which reads
//! them back.

use serde::{Deserialize, Serialize};

pub use vssd_device::PowerCutResult;
pub use vssd_device::StatsReport;
pub use vssd_device::faults::{FaultInfo, FaultReport, FaultSpec};
pub use vssd_device::power::{CutTrigger, PowerReport};
pub use vssd_device::smart::SmartReport;
pub use vssd_device::trimlog::TrimRecord;
use vssd_model::{Counters, Precondition};

/// A control request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case", deny_unknown_fields)]
pub enum CtlRequest {
    /// Counters, latency percentiles, frontends and their TRIM audit.
    Stats,
    /// Back to a fresh drive; all data reads as zeros.
    SecureErase,
    /// The drive's SMART attributes (or NVMe health log), from its counters.
    Smart,
    /// The most recent discards and write-zeroes, oldest first.
    TrimLog {
        /// Only records after this sequence number.
        #[serde(default)]
        after: u64,
        /// At most this many (the daemon caps it).
        #[serde(default = "default_trim_max")]
        max: usize,
    },
    /// Age the drive in model time; data untouched.
    Precondition {
        /// Steps, in order.
        steps: Vec<Step>,
        /// Seed for random steps.
        #[serde(default)]
        seed: u64,
        /// Send progress lines before the reply.
        #[serde(default)]
        progress: bool,
    },
    /// Let the drive idle this much model time at once: its background
    /// work (erases, garbage collection, write-buffer drain) runs as if
    /// that time had passed without requests, and its clock moves on by
    /// it (as after a precondition). A time-dilated bench uses it for
    /// `idle` phases.
    Idle {
        /// Model time, ns.
        ns: u64,
    },
    /// Record every request to a new trace file (an absolute path that
    /// must not exist; created mode 0600).
    TraceStart {
        /// The file.
        path: String,
        /// Size limit, bytes (default 4 GiB).
        #[serde(default)]
        limit: Option<u64>,
    },
    /// Stop the trace and close its file.
    TraceStop,
    /// The current or last trace.
    TraceStatus,
    /// Inject a fault (a media error range, a stall).
    FaultAdd {
        /// The fault.
        fault: FaultSpec,
    },
    /// The injected faults and what they did, with the power state and
    /// what the latest power cut lost.
    FaultList,
    /// Cut the drive's power now, or arm a cut.
    PowerCut {
        /// When.
        #[serde(default = "cut_now")]
        trigger: CutTrigger,
        /// Power on again by itself this long after the cut (ms of drive
        /// time); without it the power stays off until `power-on`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        restart_after_ms: Option<u64>,
    },
    /// Power the drive back on after a cut.
    PowerOn,
    /// Remove one injected fault, or all of them without `id`.
    FaultClear {
        /// The fault's id (`fault-list`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<u64>,
    },
}

/// Result of `fault-add`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultAddResult {
    /// The fault as registered (with its id).
    pub fault: FaultInfo,
}

/// Result of `fault-clear`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultClearResult {
    /// Faults removed.
    pub cleared: usize,
}

pub use vssd_device::capture::TraceStatus;

/// Result of `idle`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleResult {
    /// Model time the drive idled, ns.
    pub model_ns: u64,
    /// The counters afterwards.
    pub counters: Counters,
}

fn cut_now() -> CutTrigger {
    CutTrigger::Now
}

fn default_trim_max() -> usize {
    1000
}

/// Result of `trim-log`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrimLogResult {
    /// The records, oldest first.
    pub records: Vec<TrimRecord>,
    /// Records after `after` that the ring had already dropped.
    pub lost: u64,
}

/// One precondition step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Step {
    /// TRIM the whole drive.
    TrimAll,
    /// One sequential pass with `bs` writes.
    FillSeq {
        /// Write size, bytes.
        bs: u64,
    },
    /// Age the NAND: every block to at least `percent` of the rated P/E
    /// cycles (run by the daemon before the write steps; data untouched).
    Wear {
        /// Percent of the rated cycles, (0, 1000].
        percent: f64,
    },
    /// Random `bs` writes, `amount` in total: bytes (`"64G"`) or a multiple of the capacity (`"2x"`).
    Random {
        /// Write size, bytes.
        bs: u64,
        /// Total.
        amount: String,
    },
}

/// The model's precondition steps for `steps` on a drive of `capacity`
/// bytes, each checked (write sizes, amounts).
pub fn model_steps(steps: &[Step], capacity: u64) -> Result<Vec<Precondition>, String> {
    let check_bs = |what: &str, bs: u64| {
        if bs == 0 || !bs.is_multiple_of(512) || bs > capacity {
            Err(format!(
                "{what} bs {bs} must be a non-zero multiple of 512, at most the capacity"
            ))
        } else {
            Ok(())
        }
    };
    steps
        .iter()
        .map(|s| match s {
            Step::Wear { .. } => Err(
                "a wear step ages the daemon's drive, not a write step the model replays".into(),
            ),
            Step::TrimAll => Ok(Precondition::TrimAll),
            Step::FillSeq { bs } => {
                check_bs("fill-seq", *bs)?;
                Ok(Precondition::FillSequential { bs: *bs })
            }
            Step::Random { bs, amount } => {
                check_bs("random", *bs)?;
                let a = parse_amount(amount, capacity, *bs)
                    .map_err(|e| format!("random amount: {e}"))?;
                Ok(Precondition::Random { bs: *bs, amount: a })
            }
        })
        .collect()
}

/// A reply line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CtlReply {
    /// Success.
    pub ok: bool,
    /// The result, on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// The error, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl CtlReply {
    /// A success carrying `result`.
    pub fn ok(result: &impl Serialize) -> CtlReply {
        match serde_json::to_value(result) {
            Ok(v) => CtlReply {
                ok: true,
                result: Some(v),
                error: None,
            },
            Err(e) => CtlReply::err(format!("cannot encode the result: {e}")),
        }
    }
    /// A failure.
    pub fn err(msg: impl Into<String>) -> CtlReply {
        CtlReply {
            ok: false,
            result: None,
            error: Some(msg.into()),
        }
    }
}

/// Result of `secure-erase`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EraseResult {
    /// Always true on success.
    pub erased: bool,
    /// The counters afterwards.
    pub counters: Counters,
}

/// Progress of a running precondition, all steps together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Bytes of requests issued so far.
    pub done_bytes: u64,
    /// Bytes of requests in all.
    pub total_bytes: u64,
}

/// A progress line (`{"progress":{...}}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressLine {
    /// Where the precondition is.
    pub progress: Progress,
}

/// Result of `precondition`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreconditionResult {
    /// Model time the steps took, ns.
    pub model_time_ns: u64,
    /// The client went away before the end: the drive keeps what was done.
    #[serde(default)]
    pub cancelled: bool,
    /// The counters afterwards.
    pub counters: Counters,
}

/// Total bytes for `amount`: `"2x"` = twice `capacity`, else a size (`"64G"`, `"1000000"`),
/// rounded down to whole `bs` writes.
pub fn parse_amount(amount: &str, capacity: u64, bs: u64) -> Result<u64, String> {
    let a = amount.trim();
    let bytes = if let Some(m) = a.strip_suffix(['x', 'X']) {
        let f: f64 = m
            .trim()
            .parse()
            .map_err(|_| format!("bad multiple {amount:?}"))?;
        if !(f.is_finite() && f > 0.0 && f <= 1000.0) {
            return Err(format!("multiple {amount:?} must be in (0, 1000]"));
        }
        (capacity as f64 * f) as u64
    } else {
        vssd_profile::size::parse_size(a).map_err(|e| e.to_string())?
    };
    if bs == 0 {
        return Err("bs must be > 0".into());
    }
    // The same bound as a multiple: more than 1000 capacities is not an
    // ageing any drive gets, and would keep the daemon busy for days.
    let max = capacity.saturating_mul(1000);
    if bytes > max {
        return Err(format!(
            "amount {amount:?} is more than 1000 times the drive's capacity ({max} bytes)"
        ));
    }
    Ok(bytes / bs * bs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse() {
        let r: CtlRequest = serde_json::from_str(r#"{"cmd":"stats"}"#).unwrap();
        assert_eq!(r, CtlRequest::Stats);
        let r: CtlRequest = serde_json::from_str(
            r#"{"cmd":"precondition","steps":[{"step":"fill-seq","bs":131072},{"step":"random","bs":4096,"amount":"2x"}]}"#,
        )
        .unwrap();
        assert!(
            matches!(r, CtlRequest::Precondition { ref steps, seed: 0, progress: false } if steps.len() == 2)
        );
        assert!(serde_json::from_str::<CtlRequest>(r#"{"cmd":"format-c"}"#).is_err());
        let r: CtlRequest = serde_json::from_str(r#"{"cmd":"smart"}"#).unwrap();
        assert_eq!(r, CtlRequest::Smart);
        let r: CtlRequest = serde_json::from_str(
            r#"{"cmd":"fault-add","fault":{"kind":"read-error","offset":4096,"length":512}}"#,
        )
        .unwrap();
        assert_eq!(
            r,
            CtlRequest::FaultAdd {
                fault: FaultSpec::ReadError {
                    offset: 4096,
                    length: 512
                }
            }
        );
        let r: CtlRequest = serde_json::from_str(r#"{"cmd":"fault-clear"}"#).unwrap();
        assert_eq!(r, CtlRequest::FaultClear { id: None });
        // Unknown kinds and fields are refused, not ignored.
        for bad in [
            r#"{"cmd":"fault-add","fault":{"kind":"fire","offset":0,"length":512}}"#,
            r#"{"cmd":"fault-add","fault":{"kind":"stall","ms":5,"every":10}}"#,
            r#"{"cmd":"fault-add","fault":{"kind":"read-error","offset":-1,"length":512}}"#,
        ] {
            assert!(serde_json::from_str::<CtlRequest>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn amounts() {
        assert_eq!(parse_amount("2x", 1 << 30, 4096), Ok(2 << 30));
        assert_eq!(parse_amount("0.5x", 1 << 30, 4096), Ok(1 << 29));
        assert_eq!(parse_amount("1M", 1 << 30, 4096), Ok(1 << 20));
        assert!(parse_amount("-1x", 1 << 30, 4096).is_err());
        assert!(parse_amount("lots", 1 << 30, 4096).is_err());
        // 2^64 - 1 bytes used to be accepted.
        let e = parse_amount("18446744073709551615", 1 << 30, 4096).unwrap_err();
        assert!(e.contains("1000 times"), "{e}");
        assert_eq!(parse_amount("1000G", 1 << 30, 4096), Ok(1000 << 30));
    }
}
