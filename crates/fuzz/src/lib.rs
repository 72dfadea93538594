//! The fuzz targets of every pure parser vssd has: what a guest, a
//! client, a trace or a config file can hand it. Each target takes
//! arbitrary bytes and must neither panic nor hang; where a parser makes a
//! promise (a request it accepts is inside the drive, a request encodes
//! back to itself) the target checks it.
//!
//! They run two ways:
//! - coverage-guided, by libFuzzer, from `fuzz/` (`scripts/fuzz.sh`,
//!   which builds with the stable toolchain: libfuzzer-sys and LLVM's
//!   SanitizerCoverage, no nightly needed);
//! - as plain tests over their committed corpora (`fuzz/corpus/TARGET/`:
//!   the seeds and every input a fuzzer found interesting or that once
//!   crashed a target), in `cargo test` (`tests/corpus.rs`).

use std::io::{Cursor, Read, Write};

use virtio_queue::{Queue, QueueT};
use vm_memory::{GuestAddress, GuestMemoryMmap};
use vssd_frontend::nbd::{handshake, proto};
use vssd_frontend::vhost_user_blk::exec::{Next, next_job};
use vssd_frontend::vhost_user_blk::request::{BlkRequest, Limits};

/// A fuzz target: arbitrary bytes in, a panic on a bug.
pub type Target = fn(&[u8]);

/// Every target, by the name its corpus directory and libFuzzer binary have.
pub const TARGETS: &[(&str, Target)] = &[
    ("nbd_handshake", nbd_handshake),
    ("nbd_request", nbd_request),
    ("vhost_queue", vhost_queue),
    ("fio_job", fio_job),
    ("iolog", iolog),
    ("blkparse", blkparse),
    ("blktrace", blktrace),
    ("vssd_trace", vssd_trace),
    ("profile_toml", profile_toml),
    ("corpus_toml", corpus_toml),
    ("ctl_json", ctl_json),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|&(_, t)| t)
}

/// An NBD client that says `input` and then hangs up; what the server
/// writes is counted (a server that talks without end fails).
struct Script<'a> {
    input: Cursor<&'a [u8]>,
    written: usize,
}

impl Read for Script<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Script<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.written += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The NBD handshake (greeting, client flags, every option) against a
/// client that sends these bytes and hangs up.
pub fn nbd_handshake(data: &[u8]) {
    let mut s = Script {
        input: Cursor::new(data),
        written: 0,
    };
    let export = handshake::ExportInfo {
        size: 1 << 30,
        preferred_block: 4096,
        description: "fuzz".into(),
    };
    let _ = handshake::negotiate(&mut s, &export);
    // Each option the server answers costs the client at least its
    // 16-byte header; no answer is larger than a few KiB.
    assert!(
        s.written <= 18 + 4096 + data.len() * 512,
        "{} bytes written for {} read",
        s.written,
        data.len()
    );
}

/// NBD transmission requests and option payloads; an accepted request
/// encodes back to the same bytes' meaning.
pub fn nbd_request(data: &[u8]) {
    if let Some(head) = data.get(..proto::REQUEST_LEN)
        && let Ok(r) = proto::parse_request(head)
    {
        assert_eq!(proto::parse_request(&proto::encode_request(&r)), Ok(r));
    }
    let _ = proto::parse_option_header(data);
    let _ = proto::parse_info_request(data);
    let _ = proto::parse_meta_request(data);
}

/// Bytes of guest memory the virtqueue target maps.
const MEM: usize = 64 << 10;

/// A virtqueue over 64 KiB of guest memory holding these bytes: its
/// descriptor table, available ring and every buffer are the fuzzer's.
/// Every chain the backend pops is parsed as the backend parses it; an
/// accepted read or write lies inside the drive.
pub fn vhost_queue(data: &[u8]) {
    let (size, data) = match data.split_first() {
        // A queue of 1 to 256 entries, a power of two.
        Some((&b, rest)) => (1u16 << (b % 9), rest),
        None => return,
    };
    let mut bytes = vec![0u8; MEM];
    let n = data.len().min(MEM);
    bytes[..n].copy_from_slice(&data[..n]);
    let Ok(mem) = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), MEM)]) else {
        return;
    };
    if vm_memory::Bytes::write_slice(&mem, &bytes, GuestAddress(0)).is_err() {
        return;
    }
    let Ok(mut q) = Queue::new(256) else { return };
    q.set_size(size);
    q.set_desc_table_address(Some(0), Some(0));
    q.set_avail_ring_address(Some(0x4000), Some(0));
    q.set_used_ring_address(Some(0x6000), Some(0));
    q.set_event_idx(size & 1 == 0);
    q.set_ready(true);
    let lim = Limits {
        capacity_sectors: 1 << 21,
        max_data_len: 1 << 20,
        max_discard_sectors: 1 << 21,
        max_discard_seg: 32,
        max_write_zeroes_sectors: 1 << 21,
        max_write_zeroes_seg: 1,
    };
    let mut descs = Vec::new();
    for _ in 0..64 {
        match next_job(&mut q, &mem, &lim, &mut descs) {
            Next::Job(job) => {
                if let Ok((
                    BlkRequest::Read { offset, len } | BlkRequest::Write { offset, len },
                    _,
                )) = job.req
                {
                    assert!(
                        offset
                            .checked_add(len)
                            .is_some_and(|e| e <= lim.capacity_sectors * 512),
                        "an accepted request {offset}+{len} beyond the drive"
                    );
                }
            }
            Next::Empty | Next::Broken(_) => break,
        }
    }
}

/// A fio job file, parsed and resolved against a 1 GiB drive as `vssd
/// sim` does before it runs (files it would read or write left out).
pub fn fio_job(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(mut jf) = vssd_sim::jobfile::parse(text, "fuzz.fio") else {
        return;
    };
    for j in &mut jf.jobs {
        j.read_iolog = None;
        j.write_iolog = None;
    }
    let _ = vssd_sim::engine::resolve(&jf.jobs, 1 << 30, 1);
}

/// An fio iolog (version 2 or 3).
pub fn iolog(data: &[u8]) {
    let _ = vssd_trace::iolog::read(Cursor::new(data), "fuzz.log");
}

/// blkparse text, read for queue and for dispatch events.
pub fn blkparse(data: &[u8]) {
    use vssd_trace::blkparse::{Event, read};
    let _ = read(Cursor::new(data), "fuzz.txt", Event::Queue);
    let _ = read(Cursor::new(data), "fuzz.txt", Event::Dispatch);
}

/// A blktrace binary.
pub fn blktrace(data: &[u8]) {
    let _ = vssd_trace::detect(data);
    let _ = vssd_trace::blktrace::read(Cursor::new(data), "fuzz.blktrace");
}

/// A vssd trace file.
pub fn vssd_trace(data: &[u8]) {
    if let Ok(f) = vssd_trace::vssd::read(Cursor::new(data), "fuzz.trace") {
        let _ = f.to_trace();
    }
}

/// A profile (preset) file.
pub fn profile_toml(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = vssd_profile::Profile::from_toml(text, "fuzz.toml");
    }
}

/// A fidelity corpus file (`validation/*.toml`).
pub fn corpus_toml(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = vssd_fidelity::corpus::CorpusFile::parse(text, "fuzz.toml");
    }
}

/// A control-socket request line, and the checks the daemon runs on what
/// it carries before it touches the drive: precondition steps, faults.
pub fn ctl_json(data: &[u8]) {
    use vssd_ctl::protocol::{CtlRequest, model_steps};
    let Ok(req) = serde_json::from_slice::<CtlRequest>(data) else {
        return;
    };
    match req {
        CtlRequest::Precondition { steps, .. } => {
            let _ = model_steps(&steps, 1 << 30);
        }
        CtlRequest::FaultAdd { fault } => {
            let _ = vssd_device::faults::Faults::default().add(fault, 1 << 30, 0);
        }
        _ => {}
    }
}
