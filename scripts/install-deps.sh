#!/usr/bin/env bash
# Install (idempotently) the Debian packages the vssd tests, demo and
# benches need: QEMU 7.2 (system emulator, qemu-storage-daemon, qemu-img,
# qemu-nbd), fio, the NBD client tools, libvirt (its client and QEMU
# driver, for tests/libvirt.rs), systemd-analyze (the unit's test), and
# what vm-images/build-guest.sh uses to build the test guest. Debian
# bookworm (or derivative) only. Recommended packages are not installed
# (qemu-system-x86 alone would bring a GTK/SDL display, mesa and gstreamer;
# blktrace ffmpeg): the tools below are all this needs.
#
# Runs `apt-get update` first (build-guest.sh needs current package lists);
# set VSSD_NO_APT_UPDATE=1 to skip that when nothing is missing.
set -euo pipefail

die() { echo "install-deps.sh: error: $*" >&2; exit 1; }
log() { echo "install-deps.sh: $*" >&2; }

export PATH="$PATH:/usr/sbin:/sbin"
command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this script supports Debian/Ubuntu hosts only"

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "not root and no sudo: run as root"
    SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive

installed() { # package -> success if installed
    [[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null)" == "ii " ]]
}
apt_install() {
    log "installing: $*"
    "${SUDO[@]}" apt-get install -y -q --no-install-recommends \
        -o Dpkg::Options::=--force-confold "$@" ||
        die "apt-get install $* failed"
}

# QEMU first, qemu-utils in a separate call: on images that ship a newer
# qemu-utils, qemu-system-x86 (7.2) removes it; installing qemu-utils
# afterwards brings back the matching 7.2 qemu-img/qemu-nbd.
STAGE1=(qemu-system-x86)
STAGE2=(
    qemu-utils          # qemu-img, qemu-nbd
    seabios             # firmware for -kernel boots
    fio                 # the workload, run inside the guest from the host root
    blktrace            # blkparse: the trace tests compare vssd's blkparse text with it
    libnbd-bin          # nbdinfo, nbdcopy: an independent NBD client
    python3-libnbd      # nbdsh (libnbd from Python), for NBD protocol tests
    busybox-static      # guest userland (build-guest.sh downloads its own copy too)
    cpio kmod xz-utils  # build-guest.sh: initramfs packing, depmod, vmlinux extraction
    util-linux          # flock, blkdiscard, fstrim
    hdparm              # IDENTIFY DEVICE as a SATA guest sees it (docs/windows.md)
    e2fsprogs           # mkfs.ext4 in guest scripts
    xfsprogs btrfs-progs dosfstools f2fs-tools  # more filesystems that send TRIM
    gcc libc6-dev       # linker for cargo
    ca-certificates
    libvirt-clients     # virsh: tests/libvirt.rs defines and boots domains
    libvirt-daemon libvirt-daemon-driver-qemu  # libvirtd and its QEMU driver (run privately by the test)
    systemd             # systemd-analyze verify: the vssd@.service unit's test
)

missing() { local p; for p in "$@"; do installed "$p" || echo "$p"; done; }

if [[ "${VSSD_NO_APT_UPDATE:-0}" != 1 || -n "$(missing "${STAGE1[@]}" "${STAGE2[@]}")" ]]; then
    log "apt-get update"
    "${SUDO[@]}" apt-get update -q || die "apt-get update failed (network to the Debian mirror?)"
fi

mapfile -t need1 < <(missing "${STAGE1[@]}")
[[ ${#need1[@]} -eq 0 ]] || apt_install "${need1[@]}"
mapfile -t need2 < <(missing "${STAGE2[@]}")
[[ ${#need2[@]} -eq 0 ]] || apt_install "${need2[@]}"

# Every program the tests run, on the host or in the guest (from the host's
# root): tests/install_deps.rs keeps this list in step with the tests.
TOOLS=(
    qemu-system-x86_64 qemu-storage-daemon qemu-img qemu-nbd
    fio blkparse nbdinfo nbdcopy nbdsh
    cpio depmod xz busybox
    blkdiscard fstrim flock setpriv hdparm
    mkfs.ext4 mkfs.xfs mkfs.btrfs mkfs.vfat mkfs.f2fs
    virsh libvirtd systemd-analyze
    cc
)
for tool in "${TOOLS[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is still missing after installing packages"
done
log "ok: $(qemu-system-x86_64 --version | head -n1), $(fio --version)"
