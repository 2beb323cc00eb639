/*
 * norm.c: LayerNorm and RMSNorm over the last dim of x (..., C), N = rows.
 *
 * LayerNorm (Ba et al. 2016), exactly torch.nn.LayerNorm: biased variance, eps inside the root,
 *   y = (x - mean) / sqrt(var + eps) * weight + bias.
 * RMSNorm (Zhang & Sennrich 2019), torch.nn.RMSNorm:
 *   y = x / sqrt(mean(x^2) + eps) * weight.
 * weight and bias are optional (NULL: 1 and 0). With C = 1 LayerNorm's x - mean is exactly 0, so
 * y = bias (or 0) and dx = 0: degenerate but finite for eps > 0.
 * Backward (kernels/norm.h), with xhat = (x - mean) rstd and g = dy * weight:
 *   dx += rstd (g - mean(g) - xhat mean(g xhat))   (RMSNorm: no mean(g) term)
 *   dweight += sum_rows dy xhat,  dbias += sum_rows dy.
 * Saved for backward: mean (N) (LayerNorm only) and rstd (N), F64 tensors in every build; x,
 * weight and bias are the tape entry's inputs.
 * qkv__add_layernorm_over: a post-LN residual block's LayerNorm(x + drop(f)) where nothing needs
 * a gradient, in one pass per row (kernels/norm.h add_fwd) with the bits of the two ops.
 */
#include "../kernels/norm.h"
#include "../kernels/backend.h"
#include "ops_internal.h"

#include <math.h>

static void norm_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_tensor *x = e->in[0], *w = e->in[1], *b = e->n_in > 2 ? e->in[2] : NULL;
    const bool center = e->i[0] != 0;
    bool fresh;
    qkv_real *dx = qkv__grad_into(ctx, x, &fresh), *dw = qkv__grad(ctx, w), *db = qkv__grad(ctx, b);
    if (ctx->status || (!dx && !dw && !db)) return;
    const qkv_norm_kernels *k = ctx->backend->norm;
    const int64_t N = qkv__rows(x), C = qkv__last(x);
    const size_t scratch_bytes = dw || db ? k->bwd_scratch(N, C) : 0;
    double *scratch = scratch_bytes ? qkv__scratch(ctx, scratch_bytes) : NULL;
    if (ctx->status) return;
    k->bwd(center, N, C, qkv__data(x), w ? qkv__data(w) : NULL,
           center ? (const double *)e->saved[0]->data : NULL, (const double *)e->saved[1]->data,
           (const qkv_real *)e->out->grad, dx, fresh, dw, db, scratch);
}

static const qkv_op_desc layernorm_op = {"layernorm", norm_backward};
static const qkv_op_desc rmsnorm_op = {"rmsnorm", norm_backward};

/* weight / bias must be (C) when given. */
static bool check_affine(qkv_ctx *ctx, const char *op, const qkv_tensor *p, const char *arg,
                         const qkv_tensor *x) {
    if (!p) return true;
    if (!qkv__check_real(ctx, op, p, arg)) return false;
    if (p->ndim == 1 && p->shape[0] == qkv__last(x)) return true;
    char bp[96], bx[96];
    QKV_FAIL(ctx, QKV_ERR_SHAPE, "%s: %s %s must be (C) = (%lld) for x %s", op, arg,
             qkv_tensor_shape_str(p, bp, sizeof bp), (long long)qkv__last(x),
             qkv_tensor_shape_str(x, bx, sizeof bx));
    return false;
}

static qkv_tensor *norm(qkv_ctx *ctx, bool center, qkv_tensor *x, qkv_tensor *weight,
                        qkv_tensor *bias, double eps) {
    const qkv_op_desc *desc = center ? &layernorm_op : &rmsnorm_op;
    const char *op = desc->name;
    if (!QKV_OP_BEGIN(ctx, op, x)) return NULL;
    if (!qkv__check_real(ctx, op, x, "x")) return NULL;
    char bx[96];
    if (x->ndim < 1 || qkv__last(x) < 1)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "%s: x %s must be (..., C) with C >= 1", op,
                        qkv_tensor_shape_str(x, bx, sizeof bx));
    if (!check_affine(ctx, op, weight, "weight", x) || !check_affine(ctx, op, bias, "bias", x))
        return NULL;
    if (!(eps >= 0 && isfinite(eps)))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "%s: eps = %g must be finite and >= 0", op, eps);
    x = qkv__contig(ctx, x);
    weight = qkv__contig(ctx, weight);
    bias = qkv__contig(ctx, bias);
    if (ctx->status) return NULL;
    const int64_t N = qkv__rows(x), C = qkv__last(x);
    qkv_tensor *y = qkv__alloc_like(ctx, x);                            /* (..., C) */
    qkv_tensor *mean = center ? qkv__alloc(ctx, QKV_F64, 1, &N) : NULL; /* (N) */
    qkv_tensor *rstd = qkv__alloc(ctx, QKV_F64, 1, &N);                 /* (N) */
    if (!y || !rstd || (center && !mean)) return NULL;
    ctx->backend->norm->fwd(center, N, C, eps, qkv__data(x),
                                   weight ? qkv__data(weight) : NULL, bias ? qkv__data(bias) : NULL,
                                   qkv__data(y), mean ? (double *)mean->data : NULL,
                                   (double *)rstd->data);
    qkv_tape_entry *e =
        qkv__record(ctx, desc, y, center ? 3 : 2, (qkv_tensor *[]){x, weight, bias});
    if (e) {
        e->i[0] = center;
        e->saved[0] = mean;
        e->saved[1] = rstd;
    }
    return y;
}

qkv_tensor *qkv_layernorm(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *weight, qkv_tensor *bias,
                          double eps) {
    return norm(ctx, true, x, weight, bias, eps);
}

qkv_tensor *qkv_rmsnorm(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *weight, double eps) {
    return norm(ctx, false, x, weight, NULL, eps);
}

/* Whether p (weight or bias) may go to the kernel as it is: absent, or a contiguous real (C). */
static bool plain_affine(const qkv_tensor *p, int64_t C) {
    return !p || (p->dtype == QKV_REAL && p->ndim == 1 && p->shape[0] == C &&
                  qkv_tensor_is_contiguous(p));
}

qkv_tensor *qkv__add_layernorm_over(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *f, double p,
                                    qkv_tensor *weight, qkv_tensor *bias, double eps) {
    if (!QKV_OP_BEGIN(ctx, "add_layernorm", x, f)) return NULL;
    /* the two ops wherever one pass cannot stand for them: something needs a gradient (the
     * tape wants the sum), dropout draws, f's storage cannot take the sum (a view, strided, or
     * shared with x), or anything the ops would reject (they then report it) */
    const int64_t C = x->ndim >= 1 ? x->shape[x->ndim - 1] : 0;
    if (qkv__needs_grad(ctx, 4, (qkv_tensor *[]){x, f, weight, bias}) || !(p >= 0 && p < 1) ||
        (ctx->training && p > 0) || !qkv__sum_fits_over(x, f) || C < 1 ||
        !plain_affine(weight, C) || !plain_affine(bias, C) || !(eps >= 0 && isfinite(eps)))
        return qkv_layernorm(ctx, qkv__add_dropout_over(ctx, x, f, p), weight, bias, eps);
    x = qkv__contig(ctx, x);
    qkv_tensor *y = x ? qkv__alloc_like(ctx, x) : NULL; /* (..., C) */
    if (!y) return NULL;
    ctx->backend->norm->add_fwd(true, qkv__rows(x), C, eps, qkv__data(x), qkv__data(f),
                                       weight ? qkv__data(weight) : NULL,
                                       bias ? qkv__data(bias) : NULL, qkv__data(y));
    return y;
}
