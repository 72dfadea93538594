//! Tests of trace replay (`read_iolog`): fio's delays, the queue depth,
//! the clock's limit, the memory a replay holds.

use super::tests::Mock;
use super::*;
use crate::jobfile::parse;

fn trace_of(times_us: &[u64], v3: bool) -> (vssd_trace::Format, vssd_trace::Trace) {
    let mut text = String::from(if v3 {
        "fio version 3 iolog\n"
    } else {
        "fio version 2 iolog\n"
    });
    for (i, t) in times_us.iter().enumerate() {
        if v3 {
            text.push_str(&format!("{t} f write {} 4096\n", i * 4096));
        } else {
            text.push_str(&format!("f write {} 4096\n", i * 4096));
        }
    }
    let t = vssd_trace::iolog::read(std::io::Cursor::new(text), "t").unwrap();
    let f = if v3 {
        vssd_trace::Format::IologV3
    } else {
        vssd_trace::Format::IologV2
    };
    (f, t)
}

/// fio's replay timing: each entry's delay is its time minus the previous
/// entry's, counted from the previous issue, scaled by
/// `replay_time_scale`; none after a time of 0 (iolog v3), none at all
/// with `replay_no_stall`; offsets scaled then aligned.
#[test]
fn replay_delays_follow_fios_rules() {
    let (f, t) = trace_of(&[0, 1000, 3000, 6000], true);
    let opts = crate::jobfile::ReplayOptions::default();
    let r = resolve_replay("t", f, &t, &opts, 1 << 30).unwrap();
    let d: Vec<u64> = r.entries.iter().map(|e| e.delay_ns).collect();
    assert_eq!(
        d,
        vec![0, 0, 2_000_000, 3_000_000],
        "after a time of 0, no delay"
    );
    let fast = crate::jobfile::ReplayOptions {
        time_scale_pct: 200,
        ..Default::default()
    };
    let r = resolve_replay("t", f, &t, &fast, 1 << 30).unwrap();
    assert_eq!(r.entries[3].delay_ns, 1_500_000);
    let nostall = crate::jobfile::ReplayOptions {
        no_stall: true,
        ..Default::default()
    };
    let r = resolve_replay("t", f, &t, &nostall, 1 << 30).unwrap();
    assert!(r.entries.iter().all(|e| e.delay_ns == 0));
    let scaled = crate::jobfile::ReplayOptions {
        scale: 3,
        align: 4096,
        ..Default::default()
    };
    let r = resolve_replay("t", f, &t, &scaled, 1 << 30).unwrap();
    let o: Vec<u64> = r.entries.iter().map(|e| e.offset).collect();
    assert_eq!(o, vec![0, 0, 0, 4096], "offset / 3, rounded down to 4 KiB");
    // iolog v2's waits: time since the start, not scaled (fio's
    // replay_time_scale applies to timestamps), skipped with no_stall.
    let v2 = vssd_trace::iolog::read(
        std::io::Cursor::new(
            "fio version 2 iolog\nf write 0 4096\nf wait 20 0\nf write 4096 4096\n",
        ),
        "t",
    )
    .unwrap();
    let fmt = vssd_trace::Format::IologV2;
    for o in [&opts, &fast] {
        let r = resolve_replay("t", fmt, &v2, o, 1 << 30).unwrap();
        assert_eq!(r.entries[1].kind, ReplayKind::Wait);
        assert_eq!(r.entries[1].delay_ns, 20_000_000);
    }
    let r = resolve_replay("t", fmt, &v2, &nostall, 1 << 30).unwrap();
    assert!(r.entries.iter().all(|e| e.kind != ReplayKind::Wait));
    let skip = crate::jobfile::ReplayOptions {
        skip: 1 << Dir::Write as u8,
        ..Default::default()
    };
    assert!(
        resolve_replay("t", f, &t, &skip, 1 << 30)
            .unwrap_err()
            .contains("no request")
    );
}

/// A replay is open-loop at the recorded pace while the drive keeps up:
/// issues land at the recorded times whatever the service time, and the
/// queue depth bounds what is in flight.
#[test]
fn a_replay_issues_at_the_recorded_times_within_its_queue_depth() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("t.iolog");
    let mut text = String::from("fio version 3 iolog\n1 f add\n");
    for i in 0..100u64 {
        text.push_str(&format!("{} f read {} 4096\n", 1 + i * 100, i * 4096));
    }
    std::fs::write(&log, text).unwrap();
    let job = format!("[r]\nread_iolog={}\niodepth=8\n", log.display());
    // 50 µs per request, parallel: every issue 100 µs apart.
    let jf = parse(&job, "t").unwrap();
    let mut m = Mock::new(1 << 30, 50_000, false);
    run_jobs(&mut m, &jf.jobs, 1, 0, &mut |_| {}).unwrap();
    let starts: Vec<u64> = m.log.iter().map(|l| l.0).collect();
    assert_eq!(starts.len(), 100);
    assert!(
        starts.windows(2).all(|w| w[1] - w[0] == 100_000),
        "{starts:?}"
    );
    // 1 ms per request on one server: the queue fills; later issues wait
    // for a free slot, and the delays count from the previous issue.
    let mut slow = Mock::new(1 << 30, 1_000_000, true);
    run_jobs(&mut slow, &jf.jobs, 1, 0, &mut |_| {}).unwrap();
    assert!(slow.max_in_flight() <= 8);
    let s: Vec<u64> = slow.log.iter().map(|l| l.0).collect();
    assert!(s.windows(2).all(|w| w[1] - w[0] >= 100_000));
    assert!(
        *s.last().unwrap() > 90_000_000,
        "bounded by the drive, not the log"
    );
}

/// A replay's time never passes the drive clock's end: a trace whose
/// times, scaled by `replay_time_scale`, span more is refused with the
/// limit (a saturated time used to make the simulator drop every later
/// request silently); the trace reader's bound is the clock's.
#[test]
fn replay_times_past_the_clock_are_refused() {
    assert_eq!(vssd_trace::MAX_TIME_NS, vssd_common::clock::MAX_DRIVE_NS);
    let last = vssd_common::clock::MAX_DRIVE_NS / 1000 / 50;
    let (f, t) = trace_of(&[1, last], true);
    let opts = crate::jobfile::ReplayOptions::default();
    resolve_replay("t", f, &t, &opts, 1 << 30).unwrap();
    let slow = crate::jobfile::ReplayOptions {
        time_scale_pct: 1,
        ..Default::default()
    };
    let e = resolve_replay("t", f, &t, &slow, 1 << 30).unwrap_err();
    assert!(
        e.contains("146 years") && e.contains("replay_time_scale=1"),
        "{e}"
    );
}

/// What docs/traces.md says a replay holds per request: 40 bytes of trace
/// and 32 of resolved request.
#[test]
fn a_replay_holds_72_bytes_a_request() {
    assert_eq!(std::mem::size_of::<vssd_trace::Item>(), 40);
    assert_eq!(std::mem::size_of::<crate::engine::plan::ReplayEntry>(), 32);
}
