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
    /* lse (N) and row_loss (N), both 0 for ignored rows, and loss[0] = their mean over the
     * n_valid rows that are not ignored (qkv__ce_mean), 0 when there is none. */
    void (*ce_fwd)(int64_t N, int64_t V, const qkv_real *x, const int32_t *t, int32_t ignore,
                   double eps, double *lse, double *row_loss, int64_t n_valid, qkv_real *loss);
    /* dx (N, V) += (dloss[0] / n_valid) (softmax(x) - q) on every row that is not ignored
     * (n_valid > 0; dloss the mean loss's gradient). */
    void (*ce_bwd)(int64_t N, int64_t V, const qkv_real *x, const int32_t *t, int32_t ignore,
                   double eps, const double *lse, const qkv_real *dloss, int64_t n_valid, qkv_real *dx);
} qkv_loss_kernels;

/* The mean loss from the row losses: summed in row order (the same sum for every kernel set and
 * thread count), over n_valid counted rows. */
static inline qkv_real qkv__ce_mean(const double *row_loss, int64_t N, int64_t n_valid) {
    double total = 0;
    for (int64_t r = 0; r < N; r++)
        total += row_loss[r];
    return (qkv_real)(n_valid ? total / (double)n_valid : 0.0);
}

extern const qkv_loss_kernels qkv_loss_ref;
extern const qkv_loss_kernels qkv_loss_cpu;

#endif
