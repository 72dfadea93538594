//! The daemon's and the load generator's clock.

/// The furthest a drive's clock goes, ns of drive time: about 146 years,
/// half of what a u64 holds, so that no sum of a drive time and a bounded
/// delay overflows. Every time a client gives (an idle, a trace's
/// timestamps and waits) is refused beyond it, with the limit.
pub const MAX_DRIVE_NS: u64 = u64::MAX / 2;

/// `CLOCK_MONOTONIC` now, in ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid local `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Time dilation between the daemon's clock (wall time) and the drive
/// model's: the model's clock runs `K` times slower than the wall clock,
/// so that a guest too slow to keep the real drive busy (an emulated CPU,
/// TCG) can keep a drive `K` times slower busy — and every figure the
/// drive reports, measured on the model's clock, is the real drive's.
///
/// `K` has a resolution of 1/1000 and is at least 1. `K = 1` (the
/// default) converts nothing: every conversion is the identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimeScale {
    /// `K × 1000`.
    milli: u64,
}

/// Why a time scale was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeScaleError {
    /// Not a number.
    #[error("time scale {0:?} is not a number (expected K, such as 1, 2.5 or 10)")]
    NotANumber(String),
    /// Outside 1..=MAX.
    #[error("time scale {0} is outside 1 to {max} (the model's clock runs K times slower than the wall clock)", max = TimeScale::MAX)]
    OutOfRange(String),
}

impl Default for TimeScale {
    fn default() -> Self {
        Self::ONE
    }
}

impl TimeScale {
    /// No dilation.
    pub const ONE: Self = Self { milli: 1000 };

    /// The largest `K` accepted.
    pub const MAX: u64 = 1000;

    /// `K` (rounded to 1/1000), or an error outside `1..=MAX`.
    pub fn new(k: f64) -> Result<Self, TimeScaleError> {
        if !k.is_finite() || !(1.0..=Self::MAX as f64).contains(&k) {
            return Err(TimeScaleError::OutOfRange(format!("{k}")));
        }
        Ok(Self {
            milli: (k * 1000.0).round() as u64,
        })
    }

    /// `K`.
    pub fn factor(self) -> f64 {
        self.milli as f64 / 1000.0
    }

    /// Whether this is `K = 1`.
    pub fn is_one(self) -> bool {
        self.milli == 1000
    }

    /// A wall-clock time or duration (ns) → the model's (ns): `wall / K`,
    /// rounded down.
    pub fn to_model(self, wall_ns: u64) -> u64 {
        if self.is_one() {
            return wall_ns;
        }
        (u128::from(wall_ns) * 1000 / u128::from(self.milli)) as u64
    }

    /// A model time or duration (ns) → wall clock (ns): `model × K`,
    /// rounded up (a completion is never delivered before the model's
    /// time), saturating.
    pub fn to_wall(self, model_ns: u64) -> u64 {
        if self.is_one() {
            return model_ns;
        }
        let w = (u128::from(model_ns) * u128::from(self.milli)).div_ceil(1000);
        u64::try_from(w).unwrap_or(u64::MAX)
    }
}

impl std::fmt::Display for TimeScale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.factor())
    }
}

impl std::str::FromStr for TimeScale {
    type Err = TimeScaleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let k: f64 = s
            .trim()
            .parse()
            .map_err(|_| TimeScaleError::NotANumber(s.to_string()))?;
        Self::new(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_the_identity() {
        let one = TimeScale::default();
        assert!(one.is_one());
        for t in [0, 1, 999, 1_000_000_007, u64::MAX] {
            assert_eq!(one.to_model(t), t);
            assert_eq!(one.to_wall(t), t);
        }
    }

    #[test]
    fn model_time_runs_k_times_slower() {
        let k: TimeScale = "4".parse().unwrap();
        assert_eq!(k.factor(), 4.0);
        // 10 ms of wall time are 2.5 ms of the drive's.
        assert_eq!(k.to_model(10_000_000), 2_500_000);
        // A 100 µs drive latency is delivered 400 µs of wall time later.
        assert_eq!(k.to_wall(100_000), 400_000);
        let k: TimeScale = "2.5".parse().unwrap();
        assert_eq!(k.to_model(1000), 400);
        assert_eq!(k.to_wall(400), 1000);
        // Rounding: down to the model, up to the wall, so that a
        // completion converted back is never earlier than its model time.
        let k: TimeScale = "3".parse().unwrap();
        assert_eq!(k.to_model(10), 3);
        assert_eq!(k.to_wall(k.to_model(10)), 9);
        let k: TimeScale = "1.5".parse().unwrap();
        for m in [0u64, 1, 2, 3, 7, 1_000_001] {
            assert!(k.to_model(k.to_wall(m)) >= m, "{m}");
        }
        assert_eq!(TimeScale::new(1000.0).unwrap().to_wall(u64::MAX), u64::MAX);
    }

    #[test]
    fn bad_scales_are_refused() {
        for s in ["0.5", "0", "-2", "1001", "inf", "NaN"] {
            assert!(matches!(
                s.parse::<TimeScale>(),
                Err(TimeScaleError::OutOfRange(_))
            ));
        }
        assert!(matches!(
            "fast".parse::<TimeScale>(),
            Err(TimeScaleError::NotANumber(_))
        ));
    }
}
