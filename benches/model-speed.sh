#!/bin/sh
# Model speed, as whole `vssd sim` runs (CPU time, the fill's alone
# subtracted):
# - page mapping on a GC-bound job: an 8 GiB sata-mlc-2011 filled in
#   order, then 12 GiB of random 4 KiB writes at QD 32 (norandommap,
#   write amplification about 4.8): simulated host writes per second
#   (target: 1 M/s);
# - hybrid mapping's worst case: a 4 GiB solidata-k5-64 filled, then
#   256 MiB of random 4 KiB writes: NAND page reads and programs per
#   second (target: 20 M/s per core).
#
#   benches/model-speed.sh [VSSD] [RUNS]
#
# RUNS (default 3) pairs of runs; the figure of each and their median.
# Compare two binaries in one session (the host is shared): run it for
# each, or use farm-bench --vs on the random.fio run.
set -eu
vssd=${1:-target/release/vssd}
runs=${2:-3}
dir=$(dirname "$0")/model-speed
cpu() { # user+sys seconds of one vssd sim run: PROFILE CAPACITY JOB
    /usr/bin/time -f '%U %S' "$vssd" sim --profile "$1" --capacity "$2" \
        --output-format json "$3" 2>&1 >/dev/null | tail -1 | awk '{print $1 + $2}'
}
pages() { # NAND pages read + programmed by a run: PROFILE CAPACITY JOB
    "$vssd" sim --profile "$1" --capacity "$2" --output-format json "$3" 2>/dev/null |
        tr ',' '\n' | awk -F: '/"nand_pages_(read|programmed)"/ {s += $2} END {print s}'
}
writes=$((12 * 1024 * 1024 / 4))
rates=""
hrates=""
i=0
while [ "$i" -lt "$runs" ]; do
    f=$(cpu sata-mlc-2011 8G "$dir/fill.fio")
    t=$(cpu sata-mlc-2011 8G "$dir/random.fio")
    r=$(echo "$writes $t $f" | awk '{printf "%.3f", $1 / ($2 - $3) / 1e6}')
    echo "run $((i + 1)): page: fill $f s, fill + random $t s: $r M simulated 4 KiB writes/s"
    rates="$rates $r"
    hf=$(cpu solidata-k5-64 4G "$dir/fill.fio")
    ht=$(cpu solidata-k5-64 4G "$dir/hybrid.fio")
    ops=$(( $(pages solidata-k5-64 4G "$dir/hybrid.fio") - $(pages solidata-k5-64 4G "$dir/fill.fio") ))
    h=$(echo "$ops $ht $hf" | awk '{printf "%.2f", $1 / ($2 - $3) / 1e6}')
    echo "run $((i + 1)): hybrid: fill $hf s, fill + random $ht s, $ops NAND page operations: $h M/s"
    hrates="$hrates $h"
    i=$((i + 1))
done
med() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median: page mapping $(echo "$rates" | med) M host writes/s (target 1), hybrid $(echo "$hrates" | med) M NAND page operations/s (target 20)"
