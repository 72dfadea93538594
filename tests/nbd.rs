#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! The NBD frontend against independent clients (libnbd's nbdinfo,
//! nbdcopy, nbdsh; qemu-img) and against deliberately malformed input,
//! with a second client checking throughout that the daemon keeps serving.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::serve::{Serve, VSSD};
use common::{require_program, rss_bytes, scratch_dir};
use vssd::frontend::nbd::proto::{self, cmd, errno, opt, rep};

const MIB: u64 = 1 << 20;

fn uri(sock: &Path) -> String {
    format!("nbd+unix:///?socket={}", sock.display())
}

/// Run a libnbd tool (Debian's python3 for nbdsh, whatever python is first on PATH).
fn tool(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .env("PATH", "/usr/bin:/bin:/usr/sbin:/sbin")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e} (install with scripts/install-deps.sh)"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn start(dir: &Path) -> (Serve, std::path::PathBuf) {
    let nbd = dir.join("nbd.sock");
    let serve = Serve::start(
        dir,
        &[
            "--profile",
            "sata-mlc-2011",
            "--capacity",
            "256M",
            "--memory",
            "--nbd",
            &format!("unix:{}", nbd.display()),
        ],
    );
    (serve, nbd)
}

/// nbdinfo still sees the export (the daemon serves a second client).
fn still_serving(nbd: &Path) {
    let out = tool("nbdinfo", &["--size", &uri(nbd)]);
    assert_eq!(out.trim(), (256 * MIB).to_string());
}

#[test]
fn libnbd_tools_see_the_drive_and_what_it_holds() {
    for p in ["nbdinfo", "nbdcopy", "qemu-img"] {
        require_program(p);
    }
    let dir = scratch_dir();
    let (serve, nbd) = start(dir.path());
    let u = uri(&nbd);

    let info: serde_json::Value = serde_json::from_str(&tool("nbdinfo", &["--json", &u])).unwrap();
    let e = &info["exports"][0];
    assert_eq!(e["export-size"], 256 * MIB);
    assert_eq!(e["is_rotational"], false);
    assert_eq!(e["can_trim"], true);
    assert_eq!(e["can_zero"], true);
    assert_eq!(e["can_fua"], true);
    assert_eq!(e["can_flush"], true);
    assert_eq!(e["block_size_minimum"], 512);
    assert_eq!(e["block_size_preferred"], 8192, "the profile's page");
    assert!(e["block_size_maximum"].as_u64().unwrap() >= 32 * MIB);
    assert!(
        info["exports"][0]["contexts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "base:allocation")
    );
    // Unknown export names are refused; "" and "vssd" work.
    let bad = Command::new("nbdinfo")
        .arg(format!("nbd+unix:///other?socket={}", nbd.display()))
        .output()
        .unwrap();
    assert!(!bad.status.success());
    tool(
        "nbdinfo",
        &[
            "--size",
            &format!("nbd+unix:///vssd?socket={}", nbd.display()),
        ],
    );

    // Data in and out with nbdcopy (multi-connection, concurrent requests).
    let data: Vec<u8> = (0..16 * MIB as usize)
        .map(|i| (i * 31 % 251) as u8)
        .collect();
    let src = dir.path().join("in.bin");
    std::fs::write(&src, &data).unwrap();
    tool("nbdcopy", &[src.to_str().unwrap(), &u]);
    let back = dir.path().join("out.bin");
    tool("nbdcopy", &[&u, back.to_str().unwrap()]);
    let back = std::fs::read(&back).unwrap();
    assert!(back[..data.len()] == data[..], "nbdcopy read back differs");
    assert!(back[data.len()..].iter().all(|&b| b == 0));

    // The map follows the FTL: written = data, the rest a hole.
    let map = tool("nbdinfo", &["--map", "--totals", &u]);
    assert!(map.contains("16777216"), "{map}");
    let qmap: serde_json::Value =
        serde_json::from_str(&tool("qemu-img", &["map", "--output=json", &u])).unwrap();
    let first = &qmap[0];
    assert_eq!(
        (first["start"].as_u64(), first["length"].as_u64()),
        (Some(0), Some(16 * MIB))
    );
    assert_eq!(first["data"], true);
    assert_eq!(qmap[1]["zero"], true);

    // nbdsh: TRIM, WRITE_ZEROES with and without NO_HOLE, FUA, block status.
    let script = format!(
        "h.trim({}, 0)\nh.zero({}, {})\nh.zero({}, {}, nbd.CMD_FLAG_NO_HOLE)\n\
         h.pwrite(b'x' * 4096, {}, nbd.CMD_FLAG_FUA)\nh.flush()\nh.cache(4096, 0)\n\
         ext = []\nh.block_status({}, 0, lambda ctx, off, e, err: ext.extend(e))\nprint('EXT', ext)",
        2 * MIB,
        2 * MIB,
        4 * MIB,
        MIB,
        8 * MIB,
        12 * MIB,
        16 * MIB
    );
    let out = tool("nbdsh", &["--base-allocation", "-u", &u, "-c", &script]);
    let ext: Vec<u64> = out
        .lines()
        .find_map(|l| l.strip_prefix("EXT "))
        .expect("block status printed")
        .trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .map(|x| x.trim().parse().unwrap())
        .collect();
    // 0-2M trimmed, 2-4M untouched data, 4-6M zeroed with unmap: holes.
    assert_eq!(&ext[..2], &[2 * MIB, 3], "trimmed range is a hole: {ext:?}");
    assert_eq!(ext[3], 0, "written data is data: {ext:?}");

    // The TRIM audit and the TRIM log.
    let rep = serve.report();
    let fe = rep.frontends.iter().find(|f| f.kind == "nbd").unwrap();
    assert_eq!(fe.io.trim.discard_cmds, 1);
    assert_eq!(fe.io.trim.write_zeroes_cmds, 2);
    assert_eq!(
        fe.io.trim.freed_bytes,
        4 * MIB,
        "2 MiB trimmed + 2 MiB unmapped by zeroing"
    );
    let log = Command::new(VSSD)
        .args(["ctl", "--control"])
        .arg(&serve.control)
        .args(["trim-log", "--json"])
        .output()
        .unwrap();
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&log.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["kind"], "discard");
    assert_eq!(lines[0]["ranges"][0][1], 2 * MIB);
    assert_eq!(lines[1]["kind"], "write-zeroes-unmap");
    assert_eq!(lines[2]["kind"], "write-zeroes");
    assert!(
        lines[0]["source"]
            .as_str()
            .unwrap()
            .starts_with("nbd unix:")
    );
    serve.stop_ok();
}

// --------------------------------------------------------- a raw client

struct Raw(UnixStream);

impl Raw {
    fn greet(sock: &Path) -> Raw {
        let mut s = UnixStream::connect(sock).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut g = [0u8; 18];
        s.read_exact(&mut g).unwrap();
        assert_eq!(&g[..8], b"NBDMAGIC");
        s.write_all(&3u32.to_be_bytes()).unwrap();
        Raw(s)
    }

    fn option(&mut self, option: u32, data: &[u8]) {
        let mut v = proto::IHAVEOPT.to_be_bytes().to_vec();
        v.extend(option.to_be_bytes());
        v.extend((data.len() as u32).to_be_bytes());
        v.extend(data);
        self.0.write_all(&v).unwrap();
    }

    fn reply(&mut self) -> (u32, Vec<u8>) {
        let mut h = [0u8; 20];
        self.0.read_exact(&mut h).unwrap();
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut d = vec![0u8; len as usize];
        self.0.read_exact(&mut d).unwrap();
        (u32::from_be_bytes(h[12..16].try_into().unwrap()), d)
    }

    /// Simple replies, export "".
    fn go(sock: &Path) -> Raw {
        let mut r = Raw::greet(sock);
        let mut d = 0u32.to_be_bytes().to_vec();
        d.extend(0u16.to_be_bytes());
        r.option(opt::GO, &d);
        while r.reply().0 != rep::ACK {}
        r
    }

    fn request(&mut self, kind: u16, flags: u16, offset: u64, len: u32, cookie: u64) {
        let h = proto::encode_request(&proto::Request {
            flags,
            kind,
            cookie,
            offset,
            len,
        });
        self.0.write_all(&h).unwrap();
    }

    /// A simple reply: (error, cookie).
    fn simple(&mut self) -> (u32, u64) {
        let mut h = [0u8; 16];
        self.0.read_exact(&mut h).unwrap();
        assert_eq!(
            u32::from_be_bytes(h[0..4].try_into().unwrap()),
            proto::SIMPLE_REPLY_MAGIC
        );
        (
            u32::from_be_bytes(h[4..8].try_into().unwrap()),
            u64::from_be_bytes(h[8..16].try_into().unwrap()),
        )
    }

    /// True if the server closed the connection.
    fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.0.read(&mut b), Ok(0) | Err(_))
    }
}

#[test]
fn malformed_and_hostile_clients_get_errors_not_a_wedged_daemon() {
    require_program("nbdinfo");
    let dir = scratch_dir();
    let (mut serve, nbd) = start(dir.path());

    // Handshake: bad option magic, unknown export, huge option, junk.
    let mut r = Raw::greet(&nbd);
    r.0.write_all(&[0xAB; 16]).unwrap();
    assert!(r.closed());
    let mut r = Raw::greet(&nbd);
    let mut d = 5u32.to_be_bytes().to_vec();
    d.extend(b"nopes");
    d.extend(0u16.to_be_bytes());
    r.option(opt::GO, &d);
    assert_eq!(r.reply().0, rep::ERR_UNKNOWN);
    r.option(opt::GO, &[1, 2, 3]);
    assert_eq!(r.reply().0, rep::ERR_INVALID);
    r.option(77, &[]);
    assert_eq!(r.reply().0, rep::ERR_UNSUP);
    let mut r2 = Raw::greet(&nbd);
    let mut v = proto::IHAVEOPT.to_be_bytes().to_vec();
    v.extend(opt::GO.to_be_bytes());
    v.extend(u32::MAX.to_be_bytes());
    r2.0.write_all(&v).unwrap();
    assert!(r2.closed());
    still_serving(&nbd);

    // Transmission: each bad request gets its error, in order of cookies.
    let mut t = Raw::go(&nbd);
    let cap = 256 * MIB;
    let cases: [(u16, u16, u64, u32, u32); 7] = [
        (99, 0, 0, 0, errno::EINVAL),                        // unknown command
        (cmd::READ, 0, cap - 512, 1024, errno::EINVAL),      // past the end
        (cmd::READ, 0, 100, 512, errno::EINVAL),             // unaligned
        (cmd::READ, 0, 0, (64 * MIB) as u32, errno::EINVAL), // over 32 MiB
        (cmd::TRIM, 0, cap, 512, errno::EINVAL),             // trim past the end
        (cmd::WRITE_ZEROES, 1 << 4, 0, 512, errno::EINVAL),  // FAST_ZERO not offered
        (cmd::BLOCK_STATUS, 0, 0, 512, errno::EINVAL),       // no meta context
    ];
    for (i, &(kind, flags, off, len, _)) in cases.iter().enumerate() {
        t.request(kind, flags, off, len, i as u64);
    }
    let mut got: Vec<(u32, u64)> = (0..cases.len()).map(|_| t.simple()).collect();
    got.sort_by_key(|g| g.1);
    for (i, c) in cases.iter().enumerate() {
        assert_eq!(got[i], (c.4, i as u64), "case {i}: {c:?}");
    }
    // A write past the end: its payload is consumed, ENOSPC comes back,
    // and the connection stays in step.
    t.request(cmd::WRITE, 0, cap - 512, 1024, 100);
    t.0.write_all(&[7u8; 1024]).unwrap();
    assert_eq!(t.simple(), (errno::ENOSPC, 100));
    t.request(cmd::READ, 0, 0, 512, 101);
    assert_eq!(t.simple(), (0, 101));
    let mut sector = [0u8; 512];
    t.0.read_exact(&mut sector).unwrap();
    // A write header announcing 1 GiB: hard disconnect (allowed over 32 MiB).
    t.request(cmd::WRITE, 0, 0, 1 << 30, 102);
    assert!(t.closed());
    still_serving(&nbd);

    // Half a request, then gone.
    let mut h = Raw::go(&nbd);
    h.0.write_all(&proto::REQUEST_MAGIC.to_be_bytes()).unwrap();
    drop(h);
    // Bad request magic: closed.
    let mut b = Raw::go(&nbd);
    b.0.write_all(&[0u8; 28]).unwrap();
    assert!(b.closed());
    still_serving(&nbd);

    // A client that never reads its replies: the daemon serves others meanwhile.
    let mut lazy = Raw::go(&nbd);
    lazy.0
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    for i in 0..64 {
        lazy.request(cmd::READ, 0, 0, (32 * MIB) as u32, i);
    }
    still_serving(&nbd);
    drop(lazy);
    still_serving(&nbd);

    // The lazy client's requests leave the in-flight set once it is gone.
    let t = std::time::Instant::now();
    while serve.report().connection.in_flight > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "requests stuck in flight"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let rep = serve.report();
    let fe = rep.frontends.iter().find(|f| f.kind == "nbd").unwrap();
    assert_eq!(fe.io.rejected, cases.len() as u64 + 1, "{:?}", fe.io);
    assert!(serve.alive());
    let (code, log) = serve.stop();
    assert_eq!(code, 0, "{log}");
}

/// Clients that send large READs and never read the replies hold at most
/// the daemon's buffer budget (here 96 MiB; each connection 64 MiB), not
/// 32 MiB per request: before the budget, these three clients pinned 3 GiB.
#[test]
fn lazy_clients_cannot_pin_more_than_the_buffer_budget() {
    let dir = scratch_dir();
    let nbd = dir.path().join("nbd.sock");
    let serve = Serve::start_with(
        dir.path(),
        &[
            "--profile",
            "instant",
            "--capacity",
            "256M",
            "--memory",
            "--nbd",
            &format!("unix:{}", nbd.display()),
            "--nbd-buffer-limit",
            "96M",
        ],
        false,
    );
    // Data everywhere, so every READ buffer is really filled.
    let mut w = Raw::go(&nbd);
    let chunk = vec![0x5au8; (32 * MIB) as usize];
    for i in 0..8u64 {
        w.request(cmd::WRITE, 0, i * 32 * MIB, chunk.len() as u32, i);
        w.0.write_all(&chunk).unwrap();
        assert_eq!(w.simple(), (0, i));
    }
    drop(w);
    std::thread::sleep(Duration::from_millis(300));
    let before = rss_bytes(serve.pid());
    let lazy: Vec<Raw> = (0..3)
        .map(|c| {
            let mut l = Raw::go(&nbd);
            l.0.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
            for i in 0..32u64 {
                l.request(
                    cmd::READ,
                    0,
                    (i % 8) * 32 * MIB,
                    (32 * MIB) as u32,
                    c * 100 + i,
                );
            }
            l
        })
        .collect();
    let mut peak = 0;
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(100));
        peak = peak.max(rss_bytes(serve.pid()).saturating_sub(before));
    }
    assert!(
        peak < 200 * MIB,
        "lazy clients made the daemon hold {} MiB more",
        peak / MIB
    );
    drop(lazy);
    // Once they are gone, a client is served in full.
    let mut r = Raw::go(&nbd);
    r.request(cmd::READ, 0, 0, (32 * MIB) as u32, 7);
    assert_eq!(r.simple(), (0, 7));
    let mut data = vec![0u8; (32 * MIB) as usize];
    r.0.read_exact(&mut data).unwrap();
    assert!(data.iter().all(|&b| b == 0x5a));
    serve.stop_ok();
}

/// Connections still in the handshake count against the 64-connection
/// limit (one over it is closed at once) and are closed at the handshake's
/// deadline, even while they drip a byte at a time.
#[test]
fn handshaking_connections_are_counted_and_cut_off_at_the_deadline() {
    let dir = scratch_dir();
    let nbd = dir.path().join("nbd.sock");
    let serve = Serve::start_env(
        dir.path(),
        &[
            "--profile",
            "instant",
            "--capacity",
            "64M",
            "--memory",
            "--nbd",
            &format!("unix:{}", nbd.display()),
        ],
        false,
        &[("VSSD_NBD_HANDSHAKE_TIMEOUT_MS", "3000")],
    );
    let t0 = std::time::Instant::now();
    // 64 silent clients (each sees the greeting: it is being served).
    let silent: Vec<UnixStream> = (0..64)
        .map(|_| {
            let mut s = UnixStream::connect(&nbd).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut g = [0u8; 18];
            s.read_exact(&mut g).unwrap();
            s
        })
        .collect();
    // The 65th is refused at once.
    let mut over = UnixStream::connect(&nbd).unwrap();
    over.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut b = [0u8; 18];
    assert!(
        matches!(over.read(&mut b), Ok(0)),
        "a connection over the limit must be closed at once"
    );
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    // A dripping client, once the silent ones are gone.
    for mut s in silent {
        let mut b = [0u8; 1];
        assert!(matches!(s.read(&mut b), Ok(0) | Err(_)));
    }
    let t1 = std::time::Instant::now();
    assert!(
        t1 - t0 < Duration::from_secs(6),
        "silent clients closed at the deadline"
    );
    let mut drip = UnixStream::connect(&nbd).unwrap();
    let mut g = [0u8; 18];
    drip.read_exact(&mut g).unwrap();
    let mut bytes = 3u32.to_be_bytes().to_vec();
    bytes.extend(proto::IHAVEOPT.to_be_bytes());
    bytes.extend(opt::GO.to_be_bytes());
    bytes.extend(64u32.to_be_bytes());
    bytes.extend([0u8; 64]);
    let mut cut = false;
    for b in bytes {
        if drip.write_all(&[b]).is_err() {
            cut = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        if t1.elapsed() > Duration::from_secs(5) {
            break;
        }
    }
    drip.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut b = [0u8; 1];
    cut = cut || matches!(drip.read(&mut b), Ok(0));
    assert!(cut, "a dripping client must be closed at the deadline");
    // The daemon serves new clients.
    let mut r = Raw::go(&nbd);
    r.request(cmd::READ, 0, 0, 512, 1);
    assert_eq!(r.simple(), (0, 1));
    serve.stop_ok();
}

/// `--nbd tcp:` refuses non-loopback addresses unless told otherwise; the
/// NBD-only daemon needs no vhost-user socket.
#[test]
fn tcp_listener_is_loopback_unless_asked() {
    require_program("nbdinfo");
    let dir = scratch_dir();
    let out = Command::new(VSSD)
        .args(["serve", "--profile", "instant", "--memory", "--control"])
        .arg(dir.path().join("c.sock"))
        .args(["--nbd", "tcp:0.0.0.0:10899"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--nbd-listen-any"), "{err}");

    // A free loopback port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("tcp:127.0.0.1:{port}");
    let serve = Serve::start_with(
        dir.path(),
        &[
            "--profile",
            "instant",
            "--capacity",
            "64M",
            "--memory",
            "--nbd",
            &addr,
        ],
        false,
    );
    let out = tool("nbdinfo", &["--size", &format!("nbd://127.0.0.1:{port}")]);
    assert_eq!(out.trim(), (64 * MIB).to_string());
    assert_eq!(serve.report().frontends.len(), 1, "NBD only");
    serve.stop_ok();
}

/// `[identity] read_after_trim` through NBD with libnbd: after a TRIM a read
/// returns zeros, the 0xFF pattern or the old data, as the profile says;
/// write-zeroes (which may deallocate) reads zeros in every mode; block
/// status calls a trimmed range a hole, and says it reads as zeros only in
/// `zeros` mode.
#[test]
fn reads_after_trim_follow_the_profile_through_nbd() {
    tool("nbdsh", &["--version"]); // with Debian's python3, as the test runs it
    use vssd::profile::{Profile, ReadAfterTrim};
    for (mode, byte) in [
        (ReadAfterTrim::Zeros, 0u8),
        (ReadAfterTrim::Pattern, 0xFF),
        (ReadAfterTrim::OldData, 0x5A),
    ] {
        let mut p = Profile::load_with_capacity("sata-mlc-2011", Some(64 * MIB)).unwrap();
        p.identity.read_after_trim = mode;
        let dir = scratch_dir();
        let toml = dir.path().join("p.toml");
        std::fs::write(&toml, p.to_toml()).unwrap();
        let mode = mode.name();
        let nbd = dir.path().join("nbd.sock");
        let serve = Serve::start(
            dir.path(),
            &[
                "--profile",
                toml.to_str().unwrap(),
                "--memory",
                "--nbd",
                &format!("unix:{}", nbd.display()),
            ],
        );
        let script = format!(
            "h.pwrite(b'\\x5a' * {m2}, 0)\nh.trim({m1}, 0)\nh.zero({m1}, {m1})\n\
             t = h.pread({m1}, 0)\nz = h.pread({m1}, {m1})\n\
             print('TRIMMED', sorted(set(t)))\nprint('ZEROED', sorted(set(z)))\n\
             ext = []\nh.block_status({m1}, 0, lambda ctx, off, e, err: ext.extend(e))\n\
             print('EXT', ext)",
            m1 = MIB,
            m2 = 2 * MIB,
        );
        let out = tool(
            "nbdsh",
            &["--base-allocation", "-u", &uri(&nbd), "-c", &script],
        );
        let line = |p: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(p))
                .unwrap_or_else(|| panic!("{mode}: no {p} in {out}"))
                .to_string()
        };
        assert_eq!(line("TRIMMED "), format!("[{byte}]"), "{mode}: {out}");
        assert_eq!(
            line("ZEROED "),
            "[0]",
            "{mode}: write-zeroes must read zeros"
        );
        let ext = line("EXT ");
        let flags = if mode == "zeros" { 3 } else { 1 };
        assert_eq!(ext, format!("[{MIB}, {flags}]"), "{mode}: block status");
        serve.stop_ok();
    }
}

#[test]
fn stats_report_the_depth_each_connection_delivered() {
    // The drive's clock runs 50× slower than the wall clock, so a batch of
    // requests sent in one write is all in the drive before the first
    // completes, however loaded the machine.
    const N: u64 = 8;
    let dir = scratch_dir();
    let nbd = dir.path().join("nbd.sock");
    let serve = Serve::start(
        dir.path(),
        &[
            "--profile",
            "sata-mlc-2011",
            "--capacity",
            "256M",
            "--memory",
            "--time-scale",
            "50",
            "--nbd",
            &format!("unix:{}", nbd.display()),
        ],
    );
    let mut deep = Raw::go(&nbd);
    let mut shallow = Raw::go(&nbd);
    for round in 0..4u64 {
        let mut batch = Vec::new();
        for i in 0..N {
            batch.extend(proto::encode_request(&proto::Request {
                flags: 0,
                kind: cmd::WRITE,
                cookie: round * N + i,
                offset: (round * N + i) * 65536,
                len: 4096,
            }));
            batch.extend([0x5Au8; 4096]);
        }
        deep.0.write_all(&batch).unwrap();
        for _ in 0..N {
            assert_eq!(deep.simple().0, 0);
        }
        // One at a time on the other connection.
        shallow.request(cmd::READ, 0, round * 4096, 4096, round);
        let (err, _) = shallow.simple();
        assert_eq!(err, 0);
        let mut data = [0u8; 4096];
        shallow.0.read_exact(&mut data).unwrap();
    }
    let r = serve.report();
    let f = &r.frontends[0];
    let conn = |id: u64| &f.conns.iter().find(|c| c.id == id).unwrap().io.depth;
    let (d, s) = (conn(1), conn(2));
    assert_eq!(d.max_in_flight, N, "{d:?}");
    assert_eq!(d.in_flight, 0);
    assert!(
        d.mean_in_flight > 1.5 && d.mean_in_flight <= N as f64,
        "a batch of {N} averages more than one in flight: {d:?}"
    );
    assert!(d.busy_ns > 0 && d.request_ns >= d.busy_ns, "{d:?}");
    assert_eq!(s.max_in_flight, 1, "{s:?}");
    assert!((s.mean_in_flight - 1.0).abs() < 1e-9, "{s:?}");
    // The frontend and the device see both connections together.
    assert!(f.io.depth.max_in_flight >= N && f.io.depth.max_in_flight <= N + 1);
    assert_eq!(f.io.depth.request_ns, d.request_ns + s.request_ns);
    assert_eq!(r.connection.depth.max_in_flight, f.io.depth.max_in_flight);
    // `ctl stats` prints them.
    let out = Command::new(VSSD)
        .args(["ctl", "--control"])
        .arg(&serve.control)
        .arg("stats")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("in flight {N} at most")) && text.contains("in flight 1 at most"),
        "{text}"
    );
    drop((deep, shallow));
    serve.stop_ok();
}
