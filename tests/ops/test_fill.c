/*
 * test_fill.c: qkv_full (a constant tensor) and the elementwise kernels that write without
 * reading a tensor input or reduce across rows: fill, broadcast_rows (a linear layer's bias rows)
 * and sum_rows (its bias gradient). Fast and reference kernels give the same bits; sum_rows adds
 * each column's rows in row order, checked against a direct sum; qkv_full refuses a bad shape.
 */
#include "core/internal.h"
#include "kernels/backend.h"
#include "testutil.h"

TEST(full_makes_a_constant) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *y = qkv_full(ctx, 3, (int64_t[]){2, 1, 5}, 0.25);
    CHECK_OK(qkv_ctx_status(ctx));
    if (y) {
        CHECK(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 1 && y->shape[2] == 5 && !(y->flags & QKV_REQUIRES_GRAD));
        for (int i = 0; i < 10; i++) CHECK(((qkv_real *)y->data)[i] == (qkv_real)0.25);
    }
    qkv_tensor *s = qkv_full(ctx, 0, NULL, -3); /* a scalar */
    CHECK(s && ((qkv_real *)s->data)[0] == -3);
    CHECK(qkv_full(ctx, 2, NULL, 1) == NULL);
    CHECK_ERR(qkv_ctx_status(ctx), QKV_ERR_INVALID_ARG, "full: NULL shape for 2 dims");
    qkv_ctx_reset(ctx);
    CHECK(qkv_full(ctx, 1, (int64_t[]){-1}, 1) == NULL);
    CHECK_ERR(qkv_ctx_status(ctx), QKV_ERR_SHAPE, "negative dim -1");
    qkv_ctx_free(ctx);
}

TEST(fill_and_bias_kernels_fast_equals_reference) {
    enum { N = 300, O = 133 }; /* more than one column block of the fast sum_rows, and a rest */
    static qkv_real dy[N * O], b[O], y[2][N * O], db[2][O], f[2][N * O + 7];
    tu_fill_uniform(dy, N * O, -1, 1, 21);
    tu_fill_uniform(b, O, -1, 1, 22);
    tu_fill_uniform(db[0], O, -1, 1, 23);
    memcpy(db[1], db[0], sizeof db[0]);
    const qkv_elementwise_kernels *k[2] = {&qkv_elementwise_ref, &qkv_elementwise_cpu};
    for (int i = 0; i < 2; i++) {
        k[i]->broadcast_rows(N, O, b, y[i]);
        k[i]->sum_rows(N, O, dy, db[i]);
        k[i]->fill(N * O + 7, (qkv_real)-0.5, f[i]);
    }
    CHECK(!memcmp(y[0], y[1], sizeof y[0]) && y[0][(N - 1) * O + 5] == b[5]);
    CHECK(!memcmp(db[0], db[1], sizeof db[0]));
    CHECK(!memcmp(f[0], f[1], sizeof f[0]) && f[1][N * O + 6] == (qkv_real)-0.5);
    /* a column's sum in row order, as the reference writes it */
    qkv_real want = 0;
    tu_fill_uniform(&want, 1, -1, 1, 23); /* db[0][0] before the sum */
    for (int r = 0; r < N; r++) want += dy[r * O];
    CHECK(db[1][0] == want);
}
