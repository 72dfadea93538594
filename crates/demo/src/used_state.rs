//! The `used-state` scenario: the guest's own fio shows the drive fresh,
//! in the "used state" after random writes, and back to fresh after a
//! whole-disk TRIM (`blkdiscard`).

use std::time::{Duration, Instant};

use serde::Serialize;

use super::{DemoArgs, DemoError, Env};
use vssd_guest::Guest;
use vssd_guest::bus::Bus;
use vssd_profile::size::format_size;

/// One measured phase: sequential 128 KiB write bandwidth per quarter of the disk.
#[derive(Debug, Serialize)]
pub struct Phase {
    /// Phase name: fresh, used, trimmed.
    pub name: String,
    /// Bytes/s for each quarter of the disk, in disk order.
    pub quarters_bytes_s: Vec<f64>,
    /// What the drive did over the phase, from the daemon's counters
    /// (`None` if a snapshot failed).
    pub drive: Option<PhaseDrive>,
}

/// The drive's side of a measured phase: the daemon's figures beside the
/// guest's. A host busy with other work slows the guest and leaves the
/// drive waiting for it (`busy_share` falls), but does not change what
/// the drive did while it had requests (`bytes_s_busy`), nor its write
/// amplification.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PhaseDrive {
    /// Host bytes written.
    pub host_written_bytes: u64,
    /// NAND bytes programmed.
    pub nand_programmed_bytes: u64,
    /// Their ratio (0 without host writes).
    pub write_amplification: f64,
    /// GC page copies.
    pub gc_copies: u64,
    /// Wall time of the phase on the host, s.
    pub wall_s: f64,
    /// Time the drive had at least one request in flight, s.
    pub busy_s: f64,
    /// `busy_s / wall_s`: how much of the phase the guest kept the drive busy.
    pub busy_share: f64,
    /// Host bytes written per second of busy time: the drive's speed,
    /// whatever the guest's pace.
    pub bytes_s_busy: f64,
}

/// The drive at a phase boundary.
#[derive(Debug, Clone)]
struct Snap {
    host_written: u64,
    nand_programmed: u64,
    gc_copies: u64,
    busy_ns: u64,
    at: Instant,
}

impl PhaseDrive {
    fn between(a: &Snap, b: &Snap) -> PhaseDrive {
        let host = b.host_written.saturating_sub(a.host_written);
        let nand = b.nand_programmed.saturating_sub(a.nand_programmed);
        let busy_s = b.busy_ns.saturating_sub(a.busy_ns) as f64 / 1e9;
        let wall_s = b.at.duration_since(a.at).as_secs_f64();
        PhaseDrive {
            host_written_bytes: host,
            nand_programmed_bytes: nand,
            write_amplification: if host > 0 {
                nand as f64 / host as f64
            } else {
                0.0
            },
            gc_copies: b.gc_copies.saturating_sub(a.gc_copies),
            wall_s,
            busy_s,
            busy_share: if wall_s > 0.0 {
                (busy_s / wall_s).min(1.0)
            } else {
                0.0
            },
            bytes_s_busy: if busy_s > 0.0 {
                host as f64 / busy_s
            } else {
                0.0
            },
        }
    }
}

/// The demo's result.
#[derive(Debug, Serialize)]
pub struct DemoReport {
    /// Profile name.
    pub profile: String,
    /// The bus the guest saw the drive on.
    pub bus: Bus,
    /// Exported capacity.
    pub capacity: u64,
    /// The model's prediction for a fresh drive, bytes/s: sustained.
    pub predicted_seq_write_bytes_s: f64,
    /// The same for one quarter that starts with the write buffer empty
    /// (fio pauses between quarters and the buffer drains meanwhile), so
    /// the buffer takes the first of the quarter's data at link speed.
    pub predicted_quarter_bytes_s: f64,
    /// Measured phases.
    pub phases: Vec<Phase>,
    /// Drive counters at the end (from `vssd ctl stats --json`).
    pub stats: serde_json::Value,
    /// Wall time of the guest run, s.
    pub guest_seconds: f64,
}

fn script(bus: Bus, capacity: u64, random_bytes: u64) -> String {
    let random_bytes = random_bytes.div_ceil(4096) * 4096;
    format!(
        r#"set -e
DEV={dev}
test "$(cat /sys/block/{name}/size)" -eq {sectors}
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
        dev = bus.guest_dev(),
        name = bus.sysfs_name(),
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
            drive: None,
        });
    }
    Ok(phases)
}

/// Run the used-state sequence.
pub fn run(args: &DemoArgs, env: &Env) -> Result<(), DemoError> {
    let say = |m: &str| env.say(m);
    let predicted = env.profile.predict().seq_write_bytes_s;
    let predicted_quarter = super::write_from_empty_buffer(&env.profile, args.capacity / 4);
    let serve = env.start_serve()?;
    say(&format!(
        "booting the guest ({} bus, {}); its fio measures fresh, used (after random writes) and trimmed (after blkdiscard)",
        args.bus,
        args.bus.guest_dev()
    ));
    let random_bytes = (args.capacity as f64 * args.random_passes) as u64;
    let t0 = Instant::now();
    // The drive at each measured phase's start and end.
    let mut snaps: Vec<(String, Option<Snap>, Option<Snap>)> = Vec::new();
    let take = || {
        serve.stats().ok().map(|r| Snap {
            host_written: r.counters.host_written_bytes,
            nand_programmed: r.counters.nand_bytes_programmed,
            gc_copies: r.counters.gc_copies,
            busy_ns: r.connection.depth.busy_ns,
            at: Instant::now(),
        })
    };
    let run = Guest::new().disk(serve.disk()).run_script_streaming(
        &script(args.bus, args.capacity, random_bytes),
        Duration::from_secs(args.timeout),
        |line| {
            if let Some(phase) = line.strip_prefix("@@BEGIN ") {
                snaps.push((phase.trim().to_string(), take(), None));
            } else if let Some(phase) = line.strip_prefix("@@END ")
                && let Some(s) = snaps.iter_mut().find(|s| s.0 == phase.trim())
            {
                s.2 = take();
            }
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
    let mut phases = parse_phases(&run.output)?;
    for p in &mut phases {
        if let Some((_, Some(a), Some(b))) = snaps.iter().find(|s| s.0 == p.name) {
            p.drive = Some(PhaseDrive::between(a, b));
        }
    }
    let stats = serde_json::to_value(serve.stats()?).unwrap_or(serde_json::Value::Null);
    drop(serve);

    let report = DemoReport {
        profile: env.profile.name.clone(),
        bus: args.bus,
        capacity: args.capacity,
        predicted_seq_write_bytes_s: predicted,
        predicted_quarter_bytes_s: predicted_quarter,
        phases,
        stats,
        guest_seconds,
    };
    if args.json {
        env.print(&serde_json::to_string_pretty(&report).unwrap_or_default())
    } else {
        env.print(&table(&report))
    }
}

fn table(r: &DemoReport) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Sequential 128 KiB writes at QD 32, measured by fio inside the guest ({} on {}, {} bus, {:.0} s in the guest)",
        format_size(r.capacity),
        r.profile,
        r.bus,
        r.guest_seconds
    );
    let _ = writeln!(
        o,
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
        let _ = write!(o, "{:<34}", label(&p.name));
        for q in &p.quarters_bytes_s {
            let _ = write!(o, " {:>9.1}", q / 1e6);
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(
        o,
        "{:<34} {:>9.1}   (model, fresh drive: sustained; {:.1} for a quarter that starts with the write buffer drained)",
        "predicted",
        r.predicted_seq_write_bytes_s / 1e6,
        r.predicted_quarter_bytes_s / 1e6
    );
    let drive: Vec<String> = r
        .phases
        .iter()
        .filter_map(|p| {
            let d = p.drive.as_ref()?;
            Some(format!(
                "{} {:.1} MB/s while busy ({:.0} % of the phase), WAF {:.2}",
                p.name,
                d.bytes_s_busy / 1e6,
                d.busy_share * 100.0,
                d.write_amplification
            ))
        })
        .collect();
    if !drive.is_empty() {
        let _ = writeln!(
            o,
            "drive side (the daemon's counters): {}",
            drive.join("; ")
        );
    }
    let first = |name: &str| {
        r.phases
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.quarters_bytes_s.first().copied())
    };
    if let (Some(f), Some(u), Some(t)) = (first("fresh"), first("used"), first("trimmed")) {
        let _ = writeln!(
            o,
            "\nFirst quarter: used = {:.0} % of fresh, after TRIM = {:.0} % of fresh.",
            100.0 * u / f,
            100.0 * t / f
        );
    }
    if let Some(wa) = r
        .stats
        .pointer("/model/write_amplification")
        .or_else(|| r.stats.pointer("/counters/write_amplification"))
        .and_then(serde_json::Value::as_f64)
    {
        let _ = writeln!(o, "Write amplification over the whole run: {wa:.2}");
    }
    o
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
