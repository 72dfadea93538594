//! The `vssd` command line.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

use std::fmt::Write as _;

use vssd::profile::{Profile, presets};
use vssd::size::{describe_size, format_size, parse_size};
use vssd_common::cli_out;

#[derive(Parser)]
#[command(
    name = "vssd",
    version,
    about = "An SSD that does not exist: an emulated flash drive for QEMU guests"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Log lines on standard error as text, or as JSON objects (timestamp,
    /// level, target, message) for a log shipper. `RUST_LOG` filters them.
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: vssd::logging::LogFormat,
}

#[derive(Subcommand)]
enum Cmd {
    /// The main job: boot a guest on an emulated SSD and show fresh, used and trimmed speeds.
    #[cfg(feature = "kit")]
    Demo(vssd_demo::DemoArgs),
    /// Serve an emulated SSD to QEMU: virtio-blk over vhost-user, SATA or NVMe over NBD.
    Serve(vssd::serve::ServeArgs),
    /// Inspect or reset a running `vssd serve` through its control socket.
    Ctl(vssd::ctl::CtlArgs),
    /// List built-in drive profiles, or show one as editable TOML.
    Profiles {
        #[command(subcommand)]
        what: Option<ProfilesCmd>,
    },
    /// Benchmark scenarios (the published protocols) in a guest and in the simulator.
    #[cfg(feature = "kit")]
    Bench(vssd_bench::BenchArgs),
    /// Measure a block device like HD Tune: throughput at positions over it
    /// (run it in a guest; writing destroys data).
    #[cfg(feature = "kit")]
    Surface(vssd_bench::surface::SurfaceArgs),
    /// Run fio job files against the drive model in virtual time.
    Sim(vssd::sim::SimArgs),
    /// Compare a profile's simulated figures with its published spec sheet.
    Calibrate(vssd::calibrate::CalibrateArgs),
    /// Run the presets on the published measurements of their drives
    /// (validation/*.toml) and report each figure's error.
    #[cfg(feature = "kit")]
    Validate(vssd_fidelity::ValidateArgs),
    /// Print the QEMU arguments (or libvirt XML) that attach a `vssd serve`
    /// drive on a bus, with the preset's model, serial and firmware.
    QemuArgs(vssd::qemu_args::QemuArgsArgs),
    /// Read, summarise and convert request traces (`serve --trace`, fio
    /// iologs, blkparse, blktrace); `vssd sim` replays them (`read_iolog=`).
    Trace(vssd::trace::command::TraceArgs),
    /// Drive a vhost-user-blk backend (vssd serve, qemu-storage-daemon) without a guest and measure it.
    Loadgen(vssd::loadgen::LoadgenArgs),
}

#[derive(Subcommand)]
enum ProfilesCmd {
    /// Print a profile (preset name or file) as TOML, with predicted figures.
    Show {
        /// Preset name or TOML file.
        name: String,
        /// Override the exported capacity (geometry scaled, OP ratio kept):
        /// 16G or 16GiB = 16 x 2^30 bytes, 16GB = 16 x 10^9 bytes.
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        capacity: Option<u64>,
        /// Also build the model and print its memory footprint and set-up time.
        #[arg(long)]
        measure: bool,
    },
}

fn profiles(what: Option<ProfilesCmd>) -> Result<(), Box<dyn std::error::Error>> {
    let mut text = String::new();
    match what {
        None => {
            for name in presets::NAMES {
                let p = Profile::load(name)?;
                let _ = writeln!(
                    text,
                    "{:<15} {:>9}  {}\n{:<26} {}",
                    name,
                    format_size(p.geometry.exported_capacity.0),
                    p.description,
                    "",
                    vssd::profile::validated::describe(name)
                );
            }
        }
        Some(ProfilesCmd::Show {
            name,
            capacity,
            measure,
        }) => {
            let p = Profile::load_with_capacity(&name, capacity)?;
            if measure {
                p.check_memory()?;
            }
            let pr = p.predict();
            let mbs = |v: f64| {
                if v.is_finite() {
                    format!("{:.0} MB/s", v / 1e6)
                } else {
                    "unlimited".into()
                }
            };
            let _ = writeln!(text, "# {}", p.description);
            if presets::get(&name).is_some() {
                let _ = writeln!(
                    text,
                    "# fidelity (vssd validate): {}",
                    vssd_profile::validated::describe(&name)
                );
            }
            let retired = match p.geometry.retired_blocks {
                0 => String::new(),
                n => format!(
                    " ({} in {n} retired blocks)",
                    format_size(p.raw_capacity() - p.in_service_capacity())
                ),
            };
            let _ = writeln!(
                text,
                "# raw {}{retired} / exported {} / over-provisioning {:.1} %",
                format_size(p.raw_capacity()),
                describe_size(p.geometry.exported_capacity.0),
                p.op_ratio() * 100.0
            );
            let _ = writeln!(
                text,
                "# predicted fresh: sequential write {}, sequential read {} (link {}, channels {}, NAND program {})",
                mbs(pr.seq_write_bytes_s),
                mbs(pr.seq_read_bytes_s),
                mbs(pr.link_bytes_s),
                mbs(pr.channel_bytes_s),
                mbs(pr.nand_program_bytes_s)
            );
            if measure {
                let t0 = std::time::Instant::now();
                let ssd = vssd::model::Ssd::new(&p, 0);
                let setup = t0.elapsed();
                let bytes = ssd.memory_bytes();
                let units = p.geometry.exported_capacity.0 / p.geometry.mapping_unit.0;
                let _ = writeln!(
                    text,
                    "# model state: {} ({:.2} bytes per mapping unit), initialised in {:.1} ms",
                    format_size(bytes as u64),
                    bytes as f64 / units as f64,
                    setup.as_secs_f64() * 1e3
                );
            }
            text.push_str(&p.to_toml());
        }
    }
    cli_out::print(&text)?;
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    vssd::logging::init(cli.log_format);
    let r: Result<(), Box<dyn std::error::Error>> = match cli.cmd {
        Cmd::Profiles { what } => profiles(what),
        Cmd::Sim(args) => vssd::sim::run(args).map_err(Into::into),
        #[cfg(feature = "kit")]
        Cmd::Calibrate(args) if args.fit => vssd_fidelity::fit::run_cli(args).map_err(Into::into),
        #[cfg(not(feature = "kit"))]
        Cmd::Calibrate(args) if args.fit => {
            Err("calibrate --fit needs vssd built with its kit (the default features)".into())
        }
        Cmd::Calibrate(args) => vssd::calibrate::run(args).map_err(Into::into),
        #[cfg(feature = "kit")]
        Cmd::Validate(a) => vssd_fidelity::run_cli(a).map_err(Into::into),
        #[cfg(feature = "kit")]
        Cmd::Bench(a) => vssd_bench::run(a).map_err(Into::into),
        #[cfg(feature = "kit")]
        Cmd::Surface(a) => vssd_bench::surface::run(a).map_err(Into::into),
        #[cfg(feature = "kit")]
        Cmd::Demo(a) => vssd_demo::run(a).map_err(Into::into),
        Cmd::Serve(a) => vssd::serve::run(a).map_err(Into::into),
        Cmd::Ctl(a) => vssd::ctl::run(a).map_err(Into::into),
        Cmd::Loadgen(a) => vssd::loadgen::run(a).map_err(Into::into),
        Cmd::QemuArgs(a) => vssd::qemu_args::run(a).map_err(Into::into),
        Cmd::Trace(a) => vssd::trace::command::run(a).map_err(Into::into),
    };
    match cli_out::finish(r) {
        cli_out::Exit::Success => ExitCode::SUCCESS,
        cli_out::Exit::Failure => ExitCode::FAILURE,
    }
}
