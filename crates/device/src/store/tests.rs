//! Tests of the parent module.

use super::*;
use proptest::prelude::*;

fn roundtrip(store: &Store) {
    let mut data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let (a, b) = data.split_at_mut(70_000);
    store
        .write(4096, &[VolatileSlice::from(a), VolatileSlice::from(b)])
        .unwrap();
    let mut back = vec![0u8; 200_000];
    store
        .read(4096, &[VolatileSlice::from(&mut back[..])])
        .unwrap();
    assert_eq!(back, data);
    // Unwritten space reads as zeros.
    let mut z = vec![1u8; 4096];
    store.read(0, &[VolatileSlice::from(&mut z[..])]).unwrap();
    assert!(z.iter().all(|&x| x == 0));
    // Discard a middle range (not page-aligned), both flavours.
    store.zero(4096 + 512, 100_000, true).unwrap();
    store.zero(4096 + 150_000, 1024, false).unwrap();
    store
        .read(4096, &[VolatileSlice::from(&mut back[..])])
        .unwrap();
    for (i, (&x, &y)) in back.iter().zip(data.iter()).enumerate() {
        let zeroed = (512..100_512).contains(&i) || (150_000..151_024).contains(&i);
        assert_eq!(x, if zeroed { 0 } else { y }, "byte {i}");
    }
    // Out of range is refused.
    let mut one = [0u8; 512];
    assert!(
        store
            .read(store.len(), &[VolatileSlice::from(&mut one[..])])
            .is_err()
    );
    assert!(store.zero(store.len() - 512, 1024, true).is_err());
    store.sync().unwrap();
    store.erase_all().unwrap();
    store
        .read(4096, &[VolatileSlice::from(&mut back[..])])
        .unwrap();
    assert!(back.iter().all(|&x| x == 0));
    assert_eq!(store.pending_zero_bytes(), 0);
}

#[test]
fn memory_store() {
    roundtrip(&Store::memory(1 << 20).unwrap());
}

#[test]
fn file_store() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("disk.img");
    roundtrip(&Store::open_file(&p, 1 << 20).unwrap());
    // Reopen an existing file; a too-small one is refused.
    assert!(Store::open_file(&p, 1 << 20).is_ok());
    assert!(matches!(
        Store::open_file(&p, 2 << 20),
        Err(StoreError::TooSmall { .. })
    ));
}

/// Memory is allocated a page at a time, and discarded pages are freed.
#[test]
fn memory_store_allocates_pages_not_chunks() {
    let s = Store::memory(1 << 30).unwrap();
    let mut page = vec![7u8; 4096];
    for i in 0..100u64 {
        s.write(i * (1 << 20), &[VolatileSlice::from(&mut page[..])])
            .unwrap();
    }
    assert_eq!(s.allocated_bytes(), 100 * 4096);
    // A 512-byte write allocates its page only.
    let mut sector = vec![1u8; 512];
    s.write(3 << 28, &[VolatileSlice::from(&mut sector[..])])
        .unwrap();
    assert_eq!(s.allocated_bytes(), 101 * 4096);
    s.zero(0, 50 << 20, true).unwrap();
    assert_eq!(s.allocated_bytes(), 51 * 4096);
    let mut back = vec![1u8; 4096];
    s.read(0, &[VolatileSlice::from(&mut back[..])]).unwrap();
    assert!(back.iter().all(|&b| b == 0));
    s.read(60 << 20, &[VolatileSlice::from(&mut back[..])])
        .unwrap();
    assert!(back.iter().all(|&b| b == 7));
    s.erase_all().unwrap();
    assert_eq!(s.allocated_bytes(), 0);
}

/// A large discard returns at once; the range reads as zeros
/// immediately, a write into it afterwards survives the background
/// punching, and sync waits for it.
#[test]
fn large_discards_are_deferred_without_stale_reads() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("disk.img");
    let len = 64 << 20;
    let s = Store::open_file(&p, len).unwrap();
    let mut fill = vec![0xabu8; 1 << 20];
    for i in 0..64u64 {
        s.write(i << 20, &[VolatileSlice::from(&mut fill[..])])
            .unwrap();
    }
    s.zero(0, len, true).unwrap();
    let mut data = vec![0x5au8; 8192];
    s.write(40 << 20, &[VolatileSlice::from(&mut data[..])])
        .unwrap();
    let mut back = vec![1u8; 3 << 20];
    s.read(39 << 20, &[VolatileSlice::from(&mut back[..])])
        .unwrap();
    for (i, &b) in back.iter().enumerate() {
        let want = if (1 << 20..(1 << 20) + 8192).contains(&i) {
            0x5a
        } else {
            0
        };
        assert_eq!(b, want, "byte {i}");
    }
    s.sync().unwrap();
    assert_eq!(s.pending_zero_bytes(), 0);
    s.read(39 << 20, &[VolatileSlice::from(&mut back[..])])
        .unwrap();
    assert!(back[..1 << 20].iter().all(|&b| b == 0));
    assert!(back[1 << 20..(1 << 20) + 8192].iter().all(|&b| b == 0x5a));
    assert!(back[(1 << 20) + 8192..].iter().all(|&b| b == 0));
}

proptest! {
    /// The pending set behaves like a per-byte bitmap.
    #[test]
    fn range_set_matches_a_bitmap(
        ops in prop::collection::vec((0u8..3, 0u64..200, 0u64..60), 1..40)
    ) {
        let mut set = RangeSet::default();
        let mut bits = [false; 260];
        for (op, lo, n) in ops {
            let hi = lo + n;
            match op {
                0 => {
                    set.insert(lo, hi, true);
                    bits[lo as usize..hi as usize].fill(true);
                }
                1 => {
                    set.remove(lo, hi);
                    bits[lo as usize..hi as usize].fill(false);
                }
                _ => {
                    if let Some((a, b, _)) = set.take_piece(7) {
                        prop_assert!(b - a <= 7 && a < b);
                        for x in a..b {
                            prop_assert!(bits[x as usize]);
                            bits[x as usize] = false;
                        }
                    }
                }
            }
            let mut got = [false; 260];
            for (a, b) in set.overlapping(0, 260) {
                prop_assert!(a < b);
                for x in a..b {
                    prop_assert!(!got[x as usize], "ranges overlap");
                    got[x as usize] = true;
                }
            }
            prop_assert_eq!(got, bits);
            prop_assert_eq!(set.bytes(), bits.iter().filter(|&&b| b).count() as u64);
            let (qa, qb) = (lo.min(259), hi.min(260));
            for (a, b) in set.overlapping(qa, qb) {
                prop_assert!(a >= qa && b <= qb);
            }
        }
    }
}
