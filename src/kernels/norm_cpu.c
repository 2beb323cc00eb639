/*
 * norm_cpu.c: fast LayerNorm / RMSNorm kernels.
 *
 * Forward and dx: OpenMP over rows; per row two passes for the statistics (mean, then the sum of
 * squared deviations: stable, and the row is in L1 for the second pass) with vectorised double
 * lane sums (rowreduce.h), then one vectorised pass writing the output. The row loops are
 * compiled per vector width (QKV_CLONES) with the same bits in each: the baseline's SSE2 does two
 * doubles per instruction, AVX-512 eight.
 * dw, db: in the same pass, each fixed chunk of NORM_ROWS rows sums its rows into its own
 * partial (C) in scratch; the partials are then added in chunk order. The chunks do not depend
 * on the thread count, so neither do the sums, and no two threads write the same memory.
 * The per-row helpers take restrict pointers and are always inlined, so their flags are
 * constants and their QKV_LANE_LOOPs vectorise.
 */
#include "norm.h"
#include "rowreduce.h"

#include <math.h>

#define NORM_GRAIN 4096 /* elements below which a loop stays on one thread */
#define NORM_ROWS 64     /* rows per dw/db partial sum: fixed, so no sum depends on the threads */
#define NORM_COLS 64     /* columns per block when adding up the partials */

/* y = (x - mu) rs [* w] [+ b] over one row. */
QKV_ROW_INLINE void fwd_row(int64_t C, const qkv_real *restrict x, const qkv_real *restrict w,
                            const qkv_real *restrict b, double mu, double rs,
                            qkv_real *restrict y) {
    if (w && b)
        QKV_LANE_LOOP(c, C, y[c] = (qkv_real)(((double)x[c] - mu) * rs * w[c] + b[c]););
    else if (w)
        QKV_LANE_LOOP(c, C, y[c] = (qkv_real)(((double)x[c] - mu) * rs * w[c]););
    else if (b)
        QKV_LANE_LOOP(c, C, y[c] = (qkv_real)(((double)x[c] - mu) * rs + b[c]););
    else
        QKV_LANE_LOOP(c, C, y[c] = (qkv_real)(((double)x[c] - mu) * rs););
}

/* The statistics of one row, then its output; returns rstd, *mu the mean (0 when !center). */
QKV_ROW_INLINE double norm_row(bool center, int64_t C, double eps, const qkv_real *restrict x,
                               const qkv_real *restrict w, const qkv_real *restrict b,
                               qkv_real *restrict y, double *mu) {
    *mu = center ? qkv__row_sum(x, C) / (double)C : 0;
    const double rs = 1.0 / sqrt(qkv__row_sumsq(x, *mu, C) / (double)C + eps);
    fwd_row(C, x, w, b, *mu, rs, y);
    return rs;
}

/* Rows [r0, r1) of the forward. Compiled once per vector width (QKV_CLONES): every sum keeps
 * rowreduce.h's QKV_LANES partial sums in a fixed order and every element is computed on its own
 * (no contraction, -ffp-contract=off), so each clone gives the baseline's bits, only wider. */
QKV_CLONES
static void fwd_rows(bool center, int64_t r0, int64_t r1, int64_t C, double eps, const qkv_real *x,
                     const qkv_real *w, const qkv_real *b, qkv_real *y, double *mean,
                     double *rstd) {
    for (int64_t r = r0; r < r1; r++) {
        double mu;
        rstd[r] = norm_row(center, C, eps, x + r * C, w, b, y + r * C, &mu);
        if (mean) mean[r] = mu;
    }
}

/* Rows [r0, r1) of add_fwd: each row's sum x + f over f, then fwd_rows' arithmetic on it while
 * it is in L1 (clones as fwd_rows). */
QKV_CLONES
static void add_fwd_rows(bool center, int64_t r0, int64_t r1, int64_t C, double eps,
                         const qkv_real *x, qkv_real *f, const qkv_real *w, const qkv_real *b,
                         qkv_real *y) {
    for (int64_t r = r0; r < r1; r++) {
        const qkv_real *restrict xr = x + r * C;
        qkv_real *restrict fr = f + r * C;
        QKV_LANE_LOOP(c, C, fr[c] = xr[c] + fr[c];);
        double mu;
        norm_row(center, C, eps, fr, w, b, y + r * C, &mu);
    }
}

static void fwd(bool center, int64_t N, int64_t C, double eps, const qkv_real *x, const qkv_real *w,
                const qkv_real *b, qkv_real *y, double *mean, double *rstd) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (N * C > NORM_GRAIN)
#endif
    for (int64_t r = 0; r < N; r++)
        fwd_rows(center, r, r + 1, C, eps, x, w, b, y, mean, rstd);
}

/* dx (+)= rstd (g - mean_g - xhat mean_gx) over one row, g = dy [* w] (= when overwrite). has_w
 * and overwrite are constants at each call site, so the branches on them leave the vectorised
 * loops. */
QKV_ROW_INLINE void bwd_row(bool center, bool has_w, bool overwrite, int64_t C, const qkv_real *restrict x,
                            const qkv_real *restrict w, double mu, double rs,
                            const qkv_real *restrict dy, qkv_real *restrict dx) {
    double sg[QKV_LANES] = {0}, sgx[QKV_LANES] = {0}; /* lanes of sum g, sum g xhat */
    int64_t c = 0;
    for (; c + QKV_LANES <= C; c += QKV_LANES)
        for (int k = 0; k < QKV_LANES; k++) {
            const double g = (double)dy[c + k] * (has_w ? (double)w[c + k] : 1.0);
            sg[k] += g;
            sgx[k] += g * (((double)x[c + k] - mu) * rs);
        }
    for (int k = 0; c < C; c++, k++) {
        const double g = (double)dy[c] * (has_w ? (double)w[c] : 1.0);
        sg[k] += g;
        sgx[k] += g * (((double)x[c] - mu) * rs);
    }
    const double mean_g = center ? qkv__lanes_total(sg) / (double)C : 0;
    const double mean_gx = qkv__lanes_total(sgx) / (double)C;
    QKV_LANE_LOOP(i, C, {
        const double g = (double)dy[i] * (has_w ? (double)w[i] : 1.0);
        const qkv_real d = (qkv_real)(rs * (g - mean_g - (((double)x[i] - mu) * rs) * mean_gx));
        dx[i] = overwrite ? d : dx[i] + d;
    });
}

/* sw[j] += dy xhat, sb[j] += dy over one row. */
QKV_ROW_INLINE void col_sums(int64_t C, const qkv_real *restrict x, const qkv_real *restrict dy,
                             double mu, double rs, double *restrict sw, double *restrict sb) {
    QKV_LANE_LOOP(j, C, {
        sw[j] += (double)dy[j] * (((double)x[j] - mu) * rs);
        sb[j] += (double)dy[j];
    });
}

static size_t bwd_scratch(int64_t N, int64_t C) {
    return sizeof(double) * 2 * (size_t)C * (size_t)((N + NORM_ROWS - 1) / NORM_ROWS);
}

/* Rows [r0, r1) of the backward: dx for each row, and, unless sw is NULL, the rows' column
 * sums added to sw and sb. Cloned as fwd_rows, with the same bits in every clone. */
QKV_CLONES
static void bwd_rows(bool center, int64_t r0, int64_t r1, int64_t C, const qkv_real *x,
                     const qkv_real *w, const double *mean, const double *rstd, const qkv_real *dy,
                     qkv_real *dx, bool dx_overwrite, double *sw, double *sb) {
    for (int64_t r = r0; r < r1; r++) {
        const double mu = mean ? mean[r] : 0, rs = rstd[r];
        const qkv_real *xr = x + r * C, *dyr = dy + r * C;
        if (dx && w && dx_overwrite)
            bwd_row(center, true, true, C, xr, w, mu, rs, dyr, dx + r * C);
        else if (dx && w)
            bwd_row(center, true, false, C, xr, w, mu, rs, dyr, dx + r * C);
        else if (dx && dx_overwrite)
            bwd_row(center, false, true, C, xr, w, mu, rs, dyr, dx + r * C);
        else if (dx)
            bwd_row(center, false, false, C, xr, w, mu, rs, dyr, dx + r * C);
        if (sw) col_sums(C, xr, dyr, mu, rs, sw, sb);
    }
}

/* One pass over x and dy: chunk ch of NORM_ROWS rows writes dx for its rows and its partial
 * column sums into scratch[ch] = (sw (C), sb (C)); a second, small pass adds the partials of
 * every column in chunk order. */
static void bwd(bool center, int64_t N, int64_t C, const qkv_real *x, const qkv_real *w,
                const double *mean, const double *rstd, const qkv_real *dy, qkv_real *dx,
                bool dx_overwrite, qkv_real *dw, qkv_real *db, double *scratch) {
    const bool params = dw || db;
    const int64_t chunks = (N + NORM_ROWS - 1) / NORM_ROWS;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (N * C > NORM_GRAIN)
#endif
    for (int64_t ch = 0; ch < chunks; ch++) {
        double *sw = params ? scratch + ch * 2 * C : NULL, *sb = params ? sw + C : NULL;
        if (params) memset(sw, 0, sizeof(double) * 2 * (size_t)C);
        const int64_t r1 = (ch + 1) * NORM_ROWS < N ? (ch + 1) * NORM_ROWS : N;
        bwd_rows(center, ch * NORM_ROWS, r1, C, x, w, mean, rstd, dy, dx, dx_overwrite, sw, sb);
    }
    if (!params) return;
    const int64_t blocks = (C + NORM_COLS - 1) / NORM_COLS;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (chunks * C > NORM_GRAIN)
#endif
    for (int64_t blk = 0; blk < blocks; blk++) {
        const int64_t c0 = blk * NORM_COLS, nc = C - c0 < NORM_COLS ? C - c0 : NORM_COLS;
        double sw[NORM_COLS] = {0}, sb[NORM_COLS] = {0};
        for (int64_t ch = 0; ch < chunks; ch++) {
            const double *pw = scratch + ch * 2 * C + c0, *pb = pw + C;
            for (int64_t j = 0; j < nc; j++) {
                sw[j] += pw[j];
                sb[j] += pb[j];
            }
        }
        for (int64_t j = 0; j < nc; j++) {
            if (dw) dw[c0 + j] += (qkv_real)sw[j];
            if (db) db[c0 + j] += (qkv_real)sb[j];
        }
    }
}

static void add_fwd(bool center, int64_t N, int64_t C, double eps, const qkv_real *x, qkv_real *f,
                    const qkv_real *w, const qkv_real *b, qkv_real *y) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (N * C > NORM_GRAIN)
#endif
    for (int64_t r = 0; r < N; r++)
        add_fwd_rows(center, r, r + 1, C, eps, x, f, w, b, y);
}

const qkv_norm_kernels qkv_norm_cpu = {fwd, bwd, bwd_scratch, add_fwd};
