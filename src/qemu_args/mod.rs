//! `vssd qemu-args`: the exact QEMU arguments (or libvirt XML, [`libvirt`])
//! that attach a `vssd serve` drive to a guest on one bus, with the
//! preset's identity (model, serial, firmware, WWN) set on the emulated
//! SATA or NVMe device.

pub mod libvirt;

use std::path::PathBuf;

use vssd_frontend::nbd::NbdAddr;
use vssd_profile::size::{format_size, parse_size};
use vssd_profile::{Identity, Profile, ProfileError};
use vssd_qemu::{AhciPort, Attach, NbdServer, QemuOpt, QemuOptError, shared_memory};

pub use self::libvirt::LibvirtXml;

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
    /// `tcp:HOST:PORT`, or a socket path (as `vssd serve --nbd`).
    #[arg(long, value_name = "ADDR", value_parser = crate::serve::parse_nbd_addr)]
    pub nbd: Option<NbdAddr>,
    /// virtio: `num-queues`, at most `vssd serve --queues`.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub queues: u16,
    /// virtio: guest memory (the shared memfd vhost-user needs; QEMU's `-m`).
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size)]
    pub mem: u64,
    /// Name for the QEMU ids and node names (several drives need distinct
    /// ones); libvirt's alias is `ua-ID`.
    #[arg(long, value_name = "ID", default_value = "vssd0")]
    pub id: String,
    /// Print libvirt XML instead of QEMU arguments, one document: `domain`
    /// [default], a whole guest with the drive, for `virsh define`;
    /// `device`, the drive's `<disk>`, for `virsh attach-device DOMAIN FILE
    /// --config` (virtio, sata); `qemu`, what libvirt has no element for, in
    /// its QEMU namespace (SATA's model, firmware and WWN; the NVMe
    /// controller), to add to a domain with `virsh edit`.
    #[arg(long, value_enum, value_name = "WHAT", num_args = 0..=1, default_missing_value = "domain")]
    pub libvirt: Option<LibvirtXml>,
    /// libvirt: the domain's name (`--libvirt domain`).
    #[arg(long, value_name = "NAME", default_value = "vssd")]
    pub name: String,
    /// libvirt: the disk's `<target dev>` [default: vda for virtio, sda for
    /// sata]; pick one the domain does not use yet.
    #[arg(long, value_name = "DEV")]
    pub target: Option<String>,
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
    /// What cannot go into an XML document (a control character).
    #[error("{what} {value:?} cannot go into libvirt's XML (a control character)")]
    NotXml {
        /// Which value.
        what: &'static str,
        /// The value.
        value: String,
    },
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
            let server = match addr {
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

/// Run `vssd qemu-args`.
pub fn run(a: QemuArgsArgs) -> Result<(), QemuArgsError> {
    let mut p = Profile::load_with_capacity(&a.profile, a.capacity)?;
    if let Some(s) = &a.serial {
        p = p.with_serial(s)?;
    }
    let id = p.identity();
    let args = qemu_args(&a, &id)?;
    let text = match a.libvirt {
        Some(what) => libvirt::xml(&a, &id, &args, what)?,
        None => shell_text(&args),
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

    /// `vssd qemu-args CLI...` parsed (the libvirt tests use it too).
    pub(super) fn args(cli: &[&str]) -> QemuArgsArgs {
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
        let m = T::try_parse_from([
            "t",
            "--bus",
            "nvme",
            "--profile",
            "x",
            "--nbd",
            "localhost:1",
        ])
        .err()
        .unwrap()
        .to_string();
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
}
