/* test_posenc_shaw.c: Shaw et al. relative key and value terms: hand-computed small cases,
 * shift invariance, gradient checks (T = 1, T != S, K beyond the lengths, K = 0), fast vs
 * reference kernels, bad inputs. */
#include "posenc_testutil.h"

static const double shaw_tol = sizeof(qkv_real) == 4 ? 1e-6 : 1e-14;

/* rel rows for K = 1: a_{-1} = (1, 0), a_0 = (0, 1), a_{+1} = (1, 1) */
static const qkv_real rel3[6] = {1, 0, 0, 1, 1, 1};

TEST(shaw_scores_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *q = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){2, 2}, (qkv_real[]){2, 3, 5, 7});
    qkv_tensor *rel = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){3, 2}, rel3);
    qkv_tensor *e = qkv_shaw_scores(ctx, q, rel, 3);
    CHECK(e && e->ndim == 2 && e->shape[0] == 2 && e->shape[1] == 3);
    /* i = 0: j - i = 0, 1, 2 -> a_0, a_1, a_1 (clipped): q0 = (2, 3) -> 3, 5, 5
     * i = 1: j - i = -1, 0, 1 -> a_-1, a_0, a_1:      q1 = (5, 7) -> 5, 7, 12 */
    const qkv_real expect[6] = {3, 5, 5, 5, 7, 12};
    for (int n = 0; n < 6; n++)
        CHECK(((qkv_real *)e->data)[n] == expect[n]);
    qkv_ctx_free(ctx);
}

TEST(shaw_values_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *a = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){2, 3},
                                    (qkv_real[]){0.5, 0.25, 0.25, 0.125, 0.375, 0.5});
    qkv_tensor *rel = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){3, 2}, rel3);
    qkv_tensor *o = qkv_shaw_values(ctx, a, rel);
    CHECK(o && o->ndim == 2 && o->shape[0] == 2 && o->shape[1] == 2);
    /* i = 0: 0.5 a_0 + 0.25 a_1 + 0.25 a_1 = (0.5, 1)
     * i = 1: 0.125 a_-1 + 0.375 a_0 + 0.5 a_1 = (0.625, 0.875) */
    const qkv_real expect[4] = {0.5, 1, 0.625, 0.875};
    for (int n = 0; n < 4; n++)
        CHECK_NEAR(((qkv_real *)o->data)[n], expect[n], shaw_tol);
    qkv_ctx_free(ctx);
}

/* PROPERTY: with the same query vector at every position, the relative term of (i, j) equals
 * that of (i + s, j + s): constant along diagonals, clipped distances included. */
TEST(shaw_scores_are_shift_invariant) {
    qkv_ctx *ctx = tu_ctx();
    const int64_t H = 2, T = 12, D = 5;
    qkv_real *qs = malloc(sizeof(qkv_real) * H * T * D);
    for (int64_t h = 0; h < H; h++) {
        tu_fill_uniform(qs + h * T * D, D, -1, 1, 100 + h);
        for (int64_t t = 1; t < T; t++)
            memcpy(qs + (h * T + t) * D, qs + h * T * D, sizeof(qkv_real) * D);
    }
    qkv_tensor *q = qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, H, T, D}, qs);
    qkv_tensor *rel = qkv_tensor_new(ctx, QKV_REAL, 2, (int64_t[]){7, D}); /* K = 3 */
    tu_fill_uniform(rel->data, 7 * D, -1, 1, 103);
    qkv_tensor *e = qkv_shaw_scores(ctx, q, rel, T);
    CHECK(e);
    const qkv_real *x = e->data;
    for (int64_t h = 0; h < H; h++)
        for (int64_t s = 1; s < T; s++)
            for (int64_t i = 0; i + s < T; i++)
                for (int64_t j = 0; j + s < T; j++)
                    CHECK_NEAR(x[(h * T + i + s) * T + j + s], x[(h * T + i) * T + j], shaw_tol);
    free(qs);
    qkv_ctx_free(ctx);
}

typedef struct {
    int64_t S;
} shaw_args;

static qkv_tensor *scores_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    return qkv_shaw_scores(ctx, in[0], in[1], ((const shaw_args *)user)->S);
}

static qkv_tensor *values_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    (void)user;
    return qkv_shaw_values(ctx, in[0], in[1]);
}

/* (B, H, T, D, S, K) */
static const int64_t shaw_cases[][6] = {
    {1, 1, 1, 1, 1, 0}, /* T = S = 1, K = 0 */
    {2, 1, 3, 4, 5, 1}, /* T != S */
    {1, 2, 4, 3, 2, 6}, /* K larger than T and S: only some rows are reachable */
    {1, 1, 5, 2, 7, 0}, /* K = 0: every key shares one row */
    {1, 1, 6, 3, 6, 2}, /* both clipped runs and the middle one */
    {1, 3, 1, 2, 9, 3}, /* T = 1, many keys */
};

TEST(shaw_scores_gradcheck) {
    TU_NEED_DOUBLE();
    for (size_t c = 0; c < sizeof shaw_cases / sizeof *shaw_cases; c++) {
        const int64_t *k = shaw_cases[c];
        qkv_tensor *in[2] = {tu_rand(4, (int64_t[]){k[0], k[1], k[2], k[3]}, -1, 1, 110 + c),
                             tu_rand(2, (int64_t[]){2 * k[5] + 1, k[3]}, -1, 1, 120 + c)};
        qkv_tensor_requires_grad(in[0]);
        qkv_tensor_requires_grad(in[1]);
        shaw_args a = {k[4]};
        tu_gradcheck("shaw_scores", scores_fn, in, 2, &a, NULL);
        tu_free(in[0]);
        tu_free(in[1]);
    }
}

TEST(shaw_values_gradcheck) {
    TU_NEED_DOUBLE();
    for (size_t c = 0; c < sizeof shaw_cases / sizeof *shaw_cases; c++) {
        const int64_t *k = shaw_cases[c];
        qkv_tensor *in[2] = {tu_rand(4, (int64_t[]){k[0], k[1], k[2], k[4]}, 0, 1, 130 + c),
                             tu_rand(2, (int64_t[]){2 * k[5] + 1, k[3]}, -1, 1, 140 + c)};
        qkv_tensor_requires_grad(in[0]);
        qkv_tensor_requires_grad(in[1]);
        tu_gradcheck("shaw_values", values_fn, in, 2, NULL, NULL);
        tu_free(in[0]);
        tu_free(in[1]);
    }
    /* 2-D weights (T, S) and one input without a gradient */
    qkv_tensor *in[2] = {tu_rand(2, (int64_t[]){4, 6}, 0, 1, 150),
                         tu_rand(2, (int64_t[]){5, 3}, -1, 1, 151)};
    qkv_tensor_requires_grad(in[1]);
    tu_gradcheck("shaw_values 2-D, rel_v only", values_fn, in, 2, NULL, NULL);
    tu_free(in[0]);
    tu_free(in[1]);
}

TEST(shaw_fast_matches_reference_and_thread_counts) {
    /* (B, H, T, D, S, K) */
    const int64_t cases[][6] = {
        {2, 4, 64, 16, 80, 8},  /* N S over the parallel grain */
        {1, 3, 20, 8, 30, 100}, /* K far beyond the lengths */
        {2, 2, 17, 5, 9, 0},    /* K = 0 */
        {1, 1, 1, 3, 1, 2},     /* single query and key */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int64_t *k = cases[c];
        qkv_tensor *qi[2] = {tu_rand(4, (int64_t[]){k[0], k[1], k[2], k[3]}, -1, 1, 160 + c),
                             tu_rand(2, (int64_t[]){2 * k[5] + 1, k[3]}, -1, 1, 170 + c)};
        qkv_tensor *ai[2] = {tu_rand(4, (int64_t[]){k[0], k[1], k[2], k[4]}, 0, 1, 180 + c),
                             tu_rand(2, (int64_t[]){2 * k[5] + 1, k[3]}, -1, 1, 190 + c)};
        for (int n = 0; n < 2; n++) {
            qkv_tensor_requires_grad(qi[n]);
            qkv_tensor_requires_grad(ai[n]);
        }
        shaw_args a = {k[4]};
        const int64_t N = k[0] * k[1] * k[2], longest = N > k[4] ? N : k[4];
        CHECK(pe_check_kernels("shaw_scores", scores_fn, qi, 2, &a, longest) == 2);
        CHECK(pe_check_kernels("shaw_values", values_fn, ai, 2, NULL, longest) == 2);
        for (int n = 0; n < 2; n++) {
            tu_free(qi[n]);
            tu_free(ai[n]);
        }
    }
}

TEST(shaw_empty_sequences) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *q = qkv_tensor_zeros(ctx, QKV_REAL, 3, (int64_t[]){2, 3, 4});
    qkv_tensor *rel = qkv_tensor_zeros(ctx, QKV_REAL, 2, (int64_t[]){5, 4});
    qkv_tensor *e = qkv_shaw_scores(ctx, q, rel, 0); /* no keys */
    CHECK(e && e->shape[2] == 0);
    qkv_tensor *a = qkv_tensor_zeros(ctx, QKV_REAL, 3, (int64_t[]){2, 3, 0});
    qkv_tensor *o = qkv_shaw_values(ctx, a, rel); /* no keys: an empty sum, zero output */
    CHECK(o && o->shape[0] == 2 && o->shape[1] == 3 && o->shape[2] == 4);
    for (int n = 0; n < 24; n++)
        CHECK(((qkv_real *)o->data)[n] == 0);
    CHECK(qkv_ctx_status(ctx) == QKV_OK);
    qkv_ctx_free(ctx);
}

TEST(shaw_rejects_bad_inputs) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *q = tu_rand(4, (int64_t[]){1, 2, 3, 4}, -1, 1, 1);
    qkv_tensor *a = tu_rand(4, (int64_t[]){1, 2, 3, 5}, 0, 1, 1);
    qkv_tensor *rel = tu_rand(2, (int64_t[]){5, 4}, -1, 1, 1);
    qkv_tensor *even = tu_rand(2, (int64_t[]){4, 4}, -1, 1, 1);
    qkv_tensor *narrow = tu_rand(2, (int64_t[]){5, 3}, -1, 1, 1);
    qkv_tensor *rel1 = tu_rand(1, (int64_t[]){5}, -1, 1, 1);
    qkv_tensor *qi = tu_ids(4, (int64_t[]){1, 2, 3, 4}, 0, 3, 1);
    qkv_tensor *reli = tu_ids(2, (int64_t[]){5, 4}, 0, 3, 1);
    qkv_tensor *q1 = tu_rand(1, (int64_t[]){4}, -1, 1, 1);
    PE_CHECK_FAILS(ctx, qkv_shaw_scores(ctx, q, even, 3), QKV_ERR_SHAPE, "shaw_scores",
                   "odd number of rows");
    PE_CHECK_FAILS(ctx, qkv_shaw_values(ctx, a, even), QKV_ERR_SHAPE, "shaw_values", "(4, 4)");
    PE_CHECK_FAILS(ctx, qkv_shaw_scores(ctx, q, narrow, 3), QKV_ERR_SHAPE, "shaw_scores",
                   "4 columns");
    PE_CHECK_FAILS(ctx, qkv_shaw_scores(ctx, q, rel1, 3), QKV_ERR_SHAPE, "shaw_scores", "(5)");
    PE_CHECK_FAILS(ctx, qkv_shaw_scores(ctx, qi, rel, 3), QKV_ERR_SHAPE, "shaw_scores", "I32");
    PE_CHECK_FAILS(ctx, qkv_shaw_scores(ctx, q, reli, 3), QKV_ERR_SHAPE, "rel_k", "I32");
    PE_CHECK_FAILS(ctx, qkv_shaw_values(ctx, qi, rel), QKV_ERR_SHAPE, "shaw_values", "I32");
    PE_CHECK_FAILS(ctx, qkv_shaw_values(ctx, a, reli), QKV_ERR_SHAPE, "rel_v", "I32");
    PE_CHECK_FAILS(ctx, qkv_shaw_scores(ctx, q, rel, -1), QKV_ERR_INVALID_ARG, "shaw_scores",
                   "S = -1");
    PE_CHECK_FAILS(ctx, qkv_shaw_scores(ctx, q1, rel, 3), QKV_ERR_SHAPE, "shaw_scores",
                   "(..., T, D)");
    PE_CHECK_FAILS(ctx, qkv_shaw_values(ctx, q1, rel), QKV_ERR_SHAPE, "shaw_values", "(..., T, S)");
    PE_CHECK_FAILS(ctx, qkv_shaw_values(ctx, a, NULL), QKV_ERR_INVALID_ARG, "shaw_values", "NULL");
    qkv_tensor *all[] = {q, a, rel, even, narrow, rel1, qi, reli, q1};
    for (size_t n = 0; n < sizeof all / sizeof *all; n++)
        tu_free(all[n]);
    qkv_ctx_free(ctx);
}
