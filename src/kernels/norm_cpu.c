/*
 * norm_cpu.c: fast LayerNorm / RMSNorm kernels.
 *
 * Forward and dx: OpenMP over rows; per row two passes for the statistics (mean, then the sum of
 * squared deviations: stable, and the row is in L1 for the second pass) with vectorised double
 * lane sums (rowreduce.h), then one pass writing the output.
 * dw, db: OpenMP over fixed blocks of NORM_COLS columns; each block runs over the rows in order,
 * so the sums never depend on the thread count and no two threads touch the same column.
 */
#include "norm.h"
#include "rowreduce.h"

#include <math.h>

#define NORM_GRAIN 16384 /* elements below which a loop stays on one thread */
#define NORM_COLS 64     /* columns per dw/db block */

static void fwd(bool center, int64_t N, int64_t C, double eps, const qkv_real *x, const qkv_real *w,
                const qkv_real *b, qkv_real *y, double *mean, double *rstd) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (N * C > NORM_GRAIN)
#endif
    for (int64_t r = 0; r < N; r++) {
        const qkv_real *xr = x + r * C;
        qkv_real *yr = y + r * C;
        const double mu = center ? qkv__row_sum(xr, C) / (double)C : 0;
        const double rs = 1.0 / sqrt(qkv__row_sumsq(xr, mu, C) / (double)C + eps);
        if (w && b)
            for (int64_t c = 0; c < C; c++)
                yr[c] = (qkv_real)(((double)xr[c] - mu) * rs * (double)w[c] + (double)b[c]);
        else if (w)
            for (int64_t c = 0; c < C; c++)
                yr[c] = (qkv_real)(((double)xr[c] - mu) * rs * (double)w[c]);
        else if (b)
            for (int64_t c = 0; c < C; c++)
                yr[c] = (qkv_real)(((double)xr[c] - mu) * rs + (double)b[c]);
        else
            for (int64_t c = 0; c < C; c++)
                yr[c] = (qkv_real)(((double)xr[c] - mu) * rs);
        if (mean) mean[r] = mu;
        rstd[r] = rs;
    }
}

/* dx for one row: two passes (sum g, sum g xhat), then dx += rstd (g - mean_g - xhat mean_gx). */
static void bwd_row(bool center, int64_t C, const qkv_real *xr, const qkv_real *w, double mu,
                    double rs, const qkv_real *dyr, qkv_real *dxr) {
    double sg[QKV_LANES] = {0}, sgx[QKV_LANES] = {0};
    int64_t c = 0;
    for (; c + QKV_LANES <= C; c += QKV_LANES)
        for (int k = 0; k < QKV_LANES; k++) {
            double g = (double)dyr[c + k] * (w ? (double)w[c + k] : 1.0);
            sg[k] += g;
            sgx[k] += g * (((double)xr[c + k] - mu) * rs);
        }
    for (int k = 0; c < C; c++, k++) {
        double g = (double)dyr[c] * (w ? (double)w[c] : 1.0);
        sg[k] += g;
        sgx[k] += g * (((double)xr[c] - mu) * rs);
    }
    const double mean_g = center ? qkv__lanes_total(sg) / (double)C : 0;
    const double mean_gx = qkv__lanes_total(sgx) / (double)C;
    if (w)
        for (c = 0; c < C; c++) {
            double xhat = ((double)xr[c] - mu) * rs;
            dxr[c] += (qkv_real)(rs * ((double)dyr[c] * (double)w[c] - mean_g - xhat * mean_gx));
        }
    else
        for (c = 0; c < C; c++) {
            double xhat = ((double)xr[c] - mu) * rs;
            dxr[c] += (qkv_real)(rs * ((double)dyr[c] - mean_g - xhat * mean_gx));
        }
}

static void bwd(bool center, int64_t N, int64_t C, const qkv_real *x, const qkv_real *w,
                const double *mean, const double *rstd, const qkv_real *dy, qkv_real *dx,
                qkv_real *dw, qkv_real *db) {
    if (dx) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (N * C > NORM_GRAIN)
#endif
        for (int64_t r = 0; r < N; r++)
            bwd_row(center, C, x + r * C, w, mean ? mean[r] : 0, rstd[r], dy + r * C, dx + r * C);
    }
    if (!dw && !db) return;
    const int64_t blocks = (C + NORM_COLS - 1) / NORM_COLS;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (N * C > NORM_GRAIN)
#endif
    for (int64_t blk = 0; blk < blocks; blk++) {
        const int64_t c0 = blk * NORM_COLS, nc = C - c0 < NORM_COLS ? C - c0 : NORM_COLS;
        double sw[NORM_COLS] = {0}, sb[NORM_COLS] = {0};
        for (int64_t r = 0; r < N; r++) {
            const qkv_real *xr = x + r * C + c0, *dyr = dy + r * C + c0;
            const double mu = mean ? mean[r] : 0, rs = rstd[r];
            for (int64_t j = 0; j < nc; j++) {
                sw[j] += (double)dyr[j] * (((double)xr[j] - mu) * rs);
                sb[j] += (double)dyr[j];
            }
        }
        for (int64_t j = 0; j < nc; j++) {
            if (dw) dw[c0 + j] += (qkv_real)sw[j];
            if (db) db[c0 + j] += (qkv_real)sb[j];
        }
    }
}

const qkv_norm_kernels qkv_norm_cpu = {fwd, bwd};
