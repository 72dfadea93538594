#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! Faults seen by a real guest (QEMU, the Linux test guest,
//! vhost-user-blk on `vssd serve`): an injected read error is EIO at that
//! sector and only there, and the guest kernel's log names the sector; a
//! power cut closes the vhost-user connection and QEMU started with
//! `reconnect=1` gets its device back after the power returns; ext4 with
//! its defaults is consistent as the drive kept it after a cut. No timing
//! is asserted.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::serve::{Serve, VSSD};
use common::{guest_lock, init_logging, require_program, scratch_dir};
use vssd::guest::{Disk, Guest};

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

/// Set `flag` when the daemon at `control` reports its drive's power off
/// (the machine loses its power with it); ends when `done` is set.
fn watch_power(
    control: &Path,
    flag: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let control = control.to_path_buf();
    std::thread::spawn(move || {
        while !done.load(Ordering::SeqCst) {
            let out = Command::new(VSSD)
                .args(["ctl", "--control"])
                .arg(&control)
                .args(["faults", "--json"])
                .stdin(Stdio::null())
                .output();
            if let Ok(o) = out
                && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&o.stdout)
                && v["power"]["powered"] == false
            {
                flag.store(true, Ordering::SeqCst);
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })
}

/// Also: a power cut armed for the guest's first write, with an automatic
/// power-on two seconds later, closes the vhost-user connection; QEMU
/// (`reconnect=1`) connects again once the power is back, resubmits the
/// write it never got an answer for, and the guest reads back what it wrote.
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
    // The guest's first write takes the power; it comes back 2 s later.
    ctl(
        &serve.control,
        &["power-cut", "--after-writes", "1", "--restart-after", "2"],
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
head -c 4096 /dev/urandom > /tmp/x
if dd if=/tmp/x of=/dev/vda bs=4096 seek=1000 count=1 oflag=direct 2>/dev/null; then echo "write ok"; else echo "write failed"; fi
dd if=/dev/vda of=/tmp/y bs=4096 skip=1000 count=1 iflag=direct 2>/dev/null && cmp -s /tmp/x /tmp/y && echo "read back ok"
"#;
    let run = Guest::new()
        .disk(Disk::VhostUserBlk {
            socket: serve.socket.clone(),
            num_queues: 1,
        })
        .vhost_reconnect(1)
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
    // The write took the power with it (lost, never acknowledged), QEMU
    // reconnected after the power-on and wrote it again.
    let power = &stats.faults.power;
    assert_eq!((power.cuts, power.powered), (1, true), "{power:?}");
    let cut = power.last_cut.as_ref().unwrap();
    assert!(
        cut.lost
            .iter()
            .any(|l| l.offset == 1000 * 4096 && !l.acknowledged),
        "{cut:?}"
    );
    assert!(run.output.contains("write ok"), "{}", run.output);
    assert!(run.output.contains("read back ok"), "{}", run.output);
    assert_eq!(stats.connection.connections, 2, "QEMU connected again");
    serve.stop_ok();
}

/// ext4 with its defaults (barriers on) through a power cut: files
/// written and synced, then more written, each file synced (`conv=fsync`),
/// while the power goes with the 40th write the drive sees (and the
/// machine with it); after power-on a new boot replays the journal (mount,
/// umount) and a read-only e2fsck finds the file system clean as the drive
/// kept it: nothing repairs it first.
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
    // The machine loses its power with the drive: the boot ends there.
    let (lost_power, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let watcher = watch_power(&serve.control, lost_power.clone(), done.clone());
    let run = Guest::new()
        .disk(Disk::VhostUserBlk {
            socket: serve.socket.clone(),
            num_queues: 1,
        })
        .power_loss_on(lost_power)
        .run_script(
            "mkdir -p /tmp/m\nmount /dev/vda /tmp/m\n\
             for i in $(seq 1 100); do dd if=/dev/urandom of=/tmp/m/g$i bs=16k count=4 conv=fsync 2>/dev/null || break; echo wrote=$i; done\n\
             sync\necho second=done\nexit 0",
            Duration::from_secs(600),
        )
        .expect("guest run");
    done.store(true, Ordering::SeqCst);
    watcher.join().unwrap();
    eprintln!("{}", run.output);
    assert!(run.powered_off, "the machine went down with the drive");
    assert!(!run.output.contains("second=done"));
    let report = serve.report();
    assert!(!report.faults.power.powered, "the cut happened");
    let lost = &report.faults.power.last_cut.as_ref().unwrap().lost;
    eprintln!(
        "writes lost: {} ({} acknowledged)",
        lost.len(),
        lost.iter().filter(|l| l.acknowledged).count()
    );
    assert!(!lost.is_empty(), "the write the power went with is lost");
    ctl(&serve.control, &["power-on"]);
    let run = guest(
        "mkdir -p /tmp/m\nmount /dev/vda /tmp/m && umount /tmp/m; echo replay=$?\n\
         e2fsck -fn /dev/vda; echo check=$?",
    );
    run.expect_success();
    assert!(
        run.output.lines().any(|l| l == "replay=0"),
        "ext4 did not mount after the cut:\n{}",
        run.output
    );
    assert!(
        run.output.lines().any(|l| l == "check=0"),
        "e2fsck -n after the journal replay found ext4 damaged:\n{}",
        run.output
    );
    serve.stop_ok();
}
