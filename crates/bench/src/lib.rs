//! `vssd bench`: the published test protocols as scenarios, run in a real
//! guest on `vssd serve` and in the simulator, with charts, reports,
//! assertions for CI, and the two runs side by side.
//!
//! - [`scenario`]: scenario files (TOML) and the built-in ones;
//! - [`expr`]: `expect` assertions;
//! - [`guestrun`], [`simrun`]: the two ways of running a scenario;
//! - [`surface`]: HD Tune-style passes (`vssd surface` in the guest);
//! - [`metrics`], [`results`]: what a run produces;
//! - [`progress`]: bars and lines while it runs;
//! - [`report`], [`chart`], [`compare`]: what is written and drawn.

pub mod chart;
pub mod compare;
mod daemon;
pub mod dilation;
pub use vssd_common::expr;
pub mod guestrun;
pub mod metrics;
pub mod progress;
pub mod report;
pub mod results;
mod run_cmd;
pub mod scenario;
mod sim_vs_guest;
pub mod simrun;
mod summary;
pub mod surface;
mod verdict;

#[cfg(test)]
mod testdata;

use std::path::PathBuf;

use clap::{Args, Subcommand};

use self::results::BenchResults;
use self::scenario::{BUILTIN, BUILTIN_JOBS, Overrides, Scenario, ScenarioError};
pub use sim_vs_guest::compare_runs;
pub use verdict::{evaluate, junit};
use vssd_guest::GuestError;
use vssd_guest::bus::Bus;
use vssd_guest::serve::ServeProcessError;
use vssd_profile::size::parse_size;

/// Errors of `vssd bench`.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The scenario is invalid.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The guest could not run.
    #[error(transparent)]
    Guest(#[from] GuestError),
    /// The daemon could not run.
    #[error(transparent)]
    Serve(#[from] ServeProcessError),
    /// A control request failed.
    #[error(transparent)]
    Ctl(#[from] vssd_ctl::CtlError),
    /// The simulator refused something.
    #[error("simulator: {0}")]
    Sim(String),
    /// Files.
    #[error("{0}")]
    Io(String),
    /// Printing failed.
    #[error("writing the output")]
    Output(#[source] vssd_common::cli_out::StdoutError),
    /// Expectations failed or the run did not complete.
    #[error("{0}")]
    Failed(String),
    /// Bad command line.
    #[error("{0}")]
    Usage(String),
}

/// `vssd bench` arguments.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// What to do.
    #[command(subcommand)]
    pub cmd: BenchCmd,
}

/// `vssd bench` subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// The built-in scenarios and job files.
    List,
    /// Print a built-in scenario (TOML to copy and edit) or job file.
    Show {
        /// Scenario or job file name.
        name: String,
    },
    /// Run a scenario in a guest (and in the simulator, side by side).
    Run(RunArgs),
    /// The key tables of two runs side by side (of the first and each of
    /// the others, with more); `--chart` draws their throughput in one
    /// chart.
    Compare {
        /// First run's output directory.
        a: PathBuf,
        /// Second run's output directory.
        b: PathBuf,
        /// More runs' output directories, each compared with the first.
        more: Vec<PathBuf>,
        /// Write one SVG chart of every run's throughput over time (one
        /// colour per run) to this file (it must not exist).
        #[arg(long, value_name = "FILE")]
        chart: Option<PathBuf>,
    },
}

/// Accelerator choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AccelArg {
    /// KVM if a probe boot works, else TCG.
    Auto,
    /// KVM.
    Kvm,
    /// TCG.
    Tcg,
}

/// `vssd bench run` arguments.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// A built-in scenario (`vssd bench list`) or a scenario file.
    pub scenario: String,
    /// Output directory (results, charts, reports).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Drive capacity instead of the scenario's (scales it: jobs are relative).
    #[arg(long, value_parser = parse_size)]
    pub capacity: Option<u64>,
    /// Drive profile instead of the scenario's.
    #[arg(long)]
    pub profile: Option<String>,
    /// The guest's bus instead of the scenario's.
    #[arg(long, value_enum)]
    pub bus: Option<Bus>,
    /// QEMU accelerator.
    #[arg(long, value_enum, default_value = "auto")]
    pub accel: AccelArg,
    /// Only the simulator (seconds instead of minutes).
    #[arg(long)]
    pub sim_only: bool,
    /// Also write the `expect` results as JUnit XML.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// An inconclusive expectation (one the guest, not the drive, decided,
    /// or one the simulator cannot measure) fails the run, as CI wants it:
    /// nothing passes unjudged. The scenario's `strict = true` makes it
    /// the default.
    #[arg(long, conflicts_with = "no_strict")]
    pub strict: bool,
    /// Not strict, whatever the scenario says.
    #[arg(long)]
    pub no_strict: bool,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Give up on one guest boot after this many seconds.
    #[arg(long, default_value_t = 3600)]
    pub timeout: u64,
    /// Seed of the model's random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Time dilation of a guest run: the drive's clock runs K times slower
    /// than the wall clock (`vssd serve --time-scale K`) and every figure is
    /// converted back to the drive's time. `auto`: a short probe boot
    /// measures whether the guest reaches the drive's speed in the passes
    /// the expectations read, and picks K if it does not.
    #[arg(long, value_name = "auto|K", default_value = "auto")]
    pub time_scale: dilation::TimeScaleArg,
    /// Keep the daemon's trace of the guest run (every request the drive
    /// received) beside results.json, as trace.vssdtrace (`vssd trace
    /// info`, `vssd trace convert`, `vssd sim` with `read_iolog=`).
    #[arg(long)]
    pub trace: bool,
}

/// A job file's summary for `bench list`: the first sentence of its
/// leading comment, however many lines it runs over.
fn job_summary(text: &str) -> String {
    let comment = text
        .lines()
        .map_while(|l| l.trim().strip_prefix(';'))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    // A sentence ends at ". ", not inside an ellipsis ("... ") quoted
    // from a source.
    let end = comment
        .match_indices(". ")
        .map(|(i, _)| i)
        .find(|&i| i == 0 || comment.as_bytes()[i - 1] != b'.');
    match end {
        Some(i) => comment[..=i].to_string(),
        None => comment,
    }
}

/// This host's name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The last `n` lines of `s`.
pub fn tail(s: &str, n: usize) -> String {
    let v: Vec<&str> = s.lines().collect();
    v[v.len().saturating_sub(n)..].join("\n")
}

/// What a run of `sc` takes, as TOML comments for `bench show`: guest
/// boots, and the drive's own time per phase from the simulator (a guest
/// adds its boots and, under TCG, whatever it cannot keep up with).
fn show_estimate(sc: &Scenario) -> Result<String, BenchError> {
    let predicted = simrun::run(sc, 1, None, &mut |_, _| {})?;
    let boots = sc
        .segments()
        .iter()
        .filter(|r| !sc.phases[r.start].kind.host_side())
        .count();
    let total: f64 = predicted.phases.iter().map(|p| p.model_s).sum();
    let mut o = format!(
        "\n# Estimate (vssd bench show): {boots} guest boot{}, {:.0} s of drive time in all\n# (the simulator's figure; a guest adds ~10 s per boot under TCG, and more\n# where it cannot keep the drive busy). Per phase:\n",
        if boots == 1 { "" } else { "s" },
        total
    );
    for p in &predicted.phases {
        o.push_str(&format!("#   {:<20} {:>8.1} s\n", p.name, p.model_s));
    }
    Ok(o)
}

/// Run `vssd bench`.
pub fn run(args: BenchArgs) -> Result<(), BenchError> {
    match args.cmd {
        BenchCmd::List => {
            let mut t = String::from("scenarios:\n");
            for (n, text) in BUILTIN {
                let d = text
                    .lines()
                    .find_map(|l| l.strip_prefix("description = "))
                    .unwrap_or("")
                    .trim_matches('"');
                t.push_str(&format!("  {n:<22} {d}\n"));
            }
            t.push_str("job files (usable by name in any scenario):\n");
            for (n, text) in BUILTIN_JOBS {
                t.push_str(&format!("  {n:<22} {}\n", job_summary(text)));
            }
            vssd_common::cli_out::print(&t).map_err(BenchError::Output)
        }
        BenchCmd::Show { name } => match scenario::builtin_text(&name) {
            Some(t) => {
                let mut text = t.to_string();
                // A scenario (not a job file): what running it takes.
                if let Ok(sc) = Scenario::load(&name, &Overrides::default()) {
                    text.push_str(&show_estimate(&sc)?);
                }
                vssd_common::cli_out::print(&text).map_err(BenchError::Output)
            }
            None => Err(BenchError::Usage(format!(
                "no built-in scenario or job file {name:?} (see vssd bench list)"
            ))),
        },
        BenchCmd::Run(a) => run_cmd::run_cmd(a),
        BenchCmd::Compare { a, b, more, chart } => {
            let mut dirs = vec![a, b];
            dirs.extend(more);
            let runs = dirs
                .iter()
                .map(|d| report::read_results(d).map_err(|e| BenchError::Io(e.to_string())))
                .collect::<Result<Vec<_>, _>>()?;
            if let Some(file) = &chart {
                let refs: Vec<&BenchResults> = runs.iter().collect();
                let c = chart::runs_throughput(&refs).ok_or_else(|| {
                    BenchError::Io(
                        "no run has a throughput series (fio phases) to chart".to_string(),
                    )
                })?;
                let mut f = vssd_device::files::create_new_private(file)
                    .map_err(|e| BenchError::Io(e.to_string()))?;
                std::io::Write::write_all(&mut f, c.svg.as_bytes())
                    .map_err(|e| BenchError::Io(format!("{}: {e}", file.display())))?;
            }
            let text = runs[1..]
                .iter()
                .map(|r| compare::compare(&runs[0], r))
                .collect::<Vec<_>>()
                .join("\n");
            vssd_common::cli_out::print(&text).map_err(BenchError::Output)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bench list` gives each job file's first sentence whole, not its
    /// first line: every summary ends a sentence and closes its brackets.
    #[test]
    fn job_summaries_are_whole_sentences() {
        for (n, text) in BUILTIN_JOBS {
            let s = job_summary(text);
            assert!(s.ends_with('.'), "{n}: {s:?}");
            assert_eq!(s.matches('(').count(), s.matches(')').count(), "{n}: {s:?}");
        }
        let s = job_summary(
            BUILTIN_JOBS
                .iter()
                .find(|j| j.0 == "random-write-4k.fio")
                .unwrap()
                .1,
        );
        assert_eq!(
            s,
            "Random 4 KiB writes at QD 32, one capacity's worth, without fio's random \
             map (blocks may be hit twice, others not at all, as with IOMeter)."
        );
    }
}
