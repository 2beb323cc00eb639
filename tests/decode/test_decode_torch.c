/*
 * test_decode_torch.c: qkv's decoding against an independent PyTorch implementation
 * (scripts/gen_reference_decode.py, tests/data/ref_decode_{seq2seq,lm}.safetensors): the same
 * random models (an encoder-decoder, post-LN; a decoder-only LM, pre-LN), decoded in float64 by a
 * search written from docs/decoding.md that re-runs the whole model at every step (no cache).
 * qkv decodes the whole batch at once with its KV cache (sources of 5, 2 and 7 tokens; prompts of
 * 3, 1 and 5 tokens) and must give, for greedy search and for beam search K = 4, n_best 4 with the
 * 'average' and the GNMT (alpha 0.6) length penalties: the same number of hypotheses per input,
 * the same token sequences in the same order, the same finished flags, and scores and normalised
 * scores within tol(L).
 *
 * Tolerance: the float forward's logits are within PARITY_TOL x max(1, |z|) of PyTorch's
 * (tests/models/test_model.c), so each log-probability z_v - logsumexp(z) is within
 * 2 PARITY_TOL Z (Z = max(1, the largest |logit| the reference saw, stored in the fixture)), and a
 * score summing L of them within tol(L) = 2 L PARITY_TOL Z; the normalised score divides by a
 * penalty >= 1. The script asserts that every decision of the reference searches holds by more
 * than twice tol(max_len), so float rounding cannot change a token. Double build: PARITY_TOL 1e-10.
 */
#include "decode_testutil.h"
#include "models/fixture.h"

#include <math.h>
#include <stdio.h>

enum { B = 3, N_BEST = 4, K = 4 };

typedef struct {
    const char *name;
    qkv_decode_strategy strategy;
    qkv_length_penalty penalty;
} decode_run;

static const decode_run runs[] = {
    {"greedy", QKV_DECODE_GREEDY, QKV_LENGTH_PENALTY_NONE}, /* norm_score = score */
    {"beam_average", QKV_DECODE_BEAM, QKV_LENGTH_PENALTY_AVERAGE},
    {"beam_gnmt", QKV_DECODE_BEAM, QKV_LENGTH_PENALTY_GNMT},
};

/* Tensor "<run>.<field>" of the fixture: n ids, or n reals widened to double. */
static bool read_ids(const fixture *f, const char *run, const char *field, int32_t *dst,
                     int64_t n) {
    char key[64];
    snprintf(key, sizeof key, "%s.%s", run, field);
    return fixture_read(f, key, dst, n, QKV_I32);
}

static bool read_doubles(const fixture *f, const char *run, const char *field, double *dst,
                         int64_t n) {
    char key[64];
    qkv_real tmp[B * N_BEST];
    snprintf(key, sizeof key, "%s.%s", run, field);
    if (n > B * N_BEST || !fixture_read(f, key, tmp, n, QKV_REAL)) return false;
    for (int64_t i = 0; i < n; i++)
        dst[i] = (double)tmp[i];
    return true;
}

/* Decode inputs (given back to back, len[b] each) with every run and compare with the fixture. */
static void compare_runs(const fixture *f, const qkv_model *m, const int32_t *in,
                         const int32_t *len, int32_t max_len) {
    qkv_real z = 0;
    if (max_len > 16 || !fixture_read(f, "out.max_abs_logit", &z, 1, QKV_REAL)) return;
    const double Z = fmax(1, (double)z);
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        const decode_run *run = &runs[r];
        const int32_t n = run->strategy == QKV_DECODE_GREEDY ? 1 : N_BEST;
        int32_t count[B], length[B * N_BEST], finished[B * N_BEST], tokens[B * N_BEST * 16];
        double score[B * N_BEST], norm[B * N_BEST];
        if (!read_ids(f, run->name, "count", count, B) ||
            !read_ids(f, run->name, "length", length, B * n) ||
            !read_ids(f, run->name, "finished", finished, B * n) ||
            !read_ids(f, run->name, "tokens", tokens, (int64_t)B * n * max_len) ||
            !read_doubles(f, run->name, "score", score, B * n) ||
            !read_doubles(f, run->name, "norm_score", norm, B * n))
            continue;
        qkv_decode_params p = dt_params(run->strategy);
        p.max_len = max_len;
        p.beam_size = K;
        p.n_best = n;
        p.length_penalty = run->penalty;
        p.alpha = 0.6;
        p.bos_id = DT_BOS;
        p.eos_id = DT_EOS;
        qkv_hypotheses h; /* batched, KV cache */
        CHECK_OK(m->cfg.arch == QKV_ARCH_DECODER ? qkv_generate(m, in, len, B, &p, &h)
                                                 : qkv_decode(m, in, len, B, &p, &h));
        for (int32_t b = 0; h.hyp && b < B; b++) {
            CHECK_MSG(h.count[b] == count[b], "%s input %d: %d hypotheses, torch %d", run->name, b,
                      h.count[b], count[b]);
            for (int32_t i = 0; i < count[b] && i < h.count[b]; i++) {
                const qkv_hypothesis *x = &h.hyp[b * n + i];
                const int32_t at = b * n + i;
                const double tol = 2.0 * length[at] * PARITY_TOL * Z;
                CHECK_MSG(dt_same_tokens(x->tokens, x->length, tokens + (size_t)at * max_len,
                                         length[at]) &&
                              x->finished == (finished[at] != 0),
                          "%s input %d, hypothesis %d: %d tokens (finished %d), torch %d (%d)",
                          run->name, b, i, x->length, x->finished, length[at], finished[at]);
                CHECK_MSG(fabs(x->score - score[at]) <= tol &&
                              fabs(x->norm_score - norm[at]) <= tol,
                          "%s input %d, hypothesis %d: score %.10g (norm %.10g), torch %.10g "
                          "(%.10g), tolerance %.3g",
                          run->name, b, i, x->score, x->norm_score, score[at], norm[at], tol);
            }
        }
        qkv_hypotheses_free(&h);
    }
}

/* Inputs stored (B, S) padded: give them back to back as qkv's calls take them. */
static bool read_inputs(const fixture *f, const char *name, const char *len_name, int32_t S,
                        int32_t *packed, int32_t *len) {
    int32_t padded[B * 16];
    if (S > 16 || !fixture_read(f, name, padded, (int64_t)B * S, QKV_I32) ||
        !fixture_read(f, len_name, len, B, QKV_I32))
        return false;
    int32_t at = 0;
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0; t < len[b]; t++)
            packed[at++] = padded[b * S + t];
    return true;
}

/* The fixture's model (d_model 8, 2 heads, 2 layers per stack, FF 16, target vocabulary 13) with
 * its parameters, decoding its B inputs, stored (B, S) padded, with max_len generated tokens. */
static void torch_case(const char *file, qkv_arch arch, bool norm_first, int32_t S,
                       int32_t max_len) {
    fixture f;
    if (!fixture_open(&f, file)) return;
    const bool lm = arch == QKV_ARCH_DECODER;
    qkv_model_config c = qkv_model_default_config(arch, 8, 2, 2);
    c.src_vocab = 11;
    c.tgt_vocab = 13;
    c.dim_feedforward = 16;
    c.dropout = 0;
    c.max_len = 16;
    c.norm_first = norm_first;
    c.pad_id = DT_PAD;
    c.bos_id = DT_BOS;
    c.eos_id = DT_EOS;
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&c, 1, &m));
    int32_t in[B * 16], len[B];
    if (m && read_inputs(&f, lm ? "input.prompt" : "input.src",
                         lm ? "input.prompt_len" : "input.src_len", S, in, len)) {
        fixture_params(&f, m->params, "param.");
        compare_runs(&f, m, in, len, max_len);
    }
    qkv_model_free(m);
    qkv_st_close(f.file);
}

TEST(decode_seq2seq_matches_pytorch_greedy_and_beam) {
    torch_case("ref_decode_seq2seq.safetensors", QKV_ARCH_ENCODER_DECODER, false, 7, 7);
}

TEST(decode_lm_matches_pytorch_greedy_and_beam) {
    torch_case("ref_decode_lm.safetensors", QKV_ARCH_DECODER, true, 5, 6);
}
