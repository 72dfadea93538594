//! Hand-built, realistic runs for the chart and report tests: shapes like
//! the reviews' (fresh fast, used slow, after TRIM fast again), numbers of
//! the size `vssd demo` measures at 1 GiB. Deterministic.

use std::collections::BTreeMap;

use serde_json::json;

use super::results::*;
use vssd_device::report::TrimReport;
use vssd_guest::bus::Bus;
use vssd_model::Counters;

const GIB: u64 = 1 << 30;
const TOTAL_BLOCKS: u64 = 4096;

/// Deterministic noise in [-1, 1].
fn noise(i: u64, seed: u64) -> f64 {
    let mut z = i
        .wrapping_add(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

fn environment(mode: Mode) -> Environment {
    match mode {
        Mode::Guest => Environment {
            vssd: "0.1.0".into(),
            qemu: Some("8.2.2".into()),
            fio: Some("fio-3.33".into()),
            guest_kernel: Some("6.1.0-27-amd64".into()),
            accel: Some("kvm".into()),
            host: "bench-host".into(),
            host_cpus: 2,
        },
        Mode::Sim => Environment {
            vssd: "0.1.0".into(),
            host: "bench-host".into(),
            host_cpus: 2,
            ..Default::default()
        },
    }
}

/// Builds phases one after another, keeping the drive's counters and the
/// samples consistent.
struct Run {
    mode: Mode,
    seed: u64,
    t: f64,
    c: Counters,
    phases: Vec<PhaseResult>,
    samples: Vec<DriveSample>,
}

impl Run {
    fn new(mode: Mode, seed: u64) -> Run {
        Run {
            mode,
            seed,
            t: 0.0,
            c: Counters {
                free_blocks: TOTAL_BLOCKS - 16,
                total_blocks: TOTAL_BLOCKS,
                total_units: GIB / 4096,
                ..Default::default()
            },
            phases: Vec::new(),
            samples: Vec::new(),
        }
    }

    /// Adds a phase that lasts `secs`, writes `written` host bytes with
    /// write amplification `waf`, and ends with `free_end` free blocks.
    #[allow(clippy::too_many_arguments)]
    fn phase(
        &mut self,
        name: &str,
        kind: &str,
        gap: f64,
        secs: f64,
        written: u64,
        waf: f64,
        free_end: u64,
        fill: impl FnOnce(&mut PhaseResult),
    ) {
        let before = self.c.clone();
        let (before_host, before_nand) = (before.host_written_bytes, before.nand_bytes_programmed);
        let idx = self.phases.len();
        // Idle gap: the drive is sampled, nothing is written.
        let steps = gap.floor() as u64;
        for _ in 0..steps {
            self.t += 1.0;
            self.sample(idx, 0.0);
        }
        let n = secs.ceil().max(1.0) as u64;
        let free_start = self.c.free_blocks as f64;
        for i in 0..n {
            self.t += secs / n as f64;
            let host = written / n;
            let w = if host > 0 {
                (waf * (1.0 + 0.08 * noise(i, self.seed + idx as u64))).max(1.0)
            } else {
                0.0
            };
            self.c.host_written_bytes += host;
            self.c.nand_bytes_programmed += (host as f64 * w) as u64;
            self.c.host_write_cmds += host / 4096;
            self.c.erases += (host as f64 * w / (1 << 20) as f64) as u64;
            self.c.gc_copies += (host as f64 * (w - 1.0).max(0.0) / 4096.0) as u64;
            let f = (i + 1) as f64 / n as f64;
            self.c.free_blocks = (free_start + (free_end as f64 - free_start) * f).round() as u64;
            self.sample(idx, w);
        }
        self.c.write_amplification = if self.c.host_written_bytes > 0 {
            self.c.nand_bytes_programmed as f64 / self.c.host_written_bytes as f64
        } else {
            0.0
        };
        let mut p = PhaseResult {
            name: name.into(),
            kind: kind.into(),
            wall_s: secs,
            model_s: secs * if self.mode == Mode::Guest { 0.97 } else { 1.0 },
            gap_before_s: gap,
            metrics: BTreeMap::new(),
            fio: None,
            series: None,
            surface: None,
            trim: None,
            counters_before: Some(before),
            counters_after: Some(self.c.clone()),
            trace_ns: None,
        };
        fill(&mut p);
        // The drive's figures over the phase, as the runner records them.
        let host = self.c.host_written_bytes - before_host;
        let nand = self.c.nand_bytes_programmed - before_nand;
        let m = &mut p.metrics;
        m.insert("host_written".into(), host as f64);
        m.insert("nand_written".into(), nand as f64);
        m.insert(
            "waf".into(),
            if host > 0 {
                nand as f64 / host as f64
            } else {
                0.0
            },
        );
        m.insert("free_blocks".into(), self.c.free_blocks as f64);
        m.insert("wall_s".into(), p.wall_s);
        m.insert("model_s".into(), p.model_s);
        self.phases.push(p);
    }

    fn sample(&mut self, phase: usize, waf: f64) {
        self.samples.push(DriveSample {
            t_s: self.t,
            phase,
            waf,
            free_blocks: self.c.free_blocks,
            total_blocks: TOTAL_BLOCKS,
            host_written_bytes: self.c.host_written_bytes,
            nand_bytes_programmed: self.c.nand_bytes_programmed,
        });
    }
}

/// An HD Tune-style write pass: 100 positions, 128 KiB blocks, around
/// `level` bytes/s with `spread` relative noise, `dips` of them slowed to
/// `dip` of the level.
fn surface(level: f64, spread: f64, dips: u64, dip: f64, seed: u64) -> Surface {
    let n = 100u64;
    let points = (0..n)
        .map(|i| {
            let offset = i * (GIB / n) / (1 << 20) * (1 << 20);
            let mut v = level * (1.0 + spread * noise(i, seed));
            if dips > 0 && (noise(i, seed ^ 0xD1) + 1.0) / 2.0 < dips as f64 / n as f64 {
                v *= dip;
            }
            SurfacePoint {
                offset,
                position: offset as f64 / GIB as f64,
                bytes_s: v,
                start_s: None,
            }
        })
        .collect();
    Surface {
        op: "write".into(),
        block: 128 << 10,
        burst: 8 << 20,
        points,
        started_uptime_s: None,
        lead_s: None,
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// fio's JSON (the parts reports read) for one write job.
fn fio_json(
    name: &str,
    rw: &str,
    bs: &str,
    bw: f64,
    bs_bytes: f64,
    runtime_s: f64,
) -> serde_json::Value {
    json!({
        "fio version": "fio-3.33",
        "timestamp": 1_764_554_400u64,
        "global options": { "ioengine": "libaio", "direct": "1", "filename": "/dev/vda" },
        "jobs": [{
            "jobname": name,
            "job options": { "rw": rw, "bs": bs, "iodepth": "32" },
            "read": { "io_bytes": 0, "bw_bytes": 0, "iops": 0.0, "runtime": 0 },
            "write": {
                "io_bytes": (bw * runtime_s) as u64,
                "bw_bytes": bw as u64,
                "iops": bw / bs_bytes,
                "runtime": (runtime_s * 1000.0) as u64
            }
        }]
    })
}

/// A surface phase's figures, named as the runner names them.
fn surface_phase(p: &mut PhaseResult, s: Surface) {
    let v: Vec<f64> = s.points.iter().map(|p| p.bytes_s).collect();
    p.metrics.insert("mean_bw".into(), mean(&v));
    let mut sorted = v.clone();
    sorted.sort_by(f64::total_cmp);
    if !sorted.is_empty() {
        p.metrics
            .insert("median_bw".into(), sorted[sorted.len() / 2]);
    }
    p.metrics.insert(
        "min_bw".into(),
        v.iter().copied().fold(f64::INFINITY, f64::min),
    );
    p.metrics
        .insert("max_bw".into(), v.iter().copied().fold(0.0, f64::max));
    p.metrics.insert("first_bw".into(), v[0]);
    p.metrics.insert("last_bw".into(), v[v.len() - 1]);
    p.surface = Some(s);
}

fn series_phase(p: &mut PhaseResult, rw: &str, bs: &str, bs_bytes: f64, w: Vec<f64>) {
    let bw = mean(&w);
    let clat = 32.0 * bs_bytes / bw * 1e9;
    p.metrics.insert("write_bw".into(), bw);
    p.metrics.insert("write_iops".into(), bw / bs_bytes);
    p.metrics.insert("write_clat_mean".into(), clat);
    p.metrics.insert("write_clat_p99".into(), clat * 2.7);
    p.metrics.insert("read_bw".into(), 0.0);
    p.metrics.insert("read_iops".into(), 0.0);
    p.fio = Some(fio_json(&p.name, rw, bs, bw, bs_bytes, w.len() as f64));
    p.series = Some(Series {
        interval_s: 1.0,
        read_bytes_s: Vec::new(),
        write_bytes_s: w,
    });
}

/// Protocol P2 at 1 GiB: erase, fresh surface, 4 KiB random writes, used
/// surface, whole-drive TRIM, surface after TRIM, expectations.
/// `recovered` is the after-TRIM level as a fraction of fresh.
fn trim_recovery_run(mode: Mode, seed: u64, recovered: f64, random_level: f64) -> BenchResults {
    let mut run = Run::new(mode, seed);
    run.phase(
        "erase",
        "secure-erase",
        0.0,
        1.0,
        0,
        1.0,
        TOTAL_BLOCKS - 16,
        |_| {},
    );
    run.phase("fresh", "surface", 2.0, 6.0, 100 << 23, 1.0, 3890, |p| {
        surface_phase(p, surface(201e6, 0.025, 0, 1.0, seed))
    });
    let random: Vec<f64> = (0..120)
        .map(|i| {
            let base = if i < 25 {
                random_level * 5.0 - i as f64 * random_level * 0.12
            } else {
                random_level
            };
            base * (1.0 + 0.15 * noise(i, seed + 7))
        })
        .collect();
    let written = (random.iter().sum::<f64>()) as u64;
    run.phase("random", "fio", 3.5, 120.0, written, 3.4, 60, |p| {
        series_phase(p, "randwrite", "4k", 4096.0, random)
    });
    run.phase("used", "surface", 2.5, 18.0, 100 << 23, 2.6, 48, |p| {
        surface_phase(p, surface(44e6, 0.35, 18, 3.2, seed + 1))
    });
    run.phase("trim", "trim", 1.5, 2.0, 0, 1.0, 3950, |p| {
        p.trim = Some(TrimReport {
            discard_cmds: 256,
            write_zeroes_cmds: 0,
            requested_bytes: GIB,
            freed_bytes: GIB - (31 << 20),
            already_unmapped_bytes: 31 << 20,
        });
        p.metrics
            .insert("freed_bytes".into(), (GIB - (31 << 20)) as f64);
    });
    run.phase("trimmed", "surface", 4.0, 6.0, 100 << 23, 1.02, 3860, |p| {
        surface_phase(p, surface(201e6 * recovered, 0.03, 0, 1.0, seed + 2))
    });
    let fresh = run.phases[1].metrics["mean_bw"];
    let used = run.phases[3].metrics["mean_bw"];
    let trimmed = run.phases[5].metrics["mean_bw"];
    run.phase("check", "expect", 0.0, 0.0, 0, 1.0, 3860, |_| {});
    let expects = vec![
        ExpectResult {
            text: "used.mean_bw < 0.5 * fresh.mean_bw".into(),
            passed: used < 0.5 * fresh,
            detail: format!(
                "used.mean_bw = {used:.3e} < 0.5 × fresh.mean_bw = {:.3e}",
                0.5 * fresh
            ),
            inconclusive: None,
            strict: false,
        },
        ExpectResult {
            text: "trimmed.mean_bw >= 0.9 * fresh.mean_bw".into(),
            passed: trimmed >= 0.9 * fresh,
            detail: format!(
                "trimmed.mean_bw = {trimmed:.3e} >= 0.9 × fresh.mean_bw = {:.3e}",
                0.9 * fresh
            ),
            inconclusive: None,
            strict: false,
        },
    ];
    BenchResults {
        scenario: "trim-recovery".into(),
        description: "Protocol P2: HD Tune write test fresh, after 4 KiB random writes, and after a whole-drive TRIM.".into(),
        mode,
        profile: "sata-slc-2009".into(),
        capacity: GIB,
        bus: Bus::Sata,
        started_unix: 1_764_554_400,
        environment: environment(mode),
        phases: run.phases,
        samples: run.samples,
        expects,
        tolerance: 0.1,
        comparison: Vec::new(),
        sim: None,
        incomplete: None,
        time_scale: 1.0,
        time_scale_reason: None,
        strict: false,
        duration_s: 0.0,
    }
}

/// The trim-recovery scenario in a guest, with the simulator's run attached
/// and compared.
pub(crate) fn trim_recovery() -> BenchResults {
    let mut guest = trim_recovery_run(Mode::Guest, 11, 0.985, 9.5e6);
    let sim = trim_recovery_run(Mode::Sim, 12, 0.93, 9.0e6);
    for p in &guest.phases {
        let metric = match p.kind.as_str() {
            "fio" => "write_bw",
            "surface" => "median_bw",
            _ => continue,
        };
        let (Some(g), Some(s)) = (
            p.metrics.get(metric),
            sim.phase(&p.name).and_then(|s| s.metrics.get(metric)),
        ) else {
            continue;
        };
        let difference = (s - g) / g;
        guest.comparison.push(PhaseComparison {
            phase: p.name.clone(),
            metric: metric.into(),
            guest: *g,
            sim: *s,
            difference,
            within: difference.abs() <= guest.tolerance,
            guest_bound: false,
            after_guest_bound: false,
            replayed: false,
            predicted: None,
        });
    }
    guest.sim = Some(Box::new(sim));
    guest
}

/// Protocol P1 in a guest, no simulator: sequential writes fresh, 4 KiB
/// random writes, sequential writes used (a drop, then a slow return).
pub(crate) fn used_state() -> BenchResults {
    let mut run = Run::new(Mode::Guest, 21);
    let fresh: Vec<f64> = (0..60)
        .map(|i| 174e6 * (1.0 + 0.02 * noise(i, 1)))
        .collect();
    let random: Vec<f64> = (0..180)
        .map(|i| {
            let base = if i < 40 {
                30e6 - i as f64 * 0.5e6
            } else {
                8.5e6
            };
            base * (1.0 + 0.2 * noise(i, 2))
        })
        .collect();
    let used: Vec<f64> = (0..90)
        .map(|i| (60e6 + i as f64 * 0.45e6).min(110e6) * (1.0 + 0.1 * noise(i, 3)))
        .collect();
    let sum = |v: &[f64]| v.iter().sum::<f64>() as u64;
    let (wf, wr, wu) = (sum(&fresh), sum(&random), sum(&used));
    run.phase("fresh", "fio", 2.0, 60.0, wf, 1.0, 1600, |p| {
        series_phase(p, "write", "1M", 1048576.0, fresh)
    });
    run.phase("random", "fio", 3.0, 180.0, wr, 4.1, 40, |p| {
        series_phase(p, "randwrite", "4k", 4096.0, random)
    });
    run.phase("used", "fio", 3.0, 90.0, wu, 2.2, 300, |p| {
        series_phase(p, "write", "1M", 1048576.0, used)
    });
    BenchResults {
        scenario: "used-state".into(),
        description: "Protocol P1: sequential writes fresh, 30 minutes of 4 KiB random writes (scaled), sequential writes used.".into(),
        mode: Mode::Guest,
        profile: "sata-mlc-2009".into(),
        capacity: GIB,
        bus: Bus::Virtio,
        started_unix: 1_764_554_400,
        environment: environment(Mode::Guest),
        phases: run.phases,
        samples: run.samples,
        expects: vec![ExpectResult {
            text: "used.write_bw < 0.8 * fresh.write_bw".into(),
            passed: true,
            detail: "used.write_bw = 8.0e7 < 0.8 × fresh.write_bw = 1.39e8".into(),
            inconclusive: None,
            strict: false,
        }],
        tolerance: 0.1,
        comparison: Vec::new(),
        sim: None,
        incomplete: None,
        time_scale: 1.0,
        time_scale_reason: None,
        strict: false,
        duration_s: 0.0,
    }
}
