//! Property tests: random operation sequences on tiny drives keep every FTL
//! invariant, lose or duplicate no logical unit, and keep counters consistent.

use proptest::prelude::*;

use super::*;
use vssd_profile::Profile;

/// A tiny drive so GC, wrap-around and reserve paths are hit in few ops.
pub(super) fn tiny(
    page: &str,
    unit: &str,
    planes: u32,
    buffer: &str,
    policy: &str,
    bg_idle_ms: f64,
) -> Profile {
    tiny_with(page, unit, planes, buffer, policy, bg_idle_ms, "")
}

/// [`tiny`] with extra TOML sections (the period mechanisms).
pub(super) fn tiny_with(
    page: &str,
    unit: &str,
    planes: u32,
    buffer: &str,
    policy: &str,
    bg_idle_ms: f64,
    extra: &str,
) -> Profile {
    let text = format!(
        r#"
name = "tiny"
[host]
interface = "sata-3g"
queue_depth = 4
command_overhead_ns = 1000
trim_ns_per_unit = 1
[geometry]
channels = 2
dies_per_channel = 2
planes_per_die = {planes}
blocks_per_plane = 12
pages_per_block = 4
page_size = "{page}"
mapping_unit = "{unit}"
exported_capacity = "{cap}"
[nand]
t_read_us = 20.0
t_prog_us = 100.0
t_erase_us = 500.0
channel_mb_s = 100.0
[buffer]
size = "{buffer}"
[gc]
policy = "{policy}"
fg_threshold_blocks = 2
bg_idle_ms = {bg_idle_ms}
bg_target_blocks = 3
{extra}
"#,
        // 4 dies x 12 blocks; export 6 blocks' worth per die (50 % OP is
        // not the point: the reserve check needs fg_threshold + 2 per die).
        cap = {
            let page_bytes = vssd_profile::size::parse_size(page).unwrap();
            4 * 6 * 4 * planes as u64 * page_bytes
        }
    );
    Profile::from_toml(&text, "tiny").unwrap()
}

#[derive(Debug, Clone)]
enum Step {
    /// Offset, length, compressibility (percent; above 100: unknown).
    Write(u64, u64, u8),
    Trim(u64, u64),
    Read(u64, u64),
    Flush,
    Idle(u64),
}

fn steps(cap_sectors: u64) -> impl Strategy<Value = Vec<Step>> {
    let range = (0..cap_sectors).prop_flat_map(move |s| (Just(s), 1..=(cap_sectors - s).min(64)));
    let step = prop_oneof![
        6 => (range.clone(), 0u8..=110).prop_map(|((s, n), c)| Step::Write(s * 512, n * 512, c)),
        2 => range.clone().prop_map(|(s, n)| Step::Trim(s * 512, n * 512)),
        2 => range.prop_map(|(s, n)| Step::Read(s * 512, n * 512)),
        1 => Just(Step::Flush),
        1 => (1u64..50_000_000).prop_map(Step::Idle),
    ];
    proptest::collection::vec(step, 1..400)
}

/// Run `ops` against a drive and a shadow map of which units hold data.
fn run(p: &Profile, ops: &[Step]) -> Result<(), TestCaseError> {
    let mut ssd = Ssd::new(p, 3);
    let unit = p.geometry.mapping_unit.0;
    let mut shadow = vec![false; (ssd.capacity() / unit) as usize];
    let (mut now, mut written, mut trimmed, mut read) = (0u64, 0u64, 0u64, 0u64);
    for op in ops {
        let (req, _l) = match *op {
            Step::Write(o, l, c) => (
                Request {
                    op: Op::Write,
                    offset: o,
                    len: l,
                    payload: match c {
                        0..=100 => Payload::Compressible { percent: c },
                        101..=105 => Payload::Zeroes,
                        _ => Payload::Unknown,
                    },
                },
                l,
            ),
            Step::Trim(o, l) => (
                Request {
                    op: Op::Trim,
                    offset: o,
                    len: l,
                    payload: Payload::Unknown,
                },
                l,
            ),
            Step::Read(o, l) => (
                Request {
                    op: Op::Read,
                    offset: o,
                    len: l,
                    payload: Payload::Unknown,
                },
                l,
            ),
            Step::Flush => (
                Request {
                    op: Op::Flush,
                    offset: 0,
                    len: 0,
                    payload: Payload::Unknown,
                },
                0,
            ),
            Step::Idle(ns) => {
                now += ns;
                continue;
            }
        };
        let c = ssd
            .submit(now, &req)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(c.done_ns >= c.submit_ns);
        now += 1000;
        match *op {
            Step::Write(o, l, _) => {
                written += l;
                for u in o / unit..(o + l).div_ceil(unit) {
                    shadow[u as usize] = true;
                }
            }
            Step::Trim(o, l) => {
                trimmed += l;
                for u in o.div_ceil(unit)..(o + l) / unit {
                    shadow[u as usize] = false;
                }
            }
            Step::Read(_, l) => read += l,
            _ => {}
        }
    }
    ssd.check_invariants().map_err(TestCaseError::fail)?;
    let retired: Vec<usize> = (0..ssd.blocks.count())
        .filter(|&b| ssd.geo.is_retired(b as u32))
        .collect();
    prop_assert_eq!(retired.len(), p.geometry.retired_blocks as usize);
    for b in retired {
        prop_assert_eq!(
            ssd.blocks.erase_count(b as u32),
            0,
            "retired block {} erased",
            b
        );
    }
    for (lpn, &has) in shadow.iter().enumerate() {
        prop_assert_eq!(
            ssd.mapping.is_mapped(lpn as u64) && !ssd.release.is_pending(lpn as u64),
            has,
            "unit {} lost or resurrected",
            lpn
        );
    }
    let c = ssd.counters();
    prop_assert_eq!(c.host_written_bytes, written);
    prop_assert_eq!(c.host_trimmed_bytes, trimmed);
    prop_assert_eq!(c.host_read_bytes, read);
    prop_assert_eq!(c.mapped_units, shadow.iter().filter(|&&x| x).count() as u64);
    prop_assert_eq!(
        c.free_blocks + (c.total_blocks - c.free_blocks),
        c.total_blocks
    );
    let in_progress = ssd.victims.in_progress() as u64;
    if !ssd.scheme.is_hybrid() {
        prop_assert_eq!(c.gc_victims, c.erases + in_progress);
    }
    prop_assert!(c.host_reduced_bytes <= c.host_written_bytes);
    prop_assert!(c.nand_bytes_programmed >= c.gc_copies * unit);
    // Whatever the state, a save loads back to the same FTL.
    let mut buf = Vec::new();
    ssd.save(&mut buf).unwrap();
    let back = Ssd::load(p, &buf[..]).map_err(|e| TestCaseError::fail(e.to_string()))?;
    back.check_invariants().map_err(TestCaseError::fail)?;
    prop_assert_eq!(back.counters(), c);
    prop_assert!(back.mapping.same_as(&ssd.mapping));
    prop_assert!(back.blocks.tables() == ssd.blocks.tables());
    prop_assert!(back.blocks.erase_counts() == ssd.blocks.erase_counts());
    prop_assert!(back.release.same_as(&ssd.release));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn greedy_buffered_4k(ops in steps(4 * 6 * 4 * 8)) {
        run(&tiny("4KiB", "4KiB", 1, "64KiB", "greedy", 10.0), &ops)?;
    }

    #[test]
    fn cost_benefit_unbuffered_subpage_units(ops in steps(4 * 6 * 4 * 2 * 16)) {
        run(&tiny("8KiB", "4KiB", 2, "0", "cost-benefit", 0.0), &ops)?;
    }

    #[test]
    fn hybrid_bast_buffered(ops in steps(4 * 6 * 4 * 2 * 2)) {
        run(&tiny_with("4KiB", "4KiB", 2, "64KiB", "greedy", 1.0, HYBRID_BAST), &ops)?;
    }

    #[test]
    fn hybrid_write_combining_unbuffered_subpage(ops in steps(4 * 6 * 4 * 16)) {
        run(&tiny_with("8KiB", "4KiB", 1, "0", "greedy", 0.0, HYBRID_FAST), &ops)?;
    }

    #[test]
    fn hybrid_few_log_blocks(ops in steps(4 * 6 * 4 * 8)) {
        run(&tiny_with("4KiB", "4KiB", 1, "0", "greedy", 0.0, HYBRID_JMICRON), &ops)?;
    }

    #[test]
    fn reduction_greedy(ops in steps(4 * 6 * 4 * 2 * 16)) {
        run(&tiny_with("8KiB", "4KiB", 2, "128KiB", "greedy", 2.0, REDUCTION), &ops)?;
    }

    #[test]
    fn reduction_cost_benefit(ops in steps(4 * 6 * 4 * 8)) {
        run(&tiny_with("4KiB", "4KiB", 1, "0", "cost-benefit", 0.0, REDUCTION), &ops)?;
    }

    #[test]
    fn slc_cache_static_and_dynamic(ops in steps(4 * 6 * 4 * 8), dynamic in any::<bool>()) {
        let extra = if dynamic { SLC_DYNAMIC } else { SLC_STATIC };
        run(&tiny_with("4KiB", "4KiB", 1, "32KiB", "greedy", 1.0, extra), &ops)?;
    }

    #[test]
    fn trim_model_and_wear(ops in steps(4 * 6 * 4 * 8)) {
        run(&tiny_with("4KiB", "4KiB", 1, "32KiB", "greedy", 1.0, TRIM_WEAR), &ops)?;
    }

    #[test]
    fn deferred_trim_release(ops in steps(4 * 6 * 4 * 2 * 16), rate in 0u32..4, reduce in any::<bool>()) {
        let extra = format!(
            "{}[trim]\ndeferred_release = true\nrelease_per_unit_written = {}\n",
            if reduce { REDUCTION } else { "" },
            rate as f64 * 0.75
        );
        run(&tiny_with("8KiB", "4KiB", 2, "128KiB", "greedy", 1.0, &extra), &ops)?;
    }

    #[test]
    fn retired_blocks_stay_out_of_service(
        ops in steps(4 * 6 * 4 * 8),
        retired in 1u32..=8,
        dynamic_slc in any::<bool>(),
    ) {
        let extra = if dynamic_slc { SLC_DYNAMIC } else { "" };
        let p = tiny_with("4KiB", "4KiB", 1, "32KiB", "greedy", 1.0, extra);
        run(&with_retired(&p, retired), &ops)?;
    }

    #[test]
    fn greedy_512_byte_units_two_planes(ops in steps(4 * 6 * 4 * 2 * 4)) {
        run(&tiny("2KiB", "512", 2, "32KiB", "greedy", 1.0), &ops)?;
    }

    #[test]
    fn independent_plane_reads_four_planes(ops in steps(4 * 6 * 4 * 4 * 2)) {
        let p = tiny("8KiB", "4KiB", 4, "256KiB", "greedy", 1.0);
        let text = p.to_toml().replace(
            "channel_mb_s = 100.0",
            "channel_mb_s = 100.0\nindependent_plane_reads = true",
        );
        run(&Profile::from_toml(&text, "t").unwrap(), &ops)?;
    }
}

/// `p` with `n` blocks retired from service.
pub(super) fn with_retired(p: &Profile, n: u32) -> Profile {
    let text = p
        .to_toml()
        .replace("[nand]", &format!("retired_blocks = {n}\n\n[nand]"));
    Profile::from_toml(&text, "retired").unwrap()
}

pub(super) const HYBRID_BAST: &str = "[mapping]\npolicy = \"hybrid\"\nlog_associativity = 1\n";
pub(super) const HYBRID_FAST: &str = "[mapping]\npolicy = \"hybrid\"\nlog_associativity = 8\n";
pub(super) const HYBRID_JMICRON: &str =
    "[mapping]\npolicy = \"hybrid\"\nlog_associativity = 1\nmax_log_blocks = 1\n";
pub(super) const REDUCTION: &str =
    "[reduction]\nenabled = true\nmax_ratio = 2\nmin_fraction = 0.02\n";
pub(super) const SLC_STATIC: &str =
    "[slc_cache]\nmode = \"static\"\nsize = \"16KiB\"\nt_prog_us = 20.0\nbits_per_cell = 2\n";
pub(super) const SLC_DYNAMIC: &str =
    "[slc_cache]\nmode = \"dynamic\"\nsize = \"64KiB\"\nt_prog_us = 20.0\nbits_per_cell = 2\n";
pub(super) const TRIM_WEAR: &str = "[trim]\nnon_queued = true\ncommand_ns = 5000\nrange_ns = 1000\nfreed_unit_ns = 10\n[wear]\nrated_pe_cycles = 10\nprog_growth = 0.5\nerase_growth = 0.5\n";

#[test]
fn persistence_roundtrip_after_random_ops() {
    let p = tiny("8KiB", "4KiB", 2, "128KiB", "greedy", 5.0);
    let mut ssd = Ssd::new(&p, 1);
    let end = ssd.precondition(
        0,
        &Precondition::Random {
            bs: 4096,
            amount: ssd.capacity() * 3,
        },
        9,
    );
    ssd.precondition(
        end,
        &Precondition::Random {
            bs: 16384,
            amount: ssd.capacity(),
        },
        10,
    );
    let mut buf = Vec::new();
    ssd.save(&mut buf).unwrap();
    let back = Ssd::load(&p, &buf[..]).unwrap();
    assert_eq!(back.counters(), ssd.counters());
    assert!(back.mapping.same_as(&ssd.mapping));
    back.check_invariants().unwrap();
}

#[test]
fn bad_requests_leave_state_untouched() {
    let p = tiny("4KiB", "4KiB", 1, "64KiB", "greedy", 10.0);
    let mut ssd = Ssd::new(&p, 1);
    let cap = ssd.capacity();
    let before = ssd.counters();
    for (offset, len) in [
        (cap, 512),
        (cap - 512, 1024),
        (u64::MAX - 511, 1024),
        (100, 512),
        (0, 100),
    ] {
        let r = ssd.submit(
            0,
            &Request {
                op: Op::Write,
                offset,
                len,
                payload: Payload::Unknown,
            },
        );
        assert!(r.is_err(), "{offset}+{len} accepted");
    }
    assert_eq!(ssd.counters(), before);
}

/// `catch_up` during idle time changes no timing: a drive asked for its
/// state now and then between bursts (as the daemon's sampler and `ctl
/// stats` do) completes every request when one left alone does. Some gaps
/// are longer than the presets' `bg_idle_ms`, so that background GC (and
/// SLC folding) runs in them on every die at once and a catch-up lands in
/// the middle of it: the work on dies sharing a channel must come out the
/// same whether it is done in one call or in several.
#[test]
fn catching_up_in_idle_gaps_changes_no_completion_time() {
    for (name, cap) in [
        ("sata-slc-2009", 64u64 << 20),
        ("sata-mlc-2011", 64 << 20),
        ("nvme-tlc", 128 << 20),
        ("nvme-tlc-slc-cache", 128 << 20),
        ("intel-x25m-g2", 64 << 20),
    ] {
        let p = Profile::load_with_capacity(name, Some(cap)).unwrap();
        let run = |poke: bool| -> Vec<u64> {
            let mut ssd = Ssd::new(&p, 7);
            let mut rng = vssd_common_free_rng(11);
            let mut t = 0u64;
            let mut done = Vec::new();
            let cap = ssd.capacity() / 4096;
            // Full first, so that the random writes need garbage collection.
            for i in 0..ssd.capacity() / 131072 {
                let c = ssd
                    .submit(
                        t,
                        &Request {
                            op: Op::Write,
                            offset: i * 131072,
                            len: 131072,
                            payload: Payload::Unknown,
                        },
                    )
                    .unwrap();
                t = t.max(c.done_ns);
            }
            for burst in 0..(cap * 2 / 64) {
                for _ in 0..64 {
                    let off = (rng() % cap) * 4096;
                    let c = ssd
                        .submit(
                            t,
                            &Request {
                                op: Op::Write,
                                offset: off,
                                len: 4096,
                                payload: Payload::Unknown,
                            },
                        )
                        .unwrap();
                    done.push(c.done_ns);
                    t += 20_000;
                }
                // Mostly short gaps; every fifth one long enough for
                // background work (300-500 ms).
                let gap = if burst % 5 == 4 {
                    300_000_000 + (burst % 3) * 100_000_000
                } else {
                    1_000_000 + (burst % 7) * 3_000_000
                };
                if poke {
                    ssd.catch_up(t + gap / 3);
                    ssd.catch_up(t + gap / 2);
                    ssd.catch_up(t + gap / 2 + 1_234_567);
                    ssd.catch_up(t + gap - 7_654_321);
                }
                t += gap;
                // A read after the gap: it waits for whatever background
                // work is still on its die.
                let c = ssd
                    .submit(
                        t,
                        &Request {
                            op: Op::Read,
                            offset: (rng() % cap) * 4096,
                            len: 4096,
                            payload: Payload::Unknown,
                        },
                    )
                    .unwrap();
                done.push(c.done_ns);
            }
            done
        };
        let plain = run(false);
        let poked = run(true);
        let first = plain.iter().zip(&poked).position(|(a, b)| a != b);
        assert_eq!(first, None, "{name}: request {first:?} differs");
    }
}

/// A small deterministic generator (xorshift).
fn vssd_common_free_rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// A mapping cache of two translation pages of eight units each (entries
/// of 512 bytes in 4 KiB pages: a tiny drive has a dozen translation
/// pages).
pub(super) const MAP_CACHE: &str = "[mapping]\ncache_bytes = \"8KiB\"\nentry_bytes = 512\n";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random writes, TRIMs and reads with only part of the map cached:
    /// every invariant holds (the cache's own included), reads see what
    /// was written.
    #[test]
    fn mapping_cache(ops in steps(4 * 6 * 4 * 8), buffered in any::<bool>()) {
        let buffer = if buffered { "32KiB" } else { "0" };
        run(&tiny_with("4KiB", "4KiB", 1, buffer, "greedy", 1.0, MAP_CACHE), &ops)?;
    }
}
