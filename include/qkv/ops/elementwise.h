/* ops/elementwise.h: pointwise arithmetic and activations, dropout, reductions. */
#ifndef QKV_OPS_ELEMENTWISE_H
#define QKV_OPS_ELEMENTWISE_H
#include "../qkv_tensor.h"
#ifdef __cplusplus
extern "C" {
#endif

/* a + b and a * b with broadcasting of b over a: b's shape must equal a trailing part of a's
 * shape, where any of b's dims may also be 1 (bias (C) onto (B, T, C); bias (H, T, S) onto
 * (B, H, T, S); (B, 1, 1, S) onto (B, H, T, S)). The output has a's shape. */
QKV_API qkv_tensor *qkv_add(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b);
QKV_API qkv_tensor *qkv_mul(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b);
/* s * x */
QKV_API qkv_tensor *qkv_scale(qkv_ctx *ctx, qkv_tensor *x, double s);
/* A tensor of the given shape (ndim 0 .. QKV_MAX_DIMS) with every element `value` (rounded to
 * qkv_real once): a constant, no gradient. */
QKV_API qkv_tensor *qkv_full(qkv_ctx *ctx, int ndim, const int64_t *shape, double value);

QKV_API qkv_tensor *qkv_relu(qkv_ctx *ctx, qkv_tensor *x);
typedef enum qkv_gelu_kind {
    QKV_GELU_ERF = 0, /* x/2 (1 + erf(x/sqrt 2)): torch's default */
    QKV_GELU_TANH = 1 /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): approximate='tanh';
                         evaluated as x / (1 + e^{-2u}), u the tanh's argument (no cancellation) */
} qkv_gelu_kind;
QKV_API qkv_tensor *qkv_gelu(qkv_ctx *ctx, qkv_tensor *x, qkv_gelu_kind kind);
QKV_API qkv_tensor *qkv_tanh(qkv_ctx *ctx, qkv_tensor *x);
QKV_API qkv_tensor *qkv_sigmoid(qkv_ctx *ctx, qkv_tensor *x);

/* Inverted dropout: in training mode each element is zeroed with probability p and the rest are
 * scaled by 1/(1-p); in evaluation mode (or p = 0) it returns x itself. The keep decision of
 * element i is Philox(seed, step, call, i): no mask is stored, backward regenerates it. */
QKV_API qkv_tensor *qkv_dropout(qkv_ctx *ctx, qkv_tensor *x, double p);
/* dropout(relu(x), p) fused: the same bits as the two ops (same random stream), one pass, no
 * ReLU output kept, and a backward that needs no random numbers (y > 0 marks the elements with
 * a gradient). In evaluation mode (or p = 0) it is qkv_relu. The feed-forward block uses it. */
QKV_API qkv_tensor *qkv_relu_dropout(qkv_ctx *ctx, qkv_tensor *x, double p);
/* x + dropout(f, p) for a residual connection (x and f of one shape): the bits of
 * qkv_add(x, qkv_dropout(f, p)) without keeping dropout(f); the backward regenerates the mask.
 * In evaluation mode (or p = 0) it is qkv_add. */
QKV_API qkv_tensor *qkv_add_dropout(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *f, double p);

/* Sum and mean of all elements -> scalar (ndim 0). */
QKV_API qkv_tensor *qkv_sum(qkv_ctx *ctx, qkv_tensor *x);
QKV_API qkv_tensor *qkv_mean(qkv_ctx *ctx, qkv_tensor *x);

#ifdef __cplusplus
}
#endif
#endif
