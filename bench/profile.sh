#!/bin/bash
# bench/profile.sh: where a benchmark job spends its time, by perf (sampled) or callgrind (counted).
#
#   bash bench/profile.sh --job JOB [--tool perf|callgrind] [--threads N] [--out DIR]
#   JOB: train-S, train-B, decode-S, decode-B (the issue-4 configurations of bench/compare.sh)
#
# perf (default): `perf record -e cpu-clock --call-graph dwarf` over the whole job at N threads
#   (default 2), then the functions by their own samples (perf.txt) and by their callers
#   (perf-callers.txt). cpu-clock, a timer, not cycles: virtual machines often have no hardware
#   counters. Model creation is in the samples too (its initialisers, its page faults).
# callgrind: `valgrind --tool=callgrind` counting instructions (Ir) only inside the measured part
#   (--toggle-collect: qkv_trainer_step for training, qkv_session_step for decoding, so neither
#   the model's creation nor the encoder is counted), one thread, the fewest steps the job allows
#   (training: 1 step, no warm-up; decoding: one warm-up decode and one timed), then
#   callgrind_annotate by own and by inclusive count (callgrind.txt, callgrind-inclusive.txt).
#   Exact and repeatable, but: valgrind's CPU hides AVX-512, so the AVX2 paths are the ones
#   counted (qkv's 8-lane small-M kernel, OpenBLAS's Haswell kernels, no packed GEMM), and it
#   runs ~50-100x slower (train-S ~10 min, decode-B ~15 min; train-B is over an hour).
# Needs perf (Debian: linux-perf) or valgrind; `scripts/setup.sh --profile` installs both. A
# profile, not a benchmark: its times are not figures to compare (BENCHMARKS.md has those).
# Output in DIR (default build/profile/<job>-<tool>-<date-time>).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build/release}
JOB=""
TOOL=perf
THREADS=2
OUT=""
usage() { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
    --job) JOB=${2:-}; shift 2 || usage ;;
    --tool) TOOL=${2:-}; shift 2 || usage ;;
    --threads) THREADS=${2:-}; shift 2 || usage ;;
    --out) OUT=${2:-}; shift 2 || usage ;;
    -h | --help) usage ;;
    *) echo "profile.sh: unknown option '$1'" >&2; usage ;;
    esac
done
case "$JOB" in
train-S | train-B) PROG=bench_train ;;
decode-S | decode-B) PROG=bench_decode ;;
"") echo "profile.sh: --job is required" >&2; usage ;;
*) echo "profile.sh: --job takes train-S, train-B, decode-S or decode-B; got '$JOB'" >&2; exit 2 ;;
esac
CONFIG=${JOB#*-}
[[ "$THREADS" =~ ^[1-9][0-9]*$ ]] || { echo "profile.sh: --threads must be a positive integer, not '$THREADS'" >&2; exit 2; }
[ -x "$BUILD/$PROG" ] || { echo "profile.sh: $BUILD/$PROG is missing: build first (make build)" >&2; exit 1; }

case "$TOOL" in
perf)
    command -v perf >/dev/null || { echo "profile.sh: perf is not installed (scripts/setup.sh --profile)" >&2; exit 1; }
    if [ $PROG = bench_train ]; then
        ARGS=(--config "$CONFIG" --threads "$THREADS" --steps 3 --warmup 1)
    else
        ARGS=(--config "$CONFIG" --threads "$THREADS" --reps 3 --search greedy --no-uncached)
    fi
    ;;
callgrind)
    command -v valgrind >/dev/null || { echo "profile.sh: valgrind is not installed (scripts/setup.sh --profile)" >&2; exit 1; }
    if [ $PROG = bench_train ]; then
        ARGS=(--config "$CONFIG" --threads 1 --steps 1 --warmup 0)
        COLLECT=qkv_trainer_step
    else
        ARGS=(--config "$CONFIG" --threads 1 --reps 1 --search greedy --no-uncached)
        COLLECT=qkv_session_step
    fi
    ;;
*) echo "profile.sh: --tool takes perf or callgrind; got '$TOOL'" >&2; exit 2 ;;
esac

OUT=${OUT:-build/profile/$JOB-$TOOL-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
{
    echo "job: $JOB ($BUILD/$PROG ${ARGS[*]})"
    echo "tool: $TOOL"
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') x $(nproc)"
    echo "qkv: $("$BUILD/qkv" --version | tr '\n' ';')"
} >"$OUT/about.txt"
echo "profile.sh: $JOB under $TOOL, output in $OUT" >&2

if [ "$TOOL" = perf ]; then
    perf record -q -e cpu-clock -F 999 --call-graph dwarf,16384 -o "$OUT/perf.data" \
        "$BUILD/$PROG" "${ARGS[@]}" >"$OUT/job.txt"
    perf report -i "$OUT/perf.data" --no-children --sort dso,symbol --stdio -g none --percent-limit 0.3 \
        2>/dev/null | grep -v '^$' >"$OUT/perf.txt"
    perf report -i "$OUT/perf.data" --no-children --sort symbol --stdio -G --percent-limit 2 \
        2>/dev/null | grep -v '^$' >"$OUT/perf-callers.txt"
    REPORT="$OUT/perf.txt"
else
    valgrind -q --tool=callgrind --toggle-collect="$COLLECT" --callgrind-out-file="$OUT/callgrind.out" \
        "$BUILD/$PROG" "${ARGS[@]}" >"$OUT/job.txt"
    callgrind_annotate --threshold=99 "$OUT/callgrind.out" >"$OUT/callgrind.txt"
    callgrind_annotate --threshold=99 --inclusive=yes "$OUT/callgrind.out" >"$OUT/callgrind-inclusive.txt"
    REPORT="$OUT/callgrind.txt"
fi
cat "$OUT/job.txt"
echo
head -45 "$REPORT"
echo "profile.sh: the full reports are in $OUT" >&2
