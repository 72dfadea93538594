//! Tests of the state format: round trips, sizes, every kind of damage.

use super::frames::{FrameReader, FrameWriter};
use super::*;
use crate::proptests::tiny;
use crate::{Op, Payload, Precondition, Request};

fn small() -> Profile {
    Profile::load("sata-mlc-2011")
        .unwrap()
        .with_capacity(256 << 20)
        .unwrap()
}

fn saved(ssd: &Ssd) -> Vec<u8> {
    let mut buf = Vec::new();
    ssd.save(&mut buf).unwrap();
    buf
}

/// The model state a save keeps (timelines are not saved).
fn same_ftl(a: &Ssd, b: &Ssd) {
    assert_eq!(a.counters(), b.counters());
    assert!(a.mapping.same_as(&b.mapping));
    assert_eq!(a.blocks.tables(), b.blocks.tables());
    assert_eq!(a.blocks.erase_counts(), b.blocks.erase_counts());
    assert_eq!(
        a.blocks.write_points().count(),
        b.blocks.write_points().count()
    );
    for (x, y) in a.blocks.write_points().zip(b.blocks.write_points()) {
        assert_eq!(
            (x.block(), x.page(), x.slot()),
            (y.block(), y.page(), y.slot())
        );
    }
    assert_eq!(a.blocks.cursor(), b.blocks.cursor());
    assert_eq!(a.seed, b.seed);
}

#[test]
fn roundtrip_keeps_mapping_and_counters() {
    let p = small();
    let mut ssd = Ssd::new(&p, 7);
    let end = ssd.precondition(
        0,
        &Precondition::Random {
            bs: 4096,
            amount: 600 << 20,
        },
        1,
    );
    ssd.submit(
        end,
        &Request {
            op: Op::Trim,
            offset: 0,
            len: 1 << 20,
            payload: Payload::Unknown,
        },
    )
    .unwrap();
    let buf = saved(&ssd);
    let back = Ssd::load(&p, &buf[..]).unwrap();
    same_ftl(&back, &ssd);
    back.check_invariants().unwrap();
    // Loading rebases block ages; from then on a save and a load
    // change nothing.
    let again = saved(&back);
    assert_eq!(saved(&Ssd::load(&p, &again[..]).unwrap()), again);
}

#[test]
fn fresh_and_sequential_states_are_small() {
    let p = small();
    let mut ssd = Ssd::new(&p, 7);
    let fresh = saved(&ssd).len();
    ssd.precondition(0, &Precondition::FillSequential { bs: 1 << 20 }, 1);
    let full = saved(&ssd).len();
    let table = ssd.mapping.forward().data_words().len() * 8;
    assert!(fresh < 2 * ssd.blocks.count() * 13 + 4096, "{fresh}");
    // Runs are one dpage long (host dpages stripe over the dies).
    assert!(full < table * 2 / 3, "{full} vs table {table}");
    let back = Ssd::load(&p, &saved(&ssd)[..]).unwrap();
    same_ftl(&back, &ssd);
    back.check_invariants().unwrap();
}

fn used_tiny() -> (Profile, Ssd) {
    let p = tiny("8KiB", "4KiB", 2, "128KiB", "greedy", 5.0);
    let mut ssd = Ssd::new(&p, 1);
    let end = ssd.precondition(
        0,
        &Precondition::Random {
            bs: 4096,
            amount: ssd.capacity() * 2,
        },
        9,
    );
    // Some unmapped stretches too.
    ssd.submit(
        end,
        &Request {
            op: Op::Trim,
            offset: 64 << 10,
            len: 64 << 10,
            payload: Payload::Unknown,
        },
    )
    .unwrap();
    (p, ssd)
}

#[test]
fn every_flipped_byte_is_reported_as_damage() {
    let (p, ssd) = used_tiny();
    let buf = saved(&ssd);
    assert!(buf.len() < 4000, "{}", buf.len());
    for i in 0..buf.len() {
        for bit in [0x01u8, 0x80] {
            let mut bad = buf.clone();
            bad[i] ^= bit;
            match Ssd::load(&p, &bad[..]) {
                Err(PersistError::Corrupt(_)) => {}
                other => panic!("byte {i} ^ {bit:#x}: {other:?}"),
            }
        }
    }
}

#[test]
fn truncation_and_trailing_data_are_damage() {
    let (p, ssd) = used_tiny();
    let buf = saved(&ssd);
    for n in 0..buf.len() {
        assert!(
            matches!(Ssd::load(&p, &buf[..n]), Err(PersistError::Corrupt(_))),
            "truncated to {n}"
        );
    }
    for extra in [&[0u8][..], b"x", &[0, 0, 0, 0], &buf[16..]] {
        let mut long = buf.clone();
        long.extend_from_slice(extra);
        assert!(
            matches!(Ssd::load(&p, &long[..]), Err(PersistError::Corrupt(_))),
            "{} trailing bytes",
            extra.len()
        );
    }
    // A frame dropped or repeated (each frame's checksum covers its index).
    let frames = {
        let mut v = Vec::new();
        let mut at = 16;
        while at < buf.len() {
            let n = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
            v.push(at..at + 8 + n);
            at += 8 + n;
        }
        v
    };
    assert!(frames.len() >= 2);
    let mut dup = buf[..frames[1].end].to_vec();
    dup.extend_from_slice(&buf[frames[1].clone()]);
    dup.extend_from_slice(&buf[frames[1].end..]);
    assert!(matches!(
        Ssd::load(&p, &dup[..]),
        Err(PersistError::Corrupt(_))
    ));
    let mut dropped = buf[..frames[0].start].to_vec();
    dropped.extend_from_slice(&buf[frames[0].end..]);
    assert!(matches!(
        Ssd::load(&p, &dropped[..]),
        Err(PersistError::Corrupt(_))
    ));
    assert!(matches!(
        Ssd::load(&p, &b"garbage"[..]),
        Err(PersistError::Corrupt(_))
    ));
}

#[test]
fn another_profile_and_other_versions_are_named() {
    let p = small();
    let mut ssd = Ssd::new(&p, 7);
    ssd.precondition(0, &Precondition::FillSequential { bs: 1 << 20 }, 1);
    let buf = saved(&ssd);
    let other = Profile::load("sata-mlc-2011")
        .unwrap()
        .with_capacity(1 << 30)
        .unwrap();
    assert!(matches!(
        Ssd::load(&other, &buf[..]),
        Err(PersistError::ProfileMismatch(_))
    ));
    // An intact header of another version.
    let mut v4 = buf.clone();
    v4[8] = 4;
    let crc = crc32fast::hash(&v4[..12]);
    v4[12..16].copy_from_slice(&crc.to_le_bytes());
    let e = Ssd::load(&p, &v4[..]).unwrap_err();
    assert!(matches!(e, PersistError::Version { found: 4, .. }), "{e}");
    assert!(e.to_string().contains("newer"), "{e}");
    // A version 1 file (no header checksum).
    let mut v1 = b"VSSDFTL\0".to_vec();
    v1.extend_from_slice(&1u32.to_le_bytes());
    v1.extend_from_slice(&[0x99; 64]);
    let e = Ssd::load(&p, &v1[..]).unwrap_err();
    assert!(matches!(e, PersistError::Version { found: 1, .. }), "{e}");
    assert!(e.to_string().contains("older vssd"), "{e}");
}

/// Re-frame a stream of contents as `save` would (for crafted states).
fn framed(contents: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    let crc = crc32fast::hash(&out[..12]);
    out.extend_from_slice(&crc.to_le_bytes());
    let mut f = FrameWriter::new(out);
    f.put(contents).unwrap();
    f.finish().unwrap()
}

/// The contents stream of a saved state (frames joined).
fn contents(buf: &[u8]) -> Vec<u8> {
    let mut r = FrameReader::new(&buf[16..]);
    let mut out = Vec::new();
    while r.next_frame().unwrap() > 0 {
        out.extend_from_slice(&r.buf);
    }
    out
}

#[test]
fn checksummed_but_inconsistent_states_are_refused() {
    let (p, ssd) = used_tiny();
    let buf = saved(&ssd);
    let c = contents(&buf);
    assert_eq!(framed(&c), buf, "test framing matches save");
    // Change every byte after the geometry in turn, framed properly:
    // the load must refuse it as damage or accept a consistent state,
    // and never panic.
    let geo_end = 4 + u32::from_le_bytes(c[..4].try_into().unwrap()) as usize;
    // The profile text of format 3 (mapping, reduction, SLC cache) follows
    // the geometry: changing it is another profile.
    let text_end =
        geo_end + 4 + u32::from_le_bytes(c[geo_end..geo_end + 4].try_into().unwrap()) as usize;
    let mut accepted = 0;
    for i in text_end..c.len() {
        for v in [c[i] ^ 0x01, c[i] ^ 0x10, 0xff] {
            let mut bad = c.clone();
            bad[i] = v;
            match Ssd::load(&p, &framed(&bad)[..]) {
                Err(PersistError::Corrupt(_)) => {}
                Ok(s) => {
                    s.check_invariants().unwrap();
                    accepted += 1;
                }
                Err(e) => panic!("byte {i} = {v:#x}: {e}"),
            }
        }
    }
    // Counters, erase counts and ages may take any value.
    assert!(accepted > 0);
}

#[test]
fn a_mismatch_names_what_differs_not_both_geometries() {
    let saved = "channels = 8\npages_per_block = 64\nexported_capacity = \"1GiB\"\n";
    let now = "channels = 8\npages_per_block = 128\nexported_capacity = \"2GiB\"\n";
    let m = super::differences("geometry", saved, now);
    assert_eq!(
        m,
        "it was saved at capacity 1GiB and this drive is 2GiB (--capacity 1GiB loads it); \
         geometry differs: pages_per_block: saved 64, now 128; exported_capacity: saved 1GiB, \
         now 2GiB"
    );
    assert!(!m.contains("channels"));
}
