//! What a run produced: per-instance and per-run results, in virtual time.

use std::borrow::Cow;

use vssd_model::Counters;

use super::jobfile::Dir;
pub use super::logs::SampleStats;
use vssd_common::hist::Histogram;

/// One bandwidth-log entry: the average over one `log_avg_msec` interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BwSample {
    /// End of the interval, ms since the job's statistics started (after `ramp_time`).
    pub msec: u64,
    /// Average bandwidth over the interval, KiB/s.
    pub kib_s: u64,
    /// Direction.
    pub dir: Dir,
    /// The job's block size for that direction.
    pub bs: u64,
}

/// Per-direction results of one job.
#[derive(Debug, Clone, Default)]
pub struct DirReport {
    /// Bytes completed after `ramp_time`.
    pub io_bytes: u64,
    /// I/Os completed after `ramp_time`.
    pub ios: u64,
    /// Completion latencies (submit to completion), ns.
    pub clat: Histogram,
}

/// Results of one job instance (a `numjobs` clone is an instance of its own).
#[derive(Debug, Clone)]
pub struct JobReport {
    /// Job name (clones share their section's name, as in fio).
    pub name: String,
    /// 1-based instance number over the whole invocation (bandwidth-log file number).
    pub index: usize,
    /// Stonewall group, from 0.
    pub group: usize,
    /// `rw` as written.
    pub rw: String,
    /// Directions this job issues.
    pub dirs: Vec<Dir>,
    /// Block sizes (read, write, trim).
    pub bs: [u64; 3],
    /// `iodepth`.
    pub iodepth: u32,
    /// Instances merged into this report (1 unless `group_reporting`).
    pub jobs: u32,
    /// Results by direction, indexed by `Dir as usize`.
    pub dir: [DirReport; 3],
    /// Virtual time the job started (after `startdelay`), ns.
    pub start_ns: u64,
    /// Virtual time its statistics started (after `ramp_time`), ns.
    pub stats_start_ns: u64,
    /// Virtual time of its last counted completion, ns.
    pub end_ns: u64,
    /// Bandwidth log, one entry per direction per interval with I/O of that
    /// direction; empty unless the series was kept (see `Plan::keep_all_bw_series`).
    pub bw_log: Vec<BwSample>,
    /// Statistics of fio's bandwidth samples by direction, KiB/s: one sample
    /// per whole `bwavgtime` interval (500 ms; `log_avg_msec` with
    /// `write_bw_log`) with I/O of that direction. Always kept.
    pub bw_stats: [SampleStats; 3],
    /// Statistics of fio's IOPS samples by direction: one per whole
    /// `iopsavgtime` interval (500 ms; `log_avg_msec` with `write_iops_log`).
    pub iops_stats: [SampleStats; 3],
    /// I/Os issued (after the ramp) with 1, 2–3, 4–7, 8–15, 16–31, 32–63
    /// and ≥ 64 I/Os in flight, the new one included: fio's `io_u_map`,
    /// reported as `iodepth_level`.
    pub depth_dist: [u64; 7],
    /// fio's `job_runtime`: the instance's runtime in whole ms (fio's
    /// `total_run_time`), added up over merged instances.
    pub job_runtime_ms: u64,
    /// Flushes a replay issued (an iolog's `sync`s, a trace's flushes):
    /// fio's `sync.total_ios`.
    pub sync_ios: u64,
    /// The runtime bandwidth and IOPS are computed over, ns: `end_ns −
    /// stats_start_ns` for one instance, the longest of the merged
    /// instances' with `group_reporting` (as fio takes the longest).
    pub longest_runtime_ns: u64,
    /// The job's own section's options as fio's JSON prints them (`job
    /// options`): canonical names, values as written, in fio's order.
    pub options: Vec<(String, String)>,
    /// `description`, if given (fio's `desc`).
    pub description: Option<String>,
    /// `continue_on_error` is set (fio then reports `total_err` and `first_error`).
    pub continue_on_error: bool,
    /// Completion-latency percentiles are reported (`clat_percentiles`, on by default).
    pub clat_percentiles: bool,
    /// Total-latency percentiles are reported (`lat_percentiles`, off by default).
    pub lat_percentiles: bool,
    /// Percentiles to report.
    pub percentiles: Vec<f64>,
    /// Whether the job asked for `group_reporting`.
    pub group_reporting: bool,
    /// `write_bw_log` prefix from the job file (the job's name if none was given).
    pub write_bw_log: Option<String>,
    /// The other logs, ready to write: latency, IOPS, histogram.
    pub logs: Vec<LogText>,
    /// `write_iolog`: the file and the I/Os issued (times since the job's start).
    pub iolog: Option<(String, Vec<vssd_trace::Io>)>,
    /// A replay asked for them: each replayed I/O's issue and completion
    /// times (virtual ns), in replay order.
    pub completions: Vec<(u64, u64)>,
    /// `log_offset`: logs carry an offset column.
    pub log_offset: bool,
    /// `per_job_logs`: log file names carry the instance number.
    pub per_job_logs: bool,
    /// Steady-state detection, if the job asked for it.
    pub steadystate: Option<SsReport>,
    /// Why the job stopped with an error (fio's `error`), if it did.
    pub error: Option<JobError>,
}

/// A log's text and where it goes: `PREFIX_KIND.N.log` (or `PREFIX_KIND.log`
/// without `per_job_logs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogText {
    /// File name prefix.
    pub prefix: String,
    /// `lat`, `clat`, `slat`, `iops` or `clat_hist`.
    pub kind: &'static str,
    /// Lines in fio 3.33's format.
    pub text: String,
}

/// A job that fio would end with an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobError {
    /// fio's error number (`ETIMEDOUT` = 110 for `max_latency`).
    pub errno: i32,
    /// What happened.
    pub msg: String,
}

/// Steady-state detection results, as fio reports them.
#[derive(Debug, Clone, PartialEq)]
pub struct SsReport {
    /// The criterion as fio prints it: `iops_slope:0.010000%`.
    pub ss: String,
    /// Window, seconds.
    pub duration: u64,
    /// Whether steady state was reached (and the job stopped there).
    pub attained: bool,
    /// The last value of the criterion (percent of the mean with a `%` limit).
    pub criterion: f64,
    /// Whether the criterion is a percentage.
    pub pct: bool,
    /// Whether it judged IOPS (else bandwidth).
    pub iops_based: bool,
    /// Whether it judged the slope (else the deviation).
    pub slope_based: bool,
    /// Largest deviation from the mean in the last full window.
    pub max_deviation: f64,
    /// Least-squares slope of the last full window.
    pub slope: f64,
    /// IOPS samples of the window, oldest first.
    pub iops: Vec<u64>,
    /// Bandwidth samples (bytes/s) of the window, oldest first.
    pub bw: Vec<u64>,
}

impl SsReport {
    /// Mean of the window's IOPS samples (fio: integer).
    pub fn iops_mean(&self) -> u64 {
        self.iops.iter().sum::<u64>() / self.iops.len().max(1) as u64
    }

    /// Mean of the window's bandwidth samples, bytes/s (fio: integer).
    pub fn bw_mean(&self) -> u64 {
        self.bw.iter().sum::<u64>() / self.bw.len().max(1) as u64
    }
}

impl JobReport {
    /// Time over which bandwidth is computed, ns: stats start to last
    /// completion (merged: the longest instance's, see `longest_runtime_ns`).
    pub fn runtime_ns(&self) -> u64 {
        self.longest_runtime_ns
    }

    /// fio's per-direction `runtime` in ms: whole µs rounded up to ms (fio's
    /// `update_runtime`), 0 for a direction without I/O.
    pub fn runtime_ms(&self, d: Dir) -> u64 {
        if self.dirs.contains(&d) && self.dir[d as usize].ios > 0 {
            (self.runtime_ns() / 1000).div_ceil(1000)
        } else {
            0
        }
    }

    /// Heap memory held by this report's histograms and logs, bytes.
    pub fn heap_bytes(&self) -> usize {
        self.dir.iter().map(|d| d.clat.heap_bytes()).sum::<usize>()
            + self.bw_log.capacity() * std::mem::size_of::<BwSample>()
    }

    /// Bandwidth in bytes per second of virtual time.
    pub fn bw_bytes(&self, d: Dir) -> f64 {
        let rt = self.runtime_ns();
        if rt == 0 {
            0.0
        } else {
            self.dir[d as usize].io_bytes as f64 * 1e9 / rt as f64
        }
    }

    /// I/Os per second of virtual time.
    pub fn iops(&self, d: Dir) -> f64 {
        let rt = self.runtime_ns();
        if rt == 0 {
            0.0
        } else {
            self.dir[d as usize].ios as f64 * 1e9 / rt as f64
        }
    }

    /// Bandwidth-log values of one direction, in bytes/s, in time order.
    pub fn bw_series(&self, d: Dir) -> Vec<f64> {
        self.bw_log
            .iter()
            .filter(|s| s.dir == d)
            .map(|s| s.kib_s as f64 * 1024.0)
            .collect()
    }

    /// Merge another instance's results into this one (`group_reporting`).
    pub fn merge(&mut self, o: &JobReport) {
        for (a, b) in self.dir.iter_mut().zip(o.dir.iter()) {
            a.io_bytes += b.io_bytes;
            a.ios += b.ios;
            a.clat.merge(&b.clat);
        }
        for d in &o.dirs {
            if !self.dirs.contains(d) {
                self.dirs.push(*d);
            }
        }
        self.dirs.sort_by_key(|d| *d as usize);
        self.jobs += o.jobs;
        self.start_ns = self.start_ns.min(o.start_ns);
        self.stats_start_ns = self.stats_start_ns.min(o.stats_start_ns);
        self.end_ns = self.end_ns.max(o.end_ns);
        self.bw_log.extend_from_slice(&o.bw_log);
        if self.error.is_none() {
            self.error.clone_from(&o.error);
        }
        for (a, b) in self.bw_stats.iter_mut().zip(o.bw_stats.iter()) {
            a.sum_for_group(b);
        }
        for (a, b) in self.iops_stats.iter_mut().zip(o.iops_stats.iter()) {
            a.sum_for_group(b);
        }
        for (a, b) in self.depth_dist.iter_mut().zip(o.depth_dist) {
            *a += b;
        }
        self.job_runtime_ms += o.job_runtime_ms;
        self.sync_ios += o.sync_ios;
        self.longest_runtime_ns = self.longest_runtime_ns.max(o.longest_runtime_ns);
        // fio prints the last member's options and percentile settings, and
        // the first member's name and description.
        self.options.clone_from(&o.options);
        self.continue_on_error = o.continue_on_error;
        self.clat_percentiles = o.clat_percentiles;
        self.lat_percentiles = o.lat_percentiles;
    }
}

/// Everything one invocation produced.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Profile name.
    pub profile: String,
    /// Exported capacity, bytes.
    pub capacity: u64,
    /// The simulation seed.
    pub seed: u64,
    /// Per instance, in start order.
    pub jobs: Vec<JobReport>,
    /// Model counters at the end of the run (cumulative over the drive's life).
    pub counters: Counters,
    /// Requests submitted to the model in this run.
    pub sim_ops: u64,
    /// Virtual time at the start and end of the run, ns.
    pub start_ns: u64,
    /// Virtual time at the end of the run, ns.
    pub end_ns: u64,
    /// The `[global]` options of the last job file, as fio's JSON prints
    /// them (`global options`); empty unless the caller set them (see
    /// [`Simulation::run_file`](super::Simulation::run_file)).
    pub global_options: Vec<(String, String)>,
    /// Unix time (s) that virtual time 0 stands for: the JSON's `time`,
    /// `timestamp` and `timestamp_ms` are this plus `end_ns` (default 0,
    /// 1970-01-01 00:00:00 UTC, so they are as repeatable as the rest).
    pub epoch_s: u64,
}

impl RunReport {
    /// Jobs as fio reports them: with `group_reporting` anywhere in a
    /// stonewall group, that group's instances merged into one. Instances
    /// not merged are borrowed, not copied.
    pub fn reported_jobs(&self) -> Vec<Cow<'_, JobReport>> {
        let mut out: Vec<Cow<'_, JobReport>> = Vec::new();
        let mut i = 0;
        while i < self.jobs.len() {
            let g = self.jobs[i].group;
            let end = self.jobs[i..]
                .iter()
                .position(|j| j.group != g)
                .map_or(self.jobs.len(), |p| i + p);
            let members = &self.jobs[i..end];
            if members.iter().any(|j| j.group_reporting) {
                let mut m = members[0].clone();
                for o in &members[1..] {
                    m.merge(o);
                }
                out.push(Cow::Owned(m));
            } else {
                out.extend(members.iter().map(Cow::Borrowed));
            }
            i = end;
        }
        out
    }
}
