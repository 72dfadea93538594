//! Unit tests of read timing: out-of-order transfers on the host link and
//! independent plane reads. Model time only.

use super::proptests::tiny;
use super::*;
use vssd_profile::Profile;

fn read(ssd: &mut Ssd, t: u64, offset: u64) -> u64 {
    let r = Request {
        op: Op::Read,
        offset,
        len: 4096,
        payload: Payload::Unknown,
    };
    ssd.submit(t, &r).unwrap().done_ns
}

/// A drive of `planes` planes per die, filled sequentially; the time the
/// fill ended.
fn filled(p: &Profile) -> (Ssd, u64) {
    let mut ssd = Ssd::new(p, 1);
    let cap = ssd.capacity();
    let mut t = 0;
    let mut o = 0;
    while o < cap {
        let r = Request {
            op: Op::Write,
            offset: o,
            len: 16384,
            payload: Payload::Unknown,
        };
        t = ssd.submit(t, &r).unwrap().done_ns;
        o += 16384;
    }
    (ssd, t)
}

/// Die and plane holding the 4 KiB at `offset`.
fn die_plane(ssd: &Ssd, offset: u64) -> (u32, u64) {
    let e = ssd.mapping.entry(offset / ssd.geo.unit_bytes);
    assert!(e > 0, "offset {offset} is mapped");
    let ppn = e - 1;
    let die = ssd.geo.die_of_block(ssd.geo.block_of_ppn(ppn));
    let plane = (ppn % ssd.geo.units_per_dpage as u64) / ssd.geo.units_per_page as u64;
    (die, plane)
}

/// The first 4 KiB offsets (after `skip` matches) where `pred` holds.
fn find(ssd: &Ssd, skip: usize, pred: impl Fn((u32, u64)) -> bool) -> u64 {
    (0..ssd.capacity() / 4096)
        .map(|i| i * 4096)
        .filter(|&o| pred(die_plane(ssd, o)))
        .nth(skip)
        .expect("such an offset exists")
}

fn independent(p: &Profile) -> Profile {
    let text = p.to_toml().replace(
        "channel_mb_s = 100.0",
        "channel_mb_s = 100.0\nindependent_plane_reads = true",
    );
    Profile::from_toml(&text, "t").unwrap()
}

/// A read whose data is ready early is not held behind an earlier read
/// still waiting for its die: the host link takes transfers when their
/// data is ready (NCQ, NVMe), not in submission order.
#[test]
fn a_read_ready_early_does_not_wait_behind_an_earlier_one() {
    let (mut ssd, t0) = filled(&tiny("4KiB", "4KiB", 1, "0", "greedy", 0.0));
    let a = find(&ssd, 0, |(d, _)| d == 0);
    let b = find(&ssd, 1, |(d, _)| d == 0);
    // On another channel, so nothing but the host link is shared.
    let ch0 = ssd.geo.channel_of(0).0;
    let c = find(&ssd, 0, |(d, _)| ssd.geo.channel_of(d as usize).0 != ch0);
    let t = t0 + 1_000_000_000;
    let ra = read(&mut ssd, t, a);
    let rb = read(&mut ssd, t, b);
    let rc = read(&mut ssd, t, c);
    assert!(rb > ra, "the second read of die 0 waits for the first");
    assert!(
        rc < rb,
        "die 1's read ({rc}) completes before die 0's queued one ({rb})"
    );
    assert_eq!(
        rc - t,
        ra - t + ssd.geo.link_ns(4096),
        "it only waits for the first read's link transfer, ready at the same time"
    );
}

/// With independent plane reads, a read of a die's other plane senses
/// while the first one does (it is later only by the transfers, which
/// share the die's channel and the host link); without the option, or on
/// the same plane, it waits a whole page read more.
#[test]
fn planes_read_independently_only_when_the_drive_can() {
    let base = tiny("4KiB", "4KiB", 2, "0", "greedy", 0.0);
    // (first read, the other plane's, the same plane's): latencies.
    let latencies = |p: &Profile| {
        let (mut ssd, t0) = filled(p);
        let p0 = find(&ssd, 0, |dp| dp == (0, 0));
        let p0b = find(&ssd, 1, |dp| dp == (0, 0));
        let p1 = find(&ssd, 0, |dp| dp == (0, 1));
        let t = t0 + 1_000_000_000;
        let first = read(&mut ssd, t, p0) - t;
        let other = read(&mut ssd, t, p1) - t;
        let same = read(&mut ssd, t, p0b) - t;
        (first, other, same, ssd.geo.t_read)
    };
    let (first, whole_die, _, t_read) = latencies(&base);
    let (first_i, other_plane, same_plane, _) = latencies(&independent(&base));
    assert_eq!(first, first_i, "a lone read is not affected");
    assert_eq!(
        whole_die - other_plane,
        t_read,
        "the other plane's read saves one page read"
    );
    assert!(
        same_plane >= other_plane + t_read,
        "one plane reads one page at a time: {same_plane} vs {other_plane}"
    );
}

/// A program on the die holds plane reads back, and a program issued
/// behind plane reads waits for them: planes read independently of each
/// other, not of writes and erases.
#[test]
fn plane_reads_still_wait_for_programs() {
    let p = independent(&tiny("4KiB", "4KiB", 2, "0", "greedy", 0.0));
    let (mut ssd, t0) = filled(&p);
    let t = t0 + 1_000_000_000;
    // Unbuffered: the write completes when programmed, on the die the
    // cursor gives it; then read from that die.
    let w = Request {
        op: Op::Write,
        offset: 0,
        len: 8192,
        payload: Payload::Unknown,
    };
    let programmed = ssd.submit(t, &w).unwrap().done_ns;
    let (die, _) = die_plane(&ssd, 0);
    let r = find(&ssd, 0, |(d, _)| d == die);
    let done = read(&mut ssd, t, r);
    assert!(
        done >= programmed + ssd.geo.t_read,
        "the read ({done}) starts after the program ends ({programmed})"
    );
}

#[test]
fn independent_plane_reads_are_refused_with_hybrid_mapping() {
    let mut p = Profile::load("solidata-k5-64").unwrap();
    p.nand.independent_plane_reads = true;
    let e = Profile::from_toml(&p.to_toml(), "t")
        .unwrap_err()
        .to_string();
    assert!(e.contains("independent_plane_reads"), "{e}");
}

/// `sata-mlc-2011` at 1 GiB, filled, with `ahead` bytes of read look-ahead.
fn look_ahead_drive(ahead: u64) -> (Ssd, u64) {
    let p = Profile::load_with_capacity("sata-mlc-2011", Some(1 << 30)).unwrap();
    let p = if ahead > 0 {
        p.with_param("host.read_ahead_bytes", ahead as f64).unwrap()
    } else {
        p
    };
    filled(&p)
}

/// `n` reads of `bs` at QD 1 from `t`, each at `offset(i)`: the time they took.
fn qd1_reads(ssd: &mut Ssd, t: u64, n: u64, bs: u64, offset: impl Fn(u64) -> u64) -> u64 {
    let mut now = t;
    for i in 0..n {
        let r = Request {
            op: Op::Read,
            offset: offset(i),
            len: bs,
            payload: Payload::Unknown,
        };
        now = ssd.submit(now, &r).unwrap().done_ns;
    }
    now - t
}

#[test]
fn look_ahead_speeds_up_sequential_reads_only() {
    let (mut plain, t0) = look_ahead_drive(0);
    let (mut ahead, t1) = look_ahead_drive(128 << 10);
    let seq = |i: u64| i * 65536;
    let (p, a) = (
        qd1_reads(&mut plain, t0 + 1_000_000_000, 2000, 65536, seq),
        qd1_reads(&mut ahead, t1 + 1_000_000_000, 2000, 65536, seq),
    );
    assert!(
        (a as f64) < 0.9 * p as f64,
        "sequential: {a} with look-ahead, {p} without"
    );
    // Never faster than the link can carry the data.
    let link = ahead.geo.link_ns(65536) * 2000;
    assert!(a >= link, "{a} < {link}");
    // A read elsewhere is not helped.
    let random = |i: u64| (i * 7919 % 16000) * 65536;
    let (p, a) = (
        qd1_reads(&mut plain, t0 + 10_000_000_000, 500, 65536, random),
        qd1_reads(&mut ahead, t1 + 10_000_000_000, 500, 65536, random),
    );
    assert_eq!(p, a);
    // Reads bigger than the look-ahead are not either.
    let big = |i: u64| i * (256 << 10);
    let (p, a) = (
        qd1_reads(&mut plain, t0 + 20_000_000_000, 200, 256 << 10, big),
        qd1_reads(&mut ahead, t1 + 20_000_000_000, 200, 256 << 10, big),
    );
    assert_eq!(p, a);
}
