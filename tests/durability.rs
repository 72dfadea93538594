#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! Durability of every command that asks for it, through both frontends:
//! a power cut right after the reply keeps what the command wrote.
//!
//! - NBD (libnbd's nbdsh): WRITE with FUA, WRITE_ZEROES with FUA with and
//!   without NO_HOLE.
//! - vhost-user-blk (vssd's own driver) with the write cache turned off
//!   (`wce` = 0, write-through: the guest sends no FLUSH, so every write
//!   is durable before it completes): WRITE, WRITE_ZEROES with and without
//!   unmap.
//!
//! Each case writes the whole area (flushed), then a few unflushed writes
//! elsewhere, then the command over a random range; the cut comes as soon
//! as the reply is in. The drive's clock runs 20 times slower than the
//! wall clock, so the few milliseconds between the reply and the cut are
//! well inside the time the write buffer holds data. After power-on the
//! range reads what the command wrote, and the cut's list of lost writes
//! never touches it. Presets without power-loss protection, with trimmed
//! LBAs reading zeros and not.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::scratch_dir;
use common::serve::{Serve, VSSD};
use vhost::vhost_user::message::VhostUserConfigFlags;
use vhost::vhost_user::{Frontend, VhostUserFrontend as _};
use virtio_bindings::virtio_blk::VIRTIO_BLK_S_OK;
use vssd::loadgen::blk::{self, BlkOp, Scratch};
use vssd::loadgen::{BlkDriver, DriverOptions};

const T: Duration = Duration::from_secs(20);
const OK: u8 = VIRTIO_BLK_S_OK as u8;
const PRESETS: [&str; 3] = ["sata-mlc-2011", "intel-x25m-g1", "samsung-pb22j"];
/// The area the cases write in.
const SPAN: u64 = 4 << 20;
/// Offset of `wce` in `struct virtio_blk_config`.
const WCE_OFFSET: u32 = 32;

/// `vssd ctl ARGS --json` (must succeed).
fn ctl_json(control: &Path, args: &[&str]) -> serde_json::Value {
    let out = Command::new(VSSD)
        .args(["ctl", "--control"])
        .arg(control)
        .args(args)
        .arg("--json")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A case's random range and unflushed writes, from `seed`.
struct Case {
    offset: u64,
    len: u64,
    others: Vec<u64>,
}

impl Case {
    fn new(seed: u64) -> Case {
        let mut rng = vssd_common::rng::Rng::new(seed);
        let sectors = 1 + rng.below(256);
        Case {
            offset: rng.below(SPAN / 512 - sectors) * 512,
            len: sectors * 512,
            others: (0..1 + rng.below(6))
                .map(|_| rng.below(SPAN / 4096 - 1) * 4096)
                .collect(),
        }
    }
}

/// The latest cut lost nothing of `offset..+len`.
fn check_lost(list: &serde_json::Value, offset: u64, len: u64, what: &str) {
    for l in list["power"]["last_cut"]["lost"].as_array().unwrap() {
        let (o, n) = (l["offset"].as_u64().unwrap(), l["length"].as_u64().unwrap());
        assert!(
            o + n <= offset || offset + len <= o,
            "{what}: the acknowledged command at {offset}+{len} was lost: {l}"
        );
    }
    assert!(list["power"]["cuts"].as_u64().unwrap() > 0, "{list}");
}

#[test]
fn nbd_fua_commands_survive_a_cut_right_after_their_reply() {
    let kinds = [
        (
            "WRITE+FUA",
            "h.pwrite(bytes([0x77]) * L, O, flags=nbd.CMD_FLAG_FUA)",
            0x77,
        ),
        (
            "WRITE_ZEROES+FUA+NO_HOLE",
            "h.zero(L, O, flags=nbd.CMD_FLAG_FUA | nbd.CMD_FLAG_NO_HOLE)",
            0,
        ),
        (
            "WRITE_ZEROES+FUA",
            "h.zero(L, O, flags=nbd.CMD_FLAG_FUA)",
            0,
        ),
    ];
    let mut cases = 0;
    for preset in PRESETS {
        let dir = scratch_dir();
        let sock = dir.path().join("nbd.sock");
        let nbd = format!("unix:{}", sock.display());
        let serve = Serve::start_with(
            dir.path(),
            &[
                "--profile",
                preset,
                "--capacity",
                "64M",
                "--memory",
                "--time-scale",
                "20",
                "--nbd",
                &nbd,
            ],
            false,
        );
        for (kind, command, byte) in kinds {
            for seed in 0..2u64 {
                let c = Case::new(seed);
                let others: Vec<String> = c.others.iter().map(u64::to_string).collect();
                // The cut is asked for from inside the client, as soon as
                // the reply is in.
                let script = format!(
                    "import subprocess\n\
                     h.pwrite(bytes([0x11]) * {SPAN}, 0)\n\
                     h.flush()\n\
                     for o in [{others}]:\n    h.pwrite(bytes([0x22]) * 4096, o)\n\
                     O, L = {o}, {l}\n\
                     {command}\n\
                     subprocess.run(['{vssd}', 'ctl', '--control', '{ctl}', 'power-cut'], check=True, stdout=subprocess.DEVNULL)\n",
                    others = others.join(", "),
                    o = c.offset,
                    l = c.len,
                    vssd = VSSD,
                    ctl = serve.control.display(),
                );
                let out = Command::new("nbdsh")
                    .args(["-u", &format!("nbd+unix:///?socket={}", sock.display())])
                    .args(["-c", &script])
                    .env("PATH", "/usr/bin:/bin:/usr/sbin:/sbin")
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                let what = format!("{preset} {kind} seed {seed}");
                assert!(
                    out.status.success(),
                    "{what}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let list = ctl_json(&serve.control, &["faults"]);
                check_lost(&list, c.offset, c.len, &what);
                ctl_json(&serve.control, &["power-on"]);
                let out = Command::new("nbdsh")
                    .args(["-u", &format!("nbd+unix:///?socket={}", sock.display())])
                    .args([
                        "-c",
                        &format!("print(sorted(set(h.pread({}, {}))))", c.len, c.offset),
                    ])
                    .env("PATH", "/usr/bin:/bin:/usr/sbin:/sbin")
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                assert_eq!(
                    String::from_utf8_lossy(&out.stdout).trim(),
                    format!("[{byte}]"),
                    "{what}: {}+{} after the cut",
                    c.offset,
                    c.len
                );
                cases += 1;
            }
        }
        serve.stop_ok();
    }
    assert_eq!(cases, PRESETS.len() * 3 * 2);
}

/// Turn the device's write cache off, as a guest does with
/// `echo "write through" > /sys/block/vda/cache_type`.
fn write_through(d: &mut BlkDriver) {
    let fe: &mut Frontend = d.frontend();
    fe.set_config(WCE_OFFSET, VhostUserConfigFlags::WRITABLE, &[0])
        .expect("set_config wce = 0");
}

#[test]
fn vhost_user_write_through_commands_survive_a_cut_right_after_their_reply() {
    let mut cases = 0;
    for preset in PRESETS {
        let dir = scratch_dir();
        let serve = Serve::start(
            dir.path(),
            &[
                "--profile",
                preset,
                "--capacity",
                "64M",
                "--memory",
                "--time-scale",
                "20",
            ],
        );
        for kind in ["WRITE", "WRITE_ZEROES", "WRITE_ZEROES unmap"] {
            for seed in 0..2u64 {
                let c = Case::new(seed);
                let what = format!("{preset} {kind} seed {seed}");
                let mut d =
                    BlkDriver::connect(&serve.socket, &DriverOptions::default()).expect("connect");
                let s = Scratch::new(&mut d, SPAN as u32).unwrap();
                let run = |d: &mut BlkDriver, op: &BlkOp| {
                    let r = blk::run(d, 0, &s, op, T).unwrap();
                    assert_eq!(r.status, OK, "{what}: {op:?}");
                    r
                };
                run(
                    &mut d,
                    &BlkOp::Write {
                        sector: 0,
                        data: vec![0x11; SPAN as usize],
                    },
                );
                run(&mut d, &BlkOp::Flush);
                // Unflushed writes in write-back mode, then the command
                // with the cache off.
                for &o in &c.others {
                    run(
                        &mut d,
                        &BlkOp::Write {
                            sector: o / 512,
                            data: vec![0x22; 4096],
                        },
                    );
                }
                write_through(&mut d);
                let ranges = vec![(c.offset / 512, (c.len / 512) as u32)];
                let (op, byte) = match kind {
                    "WRITE" => (
                        BlkOp::Write {
                            sector: c.offset / 512,
                            data: vec![0x77; c.len as usize],
                        },
                        0x77,
                    ),
                    "WRITE_ZEROES" => (
                        BlkOp::WriteZeroes {
                            ranges,
                            unmap: false,
                        },
                        0,
                    ),
                    _ => (
                        BlkOp::WriteZeroes {
                            ranges,
                            unmap: true,
                        },
                        0,
                    ),
                };
                run(&mut d, &op);
                ctl_json(&serve.control, &["power-cut"]);
                let list = ctl_json(&serve.control, &["faults"]);
                check_lost(&list, c.offset, c.len, &what);
                drop(d);
                ctl_json(&serve.control, &["power-on"]);
                let mut d = BlkDriver::connect(&serve.socket, &DriverOptions::default())
                    .expect("reconnect after power-on");
                let s = Scratch::new(&mut d, SPAN as u32).unwrap();
                let r = blk::run(
                    &mut d,
                    0,
                    &s,
                    &BlkOp::Read {
                        sector: c.offset / 512,
                        len: c.len as u32,
                    },
                    T,
                )
                .unwrap();
                assert!(
                    r.status == OK && r.data.iter().all(|&b| b == byte),
                    "{what}: {}+{} reads {:?} after the cut, not {byte:#x}",
                    c.offset,
                    c.len,
                    r.data.iter().find(|&&b| b != byte)
                );
                cases += 1;
            }
        }
        serve.stop_ok();
    }
    assert_eq!(cases, PRESETS.len() * 3 * 2);
}
