/* test_posenc_shaw_offset.c: Shaw's relative terms with a query offset (qkv_shaw_scores_at,
 * qkv_shaw_values_at, used by incremental decoding): a hand-computed case, equality with the
 * offset-free op on a longer query sequence (the last T of offset + T queries), gradient checks,
 * fast vs reference kernels with 1 and 2 threads, and a negative offset rejected. */
#include "posenc_testutil.h"

static const double shaw_tol = sizeof(qkv_real) == 4 ? 1e-6 : 1e-14;

TEST(shaw_at_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    /* K = 1: a_{-1} = (1, 0), a_0 = (0, 1), a_{+1} = (1, 1); one query q = (2, 3) at position 2,
     * keys 0..3: distances -2, -1, 0, 1 -> rows a_-1 (clipped), a_-1, a_0, a_1 -> 2, 2, 3, 5 */
    const qkv_real rel3[6] = {1, 0, 0, 1, 1, 1};
    qkv_tensor *q = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){1, 2}, (qkv_real[]){2, 3});
    qkv_tensor *rel = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){3, 2}, rel3);
    qkv_tensor *e = qkv_shaw_scores_at(ctx, q, rel, 4, 2);
    CHECK(e && e->shape[0] == 1 && e->shape[1] == 4);
    const qkv_real expect[4] = {2, 2, 3, 5};
    for (int j = 0; e && j < 4; j++)
        CHECK(((qkv_real *)e->data)[j] == expect[j]);
    /* values: weights (0.5, 0.25, 0.125, 0.125) -> 0.75 a_-1 + 0.125 a_0 + 0.125 a_1 */
    qkv_tensor *a =
        qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){1, 4}, (qkv_real[]){0.5, 0.25, 0.125, 0.125});
    qkv_tensor *o = qkv_shaw_values_at(ctx, a, rel, 2);
    CHECK(o && o->shape[0] == 1 && o->shape[1] == 2);
    if (o) {
        CHECK_NEAR(((qkv_real *)o->data)[0], 0.875, shaw_tol);
        CHECK_NEAR(((qkv_real *)o->data)[1], 0.25, shaw_tol);
    }
    CHECK_OK(qkv_ctx_status(ctx));
    qkv_ctx_free(ctx);
}

/* (B, H, T, D, S, K, offset) */
static const int64_t offset_cases[][7] = {
    {1, 1, 1, 3, 5, 2, 4},  /* one query at the last key (the decoding step) */
    {2, 2, 3, 4, 7, 1, 4},  /* a block of queries at the end */
    {1, 2, 2, 3, 9, 3, 2},  /* queries in the middle: both clipped runs */
    {1, 1, 1, 2, 4, 0, 3},  /* K = 0 */
    {1, 1, 2, 2, 3, 5, 10}, /* queries after every key, K beyond the lengths */
};

/* PROPERTY: the offset op equals rows offset .. offset+T-1 of the offset-free op run on offset
 * + T queries (the first offset of them arbitrary). */
TEST(shaw_at_equals_the_tail_of_a_longer_query) {
    for (size_t c = 0; c < sizeof offset_cases / sizeof *offset_cases; c++) {
        const int64_t *k = offset_cases[c];
        const int64_t B = k[0], H = k[1], T = k[2], D = k[3], S = k[4], K = k[5], o = k[6];
        const int64_t L = o + T;
        qkv_ctx *ctx = tu_ctx();
        qkv_tensor *qlong = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){B, H, L, D});
        qkv_tensor *along = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){B, H, L, S});
        qkv_tensor *rel = qkv_tensor_new(ctx, QKV_REAL, 2, (int64_t[]){2 * K + 1, D});
        tu_fill_uniform(qlong->data, B * H * L * D, -1, 1, 300 + c);
        tu_fill_uniform(along->data, B * H * L * S, 0, 1, 310 + c);
        tu_fill_uniform(rel->data, (2 * K + 1) * D, -1, 1, 320 + c);
        qkv_tensor *q = qkv_contiguous(ctx, qkv_narrow(ctx, qlong, 2, o, T));
        qkv_tensor *a = qkv_contiguous(ctx, qkv_narrow(ctx, along, 2, o, T));
        qkv_tensor *e_long = qkv_shaw_scores(ctx, qlong, rel, S);
        qkv_tensor *v_long = qkv_shaw_values(ctx, along, rel);
        qkv_tensor *e = qkv_shaw_scores_at(ctx, q, rel, S, o);
        qkv_tensor *v = qkv_shaw_values_at(ctx, a, rel, o);
        CHECK_OK(qkv_ctx_status(ctx));
        if (!qkv_ctx_status(ctx)) {
            const qkv_real *el = e_long->data, *vl = v_long->data, *es = e->data, *vs = v->data;
            for (int64_t n = 0; n < B * H; n++)
                for (int64_t i = 0; i < T; i++) {
                    for (int64_t j = 0; j < S; j++)
                        CHECK_NEAR(es[(n * T + i) * S + j], el[(n * L + o + i) * S + j], shaw_tol);
                    for (int64_t d = 0; d < D; d++)
                        CHECK_NEAR(vs[(n * T + i) * D + d], vl[(n * L + o + i) * D + d], shaw_tol);
                }
        }
        qkv_ctx_free(ctx);
    }
}

typedef struct {
    int64_t S, offset;
} shaw_at_args;

static qkv_tensor *scores_at_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    const shaw_at_args *a = user;
    return qkv_shaw_scores_at(ctx, in[0], in[1], a->S, a->offset);
}

static qkv_tensor *values_at_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    return qkv_shaw_values_at(ctx, in[0], in[1], ((const shaw_at_args *)user)->offset);
}

TEST(shaw_at_gradcheck) {
    TU_NEED_DOUBLE();
    for (size_t c = 0; c < sizeof offset_cases / sizeof *offset_cases; c++) {
        const int64_t *k = offset_cases[c];
        shaw_at_args args = {k[4], k[6]};
        qkv_tensor *qi[2] = {tu_rand(4, (int64_t[]){k[0], k[1], k[2], k[3]}, -1, 1, 330 + c),
                             tu_rand(2, (int64_t[]){2 * k[5] + 1, k[3]}, -1, 1, 340 + c)};
        qkv_tensor *ai[2] = {tu_rand(4, (int64_t[]){k[0], k[1], k[2], k[4]}, 0, 1, 350 + c),
                             tu_rand(2, (int64_t[]){2 * k[5] + 1, k[3]}, -1, 1, 360 + c)};
        for (int n = 0; n < 2; n++) {
            qkv_tensor_requires_grad(qi[n]);
            qkv_tensor_requires_grad(ai[n]);
        }
        tu_gradcheck("shaw_scores_at", scores_at_fn, qi, 2, &args, NULL);
        tu_gradcheck("shaw_values_at", values_at_fn, ai, 2, &args, NULL);
        for (int n = 0; n < 2; n++) {
            tu_free(qi[n]);
            tu_free(ai[n]);
        }
    }
}

TEST(shaw_at_fast_matches_reference_and_thread_counts) {
    /* (B, H, T, D, S, K, offset): over the parallel grain, and a decoding step */
    const int64_t cases[][7] = {
        {2, 4, 48, 16, 90, 8, 42}, {8, 4, 1, 16, 300, 16, 299}, {1, 2, 5, 3, 6, 0, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int64_t *k = cases[c];
        shaw_at_args args = {k[4], k[6]};
        qkv_tensor *qi[2] = {tu_rand(4, (int64_t[]){k[0], k[1], k[2], k[3]}, -1, 1, 370 + c),
                             tu_rand(2, (int64_t[]){2 * k[5] + 1, k[3]}, -1, 1, 380 + c)};
        qkv_tensor *ai[2] = {tu_rand(4, (int64_t[]){k[0], k[1], k[2], k[4]}, 0, 1, 390 + c),
                             tu_rand(2, (int64_t[]){2 * k[5] + 1, k[3]}, -1, 1, 400 + c)};
        for (int n = 0; n < 2; n++) {
            qkv_tensor_requires_grad(qi[n]);
            qkv_tensor_requires_grad(ai[n]);
        }
        const int64_t N = k[0] * k[1] * k[2], longest = N > k[4] ? N : k[4];
        CHECK(pe_check_kernels("shaw_scores_at", scores_at_fn, qi, 2, &args, longest) == 2);
        CHECK(pe_check_kernels("shaw_values_at", values_at_fn, ai, 2, &args, longest) == 2);
        for (int n = 0; n < 2; n++) {
            tu_free(qi[n]);
            tu_free(ai[n]);
        }
    }
}

TEST(shaw_at_rejects_a_negative_offset) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *q = tu_rand(2, (int64_t[]){2, 4}, -1, 1, 1);
    qkv_tensor *a = tu_rand(2, (int64_t[]){2, 3}, 0, 1, 2);
    qkv_tensor *rel = tu_rand(2, (int64_t[]){5, 4}, -1, 1, 3);
    PE_CHECK_FAILS(ctx, qkv_shaw_scores_at(ctx, q, rel, 3, -1), QKV_ERR_INVALID_ARG, "shaw_scores",
                   "query_offset = -1");
    PE_CHECK_FAILS(ctx, qkv_shaw_values_at(ctx, a, rel, -2), QKV_ERR_INVALID_ARG, "shaw_values",
                   "query_offset = -2");
    tu_free(q);
    tu_free(a);
    tu_free(rel);
    qkv_ctx_free(ctx);
}
