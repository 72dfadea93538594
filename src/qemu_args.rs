//! `vssd qemu-args`: the exact QEMU arguments (or libvirt XML) that attach
//! a `vssd serve` drive to a guest on one bus, with the preset's identity
//! (model, serial, firmware, WWN) set on the emulated SATA or NVMe device.

use std::fmt::Write as _;
use std::path::PathBuf;

use vssd_frontend::nbd::NbdAddr;
use vssd_profile::size::{format_size, parse_size};
use vssd_profile::{Identity, Profile, ProfileError};
use vssd_qemu::{AhciPort, Attach, NbdServer, QemuOpt, QemuOptError, shared_memory};

/// The bus the guest sees the drive on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum QemuBus {
    /// virtio-blk over vhost-user (`vssd serve --socket`).
    Virtio,
    /// A SATA SSD on AHCI through QEMU's NBD client (`vssd serve --nbd`).
    Sata,
    /// An NVMe controller through QEMU's NBD client (`vssd serve --nbd`).
    Nvme,
}

/// Arguments of `vssd qemu-args`.
#[derive(Debug, clap::Args)]
pub struct QemuArgsArgs {
    /// The bus.
    #[arg(long, value_enum)]
    pub bus: QemuBus,
    /// Drive profile: the same as `vssd serve --profile`.
    #[arg(long, value_name = "P")]
    pub profile: String,
    /// The same as `vssd serve --capacity` (the default serial depends on it).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub capacity: Option<u64>,
    /// The same as `vssd serve --serial`, if given there.
    #[arg(long, value_name = "S")]
    pub serial: Option<String>,
    /// The daemon's vhost-user socket (`--bus virtio`).
    #[arg(long, value_name = "PATH", conflicts_with = "nbd")]
    pub socket: Option<PathBuf>,
    /// The daemon's NBD address (`--bus sata|nvme`): `unix:PATH`,
    /// `tcp:HOST:PORT`, or a socket path.
    #[arg(long, value_name = "ADDR")]
    pub nbd: Option<String>,
    /// virtio: `num-queues`, at most `vssd serve --queues`.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub queues: u16,
    /// virtio: guest memory (the shared memfd vhost-user needs; QEMU's `-m`).
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size)]
    pub mem: u64,
    /// Name for the QEMU ids and node names (several drives need distinct ones).
    #[arg(long, value_name = "ID", default_value = "vssd0")]
    pub id: String,
    /// Print libvirt domain XML instead of QEMU arguments.
    #[arg(long)]
    pub libvirt: bool,
}

/// Errors of `vssd qemu-args`.
#[derive(Debug, thiserror::Error)]
pub enum QemuArgsError {
    /// The profile does not load or `--serial` is bad.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A wrong combination of options.
    #[error("{0}")]
    Usage(String),
    /// What cannot become a QEMU option (a socket path that is not UTF-8).
    #[error(transparent)]
    Qemu(#[from] QemuOptError),
}

/// The NBD address as `vssd serve --nbd` takes it.
fn nbd_addr(addr: &str) -> Result<NbdAddr, QemuArgsError> {
    if addr.starts_with("unix:") || addr.starts_with("tcp:") {
        addr.parse().map_err(QemuArgsError::Usage)
    } else if addr.starts_with('/') || addr.starts_with('.') {
        Ok(NbdAddr::Unix(addr.into()))
    } else {
        Err(QemuArgsError::Usage(format!(
            "--nbd {addr:?}: give unix:PATH, tcp:HOST:PORT or a socket path (as vssd serve --nbd)"
        )))
    }
}

fn check_id(id: &str) -> Result<(), QemuArgsError> {
    let ok = id.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(QemuArgsError::Usage(format!(
            "--id {id:?}: a letter, then letters, digits, '-' or '_' (a QEMU id)"
        )))
    }
}

/// The QEMU arguments, as (option, value) pairs: the one builder the test
/// guest boots with too ([`vssd_qemu`]), the drive named `--id`.
pub fn qemu_args(a: &QemuArgsArgs, id: &Identity) -> Result<Vec<QemuOpt>, QemuArgsError> {
    check_id(&a.id)?;
    let n = &a.id;
    let v = match a.bus {
        QemuBus::Virtio => {
            let Some(sock) = &a.socket else {
                return Err(QemuArgsError::Usage(
                    "--bus virtio needs --socket PATH (the vhost-user socket of vssd serve)".into(),
                ));
            };
            if a.mem < (128 << 20) || !a.mem.is_multiple_of(1 << 20) {
                return Err(QemuArgsError::Usage(format!(
                    "--mem {}: a whole number of MiB, at least 128M",
                    format_size(a.mem)
                )));
            }
            let mut v = shared_memory(&format!("{n}-mem"), a.mem >> 20);
            v.extend(
                Attach::VhostUserBlk {
                    socket: sock,
                    queues: a.queues,
                    reconnect_s: Some(1),
                }
                .options(n)?,
            );
            v
        }
        QemuBus::Sata | QemuBus::Nvme => {
            let Some(addr) = &a.nbd else {
                return Err(QemuArgsError::Usage(format!(
                    "--bus {} needs --nbd ADDR (an NBD listener of vssd serve)",
                    if a.bus == QemuBus::Sata {
                        "sata"
                    } else {
                        "nvme"
                    }
                )));
            };
            let addr = nbd_addr(addr)?;
            let server = match &addr {
                NbdAddr::Unix(p) => NbdServer::Unix(p),
                NbdAddr::Tcp(s) => NbdServer::Inet(*s),
            };
            let attach = if a.bus == QemuBus::Sata {
                Attach::NbdSata {
                    server,
                    export: "vssd",
                    identity: id,
                    ahci: AhciPort::Own,
                }
            } else {
                Attach::NbdNvme {
                    server,
                    export: "vssd",
                    identity: id,
                }
            };
            attach.options(n)?
        }
    };
    if a.bus != QemuBus::Virtio && a.socket.is_some() {
        return Err(QemuArgsError::Usage(
            "--socket is the vhost-user socket: only with --bus virtio (use --nbd)".into(),
        ));
    }
    if a.bus == QemuBus::Virtio && a.nbd.is_some() {
        return Err(QemuArgsError::Usage(
            "--nbd is for --bus sata or nvme (virtio uses --socket)".into(),
        ));
    }
    Ok(v)
}

/// `s` quoted for a POSIX shell if it needs it.
fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || ",._/=:+-@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The arguments as shell text: one option per line, `\`-continued.
pub fn shell_text(args: &[(&str, String)]) -> String {
    let lines: Vec<String> = args
        .iter()
        .map(|(o, v)| format!("{o} {}", shell_quote(v)))
        .collect();
    let mut t = lines.join(" \\\n");
    t.push('\n');
    t
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&apos;")
        .replace('"', "&quot;")
}

/// The libvirt XML for the drive.
pub fn libvirt_xml(
    a: &QemuArgsArgs,
    id: &Identity,
    args: &[(&str, String)],
) -> Result<String, QemuArgsError> {
    let mut o = String::new();
    let n = &a.id;
    match a.bus {
        QemuBus::Virtio => {
            let sock = a.socket.as_ref().map(|p| p.to_string_lossy().into_owned());
            let sock = sock.unwrap_or_default();
            let _ = writeln!(
                o,
                "<!-- in <domain>: vhost-user needs shared guest memory -->
<memoryBacking>
  <source type='memfd'/>
  <access mode='shared'/>
</memoryBacking>
<!-- in <devices> (libvirt 7.1 or later); the serial ({serial}) comes from vssd (virtio-blk GET_ID) -->
<disk type='vhostuser' device='disk'>
  <driver name='qemu' type='raw' queues='{q}'/>
  <source type='unix' path='{sock}'>
    <reconnect enabled='yes' timeout='10'/>
  </source>
  <target dev='vda' bus='virtio'/>
</disk>",
                serial = xml(&id.serial),
                q = a.queues,
                sock = xml(&sock),
            );
        }
        QemuBus::Sata => {
            let addr = a.nbd.as_deref().unwrap_or_default();
            let host = match nbd_addr(addr)? {
                NbdAddr::Unix(p) => {
                    format!(
                        "<host transport='unix' socket='{}'/>",
                        xml(&p.to_string_lossy())
                    )
                }
                NbdAddr::Tcp(s) => format!("<host name='{}' port='{}'/>", s.ip(), s.port()),
            };
            let wwn = id
                .wwn
                .map(|w| format!("\n  <wwn>{w:016x}</wwn>"))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "<!-- in <devices> (rotation_rate needs libvirt 7.3 or later) -->
<disk type='network' device='disk'>
  <driver name='qemu' type='raw' discard='unmap'/>
  <source protocol='nbd' name='vssd'>
    {host}
  </source>
  <target dev='sda' bus='sata' rotation_rate='1'/>
  <serial>{serial}</serial>{wwn}
  <alias name='ua-{n}'/>
</disk>
<!-- libvirt has no element for an ATA disk's model or firmware revision:
     with libvirt 8.2 or later, set them on the device QEMU creates (the
     <domain> element needs xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0') -->
<qemu:override>
  <qemu:device alias='ua-{n}'>
    <qemu:frontend>
      <qemu:property name='model' type='string' value='{model}'/>
      <qemu:property name='ver' type='string' value='{fw}'/>
    </qemu:frontend>
  </qemu:device>
</qemu:override>",
                serial = xml(&id.serial),
                model = xml(&id.model),
                fw = xml(&id.firmware),
            );
        }
        QemuBus::Nvme => {
            let _ = writeln!(
                o,
                "<!-- in <domain> (with xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'):
     the NVMe controller and its NBD backend as QEMU arguments -->
<qemu:commandline>"
            );
            for (opt, v) in args {
                let _ = writeln!(o, "  <qemu:arg value='{}'/>", xml(opt));
                let _ = writeln!(o, "  <qemu:arg value='{}'/>", xml(v));
            }
            o.push_str("</qemu:commandline>\n");
        }
    }
    Ok(o)
}

/// Run `vssd qemu-args`.
pub fn run(a: QemuArgsArgs) -> Result<(), QemuArgsError> {
    let mut p = Profile::load_with_capacity(&a.profile, a.capacity)?;
    if let Some(s) = &a.serial {
        p = p.with_serial(s)?;
    }
    let id = p.identity();
    let args = qemu_args(&a, &id)?;
    let text = if a.libvirt {
        libvirt_xml(&a, &id, &args)?
    } else {
        shell_text(&args)
    };
    vssd_common::cli_out::print(&text).map_err(|e| QemuArgsError::Usage(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: QemuArgsArgs,
    }

    fn args(cli: &[&str]) -> QemuArgsArgs {
        let mut v = vec!["t"];
        v.extend(cli);
        T::try_parse_from(v).unwrap().a
    }

    fn id() -> Identity {
        Profile::load("intel-x25m-g2").unwrap().identity()
    }

    #[test]
    fn sata_sets_the_identity_and_quotes_for_the_shell() {
        let a = args(&[
            "--bus",
            "sata",
            "--profile",
            "intel-x25m-g2",
            "--nbd",
            "unix:/run/v,1.sock",
        ]);
        let t = shell_text(&qemu_args(&a, &id()).unwrap());
        assert!(
            t.contains("server.type=unix,server.path=/run/v,,1.sock,export=vssd"),
            "{t}"
        );
        assert!(
            t.contains(
                "-device 'ide-hd,id=vssd0,drive=vssd0-raw,bus=vssd0-ahci.0,rotation_rate=1,discard_granularity=512,model=INTEL SSDSA2M160G2GC,serial=CVPO935600AB160AGN,ver=2CV102HD,wwn=0x5001517959a1b2c3'"
            ),
            "{t}"
        );
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn nvme_tcp_and_virtio_lines() {
        let a = args(&[
            "--bus",
            "nvme",
            "--profile",
            "nvme-tlc",
            "--nbd",
            "tcp:127.0.0.1:10809",
        ]);
        let id = Profile::load("nvme-tlc").unwrap().identity();
        let t = shell_text(&qemu_args(&a, &id).unwrap());
        assert!(
            t.contains("server.type=inet,server.host=127.0.0.1,server.port=10809"),
            "{t}"
        );
        assert!(
            t.contains(&format!(
                "-device nvme,id=vssd0,drive=vssd0-nbd,serial={}",
                id.serial
            )),
            "{t}"
        );
        let a = args(&[
            "--bus",
            "virtio",
            "--profile",
            "nvme-tlc",
            "--socket",
            "/run/vssd.sock",
            "--queues",
            "2",
            "--mem",
            "2G",
        ]);
        let t = shell_text(&qemu_args(&a, &id).unwrap());
        assert!(t.contains("-m 2G"), "{t}");
        assert!(t.contains("size=2G,share=on"), "{t}");
        assert!(
            t.contains("vhost-user-blk-pci,chardev=vssd0,num-queues=2"),
            "{t}"
        );
    }

    #[test]
    fn wrong_combinations_are_explained() {
        let e = |cli: &[&str]| qemu_args(&args(cli), &id()).unwrap_err().to_string();
        let m = e(&["--bus", "sata", "--profile", "x", "--socket", "/s"]);
        assert!(m.contains("--nbd"), "{m}");
        let m = e(&["--bus", "virtio", "--profile", "x", "--nbd", "/s"]);
        assert!(m.contains("--socket"), "{m}");
        let m = e(&["--bus", "nvme", "--profile", "x", "--nbd", "localhost:1"]);
        assert!(m.contains("unix:PATH"), "{m}");
        let m = e(&[
            "--bus",
            "nvme",
            "--profile",
            "x",
            "--nbd",
            "/s",
            "--id",
            "a b",
        ]);
        assert!(m.contains("--id"), "{m}");
    }

    #[test]
    fn libvirt_xml_carries_the_identity() {
        let a = args(&[
            "--bus",
            "sata",
            "--profile",
            "intel-x25m-g2",
            "--nbd",
            "/run/n.sock",
            "--libvirt",
        ]);
        let id = id();
        let x = libvirt_xml(&a, &id, &qemu_args(&a, &id).unwrap()).unwrap();
        assert!(x.contains("<serial>CVPO935600AB160AGN</serial>"), "{x}");
        assert!(x.contains("<wwn>5001517959a1b2c3</wwn>"), "{x}");
        assert!(x.contains("value='INTEL SSDSA2M160G2GC'"), "{x}");
        assert!(x.contains("socket='/run/n.sock'"), "{x}");
        // Well-formed apart from the qemu: prefix's namespace declaration.
        let doc = format!("<r xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>{x}</r>");
        assert!(roxmltree::Document::parse(&doc).is_ok(), "{x}");
    }
}
