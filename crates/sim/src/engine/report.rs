//! What a finished run hands back: each instance's [`JobReport`], its
//! finished logs and steady-state result.

use super::plan::JobPlan;
use super::state::{JobState, Phase};
use super::{JobReport, LogText, SsReport};

/// The report of instance `j` (its index `i`, from 0) of plan `p`, once the
/// run has ended.
pub(super) fn job_report(i: usize, mut j: JobState, p: &JobPlan) -> JobReport {
    let (logs, steadystate) = take_logs(p, &mut j);
    let depth_dist = j.depth_dist(p);
    let (bw_log, bw_stats, iops_stats) = j.bw.into_parts();
    let runtime = j.last_done_ns.saturating_sub(j.stats_start_ns);
    debug_assert_eq!(
        j.phase,
        Phase::Done,
        "job {} ({}) never ended",
        p.name,
        p.origin
    );
    JobReport {
        name: p.name.clone(),
        index: i + 1,
        group: p.group,
        rw: p.rw_text.clone(),
        dirs: p.dirs.to_vec(),
        bs: p.bs,
        iodepth: p.depth,
        jobs: 1,
        dir: j.stats,
        start_ns: j.start_ns,
        stats_start_ns: j.stats_start_ns,
        end_ns: j.last_done_ns,
        bw_log,
        bw_stats,
        iops_stats,
        depth_dist,
        job_runtime_ms: runtime / 1_000_000,
        sync_ios: j.sync_ios,
        longest_runtime_ns: runtime,
        options: p.options.clone(),
        description: p.description.clone(),
        continue_on_error: p.continue_on_error,
        clat_percentiles: p.clat_percentiles,
        lat_percentiles: p.lat_percentiles,
        percentiles: p.percentiles.clone(),
        group_reporting: p.group_reporting,
        write_bw_log: p.write_bw_log.clone(),
        logs,
        log_offset: p.logs.offset_col,
        per_job_logs: p.logs.per_job,
        steadystate,
        error: j.error,
        iolog: p.write_iolog.clone().zip(j.iolog.take()),
        completions: std::mem::take(&mut j.completions),
    }
}

/// The finished logs and steady-state results of an instance.
fn take_logs(p: &JobPlan, j: &mut JobState) -> (Vec<LogText>, Option<SsReport>) {
    let mut logs = Vec::new();
    let Some(x) = j.extra.take() else {
        return (logs, None);
    };
    let x = *x;
    if let Some(l) = x.lat {
        if let (Some(prefix), Some([lat, clat, slat])) = (&p.logs.lat, l.lat) {
            for (kind, text) in [("lat", lat), ("clat", clat), ("slat", slat)] {
                logs.push(LogText {
                    prefix: prefix.clone(),
                    kind,
                    text,
                });
            }
        }
        if let (Some(prefix), Some(text)) = (&p.logs.iops, l.iops) {
            logs.push(LogText {
                prefix: prefix.clone(),
                kind: "iops",
                text,
            });
        }
    }
    if let (Some(prefix), Some(h)) = (&p.logs.hist, x.hist) {
        logs.push(LogText {
            prefix: prefix.clone(),
            kind: "clat_hist",
            text: h.text,
        });
    }
    let ss = match (p.ss, x.ss) {
        (Some(plan), Some(s)) => {
            let (iops, bw): (Vec<u64>, Vec<u64>) = s.samples().unzip();
            Some(SsReport {
                ss: format!(
                    "{}:{:.6}{}",
                    plan.crit.kind.name(),
                    plan.crit.limit,
                    if plan.crit.pct { "%" } else { "" }
                ),
                duration: plan.dur_s,
                attained: s.attained,
                criterion: s.criterion,
                pct: plan.crit.pct,
                iops_based: plan.crit.kind.iops(),
                slope_based: plan.crit.kind.slope(),
                max_deviation: s.deviation,
                slope: s.slope,
                iops,
                bw,
            })
        }
        _ => None,
    };
    (logs, ss)
}
