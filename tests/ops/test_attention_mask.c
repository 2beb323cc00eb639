/* test_attention_mask.c: the mask rule (qkv_mask_allows) against hand-written cases, and the
 * fast kernels' band-plus-lookup form (qkv__mask_row) against qkv_mask_allows. */
#include "attn_testutil.h"
#include "kernels/attention.h"

TEST(attn_mask_none_allows_everything) {
    qkv_mask m = qkv_mask_none();
    CHECK(!m.causal && m.window_left < 0 && m.window_right < 0 && !m.key_padding && !m.allowed);
    for (int64_t i = 0; i < 6; i++)
        for (int64_t j = 0; j < 9; j++) {
            CHECK(qkv_mask_allows(&m, 0, i, j));
            CHECK(qkv_mask_allows(NULL, 1, i, j));
        }
}

TEST(attn_mask_rules_closed_form) {
    qkv_mask m = qkv_mask_none();
    m.causal = true;
    CHECK(qkv_mask_allows(&m, 0, 0, 0) && !qkv_mask_allows(&m, 0, 0, 1));
    CHECK(qkv_mask_allows(&m, 0, 3, 0) && qkv_mask_allows(&m, 0, 3, 3) &&
          !qkv_mask_allows(&m, 0, 3, 4));
    m = qkv_mask_none();
    m.window_left = 2;
    m.window_right = 1; /* row 5 sees keys 3, 4, 5, 6 */
    for (int64_t j = 0; j < 10; j++)
        CHECK(qkv_mask_allows(&m, 0, 5, j) == (j >= 3 && j <= 6));
    m.window_left = -1; /* unlimited to the left */
    for (int64_t j = 0; j < 10; j++)
        CHECK(qkv_mask_allows(&m, 0, 5, j) == (j <= 6));
    /* a zero-initialised struct is a window of width 0 on both sides: the diagonal only */
    qkv_mask z;
    memset(&z, 0, sizeof z);
    for (int64_t j = 0; j < 5; j++)
        CHECK(qkv_mask_allows(&z, 0, 2, j) == (j == 2));

    qkv_tensor *pad = tu_tensor(QKV_I32, 2, (int64_t[]){2, 3}); /* (B, S) */
    ((int32_t *)pad->data)[1] = 1;                              /* b 0: key 1 padded */
    ((int32_t *)pad->data)[3 + 2] = -1;                         /* b 1: key 2 padded */
    m = qkv_mask_none();
    m.key_padding = pad;
    CHECK(qkv_mask_allows(&m, 0, 4, 0) && !qkv_mask_allows(&m, 0, 4, 1) &&
          qkv_mask_allows(&m, 0, 4, 2));
    CHECK(qkv_mask_allows(&m, 1, 0, 1) && !qkv_mask_allows(&m, 1, 0, 2));

    qkv_tensor *al = tu_tensor(QKV_I32, 3, (int64_t[]){2, 2, 3}); /* (B, T, S) */
    ((int32_t *)al->data)[0 * 6 + 1 * 3 + 2] = 1;                 /* b 0, i 1, j 2 */
    ((int32_t *)al->data)[1 * 6 + 0 * 3 + 0] = 5;                 /* b 1, i 0, j 0 */
    m = qkv_mask_none();
    m.allowed = al;
    for (int64_t b = 0; b < 2; b++)
        for (int64_t i = 0; i < 2; i++)
            for (int64_t j = 0; j < 3; j++)
                CHECK(qkv_mask_allows(&m, b, i, j) ==
                      ((b == 0 && i == 1 && j == 2) || (b == 1 && i == 0 && j == 0)));
    /* every rule at once: an AND */
    m.key_padding = pad;
    m.causal = true;
    CHECK(!qkv_mask_allows(&m, 0, 1, 2)); /* allowed, not padded, but j > i */
    CHECK(qkv_mask_allows(&m, 1, 0, 0));
    tu_free(pad);
    tu_free(al);
}

TEST(attn_mask_reads_strided_tensors) {
    qkv_ctx *ctx = tu_ctx();
    /* allowed^T stored as (S, T) and viewed as (T, S) */
    const int64_t T = 3, S = 4;
    qkv_tensor *st = qkv_tensor_zeros(ctx, QKV_I32, 2, (int64_t[]){S, T});
    int32_t *p = st->data;
    p[2 * T + 1] = 1; /* (j 2, i 1) */
    qkv_tensor *view = qkv_permute(ctx, st, (const int[]){1, 0});
    CHECK(view && !qkv_tensor_is_contiguous(view));
    qkv_mask m = qkv_mask_none();
    m.allowed = view;
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < S; j++) {
            CHECK(qkv_mask_allows(&m, 0, i, j) == (i == 1 && j == 2));
            qkv_mask_row r = qkv__mask_row(&m, 0, i, S);
            CHECK((j >= r.lo && j < r.hi && qkv__mask_row_key(&r, j)) == (i == 1 && j == 2));
        }
    qkv_ctx_free(ctx);
}

/* The fast kernels' row form equals the rule for every mask of the catalogue, plus random
 * windows, on T < S, T == S and T > S. */
TEST(attn_mask_row_form_matches_rule) {
    const int64_t sizes[][3] = {{2, 7, 5}, {3, 4, 9}, {2, 6, 6}, {1, 1, 1}};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        const int64_t B = sizes[s][0], T = sizes[s][1], S = sizes[s][2];
        for (int kind = 0; kind < AT_MASK_KINDS + 12; kind++) {
            at_mask am =
                at_mask_make(kind < AT_MASK_KINDS ? kind : 9, B, T, S, 100 + (uint64_t)kind);
            if (kind >= AT_MASK_KINDS) { /* random windows over a combined mask */
                am.m.causal = kind % 2;
                am.m.window_left = (int32_t)(kind % 4) - 1;
                am.m.window_right = (int32_t)((kind / 4) % 3) - 1;
            }
            const qkv_mask *m = at_mask_ptr(&am);
            for (int64_t b = 0; b < B; b++)
                for (int64_t i = 0; i < T; i++) {
                    qkv_mask_row r = qkv__mask_row(m, b, i, S);
                    CHECK(0 <= r.lo && r.lo <= r.hi && r.hi <= S);
                    for (int64_t j = 0; j < S; j++)
                        CHECK_MSG((j >= r.lo && j < r.hi && qkv__mask_row_key(&r, j)) ==
                                      qkv_mask_allows(m, b, i, j),
                                  "%s (kind %d): b %lld i %lld j %lld", am.name, kind, (long long)b,
                                  (long long)i, (long long)j);
                }
            at_mask_free(&am);
        }
    }
}
