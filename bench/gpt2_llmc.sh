#!/bin/bash
# bench/gpt2_llmc.sh: the GPT-2 124M shape (batch 4, length 64, AdamW) trained by qkv, by llm.c's CPU
# trainer and by PyTorch, alternating, on N threads (issue 4: a qkv step >= 2.5x faster than llm.c's).
#
#   LLMC_BIN=/tmp/llmc/train_gpt2 LLMC_DIR=/tmp/llmc_d12 bash bench/gpt2_llmc.sh [ROUNDS] [OUT.jsonl]
#
# llm.c is not part of qkv: build its train_gpt2.c unmodified as ../shared/anchors/RESULTS.md says
# (cc -Ofast -march=native -fopenmp -DOMP train_gpt2.c -lm -lgomp) and write its inputs with
# ../shared/anchors/gen_llmc_inputs.py LLMC_DIR (random weights: the step time does not depend on
# them). Per round: build/release/bench_train --config gpt2 (2 + 8 steps), run_llmc.py (median of
# steps 2-12 of the unmodified program), torch_bench.py --config gpt2 (PASSIVE; skipped without
# python3-torch). qkv and PyTorch run on the OpenBLAS kernels qkv chooses (as bench/compare.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
OUT=${2:-build/bench-compare/gpt2-llmc-$(date -u +%Y%m%d-%H%M%S).jsonl}
THREADS=${THREADS:-2}
LLMC_BIN=${LLMC_BIN:-/tmp/llmc/train_gpt2}
LLMC_DIR=${LLMC_DIR:-/tmp/llmc_d12}
ANCHORS=${ANCHORS:-../shared/anchors}
[ -x "$LLMC_BIN" ] || { echo "gpt2_llmc.sh: $LLMC_BIN missing: build llm.c's train_gpt2 first (see the header)" >&2; exit 1; }
[ -f "$LLMC_DIR/gpt2_124M.bin" ] || { echo "gpt2_llmc.sh: $LLMC_DIR has no gpt2_124M.bin: run $ANCHORS/gen_llmc_inputs.py $LLMC_DIR" >&2; exit 1; }
[ -x build/release/bench_train ] || { echo "gpt2_llmc.sh: build first (make build)" >&2; exit 1; }
if [ -z "${OPENBLAS_CORETYPE+set}" ]; then
    k=$(build/release/qkv --version | sed -n 's/^blas kernels: \([^ ]*\) (OPENBLAS_CORETYPE=.* set by qkv.*/\1/p')
    [ -z "$k" ] || export OPENBLAS_CORETYPE=$k
fi
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
tag() { sed "s/^{/{\"round\": $1, /" >>"$OUT"; }
for r in $(seq 1 "$ROUNDS"); do
    echo "round $r: qkv, llm.c, PyTorch" >&2
    build/release/bench_train --config gpt2 --threads "$THREADS" --steps 8 --warmup 2 --json | grep '^{' | tag "$r"
    /usr/bin/python3 "$ANCHORS/run_llmc.py" --bin "$LLMC_BIN" --dir "$LLMC_DIR" --threads "$THREADS" --last-step 12 \
        --flop-per-tok 748486656 --label d12 | tag "$r"
    if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
        OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS /usr/bin/python3 bench/torch_bench.py \
            --config gpt2 --mode train --threads "$THREADS" --steps 8 --warmup 2 | grep '^{' | tag "$r"
    fi
done
echo "gpt2_llmc.sh: results in $OUT" >&2
