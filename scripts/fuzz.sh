#!/usr/bin/env bash
# Coverage-guided fuzzing of every pure parser (crates/fuzz) with libFuzzer,
# on the stable toolchain: libfuzzer-sys builds libFuzzer itself, and
# rustc's stable `-C passes=sancov-module` plus LLVM's SanitizerCoverage
# options give it the coverage it needs (what cargo-fuzz passes, without
# the AddressSanitizer that would need a nightly: vssd's parsers are safe
# Rust, where a bug shows as a panic, which libFuzzer catches).
#
#   scripts/fuzz.sh [--seconds N | --total N] [--jobs J] [--merge] [--seed] [TARGET...]
#
#   --seconds N  run each target N seconds (default 60)
#   --total N    share N seconds between the targets (CI: --total 60)
#   --jobs J     run J targets at once (default 1)
#   --merge      afterwards, add what the runs found to the committed
#                corpus (fuzz/corpus/TARGET), minimised (libFuzzer -merge=1)
#   --seed       (re)copy the repository's own inputs into the corpus
#                first: presets, fidelity corpus files, job files
#   TARGET...    some targets only (default: all; `--list` lists them)
#
# Each run starts from fuzz/corpus/TARGET; what it finds goes to
# target/fuzz/found/TARGET (the committed corpus is only changed by
# --merge). A crash or hang leaves its input in target/fuzz/artifacts/TARGET
# and makes the script fail, naming the file; `cargo test -p vssd-fuzz`
# then replays the corpus, and a crash input copied into fuzz/corpus/TARGET
# becomes a regression test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() { echo "fuzz.sh: error: $*" >&2; exit 1; }
log() { echo "fuzz.sh: $*" >&2; }

ALL=(nbd_handshake nbd_request vhost_queue fio_job iolog blkparse blktrace vssd_trace profile_toml corpus_toml ctl_json)
seconds=60 total="" jobs=1 merge=0 seed=0 targets=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
        --total) total=${2:?--total needs a number}; shift 2 ;;
        --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
        --merge) merge=1; shift ;;
        --seed) seed=1; shift ;;
        --list) printf '%s\n' "${ALL[@]}"; exit 0 ;;
        -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1 (--help)" ;;
        *) targets+=("$1"); shift ;;
    esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=("${ALL[@]}")
for t in "${targets[@]}"; do
    [[ " ${ALL[*]} " == *" $t "* ]] || die "no target $t (--list)"
done
if [[ -n $total ]]; then
    seconds=$(( total / ${#targets[@]} ))
    [[ $seconds -ge 1 ]] || seconds=1
fi

if [[ $seed == 1 ]]; then
    copy() { # target files...
        local t=$1; shift
        mkdir -p "fuzz/corpus/$t"
        for f in "$@"; do cp "$f" "fuzz/corpus/$t/repo-$(echo "$f" | tr '/' '_')"; done
    }
    copy profile_toml crates/profile/src/presets/*.toml
    copy corpus_toml validation/*.toml
    mapfile -t fios < <(git ls-files '*.fio')
    copy fio_job "${fios[@]}"
    python3 fuzz/make-seeds.py >/dev/null
    log "seeded fuzz/corpus from the repository"
fi

# Build every target with SanitizerCoverage; the flags apply to the target
# only (--target), not to build scripts.
host=$(rustc -vV | sed -n 's/^host: //p')
export CARGO_TARGET_DIR="$PWD/target/fuzz/build"
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
log "building ${#targets[@]} targets (stable $(rustc --version | cut -d' ' -f2), SanitizerCoverage)"
bins=()
for t in "${targets[@]}"; do bins+=(--bin "$t"); done
# Not --locked: the fuzz workspace's lock also lists the workspace's own
# crates, whose dependencies change with them; cargo brings those entries
# up to date and keeps the registry crates' pinned versions.
cargo build --release --manifest-path fuzz/Cargo.toml --target "$host" "${bins[@]}" >&2 ||
    die "building the fuzz targets failed"
bindir="$CARGO_TARGET_DIR/$host/release"

run_one() { # target
    local t=$1 found="target/fuzz/found/$1" art="target/fuzz/artifacts/$1"
    mkdir -p "$found" "$art" "fuzz/corpus/$t"
    local out="target/fuzz/$t.log"
    # -timeout: one input taking 10 s is a hang; -rss_limit_mb bounds
    # what an input can make a parser hold.
    if "$bindir/$t" "$found" "fuzz/corpus/$t" -max_total_time="$seconds" -timeout=10 \
        -rss_limit_mb=2048 -artifact_prefix="$art/" -print_final_stats=1 >"$out" 2>&1; then
        local runs cov
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -n1)
        cov=$(grep -o 'cov: [0-9]*' "$out" | tail -n1 | cut -d' ' -f2)
        echo "ok    $t: ${runs:-?} runs in ${seconds}s, coverage ${cov:-?}"
    else
        echo "FAIL  $t: $(ls "$art" | head -n1) (log: $out)"
        grep -m1 -E 'panicked|ERROR: libFuzzer' "$out" | sed 's/^/      /' || true
        return 1
    fi
}
export -f run_one
export bindir seconds

log "running: ${seconds}s each, $jobs at a time"
status=0
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {} || status=1

if [[ $merge == 1 ]]; then
    for t in "${targets[@]}"; do
        "$bindir/$t" -merge=1 "fuzz/corpus/$t" "target/fuzz/found/$t" >/dev/null 2>&1 ||
            log "merging $t failed"
    done
    log "merged what the runs found into fuzz/corpus"
fi
if [[ $status != 0 ]]; then
    die "a target failed: its input is under target/fuzz/artifacts/TARGET/ (copy it into fuzz/corpus/TARGET/ and fix)"
fi
