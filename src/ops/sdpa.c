/*
 * sdpa.c: fused scaled-dot-product attention, qkv_sdpa (see ops/attention.h).
 *
 *   s_ij = scale q_i.k_j - m_h |i - j|   (ALiBi term, Press et al. 2022, only with slopes)
 *   o_i  = sum_j softmax_j(s_ij) v_j     over the keys j that the mask allows for (b, i)
 *
 * As torch.nn.functional.scaled_dot_product_attention with a boolean mask, except that a row
 * with no allowed key gives o_i = 0 (and zero gradients) instead of NaN. The kernels tile over
 * keys with an online softmax (FlashAttention-2, Dao 2023), so no (T, S) matrix is stored.
 * Saved for backward: the row log-sum-exp lse (B, H, T) (-inf for rows without keys), the scale,
 * a copy of the ALiBi slopes and the mask description; q, k, v and o are on the tape already.
 * q, k, v whose last dim is contiguous (the head views of a projection) are read, and their
 * gradients written, in place; other layouts are copied first.
 * Backward: dq, dk, dv from P = exp(s - lse) recomputed tile by tile (kernels/sdpa_cpu.c).
 *
 * qkv_sdpa_dropout adds attention dropout in training (torch's dropout_p): the weights are
 * dropped after the softmax with the Philox stream qkv_dropout would take at this point and its
 * keep decision for each element of the (B, H, T, S) weights, so the fused op equals
 * qkv_matmul(qkv_dropout(softmax(...), p), v) up to rounding and leaves the context's random
 * position where that composition would. The position (seed, step, stream) is saved with the
 * problem; backward regenerates the mask from it, as qkv_dropout's backward does.
 */
#include "../kernels/sdpa.h"
#include "../kernels/backend.h"

static void sdpa_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    const qkv_sdpa_problem *p = e->extra;
    qkv_real *dq = qkv__grad(ctx, e->in[0]), *dk = qkv__grad(ctx, e->in[1]);
    qkv_real *dv = qkv__grad(ctx, e->in[2]);
    if (!dq && !dk && !dv) return;
    ctx->backend->sdpa->bwd(ctx, p, qkv__data(e->in[0]), qkv__data(e->in[1]),
                                   qkv__data(e->in[2]), qkv__data(e->out), qkv__data(e->saved[0]),
                                   (const qkv_real *)e->out->grad, dq, dk, dv);
}

static const qkv_op_desc sdpa_op = {"sdpa", sdpa_backward};

/* Checks a mask tensor: I32 with one of the allowed shapes; returns its contiguous version. */
static const qkv_tensor *mask_tensor(qkv_ctx *ctx, const qkv_tensor *t, const char *arg,
                                     const char *want, bool ok_shape) {
    char buf[96];
    if (!qkv__check_i32(ctx, "sdpa", t, arg)) return NULL;
    if (!ok_shape)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "sdpa: %s must be %s, got %s", arg, want,
                        qkv_tensor_shape_str(t, buf, sizeof buf));
    /* A contiguous I32 copy needs no tape entry: masks carry no gradient. */
    return qkv__contig(ctx, (qkv_tensor *)t);
}

qkv_tensor *qkv_sdpa(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v, double scale,
                     const qkv_mask *mask, const qkv_real *alibi_slopes) {
    return qkv_sdpa_dropout(ctx, q, k, v, scale, mask, alibi_slopes, 0);
}

qkv_tensor *qkv_sdpa_dropout(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                             double scale, const qkv_mask *mask, const qkv_real *alibi_slopes,
                             double dropout_p) {
    if (!QKV_OP_BEGIN(ctx, "sdpa", q, k, v)) return NULL;
    if (!qkv__check_real(ctx, "sdpa", q, "q") || !qkv__check_real(ctx, "sdpa", k, "k") ||
        !qkv__check_real(ctx, "sdpa", v, "v"))
        return NULL;
    char bq[96], bk[96], bv[96];
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || k->shape[0] != q->shape[0] ||
        v->shape[0] != q->shape[0] || k->shape[1] != q->shape[1] || v->shape[1] != q->shape[1] ||
        k->shape[3] != q->shape[3] || v->shape[2] != k->shape[2])
        return QKV_FAIL(ctx, QKV_ERR_SHAPE,
                        "sdpa: q %s, k %s, v %s do not fit q (B, H, T, D), k (B, H, S, D), "
                        "v (B, H, S, Dv)",
                        qkv_tensor_shape_str(q, bq, sizeof bq),
                        qkv_tensor_shape_str(k, bk, sizeof bk),
                        qkv_tensor_shape_str(v, bv, sizeof bv));
    if (!isfinite(scale))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "sdpa: scale must be finite, got %g", scale);
    if (!(dropout_p >= 0 && dropout_p < 1))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "sdpa: dropout_p = %g is not in [0, 1)",
                        dropout_p);
    const int64_t B = q->shape[0], H = q->shape[1], T = q->shape[2], S = k->shape[2];
    qkv_sdpa_problem p = {.B = B,
                          .H = H,
                          .T = T,
                          .S = S,
                          .D = q->shape[3],
                          .Dv = v->shape[3],
                          .scale = scale,
                          .window_left = -1,
                          .window_right = -1};
    if (alibi_slopes) {
        qkv_real *slopes = qkv__scratch(ctx, sizeof(qkv_real) * (size_t)(H ? H : 1));
        if (!slopes) return NULL;
        for (int64_t h = 0; h < H; h++) {
            if (!isfinite((double)alibi_slopes[h]))
                return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "sdpa: alibi_slopes[%lld] is not finite",
                                (long long)h);
            slopes[h] = alibi_slopes[h]; /* copied: the caller's array need not outlive backward */
        }
        p.alibi = slopes;
    }
    if (mask) {
        p.causal = mask->causal;
        p.window_left = mask->window_left < 0 ? -1 : mask->window_left;
        p.window_right = mask->window_right < 0 ? -1 : mask->window_right;
        if (mask->key_padding) {
            const qkv_tensor *t = mask->key_padding;
            t = mask_tensor(ctx, t, "mask.key_padding", "(B, S) = (q.shape[0], k.shape[2])",
                            t->ndim == 2 && t->shape[0] == B && t->shape[1] == S);
            if (!t) return NULL;
            p.key_padding = qkv__idata(t);
        }
        if (mask->allowed) {
            const qkv_tensor *t = mask->allowed;
            const bool shared = t->ndim == 2 && t->shape[0] == T && t->shape[1] == S;
            const bool batched =
                t->ndim == 3 && t->shape[0] == B && t->shape[1] == T && t->shape[2] == S;
            t = mask_tensor(ctx, t, "mask.allowed",
                            "(T, S) or (B, T, S) with T = q.shape[2], S = k.shape[2]",
                            shared || batched);
            if (!t) return NULL;
            p.allowed = qkv__idata(t);
            p.allowed_bstride = batched ? T * S : 0;
        }
    }
    /* head views (last dim contiguous, e.g. of a projection) are read in place */
    qkv_tensor **in[3] = {&q, &k, &v};
    qkv__mat_layout *lay[3] = {&p.lq, &p.lk, &p.lv};
    for (int x = 0; x < 3; x++)
        if (!qkv__head_layout(*in[x], lay[x])) {
            *in[x] = qkv__contig(ctx, *in[x]);
            if (!*in[x]) return NULL;
            qkv__head_layout(*in[x], lay[x]);
        }
    if (ctx->status) return NULL;
    if (ctx->training && dropout_p > 0) { /* the position qkv_dropout would take here */
        p.dropout = dropout_p;
        p.seed = ctx->seed;
        p.step = ctx->step;
        p.stream = qkv__next_stream(ctx);
    }
    qkv_tensor *o = qkv__alloc(ctx, QKV_REAL, 4, (int64_t[]){B, H, T, p.Dv}); /* (B, H, T, Dv) */
    qkv_tensor *lse = qkv__alloc(ctx, QKV_REAL, 3, (int64_t[]){B, H, T});     /* (B, H, T) */
    if (!o || !lse) return NULL;
    if (!ctx->backend->sdpa->fwd(ctx, &p, qkv__data(q), qkv__data(k), qkv__data(v),
                                        qkv__data(o), qkv__data(lse)))
        return NULL;
    qkv_tape_entry *e = qkv__record(ctx, &sdpa_op, o, 3, (qkv_tensor *[]){q, k, v});
    if (e) {
        qkv_sdpa_problem *saved = qkv__scratch(ctx, sizeof *saved);
        if (!saved) return NULL;
        *saved = p;
        e->extra = saved;
        e->saved[0] = lse;
        e->f[0] = scale;
    }
    return o;
}
