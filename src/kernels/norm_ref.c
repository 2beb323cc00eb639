/* norm_ref.c: the reference (oracle) LayerNorm / RMSNorm kernels: plain loops, double sums. */
#include "norm.h"

#include <math.h>

static void fwd(bool center, int64_t N, int64_t C, double eps, const qkv_real *x, const qkv_real *w,
                const qkv_real *b, qkv_real *y, double *mean, double *rstd) {
    for (int64_t r = 0; r < N; r++) {
        const qkv_real *xr = x + r * C;
        double mu = 0;
        if (center) {
            for (int64_t c = 0; c < C; c++)
                mu += xr[c];
            mu /= (double)C;
        }
        double var = 0;
        for (int64_t c = 0; c < C; c++)
            var += ((double)xr[c] - mu) * ((double)xr[c] - mu);
        var /= (double)C;
        const double rs = 1.0 / sqrt(var + eps);
        for (int64_t c = 0; c < C; c++) {
            double v = ((double)xr[c] - mu) * rs;
            if (w) v *= w[c];
            if (b) v += b[c];
            y[r * C + c] = (qkv_real)v;
        }
        if (mean) mean[r] = mu;
        rstd[r] = rs;
    }
}

static void bwd(bool center, int64_t N, int64_t C, const qkv_real *x, const qkv_real *w,
                const double *mean, const double *rstd, const qkv_real *dy, qkv_real *dx,
                bool dx_overwrite, qkv_real *dw, qkv_real *db, double *scratch) {
    (void)scratch;
    if (dx)
        for (int64_t r = 0; r < N; r++) {
            const double mu = mean ? mean[r] : 0, rs = rstd[r];
            double sum_g = 0, sum_gx = 0; /* sum g, sum g xhat */
            for (int64_t c = 0; c < C; c++) {
                double g = (double)dy[r * C + c] * (w ? w[c] : 1);
                sum_g += g;
                sum_gx += g * ((double)x[r * C + c] - mu) * rs;
            }
            const double mean_g = center ? sum_g / (double)C : 0, mean_gx = sum_gx / (double)C;
            for (int64_t c = 0; c < C; c++) {
                double g = (double)dy[r * C + c] * (w ? w[c] : 1);
                double xhat = ((double)x[r * C + c] - mu) * rs;
                const qkv_real d = (qkv_real)(rs * (g - mean_g - xhat * mean_gx));
                dx[r * C + c] = dx_overwrite ? d : dx[r * C + c] + d;
            }
        }
    for (int64_t c = 0; c < C; c++) {
        double sw = 0, sb = 0;
        for (int64_t r = 0; r < N; r++) {
            const double mu = mean ? mean[r] : 0;
            sw += (double)dy[r * C + c] * (((double)x[r * C + c] - mu) * rstd[r]); /* dy xhat */
            sb += dy[r * C + c];
        }
        if (dw) dw[c] += (qkv_real)sw;
        if (db) db[c] += (qkv_real)sb;
    }
}

static size_t bwd_scratch(int64_t N, int64_t C) {
    (void)N, (void)C;
    return 0;
}

static void add_fwd(bool center, int64_t N, int64_t C, double eps, const qkv_real *x, qkv_real *f,
                    const qkv_real *w, const qkv_real *b, qkv_real *y) {
    for (int64_t i = 0; i < N * C; i++)
        f[i] = x[i] + f[i];
    for (int64_t r = 0; r < N; r++) {
        double rstd;
        fwd(center, 1, C, eps, f + r * C, w, b, y + r * C, NULL, &rstd);
    }
}

const qkv_norm_kernels qkv_norm_ref = {fwd, bwd, bwd_scratch, add_fwd};
