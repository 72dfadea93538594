#!/bin/sh
# The queue depth a guest's fio delivers to the drive on each bus.
#
# For each bus (virtio over vhost-user; SATA and NVMe over QEMU's NBD
# client) and each fio iodepth, boots the test guest (vm-images/build-guest.sh)
# on a fresh `vssd serve`, runs 4 KiB random writes in it with libaio and
# O_DIRECT, and prints what `vssd ctl stats --json` says the drive saw on
# that connection: the most requests in flight at once and the mean number
# in flight while busy. Prints a Markdown table.
#
#   benches/qd-by-bus.sh [VSSD]        (default: vssd on PATH)
#
# Environment: VSSD_GUEST_DIR (the built guest, default vm-images/cache),
# PROFILE (default sata-mlc-2011), DEPTHS (default "1 4 16 32"),
# BUSES (default "virtio sata nvme"), RUNTIME (fio seconds, default 5),
# TIME_SCALE (passed to `vssd serve --time-scale`: the drive runs that many
# times slower than the wall clock, so a guest slowed by emulation (TCG)
# still keeps its queue full; default 1),
# ACCEL (default: kvm if /dev/kvm opens, else tcg; override if KVM guests
# hang on this host).
# Needs: qemu-system-x86_64, fio on the host (the guest runs the host's own
# fio, over 9p), python3 (to read the JSON).
set -eu
VSSD=${1:-vssd}
GUEST=${VSSD_GUEST_DIR:-$(dirname "$0")/../vm-images/cache}
PROFILE=${PROFILE:-sata-mlc-2011}
DEPTHS=${DEPTHS:-"1 4 16 32"}
BUSES=${BUSES:-"virtio sata nvme"}
RUNTIME=${RUNTIME:-5}
TIME_SCALE=${TIME_SCALE:-1}
if [ -z "${ACCEL:-}" ]; then
    if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then ACCEL=kvm; else ACCEL=tcg,thread=multi; fi
fi
for f in vmlinux initrd.cpio; do
    [ -f "$GUEST/$f" ] || { echo "no $GUEST/$f: run vm-images/build-guest.sh" >&2; exit 1; }
done
TMP=$(mktemp -d /tmp/vssd-qd.XXXXXX)
trap 'kill "$SERVE" 2>/dev/null || true; rm -rf "$TMP"' EXIT
SERVE=

echo "| bus | fio iodepth | max in flight at the drive | mean in flight while busy | IOPS (fio, wall clock) |"
echo "|---|---|---|---|---|"
for bus in $BUSES; do
    case $bus in
        virtio) dev=/dev/vda; attach="--socket $TMP/vhost.sock"; serve_arg="--socket $TMP/vhost.sock" ;;
        sata) dev=/dev/sda; attach="--nbd unix:$TMP/nbd.sock"; serve_arg="--nbd unix:$TMP/nbd.sock" ;;
        nvme) dev=/dev/nvme0n1; attach="--nbd unix:$TMP/nbd.sock"; serve_arg="--nbd unix:$TMP/nbd.sock" ;;
        *) echo "unknown bus $bus" >&2; exit 1 ;;
    esac
    for qd in $DEPTHS; do
        rm -f "$TMP"/*.sock
        # shellcheck disable=SC2086 # $serve_arg is two words
        "$VSSD" serve --profile "$PROFILE" --capacity 1G --memory \
            --time-scale "$TIME_SCALE" --control "$TMP/ctl.sock" $serve_arg >"$TMP/serve.log" 2>&1 &
        SERVE=$!
        i=0
        until "$VSSD" ctl --control "$TMP/ctl.sock" stats --json >/dev/null 2>&1; do
            i=$((i + 1)); [ $i -lt 100 ] || { cat "$TMP/serve.log" >&2; exit 1; }
            sleep 0.1
        done
        cat >"$TMP/guest.sh" <<SCRIPT
fio --name=qd --filename=$dev --rw=randwrite --bs=4k --direct=1 --ioengine=libaio \
    --iodepth=$qd --size=256M --time_based --runtime=$RUNTIME --output-format=json \
    --output=/tmp/fio.json >/dev/null 2>&1 || exit 1
python3 -c 'import json; print("QD-IOPS", json.load(open("/tmp/fio.json"))["jobs"][0]["write"]["iops"])'
SCRIPT
        # shellcheck disable=SC2046,SC2086
        eval "set -- $("$VSSD" qemu-args --bus "$bus" --profile "$PROFILE" --capacity 1G $attach --mem 512M)"
        if [ "$bus" != virtio ]; then
            set -- "$@" -m 512M -object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem
        fi
        timeout 300 qemu-system-x86_64 -nodefaults -no-user-config -no-reboot -display none \
            -accel "$ACCEL" -smp 2 \
            -kernel "$GUEST/vmlinux" -initrd "$GUEST/initrd.cpio" \
            -append "console=ttyS0 panic=-1 mitigations=off vssd.script=$TMP/guest.sh" \
            -serial "file:$TMP/console.log" \
            -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
            "$@" </dev/null >"$TMP/qemu.log" 2>&1 || true
        iops=$(sed -n 's/^QD-IOPS \([0-9.]*\).*/\1/p' "$TMP/console.log" | head -1)
        grep -q "VSSD-EXIT 0 0" "$TMP/console.log" || {
            echo "guest run failed ($bus, QD $qd):" >&2; tail -20 "$TMP/console.log" "$TMP/qemu.log" >&2; exit 1; }
        "$VSSD" ctl --control "$TMP/ctl.sock" stats --json >"$TMP/stats.json"
        python3 - "$TMP/stats.json" "$bus" "$qd" "${iops:-?}" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
# The guest's connection: the one that moved the most requests.
conns = [c for f in r["frontends"] for c in f["conns"]]
c = max(conns, key=lambda c: c["io"]["depth"]["request_ns"])["io"]["depth"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {c['max_in_flight']} | {c['mean_in_flight']:.1f} | {float(sys.argv[4]):.0f} |")
PY
        kill "$SERVE"; wait "$SERVE" 2>/dev/null || true; SERVE=
    done
done
