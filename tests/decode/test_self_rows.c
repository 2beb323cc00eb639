/*
 * test_self_rows.c: self-attention keys read through a table of cache rows (qkv__mha_step_rows
 * with self_rows, the table behind qkv_layer_cache.self_rows that lets the decoding session
 * reorder hypotheses without moving their keys and values).
 *
 * Property: a step whose rows read each earlier key position from the cache row the table names
 * gives exactly the bits of the same step over per-row copies of those keys (the same numbers in
 * the same order reach the same kernel), with a padded key, for a single new token (the fast
 * in-place kernel reads through the table; the reference kernels gather first) and for two (the
 * general path gathers); the new keys land in the rows' own cache rows. A table entry outside the
 * cache, a new position not mapped to its own row, caches of fewer rows than the step has, and a
 * table on cross-attention are refused.
 */
#include "decode_testutil.h"

#include "core/internal.h"
#include "nn/nn_internal.h"

enum { C = 16, H = 2, D = C / H, L = 7, R = 4, N = 3, T0 = 4 };

/* Row n's position j, head h of a (rows, H, L, D) cache. */
static qkv_real *at(qkv_tensor *cache, int64_t n, int64_t h, int64_t j) {
    return (qkv_real *)cache->data + ((n * H + h) * L + j) * D;
}

static void step_through_table_equals_copies(int T) {
    int32_t table[N * L]; /* earlier positions from anywhere in the cache; new ones: the row */
    const int32_t prefix[N][T0] = {{2, 2, 1, 0}, {0, 0, 0, 0}, {3, 1, 3, 2}};
    for (int n = 0; n < N; n++)
        for (int j = 0; j < L; j++) table[n * L + j] = j < T0 ? prefix[n][j] : n;
    qkv_mha_config cfg = qkv_mha_default_config(C, H);
    qkv_params *p;
    qkv_mha m;
    dt_mha(&m, &p, &cfg, "attn.", 7);
    qkv_tensor *ck = tu_rand(4, (int64_t[]){R, H, L, D}, -1, 1, 8),
               *cv = tu_rand(4, (int64_t[]){R, H, L, D}, -1, 1, 9);
    qkv_tensor *ck_rows = tu_tensor(QKV_REAL, 4, (int64_t[]){N, H, L, D}),
               *cv_rows = tu_tensor(QKV_REAL, 4, (int64_t[]){N, H, L, D});
    for (int n = 0; n < N; n++) /* the per-row copies the table stands for */
        for (int h = 0; h < H; h++)
            for (int j = 0; j < T0; j++) {
                memcpy(at(ck_rows, n, h, j), at(ck, table[n * L + j], h, j), sizeof(qkv_real) * D);
                memcpy(at(cv_rows, n, h, j), at(cv, table[n * L + j], h, j), sizeof(qkv_real) * D);
            }
    qkv_tensor *x = tu_rand(3, (int64_t[]){N, T, C}, -1, 1, 10);
    qkv_tensor *pad = tu_tensor(QKV_I32, 2, (int64_t[]){N, T0 + T}); /* row 2's key 1 is padding */
    for (int n = 0; n < N; n++)
        for (int j = 0; j < T0 + T; j++) ((int32_t *)pad->data)[n * (T0 + T) + j] = n == 2 && j == 1;
    qkv_mask mask = qkv_mask_none();
    mask.key_padding = pad;
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *read = qkv__mha_step_rows(ctx, &m, x, ck, cv, NULL, table, T0, true, &mask, NULL);
    qkv_tensor *copies = qkv_mha_step(ctx, &m, x, ck_rows, cv_rows, T0, true, &mask, NULL);
    CHECK_OK(qkv_ctx_status(ctx));
    CHECK_MSG(read && copies &&
                  memcmp(read->data, copies->data, sizeof(qkv_real) * (size_t)(N * T * C)) == 0,
              "T = %d: the step through the table differs from the step over copies", T);
    int64_t moved = 0; /* the new keys and values: in the rows' own cache rows */
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int j = T0; j < T0 + T; j++) {
                moved += memcmp(at(ck, n, h, j), at(ck_rows, n, h, j), sizeof(qkv_real) * D) != 0;
                moved += memcmp(at(cv, n, h, j), at(cv_rows, n, h, j), sizeof(qkv_real) * D) != 0;
            }
    CHECK_MSG(moved == 0, "T = %d: %lld new key / value blocks are not in their rows", T,
              (long long)moved);

    int32_t bad[N * L];
    memcpy(bad, table, sizeof bad);
    bad[1 * L + 2] = R; /* not a row of the cache */
    TU_EXPECT_FAIL(ctx, qkv__mha_step_rows(ctx, &m, x, ck, cv, NULL, bad, T0, true, NULL, NULL),
                   QKV_ERR_INVALID_ARG, "mha_step", "outside 0 .. 3");
    memcpy(bad, table, sizeof bad);
    bad[2 * L + T0 + T - 1] = 0; /* the last new position read from another row */
    TU_EXPECT_FAIL(ctx, qkv__mha_step_rows(ctx, &m, x, ck, cv, NULL, bad, T0, true, NULL, NULL),
                   QKV_ERR_INVALID_ARG, "mha_step", "its own row");
    qkv_tensor *few = tu_rand(4, (int64_t[]){N - 1, H, L, D}, -1, 1, 11); /* R < N rows */
    TU_EXPECT_FAIL(ctx, qkv__mha_step_rows(ctx, &m, x, few, few, NULL, table, T0, true, NULL, NULL),
                   QKV_ERR_SHAPE, "mha_step", "caches of 2 rows for 3 rows");
    tu_free(few);
    TU_EXPECT_FAIL(ctx, qkv__mha_step_rows(ctx, &m, x, ck, cv, NULL, table, 0, false, NULL, NULL),
                   QKV_ERR_INVALID_ARG, "mha_step", "self-attention only");
    qkv_ctx_free(ctx);
    qkv_tensor *all[] = {ck, cv, ck_rows, cv_rows, x, pad};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tu_free(all[i]);
    qkv_params_free(p);
}

TEST(mha_step_self_rows_one_token_equals_per_row_copies) {
    step_through_table_equals_copies(1);
}

TEST(mha_step_self_rows_two_tokens_equal_per_row_copies) {
    step_through_table_equals_copies(2);
}
