//! fio job files: INI text → [`JobSpec`]s.
//!
//! - [`ini`] reads fio's grammar: `[global]` and `[jobname]` sections,
//!   `key=value` or bare `key` lines, comments starting with `#` or `;`;
//! - [`options`] is the option table: every option is classified (see
//!   [`apply`]): honoured, accepted without effect, unknown (a warning), or
//!   known to fio but impossible to honour here (an error that names the
//!   file, line and key);
//! - this module holds the job description ([`JobSpec`]) and assembles it:
//!   a `[global]` section applies to the jobs that follow it in the same file.

pub mod ini;
pub mod options;
#[cfg(test)]
mod tests;

use thiserror::Error;

use vssd_model::Payload;

pub use options::{apply, parse_time};

/// A job file could not be used.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum JobFileError {
    /// An option has a bad value or cannot be honoured by the simulator.
    #[error("{origin}:{line}: option `{key}`: {msg}")]
    Option {
        /// File name (or other origin label).
        origin: String,
        /// 1-based line number.
        line: usize,
        /// The option's key as written.
        key: String,
        /// What is wrong.
        msg: String,
    },
    /// A line is not `key`, `key=value`, a section header or a comment.
    #[error("{origin}:{line}: {msg}")]
    Syntax {
        /// File name.
        origin: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        msg: String,
    },
    /// The job files define more job instances (`numjobs` clones included)
    /// than one invocation may run.
    #[error(
        "{origin}: job [{job}] brings the job instances (numjobs clones included) to {total}; at most {max} can run in one invocation (fio's own limit)"
    )]
    TooManyJobs {
        /// `file:line` of the job's section.
        origin: String,
        /// The job's name.
        job: String,
        /// Instances up to and including this job.
        total: u64,
        /// The limit, [`MAX_JOB_INSTANCES`].
        max: u64,
    },
    /// The file could not be read.
    #[error("cannot read job file {origin}: {msg}")]
    Io {
        /// File name.
        origin: String,
        /// The OS error.
        msg: String,
    },
}

/// I/O direction, in fio's numbering (bandwidth logs use these numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Reads (0).
    Read = 0,
    /// Writes (1).
    Write = 1,
    /// TRIMs (2).
    Trim = 2,
}

impl Dir {
    /// All directions, in fio's order.
    pub const ALL: [Dir; 3] = [Dir::Read, Dir::Write, Dir::Trim];

    /// fio's JSON key: `read`, `write`, `trim`.
    pub fn name(self) -> &'static str {
        match self {
            Dir::Read => "read",
            Dir::Write => "write",
            Dir::Trim => "trim",
        }
    }
}

/// What a job does (fio's `rw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwKind {
    /// `read` / `randread`.
    Read,
    /// `write` / `randwrite`.
    Write,
    /// `trim` / `randtrim`.
    Trim,
    /// `rw`, `readwrite` / `randrw`: reads and writes mixed by `rwmixread`.
    ReadWrite,
}

/// What fio's steady-state detection measures (`steadystate=KIND:limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SsKind {
    /// Every IOPS sample within the limit of the mean.
    Iops,
    /// The least-squares slope of the IOPS samples below the limit.
    IopsSlope,
    /// Every bandwidth sample within the limit of the mean.
    Bw,
    /// The slope of the bandwidth samples below the limit.
    BwSlope,
}

impl SsKind {
    /// fio's name.
    pub fn name(self) -> &'static str {
        match self {
            SsKind::Iops => "iops",
            SsKind::IopsSlope => "iops_slope",
            SsKind::Bw => "bw",
            SsKind::BwSlope => "bw_slope",
        }
    }

    /// Whether it judges IOPS (else bandwidth).
    pub fn iops(self) -> bool {
        matches!(self, SsKind::Iops | SsKind::IopsSlope)
    }

    /// Whether it judges the slope (else the deviation from the mean).
    pub fn slope(self) -> bool {
        matches!(self, SsKind::IopsSlope | SsKind::BwSlope)
    }
}

/// A steady-state criterion: `kind:limit`, the limit absolute (IOPS, or
/// bytes/s) or a percentage of the window's mean.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SteadyState {
    /// What is measured.
    pub kind: SsKind,
    /// The limit.
    pub limit: f64,
    /// Whether the limit is a percentage of the mean.
    pub pct: bool,
}

/// A size given in bytes or as a percentage of the device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeSpec {
    /// Absolute bytes.
    Bytes(u64),
    /// Percent of the exported capacity (0 < p <= 100).
    Percent(f64),
}

impl SizeSpec {
    /// Resolve against the device capacity.
    pub fn resolve(self, capacity: u64) -> u64 {
        match self {
            SizeSpec::Bytes(b) => b,
            SizeSpec::Percent(p) => ((capacity as f64) * p / 100.0) as u64,
        }
    }
}

/// One job section with every option applied (globals first).
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// Section name (or `name=`).
    pub name: String,
    /// Where the section starts, for messages: `file:line`.
    pub origin: String,
    /// Direction(s).
    pub rw: RwKind,
    /// Random offsets (`randread`, `randwrite`, `randrw`, `randtrim`).
    pub random: bool,
    /// The original `rw` value, for reports.
    pub rw_text: String,
    /// Block size per direction (read, write, trim), bytes.
    pub bs: [u64; 3],
    /// `size`: the region's length (default: from `offset` to the end).
    pub size: Option<SizeSpec>,
    /// `offset`: the region's start.
    pub offset: SizeSpec,
    /// `offset_increment`: added to `offset` for each `numjobs` clone.
    pub offset_increment: SizeSpec,
    /// `io_size` / `io_limit`: bytes to transfer (default `size` × `loops`);
    /// a percentage is of the region (`size`) and may exceed 100.
    pub io_size: Option<SizeSpec>,
    /// `loops`: passes over the region.
    pub loops: u64,
    /// `number_ios`: stop after this many I/Os.
    pub number_ios: Option<u64>,
    /// `runtime`, ns.
    pub runtime_ns: Option<u64>,
    /// `time_based`.
    pub time_based: bool,
    /// `ramp_time`, ns.
    pub ramp_ns: u64,
    /// `startdelay`, ns.
    pub startdelay_ns: u64,
    /// `thinktime`, ns.
    pub thinktime_ns: u64,
    /// `thinktime_blocks`.
    pub thinktime_blocks: u64,
    /// `rate_iops` (all directions together), 0 = unlimited.
    pub rate_iops: u64,
    /// `rate` in bytes/s (all directions together), 0 = unlimited.
    pub rate_bytes: u64,
    /// `iodepth`.
    pub iodepth: u32,
    /// `numjobs`.
    pub numjobs: u32,
    /// `rwmixread`, percent.
    pub rwmixread: u32,
    /// `stonewall` / `wait_for_previous`.
    pub stonewall: bool,
    /// `exitall`: when this job ends, the others of its group stop issuing.
    pub exitall: bool,
    /// `randseed`.
    pub randseed: Option<u64>,
    /// `randrepeat`.
    pub randrepeat: bool,
    /// `norandommap`.
    pub norandommap: bool,
    /// Write payload hint (`buffer_compress_percentage`, `zero_buffers`).
    pub payload: Payload,
    /// `log_avg_msec` (default 1000 here; fio's 0 means per-I/O and is not supported).
    pub log_avg_msec: u64,
    /// `write_bw_log[=PREFIX]` (empty: the job's name, as in fio).
    pub write_bw_log: Option<String>,
    /// `write_lat_log[=PREFIX]`: `_lat`, `_clat` and `_slat` logs.
    pub write_lat_log: Option<String>,
    /// `write_iops_log[=PREFIX]`.
    pub write_iops_log: Option<String>,
    /// `write_hist_log[=PREFIX]`: `_clat_hist` log (entries only with `log_hist_msec`).
    pub write_hist_log: Option<String>,
    /// `log_hist_msec`: histogram-log interval, ms (0: no entries, as in fio).
    pub log_hist_msec: u64,
    /// `log_hist_coarseness`, 0..=6.
    pub log_hist_coarseness: u32,
    /// `log_offset`: an offset column in every log.
    pub log_offset: bool,
    /// `per_job_logs` (default true): `.N` in log file names.
    pub per_job_logs: bool,
    /// `steadystate` / `ss` criterion (fio's default `iops_slope:0.01%`).
    pub ss: SteadyState,
    /// `ss_dur`, whole seconds; 0 = no steady-state detection.
    pub ss_dur_s: u64,
    /// `ss_ramp`, ns.
    pub ss_ramp_ns: u64,
    /// `max_latency` per direction, ns.
    pub max_latency_ns: [Option<u64>; 3],
    /// `group_reporting`.
    pub group_reporting: bool,
    /// `percentile_list`.
    pub percentiles: Vec<f64>,
    /// `end_fsync` / `fsync_on_close`: a FLUSH when the job's I/O is done.
    pub end_fsync: bool,
    /// `kb_base`: 1024 (fio's default) or 1000; see [`vssd_profile::size::parse_size_fio`].
    pub kb_base: u32,
    /// `bwavgtime`: interval of fio's bandwidth samples (`bw_min`, `bw_mean`,
    /// ...), ms; default 500, or `log_avg_msec` with `write_bw_log`.
    pub bwavgtime_ms: Option<u64>,
    /// `iopsavgtime`: interval of fio's IOPS samples, ms; default 500, or
    /// `log_avg_msec` with `write_iops_log`.
    pub iopsavgtime_ms: Option<u64>,
    /// `clat_percentiles` (default on).
    pub clat_percentiles: bool,
    /// `lat_percentiles` (default off).
    pub lat_percentiles: bool,
    /// `disable_clat` (or `gtod_reduce`): fio then reports no completion-latency percentiles.
    pub disable_clat: bool,
    /// `disable_lat` (or `gtod_reduce`): fio then reports no total-latency percentiles.
    pub disable_lat: bool,
    /// `description` (fio's `desc` in JSON).
    pub description: Option<String>,
    /// `continue_on_error` other than `none` (fio then reports `total_err`, `first_error`).
    pub continue_on_error: bool,
    /// `read_iolog`: replay this trace instead of generating I/O (fio
    /// iolog v2/v3, blktrace binary, or a vssd trace).
    pub read_iolog: Option<String>,
    /// `write_iolog`: record the I/O the job issued as a fio iolog v3.
    pub write_iolog: Option<String>,
    /// The `replay_*` options.
    pub replay: ReplayOptions,
    /// The options of the job's own section as fio prints them in its JSON
    /// (`job options`): see [`printed_options`].
    pub options: Vec<(String, String)>,
}

/// fio's replay options (they apply with `read_iolog`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayOptions {
    /// `replay_no_stall`: issue as fast as `iodepth` allows, ignoring the
    /// recorded times.
    pub no_stall: bool,
    /// `replay_time_scale`: percent; 200 replays twice as fast.
    pub time_scale_pct: u64,
    /// `replay_redirect`: every file of the log goes to this one.
    pub redirect: Option<String>,
    /// `replay_align`: offsets rounded down to a multiple of this (a power of two).
    pub align: u64,
    /// `replay_scale`: offsets divided by this.
    pub scale: u64,
    /// `replay_skip`: directions left out (bit per [`Dir`], bit 3: sync).
    pub skip: u8,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            no_stall: false,
            time_scale_pct: 100,
            redirect: None,
            align: 0,
            scale: 1,
            skip: 0,
        }
    }
}

/// Most job instances (jobs × `numjobs`) one invocation may run: fio's own
/// limit. Each instance costs up to a few tens of KiB (latency histograms),
/// so this also bounds the simulator's memory.
pub const MAX_JOB_INSTANCES: u64 = 4096;

/// fio's default completion-latency percentiles.
pub use vssd_common::fio::DEFAULT_PERCENTILES;

impl JobSpec {
    /// A job with fio's defaults (`rw=read`, `bs=4k`, `iodepth=1`, ...).
    pub fn new(name: &str, origin: &str) -> JobSpec {
        JobSpec {
            name: name.to_string(),
            origin: origin.to_string(),
            rw: RwKind::Read,
            random: false,
            rw_text: "read".into(),
            bs: [4096; 3],
            size: None,
            offset: SizeSpec::Bytes(0),
            offset_increment: SizeSpec::Bytes(0),
            io_size: None,
            loops: 1,
            number_ios: None,
            runtime_ns: None,
            time_based: false,
            ramp_ns: 0,
            startdelay_ns: 0,
            thinktime_ns: 0,
            thinktime_blocks: 1,
            rate_iops: 0,
            rate_bytes: 0,
            iodepth: 1,
            numjobs: 1,
            rwmixread: 50,
            stonewall: false,
            exitall: false,
            randseed: None,
            randrepeat: true,
            norandommap: false,
            payload: Payload::Unknown,
            log_avg_msec: 1000,
            write_bw_log: None,
            write_lat_log: None,
            write_iops_log: None,
            write_hist_log: None,
            log_hist_msec: 0,
            log_hist_coarseness: 0,
            log_offset: false,
            per_job_logs: true,
            ss: SteadyState {
                kind: SsKind::IopsSlope,
                limit: 0.01,
                pct: true,
            },
            ss_dur_s: 0,
            ss_ramp_ns: 0,
            max_latency_ns: [None; 3],
            group_reporting: false,
            percentiles: DEFAULT_PERCENTILES.to_vec(),
            end_fsync: false,
            kb_base: 1024,
            bwavgtime_ms: None,
            iopsavgtime_ms: None,
            clat_percentiles: true,
            lat_percentiles: false,
            disable_clat: false,
            disable_lat: false,
            description: None,
            continue_on_error: false,
            read_iolog: None,
            write_iolog: None,
            replay: ReplayOptions::default(),
            options: Vec::new(),
        }
    }

    /// Directions this job issues.
    pub fn dirs(&self) -> &'static [Dir] {
        match self.rw {
            RwKind::Read => &[Dir::Read],
            RwKind::Write => &[Dir::Write],
            RwKind::Trim => &[Dir::Trim],
            RwKind::ReadWrite => &[Dir::Read, Dir::Write],
        }
    }
}

/// The jobs of one or more job files, plus warnings for the user.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFile {
    /// Jobs in file order.
    pub jobs: Vec<JobSpec>,
    /// Unknown options and other things worth telling the user.
    pub warnings: Vec<String>,
    /// The `[global]` options of the last file, as fio's JSON prints them
    /// (`global options`; fio starts afresh with each job file).
    pub global_options: Vec<(String, String)>,
}

impl JobFile {
    /// Read and parse several files as fio does: each file's `[global]` applies
    /// to its own jobs, and the first job of every file after the first waits
    /// for all earlier jobs (an implied `stonewall`).
    pub fn load(paths: &[impl AsRef<std::path::Path>]) -> Result<JobFile, JobFileError> {
        let mut all = JobFile::default();
        for p in paths {
            let p = p.as_ref();
            let origin = p.display().to_string();
            let text = std::fs::read_to_string(p).map_err(|e| JobFileError::Io {
                origin: origin.clone(),
                msg: e.to_string(),
            })?;
            all.append(parse(&text, &origin)?);
            check_instances(&all.jobs)?;
        }
        Ok(all)
    }

    /// Append another file's jobs (stonewalling its first job).
    pub fn append(&mut self, mut other: JobFile) {
        if !self.jobs.is_empty()
            && let Some(first) = other.jobs.first_mut()
        {
            first.stonewall = true;
        }
        self.jobs.append(&mut other.jobs);
        self.warnings.append(&mut other.warnings);
        self.global_options = other.global_options;
    }
}

/// Parse one job file's text; `origin` names it in messages.
pub fn parse(text: &str, origin: &str) -> Result<JobFile, JobFileError> {
    let mut out = JobFile::default();
    // Options of the [global] sections seen so far.
    let mut global: Vec<ini::Entry> = Vec::new();
    for sec in ini::read(text, origin)? {
        if sec.is_global() {
            out.global_options.extend(printed_options(&sec.entries));
            for e in sec.entries {
                // Check it now, so a bad global is reported even without jobs.
                let mut probe = JobSpec::new("global", origin);
                apply(
                    &mut probe,
                    &e.key,
                    e.value.as_deref(),
                    origin,
                    e.line,
                    &mut Vec::new(),
                )?;
                global.push(e);
            }
            continue;
        }
        let mut spec = JobSpec::new(&sec.name, &format!("{origin}:{}", sec.line));
        for e in global.iter().chain(sec.entries.iter()) {
            apply(
                &mut spec,
                &e.key,
                e.value.as_deref(),
                origin,
                e.line,
                &mut out.warnings,
            )?;
        }
        options::check(&spec, origin, sec.line)?;
        spec.options = printed_options(&sec.entries);
        out.jobs.push(spec);
        check_instances(&out.jobs)?;
    }
    if out.jobs.is_empty() {
        out.warnings.push(format!("{origin}: no jobs defined"));
    }
    // Unknown-option warnings from globals repeat once per job: keep the first.
    let mut seen = std::collections::HashSet::new();
    out.warnings.retain(|w| seen.insert(w.clone()));
    Ok(out)
}

/// One section's options as fio 3.33 prints them in its JSON (`job options`,
/// `global options`): every `key=value` line (bare `key` lines are not
/// printed), under the option's canonical name (`readwrite` → `rw`), with
/// the value as written, repeats included, in fio's parsing order: sorted
/// by fio's option priority (`kb_base` and `unit_base` first, `filename`
/// last, then the I/O engine's own options), file order otherwise.
pub fn printed_options(entries: &[ini::Entry]) -> Vec<(String, String)> {
    let mut v: Vec<(i8, String, String)> = entries
        .iter()
        .filter_map(|e| {
            let raw = e.raw_value.as_ref()?;
            let name = options::fio_name(&e.key);
            Some((options::print_rank(&name), name, raw.clone()))
        })
        .collect();
    // Stable, like glibc's qsort (a merge sort) on fio's small arrays.
    v.sort_by_key(|(rank, _, _)| std::cmp::Reverse(*rank));
    v.into_iter().map(|(_, k, v)| (k, v)).collect()
}

/// Refuse more than [`MAX_JOB_INSTANCES`] instances, naming the job that
/// crosses the limit.
pub fn check_instances(jobs: &[JobSpec]) -> Result<(), JobFileError> {
    let mut total: u64 = 0;
    for j in jobs {
        total += j.numjobs as u64;
        if total > MAX_JOB_INSTANCES {
            return Err(JobFileError::TooManyJobs {
                origin: j.origin.clone(),
                job: j.name.clone(),
                total,
                max: MAX_JOB_INSTANCES,
            });
        }
    }
    Ok(())
}
