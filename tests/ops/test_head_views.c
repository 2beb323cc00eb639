/* test_head_views.c: attention scores and per-head products read head views of a projection
 * ((B, L, 3C) seen as (B, H, L, D)) in place. Against the same ops on contiguous copies: the same
 * outputs and the same gradients (which land in the projection's gradient), with fast and
 * reference kernels. */
#include "testutil.h"

enum { B = 2, L = 5, H = 3, D = 4, C = H * D };

/* out = sum(w1 * attn_scores(q, k)) + sum(w2 * (softmax-free) matmul(scores, v)) with q, k, v
 * the three head views of proj, or contiguous copies of them. */
static void run(qkv_kernels kernels, bool copies, const qkv_tensor *proj0, qkv_real *out, qkv_real *grad) {
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_kernels(ctx, kernels);
    qkv_tensor *proj = qkv_tensor_new(ctx, QKV_REAL, 3, (int64_t[]){B, L, 3 * C});
    memcpy(proj->data, proj0->data, sizeof(qkv_real) * B * L * 3 * C);
    qkv_tensor_requires_grad(proj);
    qkv_tensor *r = qkv_reshape(ctx, proj, 4, (int64_t[]){B, L, 3 * H, D});
    qkv_tensor *t = qkv_permute(ctx, r, (const int[]){0, 2, 1, 3}); /* (B, 3H, L, D) */
    qkv_tensor *q = qkv_narrow(ctx, t, 1, 0, H), *k = qkv_narrow(ctx, t, 1, H, H), *v = qkv_narrow(ctx, t, 1, 2 * H, H);
    CHECK(!qkv_tensor_is_contiguous(q) && !qkv_tensor_is_contiguous(v));
    if (copies) q = qkv_contiguous(ctx, q), k = qkv_contiguous(ctx, k), v = qkv_contiguous(ctx, v);
    qkv_tensor *e = qkv_attn_scores(ctx, q, k, QKV_SCORE_SCALED_DOT, NULL, 1); /* (B, H, L, L) */
    qkv_tensor *o = qkv_matmul(ctx, e, v, false, false);                      /* (B, H, L, D) */
    qkv_tensor *w1 = tu_rand(4, e->shape, -1, 1, 7), *w2 = tu_rand(4, o->shape, -1, 1, 8);
    qkv_tensor *loss = qkv_add(ctx, qkv_sum(ctx, qkv_mul(ctx, e, w1)), qkv_sum(ctx, qkv_mul(ctx, o, w2)));
    CHECK_OK(qkv_backward(ctx, loss));
    memcpy(out, o->data, sizeof(qkv_real) * B * H * L * D);
    memcpy(grad, proj->grad, sizeof(qkv_real) * B * L * 3 * C);
    tu_free(w1), tu_free(w2);
    qkv_ctx_free(ctx);
}

TEST(head_views_are_read_in_place_with_the_bits_of_copies) {
    qkv_tensor *proj = tu_rand(3, (int64_t[]){B, L, 3 * C}, -1, 1, 6);
    enum { NO = B * H * L * D, NG = B * L * 3 * C };
    static qkv_real out[4][NO], grad[4][NG];
    run(QKV_KERNELS_FAST, false, proj, out[0], grad[0]);
    run(QKV_KERNELS_FAST, true, proj, out[1], grad[1]);
    run(QKV_KERNELS_REF, false, proj, out[2], grad[2]);
    run(QKV_KERNELS_REF, true, proj, out[3], grad[3]);
    CHECK(memcmp(out[0], out[1], sizeof out[0]) == 0 && memcmp(grad[0], grad[1], sizeof grad[0]) == 0);
    CHECK(memcmp(out[2], out[3], sizeof out[2]) == 0 && memcmp(grad[2], grad[3], sizeof grad[2]) == 0);
    const double tol = sizeof(qkv_real) == 4 ? 1e-5 : 1e-12;
    CHECK(tu_max_rel_diff(out[0], out[2], NO) < tol && tu_max_rel_diff(grad[0], grad[2], NG) < tol);
    /* every column of the projection got a gradient: q and k through the scores, v through o */
    int64_t zero_cols = 0;
    for (int64_t c = 0; c < 3 * C; c++) zero_cols += grad[0][c] == 0;
    CHECK(zero_cols == 0);
    tu_free(proj);
}
