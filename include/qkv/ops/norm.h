/* ops/norm.h: LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019) over the last dim. */
#ifndef QKV_OPS_NORM_H
#define QKV_OPS_NORM_H
#include "../qkv_tensor.h"
#ifdef __cplusplus
extern "C" {
#endif

/* y = (x - mean) / sqrt(var + eps) * weight + bias, biased variance, as torch.nn.LayerNorm.
 * x (..., C) with C >= 1, weight (C) or NULL, bias (C) or NULL; eps finite and >= 0 (eps = 0 on
 * a constant row gives NaN, as in PyTorch). Saves mean and rstd per row. C = 1 is degenerate:
 * y = bias (or 0) and the gradient of x is 0. */
QKV_API qkv_tensor *qkv_layernorm(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *weight,
                                  qkv_tensor *bias, double eps);
/* y = x / sqrt(mean(x^2) + eps) * weight, as torch.nn.RMSNorm. x (..., C) with C >= 1,
 * weight (C) or NULL, eps finite and >= 0. Saves rstd per row. */
QKV_API qkv_tensor *qkv_rmsnorm(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *weight, double eps);

#ifdef __cplusplus
}
#endif
#endif
