#!/usr/bin/env bash
# Timing accuracy: how late completions reach the driver compared with the
# model's completion time (lateness = delivered - modelled), measured by
# `vssd ctl stats` while `vssd loadgen` drives 4 KiB random reads and
# writes at the given queue depths, for each profile and scheduling mode.
# A fresh daemon per point (so each histogram holds that point only), its
# drive preconditioned with one sequential fill. The modes of one point
# run back to back, so that their ratios are measured under the same load.
#
# Usage: benches/timing.sh
# Environment (all optional):
#   PROFILES="sata-mlc-2011 nvme-tlc"
#   QDS="1 32"  RWS="randread randwrite"  QUEUES=1
#   MODES="default"   space-separated; each is a set of extra `vssd serve`
#                     flags with commas for spaces, e.g.
#                     MODES="default --spin-us,0 --realtime"; @TRACE@
#                     becomes a fresh trace file per point, e.g.
#                     MODES="--realtime --realtime,--trace,@TRACE@"
#   RUNTIME=5 SIZE=4G
#   VSSD_BIN=path     the vssd binary (default: cargo build --release)
set -euo pipefail

die() { echo "timing.sh: error: $*" >&2; exit 1; }
log() { echo "timing.sh: $*" >&2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROFILES=${PROFILES:-sata-mlc-2011 nvme-tlc}
QDS=${QDS:-1 32}
RWS=${RWS:-randread randwrite}
QUEUES=${QUEUES:-1}
MODES=${MODES:-default}
RUNTIME=${RUNTIME:-5}
SIZE=${SIZE:-4G}

command -v jq >/dev/null 2>&1 || die "jq not found; run scripts/install-deps.sh"
if [[ -z "${VSSD_BIN:-}" ]]; then
    log "building vssd (cargo build --release)"
    (cd "$ROOT" && cargo build --release --quiet --bin vssd) || die "cargo build failed"
    VSSD_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/vssd"
fi
[[ -x "$VSSD_BIN" ]] || die "vssd binary $VSSD_BIN not found"

WORK=$(mktemp -d /tmp/vssd-timing.XXXXXX)
PID=""
cleanup() {
    [[ -n "$PID" ]] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

cpu_seconds() { # pid -> user+system CPU seconds so far
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' "/proc/$1/stat"
}
us() { awk -v x="$1" 'BEGIN { printf "%.1f", x / 1000 }'; }

printf "%-14s %-22s %-9s %4s %9s | %8s %8s %8s %8s %9s | %8s %8s | %8s | %s\n" \
    profile mode rw qd IOPS "late p50" p90 p99 p99.9 max "mod p50" "del p50" "vssd CPU" "traced/dropped"
for p in $PROFILES; do
    for rw in $RWS; do
        for qd in $QDS; do
            # The modes innermost: the points compared run back to back.
            for mode in $MODES; do
                mflags=()
                [[ "$mode" == default ]] || IFS=',' read -r -a mflags <<<"$mode"
                flags=("${mflags[@]}")
                rm -f "$WORK"/*.sock "$WORK"/*.ctl "$WORK"/trace
                flags=("${flags[@]//@TRACE@/$WORK/trace}")
                "$VSSD_BIN" serve --socket "$WORK/v.sock" --control "$WORK/v.ctl" --profile "$p" \
                    --capacity "$SIZE" --memory --queues "$QUEUES" "${flags[@]}" >"$WORK/serve.log" 2>&1 &
                PID=$!
                for ((i = 0; i < 600; i++)); do
                    [[ -S "$WORK/v.ctl" ]] && break
                    kill -0 "$PID" 2>/dev/null || die "vssd serve exited: $(tail -n 5 "$WORK/serve.log")"
                    sleep 0.05
                done
                "$VSSD_BIN" ctl --control "$WORK/v.ctl" precondition --fill seq >/dev/null
                c0=$(cpu_seconds "$PID")
                "$VSSD_BIN" loadgen --socket "$WORK/v.sock" --rw "$rw" --iodepth "$qd" --queues "$QUEUES" \
                    --runtime "$RUNTIME" --json >"$WORK/lg.json" || die "loadgen failed"
                c1=$(cpu_seconds "$PID")
                "$VSSD_BIN" ctl --control "$WORK/v.ctl" stats --json >"$WORK/stats.json"
                traced="-"
                if [[ " ${flags[*]} " == *" --trace "* ]]; then
                    "$VSSD_BIN" ctl --control "$WORK/v.ctl" trace stop --json >"$WORK/trace.json"
                    traced=$(jq -r '"\(.records)/\(.dropped)"' "$WORK/trace.json")
                fi
                kill "$PID"
                wait "$PID" 2>/dev/null || true
                PID=""
                iops=$(jq '.jobs[0].read.iops + .jobs[0].write.iops' "$WORK/lg.json")
                read -r p50 p90 p99 p999 max < <(jq -r '.lateness | "\(.p50_ns) \(.p90_ns) \(.p99_ns) \(.p999_ns) \(.max_ns)"' "$WORK/stats.json")
                op=$([[ $rw == *read ]] && echo read || echo write)
                read -r m50 d50 < <(jq -r --arg op "$op" '.ops[$op] | "\(.modelled.p50_ns) \(.delivered.p50_ns)"' "$WORK/stats.json")
                cpu=$(awk -v a="$c0" -v b="$c1" -v t="$RUNTIME" 'BEGIN { printf "%.0f%%", (b - a) / t * 100 }')
                printf "%-14s %-22s %-9s %4s %9.0f | %8s %8s %8s %8s %9s | %8s %8s | %8s | %s\n" \
                    "$p" "${mode//,/ }" "$rw" "$qd" "$iops" "$(us "$p50")" "$(us "$p90")" "$(us "$p99")" \
                    "$(us "$p999")" "$(us "$max")" "$(us "$m50")" "$(us "$d50")" "$cpu" "$traced"
            done
        done
    done
done
echo "(lateness, modelled and delivered latency in us; vssd CPU = its CPU time / runtime; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
