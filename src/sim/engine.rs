//! The discrete-event engine: fio's issue discipline in virtual time.
//!
//! One min-heap holds every pending event (I/O completions, job starts,
//! ends of think time), ordered by virtual time and then by insertion order,
//! so runs are deterministic. Each job keeps `iodepth` I/Os outstanding and
//! issues the next one when one completes, as fio's default
//! (`iodepth_batch=1`) does. All jobs of an invocation share one [`Ssd`];
//! a `stonewall` job starts a new group when every earlier job has ended.
//!
//! The per-I/O path allocates nothing: a heap push and pop, a histogram
//! increment and a few arithmetic operations around `Ssd::submit`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::model::{Completion, Counters, ModelError, Op, Payload, Request, Ssd};
use crate::profile::Profile;

use super::SimError;
use super::hist::Histogram;
use super::jobfile::{Dir, JobSpec, RwKind, SizeSpec};
use super::rng::{Perm, Rng, derive_seed};

/// What the engine drives: the model, or a stand-in in tests.
pub trait Target {
    /// Exported capacity, bytes.
    fn capacity(&self) -> u64;
    /// Submit a request at virtual time `now_ns`.
    fn submit(&mut self, now_ns: u64, req: &Request) -> Result<Completion, ModelError>;
}

impl Target for Ssd {
    fn capacity(&self) -> u64 {
        Ssd::capacity(self)
    }

    #[inline]
    fn submit(&mut self, now_ns: u64, req: &Request) -> Result<Completion, ModelError> {
        Ssd::submit(self, now_ns, req)
    }
}

/// A drive with no model at all: every request takes `latency_ns`, any number
/// at once. For measuring the engine's own cost (`benches/sim.rs`).
#[derive(Debug, Clone, Copy)]
pub struct FixedLatency {
    /// Exported capacity, bytes.
    pub capacity: u64,
    /// Service time of every request, ns.
    pub latency_ns: u64,
}

impl Target for FixedLatency {
    fn capacity(&self) -> u64 {
        self.capacity
    }

    #[inline]
    fn submit(&mut self, now_ns: u64, _req: &Request) -> Result<Completion, ModelError> {
        Ok(Completion {
            submit_ns: now_ns,
            done_ns: now_ns + self.latency_ns,
        })
    }
}

/// A drive and a virtual clock that persist across job-file runs, the way a
/// real drive keeps its state between fio invocations.
#[derive(Debug, Clone)]
pub struct Simulation {
    ssd: Ssd,
    now_ns: u64,
    seed: u64,
}

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
    /// Bandwidth log, one entry per direction per interval.
    pub bw_log: Vec<BwSample>,
    /// Percentiles to report.
    pub percentiles: Vec<f64>,
    /// Whether the job asked for `group_reporting`.
    pub group_reporting: bool,
    /// `write_bw_log` prefix from the job file.
    pub write_bw_log: Option<String>,
}

impl JobReport {
    /// Time over which bandwidth is computed: stats start to last completion, ns.
    pub fn runtime_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.stats_start_ns)
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
}

impl RunReport {
    /// Jobs as fio reports them: with `group_reporting` anywhere in a
    /// stonewall group, that group's instances merged into one.
    pub fn reported_jobs(&self) -> Vec<JobReport> {
        let mut out: Vec<JobReport> = Vec::new();
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
                out.push(m);
            } else {
                out.extend_from_slice(members);
            }
            i = end;
        }
        out
    }
}

/// I/Os a time-based job may issue at one instant before the run is declared stuck.
const STUCK_CLOCK_ISSUES: u32 = 1 << 20;

const EV_DONE: u8 = 0;
const EV_START: u8 = 1;
const EV_RESUME: u8 = 2;
const EV_FLUSHED: u8 = 3;

/// A heap entry; derived ordering is (time, sequence number) since `seq` is unique.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Ev {
    t: u64,
    seq: u64,
    job: u32,
    kind: u8,
    dir: u8,
    len: u64,
    submit: u64,
}

/// Bandwidth accumulation for one job.
#[derive(Debug)]
struct BwAcc {
    interval: u64,
    next_edge: u64,
    bytes: [u64; 3],
    dirs: &'static [Dir],
    bs: [u64; 3],
    samples: Vec<BwSample>,
}

impl BwAcc {
    #[inline]
    fn add(&mut self, rel: u64, d: usize, len: u64) {
        if rel >= self.next_edge {
            self.roll(rel);
        }
        self.bytes[d] += len;
    }

    #[cold]
    fn roll(&mut self, rel: u64) {
        while rel >= self.next_edge {
            self.emit(self.next_edge, self.interval);
            self.next_edge += self.interval;
        }
    }

    fn emit(&mut self, edge: u64, dur: u64) {
        for &d in self.dirs {
            let b = std::mem::take(&mut self.bytes[d as usize]) as u128;
            let kib_s = (b * 1_000_000_000 / (dur as u128 * 1024)) as u64;
            self.samples.push(BwSample {
                msec: edge / 1_000_000,
                kib_s,
                dir: d,
                bs: self.bs[d as usize],
            });
        }
    }

    /// Close the log at `rel`: full intervals, then the partial last one if
    /// it is at least a millisecond long and saw I/O.
    fn finish(&mut self, rel: u64) {
        self.roll(rel);
        let start = self.next_edge - self.interval;
        let dur = rel - start;
        if dur >= 1_000_000 && self.bytes.iter().any(|&b| b > 0) {
            self.emit(rel, dur);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Waiting,
    Running,
    Done,
}

/// A job instance being run.
#[derive(Debug)]
struct Inst {
    name: String,
    origin: String,
    group: usize,
    rw: RwKind,
    rw_text: String,
    dirs: &'static [Dir],
    random: bool,
    read_pct: u64,
    region_start: u64,
    region_len: u64,
    bs: [u64; 3],
    slots: u64,
    slot_size: u64,
    io_limit: u64,
    ios_limit: u64,
    time_based: bool,
    runtime_ns: Option<u64>,
    ramp_ns: u64,
    startdelay_ns: u64,
    thinktime_ns: u64,
    thinktime_blocks: u64,
    depth: u32,
    exitall: bool,
    end_fsync: bool,
    payload: Payload,
    percentiles: Vec<f64>,
    group_reporting: bool,
    write_bw_log: Option<String>,

    rng: Rng,
    perm: Option<Perm>,
    seq_pos: [u64; 3],
    state: State,
    start_ns: u64,
    stats_start_ns: u64,
    deadline_ns: u64,
    issued_bytes: u64,
    issued_ios: u64,
    think_count: u64,
    /// Time of the last issue and how many I/Os were issued at that very
    /// time: a time-based job on a drive that takes no time would never end.
    last_issue_ns: u64,
    same_time_issues: u32,
    thinking: bool,
    resume_pending: bool,
    fsynced: bool,
    stop: bool,
    outstanding: u32,
    last_done_ns: u64,
    stats: [DirReport; 3],
    bw: BwAcc,
}

impl Inst {
    #[inline]
    fn can_issue(&self, t: u64) -> bool {
        !self.stop
            && t < self.deadline_ns
            && self.issued_ios < self.ios_limit
            && (self.time_based || self.issued_bytes < self.io_limit)
    }

    fn progress(&self, t: u64) -> f64 {
        match self.state {
            State::Waiting => 0.0,
            State::Done => 1.0,
            State::Running => {
                let mut f: f64 = 0.0;
                if self.deadline_ns != u64::MAX {
                    f = f.max(
                        t.saturating_sub(self.start_ns) as f64
                            / (self.deadline_ns - self.start_ns).max(1) as f64,
                    );
                }
                if !self.time_based && self.io_limit != u64::MAX {
                    f = f.max(self.issued_bytes as f64 / self.io_limit.max(1) as f64);
                }
                if self.ios_limit != u64::MAX {
                    f = f.max(self.issued_ios as f64 / self.ios_limit as f64);
                }
                f.min(1.0)
            }
        }
    }
}

/// Turn job specs into instances with regions resolved against the drive.
fn resolve(jobs: &[JobSpec], capacity: u64, seed: u64) -> Result<Vec<Inst>, SimError> {
    let mut out = Vec::new();
    let mut group = 0usize;
    for (ji, spec) in jobs.iter().enumerate() {
        if spec.stonewall && !out.is_empty() {
            group += 1;
        }
        for clone in 0..spec.numjobs {
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
            let mut rng = Rng::new(job_seed);
            let perm = (spec.random && !spec.norandommap).then(|| Perm::new(slots, rng.next_u64()));
            let mut bs = spec.bs;
            for d in Dir::ALL {
                if !dirs.contains(&d) {
                    bs[d as usize] = 0;
                }
            }
            out.push(Inst {
                name: spec.name.clone(),
                origin: spec.origin.clone(),
                group,
                rw: spec.rw,
                rw_text: spec.rw_text.clone(),
                dirs,
                random: spec.random,
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
                depth: spec.iodepth.max(1),
                exitall: spec.exitall,
                end_fsync: spec.end_fsync,
                payload: spec.payload,
                percentiles: spec.percentiles.clone(),
                group_reporting: spec.group_reporting,
                write_bw_log: spec.write_bw_log.clone(),
                rng,
                perm,
                seq_pos: [0; 3],
                state: State::Waiting,
                start_ns: 0,
                stats_start_ns: 0,
                deadline_ns: u64::MAX,
                issued_bytes: 0,
                issued_ios: 0,
                think_count: 0,
                last_issue_ns: u64::MAX,
                same_time_issues: 0,
                thinking: false,
                resume_pending: false,
                fsynced: false,
                stop: false,
                outstanding: 0,
                last_done_ns: 0,
                stats: Default::default(),
                bw: BwAcc {
                    interval: spec.log_avg_msec.max(1) * 1_000_000,
                    next_edge: spec.log_avg_msec.max(1) * 1_000_000,
                    bytes: [0; 3],
                    dirs,
                    bs,
                    samples: Vec::new(),
                },
            });
        }
    }
    Ok(out)
}

struct Engine<'a, T: Target> {
    dev: &'a mut T,
    jobs: Vec<Inst>,
    heap: BinaryHeap<Reverse<Ev>>,
    seq: u64,
    sim_ops: u64,
    /// Per group: (first instance, one past the last, instances not yet done).
    groups: Vec<(usize, usize, usize)>,
    now: u64,
    /// The top of the heap is the event being handled and may be overwritten.
    top_spent: bool,
}

impl<T: Target> Engine<'_, T> {
    #[inline]
    fn push(&mut self, t: u64, job: usize, kind: u8, dir: u8, len: u64, submit: u64) {
        self.seq += 1;
        let ev = Reverse(Ev {
            t,
            seq: self.seq,
            job: job as u32,
            kind,
            dir,
            len,
            submit,
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
            job: self.jobs[j].name.clone(),
            source: e,
        }
    }

    fn start_group(&mut self, g: usize, t: u64) {
        let (a, b, _) = self.groups[g];
        for j in a..b {
            let d = self.jobs[j].startdelay_ns;
            self.push(t + d, j, EV_START, 0, 0, 0);
        }
    }

    /// Issue one I/O for job `j` at time `t`.
    #[inline]
    fn issue(&mut self, j: usize, t: u64) -> Result<(), SimError> {
        let job = &mut self.jobs[j];
        let dir = match job.rw {
            RwKind::Read => Dir::Read,
            RwKind::Write => Dir::Write,
            RwKind::Trim => Dir::Trim,
            RwKind::ReadWrite => {
                if job.read_pct >= 100 || (job.read_pct > 0 && job.rng.below(100) < job.read_pct) {
                    Dir::Read
                } else {
                    Dir::Write
                }
            }
        };
        let d = dir as usize;
        let len = job.bs[d];
        let off = if job.random {
            let slot = match job.perm.as_mut() {
                Some(p) => p.next_index(),
                None => job.rng.below(job.slots),
            };
            slot * job.slot_size
        } else {
            let mut p = job.seq_pos[d];
            if p + len > job.region_len {
                p = 0;
            }
            job.seq_pos[d] = p + len;
            p
        };
        let (op, payload) = match dir {
            Dir::Read => (Op::Read, Payload::Unknown),
            Dir::Write => (Op::Write, job.payload),
            Dir::Trim => (Op::Trim, Payload::Unknown),
        };
        let req = Request {
            op,
            offset: job.region_start + off,
            len,
            payload,
        };
        if job.time_based {
            if t == job.last_issue_ns {
                job.same_time_issues += 1;
                if job.same_time_issues > STUCK_CLOCK_ISSUES {
                    return Err(SimError::Job {
                        job: job.name.clone(),
                        origin: job.origin.clone(),
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
        if t >= job.stats_start_ns {
            job.issued_bytes += len;
            job.issued_ios += 1;
        }
        job.outstanding += 1;
        if job.thinktime_ns > 0 {
            job.think_count += 1;
            if job.think_count.is_multiple_of(job.thinktime_blocks) {
                job.thinking = true;
            }
        }
        let c = match self.dev.submit(t, &req) {
            Ok(c) => c,
            Err(e) => return Err(self.model_err(j, e)),
        };
        self.sim_ops += 1;
        self.push(c.done_ns.max(t), j, EV_DONE, d as u8, len, t);
        Ok(())
    }

    /// Keep job `j` busy at time `t`: refill its queue, or start thinking,
    /// or finish it.
    fn pump(&mut self, j: usize, t: u64) -> Result<(), SimError> {
        loop {
            let job = &mut self.jobs[j];
            if job.thinking {
                if job.outstanding == 0 && !job.resume_pending {
                    job.resume_pending = true;
                    let tt = job.thinktime_ns;
                    self.push(t + tt, j, EV_RESUME, 0, 0, 0);
                }
                return Ok(());
            }
            if job.outstanding >= job.depth {
                return Ok(());
            }
            if !job.can_issue(t) {
                if job.outstanding == 0 {
                    self.finish(j, t)?;
                }
                return Ok(());
            }
            self.issue(j, t)?;
        }
    }

    fn finish(&mut self, j: usize, t: u64) -> Result<(), SimError> {
        let job = &mut self.jobs[j];
        if job.state == State::Done {
            return Ok(());
        }
        if job.end_fsync && !job.fsynced {
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
            self.push(c.done_ns.max(t), j, EV_FLUSHED, 0, 0, t);
            return Ok(());
        }
        job.state = State::Done;
        let rel = job.last_done_ns.max(job.stats_start_ns) - job.stats_start_ns;
        job.bw.finish(rel);
        let g = job.group;
        let exitall = job.exitall;
        self.groups[g].2 -= 1;
        if exitall {
            let (a, b, _) = self.groups[g];
            for k in a..b {
                self.jobs[k].stop = true;
            }
        }
        if self.groups[g].2 == 0 && g + 1 < self.groups.len() {
            self.start_group(g + 1, t);
        }
        Ok(())
    }

    fn handle(&mut self, ev: Ev) -> Result<(), SimError> {
        let j = ev.job as usize;
        let t = ev.t;
        self.now = t;
        match ev.kind {
            EV_DONE => {
                let job = &mut self.jobs[j];
                job.outstanding -= 1;
                if t >= job.stats_start_ns {
                    let d = ev.dir as usize;
                    let s = &mut job.stats[d];
                    s.io_bytes += ev.len;
                    s.ios += 1;
                    s.clat.record(t - ev.submit);
                    job.last_done_ns = t;
                    let rel = t - job.stats_start_ns;
                    job.bw.add(rel, d, ev.len);
                }
                self.pump(j, t)
            }
            EV_START => {
                let job = &mut self.jobs[j];
                job.state = State::Running;
                job.start_ns = t;
                job.stats_start_ns = t + job.ramp_ns;
                job.last_done_ns = job.stats_start_ns;
                job.deadline_ns = job
                    .runtime_ns
                    .map_or(u64::MAX, |r| job.stats_start_ns.saturating_add(r));
                self.pump(j, t)
            }
            EV_RESUME => {
                let job = &mut self.jobs[j];
                job.thinking = false;
                job.resume_pending = false;
                self.pump(j, t)
            }
            EV_FLUSHED => self.finish(j, t),
            _ => unreachable!("unknown event kind"),
        }
    }
}

impl Simulation {
    /// A fresh drive from a profile; `seed` seeds the model and every job.
    pub fn new(profile: &Profile, seed: u64) -> Simulation {
        Simulation {
            ssd: Ssd::new(profile, seed),
            now_ns: 0,
            seed,
        }
    }

    /// Continue with an existing drive (e.g. one preconditioned through the model API).
    pub fn with_ssd(ssd: Ssd, now_ns: u64, seed: u64) -> Simulation {
        Simulation { ssd, now_ns, seed }
    }

    /// The drive.
    pub fn ssd(&self) -> &Ssd {
        &self.ssd
    }

    /// The drive, mutably (to precondition it or inspect it between runs).
    pub fn ssd_mut(&mut self) -> &mut Ssd {
        &mut self.ssd
    }

    /// Current virtual time, ns.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Let virtual time pass with no host I/O (the drive may garbage-collect).
    pub fn idle(&mut self, ns: u64) {
        self.now_ns += ns;
    }

    /// Run job specs to completion; see [`Simulation::run_with_progress`].
    pub fn run(&mut self, jobs: &[JobSpec]) -> Result<RunReport, SimError> {
        self.run_with_progress(jobs, &mut |_| {})
    }

    /// Run job specs as one fio invocation, starting at the current virtual
    /// time. `progress` is called now and then with the fraction done (0..=1).
    pub fn run_with_progress(
        &mut self,
        jobs: &[JobSpec],
        progress: &mut dyn FnMut(f64),
    ) -> Result<RunReport, SimError> {
        let start = self.now_ns;
        let capacity = self.ssd.capacity();
        let (reports, sim_ops, end) = run_jobs(&mut self.ssd, jobs, self.seed, start, progress)?;
        self.now_ns = end;
        Ok(RunReport {
            profile: self.ssd.profile().name.clone(),
            capacity,
            seed: self.seed,
            jobs: reports,
            counters: self.ssd.counters(),
            sim_ops,
            start_ns: start,
            end_ns: end,
        })
    }
}

/// Run job specs against any [`Target`] from virtual time `start`: returns the
/// per-instance reports, the number of requests submitted and the end time.
pub fn run_jobs<T: Target>(
    dev: &mut T,
    jobs: &[JobSpec],
    seed: u64,
    start: u64,
    progress: &mut dyn FnMut(f64),
) -> Result<(Vec<JobReport>, u64, u64), SimError> {
    let capacity = dev.capacity();
    let insts = resolve(jobs, capacity, seed)?;
    let mut groups: Vec<(usize, usize, usize)> = Vec::new();
    for (i, inst) in insts.iter().enumerate() {
        if inst.group == groups.len() {
            groups.push((i, i, 0));
        }
        let g = &mut groups[inst.group];
        g.1 = i + 1;
        g.2 += 1;
    }
    let depth: usize = insts.iter().map(|j| j.depth as usize).sum();
    let mut eng = Engine {
        dev,
        jobs: insts,
        heap: BinaryHeap::with_capacity(depth + groups.len() + 16),
        seq: 0,
        sim_ops: 0,
        groups,
        now: start,
        top_spent: false,
    };
    if !eng.groups.is_empty() {
        eng.start_group(0, start);
    }
    let mut n: u64 = 0;
    progress(0.0);
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
            let f =
                eng.jobs.iter().map(|j| j.progress(t)).sum::<f64>() / eng.jobs.len().max(1) as f64;
            progress(f);
        }
    }
    progress(1.0);
    let end = eng.now.max(start);
    let sim_ops = eng.sim_ops;
    let reports = eng
        .jobs
        .into_iter()
        .enumerate()
        .map(|(i, j)| {
            debug_assert_eq!(
                j.state,
                State::Done,
                "job {} ({}) never ended",
                j.name,
                j.origin
            );
            JobReport {
                name: j.name,
                index: i + 1,
                group: j.group,
                rw: j.rw_text,
                dirs: j.dirs.to_vec(),
                bs: j.bs,
                iodepth: j.depth,
                jobs: 1,
                dir: j.stats,
                start_ns: j.start_ns,
                stats_start_ns: j.stats_start_ns,
                end_ns: j.last_done_ns,
                bw_log: j.bw.samples,
                percentiles: j.percentiles,
                group_reporting: j.group_reporting,
                write_bw_log: j.write_bw_log,
            }
        })
        .collect();
    Ok((reports, sim_ops, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::jobfile::parse;

    /// A stand-in drive: one server, fixed service time per request, or
    /// fully parallel when `serial` is false. Records every request.
    struct Mock {
        cap: u64,
        lat: u64,
        serial: bool,
        busy_until: u64,
        log: Vec<(u64, u64, Request)>,
    }

    impl Mock {
        fn new(cap: u64, lat: u64, serial: bool) -> Mock {
            Mock {
                cap,
                lat,
                serial,
                busy_until: 0,
                log: Vec::new(),
            }
        }

        /// Most requests in flight at once.
        fn max_in_flight(&self) -> usize {
            let mut ev: Vec<(u64, i32)> = Vec::new();
            for &(s, d, _) in &self.log {
                ev.push((s, 1));
                ev.push((d, -1));
            }
            ev.sort();
            let (mut cur, mut max) = (0i32, 0i32);
            for (_, x) in ev {
                cur += x;
                max = max.max(cur);
            }
            max as usize
        }
    }

    impl Target for Mock {
        fn capacity(&self) -> u64 {
            self.cap
        }
        fn submit(&mut self, now: u64, req: &Request) -> Result<Completion, ModelError> {
            if req.offset + req.len > self.cap {
                return Err(ModelError::OutOfRange {
                    offset: req.offset,
                    len: req.len,
                    capacity: self.cap,
                });
            }
            let done = if self.serial {
                self.busy_until = self.busy_until.max(now) + self.lat;
                self.busy_until
            } else {
                now + self.lat
            };
            self.log.push((now, done, *req));
            Ok(Completion {
                submit_ns: now,
                done_ns: done,
            })
        }
    }

    const MIB: u64 = 1 << 20;

    fn run(m: &mut Mock, text: &str) -> Vec<JobReport> {
        let jf = parse(text, "t.fio").unwrap();
        run_jobs(m, &jf.jobs, 1, 0, &mut |_| {}).unwrap().0
    }

    #[test]
    fn keeps_iodepth_outstanding() {
        let mut m = Mock::new(64 * MIB, 100_000, false);
        let r = run(&mut m, "[j]\nrw=read\nbs=4k\nsize=1m\niodepth=4\n");
        assert_eq!(m.log.len(), 256);
        assert_eq!(m.max_in_flight(), 4);
        assert_eq!(r[0].runtime_ns(), 64 * 100_000);
        assert_eq!(r[0].dir[0].ios, 256);
        assert_eq!(r[0].dir[0].io_bytes, MIB);
        assert!((r[0].bw_bytes(Dir::Read) - MIB as f64 / 0.0064).abs() < 1.0);
        assert_eq!(r[0].dir[0].clat.mean(), 100_000.0);
    }

    #[test]
    fn sequential_offsets_and_region() {
        let mut m = Mock::new(64 * MIB, 1000, false);
        run(&mut m, "[j]\nrw=write\nbs=128k\nsize=1m\noffset=1m\n");
        let offs: Vec<u64> = m.log.iter().map(|l| l.2.offset).collect();
        let want: Vec<u64> = (0..8).map(|i| MIB + i * 131072).collect();
        assert_eq!(offs, want);
        assert!(
            m.log
                .iter()
                .all(|l| l.2.op == Op::Write && l.2.len == 131072)
        );
    }

    #[test]
    fn random_map_covers_each_block_once() {
        let mut m = Mock::new(64 * MIB, 1000, false);
        run(
            &mut m,
            "[j]\nrw=randwrite\nbs=4k\nsize=1m\noffset=2m\niodepth=8\n",
        );
        let mut offs: Vec<u64> = m.log.iter().map(|l| l.2.offset).collect();
        assert_eq!(offs.len(), 256);
        let sequential = offs.windows(2).filter(|w| w[1] == w[0] + 4096).count();
        assert!(sequential < 20, "{sequential} sequential pairs");
        offs.sort_unstable();
        let want: Vec<u64> = (0..256).map(|i| 2 * MIB + i * 4096).collect();
        assert_eq!(offs, want);

        let mut m = Mock::new(64 * MIB, 1000, false);
        run(&mut m, "[j]\nrw=randwrite\nbs=4k\nsize=1m\nnorandommap\n");
        let mut offs: Vec<u64> = m.log.iter().map(|l| l.2.offset).collect();
        offs.sort_unstable();
        offs.dedup();
        // 256 draws from 256 blocks: about 1 - 1/e of them distinct.
        assert!((130..200).contains(&offs.len()), "{}", offs.len());
    }

    #[test]
    fn io_size_loops_and_number_ios_stops() {
        let mut m = Mock::new(64 * MIB, 1000, false);
        run(&mut m, "[j]\nrw=write\nbs=64k\nsize=128k\nio_size=512k\n");
        let offs: Vec<u64> = m.log.iter().map(|l| l.2.offset).collect();
        assert_eq!(offs, [0, 65536, 0, 65536, 0, 65536, 0, 65536]);
        let mut m = Mock::new(64 * MIB, 1000, false);
        run(&mut m, "[j]\nrw=randread\nnumber_ios=10\niodepth=3\n");
        assert_eq!(m.log.len(), 10);
        let mut m = Mock::new(64 * MIB, 1000, false);
        run(&mut m, "[j]\nrw=write\nbs=64k\nsize=128k\nloops=3\n");
        assert_eq!(m.log.len(), 6);
        let mut m = Mock::new(64 * MIB, 1000, false);
        run(&mut m, "[j]\nrw=write\nbs=64k\nsize=128k\nio_size=150%\n");
        assert_eq!(m.log.len(), 3);
    }

    #[test]
    fn stonewall_startdelay_and_concurrency() {
        let mut m = Mock::new(64 * MIB, 1000, false);
        let r = run(
            &mut m,
            "[a]\nrw=read\nsize=40k\n[b]\nrw=write\nsize=40k\nstartdelay=1ms\n[c]\nstonewall\nrw=trim\nsize=40k\n",
        );
        assert_eq!(r.iter().map(|j| j.group).collect::<Vec<_>>(), [0, 0, 1]);
        assert_eq!(r[0].start_ns, 0);
        assert_eq!(r[1].start_ns, 1_000_000);
        // a and b overlap in time; c starts when both have ended.
        assert_eq!(r[0].end_ns, 10_000);
        assert_eq!(r[1].end_ns, 1_010_000);
        assert_eq!(r[2].start_ns, 1_010_000);
        let first_trim = m.log.iter().find(|l| l.2.op == Op::Trim).unwrap();
        assert_eq!(first_trim.0, 1_010_000);
    }

    #[test]
    fn time_based_loops_until_runtime() {
        let mut m = Mock::new(64 * MIB, 1_000_000, false);
        let r = run(
            &mut m,
            "[j]\nrw=write\nbs=4k\nsize=8k\ntime_based\nruntime=100ms\n",
        );
        assert_eq!(m.log.len(), 100);
        assert_eq!(r[0].runtime_ns(), 100_000_000);
        assert!(m.log.iter().all(|l| l.2.offset < 8192));
    }

    #[test]
    fn ramp_time_is_excluded() {
        let mut m = Mock::new(64 * MIB, 1_000_000, false);
        let r = run(
            &mut m,
            "[j]\nrw=read\ntime_based\nruntime=50ms\nramp_time=20ms\n",
        );
        // 20 I/Os issued in the ramp, 50 after; the last ramp I/O completes
        // exactly when statistics start, so it counts (fio resets its
        // statistics at that moment and counts later completions).
        assert_eq!(m.log.len(), 70);
        assert_eq!(r[0].dir[0].ios, 51);
        assert_eq!(r[0].stats_start_ns, 20_000_000);
        assert_eq!(r[0].runtime_ns(), 50_000_000);
    }

    #[test]
    fn thinktime_drains_then_sleeps() {
        let mut m = Mock::new(64 * MIB, 1_000_000, false);
        let r = run(
            &mut m,
            "[j]\nrw=read\nnumber_ios=10\niodepth=2\nthinktime=1000\nthinktime_blocks=2\n",
        );
        // Pairs of I/Os (1 ms), then 1 ms of thinking: 5 pairs, 4 pauses.
        assert_eq!(m.log.len(), 10);
        assert_eq!(m.max_in_flight(), 2);
        assert_eq!(r[0].runtime_ns(), 9_000_000);
    }

    #[test]
    fn bw_log_intervals() {
        // Serial 1 ms per 4 KiB: 100 I/Os per 100 ms interval = 4000 KiB/s.
        let mut m = Mock::new(64 * MIB, 1_000_000, true);
        let r = run(
            &mut m,
            "[j]\nrw=write\nbs=4k\nnumber_ios=1000\niodepth=4\nlog_avg_msec=100\n",
        );
        let log = &r[0].bw_log;
        assert_eq!(log.len(), 10, "{log:?}");
        assert_eq!(log[0].msec, 100);
        assert_eq!(log[9].msec, 1000);
        assert!(
            log[1..]
                .iter()
                .all(|s| s.kib_s == 4000 && s.dir == Dir::Write && s.bs == 4096),
            "{log:?}"
        );
    }

    #[test]
    fn mixed_reads_and_writes() {
        let mut m = Mock::new(64 * MIB, 1000, false);
        let r = run(
            &mut m,
            "[j]\nrw=randrw\nrwmixread=70\nbs=4k,16k\nnumber_ios=10000\nio_size=1g\nbuffer_compress_percentage=40\n",
        );
        let reads = m.log.iter().filter(|l| l.2.op == Op::Read).count();
        assert!((6700..7300).contains(&reads), "{reads}");
        assert!(m.log.iter().all(|l| match l.2.op {
            Op::Read => l.2.len == 4096 && l.2.payload == Payload::Unknown,
            _ => l.2.len == 16384 && l.2.payload == Payload::Compressible { percent: 40 },
        }));
        assert_eq!(r[0].dirs, [Dir::Read, Dir::Write]);
        assert_eq!(r[0].dir[0].ios + r[0].dir[1].ios, 10000);
    }

    #[test]
    fn whole_device_trim_is_one_request() {
        let mut m = Mock::new(64 * MIB, 1000, false);
        run(&mut m, "[j]\nrw=trim\nbs=64m\n");
        assert_eq!(m.log.len(), 1);
        assert_eq!(
            (m.log[0].2.offset, m.log[0].2.len, m.log[0].2.op),
            (0, 64 * MIB, Op::Trim)
        );
    }

    #[test]
    fn numjobs_offsets_group_reporting_exitall() {
        let mut m = Mock::new(64 * MIB, 1000, false);
        let jf = parse(
            "[j]\nrw=write\nbs=4k\nsize=8k\nnumjobs=3\noffset_increment=1m\ngroup_reporting\n",
            "t",
        )
        .unwrap();
        let (reps, ops, _) = run_jobs(&mut m, &jf.jobs, 1, 0, &mut |_| {}).unwrap();
        assert_eq!(ops, 6);
        let mut offs: Vec<u64> = m.log.iter().map(|l| l.2.offset).collect();
        offs.sort_unstable();
        assert_eq!(offs, [0, 4096, MIB, MIB + 4096, 2 * MIB, 2 * MIB + 4096]);
        let rr = RunReport {
            profile: "mock".into(),
            capacity: m.cap,
            seed: 1,
            jobs: reps,
            counters: Counters::default(),
            sim_ops: ops,
            start_ns: 0,
            end_ns: 0,
        };
        let merged = rr.reported_jobs();
        assert_eq!(merged.len(), 1);
        assert_eq!((merged[0].jobs, merged[0].dir[1].ios), (3, 6));

        let mut m = Mock::new(64 * MIB, 1000, false);
        let r = run(
            &mut m,
            "[short]\nrw=read\nsize=4k\nexitall\n[long]\nrw=read\nsize=1m\n",
        );
        assert_eq!(r[1].dir[0].ios, 1);
    }

    #[test]
    fn regions_outside_the_drive_are_errors() {
        let mut m = Mock::new(64 * MIB, 1000, false);
        for text in [
            "[j]\noffset=64m\n",
            "[j]\nbs=128m\nrw=write\n",
            "[j]\nsize=2k\n",
        ] {
            let jf = parse(text, "t").unwrap();
            let e = run_jobs(&mut m, &jf.jobs, 1, 0, &mut |_| {}).unwrap_err();
            assert!(matches!(e, SimError::Job { .. }), "{text}: {e}");
        }
        // A size beyond the end is clamped to the drive.
        let r = run(&mut m, "[j]\nrw=write\nbs=1m\noffset=60m\nsize=100m\n");
        assert_eq!(r[0].dir[1].io_bytes, 4 * MIB);
    }

    #[test]
    fn seeds_decide_random_offsets() {
        let offsets = |seed: u64, text: &str| {
            let mut m = Mock::new(64 * MIB, 1000, false);
            let jf = parse(text, "t").unwrap();
            run_jobs(&mut m, &jf.jobs, seed, 0, &mut |_| {}).unwrap();
            m.log.iter().map(|l| l.2.offset).collect::<Vec<_>>()
        };
        let j = "[j]\nrw=randread\nnumber_ios=50\n";
        assert_eq!(offsets(1, j), offsets(1, j));
        assert_ne!(offsets(1, j), offsets(2, j));
        let j = "[j]\nrw=randread\nnumber_ios=50\nrandseed=9\n";
        assert_eq!(offsets(1, j), offsets(2, j));
    }

    #[test]
    fn time_based_job_on_a_timeless_drive_is_an_error() {
        let mut m = Mock::new(64 * MIB, 0, false);
        let jf = parse("[j]\nrw=read\ntime_based\nruntime=1\n", "t").unwrap();
        let e = run_jobs(&mut m, &jf.jobs, 1, 0, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("stopped advancing"), "{e}");
        // Without time_based the job ends by size, even at zero latency.
        let r = run(&mut m, "[j]\nrw=read\nsize=1m\n");
        assert_eq!((r[0].dir[0].ios, r[0].runtime_ns()), (256, 0));
    }

    #[test]
    fn end_fsync_flushes() {
        let mut m = Mock::new(64 * MIB, 1000, false);
        run(&mut m, "[j]\nrw=write\nsize=8k\nend_fsync=1\n");
        assert_eq!(m.log.last().unwrap().2.op, Op::Flush);
    }
    mod prop {
        use super::*;
        use proptest::prelude::{
            Just, Strategy, any, prop_assert, prop_assert_eq, prop_oneof, proptest,
        };

        fn job_text() -> impl Strategy<Value = String> {
            (
                prop_oneof![
                    Just("read"),
                    Just("write"),
                    Just("trim"),
                    Just("randread"),
                    Just("randwrite"),
                    Just("randtrim"),
                    Just("rw"),
                    Just("randrw")
                ],
                prop_oneof![Just("512"), Just("4k"), Just("64k"), Just("4k,16k")],
                (0u32..90, 1u32..=100),
                1u32..16,
                1u64..300,
                1u32..3,
                any::<bool>(),
                prop_oneof![Just(""), Just("thinktime=20\nthinktime_blocks=3\n")],
                any::<bool>(),
            )
                .prop_map(|(rw, bs, (off, size), qd, n, numjobs, sw, think, nomap)| {
                    format!(
                        "[j]\nrw={rw}\nbs={bs}\noffset={off}%\nsize={size}%\niodepth={qd}\nnumber_ios={n}\nnumjobs={numjobs}\n{}{think}{}",
                        if sw { "stonewall\n" } else { "" },
                        if nomap { "norandommap\n" } else { "" }
                    )
                })
        }

        proptest! {
            /// Whatever the jobs, every request lies inside the drive (the
            /// mock refuses others), every job ends, counts add up, and no job
            /// has more than its iodepth in flight.
            #[test]
            fn engine_invariants(texts in proptest::collection::vec(job_text(), 1..4), seed: u64) {
                let text: String = texts.concat();
                let jf = parse(&text, "p").unwrap();
                let mut m = Mock::new(8 * MIB, 5_000, true);
                let (reps, ops, end) = match run_jobs(&mut m, &jf.jobs, seed, 0, &mut |_| {}) {
                    Ok(x) => x,
                    Err(SimError::Job { .. }) => return Ok(()),
                    Err(e) => panic!("{e}"),
                };
                prop_assert_eq!(ops as usize, m.log.len());
                let counted: u64 = reps.iter().flat_map(|r| r.dir.iter()).map(|d| d.ios).sum();
                prop_assert_eq!(counted, ops);
                let depth: u32 = jf.jobs.iter().map(|j| j.iodepth * j.numjobs).sum();
                prop_assert!(m.max_in_flight() <= depth as usize);
                for r in &reps {
                    prop_assert!(r.end_ns <= end);
                    let ios: u64 = r.dir.iter().map(|d| d.ios).sum();
                    prop_assert!(ios >= 1);
                }
                let mut t = 0;
                for &(s, _, _) in &m.log {
                    prop_assert!(s >= t, "submissions go back in time");
                    t = s;
                }
            }
        }
    }
}
