#!/usr/bin/env bash
# Build the libFuzzer targets (tests/<area>/fuzz_<name>.c: clang, ASan + UBSan, the library and
# the CLI's modules with coverage) in build/fuzz and run each for a while.
#
#   scripts/fuzz.sh --build-only          configure and build every target
#   scripts/fuzz.sh [--time N] [NAME...]  build, then run every target (or the NAMEd ones, e.g.
#                                         fuzz_corpus) N seconds each (FUZZ_TIME, default 20)
#   scripts/fuzz.sh --runs N [NAME...]    run each N executions instead (the campaign of
#                                         docs/reliability.md: --runs 10000000)
#
# Each run starts from the target's seed corpus (tests/<area>/corpus/<name without fuzz_>, or
# tests/<area>/fuzz_corpus) and its dictionary (tests/<area>/<target>.dict) when there is one;
# what it discovers accumulates in build/fuzz/corpus/<target>, its output in
# build/fuzz/logs/<target>.log. Per target it prints the executions and "0 crashes", or the file
# holding the input that crashed, leaked, hung (over 10 s for one input) or ran out of memory, with
# the end of the sanitizer's report. Ends with "N passed, N failed" (one per target) and exits
# non-zero when any target failed. Scratch files go to a directory under /dev/shm (tmpfs: the
# readers' fsyncs cost nothing there), removed at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${FUZZ_BUILD:-build/fuzz}
TIME=${FUZZ_TIME:-20}
RUNS=
JOBS=${JOBS:-2}
build_only=0
names=()
while [ $# -gt 0 ]; do
    case "$1" in
    --build-only) build_only=1 ;;
    --time) TIME=$2; shift ;;
    --runs) RUNS=$2; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) names+=("$1") ;;
    esac
    shift
done
if ! command -v clang >/dev/null; then
    echo "fuzz.sh: clang is missing (scripts/setup.sh installs it)" >&2
    exit 1
fi
# OpenMP off: the parsers are serial, and LLVM's OpenMP runtime leaves a registration file in
# /dev/shm for every process that does not exit normally (libFuzzer ends with _Exit).
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DQKV_FUZZ=ON \
    -DQKV_BUILD_TESTS=OFF -DQKV_BUILD_BENCH=OFF -DQKV_BUILD_DOUBLE=OFF -DQKV_WITH_OPENMP=OFF >/dev/null ||
    exit 1
sources=$(find tests -name 'fuzz_*.c' | sort)
targets=()
for src in $sources; do
    targets+=("$(basename "$src" .c)")
done
cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" >"$BUILD/build.log" 2>&1 || {
    tail -n 40 "$BUILD/build.log"
    echo "fuzz.sh: the build failed ($BUILD/build.log)"
    exit 1
}
[ "$build_only" -eq 1 ] && { echo "built ${targets[*]} in $BUILD"; exit 0; }

scratch=$(mktemp -d /dev/shm/qkv-fuzz.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$BUILD/logs" "$BUILD/crashes"
pass=0 fail=0
for src in $sources; do
    name=$(basename "$src" .c)
    if [ ${#names[@]} -gt 0 ] && [[ ! " ${names[*]} " == *" $name "* ]]; then continue; fi
    dir=$(dirname "$src")
    seeds=$dir/corpus/${name#fuzz_}
    [ -d "$seeds" ] || seeds=$dir/fuzz_corpus
    [ -d "$seeds" ] || seeds=
    dict=$dir/$name.dict
    work=$BUILD/corpus/$name
    log=$BUILD/logs/$name.log
    mkdir -p "$work" "$scratch/$name"
    args=(-timeout=10 -print_final_stats=1 -artifact_prefix="$BUILD/crashes/$name-")
    if [ -n "$RUNS" ]; then args+=(-runs="$RUNS"); else args+=(-max_total_time="$TIME"); fi
    [ -f "$dict" ] && args+=(-dict="$dict")
    TMPDIR=$scratch/$name "$BUILD/$name" "${args[@]}" "$work" $seeds >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    if [ "$rc" -eq 0 ] && [ -z "$artifact" ]; then
        printf '%-22s %10s executions (%s/s), 0 crashes\n' "$name" "${runs:-?}" "${rate:-?}"
        pass=$((pass + 1))
    else
        printf '%-22s %10s executions (%s/s), FAILED (exit %d): %s\n' "$name" "${runs:-?}" "${rate:-?}" \
            "$rc" "${artifact:-no input saved, see $log}"
        # the report's first lines and the first frames of its first stack
        awk '/ERROR|SUMMARY|runtime error|invariant failed/ { print; next }
             /^ *#[0-9]+ 0x/ { if (++frames <= 8) print }' "$log" | head -n 20 | sed 's/^/    /'
        echo "    reproduce: $BUILD/$name ${artifact:-<input>}   (log: $log)"
        fail=$((fail + 1))
    fi
    rm -rf "${scratch:?}/$name"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
