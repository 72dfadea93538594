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
