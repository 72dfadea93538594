//! Running a corpus protocol in the simulator and reading figures off it.

use std::collections::BTreeMap;

use vssd_model::Counters;
use vssd_profile::Profile;
use vssd_profile::size::parse_size;
use vssd_sim::Simulation;
use vssd_sim::jobfile::{self, Dir};
use vssd_sim::results::JobReport;

use super::ValidateError;
pub use super::format::from_the_end;
use super::format::{Metric, Protocol, Step};
use super::shape;

/// What one named fio step produced.
#[derive(Debug, Clone)]
pub struct StepResult {
    /// The step's job reports (one per job, as fio reports them).
    pub jobs: Vec<JobReport>,
    /// The drive's counters before and after the step.
    pub before: Counters,
    /// After.
    pub after: Counters,
    /// The run's time scale (the drive's capacity over the source's):
    /// a window of N seconds of the source's is N × this of the run.
    pub scale: f64,
}

impl StepResult {
    /// The job `job` (default: the step's first).
    fn job(&self, job: Option<&str>) -> Option<&JobReport> {
        match job {
            Some(name) => self.jobs.iter().find(|j| j.name == name),
            None => self.jobs.first(),
        }
    }

    /// The value of `metric` for job `job` (default: the step's first).
    pub fn value(&self, metric: Metric, job: Option<&str>) -> Option<f64> {
        let j = self.job(job)?;
        Some(match metric {
            Metric::WriteMbS => j.bw_bytes(Dir::Write) / 1e6,
            Metric::ReadMbS => j.bw_bytes(Dir::Read) / 1e6,
            Metric::WriteIops => j.iops(Dir::Write),
            Metric::ReadIops => j.iops(Dir::Read),
            Metric::MixedIops => j.iops(Dir::Read) + j.iops(Dir::Write),
            Metric::WriteLatMeanUs => j.dir[Dir::Write as usize].clat.mean() / 1e3,
            Metric::ReadLatMeanUs => j.dir[Dir::Read as usize].clat.mean() / 1e3,
            Metric::WriteLatMaxMs => j.dir[Dir::Write as usize].clat.max() as f64 / 1e6,
            Metric::ReadLatMaxMs => j.dir[Dir::Read as usize].clat.max() as f64 / 1e6,
            Metric::CopySeconds => j.runtime_ns() as f64 / 1e9,
            Metric::Waf => {
                let host = self
                    .after
                    .host_written_bytes
                    .saturating_sub(self.before.host_written_bytes);
                let nand = self
                    .after
                    .nand_bytes_programmed
                    .saturating_sub(self.before.nand_bytes_programmed);
                if host == 0 {
                    return None;
                }
                nand as f64 / host as f64
            }
            Metric::WriteMbSAfterDrop => {
                let s = Series::of(j, Dir::Write)?;
                s.after_drop(10.0 * self.scale, 0.8) / 1e6
            }
            Metric::TempEndC => self.after.temperature_c?,
            Metric::WriteGbBeforeDrop | Metric::WriteSBeforeDrop => {
                let s = Series::of(j, Dir::Write)?;
                let (secs, bytes) = s.before_drop(10.0 * self.scale, 0.8);
                // In the source's units: the drive was `scale` times smaller.
                if metric == Metric::WriteGbBeforeDrop {
                    bytes / 1e9 / self.scale
                } else {
                    secs / self.scale
                }
            }
        })
    }

    /// A shape's measure of the step's first job (see
    /// [`shape::is_measure`]): a metric, a window of its throughput over
    /// time, or the bytes it moved.
    pub fn measure(&self, name: &str) -> Option<f64> {
        if let Some(m) = Metric::from_name(name) {
            return self.value(m, None);
        }
        let j = self.job(None)?;
        match name {
            "write_gb" => {
                return Some(j.dir[Dir::Write as usize].io_bytes as f64 / 1e9 / self.scale);
            }
            "read_gb" => return Some(j.dir[Dir::Read as usize].io_bytes as f64 / 1e9 / self.scale),
            _ => {}
        }
        let (kind, secs, base) = shape::window(name)?;
        let secs = secs * self.scale;
        let d = if base.starts_with("read") {
            Dir::Read
        } else {
            Dir::Write
        };
        let s = Series::of(j, d)?;
        let w = s.windows(secs);
        let v = match kind {
            "first" => s.mean(0.0, secs),
            "last" => s.mean(s.seconds() - secs, s.seconds()),
            "min" => w.iter().copied().reduce(f64::min)?,
            _ => w.iter().copied().reduce(f64::max)?,
        };
        Some(v / 1e6)
    }
}

/// A job's throughput over time in one direction: bytes per second in
/// each interval of its bandwidth log, intervals without I/O included as 0.
#[derive(Debug, Clone)]
pub struct Series {
    /// Interval, s.
    dt: f64,
    /// Bytes/s per interval.
    v: Vec<f64>,
}

impl Series {
    /// The series of `j` in direction `d` (none without a log).
    pub fn of(j: &JobReport, d: Dir) -> Option<Series> {
        let log: Vec<(u64, f64)> = j
            .bw_log
            .iter()
            .filter(|s| s.dir == d)
            .map(|s| (s.msec, s.kib_s as f64 * 1024.0))
            .collect();
        // The log's interval: the most common gap between its stamps (a
        // last, partial interval or an interval without I/O makes others).
        let mut gaps: Vec<u64> = log
            .windows(2)
            .map(|w| w[1].0.saturating_sub(w[0].0))
            .filter(|&g| g > 0)
            .collect();
        gaps.sort_unstable();
        let dt_ms = gaps
            .chunk_by(|a, b| a == b)
            .max_by_key(|c| c.len())
            .map(|c| c[0])
            .or_else(|| log.first().map(|s| s.0))
            .filter(|&g| g > 0)?;
        let end_ms = (j.end_ns.saturating_sub(j.stats_start_ns)) / 1_000_000;
        let n = (end_ms.max(log.last()?.0) / dt_ms) as usize;
        let mut v = vec![0.0; n.max(1)];
        for (ms, bw) in log {
            let i = (ms / dt_ms).saturating_sub(1) as usize;
            if let Some(x) = v.get_mut(i) {
                *x = bw;
            }
        }
        Some(Series {
            dt: dt_ms as f64 / 1e3,
            v,
        })
    }

    /// Its length, s.
    pub fn seconds(&self) -> f64 {
        self.v.len() as f64 * self.dt
    }

    /// Mean bytes/s over `[t0, t1)` seconds (clamped to the series).
    pub fn mean(&self, t0: f64, t1: f64) -> f64 {
        let i0 = ((t0.max(0.0)) / self.dt).floor() as usize;
        let i1 = ((t1 / self.dt).ceil() as usize).min(self.v.len());
        if i1 <= i0 {
            return 0.0;
        }
        self.v[i0..i1].iter().sum::<f64>() / (i1 - i0) as f64
    }

    /// Means of consecutive whole windows of `secs` seconds.
    pub fn windows(&self, secs: f64) -> Vec<f64> {
        let k = ((secs / self.dt).round() as usize).max(1);
        self.v
            .chunks_exact(k)
            .map(|c| c.iter().sum::<f64>() / k as f64)
            .collect()
    }

    /// Seconds and bytes before the first window of `secs` whose mean is
    /// below `frac` of the first window's (the whole series when none).
    pub fn before_drop(&self, secs: f64, frac: f64) -> (f64, f64) {
        let at = self.drop_at(secs, frac).unwrap_or(self.v.len());
        let bytes: f64 = self.v[..at].iter().sum::<f64>() * self.dt;
        (at as f64 * self.dt, bytes)
    }

    /// Mean bytes/s from that drop to the end (the whole series' when it
    /// never drops).
    pub fn after_drop(&self, secs: f64, frac: f64) -> f64 {
        let at = self.drop_at(secs, frac).unwrap_or(0);
        let rest = &self.v[at..];
        if rest.is_empty() {
            return 0.0;
        }
        rest.iter().sum::<f64>() / rest.len() as f64
    }

    /// The interval where the drop is: in the first window of `secs`
    /// below `frac` of the first window's, the first interval below it
    /// from which three in four of the window's intervals are below it
    /// too (the window's start when none), if any. The window finds a drop that lasts; the
    /// interval places it as finely as the log was written (TechPowerUp
    /// samples twice a second, as fio's default log does), where the
    /// window's start was up to a window early (40 GB on a 4 GB/s drive).
    fn drop_at(&self, secs: f64, frac: f64) -> Option<usize> {
        let k = ((secs / self.dt).round() as usize).max(1);
        let w = self.windows(secs);
        let limit = frac * w.first()?;
        let start = (w.iter().skip(1).position(|x| *x < limit)? + 1) * k;
        let end = (start + k).min(self.v.len());
        let stays = |j: usize| {
            let below = self.v[j..end].iter().filter(|x| **x < limit).count();
            self.v[j] < limit && 4 * below >= 3 * (end - j)
        };
        Some((start..end).find(|&j| stays(j)).unwrap_or(start))
    }
}

/// Bytes of a corpus size: fio-style bytes or a percentage of `capacity`.
fn resolve(s: &str, capacity: u64) -> Result<u64, String> {
    let t = s.trim();
    if let Some(p) = t.strip_suffix('%') {
        let v: f64 = p
            .trim()
            .parse()
            .map_err(|_| format!("bad percentage {s:?}"))?;
        if !(0.0..=100.0).contains(&v) {
            return Err(format!("percentage {s:?} is outside 0-100 %"));
        }
        return Ok((capacity as f64 * v / 100.0) as u64);
    }
    parse_size(t).map_err(|e| e.to_string())
}

/// A job file for a drive `f` times the size of the source's: absolute
/// spans and amounts (`size`, `offset`, `io_size`, `offset_increment`,
/// aligned to 1 MiB) and durations (`runtime`, `ramp_time`, `startdelay`,
/// `thinktime`) scaled by `f`, so that a protocol writes the same share of
/// a scaled drive in proportionally less time. Percentages, block sizes
/// and queue depths stay.
pub fn scale_job(text: &str, f: f64) -> String {
    const MIB: u64 = 1 << 20;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let scaled = line.split_once('=').and_then(|(k, v)| {
            let key = k.trim();
            let v = v.trim();
            if v.ends_with('%') {
                return None;
            }
            match key {
                "size" | "offset" | "io_size" | "io_limit" | "offset_increment" => {
                    // A negative offset (from the end) scales as a span.
                    let (sign, v) = match v.strip_prefix('-') {
                        Some(rest) if matches!(key, "offset" | "size") => ("-", rest),
                        _ => ("", v),
                    };
                    let b = parse_size(v).ok()?;
                    let n = ((b as f64 * f) as u64 / MIB * MIB).max(MIB);
                    Some(format!("{key}={sign}{n}"))
                }
                "runtime" | "timeout" | "ramp_time" | "startdelay" => {
                    let ns = jobfile::parse_time(v, 1_000_000_000).ok()?;
                    Some(format!(
                        "{key}={}us",
                        ((ns as f64 * f) / 1e3).ceil().max(1.0) as u64
                    ))
                }
                _ => None,
            }
        });
        out.push_str(scaled.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// Run `p` on a fresh drive of `profile`: the results of its named fio
/// steps. `scale` (scaled capacity / the drive's own) shrinks absolute
/// spans and durations with the drive ([`scale_job`]); 1 runs the
/// protocol as published.
pub fn run_protocol(
    profile: &Profile,
    p: &Protocol,
    seed: u64,
    scale: f64,
    origin: &str,
) -> Result<BTreeMap<String, StepResult>, ValidateError> {
    run_reading(profile, p, None, seed, scale, origin)
}

/// [`run_protocol`] under `reading` (its steps of that reading; `None`:
/// the protocol's default).
pub fn run_reading(
    profile: &Profile,
    p: &Protocol,
    reading: Option<&str>,
    seed: u64,
    scale: f64,
    origin: &str,
) -> Result<BTreeMap<String, StepResult>, ValidateError> {
    let fail = |msg: String| ValidateError::Run {
        origin: format!("{origin}: protocol {}", p.id),
        msg,
    };
    let mut sim = Simulation::new(profile, seed);
    // Shapes and transition figures read the throughput over time.
    sim.set_keep_bw_series(true);
    let cap = sim.ssd().capacity();
    let unit = profile.geometry.mapping_unit.0.max(512);
    let mut out = BTreeMap::new();
    for (i, s) in p.steps(reading).enumerate() {
        let before = sim.ssd().counters();
        match s {
            Step::SecureErase { .. } => sim.ssd_mut().secure_erase(),
            Step::Idle { seconds, .. } => sim.idle((seconds * scale * 1e9) as u64),
            Step::Trim { offset, length, .. } => {
                let sized = |v: &str| -> Result<u64, String> {
                    // Negative: counted back from the end of the drive.
                    let (back, v) = match v.trim().strip_prefix('-') {
                        Some(rest) => (true, rest),
                        None => (false, v),
                    };
                    let b = resolve(v, cap)?;
                    let b = if v.trim().ends_with('%') {
                        b
                    } else {
                        (b as f64 * scale) as u64
                    };
                    Ok(if back { cap.saturating_sub(b) } else { b })
                };
                let off = sized(offset).map_err(&fail)?.min(cap) / unit * unit;
                let len = sized(length).map_err(&fail)?.min(cap - off) / unit * unit;
                if len > 0 {
                    let text = format!("[trim]\nrw=trim\nbs={len}\noffset={off}\nsize={len}\n");
                    let jobs =
                        jobfile::parse(&text, "trim step").map_err(|e| fail(e.to_string()))?;
                    sim.run(&jobs.jobs).map_err(|e| fail(e.to_string()))?;
                }
                // What a format or blkdiscard leaves behind: a second of idle.
                sim.idle(1_000_000_000);
            }
            Step::Fio { name, job, .. } => {
                let scaled = if scale == 1.0 {
                    job.clone()
                } else {
                    scale_job(job, scale)
                };
                let mut text = from_the_end(&scaled, cap).map_err(&fail)?;
                if scale < 1.0 {
                    // Throughput samples as many per run as at full size.
                    let ms = (500.0 * scale).round().max(1.0);
                    text = format!("[global]\nlog_avg_msec={ms}\n{text}");
                }
                let jobs = jobfile::parse(&text, &format!("{origin}: {} step {}", p.id, i + 1))
                    .map_err(|e| fail(e.to_string()))?;
                let r = sim
                    .run_file(&jobs, &mut |_| {})
                    .map_err(|e| fail(e.to_string()))?;
                if let Some(n) = name {
                    out.insert(
                        n.clone(),
                        StepResult {
                            // As fio reports them: a group_reporting
                            // group's instances merged into one.
                            jobs: r
                                .reported_jobs()
                                .into_iter()
                                .map(std::borrow::Cow::into_owned)
                                .collect(),
                            before,
                            after: sim.ssd().counters(),
                            scale,
                        },
                    );
                }
            }
        }
    }
    Ok(out)
}

/// The drive protocol `p` runs on: `base` (a preset at its own
/// capacity, fitted values applied) as the source's drive was (`p.drive`),
/// at `capacity` if given; and that capacity over the source's drive's
/// (the scale of its spans and durations).
pub fn drive_for(
    base: &Profile,
    p: &Protocol,
    capacity: Option<u64>,
) -> Result<(Profile, f64), ValidateError> {
    let measured = match &p.drive {
        Some(d) => d.apply(base)?,
        None => base.clone(),
    };
    // A capacity asked for that this drive does not scale down to (more
    // dies than the preset) is raised to the smallest one it does.
    let q = match capacity {
        Some(c) if c != measured.geometry.exported_capacity.0 => {
            let c = c.max(measured.min_capacity().unwrap_or(c));
            measured.with_capacity(c)?
        }
        _ => measured.clone(),
    };
    let scale =
        q.geometry.exported_capacity.0 as f64 / measured.geometry.exported_capacity.0 as f64;
    Ok((q, scale))
}

/// One protocol to run on one drive.
#[derive(Debug, Clone)]
pub struct Task<'a> {
    /// The drive (already at the capacity to run at).
    pub profile: &'a Profile,
    /// Its capacity over the source's drive's ([`run_protocol`]).
    pub scale: f64,
    /// What to run.
    pub protocol: &'a Protocol,
    /// Under which reading (`None`: its default).
    pub reading: Option<&'a str>,
    /// The corpus file, for errors.
    pub origin: String,
}

/// Run every task, `jobs` at once; the results in the tasks' order, or
/// the first error. `progress(done, total)` after each.
pub fn run_all(
    tasks: &[Task<'_>],
    seed: u64,
    jobs: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<BTreeMap<String, StepResult>>, ValidateError> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<BTreeMap<String, StepResult>>>> =
        Mutex::new(vec![None; tasks.len()]);
    let first_err: Mutex<Option<ValidateError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, tasks.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(t) = tasks.get(i) else { break };
                    match run_reading(t.profile, t.protocol, t.reading, seed, t.scale, &t.origin) {
                        Ok(r) => results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r),
                        Err(e) => {
                            first_err
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .get_or_insert(e);
                            next.store(tasks.len(), Ordering::Relaxed);
                        }
                    }
                    progress(done.fetch_add(1, Ordering::Relaxed) + 1, tasks.len());
                }
            });
        }
    });
    if let Some(e) = first_err.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    Ok(results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_resolve_against_the_drive() {
        assert_eq!(resolve("100%", 1 << 30), Ok(1 << 30));
        assert_eq!(resolve("90%", 1000), Ok(900));
        assert_eq!(resolve("8g", 1 << 40), Ok(8 << 30));
        assert!(resolve("101%", 1000).is_err());
        assert!(resolve("x", 1000).is_err());
    }

    #[test]
    fn scaled_jobs_shrink_spans_and_durations_only() {
        let t =
            "[j]\nrw=randwrite\nbs=4k\nsize=8g\noffset=10%\nruntime=180\ntime_based\niodepth=3\n";
        let s = scale_job(t, 1.0 / 64.0);
        assert_eq!(
            s,
            "[j]\nrw=randwrite\nbs=4k\nsize=134217728\noffset=10%\nruntime=2812500us\ntime_based\niodepth=3\n"
        );
        assert_eq!(scale_job("size=100k\n", 0.001), "size=1048576\n");
        assert_eq!(scale_job("offset=-10g\n", 0.125), "offset=-1342177280\n");
    }

    /// A 4 GB/s drive whose cache runs out 35.7 s in, logged twice a
    /// second: 10-s windows find the drop in the window from 30 s, the
    /// log's intervals place it at 35.5 s (the interval it falls in),
    /// where the window's start undercounted the bytes by 22 GB.
    #[test]
    fn a_drop_is_placed_at_the_interval_not_the_window() {
        let v: Vec<f64> = (0..200).map(|i| if i < 71 { 4e9 } else { 1.5e9 }).collect();
        let s = Series { dt: 0.5, v };
        let (secs, bytes) = s.before_drop(10.0, 0.8);
        assert!((secs - 35.5).abs() < 1e-9, "{secs}");
        assert!((bytes - 142e9).abs() < 1.0, "{bytes}");
        assert!((s.after_drop(10.0, 0.8) / 1.5e9 - 1.0).abs() < 1e-9);
        // A dip in the window before the cliff is not the drop.
        let mut v = s.v.clone();
        v[62] = 1e9;
        let s = Series { dt: 0.5, v };
        assert!((s.before_drop(10.0, 0.8).0 - 35.5).abs() < 1e-9);
        // No drop: the whole series.
        let flat = Series {
            dt: 0.5,
            v: vec![4e9; 40],
        };
        assert_eq!(flat.before_drop(10.0, 0.8).0, 20.0);
    }

    #[test]
    fn negative_offsets_count_back_from_the_end() {
        let cap = 120_034_123_776;
        let t = from_the_end("[r]\noffset=-10g\nsize=10g\n", cap).unwrap();
        assert_eq!(
            t,
            format!(
                "[r]\noffset={}\nsize=10g\n",
                (cap - (10 << 30)) / (1 << 20) * (1 << 20)
            )
        );
        assert!(from_the_end("offset=-200g\n", cap).is_err());
        assert_eq!(from_the_end("offset=4k\n", cap).unwrap(), "offset=4k\n");
    }
}
