//! Each phase kind in the simulator, from the scenario itself: the model
//! aged, fio jobs run by the simulator's engine, TRIM sent in the ranges
//! the guest's bus sends, surface passes, idle time. The kinds whose
//! figures only a guest measures (faults, power, files, fsck) leave the
//! model as it is.

use vssd_device::TrimOutcome;
use vssd_device::report::TrimReport;
use vssd_model::{ModelError, Op, Payload, PreconditionRun, Request};

use super::{
    Replay, SAMPLE_NS, SimRun, cap_depth, finish_trim, series_of, trim_range, with_bw_log,
};
use crate::BenchError;
use crate::metrics;
use crate::results::PhaseResult;
use crate::scenario::{PhaseKind, TrimMethod, job_for_sim};
use crate::surface;

impl SimRun<'_> {
    /// Phase `i` as the scenario has it, with the guest's pace and burst
    /// times from `replay` where it has them.
    pub(super) fn execute(
        &mut self,
        i: usize,
        replay: Option<&Replay>,
        r: &mut PhaseResult,
    ) -> Result<(), BenchError> {
        let p = &self.sc.phases[i];
        let failed = |e: &dyn std::fmt::Display| BenchError::Sim(format!("phase {}: {e}", p.name));
        match &p.kind {
            PhaseKind::SecureErase => self.sim.ssd_mut().secure_erase(),
            PhaseKind::Precondition { steps } => {
                let steps = vssd_ctl::protocol::model_steps(steps, self.sc.capacity)
                    .map_err(|e| failed(&e))?;
                self.precondition(i, &steps).map_err(|e| failed(&e))?;
            }
            PhaseKind::Fio { origin, text } => {
                let pacing = replay.and_then(|r| r.pacing.get(i).copied().flatten());
                self.fio(i, origin, text, pacing, r)?;
            }
            PhaseKind::Trim {
                method,
                offset,
                length,
                ..
            } => {
                let cap = self.sc.capacity;
                let (off, len) = match method {
                    TrimMethod::Blkdiscard if *length > 0 => (*offset, *length),
                    TrimMethod::Blkdiscard => (*offset, cap - offset),
                    // mkfs discards the whole device first; a fresh
                    // filesystem's fstrim trims (nearly) all of it too.
                    TrimMethod::Mkfs | TrimMethod::Fstrim => (0, cap),
                };
                self.trim(i, off, len, r).map_err(|e| failed(&e))?;
            }
            PhaseKind::Surface {
                op,
                block,
                burst,
                positions,
                depth,
            } => {
                let pass = surface::Pass {
                    op: *op,
                    block: *block,
                    burst: *burst,
                    positions: *positions,
                    depth: *depth,
                };
                let starts = replay
                    .and_then(|r| r.bursts.get(i))
                    .and_then(Option::as_deref);
                let (s, qd) =
                    surface::run_model_qd(&mut self.sim, &pass, starts).map_err(|e| failed(&e))?;
                metrics::surface(&s, &mut r.metrics);
                // Requests in the drive during the bursts (at most `depth`).
                r.metrics.insert("drive_qd".into(), qd);
                r.surface = Some(s);
            }
            PhaseKind::Idle { seconds } => self.sim.idle((seconds * 1e9) as u64),
            // The model has no data to lose and no filesystem: faults,
            // power cuts and the files and fsck phases leave it as it is
            // (their metrics are a guest run's; see `evaluate`).
            PhaseKind::Expect { .. }
            | PhaseKind::Fault { .. }
            | PhaseKind::PowerCut { .. }
            | PhaseKind::PowerOn
            | PhaseKind::Files { .. }
            | PhaseKind::Fsck { .. } => {}
        }
        Ok(())
    }

    /// The model aged by `steps` in model time, in chunks, to sample the
    /// drive on the way (the result does not depend on where chunks end).
    fn precondition(
        &mut self,
        i: usize,
        steps: &[vssd_model::Precondition],
    ) -> Result<(), ModelError> {
        let now = self.sim.now_ns();
        let mut run = PreconditionRun::new(self.sim.ssd(), now, steps, self.seed);
        let mut next = (now / SAMPLE_NS + 1) * SAMPLE_NS;
        let pr = loop {
            let pr = run.advance(self.sim.ssd_mut(), 1 << 16)?;
            if pr.finished {
                break pr;
            }
            if pr.model_now_ns >= next {
                let c = self.sim.ssd().counters();
                self.record(i, pr.model_now_ns, c);
                next = (pr.model_now_ns / SAMPLE_NS + 1) * SAMPLE_NS;
            }
        };
        self.sim.idle(pr.model_now_ns.saturating_sub(now));
        Ok(())
    }

    /// A fio job file (`origin`), at the guest's rate `pacing` (I/Os per
    /// second) when it could not keep up, at the depth the bus lets through.
    fn fio(
        &mut self,
        i: usize,
        origin: &str,
        text: &str,
        pacing: Option<f64>,
        r: &mut PhaseResult,
    ) -> Result<(), BenchError> {
        let name = &self.sc.phases[i].name;
        let mut text = with_bw_log(&job_for_sim(text));
        if let Some(iops) = pacing {
            let parsed = vssd_sim::jobfile::parse(&text, origin)
                .map_err(|e| BenchError::Sim(e.to_string()))?;
            let instances: u64 = parsed
                .jobs
                .iter()
                .map(|j| u64::from(j.numjobs.max(1)))
                .sum();
            let per_job = (iops / instances.max(1) as f64).round().max(1.0) as u64;
            text = format!("[global]\nrate_iops={per_job}\n{text}");
            r.metrics
                .insert("paced_iops".into(), (per_job * instances.max(1)) as f64);
        }
        let mut jobs =
            vssd_sim::jobfile::parse(&text, origin).map_err(|e| BenchError::Sim(e.to_string()))?;
        // The guest's requests reach a SATA or NVMe drive through QEMU's
        // NBD client, at most 16 at a time: the simulator runs the drive at
        // the depth the guest's drive saw.
        if let Some(qd) = cap_depth(&mut jobs, self.sc.bus) {
            r.metrics.insert("bus_capped_qd".into(), f64::from(qd));
        }
        let report = self
            .sim
            .run_file(&jobs, &mut |_| {})
            .map_err(|e| BenchError::Sim(format!("phase {name}: {e}")))?;
        self.take_samples(i);
        let v: serde_json::Value =
            serde_json::from_str(&vssd_sim::report::json(&report)).unwrap_or_default();
        metrics::fio(&v, &mut r.metrics);
        r.metrics
            .insert("drive_qd".into(), metrics::fio_queue_depth(&v));
        r.series = Some(series_of(&report));
        r.fio = Some(v);
        Ok(())
    }

    /// TRIM of `len` bytes at `off`, in the largest ranges the bus sends,
    /// one after another.
    fn trim(
        &mut self,
        i: usize,
        off: u64,
        len: u64,
        r: &mut PhaseResult,
    ) -> Result<(), ModelError> {
        let mut audit = TrimReport::default();
        let mut outcome = TrimOutcome::default();
        let step = trim_range(self.sc.bus);
        let mut now = self.sim.now_ns();
        let mut next = (now / SAMPLE_NS + 1) * SAMPLE_NS;
        let mut at = off;
        while at < off + len {
            if now >= next {
                let c = self.sim.ssd().counters();
                self.record(i, now, c);
                next = (now / SAMPLE_NS + 1) * SAMPLE_NS;
            }
            let n = step.min(off + len - at);
            outcome.add_range(self.sim.ssd(), at, n);
            audit.discard_cmds += 1;
            audit.requested_bytes += n;
            let c = self.sim.ssd_mut().submit(
                now,
                &Request {
                    op: Op::Trim,
                    offset: at,
                    len: n,
                    payload: Payload::Unknown,
                },
            )?;
            now = now.max(c.done_ns);
            at += n;
        }
        finish_trim(&mut self.sim, now, audit, outcome, r);
        Ok(())
    }
}
