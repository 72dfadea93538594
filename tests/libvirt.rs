#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! `vssd qemu-args --libvirt` against real libvirt (Debian 12's 9.0, from
//! `scripts/install-deps.sh`): every document it prints defines in
//! libvirt's test driver with schema validation, as printed or added to a
//! domain the way its help says; and libvirt's QEMU driver boots the test
//! guest (TCG) on vssd drives through them, the guest reading the preset's
//! identity.
//!
//! The QEMU driver runs as a private session daemon (`libvirtd` as
//! `nobody` when the tests run as root, its files in the test's scratch
//! directory), so the test needs no system libvirt and leaves nothing
//! behind; the daemon's sockets get `nobody`'s group with `--socket-group`,
//! as libvirt's QEMU user's would.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::serve::{Serve, VSSD};
use common::{guest_lock, init_logging, require_program, scratch_dir};

const PROFILE: &str = "crucial-m4-128";

/// `vssd qemu-args ARGS`, which must succeed.
fn qemu_args(args: &[&str]) -> String {
    let out = Command::new(VSSD)
        .arg("qemu-args")
        .args(args)
        .output()
        .expect("running vssd qemu-args");
    assert!(
        out.status.success(),
        "vssd qemu-args {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `doc` with `part` inserted before its line `marker` (such as
/// `  </devices>`): how a user adds a printed element with `virsh edit`.
fn insert_before(doc: &str, marker: &str, part: &str) -> String {
    let at = doc
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker:?} in\n{doc}"));
    format!("{}{part}{}", &doc[..at], &doc[at..])
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `virsh -c test:///default define --validate FILE` of `xml`: schema
/// validation included (qemu namespace too).
fn test_driver_defines(dir: &Path, name: &str, xml: &str) {
    let f = dir.join(format!("{name}.xml"));
    std::fs::write(&f, xml).unwrap();
    let out = Command::new("virsh")
        .args(["-c", "test:///default", "define", "--validate"])
        .arg(&f)
        .output()
        .expect("running virsh");
    assert!(
        out.status.success(),
        "libvirt's test driver refused {name}:\n{}\n{xml}",
        text(&out)
    );
}

/// Every document `--libvirt` prints loads in libvirt, alone or added to a
/// domain as the help says; each is one well-formed document (issue 31: the
/// fragments did not parse; issue 30: a serial with `--` broke the XML).
#[test]
fn documents_define_in_libvirts_test_driver() {
    init_logging();
    require_program("virsh");
    let dir = scratch_dir();
    let d = dir.path();
    let base = ["--profile", PROFILE, "--serial", "S--1"];
    let with = |extra: &[&str]| {
        let mut v = base.to_vec();
        v.extend(extra);
        qemu_args(&v)
    };
    let virtio = ["--bus", "virtio", "--socket", "/run/vssd/a/vhost.sock"];
    let sata = ["--bus", "sata", "--nbd", "/run/vssd/a/nbd.sock"];
    let nvme = ["--bus", "nvme", "--nbd", "tcp:127.0.0.1:10809"];
    for (name, bus) in [("virtio", &virtio), ("sata", &sata), ("nvme", &nvme)] {
        let mut a = bus.to_vec();
        a.extend(["--libvirt", "--name", name]);
        let xml = with(&a);
        roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}:\n{xml}"));
        test_driver_defines(d, name, &xml);
    }
    // An existing domain (here: the virtio one) gains a SATA drive
    // (attach-device) with its identity (virsh edit) and an NVMe drive.
    let mut a = virtio.to_vec();
    a.extend(["--libvirt", "domain", "--name", "grown"]);
    let mut xml = with(&a);
    let mut sata1 = sata.to_vec();
    sata1.extend(["--id", "vssd1", "--libvirt"]);
    let disk = with(&[&sata1[..], &["device"]].concat());
    let override_ = with(&[&sata1[..], &["qemu"]].concat());
    let mut nvme2 = nvme.to_vec();
    nvme2.extend(["--id", "vssd2", "--libvirt", "qemu"]);
    let commandline = with(&nvme2);
    for part in [&disk, &override_, &commandline] {
        roxmltree::Document::parse(part).unwrap_or_else(|e| panic!("{e}:\n{part}"));
    }
    xml = insert_before(&xml, "  </devices>", &disk);
    xml = insert_before(&xml, "</domain>", &override_);
    xml = insert_before(&xml, "</domain>", &commandline);
    test_driver_defines(d, "grown", &xml);
}

/// A private libvirt session daemon (QEMU driver) and the user it runs as.
struct Libvirt {
    daemon: Child,
    /// Its HOME and XDG directories.
    home: PathBuf,
    /// `nobody` when the tests run as root, else ourselves.
    as_nobody: bool,
    defined: Vec<String>,
}

impl Libvirt {
    fn start(home: PathBuf) -> Libvirt {
        // SAFETY: geteuid has no preconditions.
        let as_nobody = unsafe { libc::geteuid() } == 0;
        std::fs::create_dir_all(home.join("run")).unwrap();
        if as_nobody {
            for p in [&home, &home.join("run")] {
                let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
                // SAFETY: chown on a NUL-terminated path we made.
                assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
            }
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(home.join("run"), std::fs::Permissions::from_mode(0o700)).unwrap();
        let log = std::fs::File::create(home.join("libvirtd.log")).unwrap();
        if as_nobody {
            let c =
                std::ffi::CString::new(home.join("libvirtd.log").as_os_str().as_encoded_bytes())
                    .unwrap();
            // SAFETY: as above.
            unsafe { libc::chown(c.as_ptr(), 65534, 65534) };
        }
        let libvirtd = ["/usr/sbin/libvirtd", "/sbin/libvirtd"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or("libvirtd");
        let mut lv = Libvirt {
            daemon: Self::command(&home, as_nobody, libvirtd)
                .args(["--timeout", "900"])
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("starting libvirtd (scripts/install-deps.sh installs it)"),
            home,
            as_nobody,
            defined: Vec::new(),
        };
        let t = Instant::now();
        loop {
            if lv.virsh(&["version"]).status.success() {
                break;
            }
            if let Ok(Some(st)) = lv.daemon.try_wait() {
                panic!(
                    "libvirtd exited ({st}) at start: it cannot run here:\n{}",
                    lv.log()
                );
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "libvirtd did not answer within 60 s:\n{}",
                lv.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        lv
    }

    /// `program` as the daemon's user, with its HOME and XDG directories.
    fn command(home: &Path, as_nobody: bool, program: &str) -> Command {
        let mut c = if as_nobody {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]);
            c.arg(program);
            c
        } else {
            Command::new(program)
        };
        c.env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_CACHE_HOME", home.join("cache"))
            .env("XDG_DATA_HOME", home.join("data"))
            .env("XDG_RUNTIME_DIR", home.join("run"))
            .env_remove("LIBVIRT_DEFAULT_URI");
        c
    }

    fn virsh(&self, args: &[&str]) -> Output {
        Self::command(&self.home, self.as_nobody, "virsh")
            .args(["-c", "qemu:///session"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("running virsh")
    }

    fn virsh_ok(&self, args: &[&str]) -> String {
        let out = self.virsh(args);
        assert!(
            out.status.success(),
            "virsh {args:?} failed:\n{}\n--- libvirtd ---\n{}",
            text(&out),
            self.log()
        );
        text(&out)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.home.join("libvirtd.log")).unwrap_or_default()
    }

    /// The domain's QEMU log.
    fn qemu_log(&self, name: &str) -> String {
        let p = self.home.join(format!("cache/libvirt/qemu/log/{name}.log"));
        std::fs::read_to_string(p).unwrap_or_default()
    }

    /// The group the daemon's QEMU runs in (for `serve --socket-group`).
    fn group(&self) -> String {
        if self.as_nobody {
            "nogroup".into()
        } else {
            // SAFETY: getegid has no preconditions.
            unsafe { libc::getegid() }.to_string()
        }
    }

    fn define(&mut self, file: &Path, name: &str) {
        self.virsh_ok(&["define", "--validate", &file.display().to_string()]);
        self.defined.push(name.into());
    }

    /// Start `name` and wait until it is shut off (the test guest powers
    /// off after its script); the console log is `console`.
    fn boot(&self, name: &str, console: &Path, token: &str) -> String {
        self.virsh_ok(&["start", name]);
        let t = Instant::now();
        loop {
            let st = text(&self.virsh(&["domstate", name]));
            if st.contains("shut off") {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(600),
                "{name} still {st:?} after 600 s\n--- console ---\n{}\n--- QEMU log ---\n{}",
                std::fs::read_to_string(console).unwrap_or_default(),
                self.qemu_log(name)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        let log = std::fs::read_to_string(console).unwrap_or_default();
        let begin = format!("VSSD-BEGIN {token} ");
        let end = format!("VSSD-EXIT {token} 0");
        let (Some(b), Some(e)) = (log.find(&begin), log.find(&end)) else {
            panic!(
                "{name}: the guest script did not run to success\n--- console ---\n{log}\n--- QEMU log ---\n{}",
                self.qemu_log(name)
            );
        };
        log[b..e].replace('\r', "")
    }
}

impl Drop for Libvirt {
    fn drop(&mut self) {
        for d in &self.defined {
            let _ = self.virsh(&["destroy", d]);
            let _ = self.virsh(&["undefine", d]);
        }
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
        // The log daemon libvirtd started (it would go after 2 idle minutes).
        let pid = std::fs::read_to_string(self.home.join("run/libvirt/virtlogd.pid"));
        if let Some(pid) = pid.ok().and_then(|p| p.trim().parse::<i32>().ok()) {
            // SAFETY: kill(2) on the pid its own pid file names.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
}

/// The printed domain made the test guest's: TCG (libvirt's QEMU user
/// cannot open /dev/kvm), the guest's kernel and initramfs, the host's
/// root over 9p, the console in a file, no reboot.
fn test_guest(domain: &str, script: &Path, token: &str, console: &Path) -> String {
    let image = vssd::guest::ensure_image().expect("the test guest (vm-images/build-guest.sh)");
    let os = format!(
        "    <kernel>{}</kernel>
    <initrd>{}</initrd>
    <cmdline>console=ttyS0 panic=-1 mitigations=off vssd.script={} vssd.token={token}</cmdline>
",
        image.kernel.canonicalize().unwrap().display(),
        image.initrd.canonicalize().unwrap().display(),
        script.display()
    );
    let devices = format!(
        "    <filesystem type='mount' accessmode='squash' multidevs='remap'>
      <source dir='/'/>
      <target dir='hostroot'/>
      <readonly/>
    </filesystem>
    <serial type='file'>
      <source path='{}'/>
    </serial>
",
        console.display()
    );
    assert!(domain.starts_with("<domain type='kvm'"), "{domain}");
    let d = domain.replacen("<domain type='kvm'", "<domain type='qemu'", 1);
    let d = insert_before(&d, "  </os>", &os);
    let d = insert_before(&d, "  <devices>", "  <on_reboot>destroy</on_reboot>\n");
    insert_before(&d, "  </devices>", &devices)
}

/// libvirt's QEMU driver starts guests on vssd drives from the printed
/// XML: a whole SATA domain (the preset's model, firmware, serial and WWN
/// reach the guest through libvirt's disk and the QEMU-namespace
/// override), and a virtio domain that gains an NVMe drive (`--libvirt
/// qemu`) and a SATA disk (`--libvirt device`, `virsh attach-device
/// --config`). The sockets are reached through `--socket-group`.
#[test]
fn libvirt_boots_the_test_guest_on_vssd_drives() {
    init_logging();
    require_program("virsh");
    require_program("qemu-system-x86_64");
    let _g = guest_lock();
    let dir = scratch_dir();
    let d = dir.path();
    use std::os::unix::fs::PermissionsExt;
    // The guest reads its script through 9p as libvirt's QEMU user.
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut lv = Libvirt::start(d.join("libvirt"));
    let group = lv.group();
    let sata_sock = d.join("sata.sock");
    let nvme_sock = d.join("nvme.sock");
    let serve = Serve::start(
        d,
        &[
            "--profile",
            PROFILE,
            "--capacity",
            "256M",
            "--memory",
            "--nbd",
            &sata_sock.display().to_string(),
            "--nbd",
            &nvme_sock.display().to_string(),
            "--socket-group",
            &group,
        ],
    );
    let id = serve.report().drive.identity.expect("the drive's identity");
    let script = d.join("script.sh");
    std::fs::write(
        &script,
        "for b in /sys/block/sd?; do [ -e \"$b\" ] || continue; \
         echo \"$(basename $b) model=$(cat $b/device/model) rev=$(cat $b/device/rev) \
         wwid=$(cat $b/device/wwid) serial=$(tail -c +5 $b/device/vpd_pg80)\"; done\n\
         [ -e /sys/block/vda ] && echo \"vda serial=$(cat /sys/block/vda/serial)\"\n\
         [ -e /sys/class/nvme/nvme0 ] && echo \"nvme serial=$(cat /sys/class/nvme/nvme0/serial)\"\n\
         true\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let token = format!("lv{}", std::process::id());
    let tag = std::process::id();

    // 1. A whole SATA domain.
    let name = format!("vssd-test-sata-{tag}");
    let printed = qemu_args(&[
        "--bus",
        "sata",
        "--profile",
        PROFILE,
        "--capacity",
        "256M",
        "--nbd",
        &sata_sock.display().to_string(),
        "--libvirt",
        "domain",
        "--name",
        &name,
        "--mem",
        "512M",
    ]);
    let console = lv.home.join("sata-console.log");
    let xml = d.join("sata.xml");
    std::fs::write(&xml, test_guest(&printed, &script, &token, &console)).unwrap();
    lv.define(&xml, &name);
    let out = lv.boot(&name, &console, &token);
    eprintln!("{out}");
    let sda = out
        .lines()
        .find(|l| l.starts_with("sda "))
        .unwrap_or_else(|| panic!("no SATA disk in the guest:\n{out}"));
    // SCSI INQUIRY (libata) carries 16 characters of the ATA model and 4
    // of the firmware revision; the serial and the WWN come whole.
    assert!(sda.contains(&format!("model={}", id.model)), "{sda}");
    let fw = &id.firmware[id.firmware.len().saturating_sub(4)..];
    assert!(sda.contains(&format!("rev={fw}")), "{sda}");
    assert!(sda.contains(&format!("serial={}", id.serial)), "{sda}");
    assert!(
        sda.contains(&format!("{:x}", id.wwn.expect("the preset's WWN"))),
        "{sda}"
    );

    // 2. A virtio domain that gains an NVMe drive and a SATA disk.
    let name = format!("vssd-test-virtio-{tag}");
    let printed = qemu_args(&[
        "--bus",
        "virtio",
        "--profile",
        PROFILE,
        "--socket",
        &serve.socket.display().to_string(),
        "--libvirt",
        "domain",
        "--name",
        &name,
        "--mem",
        "512M",
    ]);
    let nvme = qemu_args(&[
        "--bus",
        "nvme",
        "--profile",
        PROFILE,
        "--capacity",
        "256M",
        "--nbd",
        &nvme_sock.display().to_string(),
        "--id",
        "vssd1",
        "--libvirt",
        "qemu",
    ]);
    let console = lv.home.join("virtio-console.log");
    let guest = insert_before(
        &test_guest(&printed, &script, &token, &console),
        "</domain>",
        &nvme,
    );
    let xml = d.join("virtio.xml");
    std::fs::write(&xml, guest).unwrap();
    lv.define(&xml, &name);
    let disk = d.join("sata-disk.xml");
    std::fs::write(
        &disk,
        qemu_args(&[
            "--bus",
            "sata",
            "--profile",
            PROFILE,
            "--capacity",
            "256M",
            "--nbd",
            &sata_sock.display().to_string(),
            "--id",
            "vssd2",
            "--libvirt",
            "device",
        ]),
    )
    .unwrap();
    lv.virsh_ok(&[
        "attach-device",
        &name,
        &disk.display().to_string(),
        "--config",
    ]);
    let out = lv.boot(&name, &console, &token);
    eprintln!("{out}");
    for want in [
        format!("vda serial={}", id.serial),
        format!("nvme serial={}", id.serial),
    ] {
        assert!(out.contains(&want), "no {want:?} in the guest:\n{out}");
    }
    let sda = out
        .lines()
        .find(|l| l.starts_with("sda "))
        .unwrap_or_else(|| panic!("the attached SATA disk is missing:\n{out}"));
    assert!(sda.contains(&format!("serial={}", id.serial)), "{sda}");
    let stats = serve.report();
    assert!(
        stats.frontends.iter().all(|f| f.connections > 0),
        "every socket served a guest: {:?}",
        stats
            .frontends
            .iter()
            .map(|f| (&f.name, f.connections))
            .collect::<Vec<_>>()
    );
    drop(lv);
    serve.stop_ok();
}
