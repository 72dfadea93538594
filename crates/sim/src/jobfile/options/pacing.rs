//! Options that say how long a job runs, how fast it issues and when it
//! stops: loops and counts, runtime, delays, think time, rate limits, the
//! steady-state and latency stops.

use super::super::{SsKind, SteadyState};
use super::{Opt, Value};
use crate::jobfile::{JobFileError, JobSpec};
use vssd_profile::size::parse_size_fio;

const S: u64 = 1_000_000_000;

/// The pacing options, under each name fio accepts for them.
pub(super) const OPTIONS: &[Opt] = &[
    (&["loops"], |s, v| {
        let n = v.int()?;
        if n == 0 {
            return Err(v.err("must be at least 1"));
        }
        s.loops = n;
        Ok(())
    }),
    (&["number_ios"], |s, v| {
        s.number_ios = Some(v.int()?).filter(|&n| n > 0);
        Ok(())
    }),
    (&["runtime", "timeout"], |s, v| {
        let t = v.time(S)?;
        s.runtime_ns = if t == 0 { None } else { Some(t) };
        Ok(())
    }),
    (&["time_based"], |s, v| {
        s.time_based = v.flag()?;
        Ok(())
    }),
    (&["ramp_time"], |s, v| {
        s.ramp_ns = v.time(S)?;
        Ok(())
    }),
    (&["startdelay"], |s, v| {
        let t = v.need()?;
        if t.contains('-') {
            return Err(v.err(format!("{t:?}: random start delays are not simulated")));
        }
        s.startdelay_ns = v.time(S)?;
        Ok(())
    }),
    (&["thinktime"], |s, v| {
        s.thinktime_ns = v.time(1_000)?;
        Ok(())
    }),
    (&["thinktime_blocks"], |s, v| {
        s.thinktime_blocks = v.int()?.max(1);
        Ok(())
    }),
    (&["rate_iops", "rate"], |s, v| {
        let t = v.need()?;
        if t.contains(',') {
            return Err(v.err(format!(
                "{t:?}: separate read/write rates are not simulated (give one rate for the job)"
            )));
        }
        if v.name == "rate_iops" {
            s.rate_iops = v.int()?;
        } else {
            s.rate_bytes = v.size()?;
        }
        Ok(())
    }),
    (&["steadystate", "ss"], |s, v| {
        s.ss = parse_ss(v.need()?, v.kb).map_err(|m| v.err(m))?;
        Ok(())
    }),
    (&["steadystate_duration", "ss_dur"], |s, v| {
        let t = v.time(S)?;
        if t != 0 && (!t.is_multiple_of(S) || t > 86_400 * S) {
            return Err(v.err(format!(
                "{t} ns: steady state is judged on one sample per second: give whole seconds, at most a day"
            )));
        }
        s.ss_dur_s = t / S;
        Ok(())
    }),
    (&["steadystate_ramp_time", "ss_ramp"], |s, v| {
        s.ss_ramp_ns = v.time(S)?;
        Ok(())
    }),
    (&["max_latency"], max_latency),
    (&["end_fsync", "fsync_on_close"], |s, v| {
        s.end_fsync = v.flag()?;
        Ok(())
    }),
];

/// `max_latency=read[,write[,trim]]` (µs by default): 0 is no limit; an
/// omitted time repeats the one before it.
fn max_latency(spec: &mut JobSpec, value: &Value) -> Result<(), JobFileError> {
    let v = value.need()?;
    let parts: Vec<&str> = v.split(',').map(str::trim).collect();
    if parts.len() > 3 {
        return Err(value.err(format!("{v:?}: at most three times (read,write,trim)")));
    }
    let mut lim = [None; 3];
    let mut last = None;
    for (i, slot) in lim.iter_mut().enumerate() {
        match parts.get(i) {
            Some(p) if !p.is_empty() => {
                let t = super::parse_time(p, 1_000).map_err(|m| value.err(m))?;
                *slot = (t > 0).then_some(t);
                last = *slot;
            }
            Some(_) => last = None,
            None => *slot = last,
        }
    }
    spec.max_latency_ns = lim;
    Ok(())
}

/// Parse fio's `steadystate=criterion:limit` (`iops_slope:0.1%`, `bw:10m`).
fn parse_ss(v: &str, kb_base: u32) -> Result<SteadyState, String> {
    let (crit, limit) = v
        .split_once(':')
        .ok_or_else(|| format!("{v:?}: expected criterion:limit, e.g. iops_slope:0.1%"))?;
    let kind = match crit.trim().to_ascii_lowercase().as_str() {
        "iops" => SsKind::Iops,
        "iops_slope" => SsKind::IopsSlope,
        "bw" => SsKind::Bw,
        "bw_slope" => SsKind::BwSlope,
        c => {
            return Err(format!(
                "{c:?}: the criterion is one of iops, iops_slope, bw, bw_slope"
            ));
        }
    };
    let limit = limit.trim();
    let (value, pct) = match limit.strip_suffix('%') {
        Some(p) => (
            p.trim()
                .parse::<f64>()
                .map_err(|_| format!("{limit:?} is not a percentage"))?,
            true,
        ),
        None if matches!(kind, SsKind::Bw | SsKind::BwSlope) => (
            parse_size_fio(limit, kb_base).map_err(|x| x.to_string())? as f64,
            false,
        ),
        None => (
            limit
                .parse::<f64>()
                .map_err(|_| format!("{limit:?} is not a number"))?,
            false,
        ),
    };
    if !(value.is_finite() && value >= 0.0) {
        return Err(format!(
            "{limit:?}: the limit must be a non-negative number"
        ));
    }
    Ok(SteadyState {
        kind,
        limit: value,
        pct,
    })
}
