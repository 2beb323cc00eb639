/*
 * attn_additive.c: fused additive (Bahdanau) attention scores.
 *
 *   e_bhij = sum_a v_ha tanh(qp_bhia + kp_bhja)
 *   qp (B, H, T, A) = W_q q and kp (B, H, S, A) = W_k k are projected by the caller (qkv_linear
 *   then qkv_split_heads); v (H, A) is one scoring vector per head -> e (B, H, T, S).
 * Reference: Bahdanau, Cho & Bengio 2015, "Neural Machine Translation by Jointly Learning to
 * Align and Translate" (score v^T tanh(W s + U h)); in PyTorch,
 * (torch.tanh(qp.unsqueeze(-2) + kp.unsqueeze(-3)) * v[:, None, None, :]).sum(-1) per batch.
 *
 * The (B, H, T, S, A) tanh tensor is never stored: backward recomputes it. With
 * t = tanh(qp_ia + kp_ja):  dqp_ia += sum_j de_ij v_a (1 - t^2),  dkp_ja += sum_i de_ij v_a
 * (1 - t^2),  dv_ha += sum_{b,i,j} de_ij t. Nothing is saved (qp, kp, v are on the tape).
 */
#include "../kernels/attention.h"
#include "../kernels/backend.h"

static qkv_attn_dims dims_of(const qkv_tensor *qp, const qkv_tensor *kp) {
    return (qkv_attn_dims){qp->shape[0], qp->shape[1], qp->shape[2], kp->shape[2], qp->shape[3], {0, 0, 0}, {0, 0, 0}};
}

static void additive_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_tensor *qp = e->in[0], *kp = e->in[1], *v = e->in[2];
    const qkv_attn_dims d = dims_of(qp, kp);
    qkv_real *dqp = qkv__grad(ctx, qp), *dkp = qkv__grad(ctx, kp), *dv = qkv__grad(ctx, v);
    if (ctx->status) return;
    ctx->backend->attention->additive_bwd(ctx, &d, qkv__data(qp), qkv__data(kp),
                                                 qkv__data(v), (const qkv_real *)e->out->grad, dqp,
                                                 dkp, dv);
}

static const qkv_op_desc additive_op = {"additive_scores", additive_backward};

qkv_tensor *qkv_additive_scores(qkv_ctx *ctx, qkv_tensor *qp, qkv_tensor *kp, qkv_tensor *v) {
    if (!QKV_OP_BEGIN(ctx, "additive_scores", qp, kp, v)) return NULL;
    if (!qkv__check_real(ctx, "additive_scores", qp, "qp") ||
        !qkv__check_real(ctx, "additive_scores", kp, "kp") ||
        !qkv__check_real(ctx, "additive_scores", v, "v"))
        return NULL;
    char bq[96], bk[96], bv[96];
    if (qp->ndim != 4 || kp->ndim != 4 || v->ndim != 2 || qp->shape[0] != kp->shape[0] ||
        qp->shape[1] != kp->shape[1] || qp->shape[3] != kp->shape[3] ||
        v->shape[0] != qp->shape[1] || v->shape[1] != qp->shape[3] || qp->shape[3] < 1)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE,
                        "additive_scores: qp %s, kp %s, v %s must be (B, H, T, A), (B, H, S, A) "
                        "and (H, A) with A >= 1",
                        qkv_tensor_shape_str(qp, bq, sizeof bq),
                        qkv_tensor_shape_str(kp, bk, sizeof bk),
                        qkv_tensor_shape_str(v, bv, sizeof bv));
    qp = qkv__contig(ctx, qp);
    kp = qkv__contig(ctx, kp);
    v = qkv__contig(ctx, v);
    if (ctx->status) return NULL;
    const qkv_attn_dims d = dims_of(qp, kp);
    qkv_tensor *s =
        qkv__alloc(ctx, QKV_REAL, 4, (int64_t[]){d.B, d.H, d.T, d.S}); /* (B, H, T, S) */
    if (!s) return NULL;
    ctx->backend->attention->additive_fwd(&d, qkv__data(qp), qkv__data(kp), qkv__data(v),
                                                 qkv__data(s));
    qkv__record(ctx, &additive_op, s, 3, (qkv_tensor *[]){qp, kp, v});
    return s;
}
