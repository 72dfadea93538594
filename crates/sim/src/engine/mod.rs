//! The discrete-event engine: fio's issue discipline in virtual time.
//!
//! One min-heap holds every pending event (I/O completions, job starts,
//! ends of think time), ordered by virtual time and then by insertion order,
//! so runs are deterministic. Each job keeps `iodepth` I/Os outstanding and
//! issues the next one when one completes, as fio's default
//! (`iodepth_batch=1`) does. All jobs of an invocation share one [`Ssd`](vssd_model::Ssd);
//! a `stonewall` job starts a new group when every earlier job has ended.
//!
//! The per-I/O path allocates nothing: a heap push and pop, a histogram
//! increment and a few arithmetic operations around `Ssd::submit`.

mod plan;
#[cfg(test)]
mod replay_tests;
mod report;
mod simulation;
mod state;
mod target;
#[cfg(test)]
mod tests;

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use vssd_model::{ModelError, Op, Payload, Request};

use super::SimError;
use super::jobfile::{Dir, JobSpec, RwKind};

pub use super::results::{BwSample, DirReport, JobError, JobReport, LogText, RunReport, SsReport};
pub use plan::{JobPlan, Plan, Replay, ReplayEntry, ReplayKind, resolve, resolve_replay};
pub use simulation::Simulation;
use state::{JobState, Phase};
pub use target::{FixedLatency, Target};

/// I/Os a time-based job may issue at one instant before the run is declared stuck.
const STUCK_CLOCK_ISSUES: u32 = 1 << 20;

/// Where a run is, for a progress display.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// Fraction of the expected work done, 0..=1 (jobs weighted by the bytes
    /// they are expected to move).
    pub fraction: f64,
    /// Virtual time, ns.
    pub now_ns: u64,
    /// Bytes completed so far by all jobs (after their ramp).
    pub bytes: u64,
    /// A job running now (empty between groups and at the end).
    pub job: &'a str,
}

/// fio's error for a completion over `max_latency`: ETIMEDOUT.
fn max_latency_error(lat_ns: u64, max_ns: u64) -> JobError {
    JobError {
        errno: 110,
        msg: format!(
            "latency of {} usec exceeds specified max ({} usec)",
            lat_ns / 1000,
            max_ns / 1000
        ),
    }
}

/// What happens at an event's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    /// An I/O completes.
    Done {
        /// Direction (`Dir as u8`).
        dir: u8,
        /// Bytes.
        len: u64,
        /// When it was submitted, ns.
        submit: u64,
    },
    /// The instance starts (its group started and its `startdelay` passed).
    Start,
    /// Its think time is over.
    Resume,
    /// Its final FLUSH (`end_fsync`) completed.
    Flushed,
}

/// A heap entry, ordered by (time, sequence number); `seq` is unique.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ev {
    t: u64,
    seq: u64,
    job: u32,
    what: Event,
}

impl Ord for Ev {
    #[inline]
    fn cmp(&self, o: &Self) -> Ordering {
        (self.t, self.seq).cmp(&(o.t, o.seq))
    }
}

impl PartialOrd for Ev {
    #[inline]
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

struct Engine<'a, T: Target> {
    dev: &'a mut T,
    plan: &'a Plan,
    jobs: Vec<JobState>,
    /// Per group, instances not yet done.
    left: Vec<usize>,
    heap: BinaryHeap<Reverse<Ev>>,
    seq: u64,
    sim_ops: u64,
    now: u64,
    /// The top of the heap is the event being handled and may be overwritten.
    top_spent: bool,
}

impl<T: Target> Engine<'_, T> {
    #[inline]
    fn push(&mut self, t: u64, job: usize, what: Event) {
        self.seq += 1;
        let ev = Reverse(Ev {
            t,
            seq: self.seq,
            job: job as u32,
            what,
        });
        if self.top_spent {
            // The event being handled is still at the top of the heap: put
            // the new one in its place (one sift-down instead of a pop's
            // sift plus a push's sift). New events are never earlier than it.
            self.top_spent = false;
            if let Some(mut top) = self.heap.peek_mut() {
                *top = ev;
                return;
            }
        }
        self.heap.push(ev);
    }

    fn model_err(&self, j: usize, e: ModelError) -> SimError {
        SimError::Model {
            job: self.plan.jobs[j].name.clone(),
            source: e,
        }
    }

    fn start_group(&mut self, g: usize, t: u64) {
        for j in self.plan.groups[g].clone() {
            let d = self.plan.jobs[j].startdelay_ns;
            self.push(t + d, j, Event::Start);
        }
    }

    /// Issue one I/O for job `j` at time `t`.
    #[inline]
    fn issue(&mut self, j: usize, t: u64) -> Result<(), SimError> {
        let p = &self.plan.jobs[j];
        let job = &mut self.jobs[j];
        let dir = match p.rw {
            RwKind::Read => Dir::Read,
            RwKind::Write => Dir::Write,
            RwKind::Trim => Dir::Trim,
            RwKind::ReadWrite => {
                if p.read_pct >= 100 || (p.read_pct > 0 && job.rng.below(100) < p.read_pct) {
                    Dir::Read
                } else {
                    Dir::Write
                }
            }
        };
        let d = dir as usize;
        let len = p.bs[d];
        let off = if p.random {
            let slot = match job.perm.as_mut() {
                Some(perm) => perm.next_index(),
                None => job.rng.below(p.slots),
            };
            slot * p.slot_size
        } else {
            let mut pos = job.seq_pos[d];
            if pos + len > p.region_len {
                pos = 0;
            }
            job.seq_pos[d] = pos + len;
            pos
        };
        let (op, payload) = match dir {
            Dir::Read => (Op::Read, Payload::Unknown),
            Dir::Write => (Op::Write, p.payload),
            Dir::Trim => (Op::Trim, Payload::Unknown),
        };
        let req = Request {
            op,
            offset: p.region_start + off,
            len,
            payload,
        };
        if p.time_based {
            if t == job.last_issue_ns {
                job.same_time_issues += 1;
                if job.same_time_issues > STUCK_CLOCK_ISSUES {
                    return Err(SimError::Job {
                        job: p.name.clone(),
                        origin: p.origin.clone(),
                        msg: format!(
                            "virtual time stopped advancing ({STUCK_CLOCK_ISSUES} I/Os at {t} ns): a time-based job cannot end on a drive that takes no time (profile `instant`?)"
                        ),
                    });
                }
            } else {
                job.last_issue_ns = t;
                job.same_time_issues = 0;
            }
        }
        job.outstanding += 1;
        if t >= job.stats_start_ns {
            job.issued_bytes += len;
            job.issued_ios += 1;
            if job.outstanding < p.depth {
                job.low_depth[state::depth_level(job.outstanding)] += 1;
            }
        }
        job.rate_ios += 1;
        job.rate_bytes += len;
        if let Some(log) = job.iolog.as_mut() {
            log.push(iolog_entry(op, req.offset, len, t - job.start_ns));
        }
        if p.thinktime_ns > 0 {
            job.think_count += 1;
            if job.think_count.is_multiple_of(p.thinktime_blocks) {
                job.thinking = true;
            }
        }
        let c = match self.dev.submit(t, &req) {
            Ok(c) => c,
            Err(e) => return Err(self.model_err(j, e)),
        };
        self.sim_ops += 1;
        self.push(
            c.done_ns.max(t),
            j,
            Event::Done {
                dir: d as u8,
                len,
                submit: t,
            },
        );
        Ok(())
    }

    /// Keep job `j` busy at time `t`: refill its queue, or start thinking,
    /// or finish it.
    fn pump(&mut self, j: usize, t: u64) -> Result<(), SimError> {
        loop {
            let p = &self.plan.jobs[j];
            let job = &mut self.jobs[j];
            if job.thinking {
                if job.outstanding == 0 && !job.resume_pending {
                    job.resume_pending = true;
                    let tt = p.thinktime_ns;
                    self.push(t + tt, j, Event::Resume);
                }
                return Ok(());
            }
            if job.outstanding >= p.depth {
                return Ok(());
            }
            if !job.can_issue(p, t) {
                if job.outstanding == 0 {
                    self.finish(j, t)?;
                }
                return Ok(());
            }
            if let Some(r) = &p.replay {
                // fio's replay: each entry waits for its delay after the
                // previous issue (a v2 `wait`: for its time since the start).
                let e = r.entries[job.replay_pos];
                let due = match e.kind {
                    ReplayKind::Wait => job.start_ns.saturating_add(e.delay_ns),
                    _ => job.replay_last_ns.saturating_add(e.delay_ns),
                };
                if due > t {
                    if !job.resume_pending {
                        job.resume_pending = true;
                        self.push(due, j, Event::Resume);
                    }
                    return Ok(());
                }
                job.replay_pos += 1;
                if e.kind == ReplayKind::Wait {
                    continue;
                }
                job.replay_last_ns = t;
                self.issue_replay(j, t, e)?;
                continue;
            }
            // fio's linear rate: the n-th I/O is not issued before
            // start + n / rate.
            let due = rate_due(p.rate_iops, job.rate_ios, job.start_ns).max(rate_due(
                p.rate_bytes,
                job.rate_bytes,
                job.start_ns,
            ));
            if due > t {
                if !job.resume_pending {
                    job.resume_pending = true;
                    self.push(due, j, Event::Resume);
                }
                return Ok(());
            }
            self.issue(j, t)?;
        }
    }

    /// Issue replayed entry `e` for job `j` at time `t`.
    #[inline]
    fn issue_replay(&mut self, j: usize, t: u64, e: ReplayEntry) -> Result<(), SimError> {
        let p = &self.plan.jobs[j];
        let job = &mut self.jobs[j];
        let (op, dir, payload) = match e.kind {
            ReplayKind::Io(Dir::Read) => (Op::Read, Dir::Read as u8, Payload::Unknown),
            ReplayKind::Io(Dir::Write) => (Op::Write, Dir::Write as u8, p.payload),
            ReplayKind::Io(Dir::Trim) => (Op::Trim, Dir::Trim as u8, Payload::Unknown),
            ReplayKind::WriteZeroes(unmap) => (
                Op::WriteZeroes { unmap },
                Dir::Write as u8,
                Payload::Unknown,
            ),
            ReplayKind::Flush | ReplayKind::Wait => (Op::Flush, FLUSH_DIR, Payload::Unknown),
        };
        let req = Request {
            op,
            offset: e.offset,
            len: e.len,
            payload,
        };
        job.outstanding += 1;
        if dir != FLUSH_DIR {
            if t >= job.stats_start_ns {
                job.issued_bytes += e.len;
                job.issued_ios += 1;
                if job.outstanding < p.depth {
                    job.low_depth[state::depth_level(job.outstanding)] += 1;
                }
            }
            job.rate_ios += 1;
            job.rate_bytes += e.len;
        }
        if let Some(log) = job.iolog.as_mut() {
            log.push(iolog_entry(op, e.offset, e.len, t - job.start_ns));
        }
        let c = match self.dev.submit(t, &req) {
            Ok(c) => c,
            Err(err) => return Err(self.model_err(j, err)),
        };
        if p.record_completions {
            self.jobs[j].completions.push((t, c.done_ns.max(t)));
        }
        self.sim_ops += 1;
        self.push(
            c.done_ns.max(t),
            j,
            Event::Done {
                dir,
                len: e.len,
                submit: t,
            },
        );
        Ok(())
    }

    fn finish(&mut self, j: usize, t: u64) -> Result<(), SimError> {
        let p = &self.plan.jobs[j];
        let job = &mut self.jobs[j];
        if job.phase == Phase::Done {
            return Ok(());
        }
        if p.end_fsync && !job.fsynced {
            job.fsynced = true;
            let req = Request {
                op: Op::Flush,
                offset: 0,
                len: 0,
                payload: Payload::Unknown,
            };
            let c = match self.dev.submit(t, &req) {
                Ok(c) => c,
                Err(e) => return Err(self.model_err(j, e)),
            };
            self.sim_ops += 1;
            self.push(c.done_ns.max(t), j, Event::Flushed);
            return Ok(());
        }
        job.phase = Phase::Done;
        let rel = job.last_done_ns.max(job.stats_start_ns) - job.stats_start_ns;
        job.bw.finish(rel);
        if let Some(x) = job.extra.as_deref_mut() {
            x.finish(rel);
        }
        let g = p.group;
        self.left[g] -= 1;
        if p.exitall {
            for k in self.plan.groups[g].clone() {
                self.jobs[k].stop = true;
            }
        }
        if self.left[g] == 0 && g + 1 < self.plan.groups.len() {
            self.start_group(g + 1, t);
        }
        Ok(())
    }

    fn handle(&mut self, ev: Ev) -> Result<(), SimError> {
        let j = ev.job as usize;
        let t = ev.t;
        self.now = t;
        match ev.what {
            Event::Done { dir, len, submit } => {
                let p = &self.plan.jobs[j];
                let job = &mut self.jobs[j];
                job.outstanding -= 1;
                if dir == FLUSH_DIR {
                    // A replayed flush: in no direction's figures; fio
                    // counts it in its `sync` object.
                    if t >= job.stats_start_ns {
                        job.sync_ios += 1;
                    }
                    return self.pump(j, t);
                }
                let d = dir as usize;
                let lat = t - submit;
                if t >= job.stats_start_ns {
                    let s = &mut job.stats[d];
                    s.io_bytes += len;
                    s.ios += 1;
                    s.clat.record(lat);
                    job.last_done_ns = t;
                    let rel = t - job.stats_start_ns;
                    job.bw.add(rel, d, len);
                    if let Some(x) = job.extra.as_deref_mut()
                        && x.done(rel, d, len, lat, &job.stats[d].clat)
                    {
                        job.stop = true;
                    }
                }
                if lat > p.max_latency_ns[d] && job.error.is_none() {
                    job.error = Some(max_latency_error(lat, p.max_latency_ns[d]));
                    job.stop = true;
                }
                self.pump(j, t)
            }
            Event::Start => {
                let p = &self.plan.jobs[j];
                let job = &mut self.jobs[j];
                job.phase = Phase::Running;
                job.start_ns = t;
                job.stats_start_ns = t + p.ramp_ns;
                job.last_done_ns = job.stats_start_ns;
                job.deadline_ns = p
                    .runtime_ns
                    .map_or(u64::MAX, |r| job.stats_start_ns.saturating_add(r));
                self.pump(j, t)
            }
            Event::Resume => {
                let job = &mut self.jobs[j];
                job.thinking = false;
                job.resume_pending = false;
                self.pump(j, t)
            }
            Event::Flushed => self.finish(j, t),
        }
    }
}

/// The `dir` of a replayed flush's completion.
const FLUSH_DIR: u8 = 3;

/// A `write_iolog` entry.
fn iolog_entry(op: Op, offset: u64, len: u64, since_start_ns: u64) -> vssd_trace::Io {
    vssd_trace::Io {
        t_ns: Some(since_start_ns),
        op: match op {
            Op::Read => vssd_trace::Op::Read,
            Op::Write => vssd_trace::Op::Write,
            Op::Trim => vssd_trace::Op::Discard,
            Op::WriteZeroes { unmap } => vssd_trace::Op::WriteZeroes { unmap },
            _ => vssd_trace::Op::Flush,
        },
        offset,
        len,
        file: 0,
        fua: false,
    }
}

/// When `done` units (I/Os or bytes) may have been issued at `rate` per
/// second since `start` (0: no limit).
fn rate_due(rate: u64, done: u64, start: u64) -> u64 {
    if rate == 0 {
        return 0;
    }
    start.saturating_add((u128::from(done) * 1_000_000_000 / u128::from(rate)) as u64)
}

/// Run job specs against any [`Target`] from virtual time `start`: returns the
/// per-instance reports, the number of requests submitted and the end time.
pub fn run_jobs<T: Target>(
    dev: &mut T,
    jobs: &[JobSpec],
    seed: u64,
    start: u64,
    progress: &mut dyn FnMut(&Progress<'_>),
) -> Result<(Vec<JobReport>, u64, u64), SimError> {
    let mut plan = resolve(jobs, dev.capacity(), seed)?;
    plan.keep_all_bw_series();
    run_plan(dev, &plan, start, progress)
}

/// Run a resolved [`Plan`]; see [`run_jobs`].
pub fn run_plan<T: Target>(
    dev: &mut T,
    plan: &Plan,
    start: u64,
    progress: &mut dyn FnMut(&Progress<'_>),
) -> Result<(Vec<JobReport>, u64, u64), SimError> {
    let depth: usize = plan.jobs.iter().map(|j| j.depth as usize).sum();
    let mut eng = Engine {
        dev,
        plan,
        jobs: plan.jobs.iter().map(JobState::new).collect(),
        left: plan.groups.iter().map(|g| g.len()).collect(),
        heap: BinaryHeap::with_capacity(depth + plan.groups.len() + 16),
        seq: 0,
        sim_ops: 0,
        now: start,
        top_spent: false,
    };
    if !plan.groups.is_empty() {
        eng.start_group(0, start);
    }
    let mut n: u64 = 0;
    let weights = plan.work_weights();
    let total_weight: f64 = weights.iter().sum::<f64>().max(f64::MIN_POSITIVE);
    progress(&Progress {
        fraction: 0.0,
        now_ns: start,
        bytes: 0,
        job: plan.jobs.first().map_or("", |p| p.name.as_str()),
    });
    while let Some(&Reverse(ev)) = eng.heap.peek() {
        eng.top_spent = true;
        eng.handle(ev)?;
        if eng.top_spent {
            eng.top_spent = false;
            eng.heap.pop();
        }
        n += 1;
        if n & 0xFFFF == 0 {
            let t = eng.now;
            let mut f = 0.0;
            let mut bytes = 0;
            let mut job = "";
            for ((j, p), w) in eng.jobs.iter().zip(&plan.jobs).zip(&weights) {
                f += j.progress(p, t) * w;
                bytes += j.stats.iter().map(|s| s.io_bytes).sum::<u64>();
                if job.is_empty() && j.phase == Phase::Running {
                    job = &p.name;
                }
            }
            progress(&Progress {
                fraction: (f / total_weight).min(1.0),
                now_ns: t,
                bytes,
                job,
            });
        }
    }
    progress(&Progress {
        fraction: 1.0,
        now_ns: eng.now,
        bytes: eng
            .jobs
            .iter()
            .flat_map(|j| j.stats.iter())
            .map(|s| s.io_bytes)
            .sum(),
        job: "",
    });
    let end = eng.now.max(start);
    let sim_ops = eng.sim_ops;
    let reports = eng
        .jobs
        .into_iter()
        .zip(&plan.jobs)
        .enumerate()
        .map(|(i, (j, p))| report::job_report(i, j, p))
        .collect();
    Ok((reports, sim_ops, end))
}
