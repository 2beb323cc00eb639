/* test_posenc_t5.c: T5 relative buckets against a table worked by hand from
 * _relative_position_bucket, the bias gather, its shift invariance, the table gradient, fast vs
 * reference kernels, and bad inputs. */
#include "posenc_testutil.h"

/*
 * Expected buckets for (num_buckets 32, max_distance 128), worked by hand:
 * bidirectional: n = 16, max_exact = 8, offset 16 for rp > 0, r = |rp|,
 *   r >= 8: 8 + trunc(log(r / 8) / log(16) * 8) = 8 + trunc(2 log2(r / 8)), capped at 15:
 *   r = 8: 8 + 0 = 8; 20: 2 log2 2.5 = 2.64 -> 10; 127: 2 log2 15.875 = 7.98 -> 15;
 *   128: 8 + 8 = 16 -> 15; 500 -> 15.
 * unidirectional: n = 32, max_exact = 16, r = max(-rp, 0),
 *   r >= 16: 16 + trunc(log(r / 16) / log(8) * 16) = 16 + trunc(16/3 log2(r / 16)), capped at 31:
 *   r = 20: 16/3 log2 1.25 = 1.72 -> 17; 127: 16/3 log2 7.9375 = 15.94 -> 31; 128: 32 -> 31.
 */
TEST(t5_bucket_table_worked_by_hand) {
    const struct {
        int64_t rp;
        int32_t bi, uni;
    } t[] = {
        {0, 0, 0},          {1, 17, 0},          {-1, 1, 1},     {7, 23, 0},    {-7, 7, 7},
        {8, 24, 0},         {-8, 8, 8},          {20, 26, 0},    {-20, 10, 17}, {127, 31, 0},
        {-127, 15, 31},     {128, 31, 0},        {-128, 15, 31}, {500, 31, 0},  {-500, 15, 31},
        {INT64_MAX, 31, 0}, {INT64_MIN, 15, 31},
    };
    for (size_t k = 0; k < sizeof t / sizeof *t; k++) {
        CHECK_MSG(qkv_t5_bucket(t[k].rp, true, 32, 128) == t[k].bi,
                  "bidirectional rp %lld: %d, expected %d", (long long)t[k].rp,
                  qkv_t5_bucket(t[k].rp, true, 32, 128), t[k].bi);
        CHECK_MSG(qkv_t5_bucket(t[k].rp, false, 32, 128) == t[k].uni,
                  "unidirectional rp %lld: %d, expected %d", (long long)t[k].rp,
                  qkv_t5_bucket(t[k].rp, false, 32, 128), t[k].uni);
    }
}

/* Distances where the logarithmic formula is an exact integer: bidirectional r = 16, 32, 64 give
 * 2 log2(r / 8) = 2, 4, 6 exactly (log(2^k) / log(16) is exact in T5's float32 too, since the
 * float32 logs of 2^k are exact multiples of the float32 ln 2). A computation that lost the last
 * bit would truncate 5.9999 to 5. Unidirectional: 16/3 log2(r/16) is not an integer there. */
TEST(t5_bucket_exact_log_boundaries) {
    CHECK(qkv_t5_bucket(-16, true, 32, 128) == 10);
    CHECK(qkv_t5_bucket(-32, true, 32, 128) == 12);
    CHECK(qkv_t5_bucket(-64, true, 32, 128) == 14);
    CHECK(qkv_t5_bucket(16, true, 32, 128) == 26);
    CHECK(qkv_t5_bucket(32, true, 32, 128) == 28);
    CHECK(qkv_t5_bucket(64, true, 32, 128) == 30);
    CHECK(qkv_t5_bucket(-16, false, 32, 128) == 16); /* 16 + 0 */
    CHECK(qkv_t5_bucket(-32, false, 32, 128) == 21); /* 16 + trunc(5.33) */
    CHECK(qkv_t5_bucket(-64, false, 32, 128) == 26); /* 16 + trunc(10.67) */
    /* a small configuration: bidirectional 8 buckets, max_distance 16: n = 4, max_exact = 2,
     * r >= 2: 2 + trunc(log(r / 2) / log(8) * 2) */
    CHECK(qkv_t5_bucket(-1, true, 8, 16) == 1);
    CHECK(qkv_t5_bucket(2, true, 8, 16) == 6);  /* 4 + 2 + 0 */
    CHECK(qkv_t5_bucket(-3, true, 8, 16) == 2); /* 2 log 1.5 / log 8 = 0.39 */
    CHECK(qkv_t5_bucket(-8, true, 8, 16) == 3); /* 2 log 4 / log 8 = 1.33 */
    CHECK(qkv_t5_bucket(16, true, 8, 16) == 7); /* 2 + 2 = 4, capped at n - 1 = 3, plus 4 */
}

TEST(t5_bucket_rejects_unbucketable_configurations) {
    qkv_clear_error();
    CHECK(qkv_t5_bucket(5, true, 2, 128) == -1); /* n = 1, max_exact = 0 */
    CHECK(strstr(qkv_last_error(), "t5_bucket") && strstr(qkv_last_error(), "max_exact = 0"));
    CHECK(qkv_t5_bucket(5, false, 32, 16) == -1); /* max_distance 16 <= max_exact 16 */
    CHECK(qkv_t5_bucket(5, false, -4, 128) == -1);
}

static qkv_tensor *table_100b_plus_h(int64_t nb, int64_t H) {
    qkv_tensor *t = tu_tensor(QKV_REAL, 2, (int64_t[]){nb, H});
    for (int64_t b = 0; b < nb; b++)
        for (int64_t h = 0; h < H; h++)
            ((qkv_real *)t->data)[b * H + h] = (qkv_real)(100 * b + h);
    return t;
}

TEST(t5_bias_gathers_the_table_by_bucket) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *table = table_100b_plus_h(32, 3);
    /* |j - i| < 8: exact buckets. bidirectional: j > i -> 16 + (j - i), else i - j */
    qkv_tensor *b = qkv_t5_bias(ctx, table, 3, 5, true, 128);
    CHECK(b && b->ndim == 3 && b->shape[0] == 3 && b->shape[1] == 3 && b->shape[2] == 5);
    for (int h = 0; h < 3; h++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++)
                CHECK(((qkv_real *)b->data)[(h * 3 + i) * 5 + j] ==
                      100 * (j > i ? 16 + j - i : i - j) + h);
    /* unidirectional: bucket max(i - j, 0) */
    qkv_tensor *u = qkv_t5_bias(ctx, table, 4, 2, false, 128);
    CHECK(u);
    for (int h = 0; h < 3; h++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++)
                CHECK(((qkv_real *)u->data)[(h * 4 + i) * 2 + j] == 100 * (i > j ? i - j : 0) + h);
    /* query offset 20 (decoding 2 of 22 positions): query i is at 20 + i; unidirectional buckets
     * of j - 20 - i from the hand table: rp = -20 -> 17, rp = -8 -> 8, rp = 0 -> 0 */
    qkv_tensor *d = qkv_t5_bias_at(ctx, table, 2, 22, 20, false, 128);
    CHECK(d);
    const qkv_real *x = d->data;
    CHECK(x[0 * 22 + 0] == 1700 && x[0 * 22 + 12] == 800 && x[0 * 22 + 20] == 0 &&
          x[1 * 22 + 21] == 0);
    CHECK(x[1 * 22 + 1] == 1700 && x[(2 * 2 + 1) * 22 + 13] == 802);
    CHECK(!(d->flags & QKV_REQUIRES_GRAD) && qkv_ctx_status(ctx) == QKV_OK);
    tu_free(table);
    qkv_ctx_free(ctx);
}

/* PROPERTY: bias(i, j) = bias(i + s, j + s) (constant diagonals, logarithmic buckets included),
 * and with a query offset s, key j + s sees what key j saw without. */
TEST(t5_bias_is_shift_invariant) {
    qkv_ctx *ctx = tu_ctx();
    const int64_t T = 12, H = 2, s = 5;
    qkv_tensor *table = tu_rand(2, (int64_t[]){8, H}, -1, 1, 80);
    for (int bidir = 0; bidir < 2; bidir++) {
        /* 8 buckets, max_distance 5: the logarithmic and the clipped range both occur within 12 */
        const qkv_real *x = qkv_t5_bias(ctx, table, T, T, bidir, 5)->data;
        for (int64_t h = 0; h < H; h++)
            for (int64_t d = 1; d < T; d++)
                for (int64_t i = 0; i + d < T; i++)
                    for (int64_t j = 0; j + d < T; j++)
                        CHECK(x[(h * T + i + d) * T + j + d] == x[(h * T + i) * T + j]);
        const qkv_real *o = qkv_t5_bias_at(ctx, table, T, T + s, s, bidir, 5)->data;
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < T; i++)
                for (int64_t j = 0; j < T; j++)
                    CHECK(o[(h * T + i) * (T + s) + j + s] == x[(h * T + i) * T + j]);
    }
    CHECK(qkv_ctx_status(ctx) == QKV_OK);
    tu_free(table);
    qkv_ctx_free(ctx);
}

typedef struct {
    int64_t T, S, offset;
    bool bidirectional;
    int32_t max_distance;
} t5_args;

static qkv_tensor *t5_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    const t5_args *a = user;
    return qkv_t5_bias_at(ctx, in[0], a->T, a->S, a->offset, a->bidirectional, a->max_distance);
}

static const struct {
    int64_t nb, H;
    t5_args a;
} t5_cases[] = {
    {4, 1, {1, 1, 0, true, 3}},    /* T = S = 1, minimal bidirectional table */
    {8, 2, {3, 5, 0, true, 5}},    /* T != S */
    {8, 3, {6, 2, 0, false, 6}},   /* more queries than keys, causal buckets */
    {6, 2, {4, 7, 3, false, 9}},   /* query offset */
    {32, 2, {5, 40, 0, true, 16}}, /* many keys share the clipped buckets */
};

TEST(t5_bias_gradcheck) {
    TU_NEED_DOUBLE();
    for (size_t c = 0; c < sizeof t5_cases / sizeof *t5_cases; c++) {
        qkv_tensor *in[1] = {tu_rand(2, (int64_t[]){t5_cases[c].nb, t5_cases[c].H}, -1, 1, 90 + c)};
        qkv_tensor_requires_grad(in[0]);
        tu_gradcheck("t5_bias", t5_fn, in, 1, (void *)&t5_cases[c].a, NULL);
        tu_free(in[0]);
    }
}

TEST(t5_bias_fast_matches_reference_and_thread_counts) {
    const struct {
        int64_t nb, H;
        t5_args a;
    } cases[] = {
        {32, 4, {64, 160, 0, true, 128}},    /* H T S over the parallel grain */
        {32, 3, {16, 200, 184, false, 128}}, /* decoding offset, far positions */
        {8, 2, {9, 4, 0, true, 5}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        qkv_tensor *in[1] = {tu_rand(2, (int64_t[]){cases[c].nb, cases[c].H}, -1, 1, 95 + c)};
        qkv_tensor_requires_grad(in[0]);
        CHECK(pe_check_kernels("t5_bias", t5_fn, in, 1, (void *)&cases[c].a, 1) == 1);
        tu_free(in[0]);
    }
}

TEST(t5_bias_rejects_bad_inputs) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *ok = tu_rand(2, (int64_t[]){32, 4}, -1, 1, 1);
    qkv_tensor *ids = tu_ids(2, (int64_t[]){32, 4}, 0, 3, 1);
    qkv_tensor *flat = tu_rand(1, (int64_t[]){32}, -1, 1, 1);
    qkv_tensor *no_heads = tu_rand(2, (int64_t[]){32, 0}, -1, 1, 1);
    qkv_tensor *tiny = tu_rand(2, (int64_t[]){3, 4}, -1, 1, 1);
    PE_CHECK_FAILS(ctx, qkv_t5_bias(ctx, ids, 2, 2, true, 128), QKV_ERR_SHAPE, "t5_bias", "I32");
    /* the API reads H from the table: a table that is not (num_buckets, H) is the detectable
     * form of a wrong head count */
    PE_CHECK_FAILS(ctx, qkv_t5_bias(ctx, flat, 2, 2, true, 128), QKV_ERR_SHAPE, "t5_bias", "(32)");
    PE_CHECK_FAILS(ctx, qkv_t5_bias(ctx, no_heads, 2, 2, true, 128), QKV_ERR_SHAPE, "t5_bias",
                   "(32, 0)");
    PE_CHECK_FAILS(ctx, qkv_t5_bias(ctx, tiny, 2, 2, true, 128), QKV_ERR_INVALID_ARG, "t5_bias",
                   "max_exact = 0");
    PE_CHECK_FAILS(ctx, qkv_t5_bias(ctx, ok, 2, 2, false, 16), QKV_ERR_INVALID_ARG, "t5_bias",
                   "max_distance (16)");
    PE_CHECK_FAILS(ctx, qkv_t5_bias(ctx, ok, -1, 2, true, 128), QKV_ERR_INVALID_ARG, "t5_bias",
                   "T = -1");
    PE_CHECK_FAILS(ctx, qkv_t5_bias(ctx, ok, 2, -2, true, 128), QKV_ERR_INVALID_ARG, "t5_bias",
                   "S = -2");
    PE_CHECK_FAILS(ctx, qkv_t5_bias_at(ctx, ok, 2, 2, -7, true, 128), QKV_ERR_INVALID_ARG,
                   "t5_bias", "query_offset = -7");
    PE_CHECK_FAILS(ctx, qkv_t5_bias(ctx, NULL, 2, 2, true, 128), QKV_ERR_INVALID_ARG, "t5_bias",
                   "NULL");
    tu_free(ok);
    tu_free(ids);
    tu_free(flat);
    tu_free(no_heads);
    tu_free(tiny);
    qkv_ctx_free(ctx);
}
