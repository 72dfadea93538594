//! [`Simulation`]: a drive and a virtual clock kept across job-file runs,
//! and the drive's counters sampled at fixed steps of virtual time.

use vssd_model::{Completion, ModelError, Request, Ssd};
use vssd_profile::Profile;

use super::plan::{self, Plan, Replay, resolve};
use super::{Progress, RunReport, Target, run_plan};
use crate::SimError;
use crate::jobfile::{JobFile, JobSpec};

/// A drive and a virtual clock that persist across job-file runs, the way a
/// real drive keeps its state between fio invocations.
#[derive(Debug, Clone)]
pub struct Simulation {
    ssd: Ssd,
    now_ns: u64,
    seed: u64,
    keep_bw_series: bool,
    epoch_s: u64,
    sampling: Option<Sampling>,
}

/// The drive's counters taken at fixed steps of virtual time during runs
/// ([`Simulation::set_sampling`]).
#[derive(Debug, Clone)]
struct Sampling {
    every_ns: u64,
    next_ns: u64,
    taken: Vec<(u64, vssd_model::Counters)>,
}

/// A drive whose counters are taken whenever virtual time crosses the
/// next sampling step (before the request that crosses it).
struct Sampled<'a> {
    ssd: &'a mut Ssd,
    s: &'a mut Sampling,
}

impl Target for Sampled<'_> {
    fn capacity(&self) -> u64 {
        self.ssd.capacity()
    }

    #[inline]
    fn submit(&mut self, now_ns: u64, req: &Request) -> Result<Completion, ModelError> {
        if now_ns >= self.s.next_ns {
            let c = self.ssd.counters();
            while self.s.next_ns <= now_ns {
                self.s.taken.push((self.s.next_ns, c.clone()));
                self.s.next_ns += self.s.every_ns;
            }
        }
        self.ssd.submit(now_ns, req)
    }
}

impl Simulation {
    /// A fresh drive from a profile; `seed` seeds the model and every job.
    pub fn new(profile: &Profile, seed: u64) -> Simulation {
        Simulation {
            ssd: Ssd::new(profile, seed),
            now_ns: 0,
            seed,
            keep_bw_series: true,
            epoch_s: 0,
            sampling: None,
        }
    }

    /// Continue with an existing drive (e.g. one preconditioned through the model API).
    pub fn with_ssd(ssd: Ssd, now_ns: u64, seed: u64) -> Simulation {
        Simulation {
            ssd,
            now_ns,
            seed,
            keep_bw_series: true,
            epoch_s: 0,
            sampling: None,
        }
    }

    /// Whether every job's bandwidth series is kept in its report (the
    /// default), or only those of jobs with `write_bw_log`. Statistics of
    /// the series are always kept; the series costs memory in proportion
    /// to the run's virtual duration.
    pub fn set_keep_bw_series(&mut self, keep: bool) {
        self.keep_bw_series = keep;
    }

    /// Take the drive's counters every `every_ns` of virtual time while
    /// jobs run (at the first request at or after each step; none during
    /// idle time), for charts of the drive's state within a run; `None`
    /// stops. Results are the same either way.
    pub fn set_sampling(&mut self, every_ns: Option<u64>) {
        self.sampling = every_ns.filter(|&e| e > 0).map(|every_ns| Sampling {
            every_ns,
            next_ns: self.now_ns.div_ceil(every_ns).max(1) * every_ns,
            taken: Vec::new(),
        });
    }

    /// The samples taken since the last call: (virtual time, counters).
    pub fn take_samples(&mut self) -> Vec<(u64, vssd_model::Counters)> {
        self.sampling
            .as_mut()
            .map(|s| std::mem::take(&mut s.taken))
            .unwrap_or_default()
    }

    /// Skip the sampling steps up to `now_ns` (after time passed outside a
    /// run: idle, or requests submitted to the drive directly).
    fn skip_samples_to_now(&mut self) {
        if let Some(s) = &mut self.sampling
            && s.next_ns <= self.now_ns
        {
            s.next_ns = (self.now_ns / s.every_ns + 1) * s.every_ns;
        }
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
        self.run_with_progress(jobs, &mut |_: &Progress<'_>| {})
    }

    /// Run job specs as one fio invocation, starting at the current virtual
    /// time. `progress` is called now and then with where the run is.
    pub fn run_with_progress(
        &mut self,
        jobs: &[JobSpec],
        progress: &mut dyn FnMut(&Progress<'_>),
    ) -> Result<RunReport, SimError> {
        let capacity = self.ssd.capacity();
        let mut plan = resolve(jobs, capacity, self.seed)?;
        if self.keep_bw_series {
            plan.keep_all_bw_series();
        }
        self.run_resolved(&plan, progress)
    }

    /// Run a resolved plan from the current virtual time.
    fn run_resolved(
        &mut self,
        plan: &Plan,
        progress: &mut dyn FnMut(&Progress<'_>),
    ) -> Result<RunReport, SimError> {
        let start = self.now_ns;
        let capacity = self.ssd.capacity();
        self.skip_samples_to_now();
        let (reports, sim_ops, end) = match &mut self.sampling {
            None => run_plan(&mut self.ssd, plan, start, progress)?,
            Some(s) => {
                let mut dev = Sampled {
                    ssd: &mut self.ssd,
                    s,
                };
                run_plan(&mut dev, plan, start, progress)?
            }
        };
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
            global_options: Vec::new(),
            epoch_s: self.epoch_s,
        })
    }

    /// Run the jobs of job files ([`JobFile::load`]); the report carries the
    /// files' global options for fio's JSON (`global options`).
    pub fn run_file(
        &mut self,
        jobs: &JobFile,
        progress: &mut dyn FnMut(&Progress<'_>),
    ) -> Result<RunReport, SimError> {
        let mut r = self.run_with_progress(&jobs.jobs, progress)?;
        r.global_options.clone_from(&jobs.global_options);
        Ok(r)
    }

    /// Replay `replay` as one job named `name` with at most `depth` I/Os in
    /// flight, from the current virtual time, keeping each I/O's issue and
    /// completion times in the job's report (`completions`).
    pub fn run_replay(
        &mut self,
        name: &str,
        replay: Replay,
        depth: u32,
    ) -> Result<RunReport, SimError> {
        let mut spec = JobSpec::new(name, "replay");
        spec.iodepth = depth.max(1);
        let capacity = self.ssd.capacity();
        let mut p = plan::replay_job_plan(&spec, 0, 0, 0, capacity, self.seed, replay)?;
        p.record_completions = true;
        p.keep_bw_series = true;
        let plan = Plan {
            jobs: vec![p],
            groups: std::iter::once(0..1).collect(),
        };
        self.run_resolved(&plan, &mut |_| {})
    }

    /// Set the Unix time (s) that virtual time 0 stands for, for the
    /// JSON's `time` and `timestamp` (default 0: 1970-01-01 00:00:00 UTC).
    pub fn set_epoch(&mut self, unix_s: u64) {
        self.epoch_s = unix_s;
    }
}
