#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! What users of qemu-storage-daemon and nbdkit expect of a daemon, and of
//! its errors: `--pidfile`, readiness for systemd, JSON log lines, the
//! systemd template unit (`dist/systemd/vssd@.service`: `systemd-analyze
//! verify`, and its command line run the way systemd would run it), NBD
//! socket paths given bare, and errors that name the user's paths and say
//! who may use a socket.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::require_program;
use common::serve::{Serve, VSSD};

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// `vssd serve ARGS` that must fail: its standard error.
fn serve_fails(args: &[&str]) -> String {
    let out = Command::new(VSSD)
        .arg("serve")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Wait for `child` to exit (20 s at most).
fn wait_exit(child: &mut Child) -> i32 {
    let t = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code().unwrap_or(-1);
        }
        if t.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("vssd serve did not exit within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn pidfile_is_private_held_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let pid = dir.path().join("vssd.pid");
    // A file left by a daemon that was killed: not locked, taken over.
    std::fs::write(&pid, "999999\n").unwrap();
    std::fs::set_permissions(&pid, std::fs::Permissions::from_mode(0o644)).unwrap();
    let pid_s = pid.to_str().unwrap();
    let serve = Serve::start(
        dir.path(),
        &["--profile", "instant", "--memory", "--pidfile", pid_s],
    );
    assert_eq!(
        std::fs::read_to_string(&pid).unwrap(),
        format!("{}\n", serve.pid())
    );
    assert_eq!(mode(&pid), 0o600);

    // A second daemon on the same pid file stops before touching its sockets.
    let other = dir.path().join("other.sock");
    let err = serve_fails(&[
        "--socket",
        other.to_str().unwrap(),
        "--profile",
        "instant",
        "--memory",
        "--pidfile",
        pid_s,
    ]);
    assert!(
        err.contains(&format!(
            "{pid_s} is held by a running vssd (pid {})",
            serve.pid()
        )),
        "{err}"
    );
    assert!(!other.exists());
    serve.stop_ok();
    assert!(!pid.exists(), "the pid file is removed on a clean exit");

    // A symlink is not followed.
    let target = dir.path().join("target");
    std::fs::write(&target, "keep").unwrap();
    let link = dir.path().join("link.pid");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let err = serve_fails(&[
        "--socket",
        other.to_str().unwrap(),
        "--profile",
        "instant",
        "--memory",
        "--pidfile",
        link.to_str().unwrap(),
    ]);
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
}

/// `$NOTIFY_SOCKET` gets READY=1 once the daemon answers and STOPPING=1 at
/// SIGTERM; `--log-format json` writes one JSON object per event; the
/// vhost-user socket is gone after a clean exit.
#[test]
fn readiness_and_json_logs() {
    let dir = tempfile::tempdir().unwrap();
    let notify = dir.path().join("notify");
    let rx = UnixDatagram::bind(&notify).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let n = notify.to_str().unwrap();
    let mut serve = Serve::start_env(
        dir.path(),
        &["--profile", "instant", "--memory", "--log-format", "json"],
        true,
        &[("NOTIFY_SOCKET", n)],
    );
    let mut buf = [0u8; 256];
    let len = rx.recv(&mut buf).unwrap();
    assert_eq!(&buf[..len], b"READY=1");
    // Ready means ready: both sockets answer.
    UnixStream::connect(&serve.control).unwrap();
    UnixStream::connect(&serve.socket).unwrap();
    let socket = serve.socket.clone();
    let (code, log) = serve.stop();
    assert_eq!(code, 0, "{log}");
    let len = rx.recv(&mut buf).unwrap();
    assert_eq!(&buf[..len], b"STOPPING=1");
    assert!(!socket.exists(), "the vhost-user socket is removed on exit");

    let mut messages = Vec::new();
    for line in log.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        let o = v.as_object().unwrap();
        let keys: Vec<&str> = o.keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 4, "{line}");
        for k in ["timestamp", "level", "target", "message"] {
            assert!(o[k].is_string(), "{k} in {line}");
        }
        let ts = o["timestamp"].as_str().unwrap();
        assert!(
            ts.len() > 20 && ts.ends_with('Z') && ts.contains('T'),
            "{ts}"
        );
        messages.push(format!("{} {}", o["level"], o["message"]));
    }
    let all = messages.join("\n");
    assert!(all.contains("stopped cleanly"), "{all}");
    assert!(all.contains("\"INFO\""), "{all}");
}

/// `--nbd /path` is a unix socket, as `qemu-args --nbd` takes it.
#[test]
fn nbd_takes_a_bare_socket_path() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let serve = Serve::start_with(
        dir.path(),
        &[
            "--profile",
            "instant",
            "--memory",
            "--nbd",
            sock.to_str().unwrap(),
        ],
        false,
    );
    UnixStream::connect(&sock).unwrap();
    let names: Vec<String> = serve
        .report()
        .frontends
        .iter()
        .map(|f| f.name.clone())
        .collect();
    assert_eq!(names, [format!("unix:{}", sock.display())]);
    serve.stop_ok();
    let err = Command::new(VSSD)
        .args(["serve", "--profile", "instant", "--nbd", "nbd.sock"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&err.stderr);
    assert!(err.contains("a socket path starting with / or ."), "{err}");
}

/// Run `cmd` as `nobody` when the tests run as root (else as ourselves):
/// how a user who is not the daemon's meets its files.
fn as_other_user(program: &str) -> Option<Command> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
        "--",
        program,
    ]);
    Some(c)
}

/// A socket that cannot be bound names the user's path and the step, not
/// the private directory it is bound in; a user who may not use the
/// control socket is told so, not asked whether the daemon runs.
#[test]
fn errors_name_the_users_path_and_who_may_connect() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // A directory the user running vssd cannot write to.
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let sock = ro.join("s.sock");
    let sock_s = sock.to_str().unwrap();
    let args = [
        "serve",
        "--socket",
        sock_s,
        "--profile",
        "instant",
        "--memory",
    ];
    let out: Output = match as_other_user(VSSD) {
        Some(mut c) => c.args(args).output().unwrap(),
        None => {
            std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
            Command::new(VSSD).args(args).output().unwrap()
        }
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "cannot listen on {sock_s}: making a private directory beside it"
        )),
        "{err}"
    );
    assert!(err.contains("Permission denied"), "{err}");
    assert!(!err.contains(".s.sock."), "a temporary path leaked: {err}");

    // ctl by another user: the control socket is the daemon user's.
    let Some(mut ctl) = as_other_user(VSSD) else {
        return; // not root: no other user to be
    };
    let serve = Serve::start(dir.path(), &["--profile", "instant", "--memory"]);
    let out = ctl
        .args(["ctl", "--control"])
        .arg(&serve.control)
        .arg("stats")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("not allowed to use control socket"), "{err}");
    assert!(err.contains("sudo vssd ctl"), "{err}");
    assert!(!err.contains("serve` running"), "{err}");
    serve.stop_ok();
}

/// The unit file as systemd reads it: continuation lines joined.
fn unit_lines(unit: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for l in unit.lines() {
        if let Some(head) = l.strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
        } else {
            cur.push_str(l);
            out.push(std::mem::take(&mut cur));
        }
    }
    out
}

/// `KEY=VALUE` lines of an environment file.
fn env_file(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `ExecStart` as systemd would run it for instance `inst`: specifiers
/// (`%t`, `%S`, `%i`) and variables (`${X}` one word, `$X` split) replaced.
fn exec_start(
    unit: &str,
    inst: &str,
    run: &Path,
    state: &Path,
    env: &[(String, String)],
) -> Vec<String> {
    let line = unit_lines(unit)
        .into_iter()
        .find_map(|l| l.strip_prefix("ExecStart=").map(str::to_string))
        .expect("an ExecStart line");
    let get = |k: &str| {
        env.iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let mut args = Vec::new();
    for word in line.split_whitespace() {
        let w = word
            .replace("%t", run.to_str().unwrap())
            .replace("%S", state.to_str().unwrap())
            .replace("%i", inst);
        if let Some(name) = w.strip_prefix('$').filter(|n| !n.starts_with('{')) {
            args.extend(get(name).split_whitespace().map(str::to_string));
        } else if let (Some(start), Some(end)) = (w.find("${"), w.find('}')) {
            args.push(format!(
                "{}{}{}",
                &w[..start],
                get(&w[start + 2..end]),
                &w[end + 1..]
            ));
        } else {
            args.push(w);
        }
    }
    args
}

/// `dist/systemd/vssd@.service` passes `systemd-analyze verify` without a
/// warning, and its command line, with `example.env`, run the way systemd
/// runs it (its runtime and state directories made as it makes them,
/// `$NOTIFY_SOCKET`), serves the drive where the unit says, with the
/// sockets' group, a pid file and JSON logs, and stops cleanly.
#[test]
fn systemd_unit_verifies_and_its_command_line_serves() {
    require_program("systemd-analyze");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/systemd");
    let unit = std::fs::read_to_string(root.join("vssd@.service")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let units = dir.path().join("units");
    std::fs::create_dir(&units).unwrap();
    assert!(unit.contains("ExecStart=/usr/local/bin/vssd serve"));
    std::fs::write(
        units.join("vssd@.service"),
        unit.replace("/usr/local/bin/vssd", VSSD),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(units.join("vssd@ci.service"))
        .current_dir(&units)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );

    // Its command line, as systemd would run vssd@ci.
    let mut env = vec![
        ("VSSD_SOCKET_GROUP".to_string(), String::new()),
        ("VSSD_OPTIONS".to_string(), String::new()),
    ];
    for l in unit_lines(&unit) {
        if let Some(kv) = l.strip_prefix("Environment=") {
            env.extend(env_file(kv));
        }
    }
    env.extend(env_file(
        &std::fs::read_to_string(root.join("example.env")).unwrap(),
    ));
    assert!(env.iter().any(|(k, _)| k == "VSSD_PROFILE"));
    // The socket group: ours here (libvirt-qemu need not exist).
    // SAFETY: getegid has no preconditions.
    let gid = unsafe { libc::getegid() };
    env.push(("VSSD_SOCKET_GROUP".into(), gid.to_string()));
    let run: PathBuf = dir.path().join("run");
    let state: PathBuf = dir.path().join("lib");
    // RuntimeDirectory= and StateDirectory= with their modes.
    std::fs::create_dir_all(run.join("vssd/ci")).unwrap();
    std::fs::set_permissions(run.join("vssd/ci"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(state.join("vssd/ci")).unwrap();
    std::fs::set_permissions(
        state.join("vssd/ci"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    let args = exec_start(&unit, "ci", &run, &state, &env);
    assert_eq!(args[0], "/usr/local/bin/vssd");
    let notify = dir.path().join("notify");
    let rx = UnixDatagram::bind(&notify).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let log = dir.path().join("journal");
    let mut child = Command::new(VSSD)
        .args(&args[1..])
        .env("NOTIFY_SOCKET", &notify)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 64];
    let n = rx.recv(&mut buf).unwrap_or_else(|e| {
        let _ = child.kill();
        panic!(
            "no READY=1 ({e}) from {args:?}:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    assert_eq!(&buf[..n], b"READY=1");
    let ci = run.join("vssd/ci");
    use std::os::unix::fs::MetadataExt;
    for s in ["vhost.sock", "nbd.sock"] {
        let m = std::fs::symlink_metadata(ci.join(s)).unwrap();
        assert_eq!((m.mode() & 0o777, m.gid()), (0o660, gid), "{s}");
        UnixStream::connect(ci.join(s)).unwrap();
    }
    assert_eq!(mode(&ci.join("vhost.sock.ctl")), 0o600);
    assert_eq!(
        std::fs::read_to_string(ci.join("vssd.pid")).unwrap(),
        format!("{}\n", child.id())
    );
    assert!(state.join("vssd/ci/disk.img").exists());
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(wait_exit(&mut child), 0);
    let n = rx.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"STOPPING=1");
    assert!(state.join("vssd/ci/ftl.state").exists(), "state saved");
    let left: Vec<_> = std::fs::read_dir(&ci)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left in the runtime directory: {left:?}");
    let journal = std::fs::read_to_string(&log).unwrap();
    for l in journal.lines() {
        serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{e}: {l}"));
    }
}
