//! Progress of a benchmark run: on a terminal a bar per phase (name,
//! elapsed / expected, current MB/s); otherwise one line per phase event,
//! quiet in JSON mode.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::results::PhaseResult;

#[derive(Default)]
struct State {
    bar: Option<ProgressBar>,
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

    /// Phase `i` starts; `expected_s` from a simulator run if known.
    pub fn begin(&self, i: usize, name: &str, kind: &str, expected_s: Option<f64>) {
        let mut st = self.state();
        if let Some(b) = st.bar.take() {
            b.finish_and_clear();
        }
        st.name = name.to_string();
        st.rate = 0.0;
        let label = format!("[{}/{}] {name} ({kind})", i + 1, self.total);
        match &self.multi {
            Some(mp) => {
                let exp = expected_s.unwrap_or(0.0).max(0.0);
                let b = mp.add(ProgressBar::new((exp * 1000.0).max(1.0) as u64));
                let tpl = if expected_s.is_some() {
                    "{prefix:40} {wide_bar} {elapsed:>5} of ~{len_s}  {msg}"
                } else {
                    "{prefix:40} {spinner} {elapsed:>5}  {msg}"
                };
                let len_s = format!("{:.0}s", exp);
                if let Ok(s) = ProgressStyle::with_template(&tpl.replace("{len_s}", &len_s)) {
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

    /// Host bytes/s moved in the last second.
    pub fn rate(&self, bytes_s: f64) {
        let mut st = self.state();
        st.rate = bytes_s;
        if let Some(b) = &st.bar {
            if let Some(len) = b.length() {
                let elapsed = b.elapsed().as_millis() as u64;
                b.set_position(elapsed.min(len));
            }
            b.set_message(format!("{:.1} MB/s", bytes_s / 1e6));
        }
    }

    /// The guest says phase `i` ended (results come after the boot).
    pub fn done(&self, _i: usize) {
        let mut st = self.state();
        if let Some(b) = st.bar.take() {
            b.finish_and_clear();
        }
    }

    /// Phase `i` ended with `r`.
    pub fn end(&self, i: usize, r: &PhaseResult) {
        self.done(i);
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
