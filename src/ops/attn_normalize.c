/*
 * attn_normalize.c: attention weights from scores under a mask, row by row over the keys.
 *
 *   scores e (B, H, T, S) -> weights a (B, H, T, S); for row (b, h, i) with allowed keys J:
 *   SOFTMAX        a_j = exp(e_j - m) / sum_{k in J} exp(e_k - m),  m = max_{k in J} e_k
 *   RELU           a_j = max(e_j, 0)
 *   RELU_ROWNORM   a_j = max(e_j, 0) / (sum_{k in J} max(e_k, 0) + eps),  eps = 1e-6
 *   SIGMOID        a_j = 1 / (1 + exp(-e_j))      (no normalisation across keys)
 * and a_j = 0 for j not in J, whatever e_j holds (NaN and inf included). A row with no allowed
 * key (J empty; for SOFTMAX also every allowed score -inf) has all-zero weights, never NaN.
 * PyTorch: softmax(e.masked_fill(~allowed, -inf)) with fully masked rows zeroed afterwards
 * (torch itself yields NaN there); ReLU attention as in Shen et al. 2023, sigmoid attention as
 * in Ramapuram et al. 2024.
 *
 * Backward (masked keys get exactly zero gradient; dA is the upstream gradient):
 *   SOFTMAX        de_j = a_j (dA_j - sum_k a_k dA_k)
 *   RELU           de_j = [j in J, e_j > 0] dA_j
 *   RELU_ROWNORM   de_j = [j in J, e_j > 0] (dA_j - sum_k a_k dA_k) / z,  z the row denominator
 *   SIGMOID        de_j = dA_j a_j (1 - a_j)
 * Saved: the weights (the op's output), z (B, H, T) for RELU_ROWNORM, and a copy of the mask
 * struct (RELU_ROWNORM's backward reads the mask tensors again: they must outlive backward,
 * as step tensors do).
 */
#include "../kernels/attention.h"
#include "qkv/qkv_registry.h"
#include "../kernels/backend.h"

static qkv_attn_dims dims_of(const qkv_tensor *s) {
    return (qkv_attn_dims){s->shape[0], s->shape[1], s->shape[2], s->shape[3], 0, {0, 0, 0}, {0, 0, 0}};
}

static void normalize_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_tensor *s = e->in[0];
    qkv_real *de = qkv__grad(ctx, s);
    if (!de) return;
    const qkv_attn_dims d = dims_of(s);
    ctx->backend->attention->normalize_bwd(
        &d, (qkv_attn_norm)e->i[0], (const qkv_mask *)e->extra, qkv__data(s), qkv__data(e->out),
        e->saved[0] ? qkv__data(e->saved[0]) : NULL, (const qkv_real *)e->out->grad, de);
}

static const qkv_op_desc normalize_op = {"attn_normalize", normalize_backward};

qkv_tensor *qkv_attn_normalize(qkv_ctx *ctx, qkv_tensor *scores, qkv_attn_norm norm,
                               const qkv_mask *mask) {
    if (!QKV_OP_BEGIN(ctx, "attn_normalize", scores)) return NULL;
    if (!qkv_registry_name(QKV_REGISTRY_NORM, norm))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "attn_normalize: unknown normaliser %d",
                        (int)norm);
    if (!qkv__check_real(ctx, "attn_normalize", scores, "scores")) return NULL;
    char bs[96];
    if (scores->ndim != 4)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "attn_normalize: scores %s must be (B, H, T, S)",
                        qkv_tensor_shape_str(scores, bs, sizeof bs));
    const qkv_attn_dims d = dims_of(scores);
    if (!qkv__mask_check(ctx, "attn_normalize", mask, d.B, d.T, d.S)) return NULL;
    scores = qkv__contig(ctx, scores);
    if (ctx->status) return NULL;
    qkv_tensor *a = qkv__alloc_like(ctx, scores); /* (B, H, T, S) */
    qkv_tensor *z = NULL;
    if (a && norm == QKV_NORM_RELU_ROWNORM)
        z = qkv__alloc(ctx, QKV_REAL, 3, (int64_t[]){d.B, d.H, d.T});
    if (!a || ctx->status) return NULL;
    ctx->backend->attention->normalize_fwd(&d, norm, mask, qkv__data(scores), qkv__data(a),
                                                  z ? qkv__data(z) : NULL);
    qkv_tape_entry *e = qkv__record(ctx, &normalize_op, a, 1, &scores);
    if (e) {
        e->i[0] = norm;
        e->saved[0] = z;
        if (mask) {
            qkv_mask *copy = qkv__scratch(ctx, sizeof *copy);
            if (!copy) return NULL;
            *copy = *mask;
            e->extra = copy;
        }
    }
    return a;
}
