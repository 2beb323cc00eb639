/*
 * softmax.c: softmax, log_softmax and argmax over the last dim of x (..., C), N = rows.
 *
 *   softmax(x)_i     = exp(x_i - m) / sum_j exp(x_j - m),  m = max_j x_j  (torch.softmax)
 *   log_softmax(x)_i = x_i - m - log sum_j exp(x_j - m)                    (torch.log_softmax)
 * Subtracting the row max keeps exp in range. A row of -inf only (fully masked) gives softmax
 * 0 and log_softmax -inf, and a zero gradient (PyTorch gives NaN there).
 * Backward:  softmax:     dx = y (dy - sum(dy y))
 *            log_softmax: dx = dy - softmax(x) sum(dy),  softmax(x) = exp(y)
 * Nothing is saved: the backward reads the output y from the tape entry.
 * argmax: I32 index of the row maximum (ties: lowest index; NaN wins, as torch.argmax); it has
 * no gradient and refuses to run on inputs that require one.
 */
#include "../kernels/softmax.h"
#include "../kernels/backend.h"

static void softmax_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_real *dx = qkv__grad(ctx, e->in[0]);
    if (!dx) return;
    const qkv_tensor *y = e->out;
    ctx->backend->softmax->bwd(e->i[0] != 0, qkv__rows(y), qkv__last(y), qkv__data(y),
                                      (const qkv_real *)y->grad, dx);
}

static const qkv_op_desc softmax_op = {"softmax", softmax_backward};
static const qkv_op_desc log_softmax_op = {"log_softmax", softmax_backward};

static qkv_tensor *softmax(qkv_ctx *ctx, qkv_tensor *x, bool log_) {
    const qkv_op_desc *desc = log_ ? &log_softmax_op : &softmax_op;
    if (!QKV_OP_BEGIN(ctx, desc->name, x)) return NULL;
    if (!qkv__check_real(ctx, desc->name, x, "x")) return NULL;
    char bx[96];
    if (x->ndim < 1)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "%s: x %s must have at least one dim", desc->name,
                        qkv_tensor_shape_str(x, bx, sizeof bx));
    x = qkv__contig(ctx, x);
    qkv_tensor *y = qkv__alloc_like(ctx, x); /* (..., C) */
    if (!y) return NULL;
    ctx->backend->softmax->fwd(log_, qkv__rows(x), qkv__last(x), qkv__data(x), qkv__data(y));
    qkv_tape_entry *e = qkv__record(ctx, desc, y, 1, &x);
    if (e) e->i[0] = log_;
    return y;
}

qkv_tensor *qkv_softmax(qkv_ctx *ctx, qkv_tensor *x) {
    return softmax(ctx, x, false);
}
qkv_tensor *qkv_log_softmax(qkv_ctx *ctx, qkv_tensor *x) {
    return softmax(ctx, x, true);
}

qkv_tensor *qkv_argmax(qkv_ctx *ctx, qkv_tensor *x) {
    if (!QKV_OP_BEGIN(ctx, "argmax", x)) return NULL;
    if (!qkv__check_real(ctx, "argmax", x, "x")) return NULL;
    char bx[96];
    if (x->ndim < 1 || qkv__last(x) < 1 || qkv__last(x) > INT32_MAX)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "argmax: x %s must be (..., C) with 1 <= C <= 2^31-1",
                        qkv_tensor_shape_str(x, bx, sizeof bx));
    if (!qkv__refuse_grad(ctx, "argmax", 1, &x)) return NULL;
    x = qkv__contig(ctx, x);
    qkv_tensor *y = qkv__alloc(ctx, QKV_I32, x->ndim - 1, x->shape); /* (...) */
    if (!y) return NULL;
    ctx->backend->softmax->argmax(qkv__rows(x), qkv__last(x), qkv__data(x), qkv__idata(y));
    return y;
}
