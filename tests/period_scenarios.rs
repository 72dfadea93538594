#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! Scenario tests of the period mechanisms in the simulator (issue 8): the
//! qualitative behaviours the reference articles report, from the named
//! presets at reduced capacities. Every figure is model time; nothing here
//! depends on the wall clock.

use vssd::calibrate;
use vssd::profile::Profile;
use vssd::sim::{Dir, JobSpec, RunReport, Simulation, jobfile};

const MB: f64 = 1e6;

fn job(text: &str) -> Vec<JobSpec> {
    jobfile::parse(text, "test").unwrap().jobs
}

fn profile(name: &str, cap: u64) -> Profile {
    Profile::load_with_capacity(name, Some(cap)).unwrap()
}

fn bw(r: &RunReport, d: Dir) -> f64 {
    r.jobs[0].bw_bytes(d)
}

const SEQ: &str = "[seq]\nrw=write\nbs=128k\niodepth=32\nsize=100%\n";

/// P1 (used state): after random writes, sequential writes on the
/// PB22-J-class drive run at well under fresh speed (the review: 174 -> 82
/// MB/s), and a whole-drive TRIM restores them.
#[test]
fn p1_pb22j_used_state_and_trim() {
    let u = calibrate::used_state(&profile("samsung-pb22j", 2 << 30), 1.5, 1).unwrap();
    eprintln!("{u:?}");
    assert!(u.used_ratio < 0.6, "used / fresh = {:.2}", u.used_ratio);
    assert!(
        u.trim_ratio > 0.95,
        "after TRIM / fresh = {:.2}",
        u.trim_ratio
    );
    assert!(u.random_wa > 1.5);
}

/// P2: the K5-64-class hybrid drive's HD Tune-style write curve drops
/// after random writes and comes back after a whole-drive TRIM.
#[test]
fn p2_k5_hdtune_curve_drops_then_recovers_with_trim() {
    // At full size: the protocol is time-based (30 minutes of random
    // writes), so the drive's size sets how used it gets.
    let p = Profile::load("solidata-k5-64").unwrap();
    let x = calibrate::protocols(&p, 1).unwrap();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (f, u, t) = (mean(&x.p2_fresh), mean(&x.p2_used), mean(&x.p2_trimmed));
    eprintln!("P2 means: fresh {f:.0}, used {u:.0}, trimmed {t:.0} MB/s");
    assert!(u < 0.8 * f, "used {u:.0} vs fresh {f:.0}");
    assert!(t > 0.95 * f, "after TRIM {t:.0} vs fresh {f:.0}");
}

/// SandForce-style data reduction: compressible data writes about three
/// times faster than incompressible data and programs less NAND than the
/// host wrote.
#[test]
fn vertex3_compressible_data_is_faster_and_takes_less_flash() {
    let p = profile("ocz-vertex3-120", 1 << 30);
    let run = |extra: &str| {
        let mut sim = Simulation::new(&p, 1);
        let r = sim
            .run(&job(&format!(
                "[w]\nrw=write\nbs=128k\niodepth=32\nsize=512m\nend_fsync=1\n{extra}"
            )))
            .unwrap();
        (bw(&r, Dir::Write), r.counters.write_amplification)
    };
    let (raw, wa_raw) = run("");
    let (zip, wa_zip) = run("buffer_compress_percentage=100\n");
    let (half, wa_half) = run("buffer_compress_percentage=50\n");
    eprintln!(
        "incompressible {:.0} MB/s WA {wa_raw:.2}; 50 % {:.0} MB/s WA {wa_half:.2}; compressible {:.0} MB/s WA {wa_zip:.2}",
        raw / MB,
        half / MB,
        zip / MB
    );
    assert!(zip > 2.5 * raw, "{zip} vs {raw}");
    assert!(half > 1.5 * raw && half < zip);
    assert!(wa_zip < 0.5 && wa_half < 0.7 && wa_raw > 0.95);
}

/// SandForce after TRIM (deferred release, a fitted guess): with
/// incompressible data written at random, a whole-drive TRIM brings
/// sequential writes back only part-way (AnandTech's 120 GB Vertex 3:
/// 0.63 x clean), writing brings them back further, compressible data is
/// fast at once, and without the deferral the drive recovers completely.
#[test]
fn vertex3_recovers_only_partly_after_trim_with_incompressible_data() {
    let p = profile("ocz-vertex3-120", 16 << 30);
    assert!(p.trim.deferred_release);
    let mut eager = p.clone();
    eager.trim.deferred_release = false;
    eager.trim.release_per_unit_written = 0.0;
    let pass = |offset: &str, extra: &str| {
        format!("[pass]\nrw=write\nbs=16m\niodepth=1\noffset={offset}\nsize=5%\n{extra}")
    };
    // Fill, random 4 KiB writes of half the drive (AnandTech's 20
    // minutes), TRIM of the whole drive, five seconds idle; then `passes`.
    let run = |p: &Profile, passes: &[String]| -> Vec<f64> {
        let mut sim = Simulation::new(p, 1);
        let fresh = sim.run(&job(SEQ)).unwrap();
        sim.run(&job(
            "[r]\nrw=randwrite\nbs=4k\niodepth=32\nsize=100%\nio_size=50%\nnorandommap\n",
        ))
        .unwrap();
        sim.run(&job("[t]\nrw=trim\nbs=1g\nsize=100%\niodepth=1\n"))
            .unwrap();
        sim.idle(5_000_000_000);
        let mut out = vec![bw(&fresh, Dir::Write)];
        for text in passes {
            out.push(bw(&sim.run(&job(text)).unwrap(), Dir::Write));
        }
        out
    };
    let deferred = run(&p, &[pass("40%", ""), pass("40%", ""), pass("50%", "")]);
    let (fresh, first, again, next) = (deferred[0], deferred[1], deferred[2], deferred[3]);
    let eager_first = run(&eager, &[pass("40%", "")])[1];
    let zipped = run(
        &p,
        &[pass(
            "40%",
            "buffer_compress_percentage=75\nrefill_buffers=1\n",
        )],
    )[1];
    eprintln!(
        "fresh {:.0} MB/s; after TRIM {:.0}, the same LBAs again {:.0}, the next 5 % {:.0}; \
         without deferral {:.0}; compressible {:.0}",
        fresh / MB,
        first / MB,
        again / MB,
        next / MB,
        eager_first / MB,
        zipped / MB
    );
    assert!(
        first > 0.45 * fresh && first < 0.8 * fresh,
        "{first} vs {fresh}"
    );
    assert!(again > 1.2 * first && next > 1.1 * first, "{again} {next}");
    assert!(eager_first > 0.95 * fresh, "{eager_first}");
    assert!(zipped > 2.0 * first, "{zipped}");
}

/// JMicron-class block mapping: small random writes on a written drive
/// stall for whole-block merges, hundreds of milliseconds.
#[test]
fn core_v2_small_random_writes_stall_for_merges() {
    let p = profile("ocz-core-v2", 1 << 30);
    let mut sim = Simulation::new(&p, 1);
    sim.run(&job(SEQ)).unwrap();
    let r = sim
        .run(&job(
            "[r]\nrw=randwrite\nbs=4k\niodepth=32\nnumber_ios=200\nnorandommap\n",
        ))
        .unwrap();
    let clat = &r.jobs[0].dir[Dir::Write as usize].clat;
    let max_ms = clat.max() as f64 / 1e6;
    eprintln!(
        "4 KiB random writes: {:.0} IOPS, max latency {max_ms:.0} ms",
        r.jobs[0].iops(Dir::Write)
    );
    assert!(max_ms > 100.0, "max {max_ms} ms");
    assert!(r.counters.merges_full >= 5);
    assert!(r.jobs[0].iops(Dir::Write) < 200.0);
}

/// Read-side used state: sequential reads of data written at random are
/// slower than of data written sequentially (consecutive LBAs scattered
/// over pages and blocks), on the hybrid K5-64-class drive where the link
/// does not hide it.
#[test]
fn sequential_reads_slow_down_after_random_writes() {
    let p = profile("solidata-k5-64", 1 << 30);
    let mut sim = Simulation::new(&p, 1);
    let read = "[r]\nrw=read\nbs=128k\niodepth=32\nsize=100%\n";
    sim.run(&job(SEQ)).unwrap();
    let fresh = bw(&sim.run(&job(read)).unwrap(), Dir::Read);
    sim.run(&job(
        "[w]\nrw=randwrite\nbs=4k\niodepth=32\nsize=100%\nio_size=150%\n",
    ))
    .unwrap();
    let used = bw(&sim.run(&job(read)).unwrap(), Dir::Read);
    eprintln!(
        "sequential read: {:.0} MB/s fresh, {:.0} MB/s after random writes",
        fresh / MB,
        used / MB
    );
    assert!(used < 0.7 * fresh, "{used} vs {fresh}");
}

/// SLC cache: a long sequential write runs at the SLC rate until the cache
/// is full, then at the native TLC rate; idle time folds the cache back.
#[test]
fn slc_cache_fills_folds_and_recovers() {
    let p = profile("nvme-tlc-slc-cache", 4 << 30);
    let cache = p.slc_cache.size.0;
    let mut sim = Simulation::new(&p, 1);
    sim.set_keep_bw_series(true);
    let r = sim
        .run(&job(&format!(
            "[w]\nrw=write\nbs=128k\niodepth=32\nsize={}\nlog_avg_msec=50\n",
            cache * 3
        )))
        .unwrap();
    let s = r.jobs[0].bw_series(Dir::Write);
    let (first, last) = (s[0], s[s.len() - 2]);
    eprintln!(
        "cache {} MiB: first 50 ms {:.0} MB/s, last {:.0} MB/s; counters {:?}",
        cache >> 20,
        first / MB,
        last / MB,
        r.counters
    );
    assert!(first > 2.5 * last, "{first} vs {last}");
    assert!(r.counters.slc_units_written > 0);
    // Idle: the cache is folded and free again; the next burst is fast.
    sim.idle(120_000_000_000);
    let r2 = sim
        .run(&job(&format!(
            "[w2]\nrw=write\nbs=128k\niodepth=32\noffset=0\nsize={}\n",
            cache / 4
        )))
        .unwrap();
    eprintln!(
        "after idle: {:.0} MB/s, {:?}",
        bw(&r2, Dir::Write) / MB,
        r2.counters
    );
    assert!(r2.counters.slc_units_folded > 0);
    assert!(bw(&r2, Dir::Write) > 2.5 * last);
}

/// TRIM cost per interface: a whole-drive TRIM takes longer on a
/// pre-SATA-3.1 drive (non-queued DSM, 2009 controller) than on NVMe.
#[test]
fn trim_costs_more_on_old_sata_than_on_nvme() {
    let trim_time = |name: &str| {
        let p = profile(name, 1 << 30);
        let mut sim = Simulation::new(&p, 1);
        sim.run(&job(SEQ)).unwrap();
        let r = sim
            .run(&job("[t]\nrw=trim\nbs=64m\nsize=100%\niodepth=1\n"))
            .unwrap();
        r.end_ns - r.start_ns
    };
    let (old, nvme) = (trim_time("intel-x25m-g2"), trim_time("nvme-tlc-slc-cache"));
    eprintln!("whole-drive TRIM: X25-M G2 {old} ns, NVMe {nvme} ns");
    assert!(old > 5 * nvme);
}
