//! `vssd demo`: the main job end to end. Starts `vssd serve`, boots the test
//! guest on it, and has the guest's own fio show the drive fresh, in the
//! "used state" after random writes, and back to fresh after a whole-disk
//! TRIM (`blkdiscard`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use thiserror::Error;

use crate::kit::guest::{Disk, Guest, GuestError, ensure_image};
use crate::profile::{Profile, ProfileError};
use crate::size::{format_size, parse_size};

/// `vssd demo` options.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Drive profile (preset name or TOML file).
    #[arg(long, default_value = "sata-mlc-2011")]
    pub profile: String,
    /// Exported capacity: small, so the random-write phases take minutes, yet
    /// large against the drive's write buffer (32 MiB on sata-mlc-2011),
    /// which would otherwise absorb much of each quarter's writes.
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    pub capacity: u64,
    /// Random 4 KiB writes in each "age the drive" phase, as a multiple of the capacity.
    #[arg(long, default_value_t = 1.5)]
    pub random_passes: f64,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 1200)]
    pub timeout: u64,
}

/// Errors of the demo.
#[derive(Debug, Error)]
pub enum DemoError {
    /// The profile is invalid.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// Building or running the guest failed.
    #[error(transparent)]
    Guest(#[from] GuestError),
    /// Starting or talking to `vssd serve` failed.
    #[error("vssd serve: {0}")]
    Serve(String),
    /// The guest script failed.
    #[error("the guest script failed (status {status}); its output:\n{output}")]
    Script {
        /// Exit status.
        status: i32,
        /// What it printed.
        output: String,
    },
    /// fio's output could not be read.
    #[error("could not read fio's result for phase {phase}: {why}")]
    Fio {
        /// Phase name.
        phase: String,
        /// Why.
        why: String,
    },
}

/// One measured phase: sequential 128 KiB write bandwidth per quarter of the disk.
#[derive(Debug, Serialize)]
pub struct Phase {
    /// Phase name: fresh, used, trimmed.
    pub name: String,
    /// Bytes/s for each quarter of the disk, in disk order.
    pub quarters_bytes_s: Vec<f64>,
}

/// The demo's result.
#[derive(Debug, Serialize)]
pub struct DemoReport {
    /// Profile name.
    pub profile: String,
    /// Exported capacity.
    pub capacity: u64,
    /// The model's prediction for a fresh drive, bytes/s.
    pub predicted_seq_write_bytes_s: f64,
    /// Measured phases.
    pub phases: Vec<Phase>,
    /// Drive counters at the end (from `vssd ctl stats --json`).
    pub stats: serde_json::Value,
    /// Wall time of the guest run, s.
    pub guest_seconds: f64,
}

/// Kills the daemon when the demo ends, however it ends.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        // SIGTERM first so it shuts down cleanly; then make sure.
        // SAFETY: kill(2) on our own child's pid, no memory involved.
        unsafe {
            libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(path: &Path, child: &mut Child) -> Result<(), DemoError> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if path.exists() {
            return Ok(());
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(DemoError::Serve(format!("exited early ({st})")));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(DemoError::Serve(format!(
        "{} did not appear within 20 s",
        path.display()
    )))
}

fn script(capacity: u64, random_bytes: u64) -> String {
    let random_bytes = random_bytes.div_ceil(4096) * 4096;
    format!(
        r#"set -e
DEV=/dev/vda
test "$(cat /sys/block/vda/size)" -eq {sectors}
FIO="fio --filename=$DEV --ioengine=libaio --direct=1 --output-format=json"
# One fio run per phase, one stonewalled job per quarter: no pause between
# quarters in which the drive's write buffer could drain.
seq_quarters() {{
    echo "@@BEGIN $1"
    $FIO --rw=write --bs=128k --iodepth=32 --size={quarter} \
        --name=q0 --offset=0 \
        --name=q1 --stonewall --offset={quarter} \
        --name=q2 --stonewall --offset=$((2 * {quarter})) \
        --name=q3 --stonewall --offset=$((3 * {quarter}))
    echo "@@END $1"
}}
age() {{
    echo "@@AGE $1"
    $FIO --name=age --rw=randwrite --bs=4k --iodepth=32 --io_size={random_bytes} --randrepeat=0 --norandommap >/dev/null
}}
seq_quarters fresh
age 1
seq_quarters used
age 2
echo "@@TRIM"
blkdiscard $DEV
seq_quarters trimmed
"#,
        sectors = capacity / 512,
        quarter = capacity / 4,
    )
}

fn parse_phases(output: &str) -> Result<Vec<Phase>, DemoError> {
    let mut phases: Vec<Phase> = Vec::new();
    let mut lines = output.lines();
    while let Some(line) = lines.next() {
        let Some(tag) = line.strip_prefix("@@BEGIN ") else {
            continue;
        };
        let mut json = String::new();
        for l in lines.by_ref() {
            if l.starts_with("@@END ") {
                break;
            }
            json.push_str(l);
            json.push('\n');
        }
        let err = |why: String| DemoError::Fio {
            phase: tag.to_string(),
            why,
        };
        // fio may print notes before the JSON object.
        let start = json
            .find('{')
            .ok_or_else(|| err("no JSON in fio output".into()))?;
        let v: serde_json::Value =
            serde_json::from_str(&json[start..]).map_err(|e| err(e.to_string()))?;
        let jobs = v["jobs"]
            .as_array()
            .ok_or_else(|| err("no jobs in fio's JSON".into()))?;
        let quarters = jobs
            .iter()
            .map(|j| j["write"]["bw_bytes"].as_f64())
            .collect::<Option<Vec<f64>>>()
            .ok_or_else(|| err("a job without write.bw_bytes".into()))?;
        if quarters.len() != 4 {
            return Err(err(format!("{} jobs, expected 4", quarters.len())));
        }
        phases.push(Phase {
            name: tag.to_string(),
            quarters_bytes_s: quarters,
        });
    }
    Ok(phases)
}

/// Run the demo.
pub fn run(args: DemoArgs) -> Result<(), DemoError> {
    let profile = Profile::load_with_capacity(&args.profile, Some(args.capacity))?;
    let predicted = profile.predict().seq_write_bytes_s;
    let say = |m: &str| {
        if !args.json {
            eprintln!("vssd demo: {m}");
        }
    };
    say("preparing the test guest (first run downloads a Debian kernel)");
    ensure_image()?;

    let dir: PathBuf = std::env::temp_dir().join(format!("vssd-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| DemoError::Serve(format!("{}: {e}", dir.display())))?;
    let sock = dir.join("vhost.sock");
    let ctl = dir.join("control.sock");
    let exe = std::env::current_exe().map_err(|e| DemoError::Serve(e.to_string()))?;
    say(&format!(
        "starting vssd serve: profile {}, {} (predicted fresh sequential write {:.0} MB/s)",
        profile.name,
        format_size(args.capacity),
        predicted / 1e6
    ));
    let child = Command::new(&exe)
        .arg("serve")
        .arg("--socket")
        .arg(&sock)
        .arg("--control")
        .arg(&ctl)
        .args(["--profile", &args.profile, "--capacity"])
        .arg(args.capacity.to_string())
        // SCHED_FIFO completion threads keep completions on time while the
        // guest's vCPUs use every core (a warning and normal scheduling
        // where that is not permitted).
        .args(["--memory", "--queues", "2", "--realtime"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| DemoError::Serve(format!("cannot start {}: {e}", exe.display())))?;
    let mut daemon = Daemon(child);
    wait_for(&sock, &mut daemon.0)?;

    say(
        "booting the guest; its fio measures fresh, used (after random writes) and trimmed (after blkdiscard)",
    );
    let random_bytes = (args.capacity as f64 * args.random_passes) as u64;
    let t0 = Instant::now();
    let run = Guest::new()
        .disk(Disk::VhostUserBlk {
            socket: sock.clone(),
            num_queues: 2,
        })
        .run_script_streaming(
            &script(args.capacity, random_bytes),
            Duration::from_secs(args.timeout),
            |line| {
                let step = if let Some(phase) = line.strip_prefix("@@BEGIN ") {
                    format!("{phase}: sequential 128 KiB writes over the whole disk")
                } else if let Some(n) = line.strip_prefix("@@AGE ") {
                    format!(
                        "aging the drive ({n}/2): {} of random 4 KiB writes",
                        format_size(random_bytes)
                    )
                } else if line.starts_with("@@TRIM") {
                    "blkdiscard of the whole disk".to_string()
                } else {
                    return;
                };
                say(&format!("[{:>4.0} s] {step}", t0.elapsed().as_secs_f64()));
            },
        )?;
    let guest_seconds = t0.elapsed().as_secs_f64();
    if run.exit_code != 0 {
        return Err(DemoError::Script {
            status: run.exit_code,
            output: run.output,
        });
    }
    let phases = parse_phases(&run.output)?;
    let stats_out = Command::new(&exe)
        .args(["ctl", "--control"])
        .arg(&ctl)
        .args(["stats", "--json"])
        .output()
        .map_err(|e| DemoError::Serve(format!("vssd ctl: {e}")))?;
    let stats: serde_json::Value =
        serde_json::from_slice(&stats_out.stdout).unwrap_or(serde_json::Value::Null);
    drop(daemon);
    let _ = std::fs::remove_dir_all(&dir);

    let report = DemoReport {
        profile: profile.name.clone(),
        capacity: args.capacity,
        predicted_seq_write_bytes_s: predicted,
        phases,
        stats,
        guest_seconds,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("serialisable")
        );
    } else {
        print_table(&report);
    }
    Ok(())
}

fn print_table(r: &DemoReport) {
    println!();
    println!(
        "Sequential 128 KiB writes at QD 32, measured by fio inside the guest ({} on {}, {:.0} s in the guest)",
        format_size(r.capacity),
        r.profile,
        r.guest_seconds
    );
    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>9}   MB/s",
        "phase", "1st 1/4", "2nd 1/4", "3rd 1/4", "4th 1/4"
    );
    fn label(n: &str) -> &str {
        match n {
            "fresh" => "fresh (new drive)",
            "used" => "used (after random 4K writes)",
            "trimmed" => "after TRIM (blkdiscard, whole disk)",
            other => other,
        }
    }
    for p in &r.phases {
        print!("{:<34}", label(&p.name));
        for q in &p.quarters_bytes_s {
            print!(" {:>9.1}", q / 1e6);
        }
        println!();
    }
    println!(
        "{:<34} {:>9.1}   (model, fresh drive)",
        "predicted",
        r.predicted_seq_write_bytes_s / 1e6
    );
    let first = |name: &str| {
        r.phases
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.quarters_bytes_s.first().copied())
    };
    if let (Some(f), Some(u), Some(t)) = (first("fresh"), first("used"), first("trimmed")) {
        println!(
            "\nFirst quarter: used = {:.0} % of fresh, after TRIM = {:.0} % of fresh.",
            100.0 * u / f,
            100.0 * t / f
        );
    }
    if let Some(wa) = r
        .stats
        .pointer("/model/write_amplification")
        .or_else(|| r.stats.pointer("/counters/write_amplification"))
    {
        println!("Write amplification over the whole run: {wa}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fio_sections() {
        let job = |bw: u64| format!("{{\"write\":{{\"bw_bytes\":{bw}}}}}");
        let four =
            |a, b, c, d| format!("{{\"jobs\":[{},{},{},{}]}}", job(a), job(b), job(c), job(d));
        let out = format!(
            "noise\n@@BEGIN fresh\nnote: x\n{}\n@@END fresh\n@@BEGIN used\n{}\n@@END used\n",
            four(100, 200, 300, 400),
            four(5, 6, 7, 8)
        );
        let p = parse_phases(&out).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].name, "fresh");
        assert_eq!(p[0].quarters_bytes_s, vec![100.0, 200.0, 300.0, 400.0]);
        assert_eq!(p[1].quarters_bytes_s, vec![5.0, 6.0, 7.0, 8.0]);
        assert!(parse_phases("@@BEGIN x\nnot json\n@@END x\n").is_err());
        assert!(parse_phases(&format!("@@BEGIN x\n{{\"jobs\":[{}]}}\n@@END x\n", job(1))).is_err());
    }
}
