//! Unit tests of the period mechanisms: TRIM cost and semantics, data
//! reduction, SLC cache, hybrid mapping, wear. No wall-clock time: every
//! figure is model time or a counter.

use super::proptests::{HYBRID_BAST, HYBRID_FAST, REDUCTION, tiny_with};
use super::*;
use crate::log_blocks::MappingScheme;
use vssd_profile::Profile;

fn req(op: Op, offset: u64, len: u64, payload: Payload) -> Request {
    Request {
        op,
        offset,
        len,
        payload,
    }
}

fn w(offset: u64, len: u64) -> Request {
    req(Op::Write, offset, len, Payload::Unknown)
}

/// Submit at `t` and return the completion time.
fn at(ssd: &mut Ssd, t: u64, r: Request) -> u64 {
    ssd.submit(t, &r).unwrap().done_ns
}

/// Write the whole drive sequentially in `bs` requests at QD 1; the end time.
fn fill(ssd: &mut Ssd, mut t: u64, bs: u64, payload: Payload) -> u64 {
    let cap = ssd.capacity();
    let mut o = 0;
    while o < cap {
        let len = bs.min(cap - o);
        t = at(ssd, t, req(Op::Write, o, len, payload));
        o += len;
    }
    t
}

// ------------------------------------------------------------------ TRIM

/// A drive of `interface` with a `[trim]` section.
fn trim_drive(interface: &str, trim: &str) -> Profile {
    let p = tiny_with("4KiB", "4KiB", 1, "64KiB", "greedy", 0.0, trim);
    let text = p.to_toml().replace(
        "interface = \"sata-3g\"",
        &format!("interface = \"{interface}\""),
    );
    Profile::from_toml(&text, "t").unwrap()
}

/// How long a TRIM submitted behind 4 queued reads takes to complete,
/// and when the next read (submitted right after it) completes.
fn trim_behind_reads(p: &Profile) -> (u64, u64) {
    let mut ssd = Ssd::new(p, 1);
    let cap = ssd.capacity();
    let t0 = fill(&mut ssd, 0, 16384, Payload::Unknown);
    let t = t0 + 1_000_000_000;
    for i in 0..3 {
        at(
            &mut ssd,
            t,
            req(Op::Read, i * 65536, 16384, Payload::Unknown),
        );
    }
    let done = at(
        &mut ssd,
        t,
        req(Op::Trim, cap / 2, cap / 4, Payload::Unknown),
    );
    let next = at(&mut ssd, t, req(Op::Read, 0, 4096, Payload::Unknown));
    (done - t, next - t)
}

#[test]
fn trim_cost_orders_non_queued_sata_over_queued_over_nvme() {
    let costs = "command_ns = 20000\nrange_ns = 5000\nfreed_unit_ns = 200\n";
    let sata_nq = trim_drive("sata-3g", &format!("[trim]\nnon_queued = true\n{costs}"));
    let sata_q = trim_drive("sata-6g", &format!("[trim]\n{costs}"));
    let nvme = trim_drive(
        "pcie3-x4",
        "[trim]\ncommand_ns = 2000\nrange_ns = 500\nfreed_unit_ns = 20\n",
    );
    let (nq, nq_next) = trim_behind_reads(&sata_nq);
    let (q, q_next) = trim_behind_reads(&sata_q);
    let (n, n_next) = trim_behind_reads(&nvme);
    assert!(nq > q && q > n, "TRIM latency: {nq} / {q} / {n} ns");
    // The non-queued TRIM also holds up the command after it.
    assert!(
        nq_next > q_next && q_next >= n_next,
        "{nq_next} / {q_next} / {n_next}"
    );
    assert!(
        nq_next >= nq,
        "nothing runs while a non-queued TRIM executes"
    );
}

#[test]
fn trim_cost_is_proportional_to_what_is_freed() {
    let p = trim_drive(
        "sata-6g",
        "[trim]\ncommand_ns = 1000\nfreed_unit_ns = 1000\n",
    );
    let mut ssd = Ssd::new(&p, 1);
    let cap = ssd.capacity();
    at(&mut ssd, 0, w(0, cap / 2));
    let t = 1_000_000_000;
    // The written half costs per freed unit; the unwritten half does not.
    let written = at(&mut ssd, t, req(Op::Trim, 0, cap / 2, Payload::Unknown)) - t;
    let t = 2 * t;
    let empty = at(
        &mut ssd,
        t,
        req(Op::Trim, cap / 2, cap / 2, Payload::Unknown),
    ) - t;
    let units = cap / 2 / 4096;
    assert!(written >= empty + units * 1000, "{written} vs {empty}");
}

#[test]
fn trimmed_data_in_the_write_buffer_is_dropped_not_programmed() {
    // 16 KiB multi-plane pages: a 4 KiB write waits in the buffer.
    let p = tiny_with(
        "8KiB",
        "4KiB",
        2,
        "128KiB",
        "greedy",
        0.0,
        "[trim]\ncommand_ns = 1000\n",
    );
    let mut ssd = Ssd::new(&p, 1);
    let t = at(&mut ssd, 0, w(0, 4096));
    at(&mut ssd, t, req(Op::Trim, 0, 4096, Payload::Unknown));
    at(&mut ssd, t + 1000, req(Op::Flush, 0, 0, Payload::Unknown));
    let c = ssd.counters();
    assert_eq!(c.trim_dropped_units, 1);
    assert_eq!(c.nand_bytes_programmed, 0, "nothing programmed");
    ssd.check_invariants().unwrap();
    // Without a [trim] section the old behaviour: programmed (padded) on FLUSH.
    let p = tiny_with("8KiB", "4KiB", 2, "128KiB", "greedy", 0.0, "");
    let mut ssd = Ssd::new(&p, 1);
    let t = at(&mut ssd, 0, w(0, 4096));
    at(&mut ssd, t, req(Op::Trim, 0, 4096, Payload::Unknown));
    at(&mut ssd, t + 1000, req(Op::Flush, 0, 0, Payload::Unknown));
    assert!(ssd.counters().nand_bytes_programmed > 0);
}

#[test]
fn deferred_release_reads_as_unmapped_but_keeps_the_flash_until_written() {
    let deferred = |rate: f64| {
        tiny_with(
            "4KiB",
            "4KiB",
            1,
            "0",
            "greedy",
            0.0,
            &format!("[trim]\ndeferred_release = true\nrelease_per_unit_written = {rate}\n"),
        )
    };
    let mut ssd = Ssd::new(&deferred(0.0), 1);
    let cap = ssd.capacity();
    let units = cap / 4096;
    let t = fill(&mut ssd, 0, 16384, Payload::Unknown);
    let t = at(&mut ssd, t, req(Op::Trim, 0, cap, Payload::Unknown));
    let c = ssd.counters();
    assert_eq!((c.mapped_units, c.trim_pending_units), (0, units));
    assert_eq!(ssd.unit_census(0, cap), (0, units), "reads as unmapped");
    let free = c.free_blocks;
    // Reading trimmed data touches no NAND; idle time releases nothing.
    let t = at(
        &mut ssd,
        t + 1_000_000_000,
        req(Op::Read, 0, cap, Payload::Unknown),
    );
    let c = ssd.counters();
    assert_eq!(c.nand_pages_read, 0);
    assert_eq!((c.trim_pending_units, c.free_blocks), (units, free));
    // Writing a unit again releases its old flash (and only that, at rate 0).
    at(&mut ssd, t, w(0, 4096));
    let c = ssd.counters();
    assert_eq!((c.mapped_units, c.trim_pending_units), (1, units - 1));
    ssd.check_invariants().unwrap();

    // At one unit per unit written, writing 8 units elsewhere releases 8.
    let mut ssd = Ssd::new(&deferred(1.0), 1);
    let t = fill(&mut ssd, 0, 16384, Payload::Unknown);
    let half = cap / 2;
    let t = at(&mut ssd, t, req(Op::Trim, 0, half, Payload::Unknown));
    at(&mut ssd, t, w(half, 8 * 4096));
    let c = ssd.counters();
    assert_eq!(c.trim_pending_units, half / 4096 - 8);
    assert_eq!(c.mapped_units, units - half / 4096);
    ssd.check_invariants().unwrap();
}

// ------------------------------------------------------------- reduction

fn reduced() -> Profile {
    tiny_with("8KiB", "4KiB", 2, "128KiB", "greedy", 0.0, REDUCTION)
}

#[test]
fn compressible_data_takes_less_flash() {
    for (payload, wa_max) in [
        (Payload::Zeroes, 0.55),
        (Payload::Compressible { percent: 100 }, 0.55),
        (Payload::Compressible { percent: 50 }, 0.55),
        (Payload::Compressible { percent: 25 }, 0.85),
    ] {
        let mut ssd = Ssd::new(&reduced(), 1);
        let t = fill(&mut ssd, 0, 65536, payload);
        at(&mut ssd, t, req(Op::Flush, 0, 0, Payload::Unknown));
        let c = ssd.counters();
        assert!(c.host_reduced_bytes <= c.host_written_bytes);
        assert!(
            c.write_amplification < wa_max,
            "{payload:?}: WA {}",
            c.write_amplification
        );
        ssd.check_invariants().unwrap();
    }
    // Incompressible data: no gain.
    let mut ssd = Ssd::new(&reduced(), 1);
    let t = fill(&mut ssd, 0, 65536, Payload::Unknown);
    at(&mut ssd, t, req(Op::Flush, 0, 0, Payload::Unknown));
    let c = ssd.counters();
    assert_eq!(c.host_reduced_bytes, c.host_written_bytes);
    assert!(c.write_amplification >= 0.99, "{}", c.write_amplification);
}

/// Random overwrites: compressible data leaves more spare room, so GC
/// copies less (lower write amplification) than incompressible data.
#[test]
fn compressible_data_lowers_random_write_amplification() {
    let wa = |payload| {
        let mut ssd = Ssd::new(&reduced(), 1);
        let cap = ssd.capacity();
        let mut t = fill(&mut ssd, 0, 65536, payload);
        let before = ssd.counters();
        let mut rng = precondition_rng(7);
        for _ in 0..cap / 4096 * 4 {
            let o = rng.below(cap / 4096) * 4096;
            t = at(&mut ssd, t, req(Op::Write, o, 4096, payload));
        }
        let c = ssd.counters();
        ssd.check_invariants().unwrap();
        (c.nand_bytes_programmed - before.nand_bytes_programmed) as f64
            / (c.host_written_bytes - before.host_written_bytes) as f64
    };
    let (incompressible, half) = (
        wa(Payload::Unknown),
        wa(Payload::Compressible { percent: 50 }),
    );
    assert!(
        half < incompressible * 0.6,
        "WA 50 % compressible {half:.2} vs incompressible {incompressible:.2}"
    );
}

fn precondition_rng(seed: u64) -> super::precondition::SplitMix64 {
    super::precondition::SplitMix64(seed)
}

// ---------------------------------------------------------------- SLC

fn slc(mode: &str, size: &str) -> Profile {
    // 4 dies x 12 blocks x 4 pages of 4 KiB; SLC mode holds half a block.
    let extra = format!(
        "[slc_cache]\nmode = \"{mode}\"\nsize = \"{size}\"\nt_prog_us = 20.0\nbits_per_cell = 2\n"
    );
    let p = tiny_with("4KiB", "4KiB", 1, "0", "greedy", 1.0, &extra);
    let text = p
        .to_toml()
        .replace("t_prog_us = 100.0\n", "t_prog_us = 400.0\n");
    Profile::from_toml(&text, "t").unwrap()
}

#[test]
fn slc_cache_fills_then_writes_go_native_then_idle_folds_and_recovers() {
    let p = slc("static", "32KiB");
    let mut ssd = Ssd::new(&p, 1);
    let cache = ssd.counters().slc_free_units;
    assert_eq!(cache, 8);
    // Fill the cache: fast SLC programs.
    let mut t = 0;
    let mut lat = Vec::new();
    for i in 0..24u64 {
        let s = t;
        t = at(&mut ssd, t, w(i * 4096, 4096));
        lat.push(t - s);
    }
    let c = ssd.counters();
    assert_eq!(c.slc_units_written, 8, "the cache took 8 units");
    assert_eq!(c.slc_free_units, 0);
    let (fast, slow) = (
        lat[..8].iter().max().unwrap(),
        lat[12..].iter().min().unwrap(),
    );
    assert!(fast < slow, "SLC writes {fast} ns vs native {slow} ns");
    // Idle time folds the SLC blocks into native ones and frees the cache.
    t += 1_000_000_000;
    at(&mut ssd, t, req(Op::Read, 0, 4096, Payload::Unknown));
    let c = ssd.counters();
    assert_eq!(c.slc_units_folded, 8);
    assert_eq!(c.slc_free_units, cache, "cache recovered");
    ssd.check_invariants().unwrap();
    // And the next writes are fast again.
    t += 1_000_000;
    let s = t;
    let d = at(&mut ssd, t, w(0, 4096));
    assert!(d - s <= *fast, "{} vs {fast}", d - s);
}

#[test]
fn dynamic_slc_cache_shrinks_as_the_drive_fills() {
    let p = slc("dynamic", "128KiB");
    let mut ssd = Ssd::new(&p, 1);
    let empty = ssd.counters().slc_free_units;
    let t = fill(&mut ssd, 0, 16384, Payload::Unknown);
    let mut t = t + 1_000_000_000;
    t = at(&mut ssd, t, req(Op::Read, 0, 4096, Payload::Unknown));
    let full = ssd.counters().slc_free_units;
    assert!(full < empty, "cache {empty} units empty, {full} full");
    ssd.check_invariants().unwrap();
    let _ = t;
}

// -------------------------------------------------------------- hybrid

fn hybrid(extra: &str) -> Profile {
    tiny_with("4KiB", "4KiB", 1, "64KiB", "greedy", 0.0, extra)
}

#[test]
fn sequential_writes_switch_merge_without_copies() {
    let mut ssd = Ssd::new(&hybrid(HYBRID_BAST), 1);
    let t = fill(&mut ssd, 0, 65536, Payload::Unknown);
    let t = fill(&mut ssd, t, 65536, Payload::Unknown);
    at(&mut ssd, t, req(Op::Flush, 0, 0, Payload::Unknown));
    let c = ssd.counters();
    assert!(c.merges_switch > 0);
    assert_eq!(
        (c.merges_partial, c.merges_full, c.merge_copies),
        (0, 0, 0),
        "{c:?}"
    );
    assert!(
        (c.write_amplification - 1.0).abs() < 0.01,
        "{}",
        c.write_amplification
    );
    ssd.check_invariants().unwrap();
}

#[test]
fn random_writes_cost_full_merges_and_lose_no_unit() {
    for extra in [HYBRID_BAST, HYBRID_FAST] {
        let mut ssd = Ssd::new(&hybrid(extra), 1);
        let cap = ssd.capacity();
        let mut t = fill(&mut ssd, 0, 65536, Payload::Unknown);
        let mapped = ssd.counters().mapped_units;
        let mut rng = precondition_rng(3);
        for _ in 0..cap / 4096 * 2 {
            let o = rng.below(cap / 4096) * 4096;
            t = at(&mut ssd, t, w(o, 4096));
        }
        let c = ssd.counters();
        assert!(c.merges_full > 0, "{extra}: {c:?}");
        assert_eq!(c.mapped_units, mapped, "merges lose or add no unit");
        // Every copy is programmed: NAND bytes cover host and merge units.
        assert!(c.nand_bytes_programmed >= (c.merge_copies + cap / 4096 * 2) * 4096);
        assert!(
            c.write_amplification > 2.0,
            "{extra}: WA {}",
            c.write_amplification
        );
        ssd.check_invariants().unwrap();
    }
}

/// The used state of a hybrid drive: a sequential pass over randomly
/// written space pays merges at first, then speeds up; a whole-drive TRIM
/// restores fresh speed.
#[test]
fn hybrid_used_state_recovers_with_sequential_writes_and_trim() {
    let mut ssd = Ssd::new(&hybrid(HYBRID_FAST), 1);
    let cap = ssd.capacity();
    let t0 = 0;
    let t = fill(&mut ssd, t0, 65536, Payload::Unknown);
    let fresh = t - t0;
    let mut rng = precondition_rng(5);
    let mut t = t;
    for _ in 0..cap / 4096 {
        let o = rng.below(cap / 4096) * 4096;
        t = at(&mut ssd, t, w(o, 4096));
    }
    let t1 = t;
    let t = fill(&mut ssd, t1, 65536, Payload::Unknown);
    let used = t - t1;
    let t2 = fill(&mut ssd, t, 65536, Payload::Unknown);
    let again = t2 - t;
    assert!(used > fresh * 3 / 2, "used {used} vs fresh {fresh}");
    assert!(again < used, "second pass {again} vs first {used}");
    // TRIM everything: back to fresh.
    let mut t = at(&mut ssd, t2, req(Op::Trim, 0, cap, Payload::Unknown));
    for _ in 0..cap / 4096 {
        let o = rng.below(cap / 4096) * 4096;
        t = at(&mut ssd, t, w(o, 4096));
    }
    let t = at(&mut ssd, t, req(Op::Trim, 0, cap, Payload::Unknown)) + 1_000_000_000;
    let t3 = fill(&mut ssd, t, 65536, Payload::Unknown);
    assert!(
        t3 - t <= fresh * 11 / 10,
        "after TRIM {} vs fresh {fresh}",
        t3 - t
    );
    ssd.check_invariants().unwrap();
}

#[test]
fn few_log_blocks_make_small_random_writes_stall_for_whole_blocks() {
    // JMicron-like: one log block, no buffer; every 4 KiB write to another
    // logical block merges a whole superblock.
    let p = tiny_with(
        "4KiB",
        "4KiB",
        1,
        "0",
        "greedy",
        0.0,
        super::proptests::HYBRID_JMICRON,
    );
    let mut ssd = Ssd::new(&p, 1);
    let t = fill(&mut ssd, 0, 65536, Payload::Unknown);
    let sb = ssd.capacity() / 6;
    let mut t = t;
    let mut worst = 0;
    for i in 0..6 {
        let s = t;
        t = at(&mut ssd, t, w(i * sb + 4096, 4096));
        worst = worst.max(t - s);
    }
    // A merge reads and programs a whole block on each die (4 pages x
    // (20 + 100 µs) plus an erase of 500 µs): far above one program.
    assert!(worst > 800_000, "worst 4 KiB write {worst} ns");
    assert!(ssd.counters().merges_full >= 5);
}

// ------------------------------------------------------------------ wear

#[test]
fn wear_grows_program_time_and_reports_percentage_used() {
    let extra = "[wear]\nrated_pe_cycles = 4\nprog_growth = 1.0\n";
    let p = tiny_with("4KiB", "4KiB", 1, "0", "greedy", 0.0, extra);
    let mut ssd = Ssd::new(&p, 1);
    let first = at(&mut ssd, 0, w(0, 4096));
    assert_eq!(ssd.counters().wear_percent_used, Some(0.0));
    let mut t = first;
    for _ in 0..40 {
        t = fill(&mut ssd, t, 65536, Payload::Unknown);
    }
    let c = ssd.counters();
    let used = c.wear_percent_used.unwrap();
    assert!(used > 50.0, "{used}");
    let s = t + 1_000_000_000;
    let later = at(&mut ssd, s, w(0, 4096)) - s;
    assert!(
        later > first,
        "program time {later} ns worn vs {first} ns fresh"
    );
    // Without [wear], no indicator (and nothing new in JSON).
    let plain = tiny_with("4KiB", "4KiB", 1, "0", "greedy", 0.0, "");
    assert_eq!(Ssd::new(&plain, 1).counters().wear_percent_used, None);
}

// ---------------------------------------------------------- persistence

#[test]
fn every_mechanism_survives_save_and_load() {
    for extra in [
        HYBRID_BAST,
        HYBRID_FAST,
        REDUCTION,
        super::proptests::SLC_STATIC,
        super::proptests::TRIM_WEAR,
    ] {
        let p = tiny_with("4KiB", "4KiB", 1, "32KiB", "greedy", 1.0, extra);
        let mut ssd = Ssd::new(&p, 1);
        let cap = ssd.capacity();
        let mut t = fill(&mut ssd, 0, 16384, Payload::Compressible { percent: 60 });
        let mut rng = precondition_rng(11);
        for _ in 0..cap / 4096 {
            let o = rng.below(cap / 4096) * 4096;
            t = at(
                &mut ssd,
                t,
                req(Op::Write, o, 4096, Payload::Compressible { percent: 30 }),
            );
        }
        at(&mut ssd, t, req(Op::Trim, 0, cap / 3, Payload::Unknown));
        let mut buf = Vec::new();
        ssd.save(&mut buf).unwrap();
        let back = Ssd::load(&p, &buf[..]).unwrap_or_else(|e| panic!("{extra}: {e}"));
        back.check_invariants().unwrap();
        assert_eq!(back.counters(), ssd.counters(), "{extra}");
        assert!(
            back.mapping.same_as(&ssd.mapping)
                && back.reduction.same_sizes(&ssd.reduction)
                && back.slc.flags() == ssd.slc.flags()
        );
        if let (MappingScheme::Hybrid(a), MappingScheme::Hybrid(b)) = (&back.scheme, &ssd.scheme) {
            assert!(a.same_as(b));
        }
        // A state saved with one mechanism is refused by a profile without it.
        let plain = tiny_with("4KiB", "4KiB", 1, "32KiB", "greedy", 1.0, "");
        if extra != super::proptests::TRIM_WEAR {
            assert!(matches!(
                Ssd::load(&plain, &buf[..]),
                Err(PersistError::ProfileMismatch(_))
            ));
        }
    }
}

// ------------------------------------------------------- mapping cache

/// `sata-mlc-2011` at 1 GiB with `cache` of translation pages (0: the
/// whole map in DRAM).
fn cached_drive(cache: &str) -> Profile {
    let p = Profile::load_with_capacity("sata-mlc-2011", Some(1 << 30)).unwrap();
    if cache == "0" {
        return p;
    }
    let text = p.to_toml().replace(
        "[buffer]",
        &format!("[mapping]\ncache_bytes = \"{cache}\"\n\n[buffer]"),
    );
    Profile::from_toml(&text, "cached").unwrap()
}

/// `n` random 4 KiB writes at QD 8 over the first `span` bytes from `t`
/// (a fixed sequence): the end time.
fn random_writes(ssd: &mut Ssd, mut t: u64, span: u64, n: u64) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut inflight = std::collections::VecDeque::new();
    for _ in 0..n {
        if inflight.len() == 8 {
            t = t.max(inflight.pop_front().unwrap());
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = (x % (span / 4096)) * 4096;
        inflight.push_back(at(ssd, t, w(off, 4096)));
    }
    inflight.into_iter().fold(t, u64::max)
}

#[test]
fn a_partly_cached_map_costs_nothing_within_its_span_and_reads_beyond_it() {
    // 256 KiB of translation pages: 32 pages (8 KiB) of 2,048 entries,
    // 256 MiB of the drive.
    let (cached, whole) = (cached_drive("256KiB"), cached_drive("0"));
    let run = |p: &Profile, span: u64| {
        let mut ssd = Ssd::new(p, 1);
        let t = fill(&mut ssd, 0, 1 << 20, Payload::Unknown);
        let c0 = ssd.counters();
        let end = random_writes(&mut ssd, t + 1_000_000_000, span, 20_000);
        let c = ssd.counters();
        ssd.check_invariants().unwrap();
        (
            end - t - 1_000_000_000,
            c.map_reads - c0.map_reads,
            c.map_writes - c0.map_writes,
        )
    };
    // Within the span the cache covers: the same time, no map traffic
    // beyond the first touch of each page.
    let (tc, reads, _) = run(&cached, 128 << 20);
    let (tw, none, _) = run(&whole, 128 << 20);
    assert_eq!(none, 0);
    assert!(
        reads <= 16,
        "{reads} translation pages read for a 128 MiB span"
    );
    assert!((tc as f64 / tw as f64 - 1.0).abs() < 0.05, "{tc} vs {tw}");
    // Over the whole drive most writes miss: the pages are read and the
    // changed ones written back, and the writes slow down.
    let (tc, reads, writes) = run(&cached, 1 << 30);
    let (tw, _, _) = run(&whole, 1 << 30);
    assert!(reads > 10_000 && writes > 10_000, "{reads} {writes}");
    assert!(tc as f64 > 1.2 * tw as f64, "{tc} vs {tw}");
}

#[test]
fn translation_pages_that_do_not_exist_yet_or_were_trimmed_are_not_read() {
    let p = cached_drive("64KiB");
    let mut ssd = Ssd::new(&p, 1);
    // A fresh drive written once in order: pages come into being, none
    // is read; the changed ones are written back as they leave.
    let t = fill(&mut ssd, 0, 1 << 20, Payload::Unknown);
    let c = ssd.counters();
    // 8 KiB pages of 2,048 entries: 128 pages for 1 GiB, 8 of them cached.
    assert_eq!(c.map_reads, 0);
    assert_eq!(c.map_writes, 120);
    // Reading it back: every page not cached is read from NAND.
    let mut r = t;
    for o in (0..ssd.capacity()).step_by(1 << 20) {
        r = at(&mut ssd, r, req(Op::Read, o, 1 << 20, Payload::Unknown));
    }
    assert!(
        ssd.counters().map_reads >= 120,
        "{}",
        ssd.counters().map_reads
    );
    // After a whole-drive TRIM no page maps anything: nothing is read.
    let cap = ssd.capacity();
    let t = at(&mut ssd, r, req(Op::Trim, 0, cap, Payload::Unknown));
    let before = ssd.counters().map_reads;
    let mut r = t + 1_000_000_000;
    for o in (0..cap).step_by(1 << 20) {
        r = at(&mut ssd, r, req(Op::Read, o, 1 << 20, Payload::Unknown));
    }
    assert_eq!(ssd.counters().map_reads, before);
    ssd.check_invariants().unwrap();
}

#[test]
fn a_restarted_drive_has_an_empty_map_cache_and_its_pages_in_nand() {
    let p = cached_drive("64KiB");
    let mut ssd = Ssd::new(&p, 1);
    let t = fill(&mut ssd, 0, 1 << 20, Payload::Unknown);
    let mut buf = Vec::new();
    ssd.save(&mut buf).unwrap();
    let mut again = Ssd::load(&p, &buf[..]).unwrap();
    again.check_invariants().unwrap();
    // The first read of written data brings its translation page in.
    let before = again.counters().map_reads;
    at(&mut again, t, req(Op::Read, 0, 4096, Payload::Unknown));
    assert_eq!(again.counters().map_reads, before + 1);
    // Unwritten space has no page to read.
    let mut empty = Ssd::load(
        &p,
        &{
            let mut b = Vec::new();
            Ssd::new(&p, 1).save(&mut b).unwrap();
            b
        }[..],
    )
    .unwrap();
    at(&mut empty, 0, req(Op::Read, 0, 4096, Payload::Unknown));
    assert_eq!(empty.counters().map_reads, 0);
}

// ----------------------------------------------- whole-block merges

#[test]
fn whole_block_merges_make_a_new_drive_as_slow_as_a_used_one() {
    // ocz-core-v2 (four logs, BAST, no buffer) at 2 GiB, with and without
    // whole-block merges: 4 KiB random writes at QD 1 on a new drive, and
    // after a fill.
    let base = Profile::load_with_capacity("ocz-core-v2", Some(2 << 30)).unwrap();
    let plain = Profile::from_toml(
        &base.to_toml().replace("whole_block_merges = true\n", ""),
        "plain",
    )
    .unwrap();
    assert!(base.mapping.whole_block_merges && !plain.mapping.whole_block_merges);
    let mean_latency = |p: &Profile, filled: bool| {
        let mut ssd = Ssd::new(p, 1);
        let mut t = if filled {
            fill(&mut ssd, 0, 1 << 20, Payload::Unknown)
        } else {
            0
        };
        let cap = ssd.capacity();
        let mut x = 12345u64;
        let mut total = 0;
        for _ in 0..40 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let off = (x >> 20) % (cap / 4096) * 4096;
            let done = at(&mut ssd, t, w(off, 4096));
            total += done - t;
            t = done;
        }
        ssd.check_invariants().unwrap();
        total / 40
    };
    let (new_whole, used_whole) = (mean_latency(&base, false), mean_latency(&base, true));
    let (new_plain, used_plain) = (mean_latency(&plain, false), mean_latency(&plain, true));
    // Without: a new drive's merges copy almost nothing.
    assert!(new_plain * 5 < used_plain, "{new_plain} vs {used_plain}");
    // With: new and used cost the same whole-superblock merge.
    let r = new_whole as f64 / used_whole as f64;
    assert!((0.8..1.25).contains(&r), "{new_whole} vs {used_whole}");
    assert!(new_whole > 50_000_000, "{new_whole} ns");
}
