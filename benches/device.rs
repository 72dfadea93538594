#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! The cost of the power-loss audit on the request path: `Device::write`
//! (model, store, accounting; the completion is not waited for) of 4 KiB
//! and 128 KiB random writes on a `sata-mlc-2011` memory drive, without
//! power-loss protection (every write's previous contents are copied for
//! the undo record) and with it (nothing is copied). The difference is the
//! audit's cost per write. One thread; the drive's clock runs on, so its
//! write buffer fills and GC runs as it would under such a load.
//!
//! `cargo bench --bench device`

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use vm_memory::VolatileSlice;
use vssd::device::{DataLocation, Device, DeviceOptions};
use vssd::profile::Profile;

const CAP: u64 = 1 << 30;

fn drive(protected: bool) -> Device {
    let mut p = Profile::load_with_capacity("sata-mlc-2011", Some(CAP)).unwrap();
    p.reliability.power_loss_protection = protected;
    Device::open(DeviceOptions {
        profile: p,
        data: DataLocation::Memory,
        state_file: None,
        seed: 1,
        time_scale: Default::default(),
    })
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("device_write");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for bs in [4096u64, 128 << 10] {
        g.throughput(Throughput::Bytes(bs));
        for protected in [false, true] {
            let dev = drive(protected);
            let conn = dev.register_frontend("bench", "", "").connect("");
            let mut data = vec![0x5au8; bs as usize];
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            let name = if protected {
                "power-loss protection (no audit)"
            } else {
                "no protection (undo copy)"
            };
            g.bench_with_input(BenchmarkId::new(name, bs), &bs, |b, &bs| {
                b.iter(|| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let offset = x % (CAP / bs) * bs;
                    let p = dev.write(&conn, offset, &[VolatileSlice::from(&mut data[..])], false);
                    black_box(p.status());
                    p.complete(dev.now_ns());
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
