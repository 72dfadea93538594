#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! `vssd bench`: scenario errors are refused before anything boots, the
//! simulator runs the built-in protocols, a failing `expect` fails the
//! command, a scaled-down trim-recovery runs end to end in a guest with
//! its simulator run beside it, and on the SATA bus — where a TCG guest
//! cannot keep the drive busy — with time dilated until it can; and the
//! power-loss scenario takes ext4 through two power cuts in a guest and
//! reports what the drive lost and what fsck and the files say, and
//! `fault` phases reach the daemon at their boundaries.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::serve::VSSD;
use common::{guest_lock, init_logging, require_program, scratch_dir};
use vssd::bench::results::BenchResults;

fn bench(args: &[&str]) -> Output {
    Command::new(VSSD)
        .arg("bench")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running vssd bench")
}

fn results(dir: &Path) -> BenchResults {
    let t = std::fs::read_to_string(dir.join("results.json")).expect("results.json");
    serde_json::from_str(&t).expect("results.json parses")
}

#[test]
fn scenario_errors_are_refused_before_anything_boots() {
    let dir = scratch_dir();
    let cases = [
        ("[[phase]]\nkind = \"teleport\"\n", "teleport"),
        (
            "[[phase]]\nkind = \"fio\"\njob = \"nowhere.fio\"\n",
            "not found",
        ),
        (
            "[[phase]]\nkind = \"surface\"\nop = \"write\"\nburst = \"many\"\n",
            "burst",
        ),
        (
            "[[phase]]\nname = \"a\"\nkind = \"surface\"\nop = \"write\"\n[[phase]]\nkind = \"expect\"\nchecks = [\"a.mean_bw >\"]\n",
            "right side",
        ),
    ];
    for (i, (phases, want)) in cases.iter().enumerate() {
        let f = dir.path().join(format!("s{i}.toml"));
        std::fs::write(
            &f,
            format!("name = \"s\"\n[drive]\nprofile = \"instant\"\ncapacity = \"256M\"\n{phases}"),
        )
        .unwrap();
        let out_dir = dir.path().join(format!("out{i}"));
        let o = bench(&[
            "run",
            f.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{phases}");
        assert!(err.contains(&format!("s{i}.toml:")), "file:line in {err}");
        assert!(err.contains(want), "{want} in {err}");
        assert!(!out_dir.exists(), "nothing ran");
    }
}

#[test]
fn built_in_protocols_in_the_simulator() {
    // Not beside the guest test: on two cores it would take the CPU the
    // guest needs and stretch the guest's idle gaps.
    let _g = guest_lock();
    let out = bench(&["list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for s in [
        "used-state",
        "trim-recovery",
        "partition-retention",
        "power-loss",
    ] {
        assert!(text.contains(s), "{text}");
        let shown = bench(&["show", s]);
        let shown = String::from_utf8_lossy(&shown.stdout);
        assert!(shown.contains("[[phase]]"));
        // What running it takes: boots and the drive's own time.
        assert!(
            shown.contains("# Estimate (vssd bench show): ") && shown.contains("guest boot"),
            "{shown}"
        );
        let dir = scratch_dir();
        let o = bench(&[
            "run",
            s,
            "--sim-only",
            "--capacity",
            "512M",
            "--out",
            dir.path().to_str().unwrap(),
        ]);
        assert!(
            o.status.success(),
            "{s}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let r = results(dir.path());
        assert!(r.passed(), "{s}: {:?}", r.expects);
        for f in ["report.html", "report.md", "drive.svg"] {
            assert!(dir.path().join(f).exists(), "{s}: {f}");
        }
    }
}

/// Issue 32's cache cliff in the simulator, scaled to 2 GiB: on the
/// empty drive the write rate drops to under 60 % at two thirds of the
/// pass (the SN580's 341 GB of the 511 GB written at full size, within
/// ±20 %), to TechPowerUp's 450 MB/s within ±50 % (the model's known
/// error there: see scenarios/cache-cliff.toml); at 70 % full the cache
/// runs out after fewer bytes; the chart marks both drops.
#[test]
fn cache_cliff_in_the_simulator() {
    let _g = guest_lock();
    let dir = scratch_dir();
    let o = bench(&[
        "run",
        "cache-cliff",
        "--sim-only",
        "--capacity",
        "2G",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let r = results(dir.path());
    let m = |p: &str, k: &str| {
        r.phase(p)
            .and_then(|p| p.metrics.get(k))
            .copied()
            .unwrap_or_else(|| panic!("{p}: no {k}"))
    };
    let (at, written) = (m("empty", "write_drop_bytes"), m("empty", "host_written"));
    let (before, after) = (
        m("empty", "write_bw_before_drop"),
        m("empty", "write_bw_after_drop"),
    );
    let full_at = m("full", "write_drop_bytes");
    eprintln!(
        "empty: drop after {:.3} of the pass ({:.1} % of the drive), {:.0} -> {:.0} MB/s; \
         70 % full: drop after {:.3} of the empty drive's bytes",
        at / written,
        100.0 * at / r.capacity as f64,
        before / 1e6,
        after / 1e6,
        full_at / at
    );
    assert!(after < 0.6 * before, "{before} -> {after}");
    let share = at / written / (341.0 / 511.5);
    assert!(
        (0.8..1.2).contains(&share),
        "drop at {share} x the published"
    );
    assert!((225e6..675e6).contains(&after), "{after}");
    assert!(full_at < 0.8 * at, "70 % full {full_at}, empty {at}");
    assert!(
        o.status.success() && r.passed(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let svg = std::fs::read_to_string(dir.path().join("throughput.svg")).unwrap();
    assert!(
        svg.contains("empty: drop after") && svg.contains("full: drop after"),
        "no drop marks in the chart"
    );
}

#[test]
fn a_failing_expectation_fails_the_command_with_its_numbers() {
    let dir = scratch_dir();
    let f = dir.path().join("fail.toml");
    std::fs::write(
        &f,
        "name = \"fail\"\n[drive]\nprofile = \"sata-mlc-2011\"\ncapacity = \"256M\"\n\
         [[phase]]\nname = \"w\"\nkind = \"fio\"\njob = \"seq-write-128k.fio\"\n\
         [[phase]]\nkind = \"expect\"\nchecks = [\"w.write_bw > 10G\", \"w.write_bw > 1M\"]\n",
    )
    .unwrap();
    let junit = dir.path().join("junit.xml");
    let out = dir.path().join("out");
    let o = bench(&[
        "run",
        f.to_str().unwrap(),
        "--sim-only",
        "--out",
        out.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("w.write_bw > 10G") && err.contains("w.write_bw = "),
        "{err}"
    );
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(x.contains("tests=\"2\" failures=\"1\""), "{x}");
    assert!(results(&out).expects.iter().filter(|e| e.passed).count() == 1);
}

/// Every expectation passed, or the bench said why it could not judge
/// it (the host, not the drive, set a figure it reads): never failed.
fn judged_or_said_so(r: &BenchResults) {
    for e in &r.expects {
        match e.verdict() {
            vssd::bench::results::Verdict::Pass => {}
            vssd::bench::results::Verdict::Inconclusive => eprintln!(
                "not judged: {} [{}]: {}",
                e.text,
                e.detail,
                e.inconclusive.as_deref().unwrap_or("")
            ),
            vssd::bench::results::Verdict::Fail => {
                panic!("{} failed [{}]", e.text, e.detail)
            }
        }
    }
}

/// trim-recovery on the drive's side: used below 80 % of fresh, trimmed
/// within 90 % of fresh, in bytes per second the drive had requests.
fn drive_shows_the_trim_effect(r: &BenchResults) {
    let d = |p: &str| {
        r.phase(p)
            .and_then(|p| p.metrics.get("drive_bw"))
            .copied()
            .unwrap_or_else(|| panic!("{p}: no drive_bw"))
    };
    let (fresh, used, trimmed) = (d("fresh"), d("used"), d("trimmed"));
    eprintln!(
        "drive side: fresh {:.1} MB/s, used {:.2} × fresh, trimmed {:.2} × fresh",
        fresh / 1e6,
        used / fresh,
        trimmed / fresh
    );
    assert!(used < 0.8 * fresh, "used {used:.3e}, fresh {fresh:.3e}");
    assert!(
        trimmed >= 0.9 * fresh,
        "trimmed {trimmed:.3e}, fresh {fresh:.3e}"
    );
}

/// Protocol P2, scaled down, in a real guest (virtio here: TCG's SATA
/// emulation costs about 1 ms per request, which would hide the drive).
///
/// A run that failed in a way host starvation explains is measured once
/// more: an `expect` failed while the bench flagged a phase guest-bound
/// (the guest reached the drive at under half the simulator's queue
/// depth), or the phases outside the guest-vs-simulator tolerance all have
/// the guest slower than the simulator (the emulated host, starved by
/// other work on a shared machine, set the figure; a guest can never be
/// faster than the drive model). Any other failure fails at once, and so
/// does a second failed attempt, whatever it is.
#[test]
fn trim_recovery_in_a_guest_beside_the_simulator() {
    init_logging();
    require_program("qemu-system-x86_64");
    require_program("fio");
    let _g = guest_lock();
    let dir = scratch_dir();
    let mut attempt = 0;
    let (o, r, out, junit) = loop {
        attempt += 1;
        let out = dir.path().join(format!("attempt{attempt}"));
        let junit = out.join("junit.xml");
        std::fs::create_dir_all(&out).unwrap();
        // Dilated by 2, fixed: under TCG the guest's own time per burst
        // is about a tenth of the fresh drive's at K = 1, which puts the
        // fresh surface right at the 10 % tolerance; at K = 2 it is half
        // that. (The SATA test below covers `auto`.)
        let o = bench(&[
            "run",
            "trim-recovery",
            "--capacity",
            "256M",
            "--bus",
            "virtio",
            "--time-scale",
            "2",
            "--out",
            out.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
            "--trace",
        ]);
        eprintln!("{}", String::from_utf8_lossy(&o.stdout));
        assert!(
            out.join("results.json").exists(),
            "no results.json: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r = results(&out);
        let guest_bound: Vec<&str> = r
            .comparison
            .iter()
            .filter(|c| c.guest_bound)
            .map(|c| c.phase.as_str())
            .collect();
        let outside: Vec<_> = r
            .comparison
            .iter()
            .filter(|c| c.counted() && !c.within)
            .collect();
        let passed = o.status.success() && outside.is_empty();
        let starved = !guest_bound.is_empty()
            || (!outside.is_empty() && outside.iter().all(|c| c.sim > c.guest));
        if passed || attempt == 2 || !starved {
            break (o, r, out, junit);
        }
        eprintln!(
            "attempt {attempt} failed with phases {guest_bound:?} guest-bound and {:?} \
             slower in the guest than in the simulator: measuring again",
            outside.iter().map(|c| c.phase.as_str()).collect::<Vec<_>>()
        );
    };
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let m = |p: &str, k: &str| r.phase(p).and_then(|p| p.metrics.get(k)).copied().unwrap();
    judged_or_said_so(&r);
    // The drive's own figures (bytes per second it had the guest's
    // requests), which a busy host does not move: the used state and the
    // recovery are there whatever the guest could show.
    drive_shows_the_trim_effect(&r);
    assert_eq!(
        m("trim", "trim_bytes"),
        (256u64 << 20) as f64,
        "the whole disk"
    );
    assert!(r.passed());
    // The simulator replayed the daemon's trace of every compared phase,
    // so every phase counts, and each agrees.
    let sim = r.sim.as_ref().expect("a simulator run");
    assert_eq!(sim.phases.len(), r.phases.len());
    assert_eq!(r.comparison.len(), 4, "fresh, random, used, trimmed");
    for c in &r.comparison {
        assert!(c.replayed && c.counted(), "{} was not replayed", c.phase);
        assert!(
            sim.phase(&c.phase).unwrap().metrics["replayed_requests"] > 0.0,
            "{}",
            c.phase
        );
        assert!(
            c.within,
            "{}: guest {:.1} MB/s, sim {:.1} MB/s ({:+.1} %)",
            c.phase,
            c.guest / 1e6,
            c.sim / 1e6,
            c.difference * 100.0
        );
        assert!(c.predicted.is_some_and(|p| p > 0.0), "{}", c.phase);
    }
    // --trace keeps the daemon's trace beside the results: every request
    // of the run, the whole-disk TRIM included.
    let t = vssd::trace::vssd::read(
        std::io::BufReader::new(std::fs::File::open(out.join("trace.vssdtrace")).unwrap()),
        "trace",
    )
    .unwrap();
    assert!(t.closed && t.header.dropped == 0);
    let discarded: u64 = t
        .records
        .iter()
        .filter(|x| x.op == vssd::trace::vssd::RecOp::Discard)
        .map(|x| x.len)
        .sum();
    assert_eq!(discarded, 256 << 20);
    for f in [
        "report.html",
        "surface.svg",
        "sim-vs-guest-surface.svg",
        "drive-samples.csv",
    ] {
        assert!(out.join(f).exists(), "{f}");
    }
    assert!(
        std::fs::read_to_string(&junit)
            .unwrap()
            .contains("failures=\"0\"")
    );
}

/// Protocol P2 on its own bus, SATA, which under TCG costs the guest about
/// 1 ms a request: undilated, the guest sets the surfaces' speed and the
/// TRIM effect disappears. `--time-scale auto` (the default) probes the
/// guest, dilates the drive's time until the guest keeps it busy, and
/// converts the figures back: the effect is there, the expectations pass
/// (none inconclusive). On a KVM host the probe finds the guest keeping up
/// and the same assertions hold at K = 1.
///
/// A run that came out inconclusive (the bench found a phase guest-bound
/// after all: a host busy with other work starved the emulator) is
/// measured once more; a second inconclusive run or any failure fails.
#[test]
fn trim_recovery_on_sata_shows_the_trim_effect_with_time_dilated() {
    init_logging();
    require_program("qemu-system-x86_64");
    require_program("fio");
    let _g = guest_lock();
    let dir = scratch_dir();
    let started = std::time::Instant::now();
    let mut attempt = 0;
    let (o, r, junit) = loop {
        attempt += 1;
        let out = dir.path().join(format!("attempt{attempt}"));
        let junit = out.join("junit.xml");
        std::fs::create_dir_all(&out).unwrap();
        let o = bench(&[
            "run",
            "trim-recovery",
            "--capacity",
            "64M",
            "--bus",
            "sata",
            "--out",
            out.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
        ]);
        eprintln!("{}", String::from_utf8_lossy(&o.stdout));
        assert!(
            out.join("results.json").exists(),
            "no results.json: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r = results(&out);
        if r.inconclusive() == 0 || attempt == 2 {
            break (o, r, std::fs::read_to_string(&junit).unwrap());
        }
        eprintln!("attempt {attempt} was inconclusive: measuring again");
    };
    eprintln!("took {:.0} s", started.elapsed().as_secs_f64());
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // auto chose K by measuring, and said how.
    assert!(r.time_scale >= 1.0);
    let why = r.time_scale_reason.as_deref().expect("auto says why");
    assert!(why.starts_with("auto: probe at K = "), "{why}");
    judged_or_said_so(&r);
    let m = |p: &str, k: &str| r.phase(p).and_then(|p| p.metrics.get(k)).copied().unwrap();
    eprintln!(
        "K = {}: guest medians: used {:.2} × fresh, trimmed {:.2} × fresh",
        r.time_scale,
        m("used", "median_bw") / m("fresh", "median_bw"),
        m("trimmed", "median_bw") / m("fresh", "median_bw")
    );
    drive_shows_the_trim_effect(&r);
    assert_eq!(m("trim", "trim_bytes"), (64u64 << 20) as f64);
    // Figures are in the drive's time: the drive's fresh speed near its
    // link speed (275 MB/s for this preset), not the guest's.
    let sim = r.sim.as_ref().expect("a simulator run");
    let sim_fresh = sim.phase("fresh").unwrap().metrics["median_bw"];
    let fresh = m("fresh", "drive_bw");
    assert!(fresh > 0.75 * sim_fresh, "{fresh:.3e} vs {sim_fresh:.3e}");
    assert!(junit.contains("failures=\"0\""), "{junit}");
    assert!(
        junit.contains("<property name=\"bus\" value=\"sata\"/>"),
        "{junit}"
    );
    // Time-dilated or not, the simulator replayed the daemon's trace of
    // every compared phase, and each agrees within the tolerance; beside
    // it the simulator's own prediction from the job files is reported.
    assert_eq!(r.comparison.len(), 4);
    for c in &r.comparison {
        assert!(c.replayed && c.counted(), "{} was not replayed", c.phase);
        assert!(
            c.within,
            "{}: guest {:.1} MB/s, replayed {:.1} MB/s ({:+.1} %)",
            c.phase,
            c.guest / 1e6,
            c.sim / 1e6,
            c.difference * 100.0
        );
        assert!(c.predicted.is_some_and(|p| p > 0.0), "{}", c.phase);
    }
}

/// Issue 32's cache cliff in a guest on the NVMe bus, at 1 GiB: the
/// guest's fio writes 1 MiB at QD 1, which under TCG costs the guest about
/// 10 ms a request, where the drive takes 0.3 ms in its cache; dilated by
/// 30 the guest keeps up and the drop shows where the simulator has it
/// (about 80 s in all on two busy cores). Guest-bound verdicts say so and
/// measure once more; the drop figures must be there either way.
#[test]
fn cache_cliff_in_a_guest_on_nvme() {
    init_logging();
    require_program("qemu-system-x86_64");
    require_program("fio");
    let _g = guest_lock();
    let dir = scratch_dir();
    let mut attempt = 0;
    let (o, r) = loop {
        attempt += 1;
        let out = dir.path().join(format!("attempt{attempt}"));
        let o = bench(&[
            "run",
            "cache-cliff",
            "--capacity",
            "1G",
            "--time-scale",
            "30",
            "--out",
            out.to_str().unwrap(),
        ]);
        eprintln!("{}", String::from_utf8_lossy(&o.stdout));
        assert!(
            out.join("results.json").exists(),
            "no results.json: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r = results(&out);
        if r.inconclusive() == 0 || attempt == 2 {
            break (o, r);
        }
        eprintln!("attempt {attempt} was inconclusive: measuring again");
    };
    judged_or_said_so(&r);
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let m = |p: &str, k: &str| {
        r.phase(p)
            .and_then(|p| p.metrics.get(k))
            .copied()
            .unwrap_or_else(|| panic!("{p}: no {k}"))
    };
    // The simulator's own run of the scenario (the replay beside the
    // guest's run has the daemon's trace, not the job's fine log).
    let sim_dir = dir.path().join("sim");
    let so = bench(&[
        "run",
        "cache-cliff",
        "--sim-only",
        "--capacity",
        "1G",
        "--out",
        sim_dir.to_str().unwrap(),
    ]);
    assert!(
        so.status.success(),
        "{}",
        String::from_utf8_lossy(&so.stderr)
    );
    let sim = results(&sim_dir);
    let sim_at = sim.phase("empty").unwrap().metrics["write_drop_bytes"];
    let at = m("empty", "write_drop_bytes");
    eprintln!(
        "guest: drop after {:.0} MB (simulator {:.0} MB), {:.0} MB/s past it; 70 % full: {:.0} MB",
        at / 1e6,
        sim_at / 1e6,
        m("empty", "write_bw_after_drop") / 1e6,
        m("full", "write_drop_bytes") / 1e6
    );
    assert!((at / sim_at - 1.0).abs() < 0.2, "{at} vs {sim_at}");
    assert!(m("full", "write_drop_bytes") < 0.8 * at);
}

/// The built-in power-loss scenario on a drive without power-loss
/// protection: both cuts go off while fsynced files are written, each
/// loses writes the daemon lists, ext4 with barriers comes back clean with
/// every fsynced file intact, and the expectations pass (none left
/// inconclusive: a guest run measures all of them).
#[test]
fn power_loss_in_a_guest_reports_what_was_lost() {
    init_logging();
    require_program("qemu-system-x86_64");
    let _g = guest_lock();
    let dir = scratch_dir();
    let out = dir.path().join("out");
    let o = bench(&[
        "run",
        "power-loss",
        "--profile",
        "sata-mlc-2011",
        "--time-scale",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    eprintln!("{text}");
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = results(&out);
    assert!(r.incomplete.is_none(), "{:?}", r.incomplete);
    assert!(
        !r.expects.is_empty()
            && r.expects
                .iter()
                .all(|e| e.passed && e.inconclusive.is_none()),
        "{:?}",
        r.expects
    );
    let m = |p: &str, k: &str| -> f64 {
        *r.phase(p)
            .and_then(|p| p.metrics.get(k))
            .unwrap_or_else(|| panic!("{p}.{k} missing"))
    };
    for on in ["on", "nb_on"] {
        // The write the power went with at least, never acknowledged.
        assert!(m(on, "lost_writes") >= 1.0, "{on}");
        assert!(m(on, "lost_bytes") >= 512.0, "{on}");
        assert_eq!(m(on, "protected"), 0.0);
        assert_eq!(m(on, "powered"), 1.0);
    }
    // The armed cut had not gone off when its phase ended.
    assert_eq!(m("cut", "armed"), 1.0);
    assert_eq!(m("cut", "lost_writes"), 0.0);
    assert_eq!(m("check", "fsck_clean"), 1.0);
    // Files written without fsync were in the guest's page cache.
    assert!(m("check", "files_lost") >= 8.0);
    assert!(m("check", "files_intact") >= 8.0 + m("synced", "files_written"));
    // The machine went down with the drive in the phase the cut hit.
    assert_eq!(m("synced", "power_lost"), 1.0);
    assert!(
        text.contains("on: the latest power cut lost")
            && text.contains("check: after the journal replay, e2fsck -n found it clean"),
        "{text}"
    );
}

/// `fault` phases in a guest: a stall registered at one phase boundary
/// holds the surface pass's commands, and the `fault clear` phase after
/// it reports the stalls injected and no fault left.
#[test]
fn fault_phases_reach_the_daemon_in_a_guest() {
    init_logging();
    require_program("qemu-system-x86_64");
    let _g = guest_lock();
    let dir = scratch_dir();
    let f = dir.path().join("stall.toml");
    std::fs::write(
        &f,
        "name = \"stall\"\n[drive]\nprofile = \"sata-mlc-2011\"\ncapacity = \"256M\"\n\
         [[phase]]\nname = \"st\"\nkind = \"fault\"\nfault = \"stall\"\nms = 10\nevery_ms = 50\n\
         [[phase]]\nname = \"w\"\nkind = \"surface\"\nop = \"write\"\npositions = 32\n\
         [[phase]]\nname = \"cl\"\nkind = \"fault\"\nclear = true\n\
         [[phase]]\nkind = \"expect\"\nchecks = [\"st.faults_active == 1\", \"cl.faults_active == 0\", \"cl.stalls_injected >= 1\", \"cl.errors_injected == 0\"]\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = bench(&[
        "run",
        f.to_str().unwrap(),
        "--time-scale",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    eprintln!("{text}");
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = results(&out);
    assert!(
        r.expects.len() == 4
            && r.expects
                .iter()
                .all(|e| e.passed && e.inconclusive.is_none()),
        "{:?}",
        r.expects
    );
}
