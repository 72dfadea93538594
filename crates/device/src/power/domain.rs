//! The power domain: whether the drive has power, the cut waiting for its
//! moment, carrying a cut out (close every connection, wait for the data
//! I/O under way, undo what the drive loses), automatic power-on, and the
//! audit of every write until it is durable.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockReadGuard, Weak};
use std::{io, time::Duration};

use log::{error, warn};
use vm_memory::VolatileSlice;
use vssd_common::rng::{Rng, derive_seed};
use vssd_model::Durability;

use super::audit::{Audit, CutPlan, Record, plan_cut};
use super::{Armed, Classes, CutReport, CutTrigger, MAX_AFTER_WRITES, MAX_UNDO_BYTES, PowerReport};
use crate::drive::Core;
use crate::error::PowerError;
use crate::faults::MAX_PERIOD_MS;
use crate::{Device, PowerCutResult};

type PowerHook = Box<dyn Fn() + Send + Sync>;

/// What a write overwrote, per range (`None`: beyond the audit's bounds).
pub(crate) type Undo = Vec<(u64, Option<Vec<u8>>)>;

/// The power state, kept under the model lock (so a cut falls between two
/// requests in the model's order).
#[derive(Debug, Default)]
pub(crate) struct PowerState {
    armed: Option<Armed>,
    /// The automatic power-on the armed cut brings (ms of drive time).
    armed_restart_ms: Option<u64>,
    /// A cut decided and not yet carried out: its drive time, trigger and
    /// automatic power-on delay.
    pending_cut: Option<(u64, String, Option<u64>)>,
    off: bool,
    /// Drive time of the automatic power-on after the cut, if any.
    restart_at: Option<u64>,
    cuts: u64,
    last_cut: Option<CutReport>,
}

impl PowerState {
    /// The power is off (cut, not yet back on).
    pub fn off(&self) -> bool {
        self.off
    }

    /// Cuts so far.
    pub fn cuts(&self) -> u64 {
        self.cuts
    }

    /// The latest cut.
    pub fn last_cut(&self) -> Option<&CutReport> {
        self.last_cut.as_ref()
    }

    /// The drive time of an armed `--after-ms` / `--at` cut due by `now`.
    pub fn due_cut(&self, now: u64) -> Option<u64> {
        match self.armed {
            Some(Armed::At { model_ns }) if now >= model_ns => Some(model_ns),
            _ => None,
        }
    }

    /// When the power state changes next by itself (drive time), if it does.
    fn next_event(&self) -> Option<u64> {
        match (self.armed, self.restart_at) {
            (Some(Armed::At { model_ns }), _) => Some(model_ns),
            (_, Some(r)) if self.off => Some(r),
            _ => None,
        }
    }
}

/// The power domain's parts outside the model lock.
pub(crate) struct PowerDomain {
    /// Power is on (a quick test for frontends; the truth is
    /// [`PowerState::off`]).
    powered: AtomicBool,
    /// A cut is decided and waits to be carried out by [`Device::finish_cut`].
    cut_requested: AtomicBool,
    /// Requests hold it shared from submission to the end of their data
    /// I/O; a cut takes it exclusively, so it undoes writes whose data is
    /// in the store.
    gate: RwLock<()>,
    /// Called when the power goes (frontends close their connections).
    cut_hooks: Mutex<Vec<PowerHook>>,
    /// Called when the power comes back, before `power-on` answers
    /// (frontends listen again).
    on_hooks: Mutex<Vec<PowerHook>>,
    /// Writes are audited for power loss (the preset has no protection).
    track: bool,
    /// The preset's failure classes of a cut (Zheng et al.).
    classes: Classes,
    /// Seed of the cuts' random choices (the device's seed).
    seed: u64,
    /// The preset's flushes are lies: they program nothing.
    flush_lies: bool,
    /// Wakes the power timer ([`Device::spawn_power_timer`]) when a cut is
    /// armed or an automatic power-on is due.
    timer: Arc<(Mutex<u64>, Condvar)>,
}

impl PowerDomain {
    /// The power domain of a drive of `profile`, its cuts drawn from `seed`.
    pub fn new(profile: &vssd_profile::Profile, seed: u64) -> PowerDomain {
        PowerDomain {
            powered: AtomicBool::new(true),
            cut_requested: AtomicBool::new(false),
            gate: RwLock::new(()),
            cut_hooks: Mutex::new(Vec::new()),
            on_hooks: Mutex::new(Vec::new()),
            track: !profile.reliability.power_loss_protection,
            classes: Classes::of(&profile.reliability),
            seed,
            flush_lies: profile.reliability.flush_lies,
            timer: Arc::new((Mutex::new(0), Condvar::new())),
        }
    }

    /// Whether writes are audited (no power-loss protection).
    pub fn tracks(&self) -> bool {
        self.track
    }

    /// Whether the drive's flushes are lies.
    pub fn flush_lies(&self) -> bool {
        self.flush_lies
    }

    /// Whether the power is on.
    pub fn powered(&self) -> bool {
        self.powered.load(Relaxed)
    }

    /// Held by a request from its submission to the end of its data I/O.
    pub fn enter(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The power goes at drive time `t`: no request is taken from now on;
    /// [`Device::finish_cut`] carries the cut out.
    pub fn decide_cut(&self, st: &mut PowerState, t: u64, trigger: String) {
        st.off = true;
        st.armed = None;
        let restart = st.armed_restart_ms.take();
        st.pending_cut = Some((t, trigger, restart));
        self.powered.store(false, Relaxed);
        self.cut_requested.store(true, Relaxed);
    }

    /// Before a request at `now`: what the drive programmed while idle is
    /// durable from then (settled before this request's programs move the
    /// model's "programmed by" time later).
    pub fn settle_before(&self, core: &mut Core, now: u64) {
        if self.track && !core.audit.is_empty() {
            core.ssd.catch_up(now);
            let d = core.ssd.durability();
            core.audit.settle(d);
        }
    }

    /// After a request taken at `now`: what is durable now, and the
    /// records no cut can need any more.
    pub fn settle_after(&self, core: &mut Core, now: u64) {
        if self.track {
            let d = core.ssd.durability();
            core.audit.settle(d);
            core.audit.retire(now, self.classes.keep_ns());
        }
    }

    /// Audit a write taken at `now` and answered at `done`: `undo` holds
    /// what each of its ranges overwrote ([`Device::undo_of`]; empty for a
    /// write an injected fault failed, which changes nothing), kept until
    /// the write is durable. `durability` is the model's after it.
    /// Returns whether an armed `--after-writes` cut goes off with it.
    pub fn track_write(
        &self,
        st: &mut PowerState,
        audit: &mut Audit,
        durability: Durability,
        undo: Undo,
        (now, done): (u64, u64),
    ) -> bool {
        if self.track {
            for (offset, undo) in undo {
                let Some(undo) = undo else {
                    audit.count_untracked();
                    continue;
                };
                audit.push(Record {
                    offset,
                    undo,
                    submitted_ns: now,
                    acked_ns: done,
                    units_end: durability.placed,
                    durable_ns: None,
                });
            }
        }
        if let Some(Armed::AfterWrites { writes }) = st.armed {
            if writes <= 1 {
                self.decide_cut(st, now, "with a write (--after-writes)".into());
                return true;
            }
            st.armed = Some(Armed::AfterWrites { writes: writes - 1 });
        }
        false
    }

    /// The power is back: every frontend listens again before this returns.
    fn powered_on(&self) {
        for h in self
            .on_hooks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            h();
        }
    }

    fn wake_timer(&self) {
        let (lock, cv) = &*self.timer;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        cv.notify_all();
    }

    /// What a cut at `t` does to the audit (after a final settle).
    fn plan(&self, core: &mut Core, t: u64) -> CutPlan {
        if !self.track {
            return CutPlan::default();
        }
        core.ssd.catch_up(t);
        let d = core.ssd.durability();
        core.audit.settle(d);
        let records = core.audit.take_all();
        // Each cut draws from its own stream of the device's seed.
        let mut rng = Rng::new(derive_seed(&[
            self.seed,
            0x706f_7765_725f_6375, // "power_cu"
            core.power.cuts,
        ]));
        plan_cut(records, t, self.classes, &mut rng)
    }

    /// The armed cut for `trigger` at drive time `now`, checked.
    fn arm(trigger: CutTrigger, now: u64) -> Result<Option<Armed>, PowerError> {
        Ok(match trigger {
            CutTrigger::Now => None,
            CutTrigger::AfterWrites { writes } => {
                if !(1..=MAX_AFTER_WRITES).contains(&writes) {
                    return Err(PowerError::BadTrigger(format!(
                        "--after-writes {writes} must be between 1 and {MAX_AFTER_WRITES}"
                    )));
                }
                Some(Armed::AfterWrites { writes })
            }
            CutTrigger::AfterMs { ms } => {
                if ms > MAX_PERIOD_MS {
                    return Err(PowerError::BadTrigger(format!(
                        "--after-ms {ms} must be at most {MAX_PERIOD_MS}"
                    )));
                }
                Some(Armed::At {
                    model_ns: now + ms * 1_000_000,
                })
            }
            CutTrigger::At { ms } => {
                let at = ms.saturating_mul(1_000_000);
                if at <= now {
                    return Err(PowerError::BadTrigger(format!(
                        "--at {} s is not ahead: the drive's clock is at {:.3} s (ctl fault list: drive time)",
                        ms as f64 / 1000.0,
                        now as f64 / 1e9
                    )));
                }
                if at - now > MAX_PERIOD_MS * 1_000_000 {
                    return Err(PowerError::BadTrigger(format!(
                        "--at {} s is more than a day of drive time ahead (the clock is at {:.3} s)",
                        ms as f64 / 1000.0,
                        now as f64 / 1e9
                    )));
                }
                Some(Armed::At { model_ns: at })
            }
            CutTrigger::Random { seed } => Some(Armed::AfterWrites {
                writes: 1 + Rng::new(seed).below(1000),
            }),
        })
    }
}

impl Device {
    /// What a write of `ranges` overwrites, for the power audit: read
    /// from the store before the write takes the model lock, so the copy
    /// does not hold other queues up. Empty when nothing is audited (power-
    /// loss protection, power off, a read-only drive) and for a range
    /// beyond the audit's bounds (counted as untracked).
    pub(crate) fn undo_of(&self, ranges: &[(u64, u64)]) -> Undo {
        if !self.power.track || !self.power.powered() || self.faults.read_only() {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(ranges.len());
        for &(offset, len) in ranges {
            if self.drive.check(offset, len).is_err() {
                continue;
            }
            if len > MAX_UNDO_BYTES / 4 {
                out.push((offset, None));
                continue;
            }
            let mut undo = vec![0u8; len as usize];
            match self
                .drive
                .store()
                .read(offset, &[VolatileSlice::from(&mut undo[..])])
            {
                Ok(()) => out.push((offset, Some(undo))),
                Err(e) => {
                    warn!("power-loss audit: cannot read the previous contents at {offset}: {e}");
                    out.push((offset, None));
                }
            }
        }
        out
    }

    /// Carry out a decided cut: close the frontends' connections, wait for
    /// the requests whose data I/O is under way, undo the lost writes,
    /// save the state as it is after the cut.
    pub(crate) fn finish_cut(&self) {
        let pw = &self.power;
        if !pw.cut_requested.swap(false, Relaxed) {
            return;
        }
        for h in pw
            .cut_hooks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            h();
        }
        let _excl = pw.gate.write().unwrap_or_else(|e| e.into_inner());
        let mut core = self.drive.lock();
        let Some((t, trigger, restart_ms)) = core.power.pending_cut.take() else {
            return;
        };
        let plan = pw.plan(&mut core, t);
        // Newest first: each write's previous contents are what the one
        // before it (or the durable data) left.
        let store = self.drive.store();
        for (offset, data) in &plan.restores {
            let mut d = data.clone();
            if let Err(e) = store.write(*offset, &[VolatileSlice::from(&mut d[..])]) {
                error!("power cut: cannot restore {offset}+{}: {e}", d.len());
            }
        }
        if let Err(e) = store.sync() {
            error!("power cut: cannot sync the store: {e}");
        }
        let lost_bytes = plan.lost.iter().map(|l| l.length).sum();
        let restart_at = restart_ms.map(|ms| t.saturating_add(ms.saturating_mul(1_000_000)));
        warn!(
            "power cut at drive time {:.3} s ({trigger}): {} writes ({lost_bytes} bytes) lost, {} pending ones survived{}{}{}",
            t as f64 / 1e9,
            plan.lost.len(),
            plan.survived,
            if pw.track {
                ""
            } else {
                " (power-loss protection)"
            },
            if plan.mapping_lost {
                "; the mapping updates of the window were lost"
            } else {
                ""
            },
            restart_at
                .map(|r| format!("; power comes back at drive time {:.3} s", r as f64 / 1e9))
                .unwrap_or_default()
        );
        let st = &mut core.power;
        st.cuts += 1;
        st.restart_at = restart_at;
        st.last_cut = Some(CutReport {
            model_ns: t,
            trigger,
            protected: !pw.track,
            lost: plan.lost,
            lost_bytes,
            survived: plan.survived,
            reordered: plan.reordered,
            mapping_lost: plan.mapping_lost,
            restart_at_model_ns: restart_at,
        });
        drop(core);
        if let Err(e) = self.save_state() {
            warn!("power cut: {e}");
        }
        pw.wake_timer();
    }

    /// An armed `--after-ms` / `--at` cut whose time has come goes off; an
    /// automatic power-on whose time has come brings the power back.
    pub(crate) fn poll_power(&self) {
        {
            let mut core = self.drive.lock();
            let now = self.drive.now(&core);
            if let Some(t) = core.power.due_cut(now) {
                self.power.decide_cut(
                    &mut core.power,
                    t,
                    "its time came (--after-ms / --at)".to_string(),
                );
            }
        }
        self.finish_cut();
        let mut core = self.drive.lock();
        let now = self.drive.now(&core);
        let st = &mut core.power;
        if st.off && st.pending_cut.is_none() && st.restart_at.is_some_and(|r| now >= r) {
            st.off = false;
            st.restart_at = None;
            self.power.powered.store(true, Relaxed);
            drop(core);
            self.power.powered_on();
            log::info!("power on (automatic, --restart-after)");
        }
    }

    /// Start the thread that carries out timed power events on time: a cut
    /// armed for a drive time (`--after-ms`, `--at`) goes off then even if
    /// no request comes, and `--restart-after` powers the drive on. Without
    /// it they happen at the next request or [`Device::sample`]. The thread
    /// ends when the device is dropped.
    pub fn spawn_power_timer(dev: &Arc<Device>) -> io::Result<()> {
        let weak: Weak<Device> = Arc::downgrade(dev);
        let timer = dev.power.timer.clone();
        std::thread::Builder::new()
            .name("vssd-power".into())
            .spawn(move || {
                let (lock, cv) = &*timer;
                loop {
                    let wait = {
                        let Some(dev) = weak.upgrade() else { return };
                        dev.poll_power();
                        let core = dev.drive.lock();
                        match core.power.next_event() {
                            Some(at) => {
                                let now = dev.drive.now(&core);
                                // Drive time runs K times slower than the wall clock.
                                let ns = at.saturating_sub(now);
                                Duration::from_nanos(
                                    dev.drive.scale().to_wall(ns).clamp(100_000, 1_000_000_000),
                                )
                            }
                            None => Duration::from_secs(1),
                        }
                    };
                    let g = lock.lock().unwrap_or_else(|e| e.into_inner());
                    let seen = *g;
                    let _ = cv
                        .wait_timeout_while(g, wait, |n| *n == seen)
                        .unwrap_or_else(|e| e.into_inner());
                }
            })
            .map(|_| ())
    }

    /// Cut the power (`ctl power-cut`) now or arm a cut; with
    /// `restart_after_ms` the drive powers itself on again that long (drive
    /// time) after the cut.
    pub fn power_cut(
        &self,
        trigger: CutTrigger,
        restart_after_ms: Option<u64>,
    ) -> Result<PowerCutResult, PowerError> {
        if let Some(ms) = restart_after_ms
            && !(1..=MAX_PERIOD_MS).contains(&ms)
        {
            return Err(PowerError::BadTrigger(format!(
                "--restart-after {} s must be between 0.001 and {} s",
                ms as f64 / 1000.0,
                MAX_PERIOD_MS / 1000
            )));
        }
        let armed = {
            let mut core = self.drive.lock();
            if core.power.off {
                return Err(PowerError::AlreadyOff);
            }
            let now = self.drive.now(&core);
            let armed = PowerDomain::arm(trigger, now)?;
            let st = &mut core.power;
            st.armed_restart_ms = restart_after_ms;
            match armed {
                None => self.power.decide_cut(st, now, "now (ctl power-cut)".into()),
                Some(a) => {
                    log::info!("power cut armed: {a:?}");
                    st.armed = Some(a);
                }
            }
            armed
        };
        self.finish_cut();
        self.power.wake_timer();
        let cut = match armed {
            None => self.drive.lock().power.last_cut().cloned(),
            Some(_) => None,
        };
        Ok(PowerCutResult { cut, armed })
    }

    /// Power back on (`ctl power-on`): requests and connections are taken
    /// again; every frontend listens again before this returns.
    pub fn power_on(&self) -> Result<(), PowerError> {
        let mut core = self.drive.lock();
        let st = &mut core.power;
        if !st.off {
            return Err(PowerError::AlreadyOn);
        }
        st.off = false;
        st.restart_at = None;
        self.power.powered.store(true, Relaxed);
        drop(core);
        self.power.powered_on();
        log::info!("power on");
        Ok(())
    }

    /// Whether the drive has power (frontends refuse connections without).
    pub fn powered(&self) -> bool {
        self.power.powered()
    }

    /// Call `hook` whenever the power goes (a frontend closes its
    /// connections, as a real power loss does).
    pub fn on_power_cut(&self, hook: impl Fn() + Send + Sync + 'static) {
        self.power
            .cut_hooks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(hook));
    }

    /// Call `hook` whenever the power comes back, before `power-on`
    /// answers (a frontend that stopped listening listens again, so a
    /// client may connect as soon as the reply is in).
    pub fn on_power_on(&self, hook: impl Fn() + Send + Sync + 'static) {
        self.power
            .on_hooks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(hook));
    }

    /// The power state and the audit.
    pub fn power_report(&self) -> PowerReport {
        let core = self.drive.lock();
        let st = &core.power;
        PowerReport {
            powered: !st.off,
            drive_time_ns: self.drive.now(&core),
            armed_restart_after_ms: st.armed.and(st.armed_restart_ms),
            classes: self.power.classes,
            armed: st.armed,
            power_loss_protection: !self.power.track,
            flush_lies: self.power.flush_lies,
            cuts: st.cuts,
            last_cut: st.last_cut.clone(),
            pending_writes: core.audit.pending(),
            pending_undo_bytes: core.audit.undo_bytes(),
            untracked_writes: core.audit.untracked(),
        }
    }
}
