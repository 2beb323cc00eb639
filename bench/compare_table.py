#!/usr/bin/python3
"""Markdown tables of a bench/compare.sh run: python3 bench/compare_table.py DIR/results.jsonl

Reads the JSON lines of bench_gemm --ceiling, bench_train, bench_decode, bench_attention (qkv) and
bench/torch_bench.py (PyTorch), each tagged with its repetition "rep", and prints:
  - the run's conditions (date, machine, load at the start and end, threads, environments);
  - the FLOP formula and the per-token FLOPs of each configuration;
  - training: the median over repetitions of each run's median step, target tokens/s, the ratio
    qkv / PyTorch, GFLOP/s and its percentage of the median sgemm ceiling of the same run, peak
    RSS and its ratio;
  - decoding: greedy and beam tokens/s of both and their ratios, and beam's cost relative to
    greedy (beam seconds / greedy seconds for the same inputs and tokens);
  - attention: forward + backward time and extra peak memory of both, or "does not fit";
  - the issue-4 targets with the measured value and whether it is met.
Values "a / b / c" list the repetitions in order; single numbers are medians. Standard library only.
"""
import json
import statistics
import sys
from collections import defaultdict

FORMULA = """FLOP formula (bench/bench_common.h; the anchors' RESULTS.md): matrix-product FLOPs only, forward = 2 x multiply-adds,
training = 3 x forward; per sequence with d = d_model, ff = FFN width, V = vocabulary, S / T = source / target length,
Le / Ld = encoder / decoder layers:
  encoder = Le [2S(4d^2 + 2d ff) + 4S^2 d]; decoder = Ld [2T(4d^2 + 2d ff) + 4T^2 d + 2T 2d^2 + 2S 2d^2 + 4TSd];
  output = 2TdV; training FLOP per target token = 3 (encoder + decoder + output) / T
  (decoder-only: the encoder term over its own T tokens = 6(12 L d^2 + dV) + 12 L d T for GPT-2).
Embeddings, LayerNorm, softmax, dropout, biases and the optimiser are not counted."""


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(x, digits=None):
    if x is None:
        return "-"
    if digits is None:
        digits = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2 if abs(x) >= 1 else 3
    return f"{x:,.{digits}f}"


def runs(xs, digits=None):
    return " / ".join(fmt(x, digits) for x in xs)


def times(x):
    return "-" if x is None else f"{fmt(x, 2)}x"


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: compare_table.py results.jsonl")
    meta, ceiling = {}, []
    train, decode, attn = defaultdict(list), defaultdict(list), defaultdict(list)
    with open(sys.argv[1]) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{sys.argv[1]}:{n}: not JSON ({e})")
            mode = r.get("mode")
            if mode == "meta":
                meta[r["what"]] = r["value"]
            elif mode == "ceiling":
                ceiling.append(r["gflops_median"])
            elif mode == "train":
                train[(r["config"], r["impl"], r["threads"])].append(r)
            elif mode == "decode":
                decode[(r["config"], r["impl"], r["search"])].append(r)
            elif mode == "attention":
                attn[(r["batch"], r["seq"], r["impl"])].append(r)
    ceil = med(ceiling)
    threads = int(meta.get("threads", 2))
    out = []
    p = out.append
    p(f"Run of {meta.get('date', '?')}: {meta.get('cpu', '?')}, {meta.get('mem', '?')}; "
      f"load average at the start {meta.get('load_start', '?')}, at the end {meta.get('load_end', '?')}.")
    torch = (f"PyTorch {meta['torch']} with {meta.get('torch_env', '?')}" if meta.get("torch", "absent") != "absent"
             else "PyTorch absent (its side skipped)")
    p(f"{threads} thread(s); {meta.get('reps', '?')} repetition(s){' (--quick)' if meta.get('quick') == '1' else ''}; "
      f"{torch}; qkv with {meta.get('qkv_env', '?')}.")
    if "blas_kernels" in meta:
        p(f"OpenBLAS kernels: {meta['blas_kernels']}.")
    p("")
    if ceiling:
        p(f"sgemm ceiling (raw cblas_sgemm 2048^3, {threads} thread(s), median of 9 samples per run): "
          f"**{fmt(ceil)} GFLOP/s** (runs: {runs(ceiling)}).")
        p("")
    p("```\n" + FORMULA + "\n```")
    p("")

    # ---- training
    configs = [c for c in ("S", "B", "gpt2") if (c, "qkv", threads) in train or (c, "torch", threads) in train]
    if configs:
        p("Training (median step after warm-up; tok/s = target tokens per second; GFLOP/s by the formula; "
          "% = of the same run's sgemm ceiling):")
        p("")
        p("| config | params | FLOP/token | steps | qkv tok/s | PyTorch tok/s | qkv / PyTorch | qkv s/step | "
          "PyTorch s/step | qkv GFLOP/s (% ceiling) | PyTorch GFLOP/s (% ceiling) | qkv peak RSS MiB | "
          "PyTorch peak RSS MiB | RSS qkv / PyTorch |")
        p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for c in configs:
            q, t = train.get((c, "qkv", threads), []), train.get((c, "torch", threads), [])
            any_r = (q or t)[0]
            qt, tt = med([r["tok_per_s"] for r in q]), med([r["tok_per_s"] for r in t])
            qs, ts = med([r["step_s_median"] for r in q]), med([r["step_s_median"] for r in t])
            qg, tg = med([r["gflops"] for r in q]), med([r["gflops"] for r in t])
            qm, tm = med([r["peak_rss_mib"] for r in q]), med([r["peak_rss_mib"] for r in t])
            pct = lambda g: f"{fmt(g)} ({fmt(100 * g / ceil, 0)} %)" if g is not None and ceil else fmt(g)
            p(f"| {c} | {any_r['params']:,} | {any_r['flop_per_tok'] / 1e6:.2f} M | {any_r['warmup']} + {any_r['steps']} | "
              f"{runs([r['tok_per_s'] for r in q]) or '-'} | {runs([r['tok_per_s'] for r in t]) or '-'} | "
              f"{fmt(ratio(qt, tt), 2)} | {fmt(qs)} | {fmt(ts)} | {pct(qg)} | {pct(tg)} | {fmt(qm, 0)} | {fmt(tm, 0)} | "
              f"{fmt(ratio(qm, tm), 2)} |")
        p("")
        scal = [c for c in configs if (c, "qkv", 1) in train and threads != 1]
        if scal:
            p(f"Thread scaling of qkv training ({threads} threads against 1):")
            p("")
            p(f"| config | qkv 1 thread tok/s | qkv {threads} threads tok/s | speed-up |")
            p("|---|---|---|---|")
            for c in scal:
                one = med([r["tok_per_s"] for r in train[(c, "qkv", 1)]])
                many = med([r["tok_per_s"] for r in train.get((c, "qkv", threads), [])])
                p(f"| {c} | {fmt(one)} | {fmt(many)} | {fmt(ratio(many, one), 2)} |")
            p("")

    # ---- decoding
    dconf = [c for c in ("S", "B") if any((c, i, s) in decode for i in ("qkv", "torch") for s in ("greedy", "beam"))]
    if dconf:
        p("Decoding (tokens/s = inputs x new tokens / seconds of the whole decode call; qkv with its KV cache, "
          "PyTorch re-running the decoder over the prefix; beam cost = beam seconds / greedy seconds):")
        p("")
        p("| config | batch x tokens | qkv greedy tok/s | PyTorch greedy tok/s | qkv / PyTorch | qkv beam 5 tok/s | "
          "PyTorch beam 5 tok/s | qkv / PyTorch | qkv beam cost | PyTorch beam cost |")
        p("|---|---|---|---|---|---|---|---|---|---|")
        for c in dconf:
            g = {i: med([r["tok_per_s"] for r in decode.get((c, i, "greedy"), [])]) for i in ("qkv", "torch")}
            b = {i: med([r["tok_per_s"] for r in decode.get((c, i, "beam"), [])]) for i in ("qkv", "torch")}
            any_r = next(iter(decode.get((c, "qkv", "greedy"), []) or decode.get((c, "torch", "greedy"), [])), None)
            shape = f"{any_r['batch']} x {any_r['new_tokens']}" if any_r else "-"
            p(f"| {c} | {shape} | {fmt(g['qkv'])} | {fmt(g['torch'])} | {fmt(ratio(g['qkv'], g['torch']), 2)} | "
              f"{fmt(b['qkv'])} | {fmt(b['torch'])} | {fmt(ratio(b['qkv'], b['torch']), 2)} | "
              f"{times(ratio(g['qkv'], b['qkv']))} | {times(ratio(g['torch'], b['torch']))} |")
        p("")

    # ---- attention
    cases = sorted({(b, t) for (b, t, _) in attn}, key=lambda bt: (-bt[0], bt[1]))
    if cases:
        p("Attention forward + backward (8 heads, head size 64, no mask; qkv: tiled FlashAttention-2-style "
          "kernel; PyTorch: materialised softmax(QK^T/8)V, `_scaled_dot_product_attention`; extra = peak RSS "
          "minus RSS before the first run):")
        p("")
        p("| batch | T | qkv s | qkv extra MiB | PyTorch s | PyTorch extra MiB | PyTorch s / qkv s | "
          "one (B,H,T,T) fp32 matrix MiB |")
        p("|---|---|---|---|---|---|---|---|")
        for b, t in cases:
            q = attn.get((b, t, "qkv"), [])
            tr = attn.get((b, t, "torch"), [])
            qs = med([r["fwd_bwd_s_median"] for r in q])
            qm = med([r["extra_peak_mib"] for r in q])
            done = [r for r in tr if "skipped" not in r]
            if done:
                ts = med([r["fwd_bwd_s_median"] for r in done])
                tcell = f"{fmt(ts)} | {fmt(med([r['extra_peak_mib'] for r in done]), 0)} | {fmt(ratio(ts, qs), 2)}"
            elif tr:
                need = max(r["need_mib"] for r in tr) / 1024
                lim = min(r["limit_mib"] for r in tr) / 1024
                tcell = f"does not fit (needs ~{need:.1f} GiB; limit {lim:.1f} GiB) | - | -"
            else:
                tcell = "- | - | -"
            p(f"| {b} | {t} | {fmt(qs)} | {fmt(qm, 0)} | {tcell} | {fmt(b * 8 * t * t * 4 / 2**20, 0)} |")
        p("")

    # ---- issue-4 targets
    rows = []

    def tgt(name, value, ok):
        rows.append(f"| {name} | {value} | {'-' if ok is None else 'met' if ok else 'not met'} |")

    def tr_ratio(c):
        q = med([r["tok_per_s"] for r in train.get((c, "qkv", threads), [])])
        t = med([r["tok_per_s"] for r in train.get((c, "torch", threads), [])])
        return ratio(q, t)

    def check(x, pred):
        return None if x is None else pred(x)

    rB = tr_ratio("B")
    tgt("B training >= 1.3x tuned PyTorch", times(rB), check(rB, lambda x: x >= 1.3))
    gB = med([r["gflops"] for r in train.get(("B", "qkv", threads), [])])
    fB = ratio(gB, ceil)
    tgt("B training >= 75 % of the sgemm ceiling", f"{fmt(100 * fB, 0)} %" if fB else "-", check(fB, lambda x: x >= 0.75))
    mB = ratio(med([r["peak_rss_mib"] for r in train.get(("B", "qkv", threads), [])]),
               med([r["peak_rss_mib"] for r in train.get(("B", "torch", threads), [])]))
    tgt("B training peak RSS <= half of PyTorch's", times(mB), check(mB, lambda x: x <= 0.5))
    rS = tr_ratio("S")
    tgt("S training >= 2x tuned PyTorch", times(rS), check(rS, lambda x: x >= 2))
    rG = tr_ratio("gpt2")
    tgt("GPT-2 step >= 1.3x faster than PyTorch", times(rG), check(rG, lambda x: x >= 1.3))
    gq = med([r["tok_per_s"] for r in decode.get(("B", "qkv", "greedy"), [])])
    gt = med([r["tok_per_s"] for r in decode.get(("B", "torch", "greedy"), [])])
    rD = ratio(gq, gt)
    tgt("B greedy decoding >= 10x PyTorch's", times(rD), check(rD, lambda x: x >= 10))
    for c in ("S", "B"):
        bq = med([r["tok_per_s"] for r in decode.get((c, "qkv", "beam"), [])])
        gq = med([r["tok_per_s"] for r in decode.get((c, "qkv", "greedy"), [])])
        cost = ratio(gq, bq)
        tgt(f"{c} beam 5 costs <= 3x greedy (qkv)", times(cost), check(cost, lambda x: x <= 3))
    one = med([r["tok_per_s"] for r in train.get(("B", "qkv", 1), [])])
    many = med([r["tok_per_s"] for r in train.get(("B", "qkv", threads), [])])
    sc = ratio(many, one) if threads != 1 else None
    tgt(f"B training: {threads} threads >= 1.8x 1 thread (qkv)", times(sc), check(sc, lambda x: x >= 1.8))
    m4 = med([r["extra_peak_mib"] for r in attn.get((1, 4096, "qkv"), [])])
    m8 = med([r["extra_peak_mib"] for r in attn.get((1, 8192, "qkv"), [])])
    lin = ratio(m8, m4)
    tgt("attention at T = 8192 in O(T) memory (qkv extra memory 8192 / 4096; 2 = linear, 4 = quadratic)",
        f"{fmt(m8, 0)} MiB; {times(lin)}" if m8 else "-", check(lin, lambda x: x <= 2.5))
    p("Issue-4 targets (from this run):")
    p("")
    p("| target | measured | |")
    p("|---|---|---|")
    out.extend(rows)
    print("\n".join(out))


if __name__ == "__main__":
    main()
