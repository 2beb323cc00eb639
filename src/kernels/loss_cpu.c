/*
 * loss_cpu.c: fast cross-entropy kernels. OpenMP over rows (independent: results never depend
 * on the thread count); per row a vectorised max, one pass of exp with double lane sums
 * (rowreduce.h), and for label smoothing one lane sum of the logits. The backward recomputes
 * softmax from the saved lse in one vectorised pass; exp is rowreduce.h's vectorisable
 * qkv__exp_r (float build), within about 1 ulp.
 */
#include "loss.h"
#include "rowreduce.h"

#include <math.h>

#define LOSS_GRAIN 16384 /* elements below which a loop stays on one thread */

static void ce_fwd(int64_t N, int64_t V, const qkv_real *x, const int32_t *t, int32_t ignore,
                   double eps, double *lse, double *row_loss, int64_t n_valid, qkv_real *loss) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (N * V > LOSS_GRAIN)
#endif
    for (int64_t r = 0; r < N; r++) {
        lse[r] = row_loss[r] = 0;
        if (t[r] == ignore) continue;
        const qkv_real *xr = x + r * V;
        const qkv_real m = qkv__row_max(xr, V);
        const double l = (double)m + log(qkv__row_sum_exp(xr, m, V));
        double row = (1 - eps) * (l - (double)xr[t[r]]);
        if (eps > 0) row += eps * (l - qkv__row_sum(xr, V) / (double)V);
        lse[r] = l;
        row_loss[r] = row;
    }
    loss[0] = qkv__ce_mean(row_loss, N, n_valid);
}

/* dx[v] += scale (exp(x[v] - lse) - eps / V) over one row (the target's -scale (1 - eps) is
 * added by the caller). */
QKV_ROW_INLINE void ce_bwd_row(int64_t V, const qkv_real *restrict x, double lse, qkv_real scale,
                               qkv_real smooth, qkv_real *restrict dx) {
    QKV_LANE_LOOP(v, V, dx[v] += scale * (qkv__exp_r((qkv_real)((double)x[v] - lse)) - smooth););
}

static void ce_bwd(int64_t N, int64_t V, const qkv_real *x, const int32_t *t, int32_t ignore,
                   double eps, const double *lse, const qkv_real *dloss, int64_t n_valid, qkv_real *dx) {
    const double scale = (double)dloss[0] / (double)n_valid;
    const qkv_real sc = (qkv_real)scale, smooth = (qkv_real)(eps / (double)V);
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (N * V > LOSS_GRAIN)
#endif
    for (int64_t r = 0; r < N; r++) {
        if (t[r] == ignore) continue;
        ce_bwd_row(V, x + r * V, lse[r], sc, smooth, dx + r * V);
        dx[r * V + t[r]] -= (qkv_real)(scale * (1 - eps));
    }
}

const qkv_loss_kernels qkv_loss_cpu = {ce_fwd, ce_bwd};
