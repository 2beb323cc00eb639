/* test_attention_additive.c: qkv_additive_scores (fused Bahdanau scores): closed form, gradient
 * checks on odd shapes (with zero upstream gradients on masked-like entries), reference vs fast
 * kernels (split and unsplit work units), bad input. */
#include "attn_testutil.h"

TEST(attn_additive_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    /* B 1, H 2, T 1, S 2, A 2. Head 0: v = [1, 2], qp = [0.5, -0.25], kp = [[0.25, 1], [0, 0]]
     * e_00 = tanh(0.75) + 2 tanh(0.75),  e_01 = tanh(0.5) + 2 tanh(-0.25)
     * Head 1: v = [-1, 0], qp = [2, 3], kp = [[-2, 9], [1, 1]] -> [-tanh(0), -tanh(3)] */
    qkv_tensor *qp =
        qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 2, 1, 2}, (qkv_real[]){0.5, -0.25, 2, 3});
    qkv_tensor *kp = qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){1, 2, 2, 2},
                                     (qkv_real[]){0.25, 1, 0, 0, -2, 9, 1, 1});
    qkv_tensor *v = qkv_tensor_from(ctx, QKV_REAL, 2, (int64_t[]){2, 2}, (qkv_real[]){1, 2, -1, 0});
    qkv_tensor *e = qkv_additive_scores(ctx, qp, kp, v);
    CHECK(e && e->ndim == 4 && e->shape[0] == 1 && e->shape[1] == 2 && e->shape[2] == 1 &&
          e->shape[3] == 2);
    const double want[4] = {3 * tanh(0.75), tanh(0.5) + 2 * tanh(-0.25), 0, -tanh(3.0)};
    for (int n = 0; e && n < 4; n++)
        CHECK_NEAR(((qkv_real *)e->data)[n], want[n], 1e-6);
    qkv_ctx_free(ctx);
}

static qkv_tensor *additive_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    const int *heads = user;
    qkv_tensor *qp = in[0], *kp = in[1];
    if (heads && *heads) { /* (B, T, H*A) projections split into strided head views */
        qp = qkv_split_heads(ctx, qp, *heads);
        kp = qkv_split_heads(ctx, kp, *heads);
    }
    return qkv_additive_scores(ctx, qp, kp, in[2]);
}

/* then softmax over a causal mask: the upstream gradient is zero on masked entries */
static qkv_tensor *additive_causal_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    qkv_mask m = qkv_mask_none();
    m.causal = true;
    return qkv_attn_normalize(ctx, additive_fn(ctx, in, user), QKV_NORM_SOFTMAX, &m);
}

TEST(attn_additive_gradcheck) {
    TU_NEED_DOUBLE();
    /* (B, H, T, S, A): all ones, T = 1, S = 1, T != S, A = 5 */
    const int64_t shapes[][5] = {
        {1, 1, 1, 1, 1}, {2, 3, 1, 4, 5}, {1, 2, 3, 1, 2}, {2, 2, 4, 3, 5}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t *sh = shapes[s];
        qkv_tensor *in[3] = {tu_rand(4, (int64_t[]){sh[0], sh[1], sh[2], sh[4]}, -1.5, 1.5, 1 + s),
                             tu_rand(4, (int64_t[]){sh[0], sh[1], sh[3], sh[4]}, -1.5, 1.5, 11 + s),
                             tu_rand(2, (int64_t[]){sh[1], sh[4]}, -1, 1, 21 + s)};
        for (int n = 0; n < 3; n++)
            qkv_tensor_requires_grad(in[n]);
        at_gradcheck("additive", additive_fn, in, 3, NULL, NULL);
        at_gradcheck("additive + causal softmax", additive_causal_fn, in, 3, NULL, NULL);
        for (int n = 0; n < 3; n++)
            tu_free(in[n]);
    }
    int heads = 2; /* strided views */
    qkv_tensor *in[3] = {tu_rand(3, (int64_t[]){2, 3, 6}, -1, 1, 5),
                         tu_rand(3, (int64_t[]){2, 4, 6}, -1, 1, 6),
                         tu_rand(2, (int64_t[]){2, 3}, -1, 1, 7)};
    for (int n = 0; n < 3; n++)
        qkv_tensor_requires_grad(in[n]);
    at_gradcheck("additive via split_heads", additive_fn, in, 3, &heads, NULL);
    for (int n = 0; n < 3; n++)
        tu_free(in[n]);
}

TEST(attn_additive_fast_matches_reference) {
    /* B*H < 16 splits each head's query rows into blocks; B*H >= 16 does not */
    const int64_t shapes[][5] = {
        {1, 2, 37, 29, 8}, {4, 4, 13, 11, 6}, {1, 1, 1, 1, 1}, {2, 1, 3, 40, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t *sh = shapes[s];
        qkv_tensor *in[3] = {tu_rand(4, (int64_t[]){sh[0], sh[1], sh[2], sh[4]}, -1.5, 1.5, 31 + s),
                             tu_rand(4, (int64_t[]){sh[0], sh[1], sh[3], sh[4]}, -1.5, 1.5, 41 + s),
                             tu_rand(2, (int64_t[]){sh[1], sh[4]}, -1, 1, 51 + s)};
        for (int n = 0; n < 3; n++)
            qkv_tensor_requires_grad(in[n]);
        char what[64];
        snprintf(what, sizeof what, "additive shape %zu", s);
        at_compare_kernels(what, additive_fn, in, 3, NULL);
        snprintf(what, sizeof what, "additive + causal softmax shape %zu", s);
        at_compare_kernels(what, additive_causal_fn, in, 3, NULL);
        /* only some inputs need gradients */
        in[0]->flags &= ~(uint32_t)QKV_REQUIRES_GRAD;
        in[2]->flags &= ~(uint32_t)QKV_REQUIRES_GRAD;
        at_compare_kernels(what, additive_fn, in, 3, NULL);
        for (int n = 0; n < 3; n++)
            tu_free(in[n]);
    }
}

TEST(attn_additive_rejects_bad_input) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *qp = tu_rand(4, (int64_t[]){2, 3, 4, 5}, -1, 1, 1),
               *kp = tu_rand(4, (int64_t[]){2, 3, 6, 5}, -1, 1, 2);
    qkv_tensor *v = tu_rand(2, (int64_t[]){3, 5}, -1, 1, 3);
    qkv_tensor *v_a = tu_rand(2, (int64_t[]){3, 6}, -1, 1, 3),
               *v_h = tu_rand(2, (int64_t[]){2, 5}, -1, 1, 3);
    qkv_tensor *v1 = tu_rand(1, (int64_t[]){5}, -1, 1, 3);
    qkv_tensor *kp_a = tu_rand(4, (int64_t[]){2, 3, 6, 4}, -1, 1, 2),
               *kp_b = tu_rand(4, (int64_t[]){3, 3, 6, 5}, -1, 1, 2);
    qkv_tensor *vi = tu_tensor(QKV_I32, 2, (int64_t[]){3, 5});
    AT_EXPECT_FAIL(ctx, qkv_additive_scores(ctx, qp, kp, v_a), QKV_ERR_SHAPE,
                   "additive_scores: qp (2, 3, 4, 5) F");
    AT_EXPECT_FAIL(ctx, qkv_additive_scores(ctx, qp, kp, v_a), QKV_ERR_SHAPE, "v (3, 6)");
    AT_EXPECT_FAIL(ctx, qkv_additive_scores(ctx, qp, kp, v_h), QKV_ERR_SHAPE, "v (2, 5)");
    AT_EXPECT_FAIL(ctx, qkv_additive_scores(ctx, qp, kp, v1), QKV_ERR_SHAPE, "(H, A)");
    AT_EXPECT_FAIL(ctx, qkv_additive_scores(ctx, qp, kp_a, v), QKV_ERR_SHAPE, "kp (2, 3, 6, 4)");
    AT_EXPECT_FAIL(ctx, qkv_additive_scores(ctx, qp, kp_b, v), QKV_ERR_SHAPE, "kp (3, 3, 6, 5)");
    AT_EXPECT_FAIL(ctx, qkv_additive_scores(ctx, qp, kp, vi), QKV_ERR_SHAPE,
                   "additive_scores: v must be");
    AT_EXPECT_FAIL(ctx, qkv_additive_scores(ctx, qp, NULL, v), QKV_ERR_INVALID_ARG,
                   "additive_scores: input 1 is NULL");
    qkv_ctx_reset(ctx);
    CHECK(qkv_additive_scores(ctx, qp, kp, v) != NULL);
    qkv_tensor *all[] = {qp, kp, v, v_a, v_h, v1, kp_a, kp_b, vi};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tu_free(all[i]);
    qkv_ctx_free(ctx);
}
