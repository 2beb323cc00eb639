/* ops/norm.h: LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019) over the last dim. */
#ifndef QKV_OPS_NORM_H
#define QKV_OPS_NORM_H
#include "../qkv_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

/* y = (x - mean) / sqrt(var + eps) * weight + bias, biased variance, as torch.nn.LayerNorm.
 * x (..., C), weight (C) or NULL, bias (C) or NULL. Saves mean and rstd per row. */
QKV_API qkv_tensor *qkv_layernorm(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *weight,
                                  qkv_tensor *bias, double eps);
/* y = x / sqrt(mean(x^2) + eps) * weight. x (..., C), weight (C) or NULL. Saves rstd per row. */
QKV_API qkv_tensor *qkv_rmsnorm(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *weight, double eps);

#ifdef __cplusplus
}
#endif
#endif
