//! `vssd sim`: fio job files in model time.
//!
//! - [`jobfile`] parses fio's INI job files into [`JobSpec`]s;
//! - [`engine`] runs them against one [`Ssd`](vssd_model::Ssd) in virtual
//!   time, issuing I/O the way fio does ([`Simulation`]);
//! - [`report`] prints fio-like text, fio-shaped JSON and bandwidth logs.
//!
//! See `docs/sim.md` for the supported options and the differences from fio.

pub mod calibrate;
pub mod engine;
pub mod jobfile;
pub mod logfiles;
mod logs;
pub mod report;
pub mod results;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use thiserror::Error;

use vssd_common::cli_out::{self, StdoutError};
use vssd_model::ModelError;
use vssd_profile::size::parse_size;
use vssd_profile::{Profile, ProfileError};

pub use engine::{BwSample, DirReport, JobReport, Progress, RunReport, Simulation};
pub use jobfile::{Dir, JobFile, JobFileError, JobSpec};

/// Errors of `vssd sim`.
#[derive(Debug, Error)]
pub enum SimError {
    /// A job file is unusable.
    #[error(transparent)]
    JobFile(#[from] JobFileError),
    /// The profile is unusable.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A job does not fit the drive.
    #[error("job [{job}] ({origin}): {msg}")]
    Job {
        /// Job name.
        job: String,
        /// `file:line` of its section.
        origin: String,
        /// What is wrong.
        msg: String,
    },
    /// The model refused a request (a simulator bug: regions are checked first).
    #[error("job [{job}]: the model refused a request")]
    Model {
        /// Job name.
        job: String,
        /// The model's reason.
        #[source]
        source: ModelError,
    },
    /// A job ended with an error, as fio's would (`max_latency`); the
    /// report was written.
    #[error("job [{job}] ended with error {errno}: {msg}")]
    JobFailed {
        /// Job name.
        job: String,
        /// fio's error number.
        errno: i32,
        /// What happened.
        msg: String,
    },
    /// The report could not be written to standard output.
    #[error("cannot write the report")]
    Stdout(#[source] StdoutError),
    /// An output file could not be written.
    #[error("cannot write {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Readable summary, fio-like.
    Normal,
    /// fio-shaped JSON plus a `vssd` object with the model's counters.
    Json,
}

/// Arguments of `vssd sim`.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// Drive profile: a preset name (see `vssd profiles`) or a TOML file.
    #[arg(long)]
    pub profile: String,
    /// Override the exported capacity (geometry scaled, usable spare area kept in proportion):
    /// 16G or 16GiB = 16 x 2^30 bytes, 16GB = 16 x 10^9 bytes.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub capacity: Option<u64>,
    /// Host Memory Buffer the host gives a DRAM-less NVMe drive, at the
    /// preset's own capacity (`--capacity` scales it): replaces the
    /// profile's `mapping.hmb_bytes`; 0 models a host that gives none.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub hmb: Option<u64>,
    /// `normal` (readable) or `json` (fio's JSON shape; byte-identical for a given seed).
    #[arg(long, value_enum, default_value = "normal")]
    pub output_format: OutputFormat,
    /// Write fio-format bandwidth logs PREFIX_bw.N.log (N = job instance from 1).
    #[arg(long, value_name = "PREFIX")]
    pub bw_log: Option<String>,
    /// Seed for the model and for jobs without `randseed`.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write the report to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Unix time (seconds) that virtual time 0 stands for: the JSON's `time`
    /// and `timestamp` are this plus the virtual time at the end of the run
    /// (default 0, 1970-01-01 00:00:00 UTC, so the JSON stays repeatable).
    #[arg(long, value_name = "UNIX_SECONDS", default_value_t = 0)]
    pub epoch: u64,
    /// fio job files; each file after the first starts a new stonewall group.
    #[arg(required = true, value_name = "JOBFILE")]
    pub jobfiles: Vec<PathBuf>,
}

/// Run `vssd sim`.
pub fn run(args: SimArgs) -> Result<(), SimError> {
    let jobs = JobFile::load(&args.jobfiles)?;
    for w in &jobs.warnings {
        log::warn!("{w}");
    }
    let profile = Profile::load_with_hmb(&args.profile, args.capacity, args.hmb)?;
    profile.check_memory()?;
    let wall = Instant::now();
    let mut sim = Simulation::new(&profile, args.seed);
    sim.set_epoch(args.epoch);
    // Memory bounded by what is logged: keep series only for logs to write.
    sim.set_keep_bw_series(args.bw_log.is_some());
    let init = wall.elapsed();

    let bar = indicatif::ProgressBar::with_draw_target(
        Some(1000),
        indicatif::ProgressDrawTarget::hidden(),
    );
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{spinner} {msg} {wide_bar} {percent:>3}%")
    {
        bar.set_style(style);
    }
    // DESIGN.md: progress on a TTY, quiet in JSON mode.
    let tty = std::io::stderr().is_terminal() && args.output_format == OutputFormat::Normal;
    let mut shown = false;
    let run_start = Instant::now();
    let cpu_start = cpu_seconds();
    let v0 = sim.now_ns();
    let mut last: Option<(u64, u64)> = None;
    let report = sim.run_file(&jobs, &mut |p: &Progress<'_>| {
        if !tty {
            return;
        }
        let wall = run_start.elapsed();
        if !shown && wall > Duration::from_secs(1) {
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            shown = true;
        }
        // Bandwidth since the last update, in model time: what fio's status
        // line would show the guest doing.
        let mbs = match last {
            Some((t, b)) if p.now_ns > t => {
                p.bytes.saturating_sub(b) as f64 * 1e3 / (p.now_ns - t) as f64
            }
            _ => 0.0,
        };
        last = Some((p.now_ns, p.bytes));
        bar.set_position((p.fraction * 1000.0) as u64);
        bar.set_message(progress_text(p, mbs, p.now_ns - v0, wall));
    })?;
    let run_wall = run_start.elapsed();
    let run_cpu = cpu_seconds() - cpu_start;
    bar.finish_and_clear();

    let files = logfiles::write_logs(&report, args.bw_log.as_deref(), true, true)
        .map_err(|(path, source)| SimError::Io { path, source })?;
    for f in files {
        log::debug!("wrote {}", f.display());
    }

    let secs = run_wall.as_secs_f64();
    let rate = if secs > 0.0 {
        report.sim_ops as f64 / secs
    } else {
        0.0
    };
    let cpu_rate = if run_cpu > 0.0 {
        report.sim_ops as f64 / run_cpu
    } else {
        0.0
    };
    let speed = format!(
        "simulated {} requests in {:.3} s of wall time: {:.0} simulated ops per wall second ({:.3} s of CPU time, {:.0} per CPU second; model init {:.3} s)",
        report.sim_ops,
        secs,
        rate,
        run_cpu,
        cpu_rate,
        init.as_secs_f64()
    );
    let text = match args.output_format {
        OutputFormat::Json => report::json(&report),
        OutputFormat::Normal => format!("{}  {speed}\n", report::normal(&report)),
    };
    match &args.output {
        Some(path) => std::fs::write(path, text).map_err(|source| SimError::Io {
            path: path.clone(),
            source,
        })?,
        None => cli_out::print(&text).map_err(SimError::Stdout)?,
    }
    if args.output_format == OutputFormat::Json {
        eprintln!("vssd sim: {speed}");
    }
    match report
        .jobs
        .iter()
        .find_map(|j| j.error.as_ref().map(|e| (j, e)))
    {
        Some((j, e)) => Err(SimError::JobFailed {
            job: j.name.clone(),
            errno: e.errno,
            msg: e.msg.clone(),
        }),
        None => Ok(()),
    }
}

/// The progress bar's text: job, current model-time bandwidth, virtual
/// time, wall time so far and the estimated wall time left.
fn progress_text(p: &Progress<'_>, mbs: f64, virt_ns: u64, wall: Duration) -> String {
    let hms = |s: f64| {
        let s = s.max(0.0).round() as u64;
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    };
    let el = wall.as_secs_f64();
    let eta = if p.fraction > 0.0 {
        hms(el * (1.0 - p.fraction) / p.fraction)
    } else {
        "?".into()
    };
    format!(
        "{}: {:.0} MB/s, {:.1} s virtual [{} elapsed, eta {}]",
        if p.job.is_empty() { "sim" } else { p.job },
        mbs,
        virt_ns as f64 / 1e9,
        hms(el),
        eta
    )
}

/// CPU time used by this process so far (user + system), seconds; 0 if unknown.
/// On a shared machine this says more about the simulator's speed than wall time.
fn cpu_seconds() -> f64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a complete rusage into the pointer it is given,
    // which points to a live, properly aligned value; we read it only on success.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    if rc != 0 {
        return 0.0;
    }
    // SAFETY: getrusage returned 0, so it initialised the struct (and it was zeroed before).
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}
