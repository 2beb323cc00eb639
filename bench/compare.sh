#!/bin/bash
# bench/compare.sh: qkv against PyTorch on the issue-4 configurations, in the same run.
#
#   bash bench/compare.sh [--only S,B,gpt2,attn] [--reps R] [--quick] [--threads N] [--scaling]
#                         [--qkv-wait-policy P] [--attn-mem-cap-gib G] [--out DIR]
#   make bench-compare [COMPARE_ARGS="..."]
#
# Per repetition (R, default 3; each measurement a separate process, so peak RSS is its own):
#   1. the sgemm ceiling: bench_gemm --ceiling (raw cblas_sgemm 2048^3 at N threads, median);
#   2. training, per selected config S / B / gpt2: bench_train (qkv) and torch_bench.py --mode
#      train (PyTorch), alternating which goes first from one repetition to the next; the two
#      parameter counts must be equal (the script stops with an error otherwise);
#      --scaling adds qkv at 1 thread (issue 4: 2 threads >= 1.8x 1 thread on B);
#   3. decoding, S and B: bench_decode --no-uncached (qkv, KV cache) and torch_bench.py --mode
#      decode (no cache): greedy and beam 5;
#   4. attention (attn): forward + backward, 8 heads, head size 64, no mask: batch 8 at T = 128,
#      512, 1024, 2048 (the anchors' table) and batch 1 at T = 1024, 4096, 8192 (long sequences);
#      qkv's tiled kernel (bench_attention --seq) against PyTorch's materialised attention, run
#      only where its estimated memory (3.5 (B, 8, T, T) fp32 matrices; the anchors measured 3.1)
#      is under min(--attn-mem-cap-gib, default 8, half of MemAvailable); otherwise the table
#      says "does not fit" with the estimate.
# PyTorch runs with OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=N OPENBLAS_NUM_THREADS=N and
# torch.set_num_threads(N) (the anchors' tuned setting), and both with the OpenBLAS kernels qkv
# chooses (OPENBLAS_CORETYPE, where OpenBLAS does not recognise the CPU); qkv with --threads N and
# OMP_WAIT_POLICY=P (--qkv-wait-policy, default "default": the variable removed, so libgomp
# spins ~300k iterations before it sleeps, which is what a user gets and qkv's best on a quiet
# machine: qkv runs every OpenBLAS call inside its own OpenMP regions, so nothing spins against
# BLAS threads, and a step opens hundreds of regions whose sleeping workers PASSIVE would have to
# wake (BENCHMARKS.md); PASSIVE is the better choice only when the cores are
# shared; "unset" leaves the environment as
# it is). N = --threads (default 2). Without `import torch` in /usr/bin/python3 (Debian:
# python3-torch) the PyTorch side is skipped with a message.
# Steps (warm-up + timed): S 3 + 12, B 1 + 3 (a B step takes seconds: bounded), gpt2 2 + 8;
# decode repetitions S 3, B 3 after a warm-up (a median of three: one slow repetition on a shared
# host does not move it); attention 5 (short) to 1 (T >= 2048) after one.
# --quick: one repetition, S 1 + 2, B 0 + 1, gpt2 1 + 1, one decode, attention at batch 8
# T = 128 and batch 1 T = 1024 only: a smoke run.
# Every JSON line goes to DIR/results.jsonl (default build/bench-compare/<date-time>); the
# markdown tables (bench/compare_table.py) to DIR/tables.md and stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build/release}
PYTHON=${PYTHON:-/usr/bin/python3}
ONLY=S,B,gpt2,attn
REPS=3
QUICK=0
THREADS=2
SCALING=0
ATTN_CAP_GIB=8
QKV_WAIT=default
OUT=""
usage() { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
    --only) ONLY=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --threads) THREADS=$2; shift 2 ;;
    --scaling) SCALING=1; shift ;;
    --attn-mem-cap-gib) ATTN_CAP_GIB=$2; shift 2 ;;
    --qkv-wait-policy) QKV_WAIT=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h | --help) usage ;;
    *) echo "compare.sh: unknown option '$1'" >&2; usage ;;
    esac
done
for c in ${ONLY//,/ }; do
    case "$c" in S | B | gpt2 | attn) ;; *) echo "compare.sh: --only takes S, B, gpt2, attn; got '$c'" >&2; exit 2 ;; esac
done
[[ "$REPS" =~ ^[1-9][0-9]*$ && "$THREADS" =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: --reps and --threads must be positive integers" >&2; exit 2; }
selected() { [[ ",$ONLY," == *",$1,"* ]]; }

for b in bench_train bench_decode bench_attention bench_gemm; do
    [ -x "$BUILD/$b" ] || { echo "compare.sh: $BUILD/$b is missing: build first (make build)" >&2; exit 1; }
done
TORCH=1
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    TORCH=0
    echo "compare.sh: PyTorch side skipped: $PYTHON cannot import torch (Debian: apt-get install python3-torch)" >&2
fi

if [ $QUICK = 1 ]; then
    REPS=1
    declare -A WARMUP=([S]=1 [B]=0 [gpt2]=1) STEPS=([S]=2 [B]=1 [gpt2]=1) DREPS=([S]=1 [B]=1)
    ATTN_CASES="8:128:1 1:1024:1"
else
    declare -A WARMUP=([S]=3 [B]=1 [gpt2]=2) STEPS=([S]=12 [B]=3 [gpt2]=8) DREPS=([S]=3 [B]=3)
    ATTN_CASES="8:128:5 8:512:3 8:1024:3 8:2048:1 1:1024:5 1:4096:1 1:8192:1" # batch:T:reps
fi
OUT=${OUT:-build/bench-compare/$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
RES="$OUT/results.jsonl"
: >"$RES"

# meta lines: machine, load, settings
json_str() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; }
meta() {
    printf '{"mode": "meta", "what": "%s", "value": "%s"}\n' "$1" "$(json_str "$2")" >>"$RES"
}
meta date "$(date -u '+%Y-%m-%d %H:%M UTC')"
meta cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') x $(nproc)"
meta mem "$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
meta load_start "$(cut -d' ' -f1-3 /proc/loadavg)"
meta threads "$THREADS"
meta reps "$REPS"
meta quick "$QUICK"
case "$QKV_WAIT" in # qkv's; PyTorch's is set below
default) unset OMP_WAIT_POLICY ;;
unset) ;;
*) export OMP_WAIT_POLICY=$QKV_WAIT ;;
esac
# OpenBLAS's kernels, the same for both sides: where OpenBLAS falls back to its generic ones on a
# CPU it does not know, qkv's programs re-execute themselves with OPENBLAS_CORETYPE set (qkv
# --version says so); PyTorch runs on the same OpenBLAS and is tuned the same way here.
KERNELS_LINE=$("$BUILD/qkv" --version | sed -n 's/^blas kernels: //p')
meta blas_kernels "$KERNELS_LINE"
if [ -z "${OPENBLAS_CORETYPE+set}" ]; then
    KERNELS=$(printf '%s\n' "$KERNELS_LINE" | sed -n 's/^\([^ ]*\) (OPENBLAS_CORETYPE=.* set by qkv.*/\1/p')
    if [ -n "$KERNELS" ]; then
        export OPENBLAS_CORETYPE=$KERNELS
        echo "compare.sh: OpenBLAS does not recognise this CPU; both sides run OPENBLAS_CORETYPE=$KERNELS" >&2
    fi
fi
meta qkv_env "OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset (libgomp default)} OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
meta torch_env "OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
meta torch "$([ $TORCH = 1 ] && "$PYTHON" -c 'import torch; print(torch.__version__)' || echo absent)"
echo "compare.sh: results in $OUT (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2

# run REP LABEL CMD...: one measurement; its JSON lines (tagged with the repetition) to $RES
run() {
    local rep=$1 label=$2
    shift 2
    echo "  [rep $rep] $label" >&2
    local out
    if ! out=$("$@"); then
        echo "compare.sh: failed: $*" >&2
        exit 1
    fi
    printf '%s\n' "$out" | grep '^{' | sed "s/^{/{\"rep\": $rep, /" >>"$RES"
    LAST=$out
}
qkv() { run "$1" "$2" "${@:3}"; }
torch() {
    [ $TORCH = 1 ] || return 0
    run "$1" "$2" env OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS \
        "$PYTHON" bench/torch_bench.py --threads "$THREADS" "${@:3}"
}
params_of() { printf '%s\n' "$1" | grep -o '"params": [0-9]*' | head -1 | awk '{print $2}'; }
flops_of() { printf '%s\n' "$1" | grep -o '"flop_per_tok": [0-9.e+]*' | head -1 | awk '{print $2}'; }

mem_available_mib() { awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo; }

for rep in $(seq 1 "$REPS"); do
    qkv "$rep" "sgemm ceiling" "$BUILD/bench_gemm" --ceiling --threads "$THREADS" --json
    for c in S B gpt2; do
        selected $c || continue
        w=${WARMUP[$c]} s=${STEPS[$c]}
        q_cmd=("$BUILD/bench_train" --config $c --threads "$THREADS" --warmup "$w" --steps "$s" --json)
        t_args=(--config $c --mode train --warmup "$w" --steps "$s")
        if [ $((rep % 2)) = 1 ]; then
            qkv "$rep" "train $c qkv" "${q_cmd[@]}"; Q_OUT=$LAST
            LAST=""; torch "$rep" "train $c torch" "${t_args[@]}"; T_OUT=$LAST
        else
            LAST=""; torch "$rep" "train $c torch" "${t_args[@]}"; T_OUT=$LAST
            qkv "$rep" "train $c qkv" "${q_cmd[@]}"; Q_OUT=$LAST
        fi
        # the two sides must train the same model and count the same FLOPs (computed independently
        # by bench_common.h and torch_bench.py)
        if [ -n "$T_OUT" ]; then
            if [ "$(params_of "$Q_OUT")" != "$(params_of "$T_OUT")" ]; then
                echo "compare.sh: parameter counts differ for config $c: qkv $(params_of "$Q_OUT"), PyTorch $(params_of "$T_OUT") (the models are not the same)" >&2
                exit 1
            fi
            if ! awk -v a="$(flops_of "$Q_OUT")" -v b="$(flops_of "$T_OUT")" 'BEGIN {exit !(a > 0 && (a - b) ^ 2 <= (1e-5 * b) ^ 2)}'; then
                echo "compare.sh: FLOP per token differ for config $c: qkv $(flops_of "$Q_OUT"), PyTorch $(flops_of "$T_OUT")" >&2
                exit 1
            fi
        fi
        if [ $SCALING = 1 ] && [ "$THREADS" != 1 ]; then
            qkv "$rep" "train $c qkv 1 thread" "$BUILD/bench_train" --config $c --threads 1 --warmup "$w" --steps "$s" --json
        fi
    done
    for c in S B; do
        selected $c || continue
        qkv "$rep" "decode $c qkv" "$BUILD/bench_decode" --config $c --threads "$THREADS" --reps "${DREPS[$c]}" --no-uncached --json
        torch "$rep" "decode $c torch" --config $c --mode decode --reps "${DREPS[$c]}" --beam 5
    done
    if selected attn; then
        for case in $ATTN_CASES; do
            IFS=: read -r b t r <<<"$case"
            qkv "$rep" "attention B $b T $t qkv" "$BUILD/bench_attention" --batch "$b" --seq "$t" --reps "$r" --threads "$THREADS" --json
            [ $TORCH = 1 ] || continue
            need=$(awk -v b="$b" -v t="$t" 'BEGIN {printf "%d", 3.5 * b * 8 * t * t * 4 / 1048576}')
            avail=$(mem_available_mib)
            limit=$(awk -v c="$ATTN_CAP_GIB" -v a="$avail" 'BEGIN {l = c * 1024; if (a / 2 < l) l = a / 2; printf "%d", l}')
            if [ "$need" -le "$limit" ]; then
                torch "$rep" "attention B $b T $t torch" --mode attention --batch "$b" --seq "$t" --reps "$r" --impl sdpa
            else
                printf '{"rep": %d, "impl": "torch", "mode": "attention", "batch": %d, "seq": %d, "skipped": "does not fit", "need_mib": %d, "limit_mib": %d}\n' \
                    "$rep" "$b" "$t" "$need" "$limit" >>"$RES"
                echo "  [rep $rep] attention B $b T $t torch: does not fit (needs ~$need MiB, limit $limit MiB)" >&2
            fi
        done
    fi
done
meta load_end "$(cut -d' ' -f1-3 /proc/loadavg)"
"$PYTHON" bench/compare_table.py "$RES" | tee "$OUT/tables.md"
