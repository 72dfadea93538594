//! Device tests: requests as pending completions, reports, state files.

use super::*;
#[allow(unused_imports)]
use std::sync::Arc;
#[allow(unused_imports)]
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use vm_memory::VolatileSlice;
#[allow(unused_imports)]
use vssd_model::{Op, Payload, Precondition, Request, Ssd};
#[allow(unused_imports)]
use vssd_profile::ReadAfterTrim;

#[allow(unused_imports)]
use self::faults::{FaultSpec, Media};
#[allow(unused_imports)]
use self::power::{CutTrigger, LossCause};

fn device(data: DataLocation, state: Option<PathBuf>) -> Device {
    Device::open(DeviceOptions {
        profile: Profile::load_with_capacity("sata-mlc-2011", Some(256 << 20)).unwrap(),
        data,
        state_file: state,
        seed: 1,
        time_scale: Default::default(),
    })
    .unwrap()
}

#[test]
fn requests_come_back_as_pending_completions() {
    let dev = device(DataLocation::Memory, None);
    let fe = dev.register_frontend("test", "here", "");
    let conn = fe.connect("me");
    let mut data = vec![7u8; 8192];
    let w = dev.write(&conn, 4096, &[VolatileSlice::from(&mut data[..])], false);
    assert_eq!(w.status(), Status::Ok);
    assert!(w.due_ns() > w.submit_ns(), "a modelled write takes time");
    assert_eq!(dev.stats().in_flight(), 1);
    w.complete(dev.now_ns());
    let mut back = vec![0u8; 8192];
    let r = dev.read(&conn, 4096, &[VolatileSlice::from(&mut back[..])]);
    assert_eq!(r.status(), Status::Ok);
    r.complete(dev.now_ns());
    assert_eq!(back, data);
    let bad = dev.read(&conn, dev.capacity(), &[VolatileSlice::from(&mut back[..])]);
    assert_eq!(bad.status(), Status::Invalid);
    bad.complete(dev.now_ns());
    let d = dev.discard(&conn, &[(0, 1 << 20)], false);
    assert_eq!(d.status(), Status::Ok);
    d.complete(dev.now_ns());
    let f = dev.flush(&conn);
    assert_eq!(f.status(), Status::Ok);
    f.complete(dev.now_ns());
    let rep = dev.report();
    assert_eq!(rep.connection.in_flight, 0);
    assert_eq!(rep.connection.rejected, 1);
    assert_eq!(rep.ops["write"].cmds, 1);
    assert_eq!(rep.frontends[0].io.trim.discard_cmds, 1);
    assert_eq!(rep.counters.host_written_bytes, 8192);
    // The typed report survives a JSON round trip (ctl's client reads it back).
    let json = serde_json::to_string(&rep).unwrap();
    let back: StatsReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back.drive, rep.drive);
    assert_eq!(back.frontends, rep.frontends);
}

#[test]
fn recent_window_follows_new_writes_only() {
    let dev = device(DataLocation::Memory, None);
    let conn = dev.register_frontend("test", "", "").connect("");
    let mut data = vec![1u8; 1 << 20];
    dev.write(&conn, 0, &[VolatileSlice::from(&mut data[..])], true)
        .complete(0);
    dev.sample();
    dev.write(&conn, 1 << 20, &[VolatileSlice::from(&mut data[..])], true)
        .complete(0);
    let r = dev.report();
    let w = r.recent.unwrap();
    assert_eq!(w.host_written_bytes, 1 << 20);
    assert!(w.write_amplification >= 1.0);
}

#[test]
fn state_files_are_private_and_a_failed_save_leaves_no_temp_file() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("ftl.state");
    let img = d.path().join("disk.img");
    let dev = device(DataLocation::File(img.clone()), Some(state.clone()));
    dev.close().unwrap();
    for p in [&state, &img] {
        let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", p.display());
    }
    assert!(!state.with_extension("tmp").exists());
    // A directory that cannot take the state file fails at open (its
    // dirty marker), with the path, not at shutdown.
    drop(dev);
    let e = Device::open(DeviceOptions {
        profile: Profile::load_with_capacity("sata-mlc-2011", Some(256 << 20)).unwrap(),
        data: DataLocation::Memory,
        state_file: Some(PathBuf::from("/proc/vssd-no-such-dir/ftl.state")),
        seed: 1,
        time_scale: Default::default(),
    })
    .err()
    .unwrap();
    assert!(e.to_string().contains("vssd-no-such-dir"), "{e}");
    // Saving into a directory that went away fails cleanly.
    let gone = d.path().join("gone");
    std::fs::create_dir(&gone).unwrap();
    let dev = device(DataLocation::Memory, Some(gone.join("ftl.state")));
    std::fs::remove_dir_all(&gone).unwrap();
    assert!(dev.save_state().is_err());
    assert!(!gone.exists());
}

/// Block status must never call a range that holds data a hole, whatever
/// the FTL state says: after a crash (state older than the data) and with
/// a backing file but no state at all.
#[test]
fn block_status_never_hides_data_the_ftl_state_is_older_than() {
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("ftl.state");
    let img = d.path().join("disk.img");
    let write = |dev: &Device, at: u64| {
        let conn = dev.register_frontend("test", "", "").connect("");
        let mut data = vec![0xa5u8; 1 << 20];
        dev.write(&conn, at, &[VolatileSlice::from(&mut data[..])], true)
            .complete(0);
        dev.flush(&conn).complete(0);
    };
    let mapped_at = |dev: &Device, at: u64| -> bool {
        let runs = dev.allocation(at, 1 << 20, 8);
        runs.first().is_some_and(|r| r.1 && r.0 >= 1 << 20)
    };
    // 1. A clean run: written at 0, saved at exit.
    let dev = device(DataLocation::File(img.clone()), Some(state.clone()));
    assert_eq!(dev.state_origin(), StateOrigin::Fresh);
    write(&dev, 0);
    dev.close().unwrap();
    drop(dev);
    // 2. Restarted from that state, written and flushed at 64 MiB, then
    //    killed (no close): the state on disk predates that write.
    let dev = device(DataLocation::File(img.clone()), Some(state.clone()));
    assert_eq!(dev.state_origin(), StateOrigin::Saved);
    assert!(mapped_at(&dev, 0) && !mapped_at(&dev, 64 << 20));
    write(&dev, 64 << 20);
    std::mem::forget(dev);
    // 3. The next start knows, and reports the new data as data.
    let dev = device(DataLocation::File(img.clone()), Some(state.clone()));
    assert_eq!(dev.state_origin(), StateOrigin::OlderThanData);
    assert!(mapped_at(&dev, 0), "{:?}", dev.allocation(0, 1 << 20, 8));
    assert!(
        mapped_at(&dev, 64 << 20),
        "data written after the last save reported as a hole: {:?}",
        dev.allocation(64 << 20, 1 << 20, 8)
    );
    // Never written: still a hole, from the file's allocation.
    assert_eq!(
        dev.allocation(128 << 20, 1 << 20, 8),
        vec![(1 << 20, false)]
    );
    // A clean exit makes the state describe the data again.
    dev.close().unwrap();
    drop(dev);
    let dev = device(DataLocation::File(img.clone()), Some(state.clone()));
    assert_eq!(dev.state_origin(), StateOrigin::Saved);
    drop(dev);
    // 4. --backing alone: no state, a file with data.
    let dev = device(DataLocation::File(img.clone()), None);
    assert_eq!(dev.state_origin(), StateOrigin::OlderThanData);
    assert!(mapped_at(&dev, 64 << 20));
    // A secure erase empties both: holes are holes again.
    dev.secure_erase().unwrap();
    assert_eq!(dev.allocation(0, 1 << 20, 8), vec![(1 << 20, false)]);
}

#[test]
fn the_payload_sample_spans_buffers() {
    let mut a = vec![0u8; 3000];
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut b: Vec<u8> = (0..20000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let bufs = [
        VolatileSlice::from(&mut a[..]),
        VolatileSlice::from(&mut b[..]),
    ];
    // 3000 zeroes then random bytes: the sample (4 KiB at the start, 4
    // KiB in the middle) is about a third zeroes.
    match crate::io::sample_payload(&bufs, 23000) {
        Payload::Compressible { percent } => assert!((20..60).contains(&percent), "{percent}"),
        p => panic!("{p:?}"),
    }
    let mut z = vec![0u8; 8192];
    let zb = [VolatileSlice::from(&mut z[..])];
    assert_eq!(crate::io::sample_payload(&zb, 8192), Payload::Zeroes);
}

#[test]
fn idle_work_shows_in_the_stats_without_a_request() {
    let dev = device(DataLocation::Memory, None);
    let conn = dev.register_frontend("test", "", "").connect("");
    let mut data = vec![3u8; 8 << 20];
    dev.write(&conn, 0, &[VolatileSlice::from(&mut data[..])], true)
        .complete(0);
    dev.flush(&conn).complete(0);
    let d = dev.discard(&conn, &[(0, 8 << 20)], false);
    assert_eq!(d.status(), Status::Ok);
    // The discard's own completion time, then idle time for the erases.
    std::thread::sleep(std::time::Duration::from_nanos(
        d.due_ns().saturating_sub(dev.now_ns()),
    ));
    d.complete(dev.now_ns());
    let before = dev.drive.lock().ssd.counters().free_blocks;
    std::thread::sleep(std::time::Duration::from_millis(250));
    // No request since: the report does the erases the idle drive did.
    let after = dev.report().counters.free_blocks;
    assert!(after > before, "free blocks {before} -> {after}");
}

#[test]
fn trim_totals_add_up_frontends_and_subtract_earlier_reports() {
    let dev = device(DataLocation::Memory, None);
    let a = dev.register_frontend("a", "", "").connect("");
    let b = dev.register_frontend("b", "", "").connect("");
    let mut data = vec![1u8; 1 << 20];
    dev.write(&a, 0, &[VolatileSlice::from(&mut data[..])], true)
        .complete(0);
    dev.discard(&a, &[(0, 1 << 20)], false).complete(0);
    let before = dev.report().trim_total();
    assert_eq!(before.discard_cmds, 1);
    assert_eq!(before.freed_bytes, 1 << 20);
    dev.discard(&b, &[(0, 1 << 20)], false).complete(0);
    let total = dev.report().trim_total();
    assert_eq!(total.discard_cmds, 2);
    assert_eq!(total.requested_bytes, 2 << 20);
    let d = total.since(&before);
    assert_eq!(d.discard_cmds, 1);
    assert_eq!(d.requested_bytes, 1 << 20);
    assert_eq!(d.freed_bytes, 0);
    assert_eq!(d.already_unmapped_bytes, 1 << 20);
}

#[test]
fn a_dilated_drive_completes_k_times_later_and_reports_its_own_time() {
    let open = |k: &str| {
        Device::open(DeviceOptions {
            profile: Profile::load_with_capacity("sata-mlc-2011", Some(256 << 20)).unwrap(),
            data: DataLocation::Memory,
            state_file: None,
            seed: 1,
            time_scale: k.parse().unwrap(),
        })
        .unwrap()
    };
    let latency = |dev: &Device| {
        let conn = dev.register_frontend("test", "", "").connect("");
        let mut data = vec![3u8; 1 << 20];
        let w = dev.write(&conn, 0, &[VolatileSlice::from(&mut data[..])], true);
        assert_eq!(w.status(), Status::Ok);
        let l = w.due_ns() - w.submit_ns();
        // Delivered 4 ms of wall time late.
        let late = w.due_ns() + 4_000_000;
        w.complete(late);
        (l, dev.report())
    };
    let (l1, r1) = latency(&open("1"));
    let (l4, r4) = latency(&open("4"));
    assert!(l1 > 100_000, "a FUA MiB takes the drive time: {l1}");
    // The same drive work, four times as long on the wall clock.
    let ratio = l4 as f64 / l1 as f64;
    assert!((ratio - 4.0).abs() < 0.01, "{l1} ns at K=1, {l4} ns at K=4");
    // The reports are in the drive's time: the same latency at both
    // scales, and 4 ms of wall-clock lateness are 1 ms of the drive's.
    let m = |r: &StatsReport| r.ops["write"].modelled.mean_ns;
    assert!((m(&r4) / m(&r1) - 1.0).abs() < 0.02, "{r1:?} {r4:?}");
    let late = |r: &StatsReport| r.lateness.mean_ns;
    assert!((late(&r1) / 4e6 - 1.0).abs() < 0.02, "{}", late(&r1));
    assert!((late(&r4) / 1e6 - 1.0).abs() < 0.02, "{}", late(&r4));
    assert_eq!(r1.drive.time_scale, 1.0);
    assert_eq!(r4.drive.time_scale, 4.0);
}

#[test]
fn idle_lets_the_drive_catch_up_at_once() {
    let after_burst = |idle_ns: Option<u64>| {
        // The drive's clock 1000 times slower than the wall's: a second a
        // busy host takes over the burst is a millisecond of the drive's,
        // so the queue it measures is the burst's, not the host's speed.
        let dev = Device::open(DeviceOptions {
            profile: Profile::load_with_capacity("sata-mlc-2011", Some(256 << 20)).unwrap(),
            data: DataLocation::Memory,
            state_file: None,
            seed: 1,
            time_scale: "1000".parse().unwrap(),
        })
        .unwrap();
        let conn = dev.register_frontend("test", "", "").connect("");
        let mut data = vec![5u8; 1 << 20];
        for i in 0..64u64 {
            dev.write(&conn, i << 20, &[VolatileSlice::from(&mut data[..])], false)
                .complete(0);
        }
        if let Some(ns) = idle_ns {
            dev.idle(ns).unwrap();
        }
        let w = dev.write(
            &conn,
            100 << 20,
            &[VolatileSlice::from(&mut data[..])],
            false,
        );
        w.due_ns() - w.submit_ns()
    };
    let busy = after_burst(None);
    let rested = after_burst(Some(10_000_000_000));
    // 64 MiB queued behind the link and the NAND; after 10 s of idleness
    // the drive has drained it and takes the next MiB at once.
    assert!(busy > 50_000_000, "{busy} ns behind 64 MiB");
    assert!(
        rested * 10 < busy,
        "{rested} ns after idling, {busy} ns without"
    );
}

/// `[identity] read_after_trim`: what a read of a trimmed range returns,
/// for every mode and both stores; write-zeroes reads zeros in all of them
/// (a drive without deterministic zeros writes them instead of
/// deallocating); the rest of the drive keeps its data.
#[test]
fn reads_after_trim_follow_the_profile_and_write_zeroes_reads_zeros() {
    use vssd_profile::ReadAfterTrim;
    let d = tempfile::tempdir().unwrap();
    for mode in [
        ReadAfterTrim::Zeros,
        ReadAfterTrim::Pattern,
        ReadAfterTrim::OldData,
    ] {
        for file in [false, true] {
            let mut profile =
                Profile::load_with_capacity("sata-mlc-2011", Some(256 << 20)).unwrap();
            profile.identity.read_after_trim = mode;
            let data = if file {
                DataLocation::File(d.path().join(format!("{}.img", mode.name())))
            } else {
                DataLocation::Memory
            };
            let dev = Device::open(DeviceOptions {
                profile,
                data,
                state_file: None,
                seed: 1,
                time_scale: Default::default(),
            })
            .unwrap();
            assert_eq!(
                dev.topology().unmapped_reads_zero,
                mode == ReadAfterTrim::Zeros
            );
            let conn = dev.register_frontend("test", "", "").connect("");
            let mut w = vec![0x5Au8; 1 << 20];
            dev.write(&conn, 0, &[VolatileSlice::from(&mut w[..])], false)
                .complete(0);
            // Trim the first 256 KiB, write-zero (unmap allowed) the next.
            dev.discard(&conn, &[(0, 256 << 10)], false).complete(0);
            dev.write_zeroes(&conn, &[(256 << 10, 256 << 10)], true, false)
                .complete(0);
            let mut back = vec![0u8; 1 << 20];
            dev.read(&conn, 0, &[VolatileSlice::from(&mut back[..])])
                .complete(0);
            let trimmed = match mode {
                ReadAfterTrim::Zeros => 0x00,
                ReadAfterTrim::Pattern => ReadAfterTrim::PATTERN_BYTE,
                ReadAfterTrim::OldData => 0x5A,
            };
            let what = format!("{} ({})", mode.name(), if file { "file" } else { "memory" });
            assert!(
                back[..256 << 10].iter().all(|&b| b == trimmed),
                "{what}: trimmed range"
            );
            assert!(
                back[256 << 10..512 << 10].iter().all(|&b| b == 0),
                "{what}: write-zeroes must read zeros"
            );
            assert!(
                back[512 << 10..].iter().all(|&b| b == 0x5A),
                "{what}: untouched data"
            );
            // A read that straddles trimmed and mapped data, in pieces.
            let (mut a, mut b) = (vec![1u8; 2560], vec![1u8; 2560]);
            let r = dev.read(
                &conn,
                (256 << 10) - 2048,
                &[
                    VolatileSlice::from(&mut a[..]),
                    VolatileSlice::from(&mut b[..]),
                ],
            );
            assert_eq!(r.status(), Status::Ok);
            r.complete(0);
            assert!(a[..2048].iter().all(|&x| x == trimmed), "{what}");
            assert!(a[2048..].iter().chain(&b).all(|&x| x == 0), "{what}");
            // Written again, the LBAs hold the new data in every mode.
            let mut w2 = vec![0x33u8; 4096];
            dev.write(&conn, 0, &[VolatileSlice::from(&mut w2[..])], false)
                .complete(0);
            let mut c = vec![0u8; 8192];
            dev.read(&conn, 0, &[VolatileSlice::from(&mut c[..])])
                .complete(0);
            assert!(c[..4096].iter().all(|&x| x == 0x33), "{what}");
            assert!(c[4096..].iter().all(|&x| x == trimmed), "{what}");
        }
    }
}

/// `idle` is bounded: beyond 30 days of drive time at once, or past the
/// clock's end, it is refused with the limit, and the drive's clock never
/// goes back (two idles of 2^63 ns used to wrap it to 0.1 s).
#[test]
fn idle_is_bounded_and_the_drive_clock_never_goes_back() {
    let dev = device(DataLocation::Memory, None);
    let before = dev.power_report().drive_time_ns;
    for ns in [1u64 << 63, u64::MAX, MAX_IDLE_NS + 1] {
        let e = dev.idle(ns).unwrap_err().to_string();
        assert!(e.contains(&MAX_IDLE_NS.to_string()), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    dev.idle(MAX_IDLE_NS).unwrap();
    let after = dev.power_report().drive_time_ns;
    assert!(after >= before + MAX_IDLE_NS, "{before} -> {after}");
    // Idles up to the clock's end, then one more is refused.
    let mut last = after;
    let mut refused = None;
    for _ in 0..100_000 {
        match dev.idle(MAX_IDLE_NS) {
            Ok(()) => {
                let t = dev.power_report().drive_time_ns;
                assert!(t > last, "the clock went back: {last} -> {t}");
                last = t;
            }
            Err(e) => {
                refused = Some(e.to_string());
                break;
            }
        }
    }
    let e = refused.expect("the clock's end is reached");
    assert!(e.contains(&MAX_DRIVE_NS.to_string()), "{e}");
    assert!(last <= MAX_DRIVE_NS);
    // The drive still takes requests at the end of its clock.
    let fe = dev.register_frontend("test", "here", "");
    let conn = fe.connect("me");
    let mut data = vec![7u8; 4096];
    let w = dev.write(&conn, 0, &[VolatileSlice::from(&mut data[..])], false);
    assert_eq!(w.status(), Status::Ok);
    w.complete(dev.now_ns());
}
