#!/usr/bin/env bash
# Run every suite of one build directory and print one closing line "N passed, N failed".
#   scripts/run_tests.sh BUILD_DIR
# Suites: float with 1 thread, float with 2 threads, float with the reference kernels, and the
# double build (finite-difference gradient checks).
set -u
build=${1:-build/release}
total_pass=0 total_fail=0 total_skip=0 status=0
run_suite() {
    local label=$1; shift
    echo "== $label: $*"
    local out rc
    out=$("$@" 2>&1); rc=$?
    printf '%s\n' "$out" | grep -v '^[0-9]* passed, [0-9]* failed' || true
    local line
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    if [ -z "$line" ]; then
        echo "   $label: no result line (exit $rc)"; total_fail=$((total_fail + 1)); status=1; return
    fi
    echo "   $label: $line"
    local p f s
    p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    s=$(echo "$line" | sed -nE 's/.* ([0-9]+) skipped.*/\1/p')
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f)); total_skip=$((total_skip + ${s:-0}))
    [ "$rc" -eq 0 ] || status=1
}
run_suite "float, 1 thread" "$build/qkv_tests" --threads 1
run_suite "float, 2 threads" "$build/qkv_tests" --threads 2
run_suite "float, reference kernels" "$build/qkv_tests" --threads 2 --kernels ref
if [ -x "$build/qkv_tests_f64" ]; then
    run_suite "double (gradient checks)" "$build/qkv_tests_f64" --threads 2
fi
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ] || status=1
exit $status
