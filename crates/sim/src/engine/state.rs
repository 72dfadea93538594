//! The mutable state of a run: one [`JobState`] per instance of the plan.

use super::super::logs::{BwAcc, HistAcc, LatAcc, SsAcc};
use super::super::results::{DirReport, JobError};
use super::plan::JobPlan;
use vssd_common::hist::Histogram;
use vssd_common::rng::{Perm, Rng};

/// fio's `io_u_mark_depth` level of an I/O issued with `depth` I/Os in
/// flight (itself included): 1, 2–3, 4–7, 8–15, 16–31, 32–63, ≥ 64.
pub(super) fn depth_level(depth: u32) -> usize {
    (depth.max(1).ilog2() as usize).min(6)
}

/// Where an instance is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Its group has not started, or its `startdelay` has not passed.
    Waiting,
    /// Issuing I/O.
    Running,
    /// Ended.
    Done,
}

/// What changes while an instance runs.
#[derive(Debug)]
pub(super) struct JobState {
    pub rng: Rng,
    pub perm: Option<Perm>,
    pub seq_pos: [u64; 3],
    pub phase: Phase,
    pub start_ns: u64,
    pub stats_start_ns: u64,
    pub deadline_ns: u64,
    pub issued_bytes: u64,
    pub issued_ios: u64,
    /// Replayed flushes completed after the ramp.
    pub sync_ios: u64,
    pub think_count: u64,
    /// Time of the last issue and how many I/Os were issued at that very
    /// time: a time-based job on a drive that takes no time would never end.
    pub last_issue_ns: u64,
    pub same_time_issues: u32,
    pub thinking: bool,
    pub resume_pending: bool,
    /// I/Os and bytes issued since the job started (for `rate`, `rate_iops`).
    pub rate_ios: u64,
    /// Bytes issued since the job started.
    pub rate_bytes: u64,
    pub fsynced: bool,
    pub stop: bool,
    pub outstanding: u32,
    pub last_done_ns: u64,
    pub stats: [DirReport; 3],
    /// I/Os issued after the ramp with fewer than `iodepth` in flight, by
    /// queue-depth level (fio's `io_u_map`; see [`JobState::depth_dist`]).
    pub low_depth: [u64; 7],
    pub bw: BwAcc,
    /// Latency/IOPS/histogram logs and steady-state detection, when asked for.
    pub extra: Option<Box<Extra>>,
    /// Set when the job ends with an error (`max_latency`).
    pub error: Option<JobError>,
    /// Replay: the next entry.
    pub replay_pos: usize,
    /// Replay: when the last I/O was issued (delays count from it).
    pub replay_last_ns: u64,
    /// `write_iolog`: the I/Os issued (time since the job started).
    pub iolog: Option<Vec<vssd_trace::Io>>,
    /// Replayed I/Os' (issue, completion) times, if asked for.
    pub completions: Vec<(u64, u64)>,
}

/// The optional per-completion work of a job.
#[derive(Debug)]
pub(super) struct Extra {
    pub lat: Option<LatAcc>,
    pub hist: Option<HistAcc>,
    pub ss: Option<SsAcc>,
}

impl Extra {
    fn new(p: &JobPlan) -> Option<Box<Extra>> {
        let l = &p.logs;
        let x = Extra {
            lat: (l.lat.is_some() || l.iops.is_some()).then(|| {
                LatAcc::new(
                    p.log_avg_ns,
                    l.lat.is_some(),
                    l.iops.is_some(),
                    l.offset_col,
                )
            }),
            hist: l
                .hist
                .as_ref()
                .map(|_| HistAcc::new(l.hist_msec, l.hist_coarseness)),
            ss: p.ss.map(|s| SsAcc::new(s.crit, s.dur_s, s.ramp_ns)),
        };
        (x.lat.is_some() || x.hist.is_some() || x.ss.is_some()).then(|| Box::new(x))
    }

    /// A counted completion at `rel` ns after the statistics started;
    /// returns true when the job has reached steady state.
    #[inline]
    pub fn done(&mut self, rel: u64, d: usize, len: u64, lat: u64, clat: &Histogram) -> bool {
        if let Some(l) = self.lat.as_mut() {
            l.add(rel, d, lat);
        }
        if let Some(h) = self.hist.as_mut() {
            h.add(rel, d, len, clat);
        }
        self.ss.as_mut().is_some_and(|s| s.add(rel, len))
    }

    pub fn finish(&mut self, rel: u64) {
        if let Some(l) = self.lat.as_mut() {
            l.finish(rel);
        }
    }
}

impl JobState {
    /// The state of an instance before it starts.
    pub fn new(p: &JobPlan) -> JobState {
        let mut rng = Rng::new(p.seed);
        let perm = (p.random && !p.norandommap).then(|| Perm::new(p.slots, rng.next_u64()));
        JobState {
            rng,
            perm,
            seq_pos: [0; 3],
            phase: Phase::Waiting,
            start_ns: 0,
            stats_start_ns: 0,
            deadline_ns: u64::MAX,
            issued_bytes: 0,
            issued_ios: 0,
            sync_ios: 0,
            think_count: 0,
            last_issue_ns: u64::MAX,
            same_time_issues: 0,
            thinking: false,
            resume_pending: false,
            rate_ios: 0,
            rate_bytes: 0,
            fsynced: false,
            stop: false,
            outstanding: 0,
            last_done_ns: 0,
            stats: Default::default(),
            low_depth: [0; 7],
            bw: BwAcc::new(
                p.bw_stat_ns,
                p.iops_stat_ns,
                p.keep_bw_series.then_some(p.log_avg_ns),
                p.runtime_ns,
                p.dirs,
                p.bs,
            ),
            extra: Extra::new(p),
            error: None,
            replay_pos: 0,
            replay_last_ns: 0,
            iolog: p.write_iolog.as_ref().map(|_| Vec::new()),
            completions: Vec::new(),
        }
    }

    #[cfg(test)]
    /// Heap memory held, bytes (latency histograms and logs).
    pub fn heap_bytes(&self) -> usize {
        self.stats
            .iter()
            .map(|s| s.clat.heap_bytes())
            .sum::<usize>()
            + self.bw.heap_bytes()
    }

    /// I/Os issued after the ramp by queue-depth level, fio's `io_u_map`:
    /// those issued below the job's `iodepth` were counted as they went,
    /// the rest (most) were at `iodepth`.
    pub fn depth_dist(&self, p: &JobPlan) -> [u64; 7] {
        let mut d = self.low_depth;
        let low: u64 = d.iter().sum();
        d[depth_level(p.depth)] += self.issued_ios - low;
        d
    }

    /// Whether the instance may issue another I/O at `t`.
    #[inline]
    pub fn can_issue(&self, p: &JobPlan, t: u64) -> bool {
        !self.stop
            && t < self.deadline_ns
            && self.issued_ios < p.ios_limit
            && match &p.replay {
                Some(r) => self.replay_pos < r.entries.len(),
                None => p.time_based || self.issued_bytes < p.io_limit,
            }
    }

    /// Fraction done at `t`, 0..=1, for the progress bar.
    pub fn progress(&self, p: &JobPlan, t: u64) -> f64 {
        match self.phase {
            Phase::Waiting => 0.0,
            Phase::Done => 1.0,
            Phase::Running => {
                let mut f: f64 = 0.0;
                if self.deadline_ns != u64::MAX {
                    f = f.max(
                        t.saturating_sub(self.start_ns) as f64
                            / (self.deadline_ns - self.start_ns).max(1) as f64,
                    );
                }
                if !p.time_based && p.io_limit != u64::MAX {
                    f = f.max(self.issued_bytes as f64 / p.io_limit.max(1) as f64);
                }
                if p.ios_limit != u64::MAX {
                    f = f.max(self.issued_ios as f64 / p.ios_limit as f64);
                }
                f.min(1.0)
            }
        }
    }
}
