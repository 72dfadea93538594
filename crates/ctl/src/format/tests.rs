use super::*;
use vssd_device::trimlog::TrimRecord;
use vssd_device::{DataLocation, Device, DeviceOptions};
use vssd_profile::Profile;

#[test]
fn trim_sizes_are_exact_where_rounding_would_hide_a_difference() {
    // A 65,535-sector range (Windows' largest DSM range) that freed all
    // but its last, partly covered 4 KiB unit... and a bit more.
    let len = 65_535 * 512;
    assert_eq!(size_exact(len), "32.00MiB (33553920 B, 65535 sectors)");
    assert_eq!(size_exact(32 << 20), "32MiB");
    assert_eq!(size_exact(100), "100B");
    let r = TrimRecord {
        seq: 1,
        model_ns: 0,
        wall_unix_ms: 0,
        source: "nbd:vssd#1".into(),
        kind: "discard".into(),
        ranges: vec![(0, len)],
        freed_bytes: 33_550_336,
        already_unmapped_bytes: 0,
    };
    let line = trim_record(&r);
    assert!(
        line.contains(" 33553920 ")
            && line.contains(" 33550336 ")
            && line.trim_end().ends_with(" 3584"),
        "{line}"
    );
}

#[test]
fn period_counters_show_in_the_text_only_when_the_drive_has_them() {
    let report = |preset: &str| {
        let dev = Device::open(DeviceOptions {
            profile: Profile::load_with_capacity(preset, Some(1 << 30)).unwrap(),
            data: DataLocation::Memory,
            state_file: None,
            seed: 1,
            time_scale: Default::default(),
        })
        .unwrap();
        stats(&dev.report())
    };
    let generic = report("sata-mlc-2011");
    assert!(!generic.contains("SLC cache") && !generic.contains("merges"));
    let slc = report("nvme-tlc-slc-cache");
    assert!(slc.contains("SLC cache"), "{slc}");
    assert!(slc.contains("percentage used"), "{slc}");
}

#[test]
fn temperature_shows_in_stats_and_smart_only_with_a_thermal_model() {
    let dev = |preset: &str| {
        Device::open(DeviceOptions {
            profile: Profile::load_with_capacity(preset, Some(1 << 30)).unwrap(),
            data: DataLocation::Memory,
            state_file: None,
            seed: 1,
            time_scale: Default::default(),
        })
        .unwrap()
    };
    let hot = dev("samsung-980pro-1tb");
    let s = stats(&hot.report());
    assert!(
        s.contains("temperature") && s.contains("throttle step 0"),
        "{s}"
    );
    let m = smart(&hot.smart());
    assert!(m.contains("Temperature:") && m.contains(" Celsius"), "{m}");
    assert!(m.contains("Thermal Temp. 1 Transition Count:"), "{m}");
    let none = dev("nvme-tlc-slc-cache");
    assert!(!stats(&none.report()).contains("temperature"));
    assert!(!smart(&none.smart()).contains("Temperature"));
}

/// `ctl faults` says each thing once and as it is: no "no faults injected"
/// above "faults 0 active", an unacknowledged write is not "acked", an
/// armed cut names the write it comes with.
#[test]
fn fault_and_power_wording() {
    use vssd_device::faults::FaultReport;
    use vssd_device::power::{Armed, CutReport, LostWrite, PowerReport};
    let mut r = FaultReport::default();
    let t = faults(&r);
    assert!(
        t.starts_with("faults       none active; nothing injected so far\n"),
        "{t}"
    );
    assert!(!t.contains("no faults injected"), "{t}");
    r.counters.read_errors_injected = 2;
    assert!(faults(&r).contains("none active; injected: 2 read errors"));

    let lost = |acknowledged| LostWrite {
        offset: 4096,
        length: 512,
        submitted_model_ns: 1_000_000,
        acked_model_ns: 147_190_000,
        acknowledged,
        cause: Default::default(),
        shorn_from: None,
    };
    let p = PowerReport {
        last_cut: Some(CutReport {
            model_ns: 2_000_000,
            trigger: "now".into(),
            protected: false,
            lost: vec![lost(true), lost(false)],
            lost_bytes: 1024,
            survived: 0,
            reordered: 0,
            mapping_lost: false,
            restart_at_model_ns: None,
        }),
        armed: Some(Armed::AfterWrites { writes: 8 }),
        ..PowerReport::default()
    };
    let l = lost_writes(&p);
    let lines: Vec<&str> = l.lines().collect();
    assert!(lines[0].ends_with("acknowledged at 147.19 ms"), "{l}");
    assert!(
        lines[1].ends_with("not acknowledged (due at 147.19 ms)"),
        "{l}"
    );
    let t = power(&p);
    assert!(
        t.contains("armed: the power goes as the 8th write from now arrives"),
        "{t}"
    );
    for (n, s) in [
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (11, "11th"),
        (22, "22nd"),
        (113, "113th"),
    ] {
        assert_eq!(super::faults::ordinal(n), s);
    }
}

/// The precondition bar's ETA comes from the rate it measured over the
/// last seconds: none over less than one, the slower rate once a fill
/// gives way to random writes, and the bar never past its total.
#[test]
fn precondition_eta_is_from_the_measured_rate() {
    let t0 = std::time::Instant::now();
    let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
    let p = |done_bytes: u64| Progress {
        done_bytes,
        total_bytes: 1000,
    };
    let mut b = PreconditionBar::new(&["sequential fill".into()]);
    b.update_at(&p(0), at(0));
    b.update_at(&p(200), at(200));
    assert_eq!(b.shown(), ("ETA: measuring".to_string(), 200));
    // 500 B in 3 s: 500 B left is 3 s.
    b.update_at(&p(500), at(3000));
    assert_eq!(b.shown().0, "ETA 3s");
    // 10 B/s over the last 3 s: 440 B left is 44 s.
    for s in 4..=9 {
        b.update_at(&p(500 + (s - 3) * 10), at(s * 1000));
    }
    assert_eq!(b.shown().0, "ETA 44s");
    b.update_at(&p(1200), at(10_000));
    assert_eq!(b.shown().1, 1000);
}

/// A raw erase count is the mean rounded down, as a drive's integer
/// counter holds it; the text says so beside the table, so that 150
/// there and a mean of 150.70 in `ctl stats` do not look like a mistake.
#[test]
fn smart_says_raw_erase_counts_are_rounded_down() {
    let p = Profile::load("crucial-m4-128").unwrap();
    let c = vssd_model::Counters {
        erase_count_avg: 150.7,
        erase_count_max: 300,
        ..Default::default()
    };
    let t = smart(&vssd_device::smart::report(&p, &c));
    assert!(
        t.lines()
            .any(|l| l.starts_with("173 Wear_Leveling_Count") && l.ends_with(" 150")),
        "{t}"
    );
    assert!(
        t.contains("raw erase counts (173): the mean erase count rounded down"),
        "{t}"
    );
}
