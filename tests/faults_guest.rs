#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! An injected read error seen by a real guest (QEMU, the Linux test
//! guest, vhost-user-blk on `vssd serve`): EIO at that sector and only
//! there, and the guest kernel's log names the sector. No timing is
//! asserted.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::serve::{Serve, VSSD};
use common::{guest_lock, init_logging, require_program, scratch_dir};
use vssd::kit::guest::{Disk, Guest};

fn ctl(control: &Path, args: &[&str]) {
    let out = Command::new(VSSD)
        .arg("ctl")
        .arg("--control")
        .arg(control)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn guest_gets_eio_at_the_faulted_sector_only_and_dmesg_names_it() {
    init_logging();
    require_program("qemu-system-x86_64");
    let _g = guest_lock();
    let dir = scratch_dir();
    let serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "sata-mlc-2011",
            "--capacity",
            "256M",
            "--memory",
        ],
    );
    // Sector 4099 of the guest's /dev/vda cannot be read.
    ctl(
        &serve.control,
        &[
            "fault",
            "add",
            "read-error",
            "--offset",
            "2098688",
            "--length",
            "512",
        ],
    );
    // O_DIRECT reads of one sector each (the guest runs the host's
    // coreutils dd), so neither the page cache nor readahead widens them.
    let script = r#"
for s in 4096 4097 4098 4099 4100 4101 4102 4103 8000; do
  if dd if=/dev/vda of=/dev/null bs=512 skip=$s count=1 iflag=direct 2>/dev/null; then
    echo "sector $s ok"
  else
    echo "sector $s eio"
  fi
done
dmesg | grep -i 'error' | grep vda | sed 's/^\[[^]]*\] //' | sort -u
"#;
    let run = Guest::new()
        .disk(Disk::VhostUserBlk {
            socket: serve.socket.clone(),
            num_queues: 1,
        })
        .run_script(script, Duration::from_secs(600))
        .expect("guest run");
    eprintln!("{}", run.output);
    run.expect_success();
    for s in [4096, 4097, 4098, 4100, 4101, 4102, 4103, 8000] {
        assert!(
            run.output.contains(&format!("sector {s} ok")),
            "sector {s}:\n{}",
            run.output
        );
    }
    assert!(run.output.contains("sector 4099 eio"), "{}", run.output);
    let errors: Vec<&str> = run
        .output
        .lines()
        .filter(|l| l.contains("I/O error"))
        .collect();
    assert!(
        !errors.is_empty() && errors.iter().all(|l| l.contains("sector 4099")),
        "the kernel names sector 4099 and no other:\n{}",
        run.output
    );
    let stats = serve.report();
    assert!(stats.faults.counters.read_errors_injected >= 1);
    serve.stop_ok();
}

/// ext4 with its defaults (barriers on) through a power cut: files
/// written and synced, then more written, each file synced (`conv=fsync`),
/// while the power goes with the 40th write the drive sees; after power-on, e2fsck replays the journal
/// and a second, read-only e2fsck finds the file system clean.
#[test]
fn ext4_comes_back_clean_after_a_power_cut() {
    init_logging();
    require_program("qemu-system-x86_64");
    let _g = guest_lock();
    let dir = scratch_dir();
    let serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "sata-mlc-2011",
            "--capacity",
            "256M",
            "--memory",
        ],
    );
    let guest = |script: &str| {
        let run = Guest::new()
            .disk(Disk::VhostUserBlk {
                socket: serve.socket.clone(),
                num_queues: 1,
            })
            .run_script(script, Duration::from_secs(600))
            .expect("guest run");
        eprintln!("{}", run.output);
        run
    };
    let run = guest(
        "set -e\nmkfs.ext4 -q -F /dev/vda\nmkdir -p /tmp/m\nmount /dev/vda /tmp/m\n\
         for i in 1 2 3 4 5 6 7 8; do dd if=/dev/urandom of=/tmp/m/f$i bs=64k count=4 2>/dev/null; done\n\
         sync\numount /tmp/m\necho first=ok",
    );
    run.expect_success();
    assert!(run.output.contains("first=ok"));
    ctl(&serve.control, &["power-cut", "--after-writes", "40"]);
    // Writes fail once the power is gone; the guest carries on regardless.
    guest(
        "mkdir -p /tmp/m\nmount /dev/vda /tmp/m\n\
         for i in $(seq 1 100); do dd if=/dev/urandom of=/tmp/m/g$i bs=16k count=4 conv=fsync 2>/dev/null || break; done\n\
         sync\necho second=done\nexit 0",
    );
    let report = serve.report();
    assert!(!report.faults.power.powered, "the cut happened");
    let lost = report.faults.power.last_cut.as_ref().unwrap().lost.len();
    eprintln!("writes lost: {lost}");
    ctl(&serve.control, &["power-on"]);
    let run = guest(
        "e2fsck -fy /dev/vda >/dev/null 2>&1; echo replay=$?\n\
         e2fsck -fn /dev/vda; echo check=$?",
    );
    run.expect_success();
    assert!(
        run.output.lines().any(|l| l == "check=0"),
        "e2fsck after the journal replay is not clean:\n{}",
        run.output
    );
    serve.stop_ok();
}
