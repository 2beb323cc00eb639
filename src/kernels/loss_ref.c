/* loss_ref.c: the reference (oracle) cross-entropy kernels: plain loops, double math. */
#include "loss.h"

#include <math.h>

static void ce_fwd(int64_t N, int64_t V, const qkv_real *x, const int32_t *t, int32_t ignore,
                   double eps, double *lse, double *row_loss, int64_t n_valid, qkv_real *loss) {
    for (int64_t r = 0; r < N; r++) {
        lse[r] = row_loss[r] = 0;
        if (t[r] == ignore) continue;
        const qkv_real *xr = x + r * V;
        double m = -INFINITY;
        for (int64_t v = 0; v < V; v++)
            if (xr[v] > m || isnan(xr[v])) m = xr[v];
        double s = 0, sx = 0;
        for (int64_t v = 0; v < V; v++) {
            s += exp((double)xr[v] - m);
            sx += xr[v];
        }
        lse[r] = m + log(s);
        row_loss[r] = (1 - eps) * (lse[r] - xr[t[r]]);
        if (eps > 0) row_loss[r] += eps * (lse[r] - sx / (double)V);
    }
    loss[0] = qkv__ce_mean(row_loss, N, n_valid);
}

static void ce_bwd(int64_t N, int64_t V, const qkv_real *x, const int32_t *t, int32_t ignore,
                   double eps, const double *lse, const qkv_real *dloss, int64_t n_valid, qkv_real *dx) {
    const double scale = (double)dloss[0] / (double)n_valid;
    for (int64_t r = 0; r < N; r++) {
        if (t[r] == ignore) continue;
        for (int64_t v = 0; v < V; v++) {
            double q = eps / (double)V + (v == t[r] ? 1 - eps : 0);
            dx[r * V + v] += (qkv_real)(scale * (exp((double)x[r * V + v] - lse[r]) - q));
        }
    }
}

const qkv_loss_kernels qkv_loss_ref = {ce_fwd, ce_bwd};
