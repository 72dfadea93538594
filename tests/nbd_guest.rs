#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! SATA and NVMe guests on vssd: a real Linux guest sees the drive through
//! QEMU's NBD client as a SATA SSD on AHCI and as an NVMe namespace, passes
//! fio verify on both, and its TRIMs show up in the drive's TRIM audit with
//! the right byte counts; the trim-passthrough scenario's numbers are right;
//! the guest sees the preset's identity (model, serial, firmware, WWN).

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::serve::{Serve, VSSD};
use common::{guest_lock, init_logging, require_program, scratch_dir};
use vssd::guest::{Disk, Guest};

const MIB: u64 = 1 << 20;

fn setup() -> std::sync::MutexGuard<'static, ()> {
    init_logging();
    require_program("qemu-system-x86_64");
    require_program("fio");
    guest_lock()
}

/// One boot, one drive, two NBD listeners: the guest sees it as /dev/sda
/// (AHCI) and /dev/nvme0n1; each listener's audit counts its own TRIMs.
/// Linux reports the preset's model, serial, firmware and WWN on SATA and
/// its serial on NVMe (QEMU 7.2 fixes the NVMe model and firmware).
#[test]
fn sata_and_nvme_guests_pass_verify_and_their_trims_are_audited() {
    let _g = setup();
    let dir = scratch_dir();
    let sata = dir.path().join("sata.sock");
    let nvme = dir.path().join("nvme.sock");
    let serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "crucial-m4-128",
            "--capacity",
            "512M",
            "--memory",
            "--nbd",
            &format!("unix:{}", sata.display()),
            "--nbd",
            &format!("unix:{}", nvme.display()),
        ],
    );
    let fio = |name: &str, dev: &str, offset: u64| {
        format!(
            "fio --name={name} --filename={dev} --offset={offset} --size=64M --rw=randwrite \
             --bs=16k --iodepth=16 --direct=1 --ioengine=libaio --verify=crc32c \
             --verify_fatal=1 --do_verify=1 --randseed=7 --output-format=terse --terse-version=3 \
             | cut -d';' -f5 | sed 's/^/{name}-errors=/'"
        )
    };
    let script = format!(
        "set -e
echo \"sata-id model=$(cat /sys/block/sda/device/model) rev=$(cat /sys/block/sda/device/rev) wwid=$(cat /sys/block/sda/device/wwid)\"
echo \"sata-serial $(tail -c +5 /sys/block/sda/device/vpd_pg80)\"
echo \"nvme-id serial=$(cat /sys/class/nvme/nvme0/serial) model=$(cat /sys/class/nvme/nvme0/model) fw=$(cat /sys/class/nvme/nvme0/firmware_rev)\"
for d in sda nvme0n1; do
  q=/sys/block/$d/queue
  echo \"$d size=$(cat /sys/block/$d/size) rot=$(cat $q/rotational) dmax=$(cat $q/discard_max_bytes)\"
done
{}
{}
blkdiscard -o 0 -l {} /dev/sda && echo sata-trim=ok
blkdiscard -o {} -l {} /dev/nvme0n1 && echo nvme-trim=ok
echo zeros=$(dd if=/dev/nvme0n1 bs=1M count=32 iflag=direct 2>/dev/null | tr -d '\\000' | wc -c)",
        fio("sata", "/dev/sda", 0),
        fio("nvme", "/dev/nvme0n1", 256 * MIB),
        32 * MIB,
        256 * MIB,
        16 * MIB,
    );
    // What the daemon says the drive is: the guest must see the same.
    let identity = serve.report().drive.identity.expect("drive identity");
    assert_eq!(identity.model, "M4-CT128M4SSD2");
    let run = Guest::new()
        .disk(Disk::NbdSata {
            socket: sata.clone(),
            export: "vssd".into(),
            identity: identity.clone(),
        })
        .disk(Disk::NbdNvme {
            socket: nvme.clone(),
            export: "".into(),
            identity: identity.clone(),
        })
        .run_script(&script, Duration::from_secs(900))
        .expect("guest run");
    eprintln!("{}", run.output);
    run.expect_success();
    let out = &run.output;
    let line = |prefix: &str| {
        out.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} line:\n{out}"))
            .to_string()
    };
    // SCSI INQUIRY (libata's translation) carries 16 characters of the
    // ATA model and 4 of the firmware revision; the serial comes whole.
    let sata_id = line("sata-id ");
    assert!(sata_id.contains("model=M4-CT128M4SSD2"), "{sata_id}");
    assert!(sata_id.contains("rev=0009"), "{sata_id}");
    assert!(
        sata_id.contains(&format!("{:x}", identity.wwn.unwrap())),
        "the WWN must reach the guest: {sata_id}"
    );
    let sata_serial = line("sata-serial ");
    assert!(sata_serial.contains(&identity.serial), "{sata_serial}");
    let nvme_id = line("nvme-id ");
    assert!(
        nvme_id.contains(&format!("serial={}", identity.serial)),
        "{nvme_id}"
    );
    assert!(nvme_id.contains("model=QEMU NVMe Ctrl"), "{nvme_id}");
    for d in ["sda", "nvme0n1"] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{d} ")))
            .unwrap_or_else(|| panic!("no {d} line:\n{out}"));
        assert!(
            line.contains(&format!("size={}", 512 * MIB / 512)),
            "{line}"
        );
        assert!(line.contains("rot=0"), "{d} must be non-rotational: {line}");
        assert!(!line.ends_with("dmax=0"), "{d} must take discards: {line}");
    }
    assert!(
        out.contains("sata-errors=0") && out.contains("nvme-errors=0"),
        "{out}"
    );
    assert!(out.contains("sata-trim=ok") && out.contains("nvme-trim=ok"));
    // Both devices are one drive: what the SATA side trimmed reads as zeros
    // through NVMe.
    assert!(out.contains("zeros=0"), "{out}");

    let rep = serve.report();
    let fe = |sock: &std::path::Path| {
        rep.frontends
            .iter()
            .find(|f| f.name == format!("unix:{}", sock.display()))
            .unwrap_or_else(|| panic!("no frontend for {}", sock.display()))
            .clone()
    };
    let (s, n) = (fe(&sata), fe(&nvme));
    eprintln!("sata audit {:?}\nnvme audit {:?}", s.io.trim, n.io.trim);
    assert_eq!(s.io.trim.requested_bytes, 32 * MIB, "sata TRIM bytes");
    // ATA TRIM ranges hold at most 65535 sectors, so the 32 MiB arrive as
    // 65535 + 1 sectors: the 4 KiB mapping unit straddling the boundary is
    // only partly covered by each command and stays mapped, as on a drive
    // that does not merge ranges. Everything else fio wrote is freed.
    assert!(s.io.trim.discard_cmds >= 1);
    let unit = 4096;
    assert!(
        s.io.trim.freed_bytes + unit * (s.io.trim.discard_cmds - 1) >= 32 * MIB,
        "sata: freed {} of 32 MiB in {} commands",
        s.io.trim.freed_bytes,
        s.io.trim.discard_cmds
    );
    assert_eq!(s.io.trim.already_unmapped_bytes, 0);
    assert_eq!(n.io.trim.requested_bytes, 16 * MIB, "nvme TRIM bytes");
    assert_eq!(n.io.trim.freed_bytes, 16 * MIB);
    assert!(s.io.ops["write"].bytes >= 64 * MIB);
    assert!(n.io.ops["write"].bytes >= 64 * MIB);
    serve.stop_ok();
}

/// `vssd demo --scenario trim-passthrough` on SATA: with -o discard and with
/// fstrim the deleted file reaches the drive as TRIM and is freed; with
/// neither, nothing arrives.
#[test]
fn trim_passthrough_numbers_on_sata() {
    let _g = setup();
    let out = Command::new(VSSD)
        .args([
            "demo",
            "--scenario",
            "trim-passthrough",
            "--bus",
            "sata",
            "--capacity",
            "256M",
            "--random-passes",
            "0.5",
            "--json",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("running vssd demo");
    assert!(
        out.status.success(),
        "demo failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    eprintln!("{}", serde_json::to_string_pretty(&r).unwrap());
    let case = |name: &str| {
        r["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["case"] == name)
            .unwrap_or_else(|| panic!("no case {name}"))
            .clone()
    };
    let n = |c: &serde_json::Value, k: &str| c[k].as_u64().unwrap();
    for name in ["discard", "fstrim"] {
        let c = case(name);
        let deleted = n(&c, "deleted_bytes");
        assert!(deleted >= 100 * MIB, "{c}");
        // The filesystem may trim a little more (its own freed metadata,
        // fstrim: all free space); everything deleted is freed in the FTL.
        assert!(
            n(&c, "trim_bytes") >= deleted,
            "{name}: TRIM must cover the file: {c}"
        );
        assert!(n(&c, "trim_cmds") > 0);
        assert!(
            n(&c, "freed_bytes") >= deleted - deleted / 50,
            "{name}: the file's space must be freed: {c}"
        );
    }
    // TrimCheck's read-back: this preset's trimmed LBAs read as zeros.
    assert_eq!(r["read_after_trim"], "zeros", "{r}");
    for name in ["discard", "fstrim"] {
        assert_eq!(case(name)["read_back"], "zeros", "{name}");
    }
    let none = case("none");
    assert_eq!(
        none["read_back"], "old",
        "untrimmed LBAs keep the file: {none}"
    );
    assert_eq!(n(&none, "trim_cmds"), 0, "{none}");
    assert_eq!(n(&none, "trim_bytes"), 0);
    assert_eq!(n(&none, "freed_bytes"), 0);
}
