//! What `ctl` does to the drive as a whole, outside the request path:
//! secure erase, idle time, preconditioning in drive time, ageing the NAND.

use vssd_model::{Precondition, PreconditionRun};

use crate::Device;
use crate::drive::MAX_DRIVE_NS;
use crate::error::DeviceError;

/// Wall time the model lock is held at most per precondition chunk.
pub const PRECONDITION_CHUNK: std::time::Duration = std::time::Duration::from_millis(2);

/// The longest idle one request may ask for: 30 days of drive time.
pub const MAX_IDLE_NS: u64 = 30 * 86_400 * 1_000_000_000;

/// What a precondition did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreconditionOutcome {
    /// Model time it took, ns.
    pub model_ns: u64,
    /// Stopped early because the caller asked.
    pub cancelled: bool,
}

impl Device {
    /// Back to a fresh drive: all data reads as zeros, the FTL is reset.
    pub fn secure_erase(&self) -> Result<(), DeviceError> {
        if !self.powered() {
            return Err(DeviceError::PoweredOff);
        }
        let mut core = self.drive.lock();
        self.drive.store().erase_all().map_err(DeviceError::Io)?;
        core.ssd.secure_erase();
        // Nothing written before is there to lose (and the model counts
        // placed units from zero again); no unit is unreadable any more,
        // and the erase of every block is no wear-out failure.
        core.audit.clear();
        core.media.forget();
        let erases = core.ssd.erases();
        core.media.seen(erases);
        self.state.describes_data();
        self.accounting.reset();
        Ok(())
    }

    /// Let the drive idle `ns` of model time at once: its idle-time work
    /// (erases, background garbage collection) runs up to `ns` from now,
    /// and the model clock moves on by `ns` (the offset grows, as after a
    /// precondition), so the next request finds the drive as after that
    /// much idleness. At most [`MAX_IDLE_NS`] at once, and never past
    /// [`MAX_DRIVE_NS`] (refused with the limit: the drive's clock only
    /// moves forward).
    pub fn idle(&self, ns: u64) -> Result<(), DeviceError> {
        self.drive.running()?;
        if !self.powered() {
            return Err(DeviceError::PoweredOff);
        }
        if ns > MAX_IDLE_NS {
            return Err(DeviceError::Clock(format!(
                "an idle of {ns} ns is more than the {MAX_IDLE_NS} ns (30 days of drive time) one request may ask for"
            )));
        }
        let mut core = self.drive.lock();
        let now = self.drive.now(&core);
        if now.saturating_add(ns) > MAX_DRIVE_NS {
            return Err(DeviceError::Clock(format!(
                "an idle of {ns} ns would take the drive's clock from {now} ns past its end, {MAX_DRIVE_NS} ns (about 146 years)"
            )));
        }
        core.ssd.catch_up(now.saturating_add(ns));
        core.clock.advance(ns);
        if self.power.tracks() {
            let d = core.ssd.durability();
            core.audit.settle(d);
        }
        Ok(())
    }

    /// Age the drive in model time (no data is touched, except that a
    /// TRIM-all step also zeroes the store, as a drive's TRIM does). The
    /// work runs in chunks of about [`PRECONDITION_CHUNK`] of wall time;
    /// between chunks the model lock is free, so guest I/O and `ctl stats`
    /// go on (guest requests then queue behind the work done so far, as on
    /// a drive busy with it). `progress(done_bytes, total_bytes)` is called
    /// after each chunk; returning false cancels (what is done stays done).
    pub fn precondition(
        &self,
        steps: &[Precondition],
        seed: u64,
        progress: &mut dyn FnMut(u64, u64) -> bool,
    ) -> Result<PreconditionOutcome, DeviceError> {
        self.drive.running()?;
        if !self.powered() {
            return Err(DeviceError::PoweredOff);
        }
        if steps.contains(&Precondition::TrimAll) {
            self.drive
                .store()
                .zero(0, self.capacity(), true)
                .map_err(DeviceError::Io)?;
        }
        let (mut run, start) = {
            let core = self.drive.lock();
            let start = self.drive.now(&core);
            (PreconditionRun::new(&core.ssd, start, steps, seed), start)
        };
        let mut cancelled = false;
        let end = loop {
            let p = {
                let mut core = self.drive.lock();
                let core = &mut *core;
                let t0 = std::time::Instant::now();
                let p = run
                    .advance_while(&mut core.ssd, || t0.elapsed() < PRECONDITION_CHUNK)
                    .inspect_err(|e| self.drive.stop(format!("the drive model failed: {e}")))?;
                self.faults.erases(&mut core.ssd, &mut core.media);
                // Model time = daemon time / K + offset: the drive has
                // done the work so far by now.
                let lag = p
                    .model_now_ns
                    .saturating_sub(self.drive.model_clock(self.now_ns()));
                core.clock.catch_up(lag);
                p
            };
            if p.finished {
                break p.model_now_ns;
            }
            if !progress(p.done_bytes, p.total_bytes) {
                cancelled = true;
                break p.model_now_ns;
            }
        };
        self.faults
            .check_end_of_life(self.profile(), &self.drive.lock().ssd);
        Ok(PreconditionOutcome {
            model_ns: end.saturating_sub(start),
            cancelled,
        })
    }

    /// Age the NAND fast (`ctl precondition --wear PERCENT`): every block
    /// to at least `percent` of the rated P/E cycles (data untouched).
    /// Returns the erases added.
    pub fn age(&self, percent: f64) -> Result<u64, String> {
        let profile = self.profile();
        if profile.wear.rated_pe_cycles == 0 {
            return Err(format!(
                "profile {} has no [wear] rated_pe_cycles: there is no rated life to age it towards",
                profile.name
            ));
        }
        if !(percent.is_finite() && percent > 0.0 && percent <= 1000.0) {
            return Err(format!("--wear {percent} must be in (0, 1000] percent"));
        }
        let mut core = self.drive.lock();
        let added = core.ssd.age_to(percent);
        // The drive had done that wear before: no block fails on these erases now.
        let erases = core.ssd.erases();
        core.media.seen(erases);
        self.faults.check_end_of_life(profile, &core.ssd);
        drop(core);
        log::info!("aged the NAND to {percent} % of its rated cycles ({added} erases)");
        Ok(added)
    }
}
