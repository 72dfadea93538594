//! How the test guest sees a vssd drive: the bus it is attached through.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::Disk;
use vssd_profile::Identity;

/// The bus a vssd drive is attached through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Bus {
    /// virtio-blk over vhost-user (`/dev/vda`).
    Virtio,
    /// A SATA SSD on AHCI through QEMU's NBD client (`/dev/sda`, ATA TRIM).
    Sata,
    /// An NVMe namespace through QEMU's NBD client (`/dev/nvme0n1`, deallocate).
    Nvme,
}

impl Bus {
    /// `virtio`, `sata` or `nvme`.
    pub fn name(self) -> &'static str {
        match self {
            Bus::Virtio => "virtio",
            Bus::Sata => "sata",
            Bus::Nvme => "nvme",
        }
    }

    /// The disk's name in the guest's `/sys/block` (first disk of its kind).
    pub fn sysfs_name(self) -> &'static str {
        match self {
            Bus::Virtio => "vda",
            Bus::Sata => "sda",
            Bus::Nvme => "nvme0n1",
        }
    }

    /// The guest's device node.
    pub fn guest_dev(self) -> String {
        format!("/dev/{}", self.sysfs_name())
    }

    /// Whether the daemon must serve NBD for this bus (else vhost-user).
    pub fn uses_nbd(self) -> bool {
        self != Bus::Virtio
    }

    /// The QEMU attachment, given the daemon's sockets and the identity
    /// the drive reports (set on the SATA and NVMe devices; on virtio the
    /// daemon answers GET_ID itself).
    pub fn disk(
        self,
        vhost_socket: &Path,
        nbd_socket: &Path,
        queues: u16,
        identity: &Identity,
    ) -> Disk {
        match self {
            Bus::Virtio => Disk::VhostUserBlk {
                socket: vhost_socket.into(),
                num_queues: queues,
            },
            Bus::Sata => Disk::NbdSata {
                socket: nbd_socket.into(),
                export: "vssd".into(),
                identity: identity.clone(),
            },
            Bus::Nvme => Disk::NbdNvme {
                socket: nbd_socket.into(),
                export: "vssd".into(),
                identity: identity.clone(),
            },
        }
    }
}

impl std::fmt::Display for Bus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
