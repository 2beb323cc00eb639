/*
 * linear_relu_dropout.c: the first half of the feed-forward block as one op,
 *
 *   y = dropout(relu(x W^T + b), p)              x (..., I), W (O, I), b (O) -> y (..., O)
 *
 * with the bits of qkv_linear followed by qkv_relu_dropout (the same GEMM, the same random
 * stream). The ReLU and the dropout run in place on the GEMM's output, so the pre-activation
 * (..., O), the widest tensor of a Transformer layer (O = dim_feedforward), is never kept:
 * nothing in the backward needs it. With y > 0 exactly where the pre-activation was positive
 * and the element kept,
 *
 *   d pre = [y > 0] dy / (1 - p),   then linear's  dx += d pre W,  dW += d pre^T x,  db += sum d pre
 *
 * where d pre lives in a temporary buffer for the duration of the backward. In evaluation mode
 * (or p = 0) the same holds with p = 0. Saved: nothing beyond y and the inputs.
 */
#include "../kernels/elementwise.h"
#include "../kernels/backend.h"
#include "ops_internal.h"

static void linear_relu_dropout_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_tensor *x = e->in[0], *w = e->in[1], *b = e->n_in > 2 ? e->in[2] : NULL;
    const int64_t n = qkv_tensor_numel(e->out);
    const size_t bytes = (size_t)n * sizeof(qkv_real);
    qkv_real *dpre = qkv__grad_scratch(ctx, bytes); /* (..., O) */
    if (!dpre) return;
    ctx->backend->elementwise->relu_dropout_bwd(n, (qkv_real)(1.0 / (1.0 - e->f[0])), qkv__data(e->out),
                                                       (const qkv_real *)e->out->grad, dpre, false);
    qkv__linear_grads(ctx, x, w, b, dpre);
    qkv__grad_scratch_release(ctx, dpre, bytes);
}

static const qkv_op_desc linear_relu_dropout_op = {"linear_relu_dropout", linear_relu_dropout_backward};

qkv_tensor *qkv_linear_relu_dropout(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *weight, qkv_tensor *bias, double p) {
    if (!QKV_OP_BEGIN(ctx, "linear_relu_dropout", x, weight)) return NULL;
    if (!(p >= 0 && p < 1))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "linear_relu_dropout: p = %g is not in [0, 1)", p);
    qkv_tensor *y = qkv__linear_compute(ctx, "linear_relu_dropout", &x, &weight, &bias); /* (..., O) */
    if (!y) return NULL;
    const qkv_elementwise_kernels *kern = ctx->backend->elementwise;
    const int64_t n = qkv_tensor_numel(y);
    const bool dropout_on = ctx->training && p > 0;
    if (dropout_on) /* in place: element i is read, then written */
        kern->dropout(n, p, ctx->seed, ctx->step, qkv__next_stream(ctx), true, qkv__data(y), qkv__data(y), false);
    else
        kern->unary_fwd(QKV_UN_RELU, n, qkv__data(y), qkv__data(y));
    qkv_tape_entry *e = qkv__record(ctx, &linear_relu_dropout_op, y, bias ? 3 : 2, (qkv_tensor *[]){x, weight, bias});
    if (e) e->f[0] = dropout_on ? p : 0;
    return y;
}
