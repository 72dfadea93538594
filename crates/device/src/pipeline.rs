//! The request pipeline every I/O goes through, in three explicit steps
//! under one hold of the model lock:
//!
//! 1. **admit** ([`Device::admit`]): the drive is running, the ranges are
//!    inside it, the power is on (an armed cut whose time came goes off
//!    here), a read-only drive takes no write, a stall holds the drive,
//!    and the audit learns what the drive programmed while idle;
//! 2. **model** ([`Admitted::model`]): each range goes to the FTL, the
//!    TRIM census counts what a TRIM frees before it is submitted, and a
//!    throttle delays the completion;
//! 3. **settle** ([`Device::conclude`]): after the caller applied what the
//!    request's kind needs (media faults, the write audit), the wear
//!    models see the erases, the audit what is durable, and the
//!    completion comes back on the daemon clock.
//!
//! Nothing here calls back into the device: each step takes the parts
//! of the locked state it needs and the components ([`FaultInjector`],
//! [`PowerDomain`]) work on them.
//!
//! [`FaultInjector`]: crate::faults::FaultInjector
//! [`PowerDomain`]: crate::power::PowerDomain

use std::sync::MutexGuard;

use vssd_model::{Op, Payload, Request};

use crate::drive::{Core, Drive};
use crate::error::{DeviceError, model_error_is_request_error};
use crate::faults::FaultInjector;
use crate::request::{Pending, Status};
use crate::stats::TrimOutcome;
use crate::{Device, WARN_LIMIT};

/// A request the drive took: the model lock, and the drive time it was taken at.
pub(crate) struct Admitted<'a> {
    /// The locked state.
    pub core: MutexGuard<'a, Core>,
    /// Drive time the request was taken at.
    pub now: u64,
}

impl Admitted<'_> {
    /// Submit `ranges` to the model at one instant; with `census`, count
    /// what each range frees before it is submitted (a TRIM's audit).
    /// Returns the drive time the last range completes, a throttle
    /// included. A failure inside the model stops the drive.
    pub fn model(
        &mut self,
        drive: &Drive,
        faults: &FaultInjector,
        op: Op,
        ranges: &[(u64, u64)],
        payload: Payload,
        mut census: Option<&mut TrimOutcome>,
    ) -> Result<u64, DeviceError> {
        let mut done = self.now;
        for &(offset, len) in ranges {
            if let Some(c) = census.as_deref_mut() {
                c.add_range(&self.core.ssd, offset, len);
            }
            let req = Request {
                op,
                offset,
                len,
                payload,
            };
            match self.core.ssd.submit(self.now, &req) {
                Ok(c) => done = done.max(c.done_ns),
                Err(e) if model_error_is_request_error(&e) => return Err(e.into()),
                Err(e) => {
                    drive.stop(format!("the drive model failed: {e}"));
                    return Err(e.into());
                }
            }
        }
        // A throttle delays the completion the host sees (and the audit's
        // acknowledgement time with it).
        if let Some(t) = faults
            .registry()
            .throttle(self.now, done, throttled_bytes(op, ranges))
        {
            done = t;
        }
        Ok(done)
    }
}

impl Device {
    /// Admit request `p` of kind `op` over `ranges` (step 1).
    pub(crate) fn admit(
        &self,
        p: &Pending,
        op: Op,
        ranges: &[(u64, u64)],
    ) -> Result<Admitted<'_>, DeviceError> {
        self.drive.running()?;
        for &(o, l) in ranges {
            self.drive.check(o, l)?;
        }
        let mut core = self.drive.lock();
        let now = (self.drive.model_clock(p.submit_ns()) + core.clock.offset_ns())
            .max(core.clock.last_ns());
        if core.power.off() {
            return Err(DeviceError::PoweredOff);
        }
        if !matches!(op, Op::Read | Op::Flush) && self.faults.read_only() {
            return Err(DeviceError::ReadOnly);
        }
        if let Some(t) = core.power.due_cut(now) {
            self.power.decide_cut(
                &mut core.power,
                t,
                "its time came (--after-ms / --at)".to_string(),
            );
            return Err(DeviceError::PoweredOff);
        }
        if let Some(until) = self.faults.registry().stall_until(now) {
            core.ssd.hold_until(until);
        }
        self.power.settle_before(&mut core, now);
        let (now, seq) = core.clock.take(now);
        p.submitted(now - core.clock.offset_ns(), seq);
        Ok(Admitted { core, now })
    }

    /// Settle a request the model completes at drive time `done` (step
    /// 3): the wear models see its erases, the audit what is durable;
    /// the completion on the daemon clock.
    pub(crate) fn conclude(&self, mut a: Admitted<'_>, done: u64) -> u64 {
        let core = &mut *a.core;
        self.faults.erases(&mut core.ssd, &mut core.media);
        self.power.settle_after(core, a.now);
        self.drive
            .scale()
            .to_wall(done.saturating_sub(core.clock.offset_ns()))
    }

    /// A request without anything of its own to settle: admit, model, settle.
    pub(crate) fn submit(
        &self,
        p: &Pending,
        op: Op,
        ranges: &[(u64, u64)],
    ) -> Result<u64, DeviceError> {
        let mut a = self.admit(p, op, ranges)?;
        let done = a.model(
            &self.drive,
            &self.faults,
            op,
            ranges,
            Payload::Unknown,
            None,
        )?;
        Ok(self.conclude(a, done))
    }

    /// Turn the outcome of a request into its pending completion.
    pub(crate) fn answer(&self, mut p: Pending, r: Result<u64, DeviceError>) -> Pending {
        match r {
            Ok(due) => p.finish(Status::Ok, due),
            Err(DeviceError::ReadOnly) => {
                log::debug!("{:?} refused: the drive is read-only", p.op());
                p.fail(Status::IoError);
            }
            Err(DeviceError::PoweredOff) => {
                log::debug!("{:?} refused: the power is off", p.op());
                p.fail(Status::Stopped);
            }
            Err(DeviceError::Media { fault, due }) => {
                log::debug!("{:?} failed by injected fault {fault}", p.op());
                p.finish(Status::IoError, due);
            }
            Err(e) => {
                let st = e.status();
                match st {
                    Status::Invalid => log::debug!("{:?} refused: {e}", p.op()),
                    _ => self.accounting.warn_io(&p, &e, WARN_LIMIT),
                }
                p.fail(st);
            }
        }
        p
    }
}

/// The bytes a throttle counts for a request: what reads and writes move
/// (writing zeros without unmapping moves them too); none for the rest.
fn throttled_bytes(op: Op, ranges: &[(u64, u64)]) -> u64 {
    match op {
        Op::Read | Op::Write | Op::WriteZeroes { unmap: false } => ranges.iter().map(|r| r.1).sum(),
        _ => 0,
    }
}
