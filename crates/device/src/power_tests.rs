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
use vssd_common::rng::Rng;

const MIB: u64 = 1 << 20;

fn device(preset: &str, edit: impl FnOnce(&mut Profile)) -> Device {
    let mut profile = Profile::load_with_capacity(preset, Some(256 * MIB)).unwrap();
    edit(&mut profile);
    Device::open(DeviceOptions {
        profile,
        data: DataLocation::Memory,
        state_file: None,
        seed: 1,
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
    dev.lock().ssd.check_invariants().unwrap();
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
        let r = dev.power_cut(CutTrigger::Now).unwrap();
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
    dev.power_cut(CutTrigger::Now).unwrap();
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
        dev.power_cut(CutTrigger::Now),
        Err(PowerError::AlreadyOff)
    ));
    dev.power_on().unwrap();
    assert!(matches!(dev.power_on(), Err(PowerError::AlreadyOn)));
    assert_eq!(write(&dev, &conn, &w, false), Status::Ok);
    assert!(matches!(
        dev.power_cut(CutTrigger::AfterWrites { writes: 0 }),
        Err(PowerError::BadTrigger(_))
    ));
    assert!(matches!(
        dev.power_cut(CutTrigger::AfterMs { ms: u64::MAX }),
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
        .power_cut(CutTrigger::AfterWrites { writes: 3 })
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
    let cut = dev.power_cut(CutTrigger::Now).unwrap().cut.unwrap();
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
        let cut = dev.power_cut(CutTrigger::Now).unwrap().cut.unwrap();
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
    let cut = dev.power_cut(CutTrigger::Now).unwrap().cut.unwrap();
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
    let cut = dev.power_cut(CutTrigger::Now).unwrap().cut.unwrap();
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
        dev.power_cut(CutTrigger::Random { seed }).unwrap().armed
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
