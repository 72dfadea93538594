//! `vssd calibrate`: the model against the figures vendors published.
//!
//! For a profile (or every preset with `--all`) it runs, in the
//! simulator, the workloads a spec sheet quotes — 128 KiB sequential write
//! and read, 4 KiB random read and write, all at QD 32 on a fresh drive —
//! and prints the simulated figures beside the profile's `[spec]` ones
//! with their ratio. `--used` adds the used-state protocol (fresh
//! sequential write, random 4 KiB writes, sequential write again, TRIM of
//! the whole drive, sequential write again), `--scale` the same workload at
//! several capacities (write amplification and used-state ratios).
//!
//! Everything runs in model time: the figures are deterministic.

use std::fmt::Write as _;
use std::io::IsTerminal;

use serde::Serialize;
use thiserror::Error;

use crate::{Dir, JobFile, JobSpec, RunReport, SimError, Simulation, jobfile};
use vssd_common::cli_out::{self, StdoutError};
use vssd_profile::size::{describe_size, format_size, parse_size};
use vssd_profile::{Profile, ProfileError, SlcMode, presets};

/// Errors of `vssd calibrate`.
#[derive(Debug, Error)]
pub enum CalibrateError {
    /// The profile is unusable.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A simulated workload failed.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// Neither a profile nor `--all`.
    #[error("give a profile (preset name or TOML file) or --all")]
    NoProfile,
    /// The report could not be written.
    #[error("cannot write the report")]
    Stdout(#[source] StdoutError),
}

/// Arguments of `vssd calibrate`.
#[derive(Debug, Clone, clap::Args)]
pub struct CalibrateArgs {
    /// Preset name or TOML file.
    pub profile: Option<String>,
    /// Every built-in preset.
    #[arg(long, conflicts_with = "profile")]
    pub all: bool,
    /// Run at this capacity (geometry scaled so that the usable spare area keeps its share of the capacity; see docs/model.md);
    /// default: the profile's own. 16G = 16 x 2^30 bytes.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub capacity: Option<u64>,
    /// Also run the used-state protocol (fresh, after random writes,
    /// after TRIM).
    #[arg(long)]
    pub used: bool,
    /// Run the scale-invariance workload at these capacities
    /// (comma-separated, e.g. 1G,4G,full) instead.
    #[arg(long, value_name = "SIZES")]
    pub scale: Option<String>,
    /// Random 4 KiB writes of the used-state protocol, as a multiple of
    /// the capacity.
    #[arg(long, default_value_t = 1.5)]
    pub random_factor: f64,
    /// Also run the articles' protocols: P1 (sequential write fresh, 30
    /// minutes of 4 KiB random writes, sequential write) and P2 (HD
    /// Tune-style write curve fresh, after 30 minutes of random writes, after
    /// a whole-drive TRIM).
    #[arg(long)]
    pub protocols: bool,
    /// JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Fit the preset's free parameters (its `[[fit]]` list) to its drive's
    /// published figures (the corpus, `validation/PRESET.toml`), once per
    /// held-out source (leave-one-source-out) and once on every figure; runs
    /// the protocols at `--capacity` (default 4 GiB). See docs/validation.md.
    #[arg(long, requires = "profile")]
    pub fit: bool,
    /// With --fit: most simulator evaluations per search.
    #[arg(long, default_value_t = 60, requires = "fit")]
    pub evals: usize,
    /// With --fit: a directory of corpus files instead of the built-in corpus.
    #[arg(long, value_name = "DIR", requires = "fit")]
    pub corpus: Option<std::path::PathBuf>,
    /// With --fit: write the fit record (`PRESET.toml`, which `vssd validate
    /// --fits DIR` reads) into this directory.
    #[arg(long, value_name = "DIR", requires = "fit")]
    pub write: Option<std::path::PathBuf>,
    /// With --fit: set the values fitted on every figure in this profile
    /// TOML file, keeping its comments and layout.
    #[arg(long, value_name = "FILE", requires = "fit")]
    pub update_preset: Option<std::path::PathBuf>,
    /// With --fit: take the fit from this record (a file `--write` made)
    /// instead of searching again: its held-out figures are run and, with
    /// --update-preset, its values written into the profile file.
    #[arg(long, value_name = "FILE", requires = "fit")]
    pub record: Option<std::path::PathBuf>,
    /// With --fit: protocols run at once (default: the machine's cores).
    #[arg(long, value_name = "N", requires = "fit")]
    pub jobs: Option<usize>,
}

/// Protocols P1 and P2 of `../shared/reference/protocols.md` on one profile.
#[derive(Debug, Clone, Serialize)]
pub struct Protocols {
    /// Profile name.
    pub profile: String,
    /// P1: 30 s sequential write on the fresh drive, MB/s.
    pub p1_fresh_mb_s: f64,
    /// P1: 30 minutes of 4 KiB random writes at QD 32, IOPS.
    pub p1_random_iops: f64,
    /// P1: 60 s sequential write after them, MB/s.
    pub p1_used_mb_s: f64,
    /// P2: HD Tune-style write test (128 KiB writes at QD 1 in 32 zones
    /// across the drive), MB/s per zone: fresh, after 30 minutes of random
    /// writes, after a whole-drive TRIM.
    pub p2_fresh: Vec<f64>,
    /// See `p2_fresh`.
    pub p2_used: Vec<f64>,
    /// See `p2_fresh`.
    pub p2_trimmed: Vec<f64>,
}

/// One TRIM of the whole drive (what a quick format sends), then a second
/// of idle time.
fn trim_whole_drive(sim: &mut Simulation, p: &Profile, cap: u64) -> Result<(), SimError> {
    let unit = p.geometry.mapping_unit.0;
    let trim_bs = cap / unit * unit;
    sim.run(&job(&format!(
        "[trim]\nrw=trim\nbs={trim_bs}\nsize={trim_bs}\n"
    ))?)?;
    sim.idle(1_000_000_000);
    Ok(())
}

/// The 32-zone HD Tune-style write test: 8 MiB of 128 KiB writes at QD 1
/// at each of 32 positions across the drive, one after the other; MB/s per zone.
fn hdtune_write(sim: &mut Simulation, cap: u64) -> Result<Vec<f64>, SimError> {
    let mut text = String::new();
    let zone = cap / 32;
    for z in 0..32u64 {
        let off = z * zone / (128 << 10) * (128 << 10);
        let _ = write!(
            text,
            "[z{z}]\nstonewall\nrw=write\nbs=128k\niodepth=1\noffset={off}\nsize=8m\n"
        );
    }
    let r = sim.run(&job(&text)?)?;
    Ok(r.jobs
        .iter()
        .map(|j| j.bw_bytes(Dir::Write) / 1e6)
        .collect())
}

/// Run P1 and P2 (see [`Protocols`]).
pub fn protocols(p: &Profile, seed: u64) -> Result<Protocols, SimError> {
    let cap = p.geometry.exported_capacity.0;
    let random = job(
        "[random]\nrw=randwrite\nbs=4k\niodepth=32\nruntime=1800\ntime_based\nnorandommap\nend_fsync=1\n",
    )?;
    // P1.
    let mut sim = Simulation::new(p, seed);
    let fresh = sim.run(&job(
        "[fresh]\nrw=write\nbs=128k\niodepth=32\nruntime=30\ntime_based\n",
    )?)?;
    let r = sim.run(&random)?;
    let used = sim.run(&job(
        "[used]\nrw=write\nbs=128k\niodepth=32\nruntime=60\ntime_based\n",
    )?)?;
    // P2.
    let mut sim = Simulation::new(p, seed);
    let p2_fresh = hdtune_write(&mut sim, cap)?;
    sim.run(&random)?;
    let p2_used = hdtune_write(&mut sim, cap)?;
    trim_whole_drive(&mut sim, p, cap)?;
    let p2_trimmed = hdtune_write(&mut sim, cap)?;
    Ok(Protocols {
        profile: p.name.clone(),
        p1_fresh_mb_s: mb(&fresh, Dir::Write),
        p1_random_iops: iops(&r, Dir::Write),
        p1_used_mb_s: mb(&used, Dir::Write),
        p2_fresh,
        p2_used,
        p2_trimmed,
    })
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn protocols_text(x: &Protocols) -> String {
    let curve = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        "  P1: sequential write fresh {:.0} MB/s; 30 min random 4K at {:.0} IOPS; then {:.0} MB/s ({:.2} x fresh)\n  P2 (HD Tune-style write, 32 zones, MB/s): fresh mean {:.0}, after random writes {:.0}, after TRIM {:.0}\n    fresh:   {}\n    used:    {}\n    trimmed: {}\n",
        x.p1_fresh_mb_s,
        x.p1_random_iops,
        x.p1_used_mb_s,
        if x.p1_fresh_mb_s > 0.0 {
            x.p1_used_mb_s / x.p1_fresh_mb_s
        } else {
            0.0
        },
        mean(&x.p2_fresh),
        mean(&x.p2_used),
        mean(&x.p2_trimmed),
        curve(&x.p2_fresh),
        curve(&x.p2_used),
        curve(&x.p2_trimmed)
    )
}

/// One figure: simulated, published, ratio.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Figure {
    /// What the simulator measured.
    pub sim: f64,
    /// What the spec sheet says (0 = not published).
    pub spec: f64,
    /// sim / spec (0 when there is no spec figure).
    pub ratio: f64,
}

impl Figure {
    fn new(sim: f64, spec: f64) -> Figure {
        Figure {
            sim,
            spec,
            ratio: if spec > 0.0 { sim / spec } else { 0.0 },
        }
    }
}

/// The fresh-drive figures of one profile.
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    /// Profile name.
    pub profile: String,
    /// Capacity simulated, bytes.
    pub capacity: u64,
    /// 128 KiB sequential read, MB/s.
    pub seq_read_mb_s: Figure,
    /// 128 KiB sequential write, MB/s.
    pub seq_write_mb_s: Figure,
    /// 4 KiB random read, IOPS.
    pub rand_read_iops: Figure,
    /// 4 KiB random write, IOPS.
    pub rand_write_iops: Figure,
    /// Data-reducing drives: the figures above are with compressible data
    /// (as their spec sheets quote); this is sequential write with
    /// incompressible data, MB/s.
    pub seq_write_incompressible_mb_s: Option<f64>,
    /// Where the spec figures come from.
    pub source: String,
}

/// The used-state protocol's results of one profile.
#[derive(Debug, Clone, Serialize)]
pub struct UsedState {
    /// Profile name.
    pub profile: String,
    /// Capacity simulated, bytes.
    pub capacity: u64,
    /// Sequential write on the fresh drive, MB/s.
    pub fresh_mb_s: f64,
    /// Random 4 KiB writes (QD 32) over the drive, IOPS.
    pub random_iops: f64,
    /// Write amplification of the random writes.
    pub random_wa: f64,
    /// Sequential write after them, MB/s.
    pub used_mb_s: f64,
    /// The same, its first tenth only, MB/s.
    pub used_first_tenth_mb_s: f64,
    /// Sequential write after a TRIM of the whole drive (and a second of idle), MB/s.
    pub trimmed_mb_s: f64,
    /// used / fresh.
    pub used_ratio: f64,
    /// trimmed / fresh.
    pub trim_ratio: f64,
}

fn job(text: &str) -> Result<Vec<JobSpec>, SimError> {
    let jf: JobFile = jobfile::parse(text, "calibrate")?;
    Ok(jf.jobs)
}

fn mb(r: &RunReport, d: Dir) -> f64 {
    r.jobs.first().map(|j| j.bw_bytes(d)).unwrap_or(0.0) / 1e6
}

fn iops(r: &RunReport, d: Dir) -> f64 {
    r.jobs.first().map(|j| j.iops(d)).unwrap_or(0.0)
}

/// Bytes a fresh-drive sequential test writes: at most 1 GiB or a quarter
/// of the drive, and within half the SLC cache if there is one (spec
/// sheets quote cached figures).
fn seq_amount(p: &Profile) -> u64 {
    let cap = p.geometry.exported_capacity.0;
    let mut n = (1u64 << 30).min(cap / 4);
    if p.slc_cache.mode != SlcMode::Off {
        n = n.min(p.slc_cache.size.0 / 2);
    }
    (n >> 20 << 20).max(1 << 20)
}

/// Run the vendors' fresh-drive workloads on `p`.
pub fn calibrate(p: &Profile, seed: u64) -> Result<Calibration, SimError> {
    let amount = seq_amount(p);
    let cap = p.geometry.exported_capacity.0;
    let s = format_size(amount);
    // Spec sheets of data-reducing drives quote compressible data.
    let data = if p.reduction.enabled {
        "buffer_compress_percentage=100\n"
    } else {
        ""
    };
    // Sequential write then read back, fresh drive.
    let mut sim = Simulation::new(p, seed);
    let w = sim.run(&job(&format!(
        "[w]\nrw=write\nbs=128k\niodepth=32\nsize={s}\n{data}"
    ))?)?;
    sim.idle(1_000_000_000);
    let r = sim.run(&job(&format!(
        "[r]\nrw=read\nbs=128k\niodepth=32\nsize={s}\n"
    ))?)?;
    sim.idle(1_000_000_000);
    // Random reads over the written region.
    let rr = sim.run(&job(&format!(
        "[rr]\nrw=randread\nbs=4k\niodepth=32\nsize={s}\nnumber_ios=200000\nio_size=1000%\n"
    ))?)?;
    // Random writes on a fresh drive, over the whole LBA range.
    let mut sim = Simulation::new(p, seed);
    let n = (cap / 8 / 4096).clamp(4096, 65536);
    let rw = sim.run(&job(&format!(
        "[rw]\nrw=randwrite\nbs=4k\niodepth=32\nnumber_ios={n}\nnorandommap\n{data}"
    ))?)?;
    // And incompressible sequential writes, where the data is reduced.
    let incompressible = if p.reduction.enabled {
        let mut sim = Simulation::new(p, seed);
        let w = sim.run(&job(&format!(
            "[w]\nrw=write\nbs=128k\niodepth=32\nsize={s}\n"
        ))?)?;
        Some(mb(&w, Dir::Write))
    } else {
        None
    };
    let sp = &p.spec;
    Ok(Calibration {
        profile: p.name.clone(),
        capacity: cap,
        seq_read_mb_s: Figure::new(mb(&r, Dir::Read), sp.seq_read_mb_s),
        seq_write_mb_s: Figure::new(mb(&w, Dir::Write), sp.seq_write_mb_s),
        rand_read_iops: Figure::new(iops(&rr, Dir::Read), sp.rand_read_iops),
        rand_write_iops: Figure::new(iops(&rw, Dir::Write), sp.rand_write_iops),
        seq_write_incompressible_mb_s: incompressible,
        source: sp.source.clone(),
    })
}

/// Fresh sequential write, random 4 KiB writes of `factor` × the capacity
/// (QD 32, fio's random map), sequential write, TRIM of the whole drive,
/// a second of idle, sequential write.
pub fn used_state(p: &Profile, factor: f64, seed: u64) -> Result<UsedState, SimError> {
    let cap = p.geometry.exported_capacity.0;
    let seq = job("[seq]\nrw=write\nbs=128k\niodepth=32\nsize=100%\nlog_avg_msec=1000\n")?;
    let mut sim = Simulation::new(p, seed);
    sim.set_keep_bw_series(true);
    let fresh = sim.run(&seq)?;
    let pct = (factor * 100.0).round().max(1.0) as u64;
    let random = sim.run(&job(&format!(
        "[random]\nrw=randwrite\nbs=4k\niodepth=32\nsize=100%\nio_size={pct}%\nend_fsync=1\n"
    ))?)?;
    let used = sim.run(&seq)?;
    let series = used.jobs[0].bw_series(Dir::Write);
    let tenth = (series.len() / 10).max(1);
    let first_tenth =
        series.iter().take(tenth).sum::<f64>() / tenth.min(series.len()).max(1) as f64 / 1e6;
    trim_whole_drive(&mut sim, p, cap)?;
    let trimmed = sim.run(&seq)?;
    let wa = {
        let (a, b) = (&fresh.counters, &random.counters);
        let host = b.host_written_bytes.saturating_sub(a.host_written_bytes) as f64;
        let nand = b
            .nand_bytes_programmed
            .saturating_sub(a.nand_bytes_programmed) as f64;
        if host > 0.0 { nand / host } else { 0.0 }
    };
    let (f, u, t) = (
        mb(&fresh, Dir::Write),
        mb(&used, Dir::Write),
        mb(&trimmed, Dir::Write),
    );
    Ok(UsedState {
        profile: p.name.clone(),
        capacity: cap,
        fresh_mb_s: f,
        random_iops: iops(&random, Dir::Write),
        random_wa: wa,
        used_mb_s: u,
        used_first_tenth_mb_s: first_tenth,
        trimmed_mb_s: t,
        used_ratio: if f > 0.0 { u / f } else { 0.0 },
        trim_ratio: if f > 0.0 { t / f } else { 0.0 },
    })
}

fn profiles(args: &CalibrateArgs) -> Result<Vec<Profile>, CalibrateError> {
    let names: Vec<String> = if args.all {
        presets::NAMES
            .iter()
            .filter(|&&n| n != "instant")
            .map(|n| n.to_string())
            .collect()
    } else {
        vec![args.profile.clone().ok_or(CalibrateError::NoProfile)?]
    };
    names
        .iter()
        .map(|n| {
            let p = Profile::load_with_capacity(n, args.capacity)?;
            p.check_memory()?;
            Ok(p)
        })
        .collect()
}

/// Run `vssd calibrate`.
pub fn run(args: CalibrateArgs) -> Result<(), CalibrateError> {
    let mut out = String::new();
    let mut json = Vec::new();
    // What is being simulated, on a TTY (a full-size --protocols run takes
    // minutes); quiet with --json or without a terminal.
    let spinner = (!args.json && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_style(
            indicatif::ProgressStyle::with_template("{spinner} calibrate {msg} ({elapsed})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        b.enable_steady_tick(std::time::Duration::from_millis(120));
        b
    });
    let step = |what: String| {
        if let Some(b) = &spinner {
            b.set_message(what);
        }
    };
    if let Some(sizes) = &args.scale {
        for name in profile_names(&args)? {
            let full = Profile::load(&name)?;
            for s in sizes.split(',') {
                let p = if s.trim() == "full" {
                    full.clone()
                } else {
                    let c = parse_size(s.trim()).map_err(|e| ProfileError::Parse {
                        origin: "--scale".into(),
                        message: e.to_string(),
                    })?;
                    full.with_capacity(c)?
                };
                step(format!("{name} at {s}: used state"));
                let u = used_state(&p, args.random_factor, 1)?;
                if args.json {
                    json.push(serde_json::to_value(&u).unwrap_or_default());
                } else {
                    let _ = writeln!(out, "{}", used_line(&u));
                }
            }
        }
        if let Some(b) = &spinner {
            b.finish_and_clear();
        }
        return finish(args.json, out, json);
    }
    for p in profiles(&args)? {
        step(format!("{}: spec figures", p.name));
        let c = calibrate(&p, 1)?;
        if args.json {
            json.push(serde_json::to_value(&c).unwrap_or_default());
        } else {
            out.push_str(&table(&c));
        }
        if args.protocols {
            step(format!(
                "{}: protocols P1 and P2 (30 min of random writes each, in model time)",
                p.name
            ));
            let x = protocols(&p, 1)?;
            if args.json {
                json.push(serde_json::to_value(&x).unwrap_or_default());
            } else {
                out.push_str(&protocols_text(&x));
                out.push('\n');
            }
        }
        if args.used {
            step(format!("{}: used state", p.name));
            let u = used_state(&p, args.random_factor, 1)?;
            if args.json {
                json.push(serde_json::to_value(&u).unwrap_or_default());
            } else {
                let _ = writeln!(out, "  used state: {}\n", used_line(&u));
            }
        }
    }
    if let Some(b) = &spinner {
        b.finish_and_clear();
    }
    finish(args.json, out, json)
}

fn profile_names(args: &CalibrateArgs) -> Result<Vec<String>, CalibrateError> {
    if args.all {
        Ok(presets::NAMES
            .iter()
            .filter(|&&n| n != "instant")
            .map(|n| n.to_string())
            .collect())
    } else {
        Ok(vec![args.profile.clone().ok_or(CalibrateError::NoProfile)?])
    }
}

fn finish(as_json: bool, out: String, json: Vec<serde_json::Value>) -> Result<(), CalibrateError> {
    let text = if as_json {
        let mut s = serde_json::to_string_pretty(&json).unwrap_or_default();
        s.push('\n');
        s
    } else {
        out
    };
    cli_out::print(&text).map_err(CalibrateError::Stdout)
}

/// The fresh-drive figures as a table.
pub fn table(c: &Calibration) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} ({}): simulated vs spec, fresh drive, QD 32",
        c.profile,
        describe_size(c.capacity)
    );
    for (what, f, unit) in [
        ("128 KiB sequential read", c.seq_read_mb_s, "MB/s"),
        ("128 KiB sequential write", c.seq_write_mb_s, "MB/s"),
        ("4 KiB random read", c.rand_read_iops, "IOPS"),
        ("4 KiB random write", c.rand_write_iops, "IOPS"),
    ] {
        let spec = if f.spec > 0.0 {
            format!("{:>9.0} {unit}", f.spec)
        } else {
            format!("{:>9} {unit}", "-")
        };
        let ratio = if f.spec > 0.0 {
            format!("{:.2}", f.ratio)
        } else {
            "-".into()
        };
        let _ = writeln!(
            s,
            "  {what:<26} {:>9.0} {unit}   spec {spec}   ratio {ratio}",
            f.sim
        );
    }
    if let Some(v) = c.seq_write_incompressible_mb_s {
        let _ = writeln!(
            s,
            "  (figures above with compressible data; sequential write with incompressible data: {v:.0} MB/s)"
        );
    }
    if !c.source.is_empty() {
        let _ = writeln!(s, "  source: {}", c.source);
    }
    s.push('\n');
    s
}

fn used_line(u: &UsedState) -> String {
    format!(
        "{} {}: fresh {:.0} MB/s, random 4K {:.0} IOPS (WA {:.2}), used {:.0} MB/s (first tenth {:.0}) = {:.2} x fresh, after TRIM {:.0} MB/s = {:.2} x fresh",
        u.profile,
        describe_size(u.capacity),
        u.fresh_mb_s,
        u.random_iops,
        u.random_wa,
        u.used_mb_s,
        u.used_first_tenth_mb_s,
        u.used_ratio,
        u.trimmed_mb_s,
        u.trim_ratio
    )
}
