#!/usr/bin/env bash
# Overhead benchmark: vssd (profile `instant`, data in memory) against
# qemu-storage-daemon exporting a tmpfs file, both over vhost-user-blk, seen
# by the same guest in the same boot (vssd = /dev/vda, qsd = /dev/vdb), with
# the same fio jobs. Prints IOPS / bandwidth and vssd/qsd ratios. Under TCG
# the guest is the bottleneck, so a ratio below ~0.9 is vssd's overhead.
#
# Usage: benches/guest-vs-qsd.sh
# Environment (all optional):
#   RUNTIME=6       seconds per fio run (plus RAMP=2 s of ramp time)
#   ROUNDS=2        runs per job and backend, alternating which backend goes
#                   first (ABBA...), so load drift on a shared host evens out
#   SIZE=1G         size of each disk
#   JOBS=2 QD=16    fio jobs (one per vCPU, so both queues are busy) and
#                   queue depth per job: 2 x 16 = 32 requests in flight
#   TARGETS="vssd qsd"   which backends to measure (e.g. TARGETS=qsd)
#   ONLY="randread-4k"   run only these jobs (seqwrite-128k randread-4k randwrite-4k)
#   VSSD_BIN=path   the vssd binary (default: cargo build --release)
#   VSSD_ACCEL=kvm|tcg   accelerator (default: the verdict cached by the
#                   Rust guest runner's KVM probe, else tcg)
#   VSSD_GUEST_DIR  guest image cache (as for vm-images/build-guest.sh)
#   KEEP=1          keep the work directory (console log, daemon logs,
#                   `vssd ctl stats` at the end)
# Besides IOPS and MB/s, the table shows the guest's interrupts per completed
# I/O on each disk (fewer = better completion batching by the backend).
#
# The QEMU command line mirrors crates/guest (Guest::qemu_args); keep in step.
set -euo pipefail

die() { echo "guest-vs-qsd.sh: error: $*" >&2; exit 1; }
log() { echo "guest-vs-qsd.sh: $*" >&2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNTIME=${RUNTIME:-6}
ROUNDS=${ROUNDS:-2}
RAMP=${RAMP:-2}
SIZE=${SIZE:-1G}
JOBS=${JOBS:-2}
QD=${QD:-16}
TARGETS=${TARGETS:-vssd qsd}
GUEST_DIR=${VSSD_GUEST_DIR:-$ROOT/vm-images/cache}
QEMU=${VSSD_QEMU:-qemu-system-x86_64}

for tool in "$QEMU" qemu-storage-daemon; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found; run scripts/install-deps.sh"
done
case " $TARGETS " in *" vssd "* | *" qsd "*) ;; *) die "TARGETS must name vssd and/or qsd" ;; esac

# --- Guest image and accelerator ----------------------------------------------------
"$ROOT/vm-images/build-guest.sh" "$GUEST_DIR"
KREL=$(cat "$GUEST_DIR/kernel-release")
KERNEL="$GUEST_DIR/vmlinux"  # ELF with PVH entry: faster boot (see build-guest.sh)
[[ -f "$KERNEL" ]] || KERNEL="$GUEST_DIR/vmlinuz"
ACCEL=${VSSD_ACCEL:-}
if [[ -z "$ACCEL" ]]; then
    ACCEL=tcg
    if [[ -r /dev/kvm && -w /dev/kvm && -f "$GUEST_DIR/accel-verdict" ]]; then
        # Same key as crates/guest/src/accel.rs: guest kernel, QEMU version, host kernel.
        key="$KREL"$'\t'"$("$QEMU" --version | head -n1)"$'\t'"$(cat /proc/sys/kernel/osrelease)"
        while IFS= read -r line; do
            [[ "$line" == "$key"$'\t'* ]] && ACCEL=${line##*$'\t'}
        done <"$GUEST_DIR/accel-verdict"
    elif [[ -r /dev/kvm && -w /dev/kvm ]]; then
        log "no cached KVM probe verdict (cargo test runs the probe); using TCG, set VSSD_ACCEL=kvm to override"
    fi
fi
case "$ACCEL" in
    kvm) ACCEL_ARG=kvm ;;
    tcg) ACCEL_ARG=tcg,thread=multi ;;
    *) die "VSSD_ACCEL must be kvm or tcg, not '$ACCEL'" ;;
esac

# --- Backends ------------------------------------------------------------------------
WORK=$(mktemp -d /tmp/vssd-bench.XXXXXX)
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -f /dev/shm/"$(basename "$WORK")".img
    if [[ "${KEEP:-0}" == 1 ]]; then log "work files kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

wait_socket() { # socket pid name
    local i
    for ((i = 0; i < 600; i++)); do
        [[ -S "$1" ]] && return 0
        kill -0 "$2" 2>/dev/null || die "$3 exited at startup: $(tail -n 20 "$WORK/$3.log")"
        sleep 0.05
    done
    die "$3 did not create $1 within 30 s"
}

DISK_ARGS=()
DEVICES=()
declare -A PID_OF
if [[ " $TARGETS " == *" vssd "* ]]; then
    if [[ -z "${VSSD_BIN:-}" ]]; then
        log "building vssd (cargo build --release)"
        (cd "$ROOT" && cargo build --release --quiet --bin vssd) || die "cargo build failed"
        VSSD_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/vssd"
    fi
    [[ -x "$VSSD_BIN" ]] || die "vssd binary $VSSD_BIN not found"
    "$VSSD_BIN" serve --socket "$WORK/vssd.sock" --profile instant --memory --queues 2 \
        --capacity "$SIZE" --control "$WORK/vssd.ctl" >"$WORK/vssd.log" 2>&1 &
    PIDS+=($!)
    PID_OF[vssd]=$!
    wait_socket "$WORK/vssd.sock" "$!" vssd
    DISK_ARGS+=(-chardev "socket,id=vu0,path=$WORK/vssd.sock"
        -device "vhost-user-blk-pci,chardev=vu0,num-queues=2")
    DEVICES+=("vssd")
fi
if [[ " $TARGETS " == *" qsd "* ]]; then
    IMG=/dev/shm/$(basename "$WORK").img
    truncate -s "$SIZE" "$IMG"
    qemu-storage-daemon \
        --blockdev "driver=file,node-name=f0,filename=$IMG,discard=unmap" \
        --export "type=vhost-user-blk,id=e0,node-name=f0,addr.type=unix,addr.path=$WORK/qsd.sock,writable=on,num-queues=2" \
        >"$WORK/qsd.log" 2>&1 &
    PIDS+=($!)
    PID_OF[qsd]=$!
    wait_socket "$WORK/qsd.sock" "$!" qsd
    DISK_ARGS+=(-chardev "socket,id=vu1,path=$WORK/qsd.sock"
        -device "vhost-user-blk-pci,chardev=vu1,num-queues=2")
    DEVICES+=("qsd")
fi

# --- The guest script ------------------------------------------------------------------
# Devices appear in command-line order: the first is vda, the second vdb.
# Jobs: 128 KiB sequential write first (it also fills the disks, so the
# reads that follow read written data), then 4 KiB random read and write.
# Each job runs ROUNDS times per backend, the backends alternating who goes
# first (ABBA...), to even out drift in a shared host's load.
{
    echo "set -e"
    echo "RUNTIME=$RUNTIME RAMP=$RAMP JOBS=$JOBS QD=$QD"
    letters=(a b)
    for i in "${!DEVICES[@]}"; do
        echo "DEV_${DEVICES[i]}=/dev/vd${letters[i]}"
        echo "echo \"DEVICE ${DEVICES[i]} /dev/vd${letters[i]} \$(blockdev --getsize64 /dev/vd${letters[i]})\""
    done
    cat <<'EOS'
# Interrupts of the disk's virtio request queues, and its completed I/Os.
irqs() { # dev
    v=$(basename "$(readlink -f "/sys/block/${1#/dev/}/device")")
    awk -v q="$v-req" 'index($NF, q) == 1 {
        for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i } END { print s + 0 }' /proc/interrupts
}
ios() { awk -v d="${1#/dev/}" '$3 == d { print $4 + $8 }' /proc/diskstats; }
run() { # target job rw bs round
    dev=$(eval echo "\$DEV_$1")
    irq0=$(irqs "$dev"); io0=$(ios "$dev")
    fio --name="$2" --filename="$dev" --ioengine=libaio --direct=1 --rw="$3" --bs="$4" \
        --iodepth="$QD" --numjobs="$JOBS" --offset_increment=$(( $(blockdev --getsize64 "$dev") / JOBS )) \
        --size=$(( $(blockdev --getsize64 "$dev") / JOBS )) --time_based --runtime="$RUNTIME" \
        --ramp_time="$RAMP" --group_reporting --randrepeat=0 --norandommap \
        --output-format=terse --terse-version=3 >/tmp/fio.out 2>/tmp/fio.err || {
        cat /tmp/fio.err; exit 1; }
    # terse v3: 5 error, 7/8 read KiB/s, IOPS; 48/49 write KiB/s, IOPS
    irq=$(( $(irqs "$dev") - irq0 )); io=$(( $(ios "$dev") - io0 ))
    awk -F';' -v t="$1" -v j="$2" -v r="$5" -v irq="$irq" -v io="$io" \
        '/^3;/ { print "RESULT", t, j, r, $5, $7, $8, $48, $49, irq, io }' /tmp/fio.out
}
EOS
    n=0
    for job in "seqwrite-128k write 128k" "randread-4k randread 4k" "randwrite-4k randwrite 4k"; do
        read -r name rw bs <<<"$job"
        [[ -z "${ONLY:-}" || " $ONLY " == *" $name "* ]] || continue
        for ((r = 1; r <= ROUNDS; r++)); do
            order=("${DEVICES[@]}")
            if (((n + r) % 2 == 0)) && ((${#order[@]} == 2)); then order=("${order[1]}" "${order[0]}"); fi
            for t in "${order[@]}"; do echo "run $t $name $rw $bs $r"; done
        done
        n=$((n + 1))
    done
} >"$WORK/script.sh"

# --- Boot ------------------------------------------------------------------------------
TOKEN=bench$$
LOGF="$WORK/console.log"
NRUNS=$(grep -c '^run ' "$WORK/script.sh")
[[ $NRUNS -gt 0 ]] || die "no fio job selected (ONLY=$ONLY)"
TIMEOUT=$((180 + NRUNS * (RUNTIME + RAMP + 20)))
log "booting the guest ($ACCEL, ${#DEVICES[@]} disk(s) of $SIZE, $NRUNS fio runs of ${RUNTIME}+${RAMP} s; timeout ${TIMEOUT} s)"
START=$(date +%s.%N)
rc=0
timeout --kill-after=10 "$TIMEOUT" "$QEMU" -nodefaults -no-user-config -no-reboot -display none \
    -accel "$ACCEL_ARG" -smp 2 -m 1024M \
    -object memory-backend-memfd,id=mem,size=1024M,share=on -numa node,memdev=mem \
    -kernel "$KERNEL" -initrd "$GUEST_DIR/initrd.cpio" \
    -append "console=ttyS0 panic=-1 mitigations=off vssd.script=$WORK/script.sh vssd.token=$TOKEN" \
    -chardev "file,id=console,path=$LOGF" -serial chardev:console \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    "${DISK_ARGS[@]}" </dev/null >"$WORK/qemu.log" 2>&1 || rc=$?
END=$(date +%s.%N)
cpu_seconds() { # pid -> user+system CPU seconds of the whole process so far
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.1f", ($12 + $13) / hz }' "/proc/$1/stat"
}
if [[ -n "${PID_OF[vssd]:-}" ]]; then
    # The daemon's own view (latency / lateness percentiles): kept with KEEP=1.
    "$VSSD_BIN" ctl --control "$WORK/vssd.ctl" stats >"$WORK/vssd-stats.txt" 2>&1 ||
        log "warning: vssd ctl stats failed: $(tail -n 3 "$WORK/vssd-stats.txt")"
fi
CPU_REPORT=""
for t in "${DEVICES[@]}"; do
    CPU_REPORT+=" $t $(cpu_seconds "${PID_OF[$t]}") s,"
done
OUT=$(tr -d '\r' <"$LOGF")
if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    die "guest timed out after ${TIMEOUT} s; console tail:
$(tail -n 30 <<<"$OUT")"
fi
STATUS=$(sed -n "s/^.*VSSD-EXIT $TOKEN \([0-9]*\).*/\1/p" <<<"$OUT" | head -n1)
[[ -n "$STATUS" ]] || die "QEMU exited ($rc) before the guest script finished; QEMU: $(tail -n 5 "$WORK/qemu.log"); console tail:
$(tail -n 30 <<<"$OUT")"
[[ "$STATUS" == 0 ]] || die "guest script failed with status $STATUS; output:
$(sed -n "/VSSD-BEGIN $TOKEN/,/VSSD-EXIT $TOKEN/p" <<<"$OUT")"
BOOT=$(sed -n "s/^VSSD-BEGIN $TOKEN .*uptime=\([0-9.]*\).*/\1/p" <<<"$OUT")

# --- Report ------------------------------------------------------------------------------
echo
echo "guest-vs-qsd: accel=$ACCEL, guest kernel $KREL, $(nproc) host CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "fio: libaio direct, $JOBS jobs x QD $QD, $ROUNDS rounds x ${RUNTIME} s (+${RAMP} s ramp) per job and backend (means shown); guest up ${BOOT:-?} s at script start, run $(awk -v a="$START" -v b="$END" 'BEGIN { printf "%.0f", b - a }') s"
echo "backend CPU time over the whole run:${CPU_REPORT%,}"
grep '^DEVICE ' <<<"$OUT" | awk '{ printf "  %-5s %s %d MiB\n", $2, $3, $4 / 1048576 }'
echo
awk -v targets="${DEVICES[*]}" '
    /^RESULT / {
        t = $2; j = $3; r = $4
        if ($5 != 0) err = err " " t "/" j "/" r "=" $5
        io = $7 + $9
        iops[t, j] += io; bw[t, j] += ($6 + $8) * 1024 / 1e6; cnt[t, j]++
        irq[t, j] += $10; ios[t, j] += $11
        round[t, j, r] = io
        if (r > rounds) rounds = r
        if (!(j in seen)) { seen[j] = 1; order[++n] = j }
    }
    END {
        nt = split(targets, tl, " ")
        printf "%-14s", "job"
        for (k = 1; k <= nt; k++) printf " %10s %9s %6s", tl[k] " IOPS", tl[k] " MB/s", "irq/IO"
        if (nt == 2) printf " %9s  %s", tl[1] "/" tl[2], "(per round)"
        printf "\n"
        for (i = 1; i <= n; i++) {
            j = order[i]
            printf "%-14s", j
            for (k = 1; k <= nt; k++) {
                c = cnt[tl[k], j] ? cnt[tl[k], j] : 1
                printf " %10.0f %9.1f %6.2f", iops[tl[k], j] / c, bw[tl[k], j] / c,
                    (ios[tl[k], j] > 0 ? irq[tl[k], j] / ios[tl[k], j] : 0)
            }
            if (nt == 2) {
                printf " %9.2f  (", (iops[tl[2], j] > 0 ? iops[tl[1], j] / iops[tl[2], j] : 0)
                for (r = 1; r <= rounds; r++)
                    printf "%s%.2f", (r > 1 ? " " : ""), (round[tl[2], j, r] > 0 ? round[tl[1], j, r] / round[tl[2], j, r] : 0)
                printf ")"
            }
            printf "\n"
        }
        if (err != "") { printf "fio errors:%s\n", err; exit 1 }
    }' <<<"$OUT"
