//! Temperature and thermal throttling (`[thermal]`): a lumped thermal
//! model driven by the energy of what the drive does, and the throttle
//! steps it triggers. See "Thermal throttling" in docs/model.md.
//!
//! The temperature `T` relaxes towards `ambient + R × P` with time
//! constant `τ`, where the power `P` over an interval is the idle power
//! plus the energy of the NAND programs, NAND reads and host-link bytes
//! counted in it, over its length. Over an interval of `dt` with energy
//! `E` spread evenly:
//!
//! ```text
//! T' = ambient + R·P_idle + (T − ambient − R·P_idle)·e^(−dt/τ) + R·E/dt·(1 − e^(−dt/τ))
//! ```
//!
//! (for `dt` → 0 the last term is `R·E/τ`, so many short intervals add
//! up to one long one). The energy is counted when the work is reserved,
//! which for GC and folding is a little ahead of when the dies do it.
//! At or above a step's temperature the drive caps its host transfers at
//! the step's rates, and leaves the step `hysteresis_c` below it.

use super::types::{Count, Tally};
use vssd_profile::Profile;

/// Most throttle steps a profile may have.
pub(crate) const MAX_LEVELS: usize = 4;

/// The thermal state and its parameters (inert when the profile has no
/// `[thermal]`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Thermal {
    on: bool,
    ambient: f64,
    idle_w: f64,
    r: f64,
    tau_ns: f64,
    /// J per byte programmed, read from NAND, over the link.
    e_prog: f64,
    e_read: f64,
    e_link: f64,
    page_bytes: u64,
    hysteresis: f64,
    warning: f64,
    critical: f64,
    /// Per step: (temperature, link ns per byte cap for reads, for writes).
    levels: Vec<(f64, f64, f64)>,
    /// The state: temperature, step (0 = none, k = `levels[k − 1]`), when
    /// it was last brought up to date and the counts then.
    temp: f64,
    level: usize,
    last_ns: u64,
    last_prog: u64,
    last_read_pages: u64,
    last_link: u64,
    /// The highest temperature reached.
    peak: f64,
    /// Per step: times entered, ns spent in it.
    entered: [u64; MAX_LEVELS],
    time_in: [u64; MAX_LEVELS],
    /// ns at or above the warning / critical temperature.
    warning_ns: u64,
    critical_ns: u64,
}

/// What the thermal model reports (see [`crate::Counters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct ThermalReport {
    pub(crate) temp: f64,
    pub(crate) peak: f64,
    pub(crate) level: u32,
    pub(crate) entered: [u64; MAX_LEVELS],
    pub(crate) time_in: [u64; MAX_LEVELS],
    pub(crate) warning_ns: u64,
    pub(crate) critical_ns: u64,
}

impl Thermal {
    /// The drive's thermal model, at its idle temperature (none without
    /// `[thermal]`).
    pub(crate) fn new(p: &Profile) -> Thermal {
        let t = &p.thermal;
        if !t.enabled() {
            return Thermal::default();
        }
        let cap = |mb_s: f64| if mb_s > 0.0 { 1e3 / mb_s } else { 0.0 };
        let idle = t.ambient_c + t.c_per_w * t.idle_w;
        Thermal {
            on: true,
            ambient: t.ambient_c,
            idle_w: t.idle_w,
            r: t.c_per_w,
            tau_ns: t.tau_s * 1e9,
            e_prog: t.program_nj_per_byte * 1e-9,
            e_read: t.read_nj_per_byte * 1e-9,
            e_link: t.link_nj_per_byte * 1e-9,
            page_bytes: p.geometry.page_size.0,
            hysteresis: t.hysteresis_c,
            warning: t.warning_c,
            critical: t.critical_c,
            levels: t
                .levels
                .iter()
                .take(MAX_LEVELS)
                .map(|l| (l.at_c, cap(l.read_mb_s), cap(l.write_mb_s)))
                .collect(),
            temp: idle,
            peak: idle,
            ..Thermal::default()
        }
    }

    /// Whether the drive has a thermal model.
    #[inline(always)]
    pub(crate) fn enabled(&self) -> bool {
        self.on
    }

    /// The throttle step now (0: none).
    #[inline(always)]
    pub(crate) fn level(&self) -> usize {
        self.level
    }

    /// What to report.
    pub(crate) fn report(&self) -> ThermalReport {
        ThermalReport {
            temp: self.temp,
            peak: self.peak,
            level: self.level as u32,
            entered: self.entered,
            time_in: self.time_in,
            warning_ns: self.warning_ns,
            critical_ns: self.critical_ns,
        }
    }

    /// Bring the temperature up to `now`, given the cumulative NAND bytes
    /// programmed, NAND pages read and host bytes moved.
    fn advance(&mut self, now: u64, prog: u64, read_pages: u64, link: u64) {
        if now <= self.last_ns
            && prog == self.last_prog
            && read_pages == self.last_read_pages
            && link == self.last_link
        {
            return;
        }
        let dt = now.saturating_sub(self.last_ns) as f64;
        let energy = (prog - self.last_prog) as f64 * self.e_prog
            + ((read_pages - self.last_read_pages) * self.page_bytes) as f64 * self.e_read
            + (link - self.last_link) as f64 * self.e_link;
        let base = self.ambient + self.r * self.idle_w;
        let x = dt / self.tau_ns;
        let decay = (-x).exp();
        let heat = if x > 1e-9 {
            self.r * energy / (dt * 1e-9) * (1.0 - decay)
        } else {
            self.r * energy / (self.tau_ns * 1e-9)
        };
        let before = self.temp;
        self.temp = base + (self.temp - base) * decay + heat;
        self.peak = self.peak.max(self.temp);
        // Time above the thresholds and in the step, counted at the
        // interval's end state (intervals are short while the drive works).
        let hot = before.max(self.temp);
        if self.warning > 0.0 && hot >= self.warning {
            self.warning_ns += dt as u64;
        }
        if self.critical > 0.0 && hot >= self.critical {
            self.critical_ns += dt as u64;
        }
        if self.level > 0 {
            self.time_in[self.level - 1] += dt as u64;
        }
        while self.level < self.levels.len() && self.temp >= self.levels[self.level].0 {
            self.entered[self.level] += 1;
            self.level += 1;
        }
        while self.level > 0 && self.temp < self.levels[self.level - 1].0 - self.hysteresis {
            self.level -= 1;
        }
        self.last_ns = self.last_ns.max(now);
        self.last_prog = prog;
        self.last_read_pages = read_pages;
        self.last_link = link;
    }

    /// Host link time of `bytes` under the current step: `base` (the
    /// link's own) or the step's cap, whichever is longer.
    #[inline]
    fn capped(&self, base: u64, bytes: u64, write: bool) -> u64 {
        let (_, r, w) = self.levels[self.level - 1];
        let per_byte = if write { w } else { r };
        base.max((bytes as f64 * per_byte) as u64)
    }
}

impl Thermal {
    /// Bring the temperature and throttle step up to `now` from the
    /// drive's running totals (nothing without `[thermal]`).
    #[inline]
    pub(super) fn tick(&mut self, now: u64, t: &Tally) {
        if !self.enabled() {
            return;
        }
        let (prog, read, link) = (
            t.get(Count::NandBytesProgrammed),
            t.get(Count::NandPagesRead),
            t.get(Count::HostReadBytes) + t.get(Count::HostWrittenBytes),
        );
        self.advance(now, prog, read, link);
    }

    /// Host link time of a transfer of `bytes` (`write`: to the drive)
    /// that takes `base` unthrottled, slowed to the throttle step's rate
    /// while the drive throttles.
    #[inline(always)]
    pub(super) fn link_ns(&self, base: u64, bytes: u64, write: bool) -> u64 {
        if self.level() == 0 {
            return base;
        }
        self.capped(base, bytes, write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> Thermal {
        let mut p = Profile::load("nvme-tlc").unwrap();
        p.thermal.tau_s = 10.0;
        p.thermal.ambient_c = 25.0;
        p.thermal.idle_w = 1.0;
        p.thermal.c_per_w = 5.0;
        p.thermal.program_nj_per_byte = 2.0;
        p.thermal.levels = vec![vssd_profile::ThrottleLevel {
            at_c: 39.0,
            read_mb_s: 0.0,
            write_mb_s: 100.0,
        }];
        Thermal::new(&p)
    }

    #[test]
    fn heats_towards_the_steady_state_and_cools_back() {
        let mut t = model();
        assert_eq!(t.temp, 30.0, "idle: ambient + R x idle power");
        // 1 GB/s programmed for 100 s (10 tau): 2 W more, 10 K more.
        let mut prog = 0;
        for s in 1..=100u64 {
            prog += 1_000_000_000;
            t.advance(s * 1_000_000_000, prog, 0, 0);
        }
        assert!((t.temp - 40.0).abs() < 0.01, "{}", t.temp);
        assert_eq!(t.level, 1);
        // One long interval gives what many short ones give.
        let mut a = model();
        let mut b = model();
        a.advance(5_000_000_000, 5_000_000_000, 0, 0);
        for ms in 1..=5000u64 {
            b.advance(ms * 1_000_000, ms * 1_000_000, 0, 0);
        }
        assert!((a.temp - b.temp).abs() < 1e-6, "{} {}", a.temp, b.temp);
        // Idle: back towards 30, leaving the step below 37.
        t.advance(200_000_000_000, prog, 0, 0);
        assert!((t.temp - 30.0).abs() < 0.01);
        assert_eq!(t.level, 0);
        assert_eq!(t.entered[0], 1);
        assert!(t.time_in[0] > 0);
    }

    #[test]
    fn a_step_caps_the_host_link() {
        let mut t = model();
        t.level = 1;
        // 100 MB/s: 1 MB takes 10 ms at least.
        assert_eq!(t.capped(100, 1_000_000, true), 10_000_000);
        assert_eq!(t.capped(100, 1_000_000, false), 100, "reads not capped");
    }
}
