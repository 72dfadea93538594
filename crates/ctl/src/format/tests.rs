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
