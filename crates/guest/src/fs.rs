//! Filesystems the test guest makes on a drive, and the commands that
//! make them (the host's own `mkfs.*`, run in the guest).

use serde::{Deserialize, Serialize};

/// A filesystem the test guest can make: the demo's trim-passthrough
/// scenario and the bench's `trim` phases (mkfs, fstrim) use them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fs {
    /// ext4 (`mkfs.ext4 -E nodiscard`).
    Ext4,
    /// XFS (`mkfs.xfs -K`).
    Xfs,
    /// Btrfs (`mkfs.btrfs -K`).
    Btrfs,
    /// F2FS (`mkfs.f2fs -t 0`).
    F2fs,
    /// FAT32 (`mkfs.vfat`).
    Vfat,
}

impl Fs {
    /// The quiet, forced `mkfs` of this filesystem on `dev`. With
    /// `discard`, it TRIMs the whole device first, as each mkfs does by
    /// default; without, it is told not to, so that only what the test
    /// does afterwards reaches the drive (`mkfs.vfat` never discards).
    pub fn mkfs(self, dev: &str, discard: bool) -> String {
        match (self, discard) {
            (Fs::Ext4, true) => format!("mkfs.ext4 -q -F {dev}"),
            (Fs::Ext4, false) => format!("mkfs.ext4 -q -F -E nodiscard {dev}"),
            (Fs::Xfs, true) => format!("mkfs.xfs -q -f {dev}"),
            (Fs::Xfs, false) => format!("mkfs.xfs -q -f -K {dev}"),
            (Fs::Btrfs, true) => format!("mkfs.btrfs -q -f {dev}"),
            (Fs::Btrfs, false) => format!("mkfs.btrfs -q -f -K {dev}"),
            (Fs::F2fs, true) => format!("mkfs.f2fs -q -f {dev}"),
            (Fs::F2fs, false) => format!("mkfs.f2fs -q -f -t 0 {dev}"),
            (Fs::Vfat, _) => format!("mkfs.vfat -F 32 {dev}"),
        }
    }
}
