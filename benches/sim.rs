#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! Simulation speed: random 4 KiB writes at QD 32 on a preconditioned
//! `sata-mlc-2011 --capacity 4G` drive (filled, then randomly overwritten
//! twice, so garbage collection runs on every write at the steady-state
//! write amplification, and the figure does not depend on how many
//! iterations criterion runs), measured
//! through the model API directly and through the `vssd sim` engine.
//! The target is ≥ 1,000,000 simulated writes per wall second.
//!
//! `cargo bench --bench sim`

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use vssd::model::{Op, Payload, Precondition, Request, Ssd};
use vssd::profile::Profile;
use vssd::sim::engine::{FixedLatency, run_jobs};
use vssd::sim::{Simulation, jobfile};

const CAP: u64 = 4 << 30;

fn preconditioned() -> (Ssd, u64) {
    let profile = Profile::load_with_capacity("sata-mlc-2011", Some(CAP)).unwrap();
    let mut ssd = Ssd::new(&profile, 1);
    let mut now = ssd.precondition(0, &Precondition::FillSequential { bs: 128 << 10 }, 1);
    now = ssd.precondition(
        now,
        &Precondition::Random {
            bs: 4096,
            amount: 2 * CAP,
        },
        2,
    );
    (ssd, now)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("randwrite_4k_qd32_gc");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(8))
        .throughput(Throughput::Elements(1));

    let (ssd, now) = preconditioned();

    // The model alone, with the smallest possible driver: a heap of the 32
    // outstanding completion times and a xorshift for offsets.
    let mut direct = ssd.clone();
    let mut t = now;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let blocks = CAP / 4096;
    let mut inflight: BinaryHeap<Reverse<u64>> = (0..32).map(|_| Reverse(t)).collect();
    g.bench_function("model_api", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                let Reverse(free_at) = inflight.pop().unwrap();
                t = t.max(free_at);
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let req = Request {
                    op: Op::Write,
                    offset: (x % blocks) * 4096,
                    len: 4096,
                    payload: Payload::Unknown,
                };
                let c = direct.submit(t, black_box(&req)).unwrap();
                inflight.push(Reverse(c.done_ns));
            }
            start.elapsed()
        })
    });

    // The same through the engine: one job per criterion batch, with
    // `norandommap` so offsets are uniform draws as above (fio's random map
    // writes each block once per pass, which changes the GC work per write).
    let mut sim = Simulation::with_ssd(ssd, now, 1);
    g.bench_function("sim_engine", |b| {
        b.iter_custom(|iters| {
            let text = format!(
                "[r]\nrw=randwrite\nbs=4k\niodepth=32\nnumber_ios={}\nio_size=100000%\nnorandommap\n",
                iters.max(1)
            );
            let jf = jobfile::parse(&text, "bench").unwrap();
            let start = Instant::now();
            let r = sim.run(black_box(&jf.jobs)).unwrap();
            let el = start.elapsed();
            assert_eq!(r.sim_ops, iters.max(1));
            el
        })
    });

    // The engine alone, against a drive that takes 100 µs for anything.
    let mut null = FixedLatency {
        capacity: CAP,
        latency_ns: 100_000,
    };
    let mut t0 = 0;
    g.bench_function("engine_only", |b| {
        b.iter_custom(|iters| {
            let text = format!(
                "[r]\nrw=randwrite\nbs=4k\niodepth=32\nnumber_ios={}\nio_size=100000%\n",
                iters.max(1)
            );
            let jf = jobfile::parse(&text, "bench").unwrap();
            let start = Instant::now();
            let (_, ops, end) =
                run_jobs(&mut null, black_box(&jf.jobs), 1, t0, &mut |_| {}).unwrap();
            let el = start.elapsed();
            assert_eq!(ops, iters.max(1));
            t0 = end;
            el
        })
    });
    g.finish();
}

/// Random 4 KiB writes at QD 32 through the model API on a 4 GiB drive
/// preconditioned to its steady state (filled, then random 4 KiB writes of
/// twice its capacity, so the measured writes do not age it further and
/// the figure does not depend on how many iterations criterion runs) of
/// each mapping policy / period mechanism: page mapping
/// (`sata-mlc-2011`), hybrid log-block mapping (`solidata-k5-64`), data
/// reduction (`ocz-vertex3-120`, 50 % compressible data) and an SLC cache
/// (`nvme-tlc-slc-cache`).
fn per_policy(c: &mut Criterion) {
    let mut g = c.benchmark_group("policy_randwrite_4k_qd32");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(1));
    for (name, profile, payload) in [
        ("page", "sata-mlc-2011", Payload::Unknown),
        ("hybrid", "solidata-k5-64", Payload::Unknown),
        (
            "reduction",
            "ocz-vertex3-120",
            Payload::Compressible { percent: 50 },
        ),
        ("slc_cache", "nvme-tlc-slc-cache", Payload::Unknown),
    ] {
        let p = Profile::load_with_capacity(profile, Some(CAP)).unwrap();
        let mut ssd = Ssd::new(&p, 1);
        let mut t = ssd.precondition(0, &Precondition::FillSequential { bs: 128 << 10 }, 1);
        t = ssd.precondition(
            t,
            &Precondition::Random {
                bs: 4096,
                amount: 2 * CAP,
            },
            2,
        );
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let blocks = CAP / 4096;
        let mut inflight: BinaryHeap<Reverse<u64>> = (0..32).map(|_| Reverse(t)).collect();
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    let Reverse(free_at) = inflight.pop().unwrap();
                    t = t.max(free_at);
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let req = Request {
                        op: Op::Write,
                        offset: (x % blocks) * 4096,
                        len: 4096,
                        payload,
                    };
                    let c = ssd.submit(t, black_box(&req)).unwrap();
                    inflight.push(Reverse(c.done_ns));
                }
                start.elapsed()
            })
        });
    }
    g.finish();
}

/// The daemon's payload estimate for data-reducing drives: a 128 KiB
/// write's sample (4 KiB at its start, 4 KiB in its middle) through LZ4.
fn payload_estimate(c: &mut Criterion) {
    let mut g = c.benchmark_group("payload_estimate");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    let mut x: u64 = 1;
    let random: Vec<u8> = (0..8192)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let text: Vec<u8> = b"vssd estimates compressibility per request "
        .iter()
        .cycle()
        .take(8192)
        .copied()
        .collect();
    g.bench_function("random_8k_sample", |b| {
        b.iter(|| vssd::model::payload::estimate(black_box(&random)))
    });
    g.bench_function("text_8k_sample", |b| {
        b.iter(|| vssd::model::payload::estimate(black_box(&text)))
    });
    g.finish();
}

criterion_group!(benches, bench, per_policy, payload_estimate);
criterion_main!(benches);
