/*
 * ops_internal.h: stages of the ops that other ops and the modules compose from, not part of the
 * public API: the linear layer's product and gradients (fused ops built on it), the residual sum
 * written over a sub-layer's output and its fused LayerNorm (the layers' residual blocks), and
 * the image tokenisers' argument checks (the patch front-end).
 */
#ifndef QKV_OPS_INTERNAL_H
#define QKV_OPS_INTERNAL_H

#include "../core/internal.h"

/* Linear layers (src/ops/dense.c), shared with the fused ops built on them.
 * qkv__linear_compute: validate (messages name op), make the operands contiguous (updating the
 * pointers) and return y = x W^T + b without recording anything.
 * qkv__linear_grads: dx += dy W, dW += dy^T x, db += sum_rows dy for the gradients that exist. */
qkv_tensor *qkv__linear_compute(qkv_ctx *ctx, const char *op, qkv_tensor **x, qkv_tensor **weight,
                                qkv_tensor **bias);
void qkv__linear_grads(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *w, qkv_tensor *b, const qkv_real *dy);

/* qkv_add_dropout(x, f, p) with the same bits, forward and backward, written over f's storage
 * where f owns it (training, p > 0): for a residual connection around a sub-layer whose output f
 * nothing reads again (the final projection of attention or the feed-forward block: a linear's
 * backward reads its input and weight, never its output), so the step keeps one (B, T, C) tensor
 * fewer per sub-layer. Otherwise it is qkv_add_dropout. */
qkv_tensor *qkv__add_dropout_over(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *f, double p);
/* Whether f's storage can take x + f: f owns its contiguous storage, x does not share it, both
 * real with the same shape. */
bool qkv__sum_fits_over(const qkv_tensor *x, const qkv_tensor *f);
/* qkv_layernorm(qkv__add_dropout_over(x, f, p), weight, bias, eps) with the same bits; where
 * nothing needs a gradient and dropout does not draw (inference), one pass per row that writes
 * the sum over f's storage (f, as there, must be an output nothing reads again) and keeps no
 * statistics: a post-LN residual block of a decoding step or an evaluation. */
qkv_tensor *qkv__add_layernorm_over(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *f, double p,
                                    qkv_tensor *weight, qkv_tensor *bias, double eps);

/* The argument checks of the image tokenisers (qkv_image_patches, qkv_image_windows): pixels a
 * non-empty real (B, H, W, Ch) tensor, H and W multiples of patch_size >= 1; false with the
 * context's error set (messages start with op). src/ops/image_windows.c. */
bool qkv__check_patch_grid(qkv_ctx *ctx, const char *op, const qkv_tensor *pixels, int64_t patch_size);

#endif
