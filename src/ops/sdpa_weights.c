/*
 * sdpa_weights.c: scaled-dot-product attention that keeps the weights, qkv_sdpa_weights (see
 * ops/attention.h): the arithmetic of the composed ops
 *
 *   e = scale q k^T            qkv_attn_scores (SCALED_DOT)         (B, H, T, S)
 *   a = softmax(e | mask)      qkv_attn_normalize (SOFTMAX)         (B, H, T, S)
 *   a' = dropout(a, p)         qkv_dropout (training, p > 0)        (B, H, T, S)
 *   o = a' v                   qkv_matmul                           (B, H, T, Dv)
 *
 * in one op that keeps only a for backward. The composition keeps e, a and a' (each op's output
 * lives until the step ends); here e and a' are scratch, handed back when the call returns:
 *
 * Backward (dO = o's gradient), in the composition's order and with its kernels:
 *   a' again from a and the Philox position (the dropout mask is never stored),
 *   dV += a'^T dO,  dA' = dO V^T,  dA = z dA' (z = keep / (1 - p)),
 *   dE = a (dA - sum_j a_j dA_j)  (softmax),  dQ += scale dE K,  dK += scale dE^T Q.
 * Every kernel call is the composition's, on the same operands with the same layouts, and the
 * random stream is the one its qkv_dropout would take, so the op gives the composition's bits,
 * forward and backward (tests/ops/test_sdpa_weights.c), with two (B, H, T, S) tensors fewer kept:
 * on config B (T = S = 64, 18 attention modules) 144 MiB of a 2.2 GiB training step.
 * The fused qkv_sdpa_dropout keeps none, but its tiled kernel is slower where a head's scores fit
 * one tile (BENCHMARKS.md); the MHA module picks between the two by size (src/nn/mha.c).
 *
 * qkv_sdpa_weights_merged writes o with the heads merged, (B, T, H Dv), as qkv_merge_heads would
 * copy it: each head's (T, Dv) product lands in its columns of the merged rows (row stride H Dv)
 * and backward reads dO there, so the MHA module's merge copy and its (B, T, C) tensor go (config
 * B: 18 x 4 MiB of a training step's arena, BENCHMARKS.md). A product's bits do not
 * depend on where its result is stored, so the two ops agree bit for bit.
 */
#include "../kernels/attention.h"
#include "../kernels/elementwise.h"
#include "../kernels/backend.h"

#include <limits.h>

/* What backward needs besides the tape's q, k, v, o and the saved weights. */
typedef struct weights_saved {
    qkv_attn_dims scores; /* (B, H, T, S, D) with the layouts of q and k */
    qkv__mat_layout lv;   /* v's layout (fast kernels; contiguous with the reference ones) */
    qkv__mat_layout lo;   /* o's: (B, H, T, Dv) contiguous, or merged (B, T, H Dv) */
    int64_t Dv;
    qkv_real alpha;                /* the scale */
    qkv_mask mask;                 /* copy of the caller's (its tensors live until backward) */
    bool has_mask;
    double p;                      /* dropout probability; 0 = none */
    uint64_t seed, step, stream;   /* Philox position of the dropout */
} weights_saved;

/* (B, H, T, S) contiguous: the dims the normalise kernels take. */
static qkv_attn_dims weight_dims(const qkv_attn_dims *d) {
    return (qkv_attn_dims){d->B, d->H, d->T, d->S, 0, {0, 0, 0}, {0, 0, 0}};
}

/* c (B, H, M, N) (+)= op(a) op(b) per head, with the products qkv_matmul makes for 4-D operands:
 * the backend's head-view batches where it has them, its gemm per head otherwise
 * (q, k and v contiguous there; o contiguous or merged). */
static void head_products(const qkv_ctx *ctx, bool ta, bool tb, int64_t B, int64_t H, int64_t M,
                          int64_t N, int64_t K, const qkv_real *a, qkv__mat_layout la,
                          const qkv_real *b, qkv__mat_layout lb, qkv_real beta, qkv_real *c,
                          qkv__mat_layout lc) {
    if (ctx->backend->gemm_batched2) {
        ctx->backend->gemm_batched2(ta, tb, B, H, M, N, K, 1, a, la, b, lb, beta, c, lc);
        return;
    }
    for (int64_t i = 0; i < B; i++)
        for (int64_t h = 0; h < H; h++)
            ctx->backend->gemm(ta, tb, M, N, K, 1, a + i * la.outer + h * la.inner, la.ld, b + i * lb.outer + h * lb.inner,
                         lb.ld, beta, c + i * lc.outer + h * lc.inner, lc.ld);
}

/* Layout of a contiguous (B, H, rows, cols) tensor. */
static qkv__mat_layout contiguous_layout(int64_t H, int64_t rows, int64_t cols) {
    return (qkv__mat_layout){cols, H * rows * cols, rows * cols};
}

/* a' = dropout(a) into out, as qkv_dropout draws it (nothing to do without dropout). */
static void drop_weights(const qkv_ctx *ctx, const weights_saved *w, int64_t n, const qkv_real *a,
                         qkv_real *out) {
    ctx->backend->elementwise->dropout(n, w->p, w->seed, w->step, w->stream, false, a, out,
                                              false);
}

static void weights_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    const weights_saved *w = e->extra;
    qkv_tensor *q = e->in[0], *k = e->in[1], *v = e->in[2];
    qkv_real *dq = qkv__grad(ctx, q), *dk = qkv__grad(ctx, k), *dv = qkv__grad(ctx, v);
    if (ctx->status || (!dq && !dk && !dv)) return;
    const qkv_attn_dims *d = &w->scores, wd = weight_dims(d);
    const int64_t B = d->B, H = d->H, T = d->T, S = d->S, n = B * H * T * S;
    const qkv_real *a = qkv__data(e->saved[0]), *dout = (const qkv_real *)e->out->grad;
    const qkv__mat_layout la = contiguous_layout(H, T, S), lo = w->lo;
    /* x: a' (with dropout), then dE; y: dA'; z: dA (with dropout). Buffers of one (B, H, T, S)
     * tensor each, the size the forward's scratch and the other modules' have: the pool serves
     * them all, so a model's attention modules share a few instead of keeping three apiece. */
    const bool drop = w->p > 0;
    const size_t bytes = sizeof(qkv_real) * (size_t)n;
    qkv_real *x = qkv__grad_scratch(ctx, bytes), *y = x ? qkv__grad_scratch(ctx, bytes) : NULL;
    qkv_real *z = y && drop ? qkv__grad_scratch(ctx, bytes) : y;
    if (!z) {
        if (y) qkv__grad_scratch_release(ctx, y, bytes);
        if (x) qkv__grad_scratch_release(ctx, x, bytes);
        return;
    }
    const qkv_real *ad = a;
    if (drop) {
        drop_weights(ctx, w, n, a, x);
        ad = x;
    }
    if (dv) /* dV += a'^T dO */
        head_products(ctx, true, false, B, H, S, w->Dv, T, ad, la, dout, lo, 1, dv, w->lv);
    const qkv_elementwise_kernels *ew = ctx->backend->elementwise;
    if (dq || dk) {
        /* dA' = dO V^T, summed into zeros as the composition's gradient buffer is */
        ew->fill(n, 0, y);
        head_products(ctx, false, true, B, H, T, S, w->Dv, dout, lo, qkv__data(v), w->lv, 1, y, la);
        if (drop) { /* dA = z dA' */
            ew->fill(n, 0, z);
            ew->dropout(n, w->p, w->seed, w->step, w->stream, false, y, z, true);
        }
        ew->fill(n, 0, x); /* dE (a' is no longer needed) */
        ctx->backend->attention->normalize_bwd(&wd, QKV_NORM_SOFTMAX,
                                                      w->has_mask ? &w->mask : NULL, a, a, NULL,
                                                      z, x);
        ctx->backend->attention->dot_bwd(d, w->alpha, qkv__data(q), qkv__data(k), x, dq,
                                                dk);
    }
    if (drop) qkv__grad_scratch_release(ctx, z, bytes);
    qkv__grad_scratch_release(ctx, y, bytes);
    qkv__grad_scratch_release(ctx, x, bytes);
}

static const qkv_op_desc weights_op = {"sdpa_weights", weights_backward};

/* qkv_sdpa_weights, and with `merged` qkv_sdpa_weights_merged. */
static qkv_tensor *sdpa_weights(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v, double scale,
                                const qkv_mask *mask, double dropout_p, bool merged) {
    if (!QKV_OP_BEGIN(ctx, "sdpa_weights", q, k, v)) return NULL;
    if (!qkv__check_real(ctx, "sdpa_weights", q, "q") ||
        !qkv__check_real(ctx, "sdpa_weights", k, "k") ||
        !qkv__check_real(ctx, "sdpa_weights", v, "v"))
        return NULL;
    char bq[96], bk[96], bv[96];
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || k->shape[0] != q->shape[0] ||
        v->shape[0] != q->shape[0] || k->shape[1] != q->shape[1] || v->shape[1] != q->shape[1] ||
        k->shape[3] != q->shape[3] || v->shape[2] != k->shape[2] || q->shape[3] < 1)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE,
                        "sdpa_weights: q %s, k %s, v %s do not fit q (B, H, T, D), k (B, H, S, D), "
                        "v (B, H, S, Dv) with D >= 1",
                        qkv_tensor_shape_str(q, bq, sizeof bq),
                        qkv_tensor_shape_str(k, bk, sizeof bk),
                        qkv_tensor_shape_str(v, bv, sizeof bv));
    if (!isfinite(scale))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "sdpa_weights: scale must be finite, got %g",
                        scale);
    if (!(dropout_p >= 0 && dropout_p < 1))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "sdpa_weights: dropout_p = %g is not in [0, 1)",
                        dropout_p);
    const int64_t B = q->shape[0], H = q->shape[1], T = q->shape[2], S = k->shape[2];
    const int64_t Dv = v->shape[3];
    if (T > INT_MAX || S > INT_MAX || Dv > INT_MAX || q->shape[3] > INT_MAX)
        return QKV_FAIL(ctx, QKV_ERR_UNSUPPORTED, "sdpa_weights: a dimension is over 2^31-1");
    if (!qkv__mask_check(ctx, "sdpa_weights", mask, B, T, S)) return NULL;
    /* q, k (and v on the fast kernels) are read where they are when they are head views, as
     * qkv_attn_scores and qkv_matmul read them; anything else is made contiguous first */
    qkv__mat_layout l;
    const bool ref = !ctx->backend->gemm_batched2; /* v is read in place only by those products */
    if (!qkv__head_layout(q, &l)) q = qkv__contig(ctx, q);
    if (!qkv__head_layout(k, &l)) k = qkv__contig(ctx, k);
    if (ref || !qkv__head_layout(v, &l)) v = qkv__contig(ctx, v);
    if (ctx->status) return NULL;
    weights_saved w = {.scores = {B, H, T, S, q->shape[3], {0, 0, 0}, {0, 0, 0}},
                       .Dv = Dv,
                       .alpha = (qkv_real)scale,
                       .has_mask = mask != NULL};
    qkv__head_layout(q, &w.scores.lq);
    qkv__head_layout(k, &w.scores.lk);
    qkv__head_layout(v, &w.lv);
    if (mask) w.mask = *mask;
    if (ctx->training && dropout_p > 0) { /* the position qkv_dropout would take here */
        w.p = dropout_p;
        w.seed = ctx->seed;
        w.step = ctx->step;
        w.stream = qkv__next_stream(ctx);
    }
    const int64_t n = B * H * T * S;
    qkv_tensor *a = qkv__alloc(ctx, QKV_REAL, 4, (int64_t[]){B, H, T, S});  /* (B, H, T, S) */
    qkv_tensor *o = merged ? qkv__alloc(ctx, QKV_REAL, 3, (int64_t[]){B, T, H * Dv})  /* (B, T, H Dv) */
                           : qkv__alloc(ctx, QKV_REAL, 4, (int64_t[]){B, H, T, Dv}); /* (B, H, T, Dv) */
    w.lo = merged ? (qkv__mat_layout){H * Dv, T * H * Dv, Dv} : contiguous_layout(H, T, Dv);
    const size_t bytes = sizeof(qkv_real) * (size_t)n;
    qkv_real *x = a && o ? qkv__grad_scratch(ctx, bytes) : NULL; /* e, then a' */
    if (!x) return NULL;
    const qkv_attention_kernels *kern = ctx->backend->attention;
    const qkv_attn_dims wd = weight_dims(&w.scores);
    kern->dot_fwd(&w.scores, w.alpha, qkv__data(q), qkv__data(k), x);
    kern->normalize_fwd(&wd, QKV_NORM_SOFTMAX, mask, x, qkv__data(a), NULL);
    const qkv_real *ad = qkv__data(a);
    if (w.p > 0) {
        drop_weights(ctx, &w, n, qkv__data(a), x);
        ad = x;
    }
    head_products(ctx, false, false, B, H, T, Dv, S, ad, contiguous_layout(H, T, S),
                  qkv__data(v), w.lv, 0, qkv__data(o), w.lo);
    qkv__grad_scratch_release(ctx, x, bytes);
    qkv_tape_entry *e = qkv__record(ctx, &weights_op, o, 3, (qkv_tensor *[]){q, k, v});
    if (e) {
        weights_saved *saved = qkv__scratch(ctx, sizeof *saved);
        if (!saved) return NULL;
        *saved = w;
        e->extra = saved;
        e->saved[0] = a;
    }
    return o;
}

qkv_tensor *qkv_sdpa_weights(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v, double scale,
                             const qkv_mask *mask, double dropout_p) {
    return sdpa_weights(ctx, q, k, v, scale, mask, dropout_p, false);
}

qkv_tensor *qkv_sdpa_weights_merged(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v, double scale,
                                    const qkv_mask *mask, double dropout_p) {
    return sdpa_weights(ctx, q, k, v, scale, mask, dropout_p, true);
}
