/* test_attention_normalize.c: qkv_attn_normalize: closed forms of every normaliser and mask
 * rule, masked and fully masked rows (exact zeros, zero gradients, no NaN), gradient checks of
 * every normaliser under every mask on odd shapes, reference vs fast kernels, bad input. */
#include "attn_testutil.h"

static const qkv_attn_norm all_norms[] = {QKV_NORM_SOFTMAX, QKV_NORM_RELU, QKV_NORM_RELU_ROWNORM,
                                          QKV_NORM_SIGMOID, QKV_NORM_SPARSEMAX};
/* every normaliser of the registry: the gradient and kernel checks cover a new one unasked */
static int n_norms(void) { return qkv_registry_get(QKV_REGISTRY_NORM)->count; }
static qkv_attn_norm norm_at(int k) { return (qkv_attn_norm)qkv_registry_get(QKV_REGISTRY_NORM)->entries[k].value; }
static const char *norm_name_at(int k) { return qkv_registry_get(QKV_REGISTRY_NORM)->entries[k].name; }

/* scores (B, H, T, S) filled with one value */
static qkv_tensor *constant_scores(qkv_ctx *ctx, int64_t B, int64_t H, int64_t T, int64_t S,
                                   double v) {
    qkv_tensor *s = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){B, H, T, S});
    for (int64_t n = 0; n < qkv_tensor_numel(s); n++)
        ((qkv_real *)s->data)[n] = (qkv_real)v;
    return s;
}

static qkv_real at4(const qkv_tensor *a, int64_t b, int64_t h, int64_t i, int64_t j) {
    return ((const qkv_real *)a->data)[((b * a->shape[1] + h) * a->shape[2] + i) * a->shape[3] + j];
}

TEST(attn_normalize_softmax_closed_forms) {
    qkv_ctx *ctx = tu_ctx();
    /* one query attending to identical keys: uniform */
    for (int64_t S = 1; S <= 7; S += 3) {
        qkv_tensor *a =
            qkv_attn_normalize(ctx, constant_scores(ctx, 1, 1, 1, S, 0.7), QKV_NORM_SOFTMAX, NULL);
        for (int64_t j = 0; a && j < S; j++)
            CHECK_NEAR(at4(a, 0, 0, 0, j), 1.0 / (double)S, 1e-7);
    }
    /* e = [0, ln 2, ln 3] -> [1/6, 2/6, 3/6]; adding a constant changes nothing */
    qkv_tensor *e =
        qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, 2, 3},
                        (qkv_real[]){0, (qkv_real)log(2.0), (qkv_real)log(3.0), 50,
                                     (qkv_real)(50 + log(2.0)), (qkv_real)(50 + log(3.0))});
    qkv_tensor *a = qkv_attn_normalize(ctx, e, QKV_NORM_SOFTMAX, NULL);
    CHECK(a && a->ndim == 4 && a->shape[3] == 3);
    for (int64_t i = 0; a && i < 2; i++)
        for (int64_t j = 0; j < 3; j++)
            CHECK_NEAR(at4(a, 0, 0, i, j), (double)(j + 1) / 6.0, 2e-6);
    /* huge scores do not overflow */
    qkv_tensor *big =
        qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, 1, 2}, (qkv_real[]){1e30f, 1e30f});
    qkv_tensor *ab = qkv_attn_normalize(ctx, big, QKV_NORM_SOFTMAX, NULL);
    CHECK(ab && at4(ab, 0, 0, 0, 0) == (qkv_real)0.5 && at4(ab, 0, 0, 0, 1) == (qkv_real)0.5);
    CHECK(qkv_ctx_status(ctx) == QKV_OK);
    qkv_ctx_free(ctx);
}

TEST(attn_normalize_relu_rownorm_sigmoid_closed_forms) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *e =
        qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, 1, 4}, (qkv_real[]){-1, 0.5, 2, 0});
    qkv_tensor *r = qkv_attn_normalize(ctx, e, QKV_NORM_RELU, NULL);
    qkv_tensor *n = qkv_attn_normalize(ctx, e, QKV_NORM_RELU_ROWNORM, NULL);
    qkv_tensor *s = qkv_attn_normalize(ctx, e, QKV_NORM_SIGMOID, NULL);
    CHECK(r && n && s);
    const double relu[4] = {0, 0.5, 2, 0};
    for (int j = 0; r && n && s && j < 4; j++) {
        CHECK(at4(r, 0, 0, 0, j) == (qkv_real)relu[j]);
        CHECK_NEAR(at4(n, 0, 0, 0, j), relu[j] / (2.5 + 1e-6), 1e-7);
        double x = ((qkv_real *)e->data)[j];
        CHECK_NEAR(at4(s, 0, 0, 0, j), 1 / (1 + exp(-x)), 1e-7);
    }
    /* a row of non-positive scores under RELU_ROWNORM: zeros (the eps keeps 0 / 0 away) */
    qkv_tensor *neg =
        qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, 1, 2}, (qkv_real[]){-1, 0});
    qkv_tensor *nz = qkv_attn_normalize(ctx, neg, QKV_NORM_RELU_ROWNORM, NULL);
    CHECK(nz && at4(nz, 0, 0, 0, 0) == 0 && at4(nz, 0, 0, 0, 1) == 0);
    qkv_ctx_free(ctx);
}

/* Sparsemax (Martins & Astudillo 2016) of z = (1, 0.5, -1, 0.3) and a fifth key masked: sorted
 * 1, 0.5, 0.3, -1, the support is the largest k with 1 + k z_(k) > sum_{l <= k} z_(l) (k = 3:
 * 1.9 > 1.8; k = 4: -3 < 0.8), tau = (1.8 - 1) / 3 = 4/15, a = (11/15, 7/30, 0, 1/30, 0); its
 * Jacobian on the support is da - mean(da over the support). */
TEST(attn_normalize_sparsemax_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *e = qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, 1, 5}, (qkv_real[]){1, 0.5, -1, 0.3, 9});
    qkv_mask m = qkv_mask_none();
    m.key_padding = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, 5}, (int32_t[]){0, 0, 0, 0, 1});
    qkv_tensor_requires_grad(e);
    qkv_tensor *a = qkv_attn_normalize(ctx, e, QKV_NORM_SPARSEMAX, &m);
    CHECK(a != NULL);
    const double tau = (1 + 0.5 + 0.3 - 1) / 3, want[5] = {1 - tau, 0.5 - tau, 0, 0.3 - tau, 0};
    double sum = 0;
    for (int j = 0; a && j < 5; j++) {
        CHECK_NEAR(at4(a, 0, 0, 0, j), want[j], 1e-6);
        sum += at4(a, 0, 0, 0, j);
    }
    CHECK(a && at4(a, 0, 0, 0, 2) == 0 && at4(a, 0, 0, 0, 4) == 0); /* exact zeros */
    CHECK_NEAR(sum, 1, 1e-6);
    /* backward of sum_j w_j a_j: w_j - mean(w over the support {0, 1, 3}) there, 0 elsewhere */
    const qkv_real w[5] = {1, 2, 3, 4, 5};
    qkv_tensor *wt = qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, 1, 5}, (qkv_real *)w);
    CHECK_OK(qkv_backward(ctx, qkv_sum(ctx, qkv_mul(ctx, a, wt))));
    const double mean = (1 + 2 + 4) / 3.0, dwant[5] = {1 - mean, 2 - mean, 0, 4 - mean, 0};
    for (int j = 0; e->grad && j < 5; j++) CHECK_NEAR(((qkv_real *)e->grad)[j], dwant[j], 1e-6);
    qkv_ctx_free(ctx);
}

TEST(attn_normalize_mask_rules_closed_forms) {
    qkv_ctx *ctx = tu_ctx();
    const int64_t T = 5, S = 5;
    qkv_tensor *e = constant_scores(ctx, 1, 2, T, S, -0.3);
    /* causal: row 0 attends only to key 0, row i uniformly to keys 0..i */
    qkv_mask m = qkv_mask_none();
    m.causal = true;
    qkv_tensor *a = qkv_attn_normalize(ctx, e, QKV_NORM_SOFTMAX, &m);
    CHECK(a && at4(a, 0, 1, 0, 0) == 1);
    for (int64_t h = 0; a && h < 2; h++)
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < S; j++) {
                if (j > i)
                    CHECK(at4(a, 0, h, i, j) == 0);
                else
                    CHECK_NEAR(at4(a, 0, h, i, j), 1.0 / (double)(i + 1), 1e-7);
            }
    /* window left 1, right 1: widths 2, 3, 3, 3, 2 */
    m = qkv_mask_none();
    m.window_left = 1;
    m.window_right = 1;
    a = qkv_attn_normalize(ctx, e, QKV_NORM_SOFTMAX, &m);
    const int width[5] = {2, 3, 3, 3, 2};
    for (int64_t i = 0; a && i < T; i++) {
        int nonzero = 0;
        for (int64_t j = 0; j < S; j++) {
            bool in = j >= i - 1 && j <= i + 1;
            nonzero += at4(a, 0, 0, i, j) != 0;
            if (in)
                CHECK_NEAR(at4(a, 0, 0, i, j), 1.0 / width[i], 1e-7);
            else
                CHECK(at4(a, 0, 0, i, j) == 0);
        }
        CHECK(nonzero == width[i]);
    }
    /* key padding: batch 0 pads keys 1 and 4, batch 1 pads nothing */
    qkv_tensor *e2 = constant_scores(ctx, 2, 1, 2, S, 1.0);
    qkv_tensor *pad = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){2, S},
                                      (int32_t[]){0, 1, 0, 0, 1, 0, 0, 0, 0, 0});
    m = qkv_mask_none();
    m.key_padding = pad;
    a = qkv_attn_normalize(ctx, e2, QKV_NORM_SOFTMAX, &m);
    for (int64_t i = 0; a && i < 2; i++)
        for (int64_t j = 0; j < S; j++) {
            CHECK_NEAR(at4(a, 0, 0, i, j), (j == 1 || j == 4) ? 0.0 : 1.0 / 3, 1e-7);
            CHECK(j != 1 || at4(a, 0, 0, i, j) == 0);
            CHECK_NEAR(at4(a, 1, 0, i, j), 1.0 / S, 1e-7);
        }
    qkv_ctx_free(ctx);
}

/* A graph: the path 0 - 1 - 2 - 3 with self loops, plus an isolated node 4. Attention over the
 * adjacency is uniform over each node's neighbours (GAT-style); node 4 attends to nothing. */
TEST(attn_normalize_graph_adjacency) {
    qkv_ctx *ctx = tu_ctx();
    /* clang-format off */
    const int32_t adj[25] = {1, 1, 0, 0, 0,
                             1, 1, 1, 0, 0,
                             0, 1, 1, 1, 0,
                             0, 0, 1, 1, 0,
                             0, 0, 0, 0, 0};
    /* clang-format on */
    qkv_tensor *al = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){5, 5}, adj);
    qkv_mask m = qkv_mask_none();
    m.allowed = al;
    qkv_tensor *e = constant_scores(ctx, 2, 3, 5, 5, 2.0);
    for (int k = 0; k < (int)(sizeof all_norms / sizeof *all_norms); k++) {
        qkv_tensor *a = qkv_attn_normalize(ctx, e, all_norms[k], &m);
        CHECK(a != NULL);
        for (int64_t b = 0; a && b < 2; b++)
            for (int64_t h = 0; h < 3; h++)
                for (int64_t i = 0; i < 5; i++) {
                    int deg = 0;
                    for (int64_t j = 0; j < 5; j++)
                        deg += adj[i * 5 + j];
                    for (int64_t j = 0; j < 5; j++) {
                        double want = 0;
                        if (adj[i * 5 + j]) {
                            switch (all_norms[k]) {
                            case QKV_NORM_SOFTMAX:
                            case QKV_NORM_SPARSEMAX: /* equal scores: uniform over the allowed keys */
                                want = 1.0 / deg;
                                break;
                            case QKV_NORM_RELU:
                                want = 2.0;
                                break;
                            case QKV_NORM_RELU_ROWNORM:
                                want = 2.0 / (2.0 * deg + 1e-6);
                                break;
                            case QKV_NORM_SIGMOID:
                                want = 1 / (1 + exp(-2.0));
                                break;
                            }
                        }
                        CHECK_NEAR(at4(a, b, h, i, j), want, 1e-6);
                        CHECK(adj[i * 5 + j] || at4(a, b, h, i, j) == 0);
                    }
                }
    }
    qkv_ctx_free(ctx);
}

static qkv_tensor *backward_scores(qkv_ctx *ctx, qkv_tensor *e, qkv_attn_norm norm,
                                   const qkv_mask *m) {
    qkv_tensor_requires_grad(e);
    qkv_tensor *a = qkv_attn_normalize(ctx, e, norm, m);
    qkv_tensor *dy = qkv_tensor_new(ctx, QKV_REAL, 4, a ? a->shape : e->shape);
    if (!a || !dy) return NULL;
    tu_fill_uniform(dy->data, qkv_tensor_numel(dy), -1, 1, 5);
    CHECK_OK(qkv_backward_from(ctx, a, dy));
    return a;
}

/* Masked positions hold NaN and +-inf scores; their weights and gradients are exactly zero, a
 * row with no allowed key is all zero, and nothing is NaN, forward or backward. */
TEST(attn_normalize_masked_and_fully_masked_rows) {
    const int64_t B = 2, H = 2, T = 4, S = 5;
    for (int k = 0; k < n_norms(); k++)
        for (int kind = 2; kind < AT_MASK_KINDS; kind++) {
            at_mask am = at_mask_make(kind, B, T, S, 31);
            const qkv_mask *m = at_mask_ptr(&am);
            qkv_ctx *ctx = tu_ctx();
            qkv_tensor *e = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){B, H, T, S});
            qkv_real *ed = e->data;
            tu_fill_uniform(ed, qkv_tensor_numel(e), -2, 2, 6);
            int64_t masked = 0, n = 0;
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t i = 0; i < T; i++)
                        for (int64_t j = 0; j < S; j++, n++)
                            if (!qkv_mask_allows(m, b, i, j)) {
                                const qkv_real poison[3] = {NAN, INFINITY, -INFINITY};
                                ed[n] = poison[masked++ % 3];
                            }
            qkv_tensor *a = backward_scores(ctx, e, norm_at(k), m);
            CHECK_MSG(a && qkv_ctx_status(ctx) == QKV_OK, "%s %s: %s", norm_name_at(k), am.name,
                      qkv_last_error());
            if (!a) {
                qkv_ctx_free(ctx);
                at_mask_free(&am);
                continue;
            }
            const qkv_real *ad = a->data, *gd = e->grad;
            n = 0;
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t i = 0; i < T; i++) {
                        double row = 0;
                        int64_t allowed = 0;
                        for (int64_t j = 0; j < S; j++, n++) {
                            CHECK(!isnan(ad[n]) && !isnan(gd[n]));
                            if (qkv_mask_allows(m, b, i, j)) {
                                allowed++;
                                row += ad[n];
                            } else {
                                CHECK_MSG(ad[n] == 0 && gd[n] == 0,
                                          "%s %s: masked (%lld %lld %lld %lld): a %g, grad %g",
                                          norm_name_at(k), am.name, (long long)b, (long long)h,
                                          (long long)i, (long long)j, (double)ad[n], (double)gd[n]);
                            }
                        }
                        if (norm_at(k) == QKV_NORM_SOFTMAX)
                            CHECK_NEAR(row, allowed ? 1.0 : 0.0, 1e-6);
                    }
            CHECK(masked > 0);
            qkv_ctx_free(ctx);
            at_mask_free(&am);
        }
}

/* A softmax row whose allowed scores are all -inf behaves as a fully masked row. */
TEST(attn_normalize_softmax_all_minus_inf_row_is_zero) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *e = qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, 2, 2},
                                    (qkv_real[]){-INFINITY, -INFINITY, 0, -INFINITY});
    qkv_tensor *a = backward_scores(ctx, e, QKV_NORM_SOFTMAX, NULL);
    CHECK(a != NULL);
    const qkv_real *ad = a ? a->data : NULL, *gd = e->grad;
    CHECK(ad && ad[0] == 0 && ad[1] == 0 && ad[2] == 1 && ad[3] == 0);
    CHECK(gd && gd[0] == 0 && gd[1] == 0 && gd[2] == 0 && gd[3] == 0);
    qkv_ctx_free(ctx);
}

TEST(attn_normalize_softmax_nan_score_makes_its_row_nan) {
    /* rows: all NaN, one NaN among finite scores, finite; a NaN must not pass for "no allowed
     * key" (zero weights), as a running maximum that skips NaN would make it. Key 2 is padded:
     * its weight stays 0 in every row, NaN ones included (both kernel sets). */
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *e = qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, 3, 3},
                                    (qkv_real[]){NAN, NAN, 1, 0.5f, NAN, 2, 0.5f, -0.5f, 3});
    qkv_tensor *pad = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, 3}, (int32_t[]){0, 0, 1});
    qkv_mask m = qkv_mask_none();
    m.key_padding = pad;
    qkv_tensor *a = qkv_attn_normalize(ctx, e, QKV_NORM_SOFTMAX, &m);
    CHECK(a != NULL);
    const qkv_real *ad = a ? a->data : NULL;
    for (int r = 0; ad && r < 2; r++)
        for (int j = 0; j < 2; j++)
            CHECK_MSG(isnan(ad[3 * r + j]), "weight (%d, %d) = %g, not NaN", r, j,
                      (double)ad[3 * r + j]);
    for (int r = 0; ad && r < 3; r++)
        CHECK_MSG(ad[3 * r + 2] == 0, "padded weight of row %d = %g", r, (double)ad[3 * r + 2]);
    CHECK(ad && !isnan(ad[6]) && !isnan(ad[7]) && fabs(ad[6] + ad[7] - 1) < 1e-6);
    qkv_ctx_free(ctx);
}

typedef struct {
    qkv_attn_norm norm;
    const qkv_mask *mask;
} norm_cfg;

static qkv_tensor *normalize_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    const norm_cfg *c = user;
    return qkv_attn_normalize(ctx, in[0], c->norm, c->mask);
}

static const int64_t norm_shapes[][4] = {
    {2, 2, 3, 4}, {2, 1, 1, 5}, {2, 3, 4, 1}, {2, 2, 5, 3}, {3, 1, 1, 1}};

TEST(attn_normalize_gradcheck_every_norm_and_mask) {
    TU_NEED_DOUBLE();
    for (size_t s = 0; s < sizeof norm_shapes / sizeof *norm_shapes; s++) {
        const int64_t *sh = norm_shapes[s];
        for (int kind = 0; kind < AT_MASK_KINDS; kind++) {
            at_mask am = at_mask_make(kind, sh[0], sh[2], sh[3], 40 + (uint64_t)s);
            for (int k = 0; k < n_norms(); k++) {
                norm_cfg c = {norm_at(k), at_mask_ptr(&am)};
                /* away from 0: ReLU's kink (finite differences straddling it are meaningless) */
                qkv_tensor *in[1] = {at_rand_away(4, sh, 50 + (uint64_t)(s * 16 + (size_t)k))};
                qkv_tensor_requires_grad(in[0]);
                char what[128];
                snprintf(what, sizeof what, "%s, %s, (%lld, %lld, %lld, %lld)", norm_name_at(k),
                         am.name, (long long)sh[0], (long long)sh[1], (long long)sh[2],
                         (long long)sh[3]);
                at_gradcheck(what, normalize_fn, in, 1, &c, NULL);
                tu_free(in[0]);
            }
            at_mask_free(&am);
        }
    }
}

TEST(attn_normalize_fast_matches_reference) {
    const int64_t shapes[][4] = {{2, 3, 45, 67}, {2, 2, 9, 1}, {3, 1, 1, 130}, {2, 4, 33, 17}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t *sh = shapes[s];
        for (int kind = 0; kind < AT_MASK_KINDS; kind++) {
            at_mask am = at_mask_make(kind, sh[0], sh[2], sh[3], 60 + (uint64_t)s);
            for (int k = 0; k < n_norms(); k++) {
                norm_cfg c = {norm_at(k), at_mask_ptr(&am)};
                qkv_tensor *in[1] = {tu_rand(4, sh, -3, 3, 70 + (uint64_t)k)};
                qkv_tensor_requires_grad(in[0]);
                char what[128];
                snprintf(what, sizeof what, "normalize %s, %s, shape %zu", norm_name_at(k), am.name,
                         s);
                at_compare_kernels(what, normalize_fn, in, 1, &c);
                tu_free(in[0]);
            }
            at_mask_free(&am);
        }
    }
}

/* A strided scores view and a strided mask view give the same result as contiguous ones. */
TEST(attn_normalize_accepts_views) {
    qkv_ctx *ctx = tu_ctx();
    const int64_t B = 2, H = 3, T = 4, S = 5;
    qkv_tensor *base = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){B, T, H, S}); /* (B, T, H, S) */
    tu_fill_uniform(base->data, qkv_tensor_numel(base), -2, 2, 8);
    qkv_tensor *view = qkv_permute(ctx, base, (const int[]){0, 2, 1, 3}); /* (B, H, T, S) view */
    qkv_tensor *cont = qkv_contiguous(ctx, view);
    qkv_tensor *alT = qkv_tensor_new(ctx, QKV_I32, 2, (int64_t[]){S, T});
    for (int64_t n = 0; n < S * T; n++)
        ((int32_t *)alT->data)[n] = (int32_t)(n % 3 != 0);
    qkv_tensor *al = qkv_permute(ctx, alT, (const int[]){1, 0});
    qkv_tensor *alc = qkv_contiguous(ctx, al);
    qkv_mask mv = qkv_mask_none(), mc = qkv_mask_none();
    mv.allowed = al;
    mc.allowed = alc;
    qkv_tensor *a1 = qkv_attn_normalize(ctx, view, QKV_NORM_SOFTMAX, &mv);
    qkv_tensor *a2 = qkv_attn_normalize(ctx, cont, QKV_NORM_SOFTMAX, &mc);
    CHECK(a1 && a2 && memcmp(a1->data, a2->data, sizeof(qkv_real) * (size_t)(B * H * T * S)) == 0);
    qkv_ctx_free(ctx);
}

TEST(attn_normalize_rejects_bad_input) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *e = tu_rand(4, (int64_t[]){2, 3, 4, 5}, -1, 1, 1);
    qkv_tensor *e3 = tu_rand(3, (int64_t[]){2, 4, 5}, -1, 1, 1);
    qkv_tensor *ei = tu_tensor(QKV_I32, 4, (int64_t[]){2, 3, 4, 5});
    qkv_tensor *ew =
        tu_tensor(sizeof(qkv_real) == 4 ? QKV_F64 : QKV_F32, 4, (int64_t[]){2, 3, 4, 5});
    AT_EXPECT_FAIL(ctx, qkv_attn_normalize(ctx, e3, QKV_NORM_SOFTMAX, NULL), QKV_ERR_SHAPE,
                   "attn_normalize: scores (2, 4, 5)");
    AT_EXPECT_FAIL(ctx, qkv_attn_normalize(ctx, ei, QKV_NORM_SOFTMAX, NULL), QKV_ERR_SHAPE,
                   "attn_normalize");
    AT_EXPECT_FAIL(ctx, qkv_attn_normalize(ctx, ew, QKV_NORM_SOFTMAX, NULL), QKV_ERR_SHAPE,
                   "scores");
    AT_EXPECT_FAIL(ctx, qkv_attn_normalize(ctx, e, (qkv_attn_norm)9, NULL), QKV_ERR_INVALID_ARG,
                   "unknown normaliser 9");
    AT_EXPECT_FAIL(ctx, qkv_attn_normalize(ctx, NULL, QKV_NORM_SOFTMAX, NULL), QKV_ERR_INVALID_ARG,
                   "attn_normalize");

    qkv_tensor *pad_bad = tu_tensor(QKV_I32, 2, (int64_t[]){2, 6});
    qkv_tensor *pad_b = tu_tensor(QKV_I32, 2, (int64_t[]){3, 5});
    qkv_tensor *pad_f = tu_tensor(QKV_REAL, 2, (int64_t[]){2, 5});
    qkv_tensor *al_bad = tu_tensor(QKV_I32, 2, (int64_t[]){5, 5});
    qkv_tensor *al_b = tu_tensor(QKV_I32, 3, (int64_t[]){3, 4, 5});
    qkv_tensor *al_1 = tu_tensor(QKV_I32, 1, (int64_t[]){20});
    qkv_tensor *al_f = tu_tensor(QKV_REAL, 2, (int64_t[]){4, 5});
    qkv_mask m = qkv_mask_none();
    m.key_padding = pad_bad;
    AT_EXPECT_FAIL(ctx, qkv_attn_normalize(ctx, e, QKV_NORM_SOFTMAX, &m), QKV_ERR_SHAPE,
                   "mask.key_padding (2, 6) I32 must be I32 (B, S) = (2, 5)");
    m.key_padding = pad_b;
    AT_EXPECT_FAIL(ctx, qkv_attn_normalize(ctx, e, QKV_NORM_RELU, &m), QKV_ERR_SHAPE,
                   "mask.key_padding (3, 5)");
    m.key_padding = pad_f;
    AT_EXPECT_FAIL(ctx, qkv_attn_normalize(ctx, e, QKV_NORM_SIGMOID, &m), QKV_ERR_SHAPE,
                   "must be I32");
    m = qkv_mask_none();
    m.allowed = al_bad;
    AT_EXPECT_FAIL(ctx, qkv_attn_normalize(ctx, e, QKV_NORM_SOFTMAX, &m), QKV_ERR_SHAPE,
                   "mask.allowed (5, 5) I32 must be I32 (T, S) = (4, 5)");
    m.allowed = al_b;
    AT_EXPECT_FAIL(ctx, qkv_attn_normalize(ctx, e, QKV_NORM_SOFTMAX, &m), QKV_ERR_SHAPE,
                   "(B, T, S) = (2, 4, 5)");
    m.allowed = al_1;
    AT_EXPECT_FAIL(ctx, qkv_attn_normalize(ctx, e, QKV_NORM_RELU_ROWNORM, &m), QKV_ERR_SHAPE,
                   "mask.allowed (20)");
    m.allowed = al_f;
    AT_EXPECT_FAIL(ctx, qkv_attn_normalize(ctx, e, QKV_NORM_SOFTMAX, &m), QKV_ERR_SHAPE,
                   "mask.allowed");
    /* and a good call afterwards works */
    qkv_ctx_reset(ctx);
    m.allowed = NULL;
    CHECK(qkv_attn_normalize(ctx, e, QKV_NORM_SOFTMAX, &m) != NULL &&
          qkv_ctx_status(ctx) == QKV_OK);
    qkv_tensor *all[] = {e, e3, ei, ew, pad_bad, pad_b, pad_f, al_bad, al_b, al_1, al_f};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tu_free(all[i]);
    qkv_ctx_free(ctx);
}
