//! Fault tests on a memory drive. Power cuts: what a cut loses is exactly
//! the pending (unprogrammed, unflushed) writes, always the latest ones,
//! never anything flushed; the store then holds what the surviving writes
//! left; the model's invariants hold throughout. Media faults and stalls
//! leave the model whole; a worn-out Intel drive is read-only.
//!
//! The drive's clock runs 10× slower than the wall clock here, so the
//! writes of a burst are still in the write buffer when the cut comes on
//! all but a very loaded machine. A flush or FUA write counts as flushed
//! once it is acknowledged (its completion time has come). Every check is
//! a relation between what the device reports and what the test wrote,
//! whichever writes the drive had programmed.

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
use vssd_common::rng::Rng;

const MIB: u64 = 1 << 20;

fn device(preset: &str, edit: impl FnOnce(&mut Profile)) -> Device {
    device_seeded(preset, 1, edit)
}

fn device_seeded(preset: &str, seed: u64, edit: impl FnOnce(&mut Profile)) -> Device {
    let mut profile = Profile::load_with_capacity(preset, Some(256 * MIB)).unwrap();
    edit(&mut profile);
    Device::open(DeviceOptions {
        profile,
        data: DataLocation::Memory,
        state_file: None,
        seed,
        time_scale: TimeScale::new(10.0).unwrap(),
    })
    .unwrap()
}

/// A write the test made: where, what byte, and whether a flush followed.
#[derive(Debug, Clone, Copy)]
struct W {
    offset: u64,
    len: u64,
    byte: u8,
    flushed: bool,
}

/// Wait until `p` is due (acknowledged), then complete it.
fn acknowledge(dev: &Device, p: Pending) -> Status {
    while dev.now_ns() < p.due_ns() {
        let left = p.due_ns() - dev.now_ns();
        std::thread::sleep(std::time::Duration::from_nanos(left.min(5_000_000)));
    }
    let st = p.status();
    p.complete(dev.now_ns());
    st
}

/// A write, completed at once (`fua`: once acknowledged).
fn write(dev: &Device, conn: &Connection, w: &W, fua: bool) -> Status {
    let mut data = vec![w.byte; w.len as usize];
    let p = dev.write(conn, w.offset, &[VolatileSlice::from(&mut data[..])], fua);
    if fua {
        return acknowledge(dev, p);
    }
    let st = p.status();
    p.complete(dev.now_ns());
    st
}

/// A flush, once acknowledged.
fn flush(dev: &Device, conn: &Connection) -> Status {
    acknowledge(dev, dev.flush(conn))
}

fn read(dev: &Device, conn: &Connection, offset: u64, len: u64) -> Vec<u8> {
    let mut back = vec![0u8; len as usize];
    let p = dev.read(conn, offset, &[VolatileSlice::from(&mut back[..])]);
    assert_eq!(p.status(), Status::Ok);
    p.complete(dev.now_ns());
    back
}

fn invariants(dev: &Device) {
    dev.drive.lock().ssd.check_invariants().unwrap();
}

/// The store after replaying `writes` on a zeroed drive.
fn replay(writes: &[W], span: u64) -> Vec<u8> {
    let mut img = vec![0u8; span as usize];
    for w in writes {
        img[w.offset as usize..(w.offset + w.len) as usize].fill(w.byte);
    }
    img
}

#[test]
fn a_cut_loses_exactly_the_latest_unflushed_writes() {
    const SPAN: u64 = 4 * MIB;
    let (mut lost, mut kept) = (0, 0);
    for seed in 0..12u64 {
        let dev = device("sata-mlc-2011", |_| {});
        let conn = dev.register_frontend("test", "", "").connect("");
        let mut rng = Rng::new(seed);
        let mut writes: Vec<W> = Vec::new();
        for i in 0..(20 + rng.below(60)) {
            let sectors = 1 + rng.below(128);
            let w = W {
                offset: rng.below(SPAN / 512 - sectors) * 512,
                len: sectors * 512,
                byte: (i % 250 + 1) as u8,
                flushed: false,
            };
            let fua = rng.below(20) == 0;
            assert_eq!(write(&dev, &conn, &w, fua), Status::Ok);
            writes.push(w);
            if fua {
                // FUA makes this write and every one before it durable.
                writes.iter_mut().for_each(|w| w.flushed = true);
            }
            if rng.below(15) == 0 {
                assert_eq!(flush(&dev, &conn), Status::Ok);
                writes.iter_mut().for_each(|w| w.flushed = true);
            }
        }
        invariants(&dev);
        let r = dev.power_cut(CutTrigger::Now, None).unwrap();
        let cut = r.cut.expect("a cut now reports at once");
        assert!(!cut.protected);
        // The lost writes are the last ones written, in order...
        let k = cut.lost.len();
        let tail = &writes[writes.len() - k..];
        eprintln!(
            "seed {seed}: {} writes, {k} lost, {} pending survived",
            writes.len(),
            cut.survived
        );
        lost += k;
        kept += writes.len() - k;
        for (l, w) in cut.lost.iter().zip(tail) {
            assert_eq!((l.offset, l.length), (w.offset, w.len), "seed {seed}");
            assert!(!w.flushed, "seed {seed}: a flushed write was lost: {l:?}");
        }
        assert_eq!(cut.lost_bytes, tail.iter().map(|w| w.len).sum::<u64>());
        // ... and the store holds what the writes before them left.
        let mut back = vec![0u8; 4096];
        let p = dev.read(&conn, 0, &[VolatileSlice::from(&mut back[..])]);
        assert_eq!(
            p.status(),
            Status::Stopped,
            "no reads while the power is off"
        );
        p.complete(dev.now_ns());
        dev.power_on().unwrap();
        let img = replay(&writes[..writes.len() - k], SPAN);
        assert!(
            read(&dev, &conn, 0, SPAN) == img,
            "seed {seed}: store after the cut"
        );
        invariants(&dev);
        let rep = dev.power_report();
        assert_eq!((rep.cuts, rep.pending_writes, rep.powered), (1, 0, true));
    }
    // Not vacuous: cuts lost writes, and kept others.
    assert!(lost > 0 && kept > 0, "lost {lost}, kept {kept}");
}

#[test]
fn requests_are_refused_while_the_power_is_off() {
    let dev = device("sata-mlc-2011", |_| {});
    let conn = dev.register_frontend("test", "", "").connect("");
    let closed = Arc::new(AtomicU64::new(0));
    let c = closed.clone();
    dev.on_power_cut(move || {
        c.fetch_add(1, Relaxed);
    });
    dev.power_cut(CutTrigger::Now, None).unwrap();
    assert_eq!(closed.load(Relaxed), 1, "the frontends are told");
    assert!(!dev.powered());
    let w = W {
        offset: 0,
        len: 4096,
        byte: 1,
        flushed: false,
    };
    assert_eq!(write(&dev, &conn, &w, false), Status::Stopped);
    let f = dev.flush(&conn);
    assert_eq!(f.status(), Status::Stopped);
    f.complete(dev.now_ns());
    assert!(matches!(
        dev.power_cut(CutTrigger::Now, None),
        Err(PowerError::AlreadyOff)
    ));
    dev.power_on().unwrap();
    assert!(matches!(dev.power_on(), Err(PowerError::AlreadyOn)));
    assert_eq!(write(&dev, &conn, &w, false), Status::Ok);
    assert!(matches!(
        dev.power_cut(CutTrigger::AfterWrites { writes: 0 }, None),
        Err(PowerError::BadTrigger(_))
    ));
    assert!(matches!(
        dev.power_cut(CutTrigger::AfterMs { ms: u64::MAX }, None),
        Err(PowerError::BadTrigger(_))
    ));
}

#[test]
fn after_writes_cuts_as_the_nth_write_arrives_and_loses_it() {
    let dev = device("sata-mlc-2011", |_| {});
    let conn = dev.register_frontend("test", "", "").connect("");
    let a = W {
        offset: 0,
        len: MIB,
        byte: 0x11,
        flushed: true,
    };
    assert_eq!(write(&dev, &conn, &a, true), Status::Ok);
    let r = dev
        .power_cut(CutTrigger::AfterWrites { writes: 3 }, None)
        .unwrap();
    assert_eq!(r.armed, Some(Armed::AfterWrites { writes: 3 }));
    let mut bs = Vec::new();
    for i in 0..3 {
        let b = W {
            offset: (i * 64) << 10,
            len: 64 << 10,
            byte: 0x22 + i as u8,
            flushed: false,
        };
        let st = write(&dev, &conn, &b, false);
        // The third is never acknowledged: the power goes as it arrives.
        assert_eq!(st, if i == 2 { Status::Stopped } else { Status::Ok });
        bs.push(b);
    }
    let rep = dev.power_report();
    assert!(!rep.powered);
    let cut = rep.last_cut.unwrap();
    let last = cut
        .lost
        .last()
        .expect("the write the power went with is lost");
    assert_eq!((last.offset, last.length), (128 << 10, 64 << 10));
    assert!(!last.acknowledged);
    assert!(cut.lost.iter().all(|l| l.offset < MIB / 4), "A was flushed");
    dev.power_on().unwrap();
    let mut all = vec![a];
    all.extend_from_slice(&bs[..bs.len() - cut.lost.len()]);
    assert!(read(&dev, &conn, 0, MIB) == replay(&all, MIB));
    invariants(&dev);
}

#[test]
fn power_loss_protection_loses_nothing() {
    let dev = device("intel-320-120", |_| {});
    assert!(dev.profile().reliability.power_loss_protection);
    let conn = dev.register_frontend("test", "", "").connect("");
    let mut ws = Vec::new();
    for i in 0..16u64 {
        let w = W {
            offset: i * (64 << 10),
            len: 64 << 10,
            byte: i as u8 + 1,
            flushed: false,
        };
        assert_eq!(write(&dev, &conn, &w, false), Status::Ok);
        ws.push(w);
    }
    let cut = dev.power_cut(CutTrigger::Now, None).unwrap().cut.unwrap();
    assert!(cut.protected && cut.lost.is_empty(), "{cut:?}");
    dev.power_on().unwrap();
    assert!(read(&dev, &conn, 0, MIB) == replay(&ws, MIB));
}

#[test]
fn a_drive_that_lies_about_flushes_loses_flushed_writes() {
    for lies in [false, true] {
        let dev = device("sata-mlc-2011", |p| p.reliability.flush_lies = lies);
        let conn = dev.register_frontend("test", "", "").connect("");
        let w = W {
            offset: 0,
            len: 4096,
            byte: 7,
            flushed: true,
        };
        assert_eq!(write(&dev, &conn, &w, false), Status::Ok);
        assert_eq!(flush(&dev, &conn), Status::Ok);
        let cut = dev.power_cut(CutTrigger::Now, None).unwrap().cut.unwrap();
        assert_eq!(cut.lost.len(), usize::from(lies), "flush_lies = {lies}");
        dev.power_on().unwrap();
        let want = if lies { 0 } else { 7 };
        assert!(read(&dev, &conn, 0, 4096).iter().all(|&b| b == want));
    }
}

#[test]
fn a_discard_takes_what_it_covers_out_of_the_audit() {
    let dev = device("sata-mlc-2011", |_| {});
    let conn = dev.register_frontend("test", "", "").connect("");
    let w = W {
        offset: 0,
        len: 64 << 10,
        byte: 9,
        flushed: false,
    };
    assert_eq!(write(&dev, &conn, &w, false), Status::Ok);
    let d = dev.discard(&conn, &[(0, 32 << 10)], false);
    assert_eq!(d.status(), Status::Ok);
    d.complete(dev.now_ns());
    let cut = dev.power_cut(CutTrigger::Now, None).unwrap().cut.unwrap();
    // Only the part the discard did not cover can be lost.
    assert!(
        cut.lost
            .iter()
            .all(|l| l.offset >= 32 << 10 && l.offset + l.length <= 64 << 10),
        "{cut:?}"
    );
    dev.power_on().unwrap();
    let back = read(&dev, &conn, 0, 64 << 10);
    assert!(back[..32 << 10].iter().all(|&b| b == 0), "discarded");
    let lost_tail = !cut.lost.is_empty();
    let want = if lost_tail { 0 } else { 9 };
    assert!(back[32 << 10..].iter().all(|&b| b == want));
}

#[test]
fn a_worn_out_intel_drive_is_read_only_and_keeps_its_data() {
    let dev = device("intel-320-120", |_| {});
    let conn = dev.register_frontend("test", "", "").connect("");
    let w = W {
        offset: 0,
        len: 4096,
        byte: 5,
        flushed: true,
    };
    assert_eq!(write(&dev, &conn, &w, true), Status::Ok);
    dev.age(99.0).unwrap();
    assert!(!dev.read_only());
    assert_eq!(write(&dev, &conn, &w, false), Status::Ok);
    dev.age(100.0).unwrap();
    assert!(dev.read_only());
    assert_eq!(write(&dev, &conn, &w, false), Status::IoError);
    let d = dev.discard(&conn, &[(0, 4096)], false);
    assert_eq!(d.status(), Status::IoError);
    d.complete(dev.now_ns());
    assert!(read(&dev, &conn, 0, 4096).iter().all(|&b| b == 5));
    assert!(dev.faults().read_only);
    invariants(&dev);
    assert!(dev.age(0.0).is_err() && dev.age(f64::NAN).is_err());
    let plain = device("sata-mlc-2011", |_| {});
    assert!(plain.age(50.0).unwrap_err().contains("rated_pe_cycles"));
}

#[test]
fn a_write_an_injected_fault_failed_is_not_lost() {
    let dev = device("sata-mlc-2011", |_| {});
    let conn = dev.register_frontend("test", "", "").connect("");
    dev.add_fault(faults::FaultSpec::WriteError {
        offset: 0,
        length: 4096,
    })
    .unwrap();
    let bad = W {
        offset: 0,
        len: 8192,
        byte: 3,
        flushed: false,
    };
    assert_eq!(write(&dev, &conn, &bad, false), Status::IoError);
    let good = W {
        offset: 1 << 20,
        len: 8192,
        byte: 4,
        flushed: false,
    };
    assert_eq!(write(&dev, &conn, &good, false), Status::Ok);
    let cut = dev.power_cut(CutTrigger::Now, None).unwrap().cut.unwrap();
    assert!(cut.lost.iter().all(|l| l.offset == 1 << 20), "{cut:?}");
    assert!(
        dev.idle(1).is_err() && dev.secure_erase().is_err(),
        "power off"
    );
    dev.power_on().unwrap();
    assert!(read(&dev, &conn, 0, 8192).iter().all(|&b| b == 0));
}

#[test]
fn random_cut_points_come_from_the_seed() {
    let pick = |seed| {
        let dev = device("sata-mlc-2011", |_| {});
        dev.power_cut(CutTrigger::Random { seed }, None)
            .unwrap()
            .armed
    };
    let a = pick(7);
    assert_eq!(a, pick(7), "the same seed, the same point");
    let Some(Armed::AfterWrites { writes }) = a else {
        panic!("{a:?}");
    };
    assert!((1..=1000).contains(&writes));
    let points: std::collections::BTreeSet<_> = (0..8).map(|s| format!("{:?}", pick(s))).collect();
    assert!(points.len() > 1, "seeds pick different points");
}

#[test]
fn media_faults_and_stalls_leave_the_model_whole() {
    let dev = device("sata-mlc-2011", |_| {});
    let conn = dev.register_frontend("test", "", "").connect("");
    let mut rng = Rng::new(3);
    for i in 0..8u64 {
        let spec = if i % 2 == 0 {
            faults::FaultSpec::ReadError {
                offset: rng.below(4096) * 512,
                length: 512 * (1 + rng.below(64)),
            }
        } else {
            faults::FaultSpec::WriteError {
                offset: rng.below(4096) * 512,
                length: 512 * (1 + rng.below(64)),
            }
        };
        dev.add_fault(spec).unwrap();
    }
    dev.add_fault(faults::FaultSpec::Stall {
        ms: 1,
        every_ms: Some(3),
        after_ms: None,
    })
    .unwrap();
    let (mut failed, mut ok) = (0, 0);
    for i in 0..400u64 {
        let w = W {
            offset: rng.below(4096) * 512,
            len: 512 * (1 + rng.below(32)),
            byte: i as u8,
            flushed: false,
        };
        match write(&dev, &conn, &w, false) {
            Status::Ok => ok += 1,
            Status::IoError => failed += 1,
            s => panic!("{s:?}"),
        }
        let mut back = vec![0u8; w.len as usize];
        let p = dev.read(&conn, w.offset, &[VolatileSlice::from(&mut back[..])]);
        assert!(matches!(p.status(), Status::Ok | Status::IoError));
        p.complete(dev.now_ns());
    }
    assert!(failed > 0 && ok > 0, "failed {failed}, ok {ok}");
    invariants(&dev);
    let f = dev.faults();
    assert_eq!(f.counters.write_errors_injected, failed);
}

/// A cut armed for a drive time goes off then with no request to carry it
/// (the power timer does), and `--restart-after` brings the power back by
/// itself; `--at` in the past is refused.
#[test]
fn timed_cuts_and_automatic_power_on_need_no_request() {
    let dev = Arc::new(device("sata-mlc-2011", |_| {}));
    Device::spawn_power_timer(&dev).unwrap();
    let now_ms = dev.power_report().drive_time_ns / 1_000_000;
    let e = dev
        .power_cut(
            CutTrigger::At {
                ms: now_ms.saturating_sub(1),
            },
            None,
        )
        .unwrap_err();
    assert!(e.to_string().contains("not ahead"), "{e}");
    // 30 ms of drive time = 300 ms of wall time at K = 10.
    let armed = dev
        .power_cut(CutTrigger::At { ms: now_ms + 30 }, Some(40))
        .unwrap()
        .armed;
    assert_eq!(
        armed,
        Some(Armed::At {
            model_ns: (now_ms + 30) * 1_000_000
        })
    );
    assert_eq!(dev.power_report().armed_restart_after_ms, Some(40));
    let t0 = std::time::Instant::now();
    while dev.powered() {
        assert!(t0.elapsed().as_secs() < 20, "the armed cut never went off");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let cut = dev.drive.lock().power.last_cut().cloned().unwrap();
    assert_eq!(cut.model_ns, (now_ms + 30) * 1_000_000, "at its time");
    assert_eq!(cut.restart_at_model_ns, Some((now_ms + 70) * 1_000_000));
    while !dev.powered() {
        assert!(t0.elapsed().as_secs() < 20, "the power never came back");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(dev.power_report().drive_time_ns >= (now_ms + 70) * 1_000_000);
    // --after-ms the same way; absurd restarts are refused.
    dev.power_cut(CutTrigger::AfterMs { ms: 10 }, None).unwrap();
    while dev.powered() {
        assert!(t0.elapsed().as_secs() < 40, "--after-ms never went off");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    dev.power_on().unwrap();
    for ms in [0, faults::MAX_PERIOD_MS + 1] {
        assert!(matches!(
            dev.power_cut(CutTrigger::Now, Some(ms)),
            Err(PowerError::BadTrigger(_))
        ));
    }
    assert!(dev.powered(), "a refused cut cuts nothing");
}

/// The failure classes of Zheng et al. at the device: whatever they do,
/// the store afterwards holds, sector by sector, the data of each write
/// the lost list does not name for that sector (and the old data where it
/// does), the same seed gives the same cut, and each class shows up.
#[test]
fn failure_classes_lose_exactly_what_the_list_says() {
    const SPAN: u64 = 2 * MIB;
    let (mut shorn, mut reordered, mut mapping) = (0, 0, 0);
    for seed in 0..10u64 {
        let run = || {
            let dev = device_seeded("sata-mlc-2011", seed, |p| {
                p.reliability.shorn_write_probability = 0.5;
                p.reliability.unserializable_write_probability = 0.3;
                p.reliability.mapping_loss_probability = 0.5;
                p.reliability.mapping_loss_window_ms = 60_000;
            });
            let conn = dev.register_frontend("test", "", "").connect("");
            let mut rng = Rng::new(seed);
            let mut writes: Vec<W> = Vec::new();
            for i in 0..40u64 {
                // Overlapping writes, each (offset, length) its own.
                let w = loop {
                    let sectors = 2 + rng.below(64);
                    let w = W {
                        offset: rng.below(SPAN / 512 - sectors) * 512,
                        len: sectors * 512,
                        byte: (i % 250 + 1) as u8,
                        flushed: false,
                    };
                    if !writes
                        .iter()
                        .any(|x| (x.offset, x.len) == (w.offset, w.len))
                    {
                        break w;
                    }
                };
                assert_eq!(write(&dev, &conn, &w, false), Status::Ok);
                writes.push(w);
                if i == 20 {
                    assert_eq!(flush(&dev, &conn), Status::Ok);
                }
            }
            let cut = dev.power_cut(CutTrigger::Now, None).unwrap().cut.unwrap();
            dev.power_on().unwrap();
            let back = read(&dev, &conn, 0, SPAN);
            invariants(&dev);
            (writes, cut, back)
        };
        let (writes, cut, back) = run();
        // Which sectors of write i the list says were lost.
        let lost = |i: usize, s: u64| {
            let w = &writes[i];
            cut.lost.iter().any(|l| {
                l.shorn_from.unwrap_or([l.offset, l.length]) == [w.offset, w.len]
                    && l.offset <= s
                    && s < l.offset + l.length
            })
        };
        let mut img = vec![0u8; SPAN as usize];
        for (i, w) in writes.iter().enumerate() {
            for s in (w.offset..w.offset + w.len).step_by(512) {
                if !lost(i, s) {
                    img[s as usize..s as usize + 512].fill(w.byte);
                }
            }
        }
        assert!(
            back == img,
            "seed {seed}: the store disagrees with {:?}",
            cut.lost
        );
        // Without the mapping class nothing flushed is lost.
        for l in &cut.lost {
            match l.cause {
                power::LossCause::Shorn => shorn += 1,
                power::LossCause::Mapping => mapping += 1,
                power::LossCause::Unprogrammed => {}
            }
        }
        reordered += cut.reordered;
        if !cut.mapping_lost {
            let flushed_end = 21;
            assert!(
                cut.lost.iter().all(|l| {
                    let whole = l.shorn_from.unwrap_or([l.offset, l.length]);
                    writes[flushed_end..]
                        .iter()
                        .any(|w| [w.offset, w.len] == whole)
                }),
                "seed {seed}: a flushed write was lost without the mapping class"
            );
        }
        // The same seed, the same cut (the times are the clock's).
        let (_, again, _) = run();
        let what = |c: &CutReport| -> Vec<_> {
            c.lost
                .iter()
                .map(|l| (l.offset, l.length, l.cause, l.shorn_from))
                .collect()
        };
        assert_eq!(what(&cut), what(&again), "seed {seed}");
    }
    assert!(
        shorn > 0 && reordered > 0 && mapping > 0,
        "{shorn} {reordered} {mapping}"
    );
}

/// Thermal throttling caps what the drive moves: a 1 MiB write at 10 MB/s
/// takes at least 105 ms of drive time, counted in the modelled latency;
/// once the throttle's time is over, writes are fast again.
#[test]
fn a_throttle_caps_the_transfer_rate_for_its_time() {
    let dev = device("nvme-tlc", |_| {});
    let conn = dev.register_frontend("test", "", "").connect("");
    let w = W {
        offset: 0,
        len: MIB,
        byte: 1,
        flushed: false,
    };
    assert_eq!(write(&dev, &conn, &w, false), Status::Ok);
    let fast = dev.report().ops["write"].modelled.max_ns;
    assert!(fast < 10_000_000, "{fast}");
    dev.add_fault(faults::FaultSpec::Throttle {
        mb_s: 10,
        after_ms: None,
        for_ms: Some(500),
    })
    .unwrap();
    assert_eq!(write(&dev, &conn, &w, false), Status::Ok);
    // 1 MiB at 10^7 B/s is 104.86 ms (a few ns lost converting clocks).
    let slow = dev.report().ops["write"].modelled.max_ns;
    assert!(slow >= 104_857_000, "{slow}");
    let c = dev.faults().counters;
    assert_eq!(c.throttled_commands, 1);
    assert!(c.throttle_delay_ns > 90_000_000, "{c:?}");
    // Past its 500 ms (5 s of wall time at K = 10) the cap is gone.
    let until = dev.power_report().drive_time_ns + 600_000_000;
    while dev.power_report().drive_time_ns < until {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(write(&dev, &conn, &w, false), Status::Ok);
    assert_eq!(dev.faults().counters.throttled_commands, 1);
    for bad in [0, 100_001] {
        assert!(
            dev.add_fault(faults::FaultSpec::Throttle {
                mb_s: bad,
                after_ms: None,
                for_ms: None
            })
            .is_err()
        );
    }
}

/// Injected grown bad blocks leave service with their data moved out: the
/// data reads back, the spare shrinks, SMART counts them, the model's
/// invariants hold; the spare runs out with a clear error.
#[test]
fn bad_blocks_retire_and_move_their_data() {
    let dev = device("crucial-m4-128", |_| {});
    let conn = dev.register_frontend("test", "", "").connect("");
    let mut ws = Vec::new();
    for i in 0..64u64 {
        let w = W {
            offset: i * MIB,
            len: MIB,
            byte: i as u8 + 1,
            flushed: true,
        };
        assert_eq!(write(&dev, &conn, &w, false), Status::Ok);
        ws.push(w);
    }
    let before = dev.counters();
    let f = dev
        .add_fault(faults::FaultSpec::BadBlock { count: 8 })
        .unwrap();
    assert_eq!(f.hits, 8);
    let after = dev.counters();
    assert_eq!(after.grown_bad_blocks, 8);
    assert_eq!(after.total_blocks, before.total_blocks - 8);
    invariants(&dev);
    assert!(read(&dev, &conn, 0, 64 * MIB) == replay(&ws, 64 * MIB));
    let smart = dev.smart();
    let a170 = smart.attributes.iter().find(|a| a.id == 170).unwrap();
    assert_eq!(a170.raw, 8);
    assert_eq!(dev.faults().counters.blocks_retired, 8);
    // More than the spare allows: some go, then a clear refusal.
    let mut retired = 8;
    loop {
        match dev.add_fault(faults::FaultSpec::BadBlock { count: 4096 }) {
            Ok(f) => retired += f.hits,
            Err(e) => {
                assert!(e.to_string().contains("no spare block left"), "{e}");
                break;
            }
        }
        let _ = dev.clear_faults(None);
    }
    assert_eq!(dev.counters().grown_bad_blocks, retired);
    invariants(&dev);
    // The drive still holds and takes its data.
    assert!(read(&dev, &conn, 0, 64 * MIB) == replay(&ws, 64 * MIB));
    for w in &ws {
        assert_eq!(write(&dev, &conn, w, false), Status::Ok);
    }
    invariants(&dev);
}

/// Media-wear: a worn drive with old data fails reads at the raw
/// bit-error model's rate (accelerated so a test sees it); a failed unit
/// fails again until it is rewritten; SMART counts the errors; a fresh
/// drive with the same acceleration fails none; erases fail too, and out
/// of spare blocks the drive turns read-only.
#[test]
fn media_wear_fails_worn_reads_and_erases() {
    let run = |wear: Option<f64>| {
        let dev = device("crucial-m4-128", |_| {});
        let conn = dev.register_frontend("test", "", "").connect("");
        let w = W {
            offset: 0,
            len: 4 * MIB,
            byte: 9,
            flushed: true,
        };
        assert_eq!(write(&dev, &conn, &w, true), Status::Ok);
        if let Some(p) = wear {
            dev.age(p).unwrap();
        }
        // Worn out with a year-old data the model's raw rate is the ECC's
        // limit; 60 times that fails a few percent of the 4 KiB units.
        dev.add_fault(faults::FaultSpec::MediaWear {
            acceleration: 60.0,
            retention_days: 365.0,
        })
        .unwrap();
        let mut failed = Vec::new();
        for u in 0..(4 * MIB / 4096) {
            let mut b = vec![0u8; 4096];
            let p = dev.read(&conn, u * 4096, &[VolatileSlice::from(&mut b[..])]);
            match p.status() {
                Status::Ok => assert!(b.iter().all(|&x| x == 9)),
                Status::IoError => failed.push(u),
                s => panic!("{s:?}"),
            }
            p.complete(dev.now_ns());
        }
        (dev, conn, failed)
    };
    let (fresh, _, none) = run(None);
    assert!(none.is_empty(), "a fresh drive failed {} reads", none.len());
    assert_eq!(fresh.faults().counters.uncorrectable_reads, 0);
    let (dev, conn, failed) = run(Some(100.0));
    let units = 4 * MIB / 4096;
    assert!(
        !failed.is_empty() && (failed.len() as u64) < units,
        "{} of {units} failed",
        failed.len()
    );
    // Sticky until rewritten.
    let u = failed[0];
    let mut b = vec![0u8; 4096];
    let p = dev.read(&conn, u * 4096, &[VolatileSlice::from(&mut b[..])]);
    assert_eq!(p.status(), Status::IoError);
    p.complete(dev.now_ns());
    let w = W {
        offset: u * 4096,
        len: 4096,
        byte: 7,
        flushed: false,
    };
    assert_eq!(write(&dev, &conn, &w, false), Status::Ok);
    let n = dev.faults().counters.uncorrectable_reads;
    assert_eq!(n, failed.len() as u64 + 1);
    // Without the fault, the rewritten unit reads its new data; one not
    // rewritten stays unreadable.
    dev.clear_faults(None).unwrap();
    assert!(read(&dev, &conn, u * 4096, 4096).iter().all(|&b| b == 7));
    if let Some(&v) = failed.get(1) {
        let p = dev.read(&conn, v * 4096, &[VolatileSlice::from(&mut b[..])]);
        assert_eq!(p.status(), Status::IoError);
        p.complete(dev.now_ns());
    }
    let n = dev.faults().counters.uncorrectable_reads;
    let smart = dev.smart();
    assert_eq!(
        smart.attributes.iter().find(|a| a.id == 187).unwrap().raw,
        n
    );
    invariants(&dev);
    // Erases fail as the drive is worn: heavy rewriting retires blocks
    // until the spare is gone, then the drive is read-only.
    dev.add_fault(faults::FaultSpec::MediaWear {
        acceleration: 1e3,
        retention_days: 0.0,
    })
    .unwrap();
    let mut rng = Rng::new(5);
    let mut i = 0u64;
    while !dev.read_only() {
        let w = W {
            offset: rng.below(255) * MIB,
            len: MIB,
            byte: 3,
            flushed: false,
        };
        let st = write(&dev, &conn, &w, false);
        assert!(matches!(st, Status::Ok | Status::IoError), "{st:?}");
        i += 1;
        assert!(i < 200_000, "the spare never ran out");
    }
    assert!(dev.counters().grown_bad_blocks > 0);
    invariants(&dev);
    let w = W {
        offset: 0,
        len: 4096,
        byte: 1,
        flushed: false,
    };
    assert_eq!(write(&dev, &conn, &w, false), Status::IoError);
}

/// An independent check of what a cut loses, from where the model put the
/// data rather than from the counters the audit settles with: a write any
/// of whose units (where it placed them) still sits in an open dpage at
/// the cut was never programmed and must be lost; writes the drive had an
/// idle period to program (100 ms of idle time drains its buffer) must
/// survive; and the lost ones are the latest.
#[test]
fn a_cut_loses_what_sits_in_open_dpages_by_where_the_data_is() {
    const SPAN: u64 = 8 * MIB;
    let (mut forced, mut checked) = (0, 0);
    for seed in 0..8u64 {
        let dev = device("sata-mlc-2011", |_| {});
        let conn = dev.register_frontend("test", "", "").connect("");
        let mut rng = Rng::new(seed);
        let mut random_write = |i: u64| W {
            offset: rng.below(SPAN / 4096 - 16) * 4096,
            len: (1 + rng.below(16)) * 4096,
            byte: (i % 250 + 1) as u8,
            flushed: false,
        };
        let old: Vec<W> = (0..10).map(&mut random_write).collect();
        for w in &old {
            assert_eq!(write(&dev, &conn, w, false), Status::Ok);
        }
        // Idle time: the drive programs its buffer (open dpages included).
        dev.idle(300_000_000).unwrap();
        let mut new = Vec::new();
        let mut placed: Vec<Vec<u64>> = Vec::new();
        for i in 0..(5 + seed * 3) {
            let w = random_write(100 + i);
            assert_eq!(write(&dev, &conn, &w, false), Status::Ok);
            let m = dev.drive.lock();
            placed.push(
                (w.offset..w.offset + w.len)
                    .step_by(4096)
                    .filter_map(|o| m.ssd.unit_ppn(o))
                    .collect(),
            );
            new.push(w);
        }
        // Where each write's data is, just before the cut.
        let open: Vec<bool> = {
            let m = dev.drive.lock();
            placed
                .iter()
                .map(|ppns| ppns.iter().any(|&p| m.ssd.ppn_in_open_dpage(p)))
                .collect()
        };
        let cut = dev.power_cut(CutTrigger::Now, None).unwrap().cut.unwrap();
        let lost_from = new.len() - cut.lost.len();
        for (l, w) in cut.lost.iter().zip(&new[lost_from..]) {
            assert_eq!((l.offset, l.length), (w.offset, w.len), "seed {seed}");
        }
        // Every write placed in an open dpage is lost (and so every later one).
        if let Some(first_open) = open.iter().position(|&o| o) {
            assert!(
                lost_from <= first_open,
                "seed {seed}: write {first_open} sat in an open dpage but only {} were lost",
                cut.lost.len()
            );
            forced += new.len() - first_open;
        }
        checked += new.len();
        dev.power_on().unwrap();
        // The writes before the idle period survived.
        let mut all = old.clone();
        all.extend_from_slice(&new[..lost_from]);
        assert!(
            read(&dev, &conn, 0, SPAN) == replay(&all, SPAN),
            "seed {seed}: store after the cut"
        );
        invariants(&dev);
    }
    // Not vacuous: open dpages forced losses.
    assert!(forced > 0, "{forced} of {checked}");
}

/// Every command kind that takes FUA, on every kind of drive without
/// power-loss protection (trimmed LBAs reading zeros or old data): a cut
/// right after the command's acknowledgement keeps what it wrote. The
/// earlier unflushed writes around it may go; the command's range never.
#[test]
fn a_fua_command_survives_a_cut_right_after_its_reply() {
    #[derive(Debug, Clone, Copy)]
    enum Cmd {
        Write,
        Zeroes { unmap: bool },
    }
    let mut checked = 0;
    for preset in ["sata-mlc-2011", "intel-x25m-g1", "samsung-pb22j"] {
        for cmd in [
            Cmd::Write,
            Cmd::Zeroes { unmap: false },
            Cmd::Zeroes { unmap: true },
        ] {
            for seed in 0..4u64 {
                let dev = device_seeded(preset, seed, |_| {});
                assert!(!dev.power_report().power_loss_protection);
                let conn = dev.register_frontend("test", "", "").connect("");
                let mut rng = Rng::new(seed);
                // Old data, durable; then unflushed writes around the range.
                let span = 4 * MIB;
                assert_eq!(
                    write(
                        &dev,
                        &conn,
                        &W {
                            offset: 0,
                            len: span,
                            byte: 0x11,
                            flushed: false
                        },
                        true
                    ),
                    Status::Ok
                );
                let sectors = 1 + rng.below(256);
                let offset = rng.below(span / 512 - sectors) * 512;
                let len = sectors * 512;
                for i in 0..rng.below(8) {
                    let o = rng.below(span / 512 - 8) * 512;
                    let w = W {
                        offset: o,
                        len: 4096,
                        byte: 0x20 + i as u8,
                        flushed: false,
                    };
                    assert_eq!(write(&dev, &conn, &w, false), Status::Ok);
                }
                let byte = match cmd {
                    Cmd::Write => {
                        let w = W {
                            offset,
                            len,
                            byte: 0x77,
                            flushed: false,
                        };
                        assert_eq!(write(&dev, &conn, &w, true), Status::Ok);
                        0x77
                    }
                    Cmd::Zeroes { unmap } => {
                        let p = dev.write_zeroes(&conn, &[(offset, len)], unmap, true);
                        assert_eq!(acknowledge(&dev, p), Status::Ok);
                        0
                    }
                };
                let cut = dev.power_cut(CutTrigger::Now, None).unwrap().cut.unwrap();
                for l in &cut.lost {
                    assert!(
                        l.offset + l.length <= offset || offset + len <= l.offset,
                        "{preset} {cmd:?} seed {seed}: the acknowledged FUA command at \
                         {offset}+{len} was lost: {l:?}"
                    );
                }
                dev.power_on().unwrap();
                let back = read(&dev, &conn, offset, len);
                assert!(
                    back.iter().all(|&b| b == byte),
                    "{preset} {cmd:?} seed {seed}: {offset}+{len} reads {:?} after the cut, not {byte:#x}",
                    back.iter().find(|&&b| b != byte)
                );
                invariants(&dev);
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 3 * 3 * 4);
}
