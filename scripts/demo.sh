#!/usr/bin/env bash
# The main job (`make demo`): train a small grapheme-to-phoneme Transformer on the shipped CMUdict
# splits (data/g2p) for a few minutes on 2 cores, then show what it learned:
#   1. qkv train   with the progress bar (examples/g2p_demo.conf), dev WER / PER every 400 steps
#   2. qkv eval    word and phone error rates on the 12,646 held-out test words
#   3. qkv decode  pronunciations of test words and made-up words it never saw
#   4. qkv attn    the attention maps of one word (HTML report + the cross-attention in the terminal)
# Everything lands in runs/g2p-demo (override: RUN=dir scripts/demo.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
run=${RUN:-runs/g2p-demo}
qkv=build/release/qkv
make --no-print-directory build >/dev/null
mkdir -p "$(dirname "$run")"
echo "== 1. training a G2P Transformer on CMUdict (examples/g2p_demo.conf) into $run"
"$qkv" train examples/g2p_demo.conf --set out.dir="$run"
echo
echo "== 2. held-out test words (data/g2p/cmudict.nostress.test.tsv), greedy decoding"
"$qkv" eval "$run" data/g2p/cmudict.nostress.test.tsv --greedy
echo
echo "== 3. pronunciations of words the model never saw"
echo "   test words (not in the training split):"
"$qkv" eval "$run" data/g2p/cmudict.nostress.test.tsv --greedy --show 400 | sed -n '50p;100p;150p;200p;250p;300p;350p;400p' | sed 's/^/     /'
echo "   made-up words:"
printf 'qkv\nblorptastic\nattentionality\nzorbulate\n' | "$qkv" decode "$run" --beam 4 | sed 's/^/     /'
echo
echo "== 4. attention maps of 'transformer'"
"$qkv" attn "$run" transformer --kind cross --layer 1 --head 0 --terminal
echo
echo "training report: $run/report.html    attention report: $run/attn/index.html    log: $run/log.jsonl"
