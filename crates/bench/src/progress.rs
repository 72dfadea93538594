//! Progress of a benchmark run: on a terminal, an overall bar and a bar
//! per phase (finished phases staying visible), otherwise one line per
//! phase event, quiet in JSON mode.
//!
//! The overall bar counts the run's plan: each phase's drive time from the
//! simulator × K (an idle phase: its seconds, which the guest sleeps), the
//! wall time the run takes where the guest keeps up with the drive. Its ETA
//! is what is left of the plan, the current phase's share of it from the
//! rate the phase was measured at over its last seconds once that spans a
//! second (a guest slower than the drive shows there), and a guest boot
//! for each boot still to come once one has been timed. A boot is a step
//! of its own, with no bytes and no rate: the ETA while the first boot
//! runs says that it comes after the boot. Phase bars count the bytes the
//! simulator says the phase moves, never past them (the guest's own reads
//! and writes around a phase are not the phase's).

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use vssd_common::eta::{Rate, fmt_duration};

use super::results::PhaseResult;

/// What a phase is expected to take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhasePlan {
    /// The drive's time, s (the simulator's).
    pub drive_s: f64,
    /// The wall time where the guest keeps up: `drive_s` × K (an idle
    /// phase: its seconds; a host-side phase: 0, its wall time is this
    /// host's, the ETA has its measured rate).
    pub wall_s: f64,
    /// Host bytes it moves (0: it moves none, or the simulator cannot say).
    pub bytes: u64,
    /// A guest boot comes before it.
    pub boot_before: bool,
    /// The host does it through the control socket (erase, precondition).
    pub host_side: bool,
}

/// The run's plan: its phases, and the time scale K.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Phase by phase.
    pub phases: Vec<PhasePlan>,
    /// Time dilation.
    pub k: f64,
}

impl Plan {
    /// What phase `i` is expected to take: "~2m 00s wall (drive 24s × 5)",
    /// "~24s drive time", "~30s idle"; a host-side phase ages the drive as
    /// fast as this host computes, its drive time no guide to its wall
    /// time: "~1m 05s of drive time, at this host's speed" (none when it
    /// takes none).
    fn expect(&self, i: usize, idle: bool) -> Option<String> {
        let p = self.phases.get(i)?;
        let d = |s: f64| fmt_duration(Duration::from_secs_f64(s.max(0.0)));
        Some(if p.host_side {
            if p.drive_s < 0.5 {
                return None;
            }
            format!("~{} of drive time, at this host's speed", d(p.drive_s))
        } else if idle {
            format!("~{} idle", d(p.wall_s))
        } else if self.k == 1.0 {
            format!("~{} drive time", d(p.drive_s))
        } else {
            format!(
                "~{} wall (drive {} × {})",
                d(p.wall_s),
                d(p.drive_s),
                self.k
            )
        })
    }
}

/// The phase under way.
struct Current {
    i: usize,
    started: Instant,
    /// Bytes the drive moved since it began.
    bytes: u64,
    /// Its fraction done, when it says (a precondition).
    fraction: Option<f64>,
    /// Its progress (bytes or fraction) over the last seconds.
    rate: Rate,
}

#[derive(Default)]
struct State {
    plan: Option<Plan>,
    bar: Option<ProgressBar>,
    overall: Option<ProgressBar>,
    current: Option<Current>,
    /// Phases before this one are done.
    next: usize,
    /// A boot under way: since when, and the first phase it runs.
    booting: Option<(Instant, usize)>,
    /// The last boot's duration, s (to the first phase's start).
    boot_s: Option<f64>,
}

/// A progress reporter (clones share it).
#[derive(Clone)]
pub struct Progress {
    multi: Option<MultiProgress>,
    quiet: bool,
    total: usize,
    state: Arc<Mutex<State>>,
}

fn key_figure(r: &PhaseResult) -> String {
    let m = &r.metrics;
    let mbs = |k: &str| {
        m.get(k)
            .filter(|v| **v > 0.0)
            .map(|v| format!("{:.1} MB/s", v / 1e6))
    };
    let parts: Vec<String> = [
        mbs("write_bw").map(|s| format!("write {s}")),
        mbs("read_bw").map(|s| format!("read {s}")),
        mbs("median_bw").map(|s| format!("median {s}")),
        mbs("mean_bw").map(|s| format!("mean {s}")),
        m.get("trim_bytes")
            .map(|v| format!("{} trimmed", vssd_profile::size::format_size(*v as u64))),
        m.get("waf")
            .filter(|v| **v > 0.0)
            .map(|v| format!("WAF {v:.2}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    parts.join(", ")
}

/// "12.3 s" when wall and drive time agree, else "61.5 s wall, 12.3 s
/// drive time".
fn durations(r: &PhaseResult) -> String {
    if (r.wall_s - r.model_s).abs() <= 0.01 * r.wall_s.abs().max(0.1) {
        format!("{:.1} s", r.wall_s)
    } else {
        format!("{:.1} s wall, {:.1} s drive time", r.wall_s, r.model_s)
    }
}

impl State {
    /// What is left of the plan, s, and how many boots of unknown length
    /// (before the first has been timed) come on top.
    fn left(&self, now: Instant) -> Option<(f64, usize)> {
        let plan = self.plan.as_ref()?;
        let mut left = 0.0;
        let mut from = self.next;
        if let Some(c) = &self.current {
            let p = plan.phases.get(c.i)?;
            let measured = match (c.fraction, p.bytes) {
                (Some(f), _) => c.rate.time_left(1.0 - f),
                (None, b) if b > 0 => c.rate.time_left(b.saturating_sub(c.bytes) as f64),
                _ => None,
            };
            left += match measured {
                Some(d) => d.as_secs_f64(),
                // No rate yet, or a phase without one (idle, erase): the
                // plan's rest of it.
                None => (p.wall_s * (1.0 - self.fraction(c, p, now))).max(0.0),
            };
            from = c.i + 1;
        }
        let mut unknown = 0;
        let mut boot = |left: &mut f64, elapsed: f64| match self.boot_s {
            Some(b) => *left += (b - elapsed).max(0.0),
            None => unknown += 1,
        };
        if let Some((t, _)) = self.booting {
            boot(&mut left, now.duration_since(t).as_secs_f64());
        }
        for (j, p) in plan.phases.iter().enumerate().skip(from) {
            left += p.wall_s;
            // The boot under way is the one before its first phase.
            if p.boot_before && self.booting.is_none_or(|(_, first)| first != j) {
                boot(&mut left, 0.0);
            }
        }
        Some((left, unknown))
    }

    /// The current phase's fraction done: its own word, else its bytes,
    /// else its time.
    fn fraction(&self, c: &Current, p: &PhasePlan, now: Instant) -> f64 {
        match (c.fraction, p.bytes) {
            (Some(f), _) => f,
            (None, b) if b > 0 => (c.bytes as f64 / b as f64).min(1.0),
            _ if p.wall_s > 0.0 => {
                (now.duration_since(c.started).as_secs_f64() / p.wall_s).min(1.0)
            }
            _ => 0.0,
        }
    }

    /// The overall bar's position (ms of the plan) and message.
    fn overall_now(&self, now: Instant) -> Option<(u64, String)> {
        let plan = self.plan.as_ref()?;
        let done: f64 = plan
            .phases
            .iter()
            .take(self.next)
            .map(|p| p.wall_s)
            .sum::<f64>()
            + self.current.as_ref().map_or(0.0, |c| {
                plan.phases
                    .get(c.i)
                    .map_or(0.0, |p| p.wall_s * self.fraction(c, p, now))
            });
        let total: f64 = plan.phases.iter().map(|p| p.wall_s).sum();
        let d = |s: f64| fmt_duration(Duration::from_secs_f64(s.max(0.0)));
        let clock = if plan.k == 1.0 {
            "drive time".to_string()
        } else {
            format!("drive time × {}", plan.k)
        };
        let (left, unknown_boots) = self.left(now)?;
        // The first boot: nothing says how long it takes.
        let first_boot = self.booting.is_some() && self.boot_s.is_none();
        let others = unknown_boots - usize::from(first_boot);
        let eta = format!(
            "ETA {}{}{}",
            if first_boot { "after this boot " } else { "" },
            d(left),
            match others {
                0 => String::new(),
                1 => " + a boot".into(),
                n => format!(" + {n} boots"),
            }
        );
        Some((
            (done * 1000.0) as u64,
            format!("{} of {} planned ({clock}), {eta}", d(done), d(total)),
        ))
    }
}

impl Progress {
    /// Bars on a terminal (unless `quiet`), lines otherwise (unless `quiet`).
    pub fn new(total: usize, quiet: bool) -> Progress {
        let tty = std::io::stderr().is_terminal() && !quiet;
        Progress {
            multi: tty.then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr())),
            quiet,
            total,
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    /// The run's plan: an overall bar on a terminal, and each phase's
    /// expected time on its bar or line.
    pub fn plan(&self, plan: Plan) {
        let mut st = self.state();
        let total_ms = (plan.phases.iter().map(|p| p.wall_s).sum::<f64>() * 1000.0) as u64;
        st.plan = Some(plan);
        let Some(mp) = &self.multi else { return };
        let b = mp.add(ProgressBar::new(total_ms.max(1)));
        if let Ok(s) = ProgressStyle::with_template("{prefix:40} {wide_bar} {msg}") {
            b.set_style(s);
        }
        b.set_prefix(format!("overall ({} phases)", self.total));
        st.overall = Some(b);
        Self::refresh(&st);
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn refresh(st: &State) {
        if let (Some(o), Some((pos, msg))) = (&st.overall, st.overall_now(Instant::now())) {
            o.set_position(pos);
            o.set_message(msg);
        }
    }

    /// A message above the bars (or a line).
    pub fn say(&self, m: &str) {
        if self.quiet {
            return;
        }
        match &self.multi {
            Some(mp) => {
                let _ = mp.println(format!("vssd bench: {m}"));
            }
            None => eprintln!("vssd bench: {m}"),
        }
    }

    /// A bar of its own before the overall one, or a line.
    fn step_bar(&self, st: &mut State, label: &str, template: &str, len: Option<u64>) {
        if let Some(b) = st.bar.take() {
            b.finish();
        }
        let Some(mp) = &self.multi else {
            if !self.quiet {
                eprintln!("vssd bench: {label}");
            }
            return;
        };
        let bar = ProgressBar::new(len.unwrap_or(1));
        let b = match &st.overall {
            Some(o) => mp.insert_before(o, bar),
            None => mp.add(bar),
        };
        if let Ok(s) = ProgressStyle::with_template(template) {
            b.set_style(s);
        }
        b.set_prefix(label.to_string());
        b.enable_steady_tick(Duration::from_millis(200));
        st.bar = Some(b);
    }

    /// The guest boots for phases `first..=last`: a step of its own.
    pub fn booting(&self, first: usize, last: usize) {
        let mut st = self.state();
        st.current = None;
        st.booting = Some((Instant::now(), first));
        let phases = if first == last {
            format!("phase {}", first + 1)
        } else {
            format!("phases {}–{}", first + 1, last + 1)
        };
        let like = match st.boot_s {
            Some(s) => format!("the last took {}", fmt_duration(Duration::from_secs_f64(s))),
            None => "no estimate before the first".into(),
        };
        self.step_bar(
            &mut st,
            &format!("booting the guest for {phases}"),
            "{prefix:40} {spinner} {elapsed} wall  {msg}",
            None,
        );
        if let Some(b) = &st.bar {
            b.set_message(format!("({like})"));
        }
        Self::refresh(&st);
    }

    /// Phase `i` starts.
    pub fn begin(&self, i: usize, name: &str, kind: &str) {
        let mut st = self.state();
        if let Some((t, _)) = st.booting.take() {
            st.boot_s = Some(t.elapsed().as_secs_f64());
            if let Some(b) = st.bar.take() {
                b.finish_with_message("up");
            }
        }
        st.next = st.next.max(i);
        let plan = st.plan.as_ref();
        let p = plan.and_then(|p| p.phases.get(i)).copied();
        let expect = plan.and_then(|p| p.expect(i, kind == "idle"));
        let host_side = p.is_some_and(|p| p.host_side);
        let label = format!("[{}/{}] {name} ({kind})", i + 1, self.total);
        let bytes = p.map_or(0, |p| p.bytes);
        let time = match (&expect, host_side) {
            (Some(e), false) => format!("{{elapsed}} of {e}"),
            (Some(e), true) => format!("{{elapsed}} wall, {e}"),
            (None, _) => "{elapsed} wall".into(),
        };
        let tpl = if bytes > 0 {
            format!(
                "{{prefix:40}} {{wide_bar}} {{binary_bytes}}/{{binary_total_bytes}}, {time}  {{msg}}"
            )
        } else {
            format!("{{prefix:40}} {{spinner}} {time}  {{msg}}")
        };
        if self.multi.is_some() {
            self.step_bar(&mut st, &label, &tpl, (bytes > 0).then_some(bytes));
        } else if !self.quiet {
            match expect {
                Some(e) => eprintln!("vssd bench: {label}: started, {e}"),
                None => eprintln!("vssd bench: {label}: started"),
            }
        }
        let now = Instant::now();
        let mut rate = Rate::new(Duration::from_secs(5));
        rate.record(now, 0.0);
        st.current = Some(Current {
            i,
            started: now,
            bytes: 0,
            fraction: None,
            rate,
        });
        Self::refresh(&st);
    }

    /// Fraction done of a phase that knows it (precondition).
    pub fn fraction(&self, f: f64) {
        let mut st = self.state();
        let f = f.clamp(0.0, 1.0);
        if let Some(c) = &mut st.current {
            c.fraction = Some(f);
            c.rate.record(Instant::now(), f);
        }
        if let Some(b) = &st.bar {
            let len = b.length().unwrap_or(1);
            b.set_position((f * len as f64) as u64);
        }
        Self::refresh(&st);
    }

    /// The drive moved `bytes` host bytes in the last `interval_s` of the
    /// wall clock.
    pub fn rate(&self, bytes: u64, interval_s: f64) {
        let mut st = self.state();
        let k = st.plan.as_ref().map_or(1.0, |p| p.k);
        let planned = st.current.as_ref().and_then(|c| {
            st.plan
                .as_ref()
                .and_then(|p| p.phases.get(c.i))
                .map(|p| p.bytes)
        });
        if let Some(c) = &mut st.current {
            c.bytes = c.bytes.saturating_add(bytes);
            if c.fraction.is_none() {
                c.rate.record(Instant::now(), c.bytes as f64);
            }
        }
        let moved = st.current.as_ref().map_or(0, |c| c.bytes);
        if let Some(b) = &st.bar
            && let Some(c) = &st.current
        {
            if let Some(l) = planned.filter(|l| *l > 0 && c.fraction.is_none()) {
                b.set_position(moved.min(l));
            }
            if interval_s > 0.0 {
                let mbs = bytes as f64 / interval_s * k / 1e6;
                b.set_message(if k == 1.0 {
                    format!("{mbs:.1} MB/s")
                } else {
                    format!("{mbs:.1} MB/s drive time")
                });
            }
        }
        Self::refresh(&st);
    }

    /// The guest says phase `i` ended (results come after the boot): its
    /// bar stays, marked done.
    pub fn done(&self, i: usize) {
        let mut st = self.state();
        if st.current.as_ref().is_some_and(|c| c.i == i) {
            st.current = None;
        }
        st.next = st.next.max(i + 1);
        if let Some(b) = st.bar.take() {
            if let Some(l) = b.length().filter(|l| *l > 1) {
                b.set_position(l);
            }
            b.finish_with_message("done");
        }
        Self::refresh(&st);
    }

    /// Phase `i` ended with `r`.
    pub fn end(&self, i: usize, r: &PhaseResult) {
        self.done(i);
        if i + 1 == self.total
            && let Some(o) = self.state().overall.take()
        {
            o.finish_and_clear();
        }
        let line = format!(
            "[{}/{}] {} ({}): {}{}",
            i + 1,
            self.total,
            r.name,
            r.kind,
            durations(r),
            match key_figure(r) {
                s if s.is_empty() => String::new(),
                s => format!(", {s}"),
            }
        );
        self.say(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A precondition (4 s), a boot, a fio phase (10 s, 1000 bytes), an
    /// idle phase (5 s), another boot, a last phase (3 s); K = 5.
    fn state() -> State {
        let p = |wall_s: f64, bytes: u64, boot_before: bool| PhasePlan {
            drive_s: wall_s / 5.0,
            wall_s,
            bytes,
            boot_before,
            host_side: false,
        };
        State {
            plan: Some(Plan {
                phases: vec![
                    p(4.0, 0, false),
                    p(10.0, 1000, true),
                    p(5.0, 0, false),
                    p(3.0, 0, true),
                ],
                k: 5.0,
            }),
            next: 1,
            ..State::default()
        }
    }

    fn at(t0: Instant, s: f64) -> Instant {
        t0 + Duration::from_secs_f64(s)
    }

    #[test]
    fn the_first_boot_is_a_step_with_no_eta_of_its_own() {
        let t0 = Instant::now();
        let mut st = state();
        st.booting = Some((t0, 1));
        let (pos, msg) = st.overall_now(at(t0, 30.0)).unwrap();
        assert_eq!(pos, 4000, "the precondition's 4 s done");
        assert_eq!(
            msg,
            "4s of 22s planned (drive time × 5), ETA after this boot 18s + a boot"
        );
    }

    /// Once the guest is up, the phase's rest comes from the plan until a
    /// second's rate is measured, then from the rate (here slower than
    /// planned); a timed boot counts for the boot to come; bytes past the
    /// plan's do not take the bar past it.
    #[test]
    fn eta_from_the_plan_then_from_the_measured_rate() {
        let t0 = Instant::now();
        let mut st = state();
        st.boot_s = Some(20.0);
        let mut rate = Rate::new(Duration::from_secs(5));
        rate.record(t0, 0.0);
        rate.record(at(t0, 0.5), 100.0);
        st.current = Some(Current {
            i: 1,
            started: t0,
            bytes: 100,
            fraction: None,
            rate,
        });
        let (pos, msg) = st.overall_now(at(t0, 0.5)).unwrap();
        assert_eq!(pos, 5000);
        assert!(msg.ends_with("ETA 37s"), "9 + 5 + 20 + 3: {msg}");
        let c = st.current.as_mut().unwrap();
        c.bytes = 200;
        c.rate.record(at(t0, 4.0), 200.0);
        let (_, msg) = st.overall_now(at(t0, 4.0)).unwrap();
        assert!(
            msg.ends_with("ETA 44s"),
            "800 B at 50 B/s: 16 s, + 28: {msg}"
        );
        st.current.as_mut().unwrap().bytes = 5000;
        let (pos, _) = st.overall_now(at(t0, 5.0)).unwrap();
        assert_eq!(pos, 14_000, "the phase counts its plan, no more");
    }

    #[test]
    fn a_phase_line_says_which_clock() {
        let st = state();
        let plan = st.plan.as_ref().unwrap();
        let e = |p: &Plan, i, idle| p.expect(i, idle).unwrap();
        assert_eq!(e(plan, 1, false), "~10s wall (drive 2s × 5)");
        assert_eq!(e(plan, 2, true), "~5s idle");
        let mut one = Plan {
            k: 1.0,
            ..plan.clone()
        };
        assert_eq!(e(&one, 1, false), "~2s drive time");
        one.phases[0].host_side = true;
        one.phases[0].drive_s = 65.0;
        assert_eq!(
            e(&one, 0, false),
            "~1m 05s of drive time, at this host's speed"
        );
        one.phases[0].drive_s = 0.0;
        assert_eq!(one.expect(0, false), None);
        let mut r = crate::testdata::trim_recovery().phases[1].clone();
        (r.wall_s, r.model_s) = (61.5, 12.3);
        assert_eq!(durations(&r), "61.5 s wall, 12.3 s drive time");
        r.model_s = 61.5;
        assert_eq!(durations(&r), "61.5 s");
    }
}
