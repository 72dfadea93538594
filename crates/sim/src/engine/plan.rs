//! The resolved plan: what the job files asked for, resolved against the
//! drive (regions, block sizes, limits, seeds). Immutable while a run goes
//! on; everything that changes lives in [`super::state`].

use std::ops::Range;

use vssd_model::Payload;

use super::super::SimError;
use super::super::jobfile::{Dir, JobSpec, RwKind, SizeSpec, SteadyState, check_instances};
use vssd_common::rng::derive_seed;

/// One job instance (a `numjobs` clone is an instance of its own), resolved.
#[derive(Debug, Clone)]
pub struct JobPlan {
    /// Job name (clones share it).
    pub name: String,
    /// `file:line` of its section.
    pub origin: String,
    /// Stonewall group, from 0.
    pub group: usize,
    /// Direction(s).
    pub rw: RwKind,
    /// `rw` as written, for reports.
    pub rw_text: String,
    /// Directions issued.
    pub dirs: &'static [Dir],
    /// Random offsets.
    pub random: bool,
    /// `norandommap`: independent draws instead of a random map.
    pub norandommap: bool,
    /// Percentage of reads in a mixed job.
    pub read_pct: u64,
    /// First byte of the region.
    pub region_start: u64,
    /// Region length, bytes (a multiple of 512, at least the largest block size).
    pub region_len: u64,
    /// Block size per direction; 0 for directions not issued.
    pub bs: [u64; 3],
    /// Random offsets: number of block slots in the region.
    pub slots: u64,
    /// Random offsets: slot size (the smallest block size).
    pub slot_size: u64,
    /// Bytes to transfer (not time-based).
    pub io_limit: u64,
    /// I/Os to issue (`number_ios`; `u64::MAX` if none).
    pub ios_limit: u64,
    /// `time_based`.
    pub time_based: bool,
    /// `runtime`, ns.
    pub runtime_ns: Option<u64>,
    /// `ramp_time`, ns.
    pub ramp_ns: u64,
    /// `startdelay`, ns.
    pub startdelay_ns: u64,
    /// `thinktime`, ns.
    pub thinktime_ns: u64,
    /// `thinktime_blocks` (at least 1).
    pub thinktime_blocks: u64,
    /// `rate_iops`, 0 = unlimited.
    pub rate_iops: u64,
    /// `rate` in bytes/s, 0 = unlimited.
    pub rate_bytes: u64,
    /// `iodepth` (at least 1).
    pub depth: u32,
    /// `exitall`.
    pub exitall: bool,
    /// `end_fsync`.
    pub end_fsync: bool,
    /// Write payload hint.
    pub payload: Payload,
    /// Percentiles to report.
    pub percentiles: Vec<f64>,
    /// `group_reporting`.
    pub group_reporting: bool,
    /// `write_bw_log` prefix (the job's name if the option had no value).
    pub write_bw_log: Option<String>,
    /// The other logs.
    pub logs: LogPlan,
    /// Steady-state detection.
    pub ss: Option<SsPlan>,
    /// `max_latency` per direction, ns (`u64::MAX`: none).
    pub max_latency_ns: [u64; 3],
    /// Bandwidth-log interval, ns.
    pub log_avg_ns: u64,
    /// Interval of fio's bandwidth samples, ns: `bwavgtime` (500 ms), or
    /// with `write_bw_log` `log_avg_msec` (the smaller of the two if
    /// `bwavgtime` is given), as fio 3.33's `init.c` sets it.
    pub bw_stat_ns: u64,
    /// Interval of fio's IOPS samples, ns (`iopsavgtime`, likewise with
    /// `write_iops_log`).
    pub iops_stat_ns: u64,
    /// The job section's options as fio prints them.
    pub options: Vec<(String, String)>,
    /// `description`.
    pub description: Option<String>,
    /// `continue_on_error` is set.
    pub continue_on_error: bool,
    /// Completion-latency percentiles are reported.
    pub clat_percentiles: bool,
    /// Total-latency percentiles are reported.
    pub lat_percentiles: bool,
    /// Keep the bandwidth series in memory (it is to be written, or the
    /// caller asked for it); otherwise only its statistics are kept.
    pub keep_bw_series: bool,
    /// The job's random seed.
    pub seed: u64,
}

/// Latency, IOPS and histogram logs of one instance (prefixes resolved).
#[derive(Debug, Clone, Default)]
pub struct LogPlan {
    /// `write_lat_log` prefix.
    pub lat: Option<String>,
    /// `write_iops_log` prefix.
    pub iops: Option<String>,
    /// `write_hist_log` prefix.
    pub hist: Option<String>,
    /// `log_hist_msec`.
    pub hist_msec: u64,
    /// `log_hist_coarseness`.
    pub hist_coarseness: u32,
    /// `log_offset`.
    pub offset_col: bool,
    /// `per_job_logs`.
    pub per_job: bool,
}

/// Steady-state detection of one instance.
#[derive(Debug, Clone, Copy)]
pub struct SsPlan {
    /// Criterion and limit.
    pub crit: SteadyState,
    /// Window, seconds.
    pub dur_s: u64,
    /// `ss_ramp`, ns.
    pub ramp_ns: u64,
}

/// Every instance of one invocation, and its stonewall groups.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Instances in start order.
    pub jobs: Vec<JobPlan>,
    /// Per group, the instances it holds (consecutive).
    pub groups: Vec<Range<usize>>,
}

impl Plan {
    /// Relative amount of work of each instance, for progress: the I/Os it
    /// is expected to issue where that is known (`size`, `io_size`,
    /// `number_ios`), since wall time goes with I/Os, not bytes; time-based
    /// jobs count as the average of the others.
    pub fn work_weights(&self) -> Vec<f64> {
        let known: Vec<Option<f64>> = self
            .jobs
            .iter()
            .map(|p| {
                let max_bs = p.bs.iter().copied().max().unwrap_or(4096).max(1) as f64;
                let by_ios = (p.ios_limit != u64::MAX).then_some(p.ios_limit as f64);
                let by_size =
                    (!p.time_based && p.io_limit != u64::MAX).then_some(p.io_limit as f64 / max_bs);
                match (by_ios, by_size) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            })
            .collect();
        let k: Vec<f64> = known.iter().flatten().copied().collect();
        let avg = if k.is_empty() {
            1.0
        } else {
            k.iter().sum::<f64>() / k.len() as f64
        };
        known
            .into_iter()
            .map(|w| w.unwrap_or(avg).max(1.0))
            .collect()
    }

    /// Keep every instance's bandwidth series in memory, logged or not.
    pub fn keep_all_bw_series(&mut self) {
        for j in &mut self.jobs {
            j.keep_bw_series = true;
        }
    }
}

/// Turn job specs into instances with regions resolved against the drive.
pub fn resolve(jobs: &[JobSpec], capacity: u64, seed: u64) -> Result<Plan, SimError> {
    check_instances(jobs)?;
    let mut out: Vec<JobPlan> = Vec::new();
    let mut group = 0usize;
    for (ji, spec) in jobs.iter().enumerate() {
        if spec.stonewall && !out.is_empty() {
            group += 1;
        }
        for clone in 0..spec.numjobs {
            out.push(resolve_one(spec, ji, clone, group, capacity, seed)?);
        }
    }
    let mut groups: Vec<Range<usize>> = Vec::new();
    for (i, p) in out.iter().enumerate() {
        if p.group == groups.len() {
            groups.push(i..i);
        }
        groups[p.group].end = i + 1;
    }
    for g in &groups {
        let members = &out[g.clone()];
        if members.len() > 1
            && members.iter().any(|p| p.group_reporting)
            && let Some(p) = members.iter().find(|p| p.ss.is_some())
        {
            return Err(SimError::Job {
                job: p.name.clone(),
                origin: p.origin.clone(),
                msg: "steady state over a group_reporting group of several jobs is not simulated; judge one job (without group_reporting) or drop ss_dur".into(),
            });
        }
    }
    Ok(Plan { jobs: out, groups })
}

/// fio's default `bwavgtime` and `iopsavgtime`, ms.
const FIO_AVG_TIME_MS: u64 = 500;

/// The interval of fio's bandwidth or IOPS samples, ms (fio 3.33's
/// `init.c`): with the matching log, the log's `log_avg_msec` (or the
/// smaller of it and an explicit `*avgtime`); without, `*avgtime`.
fn stat_interval_ms(logged: bool, log_avg_msec: u64, avgtime: Option<u64>) -> u64 {
    let ms = match (logged, avgtime) {
        (true, Some(t)) => log_avg_msec.min(t),
        (true, None) => log_avg_msec,
        (false, Some(t)) => t,
        (false, None) => FIO_AVG_TIME_MS,
    };
    ms.max(1)
}

fn resolve_one(
    spec: &JobSpec,
    ji: usize,
    clone: u32,
    group: usize,
    capacity: u64,
    seed: u64,
) -> Result<JobPlan, SimError> {
    // A log option without a value names the file after the job, as in fio.
    let prefix = |p: &Option<String>| {
        p.as_ref().map(|s| {
            if s.is_empty() {
                spec.name.clone()
            } else {
                s.clone()
            }
        })
    };
    let bad = |msg: String| SimError::Job {
        job: spec.name.clone(),
        origin: spec.origin.clone(),
        msg,
    };
    let dirs = spec.dirs();
    let min_bs = dirs
        .iter()
        .map(|&d| spec.bs[d as usize])
        .min()
        .unwrap_or(4096);
    let max_bs = dirs
        .iter()
        .map(|&d| spec.bs[d as usize])
        .max()
        .unwrap_or(4096);
    let align = |v: u64, pct: bool| if pct { v / min_bs * min_bs } else { v };
    let base_off = align(
        spec.offset.resolve(capacity),
        matches!(spec.offset, SizeSpec::Percent(_)),
    );
    let inc = align(
        spec.offset_increment.resolve(capacity),
        matches!(spec.offset_increment, SizeSpec::Percent(_)),
    );
    let offset = base_off.saturating_add(inc.saturating_mul(clone as u64));
    if !offset.is_multiple_of(512) {
        return Err(bad(format!("offset {offset} is not a multiple of 512")));
    }
    if offset >= capacity {
        return Err(bad(format!(
            "offset {offset} is at or beyond the end of the drive ({capacity} bytes)"
        )));
    }
    let want = match spec.size {
        Some(s) => align(s.resolve(capacity), matches!(s, SizeSpec::Percent(_))),
        None => capacity - offset,
    };
    let region_len = want.min(capacity - offset) / 512 * 512;
    if region_len < max_bs {
        return Err(bad(format!(
            "the region ({region_len} bytes at offset {offset}) is smaller than the block size ({max_bs})"
        )));
    }
    let slots = (region_len - max_bs) / min_bs + 1;
    let io_limit = match spec.io_size {
        Some(s) => s.resolve(region_len),
        None => region_len.saturating_mul(spec.loops),
    };
    let job_seed = match spec.randseed {
        Some(s) => derive_seed(&[s, clone as u64]),
        None => derive_seed(&[seed, ji as u64, clone as u64, spec.randrepeat as u64]),
    };
    let mut bs = spec.bs;
    for d in Dir::ALL {
        if !dirs.contains(&d) {
            bs[d as usize] = 0;
        }
    }
    Ok(JobPlan {
        name: spec.name.clone(),
        origin: spec.origin.clone(),
        group,
        rw: spec.rw,
        rw_text: spec.rw_text.clone(),
        dirs,
        random: spec.random,
        norandommap: spec.norandommap,
        read_pct: spec.rwmixread as u64,
        region_start: offset,
        region_len,
        bs,
        slots,
        slot_size: min_bs,
        io_limit,
        ios_limit: spec.number_ios.unwrap_or(u64::MAX),
        time_based: spec.time_based,
        runtime_ns: spec.runtime_ns,
        ramp_ns: spec.ramp_ns,
        startdelay_ns: spec.startdelay_ns,
        thinktime_ns: spec.thinktime_ns,
        thinktime_blocks: spec.thinktime_blocks.max(1),
        rate_iops: spec.rate_iops,
        rate_bytes: spec.rate_bytes,
        depth: spec.iodepth.max(1),
        exitall: spec.exitall,
        end_fsync: spec.end_fsync,
        payload: spec.payload,
        percentiles: spec.percentiles.clone(),
        group_reporting: spec.group_reporting,
        write_bw_log: prefix(&spec.write_bw_log),
        logs: LogPlan {
            lat: prefix(&spec.write_lat_log),
            iops: prefix(&spec.write_iops_log),
            hist: prefix(&spec.write_hist_log),
            hist_msec: spec.log_hist_msec,
            hist_coarseness: spec.log_hist_coarseness,
            offset_col: spec.log_offset,
            per_job: spec.per_job_logs,
        },
        ss: (spec.ss_dur_s > 0).then_some(SsPlan {
            crit: spec.ss,
            dur_s: spec.ss_dur_s,
            ramp_ns: spec.ss_ramp_ns,
        }),
        max_latency_ns: spec.max_latency_ns.map(|l| l.unwrap_or(u64::MAX)),
        log_avg_ns: spec.log_avg_msec.max(1) * 1_000_000,
        bw_stat_ns: stat_interval_ms(
            spec.write_bw_log.is_some(),
            spec.log_avg_msec,
            spec.bwavgtime_ms,
        ) * 1_000_000,
        iops_stat_ns: stat_interval_ms(
            spec.write_iops_log.is_some(),
            spec.log_avg_msec,
            spec.iopsavgtime_ms,
        ) * 1_000_000,
        options: spec.options.clone(),
        description: spec.description.clone(),
        continue_on_error: spec.continue_on_error,
        clat_percentiles: spec.clat_percentiles && !spec.disable_clat,
        lat_percentiles: spec.lat_percentiles && !spec.disable_lat,
        keep_bw_series: spec.write_bw_log.is_some(),
        seed: job_seed,
    })
}
