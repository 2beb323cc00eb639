#!/bin/bash
# bench/omp_regions.sh: a command's OpenMP parallel regions by outlined function, with the time
# each kind spent on one thread (a serial `if` clause: the other threads wait) or on the team.
#
#   bash bench/omp_regions.sh PROGRAM [ARGS...]
#   e.g. bash bench/omp_regions.sh build/release/bench_decode --config B --threads 2 --reps 3 \
#            --search greedy --no-uncached --phases
#
# Runs PROGRAM under the LD_PRELOAD shim bench/preload/omp_regions.c (built as
# build/release/libomp_regions.so by `make build` with GCC's OpenMP) and prints the program's own
# output, then a table of its regions: function, calls and seconds on one thread, calls and seconds
# on the team, largest total first. Names come from nm on the module holding each function
# (position-independent executables and shared libraries, as Debian's GCC builds them).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bash bench/omp_regions.sh PROGRAM [ARGS...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
shim=${OMP_REGIONS_SHIM:-$here/build/release/libomp_regions.so}
[ -f "$shim" ] || { echo "omp_regions.sh: $shim not found (make build, with GCC's OpenMP)" >&2; exit 1; }
command -v nm >/dev/null || { echo "omp_regions.sh: nm not found (Debian: binutils)" >&2; exit 1; }
program=$(command -v "$1") || { echo "omp_regions.sh: $1: no such program" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
LD_PRELOAD=$shim "$@" 2>"$log" || status=$?
grep -v '^omp_regions: ' "$log" >&2 || true
[ $status -eq 0 ] || exit $status
echo
echo "| region (outlined function) | one-thread calls | one-thread s | team calls | team s |"
echo "|---|---|---|---|---|"
grep '^omp_regions: ' "$log" | sed 1d | grep -v ' total ' | while read -r _ module offset c1 s1 cn sn; do
    [ "$module" = "?" ] && module=$program
    addr=$(printf '%016x' "$((offset))")
    name=$(nm "$module" 2>/dev/null | awk -v a="$addr" '!found && $1 == a && $2 ~ /^[tTiW]$/ { print $3; found = 1 }')
    awk -v n="${name:-$module+$offset}" -v c1="$c1" -v s1="$s1" -v cn="$cn" -v sn="$sn" \
        'BEGIN { printf "%.6f\t| %s | %s | %s | %s | %s |\n", s1 + sn, n, c1, s1, cn, sn }'
done | sort -gr | cut -f2-
grep '^omp_regions: total' "$log" | sed 's/^omp_regions: /\n/'
