#!/usr/bin/env bash
# Build the vssd Linux test guest: a Debian kernel plus a busybox initramfs.
#
# Usage: vm-images/build-guest.sh [OUTDIR]
#   OUTDIR defaults to $VSSD_GUEST_DIR, else vm-images/cache next to this script.
#
# Everything comes from Debian packages fetched with `apt-get download`:
#   - linux-image-6.1.0-NN-amd64 (the ABI that linux-image-amd64 points at,
#     or $VSSD_GUEST_KERNEL_PKG if set): its vmlinuz and the modules for
#     virtio-blk, 9p over virtio, AHCI/SATA (sd_mod) and NVMe;
#   - busybox-static: the whole guest userland of the initramfs.
# The guest does not carry fio & co.: its /init mounts the host's root
# read-only over 9p at /host and runs the requested script chrooted there
# (see the /init written below for the boot protocol and console markers).
#
# Outputs in OUTDIR: vmlinuz (bzImage), vmlinux (the same kernel as an ELF
# file with a PVH entry, for QEMU -kernel without in-guest decompression;
# absent if it cannot be extracted), initrd.cpio, kernel-release, stamp.
# A second run with the same kernel package, busybox version and this script
# unchanged only checks the stamp. Needs: apt-get/apt-cache (with package
# lists, run `apt-get update` once), dpkg, cpio, depmod (kmod), sha256sum,
# flock (util-linux), xz (xz-utils, optional: faster boots). scripts/install-deps.sh installs them.
set -euo pipefail

die() { echo "build-guest.sh: error: $*" >&2; exit 1; }
log() { echo "build-guest.sh: $*" >&2; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF="$HERE/$(basename "${BASH_SOURCE[0]}")"
OUT=${1:-${VSSD_GUEST_DIR:-$HERE/cache}}

for tool in apt-get apt-cache dpkg dpkg-deb cpio depmod sha256sum flock; do
    command -v "$tool" >/dev/null 2>&1 ||
        die "'$tool' not found; run scripts/install-deps.sh (needs a Debian/Ubuntu host)"
done

mkdir -p "$OUT" || die "cannot create output directory $OUT"
OUT=$(cd "$OUT" && pwd)

# Serialise concurrent builds (parallel test binaries) on one lock file.
exec 9>"$OUT/.lock"
flock 9

# --- Which packages? --------------------------------------------------------
SCRIPT_HASH=$(sha256sum "$SELF" | cut -d' ' -f1)
have_build() { [[ -f "$OUT/stamp" && -f "$OUT/vmlinuz" && -f "$OUT/initrd.cpio" && -f "$OUT/kernel-release" ]]; }

# Fast path: the key below can only change when this script, the kernel
# override or apt's package lists change; skip asking apt (~1 s) otherwise.
FASTKEY="script=$SCRIPT_HASH kernel-override=${VSSD_GUEST_KERNEL_PKG:-}"
APT_LISTS=/var/lib/apt/lists
if have_build && [[ -f "$OUT/stamp.fast" && "$(cat "$OUT/stamp.fast")" == "$FASTKEY" &&
      "$OUT/stamp.fast" -nt "$APT_LISTS" ]]; then
    exit 0
fi

# One apt-cache call (each costs ~1 s): the kernel meta package names the
# current ABI package (linux-image-6.1.0-NN-amd64) with its exact version.
SHOW=$(apt-cache show --no-all-versions linux-image-amd64 busybox-static ${VSSD_GUEST_KERNEL_PKG:-} 2>/dev/null) || true
field() { # package field -> value from $SHOW
    awk -v p="$1" -v f="$2: " '
        /^Package: / { cur = substr($0, 10) }
        cur == p && index($0, f) == 1 { print substr($0, length(f) + 1); exit }' <<<"$SHOW"
}
KPKG=${VSSD_GUEST_KERNEL_PKG:-}
if [[ -n "$KPKG" ]]; then
    KVERSION=$(field "$KPKG" Version)
else
    dep=$(field linux-image-amd64 Depends)
    KPKG=$(sed -n 's/^\(linux-image-[0-9][^ ,]*-amd64\) (= \([^)]*\)).*/\1/p' <<<"$dep")
    KVERSION=$(sed -n 's/^\(linux-image-[0-9][^ ,]*-amd64\) (= \([^)]*\)).*/\2/p' <<<"$dep")
fi
BBVERSION=$(field busybox-static Version)
if [[ -z "$KPKG" || -z "$KVERSION" || -z "$BBVERSION" ]]; then
    if have_build; then
        # No package lists (offline?): a finished build is better than none.
        log "apt cannot resolve the kernel/busybox packages; reusing the existing build in $OUT"
        exit 0
    fi
    die "apt does not know linux-image-amd64${VSSD_GUEST_KERNEL_PKG:+/$VSSD_GUEST_KERNEL_PKG} or busybox-static (run 'apt-get update'; on non-Debian hosts set VSSD_GUEST_DIR to a prebuilt guest)"
fi

KEY="kernel=$KPKG/$KVERSION busybox-static=$BBVERSION script=$SCRIPT_HASH"
if have_build && [[ "$(cat "$OUT/stamp")" == "$KEY" ]]; then
    echo "$FASTKEY" >"$OUT/stamp.fast"
    exit 0
fi
log "building test guest in $OUT ($KPKG $KVERSION, busybox-static $BBVERSION)"
rm -f "$OUT/stamp" "$OUT/stamp.fast"

# --- Fetch and unpack the packages ----------------------------------------------
DEBS="$OUT/debs"
mkdir -p "$DEBS"
fetch_deb() { # name version -> prints path of the .deb
    local name=$1 version=$2 f rc
    # apt-get names the file NAME_VERSION_ARCH.deb with ':' written as %3a.
    f="$DEBS/${name}_${version//:/%3a}_amd64.deb"
    if [[ ! -s "$f" ]]; then
        log "downloading $name $version"
        # apt-get download writes to the current directory; as root it warns
        # that _apt cannot write there: harmless, filtered out.
        rc=0
        (cd "$DEBS" && apt-get -q download "$name=$version") >"$DEBS/.apt.log" 2>&1 || rc=$?
        grep -v 'Download is performed unsandboxed' "$DEBS/.apt.log" >&2 || true
        [[ $rc -eq 0 ]] ||
            die "apt-get download $name=$version failed (exit $rc; network to the Debian mirror?)"
        [[ -s "$f" ]] || die "apt-get download did not produce $f"
    fi
    echo "$f"
}
KDEB=$(fetch_deb "$KPKG" "$KVERSION")
BBDEB=$(fetch_deb busybox-static "$BBVERSION")

WORK=$(mktemp -d "$OUT/.work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

log "unpacking $(basename "$KDEB")"
# Only boot/ and the few module directories we need: full unpacking is ~400 MB.
dpkg-deb --fsys-tarfile "$KDEB" |
    tar -x -C "$WORK" --wildcards './boot/vmlinuz-*' './boot/config-*' \
        './lib/modules/*/modules.*' \
        './lib/modules/*/kernel/drivers/virtio' './lib/modules/*/kernel/drivers/block' \
        './lib/modules/*/kernel/drivers/ata' './lib/modules/*/kernel/drivers/scsi' \
        './lib/modules/*/kernel/drivers/nvme' './lib/modules/*/kernel/fs/9p' \
        './lib/modules/*/kernel/fs/netfs' './lib/modules/*/kernel/fs/fscache' \
        './lib/modules/*/kernel/net/9p' './lib/modules/*/kernel/lib' \
        './lib/modules/*/kernel/crypto' './lib/modules/*/kernel/block' \
        './lib/modules/*/kernel/fs/ext4' './lib/modules/*/kernel/fs/jbd2' \
        './lib/modules/*/kernel/fs/mbcache.ko' './lib/modules/*/kernel/fs/xfs' \
        './lib/modules/*/kernel/fs/btrfs' './lib/modules/*/kernel/fs/f2fs' \
        './lib/modules/*/kernel/fs/fat' './lib/modules/*/kernel/fs/nls' \
        './lib/modules/*/kernel/arch/x86/crypto' ||
    die "cannot unpack $KDEB"
dpkg-deb -x "$BBDEB" "$WORK/bb" || die "cannot unpack $BBDEB"

shopt -s nullglob
vmlinuz=("$WORK"/boot/vmlinuz-*)
[[ ${#vmlinuz[@]} -eq 1 ]] || die "expected one boot/vmlinuz-* in $KDEB, found ${#vmlinuz[@]}"
KREL=${vmlinuz[0]##*/vmlinuz-}
MODDIR="$WORK/lib/modules/$KREL"
[[ -d "$MODDIR" ]] || die "no lib/modules/$KREL in $KDEB"
BUSYBOX="$WORK/bb/bin/busybox"
[[ -x "$BUSYBOX" ]] || die "no bin/busybox in $BBDEB"

# The package ships no modules.dep (its postinst runs depmod): make one over
# the subset we unpacked.
depmod -b "$WORK" "$KREL" 2>/dev/null || die "depmod failed on $MODDIR"

# --- An uncompressed kernel for a faster boot ------------------------------
# A bzImage decompresses itself (xz) at every boot: seconds under TCG. QEMU
# can load the ELF vmlinux inside it directly when the kernel has a PVH entry
# point (CONFIG_PVH). Extract it the way the kernel's extract-vmlinux does:
# try each xz stream header until one decompresses to an ELF file.
VMLINUX=""
if grep -qx 'CONFIG_PVH=y' "$WORK"/boot/config-* && command -v xz >/dev/null 2>&1; then
    offsets=$(LC_ALL=C grep -obUaP '\xFD7zXZ\x00' "${vmlinuz[0]}" | cut -d: -f1 | head -n 5) || true
    for off in $offsets; do
        # (tail gets SIGPIPE when xz stops after the stream: not an error)
        if { tail -c +$((off + 1)) "${vmlinuz[0]}" || true; } |
            xz -dc --single-stream >"$WORK/vmlinux" 2>/dev/null &&
            [[ "$(head -c 4 "$WORK/vmlinux" | od -An -c | tr -d ' ')" == '177ELF' ]]; then
            VMLINUX="$WORK/vmlinux"
            break
        fi
    done
    [[ -n "$VMLINUX" ]] || log "warning: no ELF vmlinux found in $(basename "${vmlinuz[0]}"); guests will boot the slower bzImage"
fi

# --- Resolve the module load order from modules.dep -------------------------------
# Wanted, in load order. Soft dependencies are listed explicitly since
# modules.softdep names aliases ("crct10dif"), not modules: crc-t10dif and
# crc64-rocksoft want a provider of their algorithm loaded first.
WANTED=(
    virtio_pci virtio_blk          # virtio bus + vhost-user-blk disks
    9pnet_virtio 9p                # host root over virtio-9p
    crct10dif_generic crc64_rocksoft_generic
    ahci sd_mod                    # SATA (NBD -> ide-hd on AHCI)
    nvme                           # NVMe (NBD -> nvme)
    crc32c_generic                 # crc32c provider (ext4, xfs, btrfs, f2fs checksums)
    ext4 xfs btrfs f2fs vfat       # filesystems that send TRIM (mount -o discard, fstrim)
    nls_cp437 nls_iso8859-1        # vfat's default code pages
)
declare -A DEPS PATHS DONE
norm() { local n=${1##*/}; n=${n%%.ko*}; echo "${n//-/_}"; }
while IFS= read -r line; do
    mod=${line%%:*}
    name=$(norm "$mod")
    PATHS[$name]=$mod
    deps=""
    for d in ${line#*:}; do deps+=" $(norm "$d")"; done
    DEPS[$name]=$deps
done <"$MODDIR/modules.dep"

ORDER=()
visit() { # depth-first, dependencies before dependents
    local name
    name=$(norm "$1")
    [[ -n "${DONE[$name]:-}" ]] && return 0
    [[ -n "${PATHS[$name]:-}" ]] ||
        die "module $1 is not in $KPKG (built in? renamed?); check $MODDIR/modules.dep"
    DONE[$name]=1
    local d
    for d in ${DEPS[$name]}; do visit "$d"; done
    ORDER+=("$name")
}
for m in "${WANTED[@]}"; do visit "$m"; done

# --- Assemble the initramfs ------------------------------------------------------
ROOT="$WORK/initramfs"
mkdir -p "$ROOT"/{bin,sbin,dev,proc,sys,host,tmp,lib/modules,etc}
cp "$BUSYBOX" "$ROOT/bin/busybox"
for applet in $("$BUSYBOX" --list); do
    [[ "$applet" == busybox ]] || ln -sf busybox "$ROOT/bin/$applet"
done
: >"$ROOT/etc/modules"
for name in "${ORDER[@]}"; do
    src="$MODDIR/${PATHS[$name]}"
    case "$src" in
        *.ko) cp "$src" "$ROOT/lib/modules/$name.ko" ;;
        *.ko.xz) xz -dc "$src" >"$ROOT/lib/modules/$name.ko" ;;
        *.ko.zst) zstd -qdc "$src" >"$ROOT/lib/modules/$name.ko" ;;
        *) die "unknown module format: $src" ;;
    esac
    echo "$name" >>"$ROOT/etc/modules"
done
echo "$KREL" >"$ROOT/etc/kernel-release"

# The boot protocol, as used by src/guest (keep both in step):
#   kernel command line: vssd.script=/ABS/PATH (a file on the host),
#                        vssd.token=WORD (echoed in the markers; default 0).
#   console: "VSSD-BEGIN <token>", the script's stdout+stderr,
#            "VSSD-EXIT <token> <status>", then power off.
#   Failures before the script runs print "VSSD-ERROR <token> <reason>" and
#   exit with status 255 in the VSSD-EXIT line.
cat >"$ROOT/init" <<'EOF'
#!/bin/sh
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

script=""
token=0
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        vssd.script=*) script=${arg#vssd.script=} ;;
        vssd.token=*) token=${arg#vssd.token=} ;;
    esac
done

finish() {
    echo "VSSD-EXIT $token $1 uptime=$(cut -d" " -f1 /proc/uptime)"
    sync
    poweroff -f
    sleep 5
    echo o >/proc/sysrq-trigger
}
fail() {
    echo "VSSD-ERROR $token $*"
    finish 255
}

echo "vssd-init: loading modules at $(cut -d" " -f1 /proc/uptime)"
while read -r m; do
    insmod "/lib/modules/$m.ko" || echo "vssd-init: insmod $m failed"
done </etc/modules

mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=524288 hostroot /host ||
    fail "cannot mount the host root over 9p (is -virtfs ... mount_tag=hostroot given?)"
[ -n "$script" ] || fail "no vssd.script= on the kernel command line"
# Copy the script before anything is mounted over the host's directories
# (it may live in /tmp or /dev/shm).
cp "/host$script" /script.sh 2>/dev/null || fail "cannot read script $script from the host"
mount -t proc proc /host/proc || fail "mount /host/proc"
mount -t sysfs sysfs /host/sys || fail "mount /host/sys"
mount -t devtmpfs devtmpfs /host/dev || fail "mount /host/dev"
mkdir -p /host/dev/shm /host/dev/pts
mount -t tmpfs tmpfs /host/dev/shm
mount -t devpts devpts /host/dev/pts

mount -t tmpfs tmpfs /host/tmp || fail "mount /host/tmp"
mount -t tmpfs tmpfs /host/run || true
cp /script.sh /host/tmp/vssd-script.sh

# Keep kernel messages off the console while the script's output is captured.
echo 1 >/proc/sys/kernel/printk
ncpu=$(grep -c ^processor /proc/cpuinfo)
echo "VSSD-BEGIN $token kernel=$(cat /etc/kernel-release) cpus=$ncpu uptime=$(cut -d" " -f1 /proc/uptime)"
cd /host/tmp
chroot /host /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/tmp TERM=dumb LANG=C.UTF-8 /bin/sh -c 'cd /tmp && exec /bin/sh /tmp/vssd-script.sh' </dev/null
status=$?
finish "$status"
EOF
chmod 755 "$ROOT/init"

(cd "$ROOT" && find . -print0 | LC_ALL=C sort -z |
    cpio --null -o -H newc --reproducible --quiet) >"$WORK/initrd.cpio" ||
    die "cpio failed"

mv -f "$WORK/initrd.cpio" "$OUT/initrd.cpio"
cp -f "${vmlinuz[0]}" "$OUT/vmlinuz"
if [[ -n "$VMLINUX" ]]; then mv -f "$VMLINUX" "$OUT/vmlinux"; else rm -f "$OUT/vmlinux"; fi
echo "$KREL" >"$OUT/kernel-release"
echo "$KEY" >"$OUT/stamp"
echo "$FASTKEY" >"$OUT/stamp.fast"
log "done: $OUT/vmlinuz $OUT/initrd.cpio (kernel $KREL, modules: ${ORDER[*]})"
