#!/usr/bin/python3
"""Write the PyTorch decoding references that tests/decode/test_decode_torch.c loads:
tests/data/ref_decode_seq2seq.safetensors (encoder-decoder) and ref_decode_lm.safetensors
(decoder-only language model).

    /usr/bin/python3 scripts/gen_reference_decode.py [OUT_DIR]     # default tests/data

Models. A small random encoder-decoder, gen_reference.py's Seq2SeqTransformer (nn.Transformer
between embeddings * sqrt(C) + sinusoidal positions and a generator; qkv's parameter names), and
a decoder-only LM with qkv's decoder-only names (embed, layers.N = nn.TransformerEncoderLayer with
a causal mask, norm, lm_head). Biases and LayerNorm gains are non-zero so the decoders see them;
the output weights are scaled by 4 (distributions that depend on the input, not only on the
output bias) and the EOS bias raised by 1, so that some hypotheses end with EOS and others run to
max_len (asserted).

Decoding, written from docs/decoding.md (not from qkv's code), float64, with no cache: every
step re-runs the whole model on the source (batched, padded with pad_id) and each row's full
prefix ([BOS] + generated tokens; for the LM the prompt + generated tokens, right-padded), and
reads the logits of the row's last position.
  - log p = log_softmax(logits) at temperature 1, then log p(pad) = -inf (no renormalisation).
  - greedy: argmax (ties: the lowest id) until EOS or max_len generated tokens.
  - beam search, K = 4: each sentence starts with one row; a step scores every extension
    s_k + log p(v | row k), ranks them by score (ties: the lower row, then the lower id), keeps
    the 2K best and walks them best first: a candidate among the first K that ends with EOS, or any
    of the first K at the last allowed token, is finished (score s, norm_score s / lp(length),
    length counting every generated token, EOS included); other EOS candidates are dropped; the
    first K other candidates are the new beam, in rank order. The sentence is done when it holds
    K finished hypotheses, reached max_len, or has no alive candidate. The n_best best finished
    hypotheses by norm_score (stable: ties keep the order they were finished in) are returned.
    Length penalties: 'average' lp = length, 'gnmt' lp = ((5 + length) / 6)^alpha, alpha = 0.6.

Margins. qkv's float build computes logits within PARITY_TOL = 1e-5 x max(1, |z|) of these
(tests/models/test_model.c); a log-probability z_v - logsumexp(z) is then within 2 x 1e-5 x Z,
Z = max(1, max |z|), and a score of L tokens within tol(L) = 2 L 1e-5 Z. Every decision the
searches take (each greedy argmax, each beam step's 2K cut, which candidates finish or stay alive,
the n-best order) is asserted to hold by a margin of max(1e-4, 2 tol(max_len)): swapping any two
neighbouring candidates closer than that must not change the outcome. So float32 rounding cannot
change a token, and the C test compares scores with tol(length). The seeds (12: encoder-decoder,
13: LM) are ones where every margin holds and both endings occur; many seeds fail one or the other.

File layout: param.<name> (F64), input.src (B, S) padded + input.src_len (B) or input.prompt (B, P)
right-padded + input.prompt_len (B); for each run R in greedy, beam_average, beam_gnmt:
R.count (B), R.length (B, n_best), R.tokens (B, n_best, max_len) padded with -1, R.score,
R.norm_score (B, n_best) F64, R.finished (B, n_best); out.max_abs_logit (Z); metadata "config".
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_reference import Seq2SeqTransformer, save_safetensors, sinusoidal, spread_biases_and_norms  # noqa: E402

PAD, BOS, EOS = 0, 1, 2
K, N_BEST, ALPHA = 4, 4, 0.6
PARITY_TOL = 1e-5  # float build, tests/models/fixture.h
SHARPEN, EOS_BIAS = 4.0, 1.0


class DecoderOnlyLM(nn.Module):
    """The PyTorch twin of qkv's decoder-only model (qkv_model.h names): causal self-attention
    layers, a final LayerNorm and the LM head."""

    def __init__(self, V, C, H, L, FF, norm_first):
        super().__init__()
        self.C = C
        self.embed = nn.Embedding(V, C)
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(C, H, FF, dropout=0.0, batch_first=True,
                                                               norm_first=norm_first) for _ in range(L))
        self.norm = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V)

    def forward(self, ids):
        T = ids.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        x = self.embed(ids) * math.sqrt(self.C) + sinusoidal(T, self.C)
        for layer in self.layers:
            x = layer(x, src_mask=causal, src_key_padding_mask=ids == PAD)
        return self.lm_head(self.norm(x))


def randomise(model, out_name, sharpen, eos_bias):
    """Non-zero biases, LayerNorm gains around 1, the output weights scaled by sharpen (peakier
    distributions that depend more on the input than on the output bias), a raised EOS logit."""
    spread_biases_and_norms(model)
    with torch.no_grad():
        out = getattr(model, out_name)
        out.weight *= sharpen
        out.bias[EOS] += eos_bias
    model.train()  # dropout 0; train mode: no fused fast path, the documented math


class Scorer:
    """Log-probabilities of the next token for a list of rows, by full re-computation."""

    def __init__(self, model, seq2seq, inputs, lens):
        self.model, self.seq2seq, self.inputs, self.lens = model, seq2seq, inputs, lens
        self.max_abs_logit = 0.0

    def __call__(self, rows):
        """rows: list of (b, generated tokens) -> (len(rows), V) float64 log-probabilities."""
        if self.seq2seq:  # every row's prefix is [BOS] + g tokens, all of one length
            src = self.inputs[[b for b, _ in rows]]  # (n, S), padded to the longest source
            tgt = torch.tensor([[BOS] + toks for _, toks in rows])
            logits = self.model(src, tgt, PAD)[:, -1]
        else:  # prompt + tokens, right-padded; the causal mask keeps padding out of real rows
            seqs = [self.inputs[b, : self.lens[b]].tolist() + toks for b, toks in rows]
            T = max(len(s) for s in seqs)
            ids = torch.tensor([s + [PAD] * (T - len(s)) for s in seqs])
            out = self.model(ids)
            logits = torch.stack([out[i, len(s) - 1] for i, s in enumerate(seqs)])
        self.max_abs_logit = max(self.max_abs_logit, logits.abs().max().item())
        logp = F.log_softmax(logits, dim=-1)
        logp[:, PAD] = -math.inf
        return logp


def penalty(kind, length):
    return float(length) if kind == "average" else ((5.0 + length) / 6.0) ** ALPHA if kind == "gnmt" else 1.0


def greedy(scorer, B, max_len, margin):
    alive = {b: [] for b in range(B)}
    score = {b: 0.0 for b in range(B)}
    out = {}
    while alive:
        rows = sorted(alive.items())
        logp = scorer(rows)
        for (b, toks), lp in zip(rows, logp):
            top = torch.topk(lp, 2)
            assert top.values[0] - top.values[1] > margin, f"greedy input {b}: argmax within {margin}"
            v = int(top.indices[0])
            score[b] += lp[v].item()
            toks = toks + [v]
            if v == EOS or len(toks) == max_len:
                out[b] = [(toks, score[b], v == EOS)]
                del alive[b]
            else:
                alive[b] = toks
    return [out[b] for b in range(B)]


def walk(cands, last):
    """One beam step's decisions over ranked candidates (score, row, v): finished and alive."""
    fin, alive = [], []
    for rank, (sc, row, v) in enumerate(cands[: 2 * K]):
        ends = v == EOS or last
        if ends and rank < K:
            fin.append((sc, row, v))
        elif not ends and len(alive) < K:
            alive.append((sc, row, v))
    return fin, alive


def beam(scorer, B, max_len, kind, margin):
    beams = {b: [(0.0, [])] for b in range(B)}  # alive rows: (cumulative log p, tokens)
    finished = {b: [] for b in range(B)}
    g = 0  # tokens generated so far
    while beams:
        order = sorted(beams)
        rows = [(b, toks) for b in order for _, toks in beams[b]]
        logp = scorer(rows)
        at, last = 0, g + 1 == max_len
        for b in order:
            cands = []
            for r, (s, _) in enumerate(beams[b]):
                for v in range(logp.shape[1]):
                    if logp[at + r, v] > -math.inf:
                        cands.append((s + logp[at + r, v].item(), r, v))
            at += len(beams[b])
            cands.sort(key=lambda c: (-c[0], c[1], c[2]))
            fin, alive = walk(cands, last)
            for i in range(min(len(cands), 2 * K + 1) - 1):  # near neighbours must not matter
                if cands[i][0] - cands[i + 1][0] <= margin:
                    swapped = cands[:i] + [cands[i + 1], cands[i]] + cands[i + 2 :]
                    f2, a2 = walk(swapped, last)
                    assert set(f2) == set(fin) and set(a2) == set(alive), \
                        f"beam {kind}, input {b}, step {g}: ranks {i}, {i + 1} within {margin} decide"
            for sc, r, v in fin:
                toks = beams[b][r][1] + [v]
                finished[b].append((toks, sc, v == EOS))
            beams[b] = [(sc, beams[b][r][1] + [v]) for sc, r, v in alive]
            if len(finished[b]) >= K or last or not alive:
                del beams[b]
        g += 1
    result = []
    for b in range(B):
        ranked = sorted(finished[b], key=lambda h: -h[1] / penalty(kind, len(h[0])))  # stable
        norms = [h[1] / penalty(kind, len(h[0])) for h in ranked]
        for i in range(min(len(norms), N_BEST + 1) - 1):
            assert norms[i] - norms[i + 1] > margin, f"beam {kind}, input {b}: n-best {i}, {i + 1} within {margin}"
        result.append(ranked[:N_BEST])
    return result


def store(tensors, name, hyps, kind, max_len):
    B = len(hyps)
    n = 1 if name == "greedy" else N_BEST
    tokens = torch.full((B, n, max_len), -1, dtype=torch.int32)
    length = torch.zeros(B, n, dtype=torch.int32)
    finished = torch.zeros(B, n, dtype=torch.int32)
    score = torch.zeros(B, n)
    norm = torch.zeros(B, n)
    for b, hs in enumerate(hyps):
        for i, (toks, sc, fin) in enumerate(hs):
            tokens[b, i, : len(toks)] = torch.tensor(toks, dtype=torch.int32)
            length[b, i] = len(toks)
            finished[b, i] = int(fin)
            score[b, i] = sc
            norm[b, i] = sc / penalty(kind, len(toks))
    tensors.update({name + ".count": torch.tensor([len(hs) for hs in hyps], dtype=torch.int32),
                    name + ".length": length, name + ".tokens": tokens, name + ".score": score,
                    name + ".norm_score": norm, name + ".finished": finished})


def decode_all(model, seq2seq, inputs, lens, max_len, tensors):
    """Greedy and both beam searches; asserts the margins and that EOS and max_len both occur."""
    scorer = Scorer(model, seq2seq, inputs, lens)
    with torch.no_grad():  # Z is known only after decoding: check the margins against it after
        runs = {"greedy": (greedy(scorer, len(lens), max_len, 0.0), "none")}
        for kind in ("average", "gnmt"):
            runs["beam_" + kind] = (beam(scorer, len(lens), max_len, kind, 0.0), kind)
        Z = max(1.0, scorer.max_abs_logit)
        margin = max(1e-4, 2 * 2 * max_len * PARITY_TOL * Z)
        greedy(scorer, len(lens), max_len, margin)  # the same searches again, asserting the margin
        for kind in ("average", "gnmt"):
            beam(scorer, len(lens), max_len, kind, margin)
    for name, (hyps, kind) in runs.items():
        store(tensors, name, hyps, kind, max_len)
    ends = {fin for hyps, _ in runs.values() for hs in hyps for _, _, fin in hs}
    assert ends == {True, False}, "want hypotheses ending with EOS and at max_len"
    tensors["out.max_abs_logit"] = torch.tensor([Z])
    return Z, margin


def write_fixture(path, model, seq2seq, lens, vocab, max_len, cfg):
    """Random inputs of the given lengths (ids 3 .. vocab - 1, padded with PAD), the searches, the file."""
    inputs = torch.full((len(lens), max(lens)), PAD, dtype=torch.long)
    for b, n in enumerate(lens):
        inputs[b, :n] = torch.randint(3, vocab, (n,))
    tensors = {"param." + n: p for n, p in model.named_parameters()}
    Z, margin = decode_all(model, seq2seq, inputs, lens, max_len, tensors)
    name = "input.src" if seq2seq else "input.prompt"
    tensors.update({name: inputs, name + "_len": torch.tensor(lens)})
    cfg.update({"pad_id": PAD, "bos_id": BOS, "eos_id": EOS, "max_len": max_len, "beam_size": K, "n_best": N_BEST,
                "alpha": ALPHA, "max_abs_logit": Z, "margin": margin})
    save_safetensors(path, tensors, {"config": json.dumps(cfg), "torch": torch.__version__})
    return margin


def seq2seq_fixture(out_dir, seed=12):
    torch.manual_seed(seed)
    Vs, Vt, C, H, Le, Ld, FF = 11, 13, 8, 2, 2, 2, 16
    model = Seq2SeqTransformer(Vs, Vt, C, H, Le, Ld, FF, False)
    randomise(model, "generator", SHARPEN, EOS_BIAS)
    cfg = {"arch": "encoder-decoder", "src_vocab": Vs, "tgt_vocab": Vt, "d_model": C, "n_heads": H,
           "n_encoder_layers": Le, "n_decoder_layers": Ld, "dim_feedforward": FF, "norm_first": False}
    return write_fixture(os.path.join(out_dir, "ref_decode_seq2seq.safetensors"), model, True, [5, 2, 7], Vs, 7, cfg)


def lm_fixture(out_dir, seed=13):
    torch.manual_seed(seed)
    V, C, H, L, FF = 13, 8, 2, 2, 16
    model = DecoderOnlyLM(V, C, H, L, FF, True)
    randomise(model, "lm_head", SHARPEN, EOS_BIAS)
    cfg = {"arch": "decoder", "vocab": V, "d_model": C, "n_heads": H, "n_layers": L, "dim_feedforward": FF,
           "norm_first": True}
    return write_fixture(os.path.join(out_dir, "ref_decode_lm.safetensors"), model, False, [3, 1, 5], V, 6, cfg)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "data")
    os.makedirs(out_dir, exist_ok=True)
    m1 = seq2seq_fixture(out_dir)
    m2 = lm_fixture(out_dir)
    print(f"decoding fixtures written to {os.path.abspath(out_dir)} (margins {m1:.2g}, {m2:.2g})")


if __name__ == "__main__":
    main()
