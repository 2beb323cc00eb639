/* ops/shape.h: copies that change layout: contiguous, head split/merge, concatenation. */
#ifndef QKV_OPS_SHAPE_H
#define QKV_OPS_SHAPE_H
#include "../qkv_tensor.h"
#ifdef __cplusplus
extern "C" {
#endif

/* A contiguous copy of a (possibly strided) view; returns x itself when already contiguous. */
QKV_API qkv_tensor *qkv_contiguous(qkv_ctx *ctx, qkv_tensor *x);
/* (B, T, H*D) -> (B, H, T, D) as a strided view (no copy). */
QKV_API qkv_tensor *qkv_split_heads(qkv_ctx *ctx, qkv_tensor *x, int n_heads);
/* (B, H, T, D) -> (B, T, H*D), contiguous (one copy). */
QKV_API qkv_tensor *qkv_merge_heads(qkv_ctx *ctx, qkv_tensor *x);
/* Concatenate n tensors along dim; all other dims must match. */
QKV_API qkv_tensor *qkv_concat(qkv_ctx *ctx, qkv_tensor *const *xs, int n, int dim);

#ifdef __cplusplus
}
#endif
#endif
