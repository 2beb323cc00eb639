/*
 * test_cross_rows.c: cross-attention caches shared by rows (qkv__mha_step_rows, the map behind
 * qkv_layer_cache.cross_rows that lets the beams of a sentence read one projected memory).
 *
 * Property: attending rows over a cache of one row per source through a map gives exactly the
 * bits of attending them over per-row copies of those cache rows (the same numbers in the same
 * order reach the same kernel), with a padded source key, for the run's kernel set (the fast
 * in-place kernel reads through the map; the reference path gathers the rows first). A map entry
 * outside the cache and a map on self-attention are refused.
 */
#include "decode_testutil.h"

#include "core/internal.h"
#include "nn/nn_internal.h"

TEST(mha_step_shared_cross_rows_equal_per_row_copies) {
    enum { C = 16, H = 2, D = C / H, S = 5, R = 2, N = 4 };
    const int32_t map[N] = {1, 0, 0, 1};
    qkv_mha_config cfg = qkv_mha_default_config(C, H);
    qkv_params *p;
    qkv_mha m;
    dt_mha(&m, &p, &cfg, "attn.", 3);
    qkv_tensor *mem = tu_rand(3, (int64_t[]){R, S, C}, -1, 1, 4); /* one row per source */
    qkv_tensor *x = tu_rand(3, (int64_t[]){N, 1, C}, -1, 1, 5);
    qkv_tensor *ck = tu_tensor(QKV_REAL, 4, (int64_t[]){R, H, S, D}),
               *cv = tu_tensor(QKV_REAL, 4, (int64_t[]){R, H, S, D});
    qkv_tensor *ck_rows = tu_tensor(QKV_REAL, 4, (int64_t[]){N, H, S, D}),
               *cv_rows = tu_tensor(QKV_REAL, 4, (int64_t[]){N, H, S, D});
    qkv_tensor *pad = tu_tensor(QKV_I32, 2, (int64_t[]){N, S}); /* source 1's key 3 is padding */
    for (int n = 0; n < N; n++)
        for (int j = 0; j < S; j++)
            ((int32_t *)pad->data)[n * S + j] = map[n] == 1 && j == 3;
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    CHECK_OK(qkv_mha_cache_memory(ctx, &m, mem, ck, cv));
    for (int n = 0; n < N; n++) { /* the per-row copies of the cache rows */
        const size_t row = (size_t)(H * S * D);
        memcpy((qkv_real *)ck_rows->data + n * row, (qkv_real *)ck->data + map[n] * row,
               sizeof(qkv_real) * row);
        memcpy((qkv_real *)cv_rows->data + n * row, (qkv_real *)cv->data + map[n] * row,
               sizeof(qkv_real) * row);
    }
    qkv_mask mask = qkv_mask_none();
    mask.key_padding = pad;
    qkv_tensor *shared = qkv__mha_step_rows(ctx, &m, x, ck, cv, map, NULL, 0, false, &mask, NULL);
    qkv_tensor *copies = qkv_mha_step(ctx, &m, x, ck_rows, cv_rows, 0, false, &mask, NULL);
    CHECK_OK(qkv_ctx_status(ctx));
    CHECK(shared && copies &&
          memcmp(shared->data, copies->data, sizeof(qkv_real) * (size_t)(N * C)) == 0);
    /* the two rows of a source agree with each other, the two sources differ */
    if (shared) {
        const qkv_real *y = shared->data;
        qkv_tensor *same = tu_tensor(QKV_REAL, 3, (int64_t[]){N, 1, C});
        for (int n = 0; n < N; n++) /* every row the same query: rows then differ by source only */
            memcpy((qkv_real *)same->data + n * C, x->data, sizeof(qkv_real) * C);
        y = qkv__data(qkv__mha_step_rows(ctx, &m, same, ck, cv, map, NULL, 0, false, &mask, NULL));
        CHECK(y && memcmp(y + 1 * C, y + 2 * C, sizeof(qkv_real) * C) == 0);
        CHECK(y && memcmp(y + 0 * C, y + 3 * C, sizeof(qkv_real) * C) == 0);
        CHECK(y && memcmp(y + 0 * C, y + 1 * C, sizeof(qkv_real) * C) != 0);
        tu_free(same);
    }
    const int32_t bad_map[N] = {0, 1, 2, 0};
    TU_EXPECT_FAIL(ctx, qkv__mha_step_rows(ctx, &m, x, ck, cv, bad_map, NULL, 0, false, NULL, NULL),
                   QKV_ERR_SHAPE, "mha_step", "cache row 2");
    TU_EXPECT_FAIL(ctx, qkv__mha_step_rows(ctx, &m, x, ck, cv, map, NULL, 0, true, NULL, NULL),
                   QKV_ERR_INVALID_ARG, "mha_step", "cross-attention only");
    qkv_ctx_free(ctx);
    qkv_tensor *all[] = {mem, x, ck, cv, ck_rows, cv_rows, pad};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tu_free(all[i]);
    qkv_params_free(p);
}
