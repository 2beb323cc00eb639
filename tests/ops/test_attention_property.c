/* test_attention_property.c: permutation properties of attention built from the blocks
 * (scaled-dot scores, softmax, weights . V with qkv_matmul), no mask: permuting keys and values
 * together leaves the output unchanged (invariance), permuting queries permutes the output rows
 * (equivariance). Checked against the unpermuted run, not against a formula of the code. */
#include "attn_testutil.h"

static qkv_tensor *attend(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v) {
    qkv_tensor *a = qkv_attn_normalize(
        ctx, qkv_attn_scores(ctx, q, k, QKV_SCORE_SCALED_DOT, NULL, 0), QKV_NORM_SOFTMAX, NULL);
    return qkv_matmul(ctx, a, v, false, false); /* (B, H, T, S) (B, H, S, Dv) -> (B, H, T, Dv) */
}

/* y[b, h, r, :] = x[b, h, perm[r], :] for a (B, H, R, C) tensor */
static qkv_tensor *permute_rows(qkv_ctx *ctx, const qkv_tensor *x, const int64_t *perm) {
    qkv_tensor *y = qkv_tensor_new(ctx, QKV_REAL, 4, x->shape);
    const int64_t R = x->shape[2], C = x->shape[3];
    for (int64_t bh = 0; bh < x->shape[0] * x->shape[1]; bh++)
        for (int64_t r = 0; r < R; r++)
            memcpy((qkv_real *)y->data + (bh * R + r) * C,
                   (const qkv_real *)x->data + (bh * R + perm[r]) * C,
                   sizeof(qkv_real) * (size_t)C);
    return y;
}

TEST(attn_property_permutation_invariance_and_equivariance) {
    const double tol = sizeof(qkv_real) == 4 ? 2e-6 : 1e-14;
    const int64_t B = 2, H = 3, T = 5, S = 7, D = 4, Dv = 3;
    const int64_t kperm[7] = {3, 0, 6, 1, 5, 2, 4}, qperm[5] = {4, 2, 0, 3, 1};
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *q = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){B, H, T, D});
    qkv_tensor *k = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){B, H, S, D});
    qkv_tensor *v = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){B, H, S, Dv});
    tu_fill_uniform(q->data, qkv_tensor_numel(q), -2, 2, 1);
    tu_fill_uniform(k->data, qkv_tensor_numel(k), -2, 2, 2);
    tu_fill_uniform(v->data, qkv_tensor_numel(v), -1, 1, 3);
    qkv_tensor *o = attend(ctx, q, k, v);
    qkv_tensor *ok = attend(ctx, q, permute_rows(ctx, k, kperm), permute_rows(ctx, v, kperm));
    qkv_tensor *oq = attend(ctx, permute_rows(ctx, q, qperm), k, v);
    CHECK(o && ok && oq && qkv_ctx_status(ctx) == QKV_OK);
    if (o && ok && oq) {
        const int64_t n = B * H * T * Dv;
        CHECK_MSG(tu_max_rel_diff(ok->data, o->data, n) <= tol,
                  "key permutation changed the output by %g",
                  tu_max_rel_diff(ok->data, o->data, n));
        qkv_tensor *op = permute_rows(ctx, o, qperm);
        CHECK_MSG(tu_max_rel_diff(oq->data, op->data, n) <= tol,
                  "query permutation: output off by %g", tu_max_rel_diff(oq->data, op->data, n));
        /* the property must be able to fail: a key permutation without the values changes it */
        qkv_tensor *bad = attend(ctx, q, permute_rows(ctx, k, kperm), v);
        CHECK(bad && tu_max_rel_diff(bad->data, o->data, n) > 1e-3);
    }
    qkv_ctx_free(ctx);
}
