#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! The Linux test guest really boots (QEMU, Debian kernel, busybox init,
//! host root over 9p) and runs scripts with disks from a reference backend,
//! qemu-storage-daemon, attached. These tests need QEMU and fio: run
//! scripts/install-deps.sh first. No timing is asserted.

mod common;

use std::time::Duration;

use common::{StorageDaemon, guest_lock, init_logging, require_program, scratch_dir};
use vssd::guest::{Disk, Guest, GuestError, run_script};

const MIB: u64 = 1 << 20;

fn setup() -> std::sync::MutexGuard<'static, ()> {
    init_logging();
    require_program("qemu-system-x86_64");
    guest_lock()
}

/// Output (stdout and stderr, in order, even without a final newline, also
/// streamed line by line) and a non-zero exit status come back.
#[test]
fn script_output_and_exit_status_come_back() {
    let _lock = setup();
    let script = r#"
echo "hello from $(uname -r)"
echo "to stderr" >&2
test "$(id -u)" = 0 && echo root
touch /tmp/writable && echo tmp-writable
printf 'no newline'
exit 7
"#;
    let mut streamed = Vec::new();
    let run = Guest::new()
        .run_script_streaming(script, Duration::from_secs(300), |line| {
            streamed.push(line.to_string())
        })
        .expect("guest run failed");
    eprintln!(
        "accel {}, boot {:.1} s, total {:.1} s",
        run.accel.name(),
        run.boot_time.as_secs_f64(),
        run.total_time.as_secs_f64()
    );
    assert_eq!(run.exit_code, 7, "output:\n{}", run.output);
    let image = vssd::guest::ensure_image().unwrap();
    let expected = format!(
        "hello from {}\nto stderr\nroot\ntmp-writable\nno newline",
        image.kernel_release
    );
    assert_eq!(run.output, expected);
    // The same lines were passed on while the guest ran.
    assert_eq!(streamed.join("\n"), expected);
    assert!(run.boot_time <= run.total_time);
}

/// The KVM probe's cheap step (the guest kernel alone, to its "no root"
/// panic) ends on its own under TCG, which works everywhere: the step
/// that gives up on a KVM that hangs sees a kernel that does not.
#[test]
fn the_probe_kernel_boot_ends_by_itself() {
    let _lock = setup();
    let image = vssd::guest::ensure_image().unwrap();
    let took = vssd::guest::probe_kernel(&image, vssd::guest::Accel::Tcg)
        .expect("the kernel boots to its panic under TCG");
    eprintln!("kernel boot under TCG: {:.1} s", took.as_secs_f64());
}

/// A vhost-user-blk disk from qemu-storage-daemon shows up as /dev/vda with
/// the right size and 2 queues, and a real fio write+verify passes on it.
#[test]
fn vhost_user_blk_disk_passes_fio_verify() {
    let _lock = setup();
    require_program("fio"); // run by the guest from the host's root
    let dir = scratch_dir();
    let socket = dir.path().join("qsd.sock");
    let size = 256 * MIB;
    let _qsd = StorageDaemon::vhost_user_blk(dir.path(), size, &socket, 2);
    let script = r#"
set -e
echo "sectors=$(cat /sys/block/vda/size)"
echo "queues=$(ls /sys/block/vda/mq | wc -l)"
# Two jobs (one per vCPU, so both queues are used) each randomly write
# 64 MiB of their own 128 MiB half, then read it all back and check crc32c.
fio --name=verify --filename=/dev/vda --ioengine=libaio --direct=1 \
    --rw=randwrite --bs=4k --iodepth=32 --numjobs=2 --size=64M --offset_increment=128M \
    --verify=crc32c --verify_fatal=1 --do_verify=1 --group_reporting \
    --output-format=terse --terse-version=3 >/tmp/fio.out
echo "fio=ok"
awk -F';' '/^3;/ { print "fio: errors=" $5 " write_iops=" $49 " verify_read_iops=" $8 }' /tmp/fio.out
"#;
    let run = Guest::new()
        .disk(Disk::VhostUserBlk {
            socket: socket.clone(),
            num_queues: 2,
        })
        .run_script(script, Duration::from_secs(600))
        .expect("guest run failed");
    eprintln!("{}", run.output);
    run.expect_success();
    let lines: Vec<&str> = run.output.lines().collect();
    assert!(
        lines.contains(&format!("sectors={}", size / 512).as_str()),
        "output:\n{}",
        run.output
    );
    assert!(lines.contains(&"queues=2"), "output:\n{}", run.output);
    assert!(lines.contains(&"fio=ok"), "output:\n{}", run.output);
}

/// The NBD attachments: one export seen as a SATA SSD on AHCI (`/dev/sda`,
/// non-rotational, TRIM) and as NVMe (`/dev/nvme0n1`), with the same data.
#[test]
fn nbd_exports_appear_as_sata_and_nvme() {
    let _lock = setup();
    let dir = scratch_dir();
    let socket = dir.path().join("nbd.sock");
    let size = 64 * MIB;
    let _qsd = StorageDaemon::nbd(dir.path(), size, &socket, &["sata", "nvme"]);
    let script = r#"
set -e
for d in sda nvme0n1; do
    echo "$d sectors=$(cat /sys/block/$d/size) rotational=$(cat /sys/block/$d/queue/rotational) discard=$(cat /sys/block/$d/queue/discard_max_bytes)"
done
printf 'vssd-nbd-check' | dd of=/dev/sda bs=512 seek=100 conv=fsync,sync 2>/dev/null
echo "nvme reads: $(dd if=/dev/nvme0n1 bs=512 skip=100 count=1 iflag=direct 2>/dev/null | tr -d '\000')"
blkdiscard -o 1048576 -l 1048576 /dev/sda && echo sata-trim=ok
blkdiscard -o 2097152 -l 1048576 /dev/nvme0n1 && echo nvme-trim=ok
"#;
    let run = Guest::new()
        .disk(Disk::NbdSata {
            socket: socket.clone(),
            export: "sata".into(),
            identity: vssd::profile::Profile::load("instant").unwrap().identity(),
        })
        .disk(Disk::NbdNvme {
            socket: socket.clone(),
            export: "nvme".into(),
            identity: vssd::profile::Profile::load("nvme-tlc").unwrap().identity(),
        })
        .run_script(script, Duration::from_secs(300))
        .expect("guest run failed");
    eprintln!("{}", run.output);
    run.expect_success();
    let sectors = size / 512;
    for dev in ["sda", "nvme0n1"] {
        let line = run
            .output
            .lines()
            .find(|l| l.starts_with(&format!("{dev} ")))
            .unwrap_or_else(|| panic!("no line for {dev}:\n{}", run.output));
        assert!(
            line.contains(&format!("sectors={sectors} rotational=0 ")),
            "{line}"
        );
        assert!(!line.ends_with("discard=0"), "no discard on {dev}: {line}");
    }
    assert!(
        run.output.contains("nvme reads: vssd-nbd-check"),
        "output:\n{}",
        run.output
    );
    assert!(run.output.contains("sata-trim=ok") && run.output.contains("nvme-trim=ok"));
}

/// A run that exceeds its timeout is killed and reported with the end of
/// the console log (here: a script that never ends).
#[test]
fn timeout_kills_the_guest_and_reports_the_console() {
    let _lock = setup();
    let err = run_script("echo started; sleep 100000", Duration::from_secs(30))
        .expect_err("a never-ending script must time out");
    let text = err.to_string();
    assert!(matches!(err, GuestError::Timeout { .. }), "{text}");
    assert!(text.contains("console tail"), "{text}");
    if let GuestError::Timeout { run_dir, .. } = err {
        let _ = std::fs::remove_dir_all(run_dir);
    }
}

/// QEMU failing at startup (here: no backend behind the vhost-user socket)
/// is an error carrying QEMU's own message, not a hang.
#[test]
fn qemu_startup_failure_is_reported() {
    let _lock = setup();
    let dir = scratch_dir();
    let err = Guest::new()
        .disk(Disk::VhostUserBlk {
            socket: dir.path().join("nobody-listens.sock"),
            num_queues: 1,
        })
        .run_script("true", Duration::from_secs(120))
        .expect_err("QEMU cannot start without its vhost-user backend");
    let text = err.to_string();
    assert!(matches!(err, GuestError::QemuExited { .. }), "{text}");
    assert!(
        text.contains("nobody-listens.sock"),
        "QEMU's message should name the socket: {text}"
    );
    if let GuestError::QemuExited { run_dir, .. } = err {
        let _ = std::fs::remove_dir_all(run_dir);
    }
}
