/*
 * test_sdpa_composed.c: the fused qkv_sdpa against the composition of the small ops it replaces,
 *   qkv_attn_scores(SCALED_DOT) (+ qkv_alibi_bias) -> qkv_attn_normalize(SOFTMAX, mask) -> qkv_matmul,
 * forward and gradients of q, k, v, for every kind of mask and with ALiBi, on odd shapes that
 * span several of the fused kernel's key tiles; and with attention dropout in training,
 * qkv_sdpa_dropout against the same chain with qkv_dropout on the weights (same seed: the fused
 * kernel must draw the same mask, and leave the random position where qkv_dropout does).
 */
#include "testutil.h"

typedef struct {
    int mask_kind; /* 0 none, 1 causal, 2 window, 3 key padding, 4 graph, 5 causal + padding + window */
    bool alibi;
    bool fused;
    double dropout; /* attention dropout (the context is in training mode when > 0) */
} sc_case;

static qkv_mask make_mask(qkv_ctx *ctx, int kind, int64_t B, int64_t T, int64_t S) {
    qkv_mask m = qkv_mask_none();
    if (kind == 1 || kind == 5) m.causal = true;
    if (kind == 2 || kind == 5) {
        m.window_left = 5;
        m.window_right = kind == 2 ? 2 : -1;
    }
    if (kind == 3 || kind == 5) {
        qkv_tensor *pad = qkv_tensor_zeros(ctx, QKV_I32, 2, (int64_t[]){B, S});
        for (int64_t j = S - 3; j < S; j++) ((int32_t *)pad->data)[(B - 1) * S + j] = 1;
        m.key_padding = pad;
    }
    if (kind == 4) { /* a sparse graph: i attends j when (i * 7 + j * 3) % 5 < 2, row 1 isolated */
        qkv_tensor *adj = qkv_tensor_zeros(ctx, QKV_I32, 2, (int64_t[]){T, S});
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < S; j++) ((int32_t *)adj->data)[i * S + j] = i != 1 && (i * 7 + j * 3) % 5 < 2;
        m.allowed = adj;
    }
    return m;
}

static qkv_tensor *attention_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    const sc_case *c = user;
    qkv_tensor *q = in[0], *k = in[1], *v = in[2];
    const int64_t B = q->shape[0], H = q->shape[1], T = q->shape[2], S = k->shape[2], D = q->shape[3];
    qkv_mask mask = make_mask(ctx, c->mask_kind, B, T, S);
    if (c->fused) {
        qkv_real slopes[8];
        if (c->alibi) qkv_alibi_slopes(H, slopes);
        return qkv_sdpa_dropout(ctx, q, k, v, 1 / sqrt((double)D), &mask, c->alibi ? slopes : NULL, c->dropout);
    }
    qkv_tensor *e = qkv_attn_scores(ctx, q, k, QKV_SCORE_SCALED_DOT, NULL, 1); /* (B, H, T, S) */
    if (c->alibi) e = qkv_add(ctx, e, qkv_alibi_bias(ctx, H, T, S));
    qkv_tensor *a = qkv_attn_normalize(ctx, e, QKV_NORM_SOFTMAX, &mask);
    return qkv_matmul(ctx, qkv_dropout(ctx, a, c->dropout), v, false, false); /* (B, H, T, Dv) */
}

/* Tolerance: 2e-5 in float without dropout (sums over up to S = 67 terms rounded in another order:
 * (S + a few) 2^-24 < 5e-6 relative to the sum of magnitudes, with margin for the gradients'
 * longer chains); dropout multiplies the kept weights by 1 / (1 - p), and the bound with them. */
TEST(sdpa_equals_composed_ops_forward_and_backward) {
    const int64_t B = 2, H = 2, T = 70, S = 67, D = 5, Dv = 3; /* two key tiles, ragged */
    qkv_tensor *in[3] = {tu_rand(4, (int64_t[]){B, H, T, D}, -1, 1, 1), tu_rand(4, (int64_t[]){B, H, S, D}, -1, 1, 2),
                         tu_rand(4, (int64_t[]){B, H, S, Dv}, -1, 1, 3)};
    for (int drop = 0; drop < 2; drop++)
        for (int kind = 0; kind <= 5; kind++) {
            for (int alibi = 0; alibi < 2; alibi++) {
                const double p = drop ? 0.3 : 0;
                const double tol = (sizeof(qkv_real) == 4 ? 2e-5 : 1e-12) / (1 - p);
                qkv_real *out[2] = {NULL, NULL}, *grad[2][3], next[2][64];
                for (int fused = 0; fused < 2; fused++) {
                    sc_case c = {kind, alibi, fused, p};
                    qkv_ctx *ctx = tu_ctx();
                    qkv_ctx_set_training(ctx, drop);
                    qkv_ctx_set_rng(ctx, 1234 + (uint64_t)kind, 7);
                    qkv_tensor *x[3];
                    for (int i = 0; i < 3; i++) {
                        x[i] = qkv_tensor_from(ctx, QKV_REAL, 4, in[i]->shape, in[i]->data);
                        qkv_tensor_requires_grad(x[i]);
                    }
                    qkv_tensor *y = attention_fn(ctx, x, &c);
                    qkv_tensor *ones = qkv_tensor_new(ctx, QKV_REAL, 1, (int64_t[]){64});
                    for (int i = 0; i < 64; i++) ((qkv_real *)ones->data)[i] = 1;
                    qkv_tensor *nd = qkv_dropout(ctx, ones, 0.5); /* the next random op */
                    CHECK_OK(qkv_ctx_status(ctx));
                    if (!y || !nd) {
                        qkv_ctx_free(ctx);
                        continue;
                    }
                    memcpy(next[fused], nd->data, sizeof next[fused]);
                    CHECK_OK(qkv_backward(ctx, qkv_sum(ctx, qkv_mul(ctx, y, qkv_tanh(ctx, y)))));
                    out[fused] = malloc(sizeof(qkv_real) * (size_t)qkv_tensor_numel(y));
                    memcpy(out[fused], y->data, sizeof(qkv_real) * (size_t)qkv_tensor_numel(y));
                    for (int i = 0; i < 3; i++) {
                        grad[fused][i] = malloc(sizeof(qkv_real) * (size_t)qkv_tensor_numel(x[i]));
                        memcpy(grad[fused][i], x[i]->grad, sizeof(qkv_real) * (size_t)qkv_tensor_numel(x[i]));
                    }
                    qkv_ctx_free(ctx);
                }
                if (!out[0] || !out[1]) continue;
                double d = tu_max_rel_diff(out[1], out[0], B * H * T * Dv);
                CHECK_MSG(d <= tol, "dropout %g mask %d alibi %d: fused output differs from composed by %g", p, kind,
                          alibi, d);
                CHECK_MSG(memcmp(next[0], next[1], sizeof next[0]) == 0,
                          "dropout %g mask %d alibi %d: the next dropout draws other bits after the fused op", p, kind,
                          alibi);
                for (int i = 0; i < 3; i++) {
                    d = tu_max_rel_diff(grad[1][i], grad[0][i], qkv_tensor_numel(in[i]));
                    CHECK_MSG(d <= tol, "dropout %g mask %d alibi %d: fused gradient of %c differs from composed by %g",
                              p, kind, alibi, "qkv"[i], d);
                    free(grad[0][i]);
                    free(grad[1][i]);
                }
                free(out[0]);
                free(out[1]);
            }
        }
    for (int i = 0; i < 3; i++) tu_free(in[i]);
}
