//! Progress of a benchmark run: on a terminal, an overall bar (bytes the
//! drive moved of those the simulator says the run moves, the measured
//! rate, an ETA) and a bar per phase (the same for the phase), finished
//! phases staying visible; otherwise one line per phase event, quiet in
//! JSON mode. Bytes, not time: a guest under TCG can take far longer than
//! the simulator's time for the same bytes, but it moves the same bytes.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::results::PhaseResult;

#[derive(Default)]
struct State {
    bar: Option<ProgressBar>,
    overall: Option<ProgressBar>,
    rate: f64,
    name: String,
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

    /// The whole run moves about `bytes` (the simulator's count): an
    /// overall bar with the measured rate and an ETA.
    pub fn plan(&self, bytes: u64) {
        let Some(mp) = &self.multi else { return };
        if bytes == 0 {
            return;
        }
        let b = mp.add(ProgressBar::new(bytes));
        if let Ok(s) = ProgressStyle::with_template(
            "{prefix:40} {wide_bar} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec}, ETA {eta}",
        ) {
            b.set_style(s);
        }
        b.set_prefix(format!("overall ({} phases)", self.total));
        self.state().overall = Some(b);
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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

    /// Phase `i` starts; `expected_s` and `expected_bytes` from a simulator
    /// run if known.
    pub fn begin(
        &self,
        i: usize,
        name: &str,
        kind: &str,
        expected_s: Option<f64>,
        expected_bytes: Option<u64>,
    ) {
        let mut st = self.state();
        if let Some(b) = st.bar.take() {
            b.finish();
        }
        st.name = name.to_string();
        st.rate = 0.0;
        let label = format!("[{}/{}] {name} ({kind})", i + 1, self.total);
        match &self.multi {
            Some(mp) => {
                let bytes = expected_bytes.filter(|b| *b > 0);
                let b = match (&st.overall, bytes) {
                    (Some(o), _) => mp.insert_before(o, ProgressBar::new(bytes.unwrap_or(1))),
                    (None, _) => mp.add(ProgressBar::new(bytes.unwrap_or(1))),
                };
                let tpl = match (bytes, expected_s) {
                    (Some(_), Some(s)) => format!(
                        "{{prefix:40}} {{wide_bar}} {{binary_bytes}}/{{binary_total_bytes}}, {{elapsed}} (drive time ~{s:.0}s)  {{msg}}"
                    ),
                    (Some(_), None) => {
                        "{prefix:40} {wide_bar} {binary_bytes}/{binary_total_bytes}, {elapsed}  {msg}"
                            .to_string()
                    }
                    (None, _) => "{prefix:40} {spinner} {elapsed:>5}  {msg}".to_string(),
                };
                if let Ok(s) = ProgressStyle::with_template(&tpl) {
                    b.set_style(s);
                }
                b.set_prefix(label);
                b.enable_steady_tick(Duration::from_millis(200));
                st.bar = Some(b);
            }
            None if !self.quiet => eprintln!("vssd bench: {label}: started"),
            None => {}
        }
    }

    /// Fraction done of a phase that knows it (precondition).
    pub fn fraction(&self, f: f64) {
        let st = self.state();
        if let Some(b) = &st.bar {
            let len = b.length().unwrap_or(1);
            b.set_position((f.clamp(0.0, 1.0) * len as f64) as u64);
        }
    }

    /// Host bytes the drive moved in the last second.
    pub fn rate(&self, bytes_s: f64) {
        let mut st = self.state();
        st.rate = bytes_s;
        let n = bytes_s.max(0.0) as u64;
        if let Some(b) = &st.bar {
            if b.length().is_some_and(|l| l > 1) {
                b.inc(n);
            }
            b.set_message(format!("{:.1} MB/s", bytes_s / 1e6));
        }
        if let Some(o) = &st.overall {
            o.inc(n);
        }
    }

    /// The guest says phase `i` ended (results come after the boot): its
    /// bar stays, marked done.
    pub fn done(&self, _i: usize) {
        let mut st = self.state();
        if let Some(b) = st.bar.take() {
            if let Some(l) = b.length().filter(|l| *l > 1) {
                b.set_position(l);
            }
            b.finish_with_message("done");
        }
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
            "[{}/{}] {} ({}): {:.1} s{}",
            i + 1,
            self.total,
            r.name,
            r.kind,
            r.wall_s,
            match key_figure(r) {
                s if s.is_empty() => String::new(),
                s => format!(", {s}"),
            }
        );
        self.say(&line);
    }
}
