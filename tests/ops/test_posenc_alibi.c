/* test_posenc_alibi.c: ALiBi slopes against the paper's get_slopes worked by hand, the bias
 * closed form, its shift invariance, and bad inputs. */
#include "posenc_testutil.h"

static void check_slopes(int64_t H, const double *expect) {
    qkv_real m[16];
    CHECK_OK(qkv_alibi_slopes(H, m));
    for (int64_t h = 0; h < H; h++)
        CHECK_MSG(fabs(m[h] - expect[h]) <= 1e-7 * expect[h],
                  "H = %lld: slope %lld = %.10g, expected %.10g", (long long)H, (long long)h,
                  (double)m[h], expect[h]);
}

TEST(alibi_slopes_power_of_two_heads) {
    /* m_h = 2^(-8 (h+1) / H): H = 8 gives 1/2, 1/4, ..., 1/256, exactly */
    qkv_real m[8];
    CHECK_OK(qkv_alibi_slopes(8, m));
    for (int h = 0; h < 8; h++)
        CHECK(m[h] == (qkv_real)1 / (qkv_real)(2 << h));
    check_slopes(1, (double[]){1.0 / 256});
    check_slopes(2, (double[]){1.0 / 16, 1.0 / 256});
    check_slopes(4, (double[]){1.0 / 4, 1.0 / 16, 1.0 / 64, 1.0 / 256});
    /* H = 16: 2^(-1/2), 2^(-1), ..., 2^(-8) */
    double e16[16];
    for (int h = 0; h < 16; h++)
        e16[h] = pow(2.0, -0.5 * (h + 1));
    check_slopes(16, e16);
}

/* get_slopes(H) = get_slopes_power_of_2(n) + get_slopes(2n)[0::2][:H-n], n = 2^floor(log2 H). */
TEST(alibi_slopes_other_head_counts_follow_get_slopes) {
    /* H = 6: n = 4: 1/4, 1/16, 1/64, 1/256; slopes(8) = 1/2, 1/4, ..., 1/256, even entries 1/2, 1/8
     */
    qkv_real m6[6];
    CHECK_OK(qkv_alibi_slopes(6, m6));
    const qkv_real e6[6] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
    for (int h = 0; h < 6; h++)
        CHECK(m6[h] == e6[h]);
    /* H = 3: n = 2: 1/16, 1/256; slopes(4)[0] = 1/4 */
    check_slopes(3, (double[]){1.0 / 16, 1.0 / 256, 1.0 / 4});
    /* H = 12: n = 8: 1/2 .. 1/256; slopes(16)[0::2][:4] = 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 */
    double e12[12];
    for (int h = 0; h < 8; h++)
        e12[h] = pow(2.0, -(h + 1));
    for (int k = 0; k < 4; k++)
        e12[8 + k] = pow(2.0, -0.5 - k);
    check_slopes(12, e12);
}

TEST(alibi_bias_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    /* H = 2: slopes 1/16, 1/256; bias[h, i, j] = -m_h |i - j| */
    qkv_tensor *b = qkv_alibi_bias(ctx, 2, 3, 4);
    CHECK(b && b->ndim == 3 && b->shape[0] == 2 && b->shape[1] == 3 && b->shape[2] == 4);
    CHECK(!(b->flags & QKV_REQUIRES_GRAD));
    const double m[2] = {1.0 / 16, 1.0 / 256};
    const qkv_real *x = b->data;
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                CHECK(x[(h * 3 + i) * 4 + j] == (qkv_real)(-m[h] * abs(i - j)));
    /* query offset 3 (decoding the last 2 of 5 positions), H = 1 (slope 1/256):
     * row 0 is position 3: -m (3, 2, 1, 0, 1); row 1 is position 4: -m (4, 3, 2, 1, 0) */
    qkv_tensor *d = qkv_alibi_bias_at(ctx, 1, 2, 5, 3);
    CHECK(d);
    const double e[10] = {3, 2, 1, 0, 1, 4, 3, 2, 1, 0};
    for (int n = 0; n < 10; n++)
        CHECK(((qkv_real *)d->data)[n] == (qkv_real)(-e[n] / 256));
    qkv_ctx_free(ctx);
}

/* PROPERTY: the bias of (i, j) equals that of (i + s, j + s): constant along diagonals, and an
 * offset s query block sees key j + s as the unshifted one sees key j. */
TEST(alibi_bias_is_shift_invariant) {
    qkv_ctx *ctx = tu_ctx();
    const int64_t H = 5, T = 12;
    qkv_tensor *b = qkv_alibi_bias(ctx, H, T, T);
    CHECK(b);
    const qkv_real *x = b->data;
    for (int64_t h = 0; h < H; h++)
        for (int64_t s = 1; s < T; s++)
            for (int64_t i = 0; i + s < T; i++)
                for (int64_t j = 0; j + s < T; j++)
                    CHECK(x[(h * T + i + s) * T + j + s] == x[(h * T + i) * T + j]);
    const int64_t s = 4;
    qkv_tensor *o = qkv_alibi_bias_at(ctx, H, T, T + s, s);
    CHECK(o);
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < T; j++)
                CHECK(((qkv_real *)o->data)[(h * T + i) * (T + s) + j + s] ==
                      x[(h * T + i) * T + j]);
    qkv_ctx_free(ctx);
}

TEST(alibi_rejects_bad_inputs) {
    qkv_real m[4];
    qkv_clear_error();
    CHECK_ERR(qkv_alibi_slopes(0, m), QKV_ERR_INVALID_ARG, "alibi_slopes");
    CHECK_ERR(qkv_alibi_slopes(-3, m), QKV_ERR_INVALID_ARG, "H = -3");
    CHECK_ERR(qkv_alibi_slopes(4, NULL), QKV_ERR_INVALID_ARG, "NULL");
    qkv_ctx *ctx = tu_ctx();
    PE_CHECK_FAILS(ctx, qkv_alibi_bias(ctx, 0, 2, 2), QKV_ERR_INVALID_ARG, "alibi_bias", "H = 0");
    PE_CHECK_FAILS(ctx, qkv_alibi_bias(ctx, 2, -1, 2), QKV_ERR_INVALID_ARG, "alibi_bias", "T = -1");
    PE_CHECK_FAILS(ctx, qkv_alibi_bias(ctx, 2, 2, -5), QKV_ERR_INVALID_ARG, "alibi_bias", "S = -5");
    PE_CHECK_FAILS(ctx, qkv_alibi_bias_at(ctx, 2, 2, 2, -1), QKV_ERR_INVALID_ARG, "alibi_bias",
                   "query_offset = -1");
    qkv_ctx_free(ctx);
}
