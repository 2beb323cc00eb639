/*
 * softmax_cpu.c: fast softmax kernels. OpenMP over rows (rows are independent, so results never
 * depend on the thread count); per row a vectorised max, one pass computing exp and its double
 * lane sum (rowreduce.h), one pass scaling. exp runs in the precision of qkv_real.
 */
#include "softmax.h"
#include "rowreduce.h"

#include <math.h>

#define SOFTMAX_GRAIN 16384 /* elements below which a loop stays on one thread */

static void fwd(bool log_, int64_t N, int64_t C, const qkv_real *x, qkv_real *y) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (N * C > SOFTMAX_GRAIN)
#endif
    for (int64_t r = 0; r < N; r++) {
        const qkv_real *xr = x + r * C;
        qkv_real *yr = y + r * C;
        const qkv_real m = qkv__row_max(xr, C);
        if (m == -(qkv_real)INFINITY) { /* every element is -inf: fully masked */
            for (int64_t c = 0; c < C; c++)
                yr[c] = log_ ? -(qkv_real)INFINITY : 0;
            continue;
        }
        if (log_) {
            const double ls = log(qkv__row_sum_exp(xr, m, NULL, C));
            for (int64_t c = 0; c < C; c++)
                yr[c] = (qkv_real)(((double)xr[c] - m) - ls);
        } else {
            const qkv_real inv = (qkv_real)(1.0 / qkv__row_sum_exp(xr, m, yr, C));
            for (int64_t c = 0; c < C; c++)
                yr[c] *= inv;
        }
    }
}

static void bwd(bool log_, int64_t N, int64_t C, const qkv_real *y, const qkv_real *dy,
                qkv_real *dx) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (N * C > SOFTMAX_GRAIN)
#endif
    for (int64_t r = 0; r < N; r++) {
        const qkv_real *yr = y + r * C, *dyr = dy + r * C;
        qkv_real *dxr = dx + r * C;
        if (log_) {
            if (qkv__row_max(yr, C) == -(qkv_real)INFINITY) continue; /* fully masked row */
            const qkv_real sdy = (qkv_real)qkv__row_sum(dyr, C);
            for (int64_t c = 0; c < C; c++)
                dxr[c] += dyr[c] - qkv__exp_r(yr[c]) * sdy;
        } else {
            const qkv_real dot = (qkv_real)qkv__row_dot(dyr, yr, C);
            for (int64_t c = 0; c < C; c++)
                dxr[c] += yr[c] * (dyr[c] - dot);
        }
    }
}

static void argmax(int64_t N, int64_t C, const qkv_real *x, int32_t *out) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (N * C > SOFTMAX_GRAIN)
#endif
    for (int64_t r = 0; r < N; r++) {
        const qkv_real *xr = x + r * C;
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (qkv__argmax_better(xr[c], xr[best])) best = c;
        out[r] = (int32_t)best;
    }
}

const qkv_softmax_kernels qkv_softmax_cpu = {fwd, bwd, argmax};
