//! The QEMU options that attach a vssd drive to a guest: the shared guest
//! memory vhost-user needs, a vhost-user-blk disk, and QEMU's NBD client
//! under an AHCI SATA SSD or an NVMe controller with the preset's identity
//! on the emulated device.
//!
//! One builder for every place that starts or prints a QEMU command line:
//! `vssd qemu-args` prints these options for users (it is part of the
//! daemon's binary, so this crate builds without the kit), and the test
//! guest (`vssd-guest`) boots with them, so what the tests, the demo and
//! the bench run is what users are told to run.
//!
//! ```
//! use std::path::Path;
//! use vssd_qemu::Attach;
//!
//! let opts = Attach::VhostUserBlk {
//!     socket: Path::new("/run/vssd.sock"),
//!     queues: 2,
//!     reconnect_s: Some(1),
//! }
//! .options("vssd0")
//! .unwrap();
//! assert_eq!(
//!     opts,
//!     [
//!         ("-chardev", "socket,id=vssd0,path=/run/vssd.sock,reconnect=1".to_string()),
//!         ("-device", "vhost-user-blk-pci,chardev=vssd0,num-queues=2".to_string()),
//!     ]
//! );
//! ```
//!
//! Names: a drive attached as `NAME` has its chardev (vhost-user) or
//! device (`ide-hd`, `nvme`) id `NAME`, its block nodes `NAME-nbd` and
//! `NAME-raw`, and, when it brings its own, its AHCI controller
//! `NAME-ahci`; several drives in one guest need distinct names.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use vssd_profile::Identity;
use vssd_profile::identity::qemu_opt_value;

/// One QEMU option and its value: `("-device", "nvme,...")`.
pub type QemuOpt = (&'static str, String);

/// What cannot become a QEMU option.
#[derive(Debug, thiserror::Error)]
pub enum QemuOptError {
    /// QEMU's options are text: a path that is not UTF-8 cannot be named
    /// (a lossy conversion would name another file).
    #[error("path {} is not UTF-8", .0.display())]
    NotUtf8(PathBuf),
    /// A vhost-user-blk disk needs at least one virtqueue.
    #[error("vhost-user-blk num_queues must be >= 1")]
    NoQueues,
}

/// Guest memory of `mib` MiB as a shared memfd, the backend `id`: `-m`,
/// `-object memory-backend-memfd,...,share=on` and `-numa node,memdev=`.
/// vhost-user backends map the guest's memory, so it must be shared.
/// Sizes of whole GiB are written in `G`, others in `M`.
pub fn shared_memory(id: &str, mib: u64) -> Vec<QemuOpt> {
    let size = if mib.is_multiple_of(1024) {
        format!("{}G", mib / 1024)
    } else {
        format!("{mib}M")
    };
    vec![
        ("-m", size.clone()),
        (
            "-object",
            format!("memory-backend-memfd,id={id},size={size},share=on"),
        ),
        ("-numa", format!("node,memdev={id}")),
    ]
}

/// An AHCI controller, `id`, for SATA drives attached with
/// [`AhciPort::Port`].
pub fn ahci_controller(id: &str) -> QemuOpt {
    ("-device", format!("ahci,id={id}"))
}

/// Where QEMU's NBD client finds the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NbdServer<'a> {
    /// A unix socket.
    Unix(&'a Path),
    /// A TCP address.
    Inet(SocketAddr),
}

/// Which AHCI port a SATA drive sits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AhciPort<'a> {
    /// A controller of its own (`NAME-ahci`), port 0.
    Own,
    /// Port `port` of controller `controller` (see [`ahci_controller`]).
    Port {
        /// The controller's id.
        controller: &'a str,
        /// The port, 0 to 5.
        port: u8,
    },
}

/// How a drive is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach<'a> {
    /// virtio-blk over vhost-user (`vssd serve --socket`): the guest sees
    /// `/dev/vdX`; its serial comes from the daemon (GET_ID).
    VhostUserBlk {
        /// The daemon's vhost-user socket.
        socket: &'a Path,
        /// Virtqueues, at most what the daemon offers (`serve --queues`).
        queues: u16,
        /// QEMU reconnects every this many seconds when the daemon closes
        /// the connection (`reconnect=`); without it, it does not.
        reconnect_s: Option<u32>,
    },
    /// A SATA SSD (`ide-hd`, non-rotational, TRIM passed through) on AHCI,
    /// through QEMU's NBD client (`vssd serve --nbd`): `/dev/sdX`, with the
    /// identity in ATA IDENTIFY.
    NbdSata {
        /// The NBD server.
        server: NbdServer<'a>,
        /// The export name.
        export: &'a str,
        /// Model, serial, firmware, WWN.
        identity: &'a Identity,
        /// The AHCI port.
        ahci: AhciPort<'a>,
    },
    /// An NVMe controller with one namespace, through QEMU's NBD client:
    /// `/dev/nvmeNn1`, deallocate passed through; QEMU 7.2 takes only the
    /// serial of the identity ([`Identity::nvme_properties`]).
    NbdNvme {
        /// The NBD server.
        server: NbdServer<'a>,
        /// The export name.
        export: &'a str,
        /// The serial.
        identity: &'a Identity,
    },
}

impl Attach<'_> {
    /// The options that attach the drive as `name` (see the crate's
    /// documentation for the ids they use).
    pub fn options(&self, name: &str) -> Result<Vec<QemuOpt>, QemuOptError> {
        Ok(match *self {
            Attach::VhostUserBlk {
                socket,
                queues,
                reconnect_s,
            } => {
                if queues == 0 {
                    return Err(QemuOptError::NoQueues);
                }
                let reconnect = reconnect_s
                    .map(|s| format!(",reconnect={s}"))
                    .unwrap_or_default();
                vec![
                    (
                        "-chardev",
                        format!("socket,id={name},path={}{reconnect}", path_value(socket)?),
                    ),
                    (
                        "-device",
                        format!("vhost-user-blk-pci,chardev={name},num-queues={queues}"),
                    ),
                ]
            }
            Attach::NbdSata {
                server,
                export,
                identity,
                ahci,
            } => {
                let own = format!("{name}-ahci");
                let (controller, port) = match ahci {
                    AhciPort::Own => (own.as_str(), 0),
                    AhciPort::Port { controller, port } => (controller, port),
                };
                let mut v = vec![
                    nbd_blockdev(name, server, export)?,
                    (
                        "-blockdev",
                        format!("driver=raw,node-name={name}-raw,file={name}-nbd,discard=unmap"),
                    ),
                ];
                if ahci == AhciPort::Own {
                    v.push(ahci_controller(&own));
                }
                v.push((
                    "-device",
                    format!(
                        "ide-hd,id={name},drive={name}-raw,bus={controller}.{port},rotation_rate=1,discard_granularity=512,{}",
                        identity.ide_hd_properties()
                    ),
                ));
                v
            }
            Attach::NbdNvme {
                server,
                export,
                identity,
            } => vec![
                nbd_blockdev(name, server, export)?,
                (
                    "-device",
                    format!(
                        "nvme,id={name},drive={name}-nbd,{}",
                        identity.nvme_properties()
                    ),
                ),
            ],
        })
    }
}

/// QEMU's NBD client on `export` of `server` as block node `NAME-nbd`,
/// passing discards on.
fn nbd_blockdev(name: &str, server: NbdServer<'_>, export: &str) -> Result<QemuOpt, QemuOptError> {
    let server = match server {
        NbdServer::Unix(p) => format!("server.type=unix,server.path={}", path_value(p)?),
        NbdServer::Inet(s) => format!(
            "server.type=inet,server.host={},server.port={}",
            s.ip(),
            s.port()
        ),
    };
    Ok((
        "-blockdev",
        format!(
            "driver=nbd,node-name={name}-nbd,{server},export={},discard=unmap",
            qemu_opt_value(export)
        ),
    ))
}

/// A path as a QEMU option value (commas doubled).
fn path_value(p: &Path) -> Result<String, QemuOptError> {
    p.to_str()
        .map(qemu_opt_value)
        .ok_or_else(|| QemuOptError::NotUtf8(p.to_path_buf()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn identity() -> Identity {
        Identity {
            model: "M, X".into(),
            serial: "S1".into(),
            firmware: "F1".into(),
            wwn: Some(0x5001517959a1b2c3),
            smart: vssd_profile::SmartSet::Generic,
            read_after_trim: Default::default(),
        }
    }

    fn text(opts: &[QemuOpt]) -> String {
        opts.iter()
            .map(|(o, v)| format!("{o} {v}"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn shared_memory_in_whole_gib_or_mib() {
        assert_eq!(
            text(&shared_memory("mem", 2048)),
            "-m 2G\n-object memory-backend-memfd,id=mem,size=2G,share=on\n-numa node,memdev=mem"
        );
        assert_eq!(shared_memory("m", 1536)[0].1, "1536M");
    }

    #[test]
    fn sata_on_its_own_controller_or_a_shared_one() {
        let id = identity();
        let own = Attach::NbdSata {
            server: NbdServer::Unix(Path::new("/run/n,1.sock")),
            export: "vssd",
            identity: &id,
            ahci: AhciPort::Own,
        };
        assert_eq!(
            text(&own.options("d0").unwrap()),
            "-blockdev driver=nbd,node-name=d0-nbd,server.type=unix,server.path=/run/n,,1.sock,export=vssd,discard=unmap\n\
             -blockdev driver=raw,node-name=d0-raw,file=d0-nbd,discard=unmap\n\
             -device ahci,id=d0-ahci\n\
             -device ide-hd,id=d0,drive=d0-raw,bus=d0-ahci.0,rotation_rate=1,discard_granularity=512,model=M,, X,serial=S1,ver=F1,wwn=0x5001517959a1b2c3"
        );
        let shared = Attach::NbdSata {
            server: NbdServer::Unix(Path::new("/run/n,1.sock")),
            export: "vssd",
            identity: &id,
            ahci: AhciPort::Port {
                controller: "ahci",
                port: 3,
            },
        };
        let t = text(&shared.options("d1").unwrap());
        assert!(!t.contains("-device ahci"), "{t}");
        assert!(t.contains("drive=d1-raw,bus=ahci.3,"), "{t}");
    }

    #[test]
    fn nvme_over_tcp_and_bad_input() {
        let id = identity();
        let nvme = Attach::NbdNvme {
            server: NbdServer::Inet("[::1]:10809".parse().unwrap()),
            export: "e,x",
            identity: &id,
        };
        assert_eq!(
            text(&nvme.options("n").unwrap()),
            "-blockdev driver=nbd,node-name=n-nbd,server.type=inet,server.host=::1,server.port=10809,export=e,,x,discard=unmap\n\
             -device nvme,id=n,drive=n-nbd,serial=S1"
        );
        let none = Attach::VhostUserBlk {
            socket: Path::new("/s"),
            queues: 0,
            reconnect_s: None,
        };
        assert!(matches!(none.options("v"), Err(QemuOptError::NoQueues)));
        use std::os::unix::ffi::OsStrExt;
        let bad = Path::new(std::ffi::OsStr::from_bytes(b"/run/\xff.sock"));
        let e = Attach::VhostUserBlk {
            socket: bad,
            queues: 1,
            reconnect_s: None,
        }
        .options("v")
        .unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
    }
}
