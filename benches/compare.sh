#!/usr/bin/env bash
# Overhead benchmark without a guest: `vssd loadgen` drives, over
# vhost-user-blk, in one run and the same way:
#   vssd       vssd serve --profile instant --memory (model bookkeeping, no delay)
#   qsd-null   qemu-storage-daemon exporting a null-co node (read-zeroes=on)
#   qsd-file   qemu-storage-daemon exporting a file on tmpfs (/dev/shm)
# 4 KiB random reads and writes at several queue depths on 1 and 2 queues.
# Prints IOPS, p99 completion latency and interrupts per I/O for each, and
# vssd's IOPS ratio to each qsd (target: >= 1.0 at every point).
#
# Usage: benches/compare.sh
# Environment (all optional):
#   RUNTIME=5 RAMP=1     seconds measured / ramp per point
#   ROUNDS=2             rounds; the backends' order alternates per round
#                        (ABC, CBA, ...) so load drift on a shared host evens out
#   QDS="1 32 128"       queue depths (per queue)
#   QUEUES="1 2"         queue counts
#   RWS="randread randwrite"
#   BS=4k SIZE=4G        block size, disk size
#   TARGETS="vssd qsd-null qsd-file"
#   VSSD_ARGS="..."      extra `vssd serve` arguments (e.g. --realtime)
#   VSSD_BIN=path        the vssd binary (default: cargo build --release)
#   JSON_DIR=dir         keep every loadgen JSON report there
set -euo pipefail

die() { echo "compare.sh: error: $*" >&2; exit 1; }
log() { echo "compare.sh: $*" >&2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNTIME=${RUNTIME:-5}
RAMP=${RAMP:-1}
ROUNDS=${ROUNDS:-2}
QDS=${QDS:-1 32 128}
QUEUES=${QUEUES:-1 2}
RWS=${RWS:-randread randwrite}
BS=${BS:-4k}
SIZE=${SIZE:-4G}
TARGETS=${TARGETS:-vssd qsd-null qsd-file}
VSSD_ARGS=${VSSD_ARGS:-}

for tool in qemu-storage-daemon jq; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found; run scripts/install-deps.sh"
done
if [[ -z "${VSSD_BIN:-}" ]]; then
    log "building vssd (cargo build --release)"
    (cd "$ROOT" && cargo build --release --quiet --bin vssd) || die "cargo build failed"
    VSSD_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/vssd"
fi
[[ -x "$VSSD_BIN" ]] || die "vssd binary $VSSD_BIN not found"
SIZE_BYTES=$(numfmt --from=iec "$SIZE") || die "SIZE=$SIZE: use a size like 4G"

WORK=$(mktemp -d /tmp/vssd-compare.XXXXXX)
JSON_DIR=${JSON_DIR:-$WORK/json}
mkdir -p "$JSON_DIR"
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -f "/dev/shm/$(basename "$WORK").img"
    rm -rf "$WORK"
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

declare -A SOCK PID_OF
start() { # target
    local t=$1 s="$WORK/$1.sock"
    case "$t" in
        vssd)
            # shellcheck disable=SC2086
            "$VSSD_BIN" serve --socket "$s" --profile instant --memory --queues 2 \
                --capacity "$SIZE" --control "$WORK/vssd.ctl" $VSSD_ARGS >"$WORK/$t.log" 2>&1 &
            ;;
        qsd-null)
            qemu-storage-daemon \
                --blockdev "driver=null-co,node-name=n0,size=$SIZE_BYTES,read-zeroes=on" \
                --export "type=vhost-user-blk,id=e0,node-name=n0,addr.type=unix,addr.path=$s,writable=on,num-queues=2" \
                >"$WORK/$t.log" 2>&1 &
            ;;
        qsd-file)
            local img="/dev/shm/$(basename "$WORK").img"
            truncate -s "$SIZE_BYTES" "$img"
            qemu-storage-daemon \
                --blockdev "driver=file,node-name=f0,filename=$img,discard=unmap" \
                --export "type=vhost-user-blk,id=e0,node-name=f0,addr.type=unix,addr.path=$s,writable=on,num-queues=2" \
                >"$WORK/$t.log" 2>&1 &
            ;;
        *) die "unknown target $t (vssd, qsd-null, qsd-file)" ;;
    esac
    PIDS+=($!)
    PID_OF[$t]=$!
    SOCK[$t]=$s
    wait_socket "$s" "$!" "$t"
}

read -r -a TL <<<"$TARGETS"
for t in "${TL[@]}"; do start "$t"; done

cpu_seconds() { # pid -> user+system CPU seconds so far
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' "/proc/$1/stat"
}

# Fill the file-backed disks once, so reads read data and writes overwrite.
for t in "${TL[@]}"; do
    [[ "$t" == qsd-null ]] && continue
    log "filling $t (one pass of 128k sequential writes)"
    "$VSSD_BIN" loadgen --socket "${SOCK[$t]}" --rw write --bs 128k --iodepth 16 --queues 2 \
        --runtime 600 --io-size $((SIZE_BYTES / 2)) --json >"$WORK/fill-$t.json" ||
        die "filling $t failed"
done

log "$ROUNDS round(s) of $RUNTIME s (+$RAMP s ramp) per point and backend; results in $JSON_DIR"
n=0
for ((r = 1; r <= ROUNDS; r++)); do
    for rw in $RWS; do
        for q in $QUEUES; do
            for qd in $QDS; do
                order=("${TL[@]}")
                if ((n % 2 == 1)); then
                    order=()
                    for ((i = ${#TL[@]} - 1; i >= 0; i--)); do order+=("${TL[i]}"); done
                fi
                n=$((n + 1))
                for t in "${order[@]}"; do
                    f="$JSON_DIR/$t.$rw.q$q.qd$qd.r$r.json"
                    c0=$(cpu_seconds "${PID_OF[$t]}")
                    "$VSSD_BIN" loadgen --socket "${SOCK[$t]}" --rw "$rw" --bs "$BS" --iodepth "$qd" \
                        --queues "$q" --runtime "$RUNTIME" --ramp "$RAMP" --json >"$f" ||
                        die "loadgen against $t failed: $(tail -n 5 "$f")"
                    c1=$(cpu_seconds "${PID_OF[$t]}")
                    jq --arg cpu "$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }')" \
                        '. + {backend_cpu_s: ($cpu | tonumber)}' "$f" >"$f.tmp" && mv "$f.tmp" "$f"
                done
            done
        done
    done
done

echo
echo "compare: $(nproc) host CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), bs=$BS, ${ROUNDS}x${RUNTIME}s per point (means), disk $SIZE"
echo "IOPS / p99 clat (us) / interrupts per I/O / backend CPU us per I/O"
{
    printf "%-10s %2s %4s" rw q qd
    for t in "${TL[@]}"; do printf " | %-31s" "$t"; done
    for t in "${TL[@]:1}"; do printf " | %s" "${TL[0]}/$t"; done
    printf "\n"
    for rw in $RWS; do
        for q in $QUEUES; do
            for qd in $QDS; do
                printf "%-10s %2s %4s" "$rw" "$q" "$qd"
                declare -A IOPS=()
                for t in "${TL[@]}"; do
                    read -r iops p99 irq cpu < <(jq -s -r '
                        (map(.jobs[0] | .read.iops + .write.iops) | add / length) as $iops
                        | (map(.jobs[0] | [.read, .write] | map(select(.total_ios > 0)) | .[0].clat_ns.percentile["99.000000"]) | add / length) as $p99
                        | (map(.jobs[0].notifications.calls_per_io) | add / length) as $irq
                        | (map(.backend_cpu_s / (.jobs[0].notifications.completions | if . == 0 then 1 else . end)) | add / length * 1e6) as $cpu
                        | "\($iops) \($p99) \($irq) \($cpu)"' "$JSON_DIR"/"$t.$rw.q$q.qd$qd".r*.json)
                    IOPS[$t]=$iops
                    printf " | %9.0f %7.1f %5.2f %6.2f" "$iops" "$(awk -v x="$p99" 'BEGIN { print x / 1000 }')" "$irq" "$cpu"
                done
                for t in "${TL[@]:1}"; do
                    printf " | %.2f" "$(awk -v a="${IOPS[${TL[0]}]}" -v b="${IOPS[$t]}" 'BEGIN { print (b > 0 ? a / b : 0) }')"
                done
                printf "\n"
            done
        done
    done
}
