//! The resolved plan: what the job files asked for, resolved against the
//! drive (regions, block sizes, limits, seeds). Immutable while a run goes
//! on; everything that changes lives in [`super::state`].

use std::ops::Range;
use std::sync::Arc;

use vssd_model::Payload;
use vssd_trace::{Format, Item, Op as TraceOp, Trace};

use super::super::SimError;
use super::super::jobfile::{
    Dir, JobSpec, ReplayOptions, RwKind, SizeSpec, SteadyState, check_instances,
};
use vssd_common::clock::MAX_DRIVE_NS;
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
    /// `read_iolog`: the requests to replay instead of generating them.
    pub replay: Option<Arc<Replay>>,
    /// `write_iolog`: record what was issued, to this file.
    pub write_iolog: Option<String>,
    /// Keep every replayed I/O's (issue, completion) times in the report.
    pub record_completions: bool,
}

/// What a replayed entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayKind {
    /// A read, write or trim (`Dir as u8`), or a WRITE ZEROES counted as a write.
    Io(Dir),
    /// WRITE ZEROES (counted as a write); `true`: deallocation allowed.
    WriteZeroes(bool),
    /// A flush (fio's `sync`): not counted in any direction.
    Flush,
    /// iolog v2's `wait`: nothing is issued before `delay_ns` after the job started.
    Wait,
}

/// One entry of a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayEntry {
    /// Delay after the previous issue (for a `Wait`: time since the job started), ns.
    pub delay_ns: u64,
    /// Kind.
    pub kind: ReplayKind,
    /// First byte on the drive.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
}

/// A trace resolved for replay against this drive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    /// The file it came from.
    pub source: String,
    /// Its format.
    pub format: Format,
    /// Entries in issue order.
    pub entries: Vec<ReplayEntry>,
    /// I/Os (entries other than waits).
    pub ios: u64,
    /// Bytes the I/Os move.
    pub bytes: u64,
}

/// The directions present, as fio orders them.
fn dirs_of(mask: u8) -> &'static [Dir] {
    match mask & 7 {
        0b001 => &[Dir::Read],
        0b010 => &[Dir::Write],
        0b100 => &[Dir::Trim],
        0b011 => &[Dir::Read, Dir::Write],
        0b101 => &[Dir::Read, Dir::Trim],
        0b110 => &[Dir::Write, Dir::Trim],
        0b111 => &[Dir::Read, Dir::Write, Dir::Trim],
        _ => &[],
    }
}

/// Resolve a loaded trace for replay with fio's semantics: the delay of an
/// entry is its time minus the previous entry's, scaled by
/// `replay_time_scale` (none with `replay_no_stall`; and, as fio does for
/// iolog v3, none after an entry stamped 0); an iolog v2 `wait` keeps its
/// time since the start, unscaled (skipped with `replay_no_stall`), as in
/// fio; offsets are divided by
/// `replay_scale`, then rounded down to `replay_align`. Every request must
/// fit the drive.
pub fn resolve_replay(
    source: &str,
    format: Format,
    trace: &Trace,
    opts: &ReplayOptions,
    capacity: u64,
) -> Result<Replay, String> {
    if trace.files.len() > 1 && opts.redirect.is_none() {
        return Err(format!(
            "{source} holds requests to {} files or devices ({}); the simulator has one drive: set replay_redirect to replay them all on it",
            trace.files.len(),
            trace
                .files
                .iter()
                .take(4)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let mut entries = Vec::with_capacity(trace.items.len());
    let mut prev_t: Option<u64> = None;
    // The replay's time, scaled, never passes the drive clock's end.
    let mut span: u128 = 0;
    let too_long = |what: &str| {
        format!(
            "{source}: {what}, replayed with replay_time_scale={}, spans more than the longest time a replay may take ({MAX_DRIVE_NS} ns, about 146 years)",
            opts.time_scale_pct
        )
    };
    let (mut ios, mut bytes) = (0u64, 0u64);
    let scale = |d: u64| -> u128 { u128::from(d) * 100 / u128::from(opts.time_scale_pct) };
    for (i, item) in trace.items.iter().enumerate() {
        let at = |msg: String| format!("{source}: request {}: {msg}", i + 1);
        let io = match item {
            Item::Wait { since_start_ns } => {
                // fio takes a wait's time as it is: `replay_time_scale`
                // scales the delays between timestamps only.
                if !opts.no_stall {
                    span = span.max(u128::from(*since_start_ns));
                    entries.push(ReplayEntry {
                        delay_ns: *since_start_ns,
                        kind: ReplayKind::Wait,
                        offset: 0,
                        len: 0,
                    });
                }
                continue;
            }
            Item::Io(io) => io,
        };
        let delay = match (io.t_ns, prev_t) {
            (Some(t), Some(p)) if !opts.no_stall => {
                let fio_zero = format == Format::IologV3 && p == 0;
                if fio_zero {
                    0
                } else {
                    let d = scale(t.saturating_sub(p));
                    span += d;
                    if span > u128::from(MAX_DRIVE_NS) {
                        return Err(too_long(&format!("request {}'s time", i + 1)));
                    }
                    d as u64
                }
            }
            _ => 0,
        };
        if io.t_ns.is_some() {
            prev_t = io.t_ns;
        }
        let (kind, skip_bit) = match io.op {
            TraceOp::Read => (ReplayKind::Io(Dir::Read), 1u8 << Dir::Read as u8),
            TraceOp::Write => (ReplayKind::Io(Dir::Write), 1 << Dir::Write as u8),
            TraceOp::Discard => (ReplayKind::Io(Dir::Trim), 1 << Dir::Trim as u8),
            TraceOp::WriteZeroes { unmap } => {
                (ReplayKind::WriteZeroes(unmap), 1 << Dir::Write as u8)
            }
            TraceOp::Flush => (ReplayKind::Flush, 1 << 3),
        };
        if opts.skip & skip_bit != 0 {
            continue;
        }
        let (offset, len) = if kind == ReplayKind::Flush {
            (0, 0)
        } else {
            let mut o = io.offset / opts.scale;
            if opts.align > 0 {
                o &= !(opts.align - 1);
            }
            (o, io.len)
        };
        if kind != ReplayKind::Flush {
            if len == 0 {
                return Err(at("a read, write or trim of 0 bytes".into()));
            }
            if !offset.is_multiple_of(512) || !len.is_multiple_of(512) {
                return Err(at(format!(
                    "offset {offset} or length {len} is not a multiple of 512 (replay_align=512 aligns offsets)"
                )));
            }
            if offset.checked_add(len).is_none_or(|e| e > capacity) {
                return Err(at(format!(
                    "{offset}+{len} is beyond the end of the drive ({capacity} bytes): use a larger --capacity, or replay_scale"
                )));
            }
        }
        ios += 1;
        bytes += len;
        entries.push(ReplayEntry {
            delay_ns: delay,
            kind,
            offset,
            len,
        });
    }
    if ios == 0 {
        return Err(format!("{source} has no request to replay"));
    }
    Ok(Replay {
        source: source.to_string(),
        format,
        entries,
        ios,
        bytes,
    })
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
    for (i, p) in out.iter().enumerate() {
        if let Some(w) = &p.write_iolog
            && out[..i].iter().any(|q| q.write_iolog.as_ref() == Some(w))
        {
            return Err(SimError::Job {
                job: p.name.clone(),
                origin: p.origin.clone(),
                msg: format!(
                    "write_iolog={w} is shared with another job instance (numjobs?); give each its own file"
                ),
            });
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
    if let Some(src) = &spec.read_iolog {
        return resolve_replay_job(spec, ji, clone, group, capacity, seed, src);
    }
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
        replay: None,
        write_iolog: spec.write_iolog.clone(),
        record_completions: false,
    })
}

/// A `read_iolog` job: a plan whose I/O comes from the trace (fio ignores
/// `rw`, `bs`, `size` and `offset` then; `iodepth`, `number_ios`,
/// `runtime`, the rate limits and the logs apply).
fn resolve_replay_job(
    spec: &JobSpec,
    ji: usize,
    clone: u32,
    group: usize,
    capacity: u64,
    seed: u64,
    src: &str,
) -> Result<JobPlan, SimError> {
    let bad = |msg: String| SimError::Job {
        job: spec.name.clone(),
        origin: spec.origin.clone(),
        msg,
    };
    // fio: `read_iolog=a:b` gives each numjobs clone its own file.
    let parts: Vec<&str> = src.split(':').collect();
    let src = parts[(clone as usize).min(parts.len() - 1)];
    let (format, trace) =
        vssd_trace::load(std::path::Path::new(src)).map_err(|e| bad(format!("read_iolog: {e}")))?;
    let replay = resolve_replay(src, format, &trace, &spec.replay, capacity)
        .map_err(|e| bad(format!("read_iolog: {e}")))?;
    replay_job_plan(spec, ji, clone, group, capacity, seed, replay)
}

/// The plan of a job that replays `replay` (its I/O, directions and block
/// sizes from the replay; `iodepth`, `number_ios`, `runtime`, the rate
/// limits and the logs from `spec`).
pub fn replay_job_plan(
    spec: &JobSpec,
    ji: usize,
    clone: u32,
    group: usize,
    capacity: u64,
    seed: u64,
    replay: Replay,
) -> Result<JobPlan, SimError> {
    let mut mask = 0u8;
    let mut bs = [0u64; 3];
    for e in &replay.entries {
        let d = match e.kind {
            ReplayKind::Io(d) => d,
            ReplayKind::WriteZeroes(_) => Dir::Write,
            ReplayKind::Flush | ReplayKind::Wait => continue,
        };
        mask |= 1 << d as u8;
        bs[d as usize] = bs[d as usize].max(e.len);
    }
    let mut plain = spec.clone();
    plain.read_iolog = None;
    plain.rw = RwKind::Read;
    plain.bs = [512; 3];
    plain.size = None;
    plain.offset = SizeSpec::Bytes(0);
    plain.offset_increment = SizeSpec::Bytes(0);
    plain.io_size = None;
    plain.time_based = spec.time_based;
    let mut p = resolve_one(&plain, ji, clone, group, capacity, seed)?;
    p.dirs = dirs_of(mask);
    p.bs = bs;
    p.random = false;
    p.region_start = 0;
    p.region_len = capacity;
    p.io_limit = u64::MAX;
    p.ios_limit = spec.number_ios.unwrap_or(u64::MAX).min(replay.ios);
    p.rw = match mask & 3 {
        0b01 => RwKind::Read,
        0b10 => RwKind::Write,
        0b11 => RwKind::ReadWrite,
        _ => RwKind::Trim,
    };
    p.replay = Some(Arc::new(replay));
    Ok(p)
}
