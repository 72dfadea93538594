//! Running a corpus protocol in the simulator and reading figures off it.

use std::collections::BTreeMap;

use vssd_model::Counters;
use vssd_profile::Profile;
use vssd_profile::size::parse_size;
use vssd_sim::Simulation;
use vssd_sim::jobfile::{self, Dir};
use vssd_sim::results::JobReport;

use super::ValidateError;
use super::corpus::{Metric, Protocol, Step};

/// What one named fio step produced.
#[derive(Debug, Clone)]
pub struct StepResult {
    /// The step's job reports (one per job, as fio reports them).
    pub jobs: Vec<JobReport>,
    /// The drive's counters before and after the step.
    pub before: Counters,
    /// After.
    pub after: Counters,
}

impl StepResult {
    /// The value of `metric` for job `job` (default: the step's first).
    pub fn value(&self, metric: Metric, job: Option<&str>) -> Option<f64> {
        let j = match job {
            Some(name) => self.jobs.iter().find(|j| j.name == name)?,
            None => self.jobs.first()?,
        };
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
        })
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
                    let b = parse_size(v).ok()?;
                    let n = ((b as f64 * f) as u64 / MIB * MIB).max(MIB);
                    Some(format!("{key}={n}"))
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
    let fail = |msg: String| ValidateError::Run {
        origin: format!("{origin}: protocol {}", p.id),
        msg,
    };
    let mut sim = Simulation::new(profile, seed);
    sim.set_keep_bw_series(false);
    let cap = sim.ssd().capacity();
    let unit = profile.geometry.mapping_unit.0.max(512);
    let mut out = BTreeMap::new();
    for (i, s) in p.step.iter().enumerate() {
        let before = sim.ssd().counters();
        match s {
            Step::SecureErase { .. } => sim.ssd_mut().secure_erase(),
            Step::Idle { seconds, .. } => sim.idle((seconds * scale * 1e9) as u64),
            Step::Trim { offset, length, .. } => {
                let sized = |v: &str| -> Result<u64, String> {
                    let b = resolve(v, cap)?;
                    Ok(if v.trim().ends_with('%') {
                        b
                    } else {
                        (b as f64 * scale) as u64
                    })
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
            Step::Fio { name, job } => {
                let text = if scale == 1.0 {
                    job.clone()
                } else {
                    scale_job(job, scale)
                };
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
                    match run_protocol(t.profile, t.protocol, seed, t.scale, &t.origin) {
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
    }
}
