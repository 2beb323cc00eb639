/*
 * attn_scores.c: dot-product attention scores, q (B, H, T, D), k (B, H, S, D) -> e (B, H, T, S).
 *
 *   DOT         e_ij = q_i . k_j                            (Luong et al. 2015, "dot")
 *   SCALED_DOT  e_ij = q_i . k_j / sqrt(D)                  (Vaswani et al. 2017)
 *   COSINE      e_ij = g_h q_i . k_j / (n(q_i) n(k_j)),  n(x) = max(|x|, eps),  eps = 1e-8
 *               (Henry et al. 2020, query-key normalisation). As PyTorch:
 *               g * F.normalize(q, dim=-1, eps=1e-8) @ F.normalize(k, dim=-1, eps=1e-8).mT
 *               with g a learnable tensor of 1 element (shared) or H elements (one per head),
 *               or a fixed scale.
 * ADDITIVE scores have their own op (attn_additive.c); GENERAL scores q^T W k = q . (W k) are
 * composed by the caller as DOT scores of q and k W^T (see the MHA module).
 *
 * Backward. DOT / SCALED_DOT with alpha = 1 or 1/sqrt(D): dQ += alpha dE K, dK += alpha dE^T Q;
 * nothing is saved (q and k are on the tape). COSINE saves the clamped norms n_q (B, H, T) and
 * n_k (B, H, S); the output e itself is reused by the fast backward. The derivative (the clamp
 * has zero slope) is written out in kernels/attention_ref.c and attention_cpu.c.
 */
#include "../kernels/attention.h"
#include "../kernels/backend.h"

/* The dims and the layouts of q and k (checked head layouts: see qkv_attn_scores). */
static qkv_attn_dims dims_of(const qkv_tensor *q, const qkv_tensor *k) {
    qkv_attn_dims d = {q->shape[0], q->shape[1], q->shape[2], k->shape[2], q->shape[3], {0, 0, 0}, {0, 0, 0}};
    qkv__head_layout(q, &d.lq);
    qkv__head_layout(k, &d.lk);
    return d;
}

static void scores_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_tensor *q = e->in[0], *k = e->in[1], *g = e->n_in > 2 ? e->in[2] : NULL;
    const qkv_attn_dims d = dims_of(q, k);
    const qkv_attention_kernels *kern = ctx->backend->attention;
    const qkv_real *de = (const qkv_real *)e->out->grad; /* (B, H, T, S) */
    qkv_real *dq = qkv__grad(ctx, q), *dk = qkv__grad(ctx, k), *dg = qkv__grad(ctx, g);
    if (ctx->status) return;
    if (e->i[0] == QKV_SCORE_COSINE) {
        const qkv_real fixed = (qkv_real)e->f[0];
        kern->cos_bwd(ctx, &d, g ? qkv__data(g) : &fixed, g ? qkv_tensor_numel(g) : 1, qkv__data(q),
                      qkv__data(k), qkv__data(e->saved[0]), qkv__data(e->saved[1]),
                      qkv__data(e->out), de, dq, dk, dg);
    } else {
        kern->dot_bwd(&d, (qkv_real)e->f[0], qkv__data(q), qkv__data(k), de, dq, dk);
    }
}

static const qkv_op_desc scores_op = {"attn_scores", scores_backward};

/* Kinds this op computes; the others fail with a pointer to where they are computed. */
static bool check_kind(qkv_ctx *ctx, qkv_score_kind kind) {
    switch (kind) {
    case QKV_SCORE_DOT:
    case QKV_SCORE_SCALED_DOT:
    case QKV_SCORE_COSINE:
        return true;
    case QKV_SCORE_ADDITIVE:
        QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                 "attn_scores: ADDITIVE scores need the projected queries/keys and v: use "
                 "qkv_additive_scores(ctx, qp, kp, v)");
        return false;
    case QKV_SCORE_GENERAL:
        QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                 "attn_scores: GENERAL scores q^T W k are composed as DOT scores of q and k W^T "
                 "(project k first, e.g. qkv_matmul(k, W, false, true)), as the MHA module does");
        return false;
    }
    QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "attn_scores: unknown score kind %d", (int)kind);
    return false;
}

qkv_tensor *qkv_attn_scores(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_score_kind kind,
                            qkv_tensor *cos_scale, double fixed_scale) {
    if (!QKV_OP_BEGIN(ctx, "attn_scores", q, k)) return NULL;
    if (!check_kind(ctx, kind)) return NULL;
    if (!qkv__check_real(ctx, "attn_scores", q, "q") ||
        !qkv__check_real(ctx, "attn_scores", k, "k") ||
        (cos_scale && !qkv__check_real(ctx, "attn_scores", cos_scale, "cos_scale")))
        return NULL;
    char bq[96], bk[96], bg[96];
    if (q->ndim != 4 || k->ndim != 4 || q->shape[0] != k->shape[0] || q->shape[1] != k->shape[1] ||
        q->shape[3] != k->shape[3] || q->shape[3] < 1)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE,
                        "attn_scores: q %s and k %s must be (B, H, T, D) and (B, H, S, D) with "
                        "equal B, H and D >= 1",
                        qkv_tensor_shape_str(q, bq, sizeof bq),
                        qkv_tensor_shape_str(k, bk, sizeof bk));
    const int64_t H = q->shape[1];
    if (cos_scale && kind != QKV_SCORE_COSINE)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                        "attn_scores: cos_scale is only used by COSINE scores; pass NULL");
    if (cos_scale && (cos_scale->ndim > 1 ||
                      (qkv_tensor_numel(cos_scale) != 1 && qkv_tensor_numel(cos_scale) != H)))
        return QKV_FAIL(ctx, QKV_ERR_SHAPE,
                        "attn_scores: cos_scale %s must hold 1 element or H = %lld (one per head)",
                        qkv_tensor_shape_str(cos_scale, bg, sizeof bg), (long long)H);
    if (kind == QKV_SCORE_COSINE && !cos_scale && !isfinite(fixed_scale))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "attn_scores: fixed_scale %g is not finite",
                        fixed_scale);
    /* The dot kinds read q and k where they are when they are head views (e.g. the columns of
     * one projection, (B, L, C) seen as (B, H, L, D)): no copy, and the gradients go straight
     * back there. Everything else is made contiguous. */
    qkv__mat_layout unused;
    if (kind == QKV_SCORE_COSINE || !qkv__head_layout(q, &unused)) q = qkv__contig(ctx, q);
    if (kind == QKV_SCORE_COSINE || !qkv__head_layout(k, &unused)) k = qkv__contig(ctx, k);
    if (cos_scale) cos_scale = qkv__contig(ctx, cos_scale);
    if (ctx->status) return NULL;
    const qkv_attn_dims d = dims_of(q, k);
    qkv_tensor *s =
        qkv__alloc(ctx, QKV_REAL, 4, (int64_t[]){d.B, d.H, d.T, d.S}); /* (B, H, T, S) */
    if (!s) return NULL;
    const qkv_attention_kernels *kern = ctx->backend->attention;
    qkv_tensor *nq = NULL, *nk = NULL;
    double attr;
    if (kind == QKV_SCORE_COSINE) {
        nq = qkv__alloc(ctx, QKV_REAL, 3, (int64_t[]){d.B, d.H, d.T}); /* (B, H, T) */
        nk = qkv__alloc(ctx, QKV_REAL, 3, (int64_t[]){d.B, d.H, d.S}); /* (B, H, S) */
        if (!nq || !nk) return NULL;
        const qkv_real fixed = (qkv_real)fixed_scale;
        kern->cos_fwd(&d, cos_scale ? qkv__data(cos_scale) : &fixed,
                      cos_scale ? qkv_tensor_numel(cos_scale) : 1, qkv__data(q), qkv__data(k),
                      qkv__data(nq), qkv__data(nk), qkv__data(s));
        attr = fixed_scale;
    } else {
        attr = kind == QKV_SCORE_SCALED_DOT ? 1.0 / sqrt((double)d.D) : 1.0;
        kern->dot_fwd(&d, (qkv_real)attr, qkv__data(q), qkv__data(k), qkv__data(s));
    }
    qkv_tape_entry *e =
        qkv__record(ctx, &scores_op, s, cos_scale ? 3 : 2, (qkv_tensor *[]){q, k, cos_scale});
    if (e) {
        e->i[0] = kind;
        e->f[0] = attr; /* alpha of the dot kinds, the fixed cosine scale */
        e->saved[0] = nq;
        e->saved[1] = nk;
    }
    return s;
}
