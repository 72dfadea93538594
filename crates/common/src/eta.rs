//! Time left of a job counted in units (bytes, planned seconds), from the
//! rate measured over its last few seconds: a progress display's ETA.
//!
//! No rate, and so no ETA, until the measurements span [`MIN_SPAN`]: a
//! rate over a fraction of a second (the first bytes of a job, or none yet
//! while a guest boots) gives ETAs of weeks or of nothing.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The shortest span a rate is measured over.
pub const MIN_SPAN: Duration = Duration::from_secs(1);

/// A job's rate over a sliding window of its progress.
#[derive(Debug, Clone)]
pub struct Rate {
    window: Duration,
    /// (when, units done by then), oldest first.
    points: VecDeque<(Instant, f64)>,
}

impl Rate {
    /// A rate over the last `window` (at least [`MIN_SPAN`]).
    pub fn new(window: Duration) -> Rate {
        Rate {
            window: window.max(MIN_SPAN),
            points: VecDeque::new(),
        }
    }

    /// `done` units were done at `at` (a count that only grows; a smaller
    /// one starts the measurement afresh).
    pub fn record(&mut self, at: Instant, done: f64) {
        if self.points.back().is_some_and(|p| done < p.1 || at < p.0) {
            self.points.clear();
        }
        self.points.push_back((at, done));
        // Keep the newest point at least `window` old, so the span covers
        // the window once the job has run that long.
        while self
            .points
            .get(1)
            .is_some_and(|p| at.duration_since(p.0) >= self.window)
        {
            self.points.pop_front();
        }
    }

    /// Units per second over the window; none before the measurements
    /// span [`MIN_SPAN`], or when nothing moved over it.
    pub fn per_s(&self) -> Option<f64> {
        let (a, b) = (self.points.front()?, self.points.back()?);
        let span = b.0.duration_since(a.0);
        let moved = b.1 - a.1;
        (span >= MIN_SPAN && moved > 0.0).then(|| moved / span.as_secs_f64())
    }

    /// Time to do `remaining` more units at the measured rate.
    pub fn time_left(&self, remaining: f64) -> Option<Duration> {
        let r = self.per_s()?;
        let s = remaining.max(0.0) / r;
        (s.is_finite() && s < 1e9).then(|| Duration::from_secs_f64(s))
    }
}

/// A duration as a progress line says it: `42s`, `3m 05s`, `1h 02m`.
pub fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s / 60 % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn no_rate_over_less_than_a_second() {
        let t0 = Instant::now();
        let mut r = Rate::new(Duration::from_secs(5));
        assert_eq!(r.per_s(), None);
        r.record(t0, 0.0);
        r.record(at(t0, 200), 1000.0);
        r.record(at(t0, 900), 5000.0);
        assert_eq!(r.per_s(), None, "0.9 s is not enough");
        assert_eq!(r.time_left(1.0), None);
        r.record(at(t0, 1000), 5000.0);
        assert_eq!(r.per_s(), Some(5000.0));
        assert_eq!(r.time_left(10_000.0), Some(Duration::from_secs(2)));
    }

    /// The rate follows the job's last `window`: a job that slows down
    /// (a fill, then random writes) gets the slower rate's ETA.
    #[test]
    fn the_rate_is_the_windows() {
        let t0 = Instant::now();
        let mut r = Rate::new(Duration::from_secs(2));
        for s in 0..=10 {
            r.record(at(t0, s * 1000), (s * 100) as f64);
        }
        assert_eq!(r.per_s(), Some(100.0));
        for s in 11..=14 {
            r.record(at(t0, s * 1000), 1000.0 + ((s - 10) * 10) as f64);
        }
        assert_eq!(r.per_s(), Some(10.0));
        // Stalled: no rate rather than an infinite ETA.
        r.record(at(t0, 17_000), 1040.0);
        assert_eq!(r.per_s(), None);
        // A count that went back starts afresh.
        r.record(at(t0, 18_000), 0.0);
        assert_eq!(r.per_s(), None);
    }

    #[test]
    fn durations_read_as_a_progress_line_says_them() {
        assert_eq!(fmt_duration(Duration::from_millis(400)), "0s");
        assert_eq!(fmt_duration(Duration::from_secs(42)), "42s");
        assert_eq!(fmt_duration(Duration::from_secs(185)), "3m 05s");
        assert_eq!(fmt_duration(Duration::from_secs(3720)), "1h 02m");
    }
}
