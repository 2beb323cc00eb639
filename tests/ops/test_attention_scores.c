/* test_attention_scores.c: qkv_attn_scores (DOT, SCALED_DOT, COSINE with a fixed, shared or
 * per-head scale): closed forms, gradient checks on odd shapes and through strided head views,
 * clamped cosine norms, reference vs fast kernels, bad input. */
#include "attn_testutil.h"

static qkv_real at4(const qkv_tensor *a, int64_t b, int64_t h, int64_t i, int64_t j) {
    return ((const qkv_real *)a->data)[((b * a->shape[1] + h) * a->shape[2] + i) * a->shape[3] + j];
}

TEST(attn_scores_dot_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    /* q = [1, 2], k = [[3, 4], [1, 0], [0, -0.5]] -> [11, 1, -1]; scaled: / sqrt(2) */
    qkv_tensor *q = qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, 1, 2}, (qkv_real[]){1, 2});
    qkv_tensor *k = qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 1, 3, 2},
                                    (qkv_real[]){3, 4, 1, 0, 0, -0.5});
    qkv_tensor *e = qkv_attn_scores(ctx, q, k, QKV_SCORE_DOT, NULL, 0);
    qkv_tensor *s = qkv_attn_scores(ctx, q, k, QKV_SCORE_SCALED_DOT, NULL, 123 /* ignored */);
    CHECK(e && s && e->ndim == 4 && e->shape[2] == 1 && e->shape[3] == 3);
    const double want[3] = {11, 1, -1};
    for (int j = 0; e && s && j < 3; j++) {
        CHECK(at4(e, 0, 0, 0, j) == (qkv_real)want[j]);
        CHECK_NEAR(at4(s, 0, 0, 0, j), want[j] / sqrt(2.0), 1e-6);
    }
    qkv_ctx_free(ctx);
}

TEST(attn_scores_cosine_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    /* two heads; head 0: q = [3, 4] vs k = [3, 4], [-4, 3], [-6, -8], [0, 0] -> [1, 0, -1, 0]
     * head 1: q = [0, 0] (zero vector: all scores 0, no NaN) */
    qkv_tensor *q =
        qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 2, 1, 2}, (qkv_real[]){3, 4, 0, 0});
    qkv_tensor *k =
        qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 2, 4, 2},
                        (qkv_real[]){3, 4, -4, 3, -6, -8, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8});
    const double cosv[4] = {1, 0, -1, 0};
    qkv_tensor *fixed = qkv_attn_scores(ctx, q, k, QKV_SCORE_COSINE, NULL, 10);
    qkv_tensor *g1 = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){1}, (qkv_real[]){-3});
    qkv_tensor *shared = qkv_attn_scores(ctx, q, k, QKV_SCORE_COSINE, g1, 10 /* ignored */);
    qkv_tensor *gh = qkv_tensor_from(ctx, QKV_REAL, 1, (int64_t[]){2}, (qkv_real[]){2, -0.5});
    qkv_tensor *per_head = qkv_attn_scores(ctx, q, k, QKV_SCORE_COSINE, gh, 0);
    CHECK(fixed && shared && per_head);
    for (int j = 0; fixed && shared && per_head && j < 4; j++) {
        CHECK_NEAR(at4(fixed, 0, 0, 0, j), 10 * cosv[j], 1e-6);
        CHECK_NEAR(at4(shared, 0, 0, 0, j), -3 * cosv[j], 1e-6);
        CHECK_NEAR(at4(per_head, 0, 0, 0, j), 2 * cosv[j], 1e-6);
        CHECK(at4(fixed, 0, 1, 0, j) == 0 && at4(per_head, 0, 1, 0, j) == 0);
    }
    /* scale invariance: cos(5 q, k / 7) = cos(q, k) */
    qkv_tensor *q5 = qkv_scale(ctx, q, 5), *k7 = qkv_scale(ctx, k, 1.0 / 7);
    qkv_tensor *inv = qkv_attn_scores(ctx, q5, k7, QKV_SCORE_COSINE, NULL, 10);
    for (int j = 0; inv && j < 4; j++)
        CHECK_NEAR(at4(inv, 0, 0, 0, j), 10 * cosv[j], 1e-5);
    CHECK(qkv_ctx_status(ctx) == QKV_OK);
    qkv_ctx_free(ctx);
}

typedef struct {
    qkv_score_kind kind;
    double fixed;
    int split_heads; /* > 0: in[0], in[1] are (B, T, H*D) and go through qkv_split_heads */
} scores_cfg;

static qkv_tensor *scores_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    const scores_cfg *c = user;
    qkv_tensor *q = in[0], *k = in[1];
    if (c->split_heads) {
        q = qkv_split_heads(ctx, q, c->split_heads);
        k = qkv_split_heads(ctx, k, c->split_heads);
    }
    return qkv_attn_scores(ctx, q, k, c->kind, in[2], c->fixed);
}

/* (B, H, T, S, D): D = 1, T = 1, S = 1, T != S, D = 5 */
static const int64_t score_shapes[][5] = {
    {1, 1, 1, 1, 1}, {2, 3, 1, 4, 5}, {1, 2, 3, 1, 2}, {2, 2, 4, 3, 5}, {1, 1, 3, 3, 1}};

/* scale: 0 fixed, 1 shared learnable, 2 per-head learnable */
static qkv_tensor *make_scale(int scale, int64_t H, uint64_t seed) {
    if (scale == 0) return NULL;
    qkv_tensor *g = tu_rand(1, (int64_t[]){scale == 1 ? 1 : H}, 0.5, 3, seed);
    qkv_tensor_requires_grad(g);
    return g;
}

TEST(attn_scores_gradcheck_every_kind) {
    TU_NEED_DOUBLE();
    const qkv_score_kind kinds[] = {QKV_SCORE_DOT, QKV_SCORE_SCALED_DOT, QKV_SCORE_COSINE};
    for (size_t s = 0; s < sizeof score_shapes / sizeof *score_shapes; s++) {
        const int64_t *sh = score_shapes[s];
        for (int kk = 0; kk < 3; kk++)
            for (int scale = 0; scale < (kinds[kk] == QKV_SCORE_COSINE ? 3 : 1); scale++) {
                scores_cfg c = {kinds[kk], 2.5, 0};
                qkv_tensor *in[3] = {
                    tu_rand(4, (int64_t[]){sh[0], sh[1], sh[2], sh[4]}, -1, 1, 1 + s),
                    tu_rand(4, (int64_t[]){sh[0], sh[1], sh[3], sh[4]}, -1, 1, 11 + s),
                    make_scale(scale, sh[1], 21 + s)};
                qkv_tensor_requires_grad(in[0]);
                qkv_tensor_requires_grad(in[1]);
                char what[96];
                snprintf(what, sizeof what, "scores kind %d scale %d shape %zu", (int)kinds[kk],
                         scale, s);
                at_gradcheck(what, scores_fn, in, 3, &c, NULL);
                for (int n = 0; n < 3; n++)
                    tu_free(in[n]);
            }
    }
}

/* q and k arrive as strided (B, H, T, D) views of (B, T, H*D) projections. */
TEST(attn_scores_gradcheck_through_split_heads) {
    TU_NEED_DOUBLE();
    const qkv_score_kind kinds[] = {QKV_SCORE_DOT, QKV_SCORE_SCALED_DOT, QKV_SCORE_COSINE};
    for (int kk = 0; kk < 3; kk++) {
        scores_cfg c = {kinds[kk], 1.5, 3};
        qkv_tensor *in[3] = {tu_rand(3, (int64_t[]){2, 4, 6}, -1, 1, 3),
                             tu_rand(3, (int64_t[]){2, 5, 6}, -1, 1, 4),
                             make_scale(kinds[kk] == QKV_SCORE_COSINE ? 2 : 0, 3, 5)};
        qkv_tensor_requires_grad(in[0]);
        qkv_tensor_requires_grad(in[1]);
        at_gradcheck("scores via split_heads", scores_fn, in, 3, &c, NULL);
        for (int n = 0; n < 3; n++)
            tu_free(in[n]);
    }
}

/* Rows with |x| < eps = 1e-8 (including an exact zero row) use the clamp: the score is linear
 * in them, and their gradient is the unprojected g k / (eps n_k). The finite-difference step
 * is 1e-11 so the perturbed rows stay below eps; only the tiny tensor is checked (a 1e-11
 * step would drown the O(1) derivatives of the other inputs in rounding). */
TEST(attn_scores_cosine_gradcheck_clamped_norms) {
    TU_NEED_DOUBLE();
    tu_gradcheck_opts o = tu_gradcheck_default();
    o.eps = 1e-11;
    for (int side = 0; side < 2; side++) {
        scores_cfg c = {QKV_SCORE_COSINE, 0.7, 0};
        const int64_t B = 1, H = 2, T = 3, S = 4, D = 3;
        qkv_tensor *q = tu_rand(4, (int64_t[]){B, H, T, D}, -1, 1, 7);
        qkv_tensor *k = tu_rand(4, (int64_t[]){B, H, S, D}, -1, 1, 8);
        qkv_tensor *tiny = side == 0 ? q : k;
        qkv_real *x = tiny->data;
        for (int64_t n = 0; n < qkv_tensor_numel(tiny); n++)
            x[n] *= (qkv_real)3e-9; /* |row| < 1e-8 */
        for (int64_t n = 0; n < D; n++)
            x[n] = 0; /* row 0: zero */
        qkv_tensor_requires_grad(tiny);
        qkv_tensor *in[3] = {q, k, NULL};
        at_gradcheck(side == 0 ? "cosine, clamped q" : "cosine, clamped k", scores_fn, in, 3, &c,
                     &o);
        tu_free(q);
        tu_free(k);
    }
}

TEST(attn_scores_fast_matches_reference) {
    const int64_t shapes[][5] = {
        {2, 3, 45, 67, 16}, {1, 1, 1, 1, 1}, {2, 2, 9, 1, 5}, {1, 3, 70, 33, 3}};
    const qkv_score_kind kinds[] = {QKV_SCORE_DOT, QKV_SCORE_SCALED_DOT, QKV_SCORE_COSINE};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t *sh = shapes[s];
        for (int kk = 0; kk < 3; kk++)
            for (int variant = 0; variant < (kinds[kk] == QKV_SCORE_COSINE ? 6 : 1); variant++) {
                const int scale = variant % 3;
                const bool clamped = variant >= 3;
                scores_cfg c = {kinds[kk], 4.0, 0};
                qkv_tensor *in[3] = {
                    tu_rand(4, (int64_t[]){sh[0], sh[1], sh[2], sh[4]}, -1, 1, 31 + s),
                    tu_rand(4, (int64_t[]){sh[0], sh[1], sh[3], sh[4]}, -1, 1, 41 + s),
                    make_scale(scale, sh[1], 51 + s)};
                if (clamped) /* one clamped row on each side: a tiny q row, a zero k row */
                    for (int64_t n = 0; n < sh[4]; n++) {
                        ((qkv_real *)in[0]->data)[n] *= (qkv_real)1e-9;
                        ((qkv_real *)in[1]->data)[n] = 0;
                    }
                qkv_tensor_requires_grad(in[0]);
                qkv_tensor_requires_grad(in[1]);
                char what[96];
                snprintf(what, sizeof what, "scores kind %d scale %d%s shape %zu", (int)kinds[kk],
                         scale, clamped ? " clamped" : "", s);
                /* A clamped row's gradient is g M_i / eps with M_i = sum_j dE_ij k_j / n_k: a float
                 * GEMM sum of S cancelling terms whose absolute error (~1e-7) the 1 / eps factor
                 * turns into a relative one (1.6e-5 seen with S = 67); elsewhere gradients are
                 * O(1). */
                at_compare_kernels_tol(what, scores_fn, in, 3, &c, clamped ? 1e-4 : 1e-5);
                for (int n = 0; n < 3; n++)
                    tu_free(in[n]);
            }
    }
}

/* Only some inputs need a gradient: the others' buffers are never touched. */
TEST(attn_scores_partial_gradients) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *q = tu_rand(4, (int64_t[]){1, 2, 3, 4}, -1, 1, 1),
               *k = tu_rand(4, (int64_t[]){1, 2, 5, 4}, -1, 1, 2);
    qkv_tensor *g = tu_rand(1, (int64_t[]){2}, 1, 2, 3);
    for (int kind = 0; kind < 2; kind++) {
        qkv_ctx_reset(ctx);
        qkv_tensor_requires_grad(k);
        qkv_tensor *e =
            qkv_attn_scores(ctx, q, k, kind ? QKV_SCORE_COSINE : QKV_SCORE_DOT, kind ? g : NULL, 0);
        CHECK_OK(qkv_backward(ctx, qkv_sum(ctx, e)));
        CHECK(q->grad == NULL && g->grad == NULL && k->grad != NULL);
        k->grad = NULL;
    }
    tu_free(q), tu_free(k), tu_free(g);
    qkv_ctx_free(ctx);
}

TEST(attn_scores_rejects_bad_input) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *q = tu_rand(4, (int64_t[]){2, 3, 4, 5}, -1, 1, 1);
    qkv_tensor *k = tu_rand(4, (int64_t[]){2, 3, 6, 5}, -1, 1, 2);
    qkv_tensor *k_b = tu_rand(4, (int64_t[]){1, 3, 6, 5}, -1, 1, 2);
    qkv_tensor *k_h = tu_rand(4, (int64_t[]){2, 2, 6, 5}, -1, 1, 2);
    qkv_tensor *k_d = tu_rand(4, (int64_t[]){2, 3, 6, 4}, -1, 1, 2);
    qkv_tensor *q3 = tu_rand(3, (int64_t[]){2, 4, 5}, -1, 1, 2);
    qkv_tensor *q0 = tu_rand(4, (int64_t[]){2, 3, 4, 0}, -1, 1, 2),
               *k0 = tu_rand(4, (int64_t[]){2, 3, 6, 0}, -1, 1, 2);
    qkv_tensor *qi = tu_tensor(QKV_I32, 4, (int64_t[]){2, 3, 4, 5});
    qkv_tensor *qw =
        tu_tensor(sizeof(qkv_real) == 4 ? QKV_F64 : QKV_F32, 4, (int64_t[]){2, 3, 4, 5});
    qkv_tensor *g2 = tu_rand(1, (int64_t[]){2}, 1, 2, 3), *g1 = tu_rand(1, (int64_t[]){1}, 1, 2, 3);
    qkv_tensor *g33 = tu_rand(2, (int64_t[]){3, 3}, 1, 2, 3),
               *gi = tu_tensor(QKV_I32, 1, (int64_t[]){3});
    const qkv_score_kind C = QKV_SCORE_COSINE;
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q, k_b, QKV_SCORE_DOT, NULL, 0), QKV_ERR_SHAPE,
                   "attn_scores: q (2, 3, 4, 5) F");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q, k_b, QKV_SCORE_DOT, NULL, 0), QKV_ERR_SHAPE,
                   "k (1, 3, 6, 5)");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q, k_h, QKV_SCORE_SCALED_DOT, NULL, 0), QKV_ERR_SHAPE,
                   "k (2, 2, 6, 5)");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q, k_d, C, NULL, 1), QKV_ERR_SHAPE,
                   "equal B, H and D");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q3, k, QKV_SCORE_DOT, NULL, 0), QKV_ERR_SHAPE,
                   "(B, H, T, D)");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q0, k0, QKV_SCORE_DOT, NULL, 0), QKV_ERR_SHAPE,
                   "D >= 1");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, qi, k, QKV_SCORE_DOT, NULL, 0), QKV_ERR_SHAPE,
                   "attn_scores: q must be");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q, qw, QKV_SCORE_DOT, NULL, 0), QKV_ERR_SHAPE,
                   "attn_scores: k must be");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q, NULL, QKV_SCORE_DOT, NULL, 0), QKV_ERR_INVALID_ARG,
                   "attn_scores: input 1 is NULL");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q, k, QKV_SCORE_ADDITIVE, NULL, 0),
                   QKV_ERR_INVALID_ARG, "qkv_additive_scores");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q, k, QKV_SCORE_GENERAL, NULL, 0), QKV_ERR_INVALID_ARG,
                   "k W^T");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q, k, (qkv_score_kind)17, NULL, 0),
                   QKV_ERR_INVALID_ARG, "unknown score kind 17");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q, k, C, g2, 0), QKV_ERR_SHAPE, "cos_scale (2) F");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q, k, C, g2, 0), QKV_ERR_SHAPE, "1 element or H = 3");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q, k, C, g33, 0), QKV_ERR_SHAPE, "cos_scale (3, 3)");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q, k, C, gi, 0), QKV_ERR_SHAPE, "cos_scale must be");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q, k, QKV_SCORE_DOT, g1, 0), QKV_ERR_INVALID_ARG,
                   "only used by COSINE");
    AT_EXPECT_FAIL(ctx, qkv_attn_scores(ctx, q, k, C, NULL, NAN), QKV_ERR_INVALID_ARG,
                   "fixed_scale nan is not finite");
    qkv_ctx_reset(ctx);
    CHECK(qkv_attn_scores(ctx, q, k, C, g1, NAN) != NULL); /* fixed_scale unused with cos_scale */
    CHECK(qkv_attn_scores(NULL, q, k, C, g1, 1) == NULL);
    qkv_tensor *all[] = {q, k, k_b, k_h, k_d, q3, q0, k0, qi, qw, g2, g1, g33, gi};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tu_free(all[i]);
    qkv_ctx_free(ctx);
}

/* Empty query or key sequences give empty outputs and run backward without touching memory
 * they do not own (ASan checks the latter). */
TEST(attn_empty_sequences) {
    const int64_t ts[][2] = {{0, 3}, {3, 0}, {0, 0}};
    for (int c = 0; c < 3; c++)
        for (int op = 0; op < 3; op++) {
            qkv_ctx *ctx = tu_ctx();
            const int64_t T = ts[c][0], S = ts[c][1];
            qkv_tensor *q = tu_rand(4, (int64_t[]){2, 2, T, 3}, -1, 1, 1);
            qkv_tensor *k = tu_rand(4, (int64_t[]){2, 2, S, 3}, -1, 1, 2);
            qkv_tensor *v = tu_rand(2, (int64_t[]){2, 3}, -1, 1, 3);
            qkv_tensor *g = tu_rand(1, (int64_t[]){2}, 1, 2, 4);
            qkv_tensor_requires_grad(q);
            qkv_tensor_requires_grad(k);
            qkv_tensor_requires_grad(v);
            qkv_tensor_requires_grad(g);
            qkv_tensor *e = op == 0   ? qkv_attn_scores(ctx, q, k, QKV_SCORE_SCALED_DOT, NULL, 0)
                            : op == 1 ? qkv_attn_scores(ctx, q, k, QKV_SCORE_COSINE, g, 0)
                                      : qkv_additive_scores(ctx, q, k, v);
            qkv_mask m = qkv_mask_none();
            m.causal = true;
            qkv_tensor *a = qkv_attn_normalize(ctx, e, QKV_NORM_SOFTMAX, &m);
            CHECK(a && a->shape[2] == T && a->shape[3] == S && qkv_tensor_numel(a) == 0);
            CHECK_OK(qkv_backward(ctx, qkv_sum(ctx, a)));
            CHECK(op != 1 || (g->grad && ((qkv_real *)g->grad)[0] == 0));
            q->grad = k->grad = v->grad = g->grad = NULL;
            tu_free(q), tu_free(k), tu_free(v), tu_free(g);
            qkv_ctx_free(ctx);
        }
}

/* Per-head products large enough for BLAS to thread itself (m n k > 2^18 in OpenBLAS). The
 * scores inherit qkv_gemm's behaviour across thread counts; OpenBLAS 0.3.21's sgemm is not
 * bit-identical for 1 and 2 threads at these sizes, so the test probes qkv_gemm first and
 * skips (naming the cause) when the GEMM itself is not thread-count invariant. */
TEST(attn_scores_fast_matches_reference_at_blas_sizes) {
    const int64_t T = 96, S = 80, D = 64;
    qkv_real *a = malloc(sizeof(qkv_real) * T * D), *b = malloc(sizeof(qkv_real) * S * D);
    qkv_real *c1 = malloc(sizeof(qkv_real) * T * S), *c2 = malloc(sizeof(qkv_real) * T * S);
    tu_fill_uniform(a, T * D, -1, 1, 1);
    tu_fill_uniform(b, S * D, -1, 1, 2);
    const int saved = qkv_get_num_threads();
    qkv_set_num_threads(1);
    qkv_gemm(false, true, T, S, D, 1, a, D, b, D, 0, c1, S);
    qkv_set_num_threads(2);
    qkv_gemm(false, true, T, S, D, 1, a, D, b, D, 0, c2, S);
    qkv_set_num_threads(saved);
    const bool gemm_invariant = memcmp(c1, c2, sizeof(qkv_real) * T * S) == 0;
    free(a), free(b), free(c1), free(c2);
    if (!gemm_invariant)
        SKIP("qkv_gemm differs between 1 and 2 threads at 96x80x64 (BLAS threading)");
    const qkv_score_kind kinds[] = {QKV_SCORE_SCALED_DOT, QKV_SCORE_COSINE};
    for (int kk = 0; kk < 2; kk++) {
        scores_cfg c = {kinds[kk], 3.0, 0};
        qkv_tensor *in[3] = {tu_rand(4, (int64_t[]){1, 2, T, D}, -1, 1, 3),
                             tu_rand(4, (int64_t[]){1, 2, S, D}, -1, 1, 4), NULL};
        qkv_tensor_requires_grad(in[0]);
        qkv_tensor_requires_grad(in[1]);
        at_compare_kernels("scores at BLAS-threading sizes", scores_fn, in, 3, &c);
        tu_free(in[0]);
        tu_free(in[1]);
    }
}
