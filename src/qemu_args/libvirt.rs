//! `vssd qemu-args --libvirt`: the drive in libvirt's domain XML, each
//! output one well-formed document libvirt loads as printed:
//!
//! - `domain`: a whole `<domain>` (q35, shared memory for vhost-user, the
//!   drive; SATA's identity and the NVMe controller in libvirt's QEMU
//!   namespace), for `virsh define`;
//! - `device`: the drive's `<disk>` (virtio, SATA), for `virsh
//!   attach-device DOMAIN FILE --config`;
//! - `qemu`: the drive's part in the QEMU namespace, its namespace declared
//!   on itself (SATA: `<qemu:override>` with the model, firmware and WWN,
//!   which libvirt has no element for; NVMe: `<qemu:commandline>`, as
//!   libvirt 9.0 has no emulated NVMe disk), for `virsh edit`.
//!
//! Nothing the user gives (paths, serial, names) goes into an XML comment:
//! the comments are fixed text ([`comment`] takes only `&'static str`), and
//! every value is escaped; a value XML cannot carry (a control character)
//! is refused.

use std::fmt::Write as _;

use vssd_frontend::nbd::NbdAddr;
use vssd_profile::Identity;
use vssd_qemu::QemuOpt;

use super::{QemuArgsArgs, QemuArgsError, QemuBus};

/// libvirt's QEMU namespace.
pub const QEMU_NS: &str = "http://libvirt.org/schemas/domain/qemu/1.0";

/// What `--libvirt` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LibvirtXml {
    /// A whole `<domain>` with the drive, for `virsh define`.
    Domain,
    /// The drive's `<disk>`, for `virsh attach-device --config` (virtio, sata).
    Device,
    /// The drive's part in libvirt's QEMU namespace, for `virsh edit`.
    Qemu,
}

/// `s` escaped for XML text or an attribute in single quotes (the only
/// quotes this module writes); refused if XML 1.0 cannot carry it (control
/// characters: tabs and newlines too, which an attribute would not keep).
fn esc(what: &'static str, s: &str) -> Result<String, QemuArgsError> {
    if s.chars().any(char::is_control) {
        return Err(QemuArgsError::NotXml {
            what,
            value: s.into(),
        });
    }
    Ok(s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&apos;"))
}

/// An XML comment of fixed text: never anything the user gave (`--` in a
/// serial would end it, issue 30).
fn comment(text: &'static str) -> String {
    debug_assert!(!text.contains("--"));
    format!("<!-- {text} -->")
}

/// `block` with every line indented by `n` spaces.
fn indent(block: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    block
        .lines()
        .map(|l| format!("{pad}{l}\n"))
        .collect::<String>()
}

/// The `<disk>` of a virtio or SATA drive; `None` for NVMe.
fn disk(a: &QemuArgsArgs, id: &Identity) -> Result<Option<String>, QemuArgsError> {
    let alias = format!("ua-{}", a.id);
    let default_target = match a.bus {
        QemuBus::Virtio => "vda",
        QemuBus::Sata => "sda",
        QemuBus::Nvme => return Ok(None),
    };
    let target = a.target.as_deref().unwrap_or(default_target);
    check_target(target)?;
    let mut o = String::new();
    match a.bus {
        QemuBus::Virtio => {
            let sock = a.socket.as_deref().map(|p| p.to_str());
            let Some(Some(sock)) = sock else {
                return Err(QemuArgsError::Usage(
                    "--bus virtio needs --socket PATH, a UTF-8 path".into(),
                ));
            };
            let _ = write!(
                o,
                "<disk type='vhostuser' device='disk'>
  <driver name='qemu' type='raw' queues='{q}'/>
  <source type='unix' path='{sock}'>
    <reconnect enabled='yes' timeout='1'/>
  </source>
  <target dev='{target}' bus='virtio'/>
  <alias name='{alias}'/>
</disk>
",
                q = a.queues,
                sock = esc("--socket", sock)?,
            );
        }
        QemuBus::Sata => {
            let host = match &a.nbd {
                Some(NbdAddr::Unix(p)) => {
                    let p = p.to_str().ok_or_else(|| {
                        QemuArgsError::Usage("--nbd: the socket path is not UTF-8".into())
                    })?;
                    format!("<host transport='unix' socket='{}'/>", esc("--nbd", p)?)
                }
                Some(NbdAddr::Tcp(s)) => format!("<host name='{}' port='{}'/>", s.ip(), s.port()),
                None => return Err(QemuArgsError::Usage("--bus sata needs --nbd ADDR".into())),
            };
            let _ = write!(
                o,
                "<disk type='network' device='disk'>
  <driver name='qemu' type='raw' discard='unmap'/>
  <source protocol='nbd' name='vssd'>
    {host}
  </source>
  <target dev='{target}' bus='sata' rotation_rate='1'/>
  <serial>{serial}</serial>
  <alias name='{alias}'/>
</disk>
",
                serial = esc("serial", &id.serial)?,
            );
        }
        QemuBus::Nvme => {}
    }
    Ok(Some(o))
}

/// libvirt's `<target dev>`: letters, then letters or digits.
fn check_target(t: &str) -> Result<(), QemuArgsError> {
    let ok = t.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && t.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(QemuArgsError::Usage(format!(
            "--target {t:?}: a disk name such as vdb or sdb"
        )))
    }
}

/// The drive's part in the QEMU namespace, with `xmlns:qemu` on the
/// element when `declare`: SATA's identity as properties of the device
/// libvirt creates, or the NVMe controller as QEMU arguments; `None` for
/// virtio.
fn qemu_part(
    a: &QemuArgsArgs,
    id: &Identity,
    args: &[QemuOpt],
    declare: bool,
) -> Result<Option<String>, QemuArgsError> {
    let ns = if declare {
        format!(" xmlns:qemu='{QEMU_NS}'")
    } else {
        String::new()
    };
    let mut o = String::new();
    match a.bus {
        QemuBus::Virtio => return Ok(None),
        QemuBus::Sata => {
            let _ = writeln!(
                o,
                "<qemu:override{ns}>
  <qemu:device alias='ua-{n}'>
    <qemu:frontend>
      <qemu:property name='model' type='string' value='{model}'/>
      <qemu:property name='ver' type='string' value='{fw}'/>",
                n = a.id,
                model = esc("model", &id.model)?,
                fw = esc("firmware", &id.firmware)?,
            );
            if let Some(w) = id.wwn {
                // libvirt reads an unsigned property in decimal.
                let _ = writeln!(
                    o,
                    "      <qemu:property name='wwn' type='unsigned' value='{w}'/>"
                );
            }
            o.push_str("    </qemu:frontend>\n  </qemu:device>\n</qemu:override>\n");
        }
        QemuBus::Nvme => {
            let _ = writeln!(o, "<qemu:commandline{ns}>");
            for (opt, v) in args {
                // A `-device` in QEMU's key=value syntax is created before
                // libvirt's own (JSON) devices and takes a PCI slot libvirt
                // has assigned: in JSON it comes after them.
                let v = if *opt == "-device" {
                    keyval_to_json(v)
                } else {
                    v.clone()
                };
                let _ = writeln!(o, "  <qemu:arg value='{opt}'/>");
                let _ = writeln!(o, "  <qemu:arg value='{}'/>", esc("argument", &v)?);
            }
            o.push_str("</qemu:commandline>\n");
        }
    }
    Ok(Some(o))
}

/// A `-device` value in QEMU's `driver,key=value,...` syntax (`,,` a
/// literal comma) as its JSON form, every value a string: right for the
/// string properties the NVMe device is given (id, drive, serial).
fn keyval_to_json(v: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut chars = v.chars().peekable();
    while let Some(c) = chars.next() {
        if c != ',' {
            cur.push(c);
        } else if chars.peek() == Some(&',') {
            chars.next();
            cur.push(',');
        } else {
            parts.push(std::mem::take(&mut cur));
        }
    }
    parts.push(cur);
    let q = |v: &str| serde_json::Value::from(v).to_string();
    let mut fields = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        fields.push(match (i, p.split_once('=')) {
            (0, _) => format!("\"driver\":{}", q(p)),
            (_, Some((k, val))) => format!("{}:{}", q(k), q(val)),
            (_, None) => format!("{}:\"on\"", q(p)),
        });
    }
    format!("{{{}}}", fields.join(","))
}

/// The domain's name: what libvirt and a shell take without quoting.
fn check_name(n: &str) -> Result<(), QemuArgsError> {
    let ok = !n.is_empty()
        && n.len() <= 64
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !n.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(QemuArgsError::Usage(format!(
            "--name {n:?}: letters, digits, '-', '_' or '.' (not first), at most 64"
        )))
    }
}

/// A whole domain with the drive.
fn domain(a: &QemuArgsArgs, id: &Identity, args: &[QemuOpt]) -> Result<String, QemuArgsError> {
    check_name(&a.name)?;
    let qemu = qemu_part(a, id, args, false)?;
    let mut o = String::new();
    let ns = if qemu.is_some() {
        format!(" xmlns:qemu='{QEMU_NS}'")
    } else {
        String::new()
    };
    let _ = writeln!(o, "<domain type='kvm'{ns}>");
    let _ = writeln!(o, "  <name>{}</name>", a.name);
    o.push_str(&indent(
        &comment(
            "add the guest's boot disk, network and console to <devices>; \
             type='qemu' where KVM does not work",
        ),
        2,
    ));
    let _ = writeln!(o, "  <memory unit='MiB'>{}</memory>", a.mem >> 20);
    if a.bus == QemuBus::Virtio {
        o.push_str(&indent(
            &format!(
                "{}\n<memoryBacking>\n  <source type='memfd'/>\n  <access mode='shared'/>\n</memoryBacking>",
                comment("vhost-user: the daemon maps the guest's memory")
            ),
            2,
        ));
    }
    o.push_str(
        "  <vcpu>2</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
  </os>
  <features>
    <acpi/>
    <apic/>
  </features>
  <devices>
",
    );
    match disk(a, id)? {
        Some(d) => o.push_str(&indent(&d, 4)),
        None => o.push_str(&indent(
            &comment("the NVMe controller: QEMU arguments, below"),
            4,
        )),
    }
    o.push_str("  </devices>\n");
    if let Some(q) = qemu {
        o.push_str(&indent(&q, 2));
    }
    o.push_str("</domain>\n");
    Ok(o)
}

/// The libvirt XML `what` for the drive (`args`: its QEMU options).
pub fn xml(
    a: &QemuArgsArgs,
    id: &Identity,
    args: &[QemuOpt],
    what: LibvirtXml,
) -> Result<String, QemuArgsError> {
    match what {
        LibvirtXml::Domain => domain(a, id, args),
        LibvirtXml::Device => {
            let d = disk(a, id)?.ok_or_else(|| {
                QemuArgsError::Usage(
                    "libvirt 9.0 has no emulated NVMe disk: --bus nvme goes into a domain as \
                     QEMU arguments, --libvirt qemu (for virsh edit) or --libvirt domain"
                        .into(),
                )
            })?;
            match a.bus {
                QemuBus::Virtio => log::info!(
                    "the domain needs shared memory for vhost-user: <memoryBacking><source \
                     type='memfd'/><access mode='shared'/></memoryBacking> (as --libvirt domain has)"
                ),
                QemuBus::Sata => log::info!(
                    "libvirt has no element for the ATA model, firmware and WWN: add the \
                     output of the same command with --libvirt qemu to the domain (virsh edit)"
                ),
                QemuBus::Nvme => {}
            }
            Ok(d)
        }
        LibvirtXml::Qemu => qemu_part(a, id, args, true)?.ok_or_else(|| {
            QemuArgsError::Usage(
                "--bus virtio needs nothing in libvirt's QEMU namespace: --libvirt device \
                 prints its <disk> (the domain needs shared memory too: see --libvirt domain)"
                    .into(),
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::super::qemu_args;
    use super::*;
    use vssd_profile::Profile;

    fn out(cli: &[&str]) -> Result<String, QemuArgsError> {
        let a = super::super::tests::args(cli);
        let mut p = Profile::load_with_capacity(&a.profile, a.capacity).unwrap();
        if let Some(s) = &a.serial {
            p = p.with_serial(s).unwrap();
        }
        let id = p.identity();
        let args = qemu_args(&a, &id)?;
        xml(&a, &id, &args, a.libvirt.unwrap())
    }

    /// One XML document, namespaces declared: what libvirt parses.
    fn doc(x: &str) -> roxmltree::Document<'_> {
        roxmltree::Document::parse(x).unwrap_or_else(|e| panic!("{e}:\n{x}"))
    }

    const SATA: &[&str] = &["--bus", "sata", "--profile", "intel-x25m-g2"];

    #[test]
    fn sata_domain_carries_the_identity() {
        let mut cli = SATA.to_vec();
        cli.extend(["--nbd", "/run/n.sock", "--libvirt"]);
        let x = out(&cli).unwrap();
        let d = doc(&x);
        let root = d.root_element();
        assert_eq!(root.tag_name().name(), "domain");
        let find = |name: &str| {
            d.descendants()
                .find(|n| n.tag_name().name() == name)
                .unwrap_or_else(|| panic!("no <{name}>:\n{x}"))
        };
        assert_eq!(find("serial").text(), Some("CVPO935600AB160AGN"));
        assert_eq!(find("host").attribute("socket"), Some("/run/n.sock"));
        assert_eq!(find("alias").attribute("name"), Some("ua-vssd0"));
        let props: Vec<(String, String)> = d
            .descendants()
            .filter(|n| n.tag_name().name() == "property")
            .map(|n| {
                assert_eq!(n.tag_name().namespace(), Some(QEMU_NS));
                (
                    n.attribute("name").unwrap().into(),
                    n.attribute("value").unwrap().into(),
                )
            })
            .collect();
        assert_eq!(
            props,
            [
                ("model".into(), "INTEL SSDSA2M160G2GC".into()),
                ("ver".into(), "2CV102HD".into()),
                ("wwn".into(), 0x5001517959a1b2c3u64.to_string()),
            ]
        );
        // The disk alone and the override alone are documents too.
        cli.push("device");
        let dev = out(&cli).unwrap();
        assert_eq!(doc(&dev).root_element().tag_name().name(), "disk");
        *cli.last_mut().unwrap() = "qemu";
        let q = out(&cli).unwrap();
        let qd = doc(&q);
        assert_eq!(qd.root_element().tag_name().name(), "override");
        assert_eq!(qd.root_element().tag_name().namespace(), Some(QEMU_NS));
    }

    /// Issue 30, defect 8: the serial went into an XML comment, and a `--`
    /// in it made the output invalid XML.
    #[test]
    fn a_serial_with_double_hyphens_stays_valid_xml() {
        for bus in [
            &["--bus", "virtio", "--socket", "/run/v.sock"][..],
            &["--bus", "sata", "--nbd", "/run/n.sock"],
            &["--bus", "nvme", "--nbd", "/run/n.sock"],
        ] {
            let mut cli = vec!["--profile", "sata-mlc-2011", "--serial", "a--b<c>&'d\"--"];
            cli.extend(bus);
            cli.push("--libvirt");
            let x = out(&cli).unwrap();
            let d = doc(&x);
            for c in d.descendants().filter(|n| n.is_comment()) {
                assert!(!c.text().unwrap_or("").contains("a--b"), "{x}");
            }
            if bus[1] == "sata" {
                let s = d
                    .descendants()
                    .find(|n| n.tag_name().name() == "serial")
                    .unwrap();
                assert_eq!(s.text(), Some("a--b<c>&'d\"--"));
            }
        }
    }

    #[test]
    fn virtio_domain_has_shared_memory_and_reconnects_each_second() {
        let x = out(&[
            "--bus",
            "virtio",
            "--profile",
            "nvme-tlc",
            "--socket",
            "/run/v.sock",
            "--queues",
            "2",
            "--mem",
            "2G",
            "--libvirt",
            "domain",
            "--name",
            "g1",
        ])
        .unwrap();
        let d = doc(&x);
        let el = |name: &str| d.descendants().find(|n| n.tag_name().name() == name);
        assert_eq!(el("name").unwrap().text(), Some("g1"));
        assert_eq!(el("memory").unwrap().text(), Some("2048"));
        assert_eq!(el("access").unwrap().attribute("mode"), Some("shared"));
        assert_eq!(el("reconnect").unwrap().attribute("timeout"), Some("1"));
        assert_eq!(el("driver").unwrap().attribute("queues"), Some("2"));
        assert!(!x.contains("xmlns:qemu"), "{x}");
    }

    #[test]
    fn nvme_arguments_in_json_after_libvirts_devices() {
        let x = out(&[
            "--bus",
            "nvme",
            "--profile",
            "nvme-tlc",
            "--nbd",
            "tcp:127.0.0.1:10809",
            "--libvirt",
            "qemu",
        ])
        .unwrap();
        let d = doc(&x);
        let args: Vec<&str> = d
            .descendants()
            .filter_map(|n| n.attribute("value"))
            .collect();
        assert_eq!(args[0], "-blockdev");
        assert!(args[1].starts_with("driver=nbd,node-name=vssd0-nbd,server.type=inet"));
        assert_eq!(args[2], "-device");
        let dev: serde_json::Value = serde_json::from_str(args[3]).unwrap();
        assert_eq!(dev["driver"], "nvme");
        assert_eq!(dev["drive"], "vssd0-nbd");
        assert_eq!(
            keyval_to_json("nvme,id=a,serial=x,,y"),
            r#"{"driver":"nvme","id":"a","serial":"x,y"}"#
        );
    }

    #[test]
    fn what_libvirt_cannot_take_is_explained() {
        let e = out(&[
            "--bus",
            "nvme",
            "--profile",
            "nvme-tlc",
            "--nbd",
            "/n",
            "--libvirt",
            "device",
        ])
        .unwrap_err();
        assert!(e.to_string().contains("no emulated NVMe disk"), "{e}");
        let e = out(&[
            "--bus",
            "virtio",
            "--profile",
            "nvme-tlc",
            "--socket",
            "/v",
            "--libvirt",
            "qemu",
        ])
        .unwrap_err();
        assert!(e.to_string().contains("nothing in libvirt's QEMU"), "{e}");
        let e = out(&[
            "--bus",
            "virtio",
            "--profile",
            "nvme-tlc",
            "--socket",
            "/v\n.sock",
            "--libvirt",
        ])
        .unwrap_err();
        assert!(e.to_string().contains("control character"), "{e}");
        for (opt, bad) in [("--name", "a b"), ("--target", "vd-a")] {
            let e = out(&[
                "--bus",
                "virtio",
                "--profile",
                "nvme-tlc",
                "--socket",
                "/v",
                "--libvirt",
                opt,
                bad,
            ])
            .unwrap_err();
            assert!(e.to_string().contains(opt), "{e}");
        }
    }
}
