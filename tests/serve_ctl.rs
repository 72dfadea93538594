//! `vssd serve` and `vssd ctl` without a guest: the control socket, startup
//! errors, clean shutdown on SIGTERM and the FTL state across restarts.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use vssd::ctl::protocol::{CtlRequest, Step};
use vssd::ctl::request;

const VSSD: &str = env!("CARGO_BIN_EXE_vssd");

struct Serve {
    child: Child,
    control: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        // A failed assertion must not leave the daemon running.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    fn start(dir: &Path, extra: &[&str]) -> Serve {
        let socket = dir.join("vhost.sock");
        let control = dir.join("ctl.sock");
        let child = Command::new(VSSD)
            .args(["serve", "--socket"])
            .arg(&socket)
            .arg("--control")
            .arg(&control)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn vssd serve");
        let t = Instant::now();
        while UnixStream::connect(&control).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "control socket did not appear"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Serve { child, control }
    }

    fn stats(&self) -> Value {
        request(&self.control, &CtlRequest::Stats).expect("stats")
    }

    /// SIGTERM, then the exit status and stderr.
    fn stop(&mut self) -> (i32, String) {
        // SAFETY: kill() with our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let out = wait_timeout(&mut self.child, Duration::from_secs(20));
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

fn wait_timeout(child: &mut Child, limit: Duration) -> Output {
    let t = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("vssd serve did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut stderr);
    }
    let status = child.wait().expect("wait");
    Output {
        status,
        stdout: Vec::new(),
        stderr: stderr.into_bytes(),
    }
}

fn raw_lines(control: &Path, lines: &str) -> Vec<Value> {
    let mut s = UnixStream::connect(control).unwrap();
    s.write_all(lines.as_bytes()).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    BufReader::new(s)
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect()
}

fn serve_fails(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(VSSD)
        .arg("serve")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "expected failure for {args:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn control_socket_and_state_lifecycle() {
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("state");
    let st_s = st.to_str().unwrap();
    let args = [
        "--profile",
        "instant",
        "--capacity",
        "1G",
        "--state-dir",
        st_s,
    ];
    let mut serve = Serve::start(dir.path(), &args);

    let mode = std::fs::metadata(&serve.control)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "control socket must be private");

    let s = serve.stats();
    assert_eq!(s["drive"]["capacity"], 1u64 << 30);
    assert_eq!(s["drive"]["profile"], "instant");
    assert_eq!(s["connection"]["connected"], false);
    assert_eq!(s["counters"]["host_written_bytes"], 0);
    assert!(s["lateness"]["count"].is_u64());

    // Malformed requests get error replies; the connection keeps working.
    let r = raw_lines(
        &serve.control,
        "nonsense\n{\"cmd\":\"format\"}\n\n{\"cmd\":\"stats\"}\n",
    );
    assert_eq!(r.len(), 3);
    assert_eq!(r[0]["ok"], false);
    assert!(r[0]["error"].as_str().unwrap().contains("malformed"));
    assert_eq!(r[1]["ok"], false);
    assert_eq!(r[2]["ok"], true);
    let bad = request(
        &serve.control,
        &CtlRequest::Precondition {
            steps: vec![Step::Random {
                bs: 1000,
                amount: "1x".into(),
            }],
            seed: 1,
        },
    );
    assert!(bad.is_err());

    // Precondition ages the drive in model time.
    let p = request(
        &serve.control,
        &CtlRequest::Precondition {
            steps: vec![
                Step::FillSeq { bs: 128 << 10 },
                Step::Random {
                    bs: 4096,
                    amount: "0.5x".into(),
                },
            ],
            seed: 7,
        },
    )
    .expect("precondition");
    // `instant` models no time; the FTL work still happens (counters below).
    assert!(p["model_time_ns"].is_u64());
    let written = serve.stats()["counters"]["host_written_bytes"]
        .as_u64()
        .unwrap();
    assert!(written >= (1u64 << 30) + (1u64 << 29), "written {written}");

    // The human-readable table.
    let out = Command::new(VSSD)
        .arg("ctl")
        .arg("--control")
        .arg(&serve.control)
        .arg("stats")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("instant") && text.contains("lateness"),
        "{text}"
    );

    // A second daemon on the same sockets is refused clearly.
    let sock = dir.path().join("vhost.sock");
    let err = serve_fails(
        dir.path(),
        &[
            "--socket",
            sock.to_str().unwrap(),
            "--profile",
            "instant",
            "--memory",
        ],
    );
    assert!(err.contains("in use"), "{err}");

    // SIGTERM: clean exit, state saved.
    let (code, log) = serve.stop();
    assert_eq!(code, 0, "{log}");
    assert!(st.join("ftl.state").exists());
    assert!(
        !dir.path().join("ctl.sock").exists(),
        "control socket removed on exit"
    );

    // Restart: the FTL state is back.
    let mut serve = Serve::start(dir.path(), &args);
    assert_eq!(
        serve.stats()["counters"]["host_written_bytes"]
            .as_u64()
            .unwrap(),
        written
    );
    // Secure erase: back to a fresh drive.
    request(&serve.control, &CtlRequest::SecureErase).expect("secure erase");
    assert_eq!(serve.stats()["counters"]["mapped_units"], 0);
    let (code, log) = serve.stop();
    assert_eq!(code, 0, "{log}");

    // A damaged state file is refused, not silently reset.
    let f = st.join("ftl.state");
    let mut bytes = std::fs::read(&f).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&f, &bytes).unwrap();
    let err = serve_fails(
        dir.path(),
        &[
            "--socket",
            sock.to_str().unwrap(),
            "--profile",
            "instant",
            "--capacity",
            "1G",
            "--state-dir",
            st_s,
        ],
    );
    assert!(err.contains("cannot be loaded"), "{err}");
    assert_eq!(
        std::fs::read(&f).unwrap(),
        bytes,
        "the damaged file is left alone"
    );
}

#[test]
fn startup_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let sock = sock.to_str().unwrap();
    let err = serve_fails(
        dir.path(),
        &["--socket", sock, "--profile", "no-such-drive"],
    );
    assert!(err.contains("neither a built-in preset"), "{err}");
    let small = dir.path().join("small.img");
    std::fs::write(&small, vec![0u8; 4096]).unwrap();
    let err = serve_fails(
        dir.path(),
        &[
            "--socket",
            sock,
            "--profile",
            "instant",
            "--capacity",
            "1G",
            "--backing",
            small.to_str().unwrap(),
        ],
    );
    assert!(err.contains("smaller than the drive"), "{err}");
    let plain = dir.path().join("plain");
    std::fs::write(&plain, b"keep me").unwrap();
    let err = serve_fails(
        dir.path(),
        &[
            "--socket",
            plain.to_str().unwrap(),
            "--profile",
            "instant",
            "--memory",
        ],
    );
    assert!(err.contains("not a socket"), "{err}");
    assert_eq!(std::fs::read(&plain).unwrap(), b"keep me");
}
