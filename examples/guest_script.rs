#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! Boot the test guest with one vhost-user-blk disk and run a shell script
//! in it: `cargo run --example guest_script -- SOCKET QUEUES SCRIPT_FILE [TIMEOUT_S]`.
//! The guest sees the disk as /dev/vda. Handy to poke at `vssd serve` by hand.

use std::time::Duration;
use vssd::guest::{Disk, Guest};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 4 {
        eprintln!("usage: guest_script SOCKET QUEUES SCRIPT_FILE [TIMEOUT_S]");
        std::process::exit(2);
    }
    let script = std::fs::read_to_string(&a[3]).expect("script file");
    let queues: u16 = a[2].parse().expect("queues");
    let timeout = a.get(4).and_then(|t| t.parse().ok()).unwrap_or(300);
    let run = Guest::new()
        .smp(2)
        .disk(Disk::VhostUserBlk {
            socket: a[1].clone().into(),
            num_queues: queues,
        })
        .run_script(&script, Duration::from_secs(timeout));
    match run {
        Ok(r) => {
            print!("{}", r.output);
            eprintln!(
                "exit {} (boot {:?}, total {:?}, {:?})",
                r.exit_code, r.boot_time, r.total_time, r.accel
            );
            std::process::exit(r.exit_code);
        }
        Err(e) => {
            eprintln!("guest failed: {e}");
            std::process::exit(1);
        }
    }
}
