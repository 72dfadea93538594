//! Tests of the Prometheus endpoint: exposition, scrapes under load.

use super::encode::secs;
use super::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use vm_memory::VolatileSlice;
use vssd_device::{DataLocation, DeviceOptions};
use vssd_profile::Profile;

#[test]
fn a_dripping_client_does_not_hold_up_other_scrapes() {
    let dev = Arc::new(
        Device::open(DeviceOptions {
            profile: Profile::load_with_capacity("instant", Some(64 << 20)).unwrap(),
            data: DataLocation::Memory,
            state_file: None,
            seed: 1,
            time_scale: Default::default(),
        })
        .unwrap(),
    );
    let addr = spawn("127.0.0.1:0".parse().unwrap(), false, &dev).unwrap();
    let mut drip = TcpStream::connect(addr).unwrap();
    drip.write_all(b"G").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    drop(drip);
}

#[test]
fn metrics_carry_the_same_numbers_as_the_report() {
    let dev = Arc::new(
        Device::open(DeviceOptions {
            profile: Profile::load_with_capacity("sata-mlc-2011", Some(256 << 20)).unwrap(),
            data: DataLocation::Memory,
            state_file: None,
            seed: 1,
            time_scale: Default::default(),
        })
        .unwrap(),
    );
    let conn = dev.register_frontend("test", "here", "").connect("me");
    let mut data = vec![7u8; 8192];
    let w = dev.write(&conn, 4096, &[VolatileSlice::from(&mut data[..])], false);
    let due = w.due_ns();
    w.complete(due + 5_000);
    let text = render(&dev);
    let r = dev.report();
    assert!(
        text.contains("# TYPE vssd_host_written_bytes counter"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "vssd_host_written_bytes_total {}",
            r.counters.host_written_bytes
        )),
        "{text}"
    );
    assert!(
        text.contains("vssd_requests_total{op=\"write\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("vssd_drive_info{profile=\"sata-mlc-2011\""),
        "{text}"
    );
    let value = |key: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in\n{text}"))
    };
    let p50 =
        value("vssd_latency_quantile_seconds{op=\"write\",stage=\"delivered\",quantile=\"0.5\"}");
    assert!((p50 - secs(r.ops["write"].delivered.p50_ns)).abs() < 1e-12);
    let late = value("vssd_lateness_quantile_seconds{quantile=\"1\"}");
    assert!((late - secs(r.lateness.max_ns)).abs() < 1e-12);
    assert!(text.contains("vssd_lateness_seconds_count 1"), "{text}");
    // The depth the frontend delivered: one request, for its delivered latency.
    let fd = &r.frontends[0].io.depth;
    assert_eq!(fd.max_in_flight, 1);
    assert_eq!(
        value("vssd_frontend_max_in_flight{frontend=\"test\",listener=\"here\"}"),
        1.0
    );
    let req = value("vssd_frontend_request_seconds_total{frontend=\"test\",listener=\"here\"}");
    assert!(
        (req - secs(fd.request_ns)).abs() < 1e-12 && req > 0.0,
        "{text}"
    );
    assert!((value("vssd_busy_seconds_total") - secs(r.connection.depth.busy_ns)).abs() < 1e-12);
    assert!(
        text.contains("vssd_lateness_seconds_bucket{le=\"+Inf\"} 1"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("# EOF"));
}

#[test]
fn temperature_gauges_only_with_a_thermal_model() {
    let render_of = |preset: &str| {
        let dev = Arc::new(
            Device::open(DeviceOptions {
                profile: Profile::load_with_capacity(preset, Some(1 << 30)).unwrap(),
                data: DataLocation::Memory,
                state_file: None,
                seed: 1,
                time_scale: Default::default(),
            })
            .unwrap(),
        );
        (render(&dev), dev.report())
    };
    let (text, r) = render_of("wd-sn580-1tb");
    let t = r.counters.temperature_c.unwrap();
    assert!(
        text.contains("# TYPE vssd_temperature_celsius gauge"),
        "{text}"
    );
    assert!(
        text.contains(&format!("vssd_temperature_celsius {t}")),
        "{t} {text}"
    );
    assert!(text.contains("vssd_throttle_step 0"), "{text}");
    let (text, _) = render_of("nvme-tlc-slc-cache");
    assert!(!text.contains("vssd_temperature_celsius"), "{text}");
}
