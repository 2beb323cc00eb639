#!/usr/bin/python3
"""PyTorch side of bench/compare.sh: the issue-4 configurations on CPU, one measurement per process.

  /usr/bin/python3 bench/torch_bench.py --config S|B|gpt2 --mode train  [--threads N --steps N --warmup N]
  /usr/bin/python3 bench/torch_bench.py --config S|B      --mode decode [--threads N --reps R --beam K --search greedy|beam|both]
  /usr/bin/python3 bench/torch_bench.py --mode attention --seq T [--batch B --reps R --impl sdpa|manual]
  /usr/bin/python3 bench/torch_bench.py --config S|B|gpt2 --mode flops

Prints one JSON line per measurement with the keys bench_train / bench_decode / bench_attention
print for qkv (bench/compare_table.py reads both). Standard library + torch only; use
/usr/bin/python3 (Debian's python3-torch). The thread count is torch.set_num_threads(N); run it
with OMP_NUM_THREADS=N OPENBLAS_NUM_THREADS=N OMP_WAIT_POLICY=PASSIVE (compare.sh does), the
tuned setting of ../shared/anchors/RESULTS.md.

Derived from the anchors' scripts (../shared/anchors/): torch_transformer_bench.py (model S / B,
train and greedy decode, FLOP formula), gpt2_torch_bench.py (GPT-2) and torch_attention_bench.py
(attention); the logic is theirs, with these differences, all to match qkv's side exactly:
  - token ids are drawn from 1 .. V-1 (0 is qkv's padding id); the anchors drew 0 .. V-1;
  - GPT-2's tied lm_head has a bias (qkv's LM head always has one): +50,304 parameters
    (124,526,208 in all; the anchor's module has 124,475,904). Not counted by the FLOP formula.
  - beam search (below) is new.

train   full step = zero_grad + forward (train mode) + loss + backward + optimizer step; --warmup
        untimed steps then --steps timed; median step time; target tokens/s = B*T/median.
        S, B: separate src / tgt nn.Embedding (x sqrt(d)) + sinusoidal positions + dropout 0.1,
        nn.Transformer(batch_first, post-LN, ReLU, dropout 0.1, final norms), nn.Linear(d, V),
        cross-entropy (no label smoothing), Adam(lr 1e-4, betas (0.9, 0.98), eps 1e-9), no
        clipping, the same batch every step. gpt2: pre-LN GPT-2 (LN -> causal MHA -> residual,
        LN -> MLP 4C with tanh-GELU -> residual), learned positions (1024), final LN, lm_head tied
        to wte (+ bias), no dropout, explicit masked-softmax attention, AdamW(lr 1e-4, betas
        (0.9, 0.999), eps 1e-8, weight_decay 0), a new random batch every step.
decode  model.eval(), torch.no_grad(); encoder once, then 32 new tokens per input, each step
        re-running the whole decoder over the growing prefix (nn.Transformer has no KV cache;
        the output projection on the last position only: run_torch_decode.sh's method).
        greedy: argmax, append. beam K (default 5): the batch is expanded to B*K rows; each step
        scores the last position's log_softmax for all rows, adds it to the row's running
        log-probability, keeps the top K of the K*V candidates of each input (torch.topk), and
        reorders the prefixes (first step: only beam 0 is live, so the K beams start distinct).
        No EOS, no length penalty: every hypothesis has exactly 32 tokens, as qkv's side
        (eos_id -1, QKV_LENGTH_PENALTY_NONE). tokens/s = B * 32 / median seconds (one
        hypothesis per input) for both. 1 warm-up decode, then --reps timed, median.
attention  q, k, v (B, 8, T, 64) leaf tensors, forward + backward (out.backward(g)), no mask, no
        dropout; sdpa = torch.nn.functional._scaled_dot_product_attention (1.13's private math
        version), manual = softmax(q k^T / 8) v written out. Both materialise the (B, H, T, T)
        scores. 1 warm-up then --reps, median. extra_peak_mib = peak RSS minus RSS before the
        warm-up.
Peak RSS is the process's getrusage ru_maxrss (it includes ~250 MiB of Python + torch).
FLOP formula: bench/bench_common.h (the anchors' RESULTS.md); flops_per_target_token below.
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# (d, heads, ff, layers enc/dec, vocab, lengths, batch) as bench/bench_common.h
CONFIGS = {
    "S": dict(arch="encdec", d=256, nhead=4, ff=1024, n_enc=3, n_dec=3, v_src=64, v_tgt=64, s_len=32, t_len=32,
              batch=64, dec_batch=64, dec_len=32, max_len=512),
    "B": dict(arch="encdec", d=512, nhead=8, ff=2048, n_enc=6, n_dec=6, v_src=8000, v_tgt=8000, s_len=64,
              t_len=64, batch=32, dec_batch=16, dec_len=32, max_len=512),
    "gpt2": dict(arch="lm", d=768, nhead=12, ff=3072, n_enc=12, n_dec=0, v_src=50304, v_tgt=50304, s_len=64,
                 t_len=64, batch=4, dec_batch=0, dec_len=0, max_len=1024),
}


def flops_per_target_token(c):
    """Training FLOPs per target token: bench_common.h's formula (matmul FLOPs, fwd = 2 x MAC,
    train = 3 x fwd, full T x S attention grid). A decoder-only LM is the encoder term on its own
    T tokens (S = T, Le = L, Ld = 0)."""
    d, ff, V = c["d"], c["ff"], c["v_tgt"]
    S, T, Le, Ld = c["s_len"], c["t_len"], c["n_enc"], c["n_dec"]
    enc = Le * (2 * S * (4 * d * d + 2 * d * ff) + 4 * S * S * d)
    dec = Ld * (2 * T * (4 * d * d + 2 * d * ff) + 4 * T * T * d + 2 * T * 2 * d * d + 2 * S * 2 * d * d
                + 4 * T * S * d)
    out = 2 * T * d * V
    return 3 * (enc + dec + out) / T


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cur_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def tokens(g, vocab, shape):
    """Random ids in 1 .. vocab-1 (qkv's 0 is padding)."""
    return torch.randint(1, vocab, shape, generator=g)


# ---- encoder-decoder (torch_transformer_bench.py) ----------------------------------------------

def sinusoid(max_len, d):
    pos = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(max_len, d)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


class Seq2Seq(nn.Module):
    def __init__(self, c, dropout=0.1):
        super().__init__()
        d = c["d"]
        self.d = d
        self.src_emb = nn.Embedding(c["v_src"], d)
        self.tgt_emb = nn.Embedding(c["v_tgt"], d)
        self.register_buffer("pe", sinusoid(c["max_len"], d))
        self.drop = nn.Dropout(dropout)
        self.transformer = nn.Transformer(
            d_model=d, nhead=c["nhead"], num_encoder_layers=c["n_enc"], num_decoder_layers=c["n_dec"],
            dim_feedforward=c["ff"], dropout=dropout, activation="relu", batch_first=True, norm_first=False)
        self.out = nn.Linear(d, c["v_tgt"])

    def embed_src(self, src):
        return self.drop(self.src_emb(src) * math.sqrt(self.d) + self.pe[: src.size(1)])

    def embed_tgt(self, tgt):
        return self.drop(self.tgt_emb(tgt) * math.sqrt(self.d) + self.pe[: tgt.size(1)])

    def encode(self, src):
        return self.transformer.encoder(self.embed_src(src))

    def decode(self, tgt, memory, last_only=False):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.size(1))
        h = self.transformer.decoder(self.embed_tgt(tgt), memory, tgt_mask=mask)
        return self.out(h[:, -1]) if last_only else self.out(h)

    def forward(self, src, tgt):
        return self.decode(tgt, self.encode(src))


# ---- GPT-2 (gpt2_torch_bench.py) ----------------------------------------------------------------

class Block(nn.Module):
    def __init__(self, C, NH, maxT):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.fcproj = nn.Linear(4 * C, C)
        self.NH = NH
        self.register_buffer("mask", torch.tril(torch.ones(maxT, maxT, dtype=torch.bool)), persistent=False)

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        k = k.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        v = v.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        L, C, NH, V, maxT = c["n_enc"], c["d"], c["nhead"], c["v_tgt"], c["max_len"]
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(maxT, C)
        self.blocks = nn.ModuleList([Block(C, NH, maxT) for _ in range(L)])
        self.lnf = nn.LayerNorm(C)
        self.lm_bias = nn.Parameter(torch.zeros(V))  # qkv's lm_head.bias
        self.V = V
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        logits = F.linear(self.lnf(x), self.wte.weight, self.lm_bias)  # tied lm_head
        return F.cross_entropy(logits.view(-1, self.V), targets.reshape(-1))


# ---- modes --------------------------------------------------------------------------------------

def run_train(name, c, steps, warmup, seed):
    torch.manual_seed(seed)
    lm = c["arch"] == "lm"
    model = GPT(c) if lm else Seq2Seq(c)
    model.train()
    if lm:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    B, S, T = c["batch"], c["s_len"], c["t_len"]
    g = torch.Generator().manual_seed(seed + 1)
    if lm:  # a new batch every step (gpt2_torch_bench.py)
        data = tokens(g, c["v_tgt"], (warmup + steps, B, T + 1))
    else:  # the same batch every step (torch_transformer_bench.py)
        src = tokens(g, c["v_src"], (B, S))
        tgt = tokens(g, c["v_tgt"], (B, T + 1))
        tgt_in, tgt_out = tgt[:, :-1].contiguous(), tgt[:, 1:].contiguous()
        lossf = nn.CrossEntropyLoss()
    times, losses = [], []
    for i in range(warmup + steps):
        if lm:
            x, y = data[i, :, :-1].contiguous(), data[i, :, 1:].contiguous()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if lm:
            loss = model(x, y)
        else:
            loss = lossf(model(src, tgt_in).reshape(-1, c["v_tgt"]), tgt_out.reshape(-1))
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        losses.append(loss.item())
        if i >= warmup:
            times.append(dt)
    med = statistics.median(times)
    f = flops_per_target_token(c)
    return dict(impl="torch", mode="train", config=name, threads=torch.get_num_threads(),
                params=sum(p.numel() for p in model.parameters()), flop_per_tok=f, tokens_per_step=B * T,
                steps=steps, warmup=warmup, step_s_median=med, step_s_min=min(times), step_s_max=max(times),
                tok_per_s=B * T / med, gflops=f * B * T / med / 1e9, peak_rss_mib=peak_rss_mib(),
                first_loss=losses[0], last_loss=losses[-1], version=torch.__version__)


@torch.no_grad()
def greedy_decode(model, src, n_tokens, bos=1):
    memory = model.encode(src)
    ys = torch.full((src.size(0), 1), bos, dtype=torch.long)
    for _ in range(n_tokens):
        nxt = model.decode(ys, memory, last_only=True).argmax(-1, keepdim=True)
        ys = torch.cat([ys, nxt], dim=1)
    return ys[:, 1:]


@torch.no_grad()
def beam_decode(model, src, n_tokens, k, bos=1):
    """Batched beam search without a cache (see the module docstring); returns the best
    hypothesis of each input (B, n_tokens)."""
    B = src.size(0)
    memory = model.encode(src).repeat_interleave(k, dim=0)  # (B*k, S, d)
    ys = torch.full((B * k, 1), bos, dtype=torch.long)
    scores = torch.full((B, k), float("-inf"))
    scores[:, 0] = 0.0  # only beam 0 is live at the start
    base = (torch.arange(B) * k).unsqueeze(1)  # (B, 1) first row of each input
    for _ in range(n_tokens):
        logp = F.log_softmax(model.decode(ys, memory, last_only=True), dim=-1)  # (B*k, V)
        V = logp.size(-1)
        cand = (scores.reshape(B * k, 1) + logp).reshape(B, k * V)
        scores, idx = cand.topk(k, dim=-1)  # (B, k), best first
        rows = (base + torch.div(idx, V, rounding_mode="floor")).reshape(-1)
        ys = torch.cat([ys[rows], (idx % V).reshape(-1, 1)], dim=1)
    return ys[:, 1:].reshape(B, k, n_tokens)[:, 0]


def run_decode(name, c, reps, beam, seed, search_sel="both"):
    torch.manual_seed(seed)
    model = Seq2Seq(c)
    model.eval()
    B, S, n = c["dec_batch"], c["s_len"], c["dec_len"]
    g = torch.Generator().manual_seed(seed + 2)
    src = tokens(g, c["v_src"], (B, S))
    rows = []
    for search, fn in (("greedy", lambda: greedy_decode(model, src, n)),
                       ("beam", lambda: beam_decode(model, src, n, beam))):
        if search_sel not in ("both", search):
            continue
        fn()  # warm-up
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
        assert out.shape == (B, n)
        med = statistics.median(times)
        rows.append(dict(impl="torch", mode="decode", config=name, threads=torch.get_num_threads(), search=search,
                         beam=beam if search == "beam" else 1, cache=False, batch=B, src_len=S, new_tokens=n,
                         reps=reps, decode_s_median=med, decode_s_min=min(times), decode_s_max=max(times),
                         tok_per_s=B * n / med, peak_rss_mib=peak_rss_mib()))
    return rows


def run_attention(impl, B, N, reps):
    torch.manual_seed(0)
    H, Dh = 8, 64
    q = torch.randn(B, H, N, Dh, requires_grad=True)
    k = torch.randn(B, H, N, Dh, requires_grad=True)
    v = torch.randn(B, H, N, Dh, requires_grad=True)
    g = torch.randn(B, H, N, Dh)
    scale = 1.0 / math.sqrt(Dh)

    def fwd():
        if impl == "sdpa":
            return F._scaled_dot_product_attention(q, k, v, None, 0.0, False, False)[0]
        return torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v

    def step():
        for t in (q, k, v):
            t.grad = None
        fwd().backward(g)

    base = cur_rss_mib()
    step()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    peak = peak_rss_mib()
    return dict(impl="torch", mode="attention", kernel=impl, batch=B, heads=H, head_dim=Dh, seq=N, causal=False,
                threads=torch.get_num_threads(), reps=reps, fwd_bwd_s_median=med,
                gflops=3 * 4 * B * H * N * N * Dh / med / 1e9, extra_peak_mib=peak - base, peak_rss_mib=peak,
                nxn_tensor_mib=B * H * N * N * 4 / 2**20)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=CONFIGS.keys())
    ap.add_argument("--mode", choices=["train", "decode", "attention", "flops"], required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=None, help="timed training steps (default S 12, B 6, gpt2 10)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed training steps (default S 3, else 2)")
    ap.add_argument("--reps", type=int, default=3, help="timed decodes / attention runs")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--search", choices=["greedy", "beam", "both"], default="both", help="decode: which searches")
    ap.add_argument("--seq", type=int, help="attention: T")
    ap.add_argument("--batch", type=int, default=1, help="attention: B")
    ap.add_argument("--impl", choices=["sdpa", "manual"], default="sdpa", help="attention implementation")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    env = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY", "OPENBLAS_CORETYPE")}
    if a.mode == "attention":
        if not a.seq:
            ap.error("--mode attention needs --seq")
        rows = [run_attention(a.impl, a.batch, a.seq, a.reps)]
    else:
        if not a.config:
            ap.error("--mode %s needs --config" % a.mode)
        c = CONFIGS[a.config]
        if a.mode == "train":
            steps = a.steps if a.steps is not None else {"S": 12, "B": 6, "gpt2": 10}[a.config]
            warmup = a.warmup if a.warmup is not None else (3 if a.config == "S" else 2)
            rows = [run_train(a.config, c, steps, warmup, a.seed)]
        elif a.mode == "decode":
            if c["arch"] != "encdec":
                ap.error("--mode decode needs config S or B")
            rows = run_decode(a.config, c, a.reps, a.beam, a.seed, a.search)
        else:
            rows = [dict(impl="torch", mode="flops", config=a.config, flop_per_tok=flops_per_target_token(c))]
    for r in rows:
        r["env"] = env
        print(json.dumps(r, sort_keys=True))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
