/*
 * kernels/loss.h: kernel table of the loss family: fused log-softmax + NLL with label smoothing
 * (cross-entropy) over logits x (N, V) and targets t (N). For a row whose target is not the
 * ignore index, with lse = log sum_v exp(x_v) and q = (1 - eps) onehot(t) + eps / V:
 *   row loss   = sum_v q_v (lse - x_v) = (1 - eps)(lse - x_t) + eps (lse - mean_v x_v)
 *   d row loss / dx_v = softmax(x)_v - q_v = exp(x_v - lse) - q_v
 * Targets are already checked (ignore index, or in [0, V)).
 */
#ifndef QKV_KERNELS_LOSS_H
#define QKV_KERNELS_LOSS_H

#include "../core/internal.h"

typedef struct qkv_loss_kernels {
    /* lse (N) and row_loss (N), both 0 for ignored rows. */
    void (*ce_fwd)(int64_t N, int64_t V, const qkv_real *x, const int32_t *t, int32_t ignore,
                   double eps, double *lse, double *row_loss);
    /* dx (N, V) += scale (softmax(x) - q) on every row that is not ignored. */
    void (*ce_bwd)(int64_t N, int64_t V, const qkv_real *x, const int32_t *t, int32_t ignore,
                   double eps, const double *lse, double scale, qkv_real *dx);
} qkv_loss_kernels;

extern const qkv_loss_kernels qkv_loss_ref;
extern const qkv_loss_kernels qkv_loss_cpu;

#endif
