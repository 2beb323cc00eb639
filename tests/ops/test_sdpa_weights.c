/*
 * test_sdpa_weights.c: qkv_sdpa_weights, attention that keeps only its softmax weights.
 *
 * Against the composed ops it replaces (scores, softmax, dropout, product): the same bits forward
 * and backward on head views of one projection, with and without dropout, on both kernel sets;
 * against the fused tiled op (an independent algorithm: online softmax, no stored weights) to
 * rounding, dropout included (both draw qkv_dropout's mask); finite-difference gradients under a
 * padding and a causal mask (double build); evaluation mode ignores the dropout; bad arguments.
 */
#include "testutil.h"

/* q, k, v as head views (B, H, L, D) of one projection x (B, L, 3 C), as the MHA module makes them
 * (qkv__mha_project): x is a leaf needing a gradient, the views' gradients land in x's. */
typedef struct {
    qkv_tensor *x, *q, *k, *v;
} views;

static views make_views(qkv_ctx *ctx, const qkv_real *xd, int64_t B, int64_t L, int64_t H, int64_t D) {
    views w;
    w.x = qkv_tensor_from(ctx, QKV_REAL, 3, (int64_t[]){B, L, 3 * H * D}, xd);
    qkv_tensor_requires_grad(w.x);
    qkv_tensor *r = qkv_reshape(ctx, w.x, 4, (int64_t[]){B, L, 3 * H, D}); /* (B, L, 3H, D) */
    qkv_tensor *t = qkv_permute(ctx, r, (const int[]){0, 2, 1, 3});         /* (B, 3H, L, D) */
    w.q = qkv_narrow(ctx, t, 1, 0, H);                                      /* (B, H, L, D) */
    w.k = qkv_narrow(ctx, t, 1, H, H);
    w.v = qkv_narrow(ctx, t, 1, 2 * H, H);
    return w;
}

enum { WAY_OPS, WAY_WEIGHTS, WAY_FUSED, WAY_MERGED };

/* Self-attention of x's views one of four ways (WAY_MERGED: qkv_sdpa_weights_merged, its output
 * and dy taken in the merged (B, L, H D) layout and copied out as (B, H, L, D)), in training mode with dropout p (0: none) and a
 * causal mask with the last key of batch 1 padded; then the next random op of the step (a
 * dropout of 32 ones). Copies out: the output (B, H, L, D), x's gradient (of sum(o * dy)) and the
 * next dropout's output, in one malloc'd array of *n. */
static qkv_real *attend(int way, qkv_kernels kernels, const qkv_real *xd, const qkv_real *dyd, int64_t B,
                        int64_t L, int64_t H, int64_t D, double p, int64_t *n) {
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_kernels(ctx, kernels);
    qkv_ctx_set_training(ctx, true);
    views w = make_views(ctx, xd, B, L, H, D);
    int32_t pad[64] = {0};
    pad[(B - 1) * L + L - 1] = 1;
    qkv_mask mask = qkv_mask_none();
    mask.causal = true;
    mask.key_padding = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, L}, pad);
    const double scale = 1 / sqrt((double)D);
    qkv_tensor *o = NULL;
    if (way == WAY_OPS) {
        qkv_tensor *e = qkv_attn_scores(ctx, w.q, w.k, QKV_SCORE_SCALED_DOT, NULL, 1);
        o = qkv_matmul(ctx, qkv_dropout(ctx, qkv_attn_normalize(ctx, e, QKV_NORM_SOFTMAX, &mask), p), w.v, false,
                       false);
    } else if (way == WAY_WEIGHTS) {
        o = qkv_sdpa_weights(ctx, w.q, w.k, w.v, scale, &mask, p);
    } else if (way == WAY_FUSED) {
        o = qkv_sdpa_dropout(ctx, w.q, w.k, w.v, scale, &mask, NULL, p);
    }
    qkv_tensor *merged = NULL;
    qkv_real dym[64 * 64];
    if (way == WAY_MERGED) { /* o: the (B, H, L, D) copy of the merged output; dy merged */
        merged = qkv_sdpa_weights_merged(ctx, w.q, w.k, w.v, scale, &mask, p);
        qkv_tensor *r = merged ? qkv_reshape(ctx, merged, 4, (int64_t[]){B, L, H, D}) : NULL;
        o = r ? qkv_contiguous(ctx, qkv_permute(ctx, r, (const int[]){0, 2, 1, 3})) : NULL;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t l = 0; l < L; l++)
                    for (int64_t d = 0; d < D; d++)
                        dym[((b * L + l) * H + h) * D + d] = dyd[((b * H + h) * L + l) * D + d];
    }
    qkv_tensor *ones = qkv_tensor_new(ctx, QKV_REAL, 1, (int64_t[]){32});
    for (int i = 0; i < 32; i++) ((qkv_real *)ones->data)[i] = 1;
    qkv_tensor *next = qkv_dropout(ctx, ones, 0.5);
    const int64_t no = B * H * L * D, nx = B * L * 3 * H * D;
    *n = no + nx + 32;
    qkv_real *out = calloc((size_t)*n, sizeof(qkv_real));
    qkv_tensor *y = merged ? merged : o;
    qkv_tensor *dy = y ? qkv_tensor_from(ctx, QKV_REAL, y->ndim, y->shape, merged ? dym : dyd) : NULL;
    CHECK_OK(qkv_ctx_status(ctx));
    if (o && dy && qkv_backward_from(ctx, y, dy) == QKV_OK && w.x->grad) {
        memcpy(out, o->data, sizeof(qkv_real) * (size_t)no);
        memcpy(out + no, w.x->grad, sizeof(qkv_real) * (size_t)nx);
        memcpy(out + no + nx, next->data, sizeof(qkv_real) * 32);
    } else {
        qkv_test_fail(__FILE__, __LINE__, "attend (way %d) failed: %s", way, qkv_last_error());
    }
    qkv_ctx_free(ctx);
    return out;
}

/* Way `way` against way `want`: the same bits (output, x's gradient, the next random draw) with
 * and without dropout, on both kernel sets. */
static void check_same_bits(int way, int want, uint64_t seed) {
    enum { B = 2, L = 9, H = 3, D = 4 };
    qkv_real xd[B * L * 3 * H * D], dyd[B * H * L * D];
    tu_fill_uniform(xd, B * L * 3 * H * D, -1.5, 1.5, seed);
    tu_fill_uniform(dyd, B * H * L * D, -1, 1, seed + 1);
    for (int kern = 0; kern < 2; kern++)
        for (int drop = 0; drop < 2; drop++) {
            const qkv_kernels k = kern ? QKV_KERNELS_REF : QKV_KERNELS_FAST;
            const double p = drop ? 0.3 : 0;
            int64_t n = 0;
            qkv_real *ref = attend(want, k, xd, dyd, B, L, H, D, p, &n);
            qkv_real *got = attend(way, k, xd, dyd, B, L, H, D, p, &n);
            int64_t first = -1;
            for (int64_t i = 0; i < n && first < 0; i++)
                if (memcmp(&ref[i], &got[i], sizeof(qkv_real))) first = i;
            CHECK_MSG(first < 0, "way %d against %d, %s kernels, dropout %g: element %lld of %lld differs (%.9g against %.9g)",
                      way, want, kern ? "reference" : "fast", p, (long long)first, (long long)n,
                      first < 0 ? 0.0 : (double)got[first], first < 0 ? 0.0 : (double)ref[first]);
            free(ref), free(got);
        }
}

TEST(sdpa_weights_has_the_bits_of_the_composed_ops) { check_same_bits(WAY_WEIGHTS, WAY_OPS, 61); }

/* The merged variant writes the same products into the merged layout and reads dO there: the
 * bits of qkv_sdpa_weights (and so of the composed ops), output and gradients, with and without
 * dropout, on both kernel sets; and the random stream advances alike (the next dropout). */
TEST(sdpa_weights_merged_has_the_bits_of_sdpa_weights) { check_same_bits(WAY_MERGED, WAY_WEIGHTS, 63); }

/* The fused tiled op computes the same function another way (online softmax, weights recomputed
 * in backward): the two agree to rounding, and with dropout they draw the same mask. */
TEST(sdpa_weights_matches_the_fused_kernel) {
    enum { B = 2, L = 9, H = 3, D = 4 };
    qkv_real xd[B * L * 3 * H * D], dyd[B * H * L * D];
    tu_fill_uniform(xd, B * L * 3 * H * D, -1.5, 1.5, 71);
    tu_fill_uniform(dyd, B * H * L * D, -1, 1, 72);
    for (int drop = 0; drop < 2; drop++) {
        const double p = drop ? 0.3 : 0;
        const double tol = (sizeof(qkv_real) == 4 ? 2e-5 : 1e-12) / (1 - p);
        int64_t n = 0;
        qkv_real *one = attend(WAY_WEIGHTS, QKV_KERNELS_FAST, xd, dyd, B, L, H, D, p, &n);
        qkv_real *fused = attend(WAY_FUSED, QKV_KERNELS_FAST, xd, dyd, B, L, H, D, p, &n);
        CHECK_MSG(tu_max_rel_diff(one, fused, n) <= tol, "dropout %g: differs from the fused op by %g", p,
                  tu_max_rel_diff(one, fused, n));
        free(one), free(fused);
    }
}

/* Evaluation mode: dropout_p is ignored (the output of p = 0.5 is that of p = 0). */
TEST(sdpa_weights_ignores_dropout_in_evaluation) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *q = tu_rand(4, (int64_t[]){1, 2, 5, 3}, -1, 1, 81), *k = tu_rand(4, (int64_t[]){1, 2, 6, 3}, -1, 1, 82);
    qkv_tensor *v = tu_rand(4, (int64_t[]){1, 2, 6, 2}, -1, 1, 83);
    qkv_tensor *a = qkv_sdpa_weights(ctx, q, k, v, 0.5, NULL, 0.5), *b = qkv_sdpa_weights(ctx, q, k, v, 0.5, NULL, 0);
    CHECK_OK(qkv_ctx_status(ctx));
    if (a && b) CHECK(memcmp(a->data, b->data, sizeof(qkv_real) * 20) == 0);
    tu_free(q), tu_free(k), tu_free(v);
    qkv_ctx_free(ctx);
}

typedef struct {
    const qkv_mask *mask;
    double p;
} grad_user;

static qkv_tensor *weights_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    const grad_user *u = user;
    return qkv_sdpa_weights(ctx, in[0], in[1], in[2], 0.7, u->mask, u->p);
}

TEST(sdpa_weights_gradcheck) {
    if (sizeof(qkv_real) == 4) SKIP("finite differences run in the double build");
    qkv_ctx *mctx = tu_ctx();
    int32_t pad[2 * 6] = {0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1};
    qkv_mask m = qkv_mask_none();
    m.causal = true;
    m.key_padding = qkv_tensor_from(mctx, QKV_I32, 2, (int64_t[]){2, 6}, pad);
    for (int c = 0; c < 3; c++) {
        qkv_tensor *in[3] = {tu_rand(4, (int64_t[]){2, 2, 6, 3}, -1.5, 1.5, 91),
                             tu_rand(4, (int64_t[]){2, 2, 6, 3}, -1.5, 1.5, 92),
                             tu_rand(4, (int64_t[]){2, 2, 6, 4}, -1, 1, 93)};
        for (int x = 0; x < 3; x++) qkv_tensor_requires_grad(in[x]);
        const grad_user u = {c == 0 ? NULL : &m, c == 2 ? 0.3 : 0};
        tu_gradcheck_opts o = tu_gradcheck_default();
        o.training = u.p > 0; /* the same mask at every evaluation */
        const char *what[3] = {"no mask", "causal + padding", "causal + padding, dropout 0.3"};
        tu_gradcheck(what[c], weights_fn, in, 3, (void *)&u, &o);
        for (int x = 0; x < 3; x++) tu_free(in[x]);
    }
    qkv_ctx_free(mctx);
}

TEST(sdpa_weights_rejects_bad_arguments) {
    qkv_tensor *q = tu_rand(4, (int64_t[]){1, 2, 5, 3}, -1, 1, 1), *k = tu_rand(4, (int64_t[]){1, 2, 6, 3}, -1, 1, 2);
    qkv_tensor *v = tu_rand(4, (int64_t[]){1, 2, 6, 2}, -1, 1, 3), *v_bad = tu_rand(4, (int64_t[]){1, 2, 5, 2}, -1, 1, 4);
    struct {
        qkv_tensor *v;
        double scale, p;
        const char *message;
    } cases[] = {
        {v_bad, 1, 0, "do not fit"},
        {v, NAN, 0, "scale must be finite"},
        {v, 1, 1.0, "dropout_p = 1 is not in [0, 1)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        qkv_ctx *ctx = tu_ctx();
        CHECK(qkv_sdpa_weights(ctx, q, k, cases[i].v, cases[i].scale, NULL, cases[i].p) == NULL);
        CHECK_MSG(qkv_ctx_status(ctx) != QKV_OK && strstr(qkv_last_error(), cases[i].message),
                  "case %zu: %s", i, qkv_last_error());
        qkv_ctx_free(ctx);
    }
    tu_free(q), tu_free(k), tu_free(v), tu_free(v_bad);
}
