//! Control-socket protocol: one JSON object per line each way.
//!
//! Requests: `{"cmd":"stats"}`, `{"cmd":"secure-erase"}`,
//! `{"cmd":"precondition","steps":[{"step":"fill-seq","bs":131072},
//! {"step":"random","bs":4096,"amount":"2x"}],"seed":1}`.
//! Replies: `{"ok":true,"result":{...}}` or `{"ok":false,"error":"..."}`.

use serde::{Deserialize, Serialize};

/// A control request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case", deny_unknown_fields)]
pub enum CtlRequest {
    /// Counters, latency percentiles, connection state.
    Stats,
    /// Back to a fresh drive; all data reads as zeros.
    SecureErase,
    /// Age the drive in model time; data untouched.
    Precondition {
        /// Steps, in order.
        steps: Vec<Step>,
        /// Seed for random steps.
        #[serde(default)]
        seed: u64,
    },
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
    /// Random `bs` writes, `amount` in total: bytes (`"64G"`) or a multiple of the capacity (`"2x"`).
    Random {
        /// Write size, bytes.
        bs: u64,
        /// Total.
        amount: String,
    },
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
    /// A success.
    pub fn ok(result: serde_json::Value) -> CtlReply {
        CtlReply {
            ok: true,
            result: Some(result),
            error: None,
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
        crate::size::parse_size(a).map_err(|e| e.to_string())?
    };
    if bs == 0 {
        return Err("bs must be > 0".into());
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
        assert!(matches!(r, CtlRequest::Precondition { ref steps, seed: 0 } if steps.len() == 2));
        assert!(serde_json::from_str::<CtlRequest>(r#"{"cmd":"format-c"}"#).is_err());
    }

    #[test]
    fn amounts() {
        assert_eq!(parse_amount("2x", 1 << 30, 4096), Ok(2 << 30));
        assert_eq!(parse_amount("0.5x", 1 << 30, 4096), Ok(1 << 29));
        assert_eq!(parse_amount("1M", 1 << 30, 4096), Ok(1 << 20));
        assert!(parse_amount("-1x", 1 << 30, 4096).is_err());
        assert!(parse_amount("lots", 1 << 30, 4096).is_err());
    }
}
