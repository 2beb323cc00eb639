/*
 * softmax_cpu.c: fast softmax kernels. OpenMP over rows (rows are independent, so results never
 * depend on the thread count); per row a vectorised max, one pass computing exp and its double
 * lane sum (rowreduce.h), one vectorised pass scaling. exp is rowreduce.h's vectorisable
 * qkv__exp_r (float build), within about 1 ulp.
 */
#include "softmax.h"
#include "rowreduce.h"

#include <math.h>

#define SOFTMAX_GRAIN 16384 /* elements below which a loop stays on one thread */

QKV_ROW_INLINE void fwd_row(bool log_, int64_t C, const qkv_real *restrict x,
                            qkv_real *restrict y) {
    const qkv_real m = qkv__row_max(x, C);
    if (m == -(qkv_real)INFINITY) { /* every element is -inf: fully masked */
        const qkv_real fill = log_ ? -(qkv_real)INFINITY : 0;
        QKV_LANE_LOOP(c, C, y[c] = fill;);
    } else if (log_) {
        const double ls = log(qkv__row_sum_exp(x, m, C));
        QKV_LANE_LOOP(c, C, y[c] = (qkv_real)(((double)x[c] - m) - ls););
    } else {
        const qkv_real inv = (qkv_real)(1.0 / qkv__row_exp(x, m, y, C));
        QKV_LANE_LOOP(c, C, y[c] *= inv;);
    }
}

static void fwd(bool log_, int64_t N, int64_t C, const qkv_real *x, qkv_real *y) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (N * C > SOFTMAX_GRAIN)
#endif
    for (int64_t r = 0; r < N; r++) {
        if (log_)
            fwd_row(true, C, x + r * C, y + r * C);
        else
            fwd_row(false, C, x + r * C, y + r * C);
    }
}

QKV_ROW_INLINE void bwd_row(bool log_, int64_t C, const qkv_real *restrict y,
                            const qkv_real *restrict dy, qkv_real *restrict dx) {
    if (log_) {
        if (qkv__row_max(y, C) == -(qkv_real)INFINITY) return; /* fully masked row */
        const qkv_real sdy = (qkv_real)qkv__row_sum(dy, C);
        QKV_LANE_LOOP(c, C, dx[c] += dy[c] - qkv__exp_r(y[c]) * sdy;);
    } else { /* a masked row has y = 0, so its gradient is 0 by the formula */
        const qkv_real dot = (qkv_real)qkv__row_dot(dy, y, C);
        QKV_LANE_LOOP(c, C, dx[c] += y[c] * (dy[c] - dot););
    }
}

static void bwd(bool log_, int64_t N, int64_t C, const qkv_real *y, const qkv_real *dy,
                qkv_real *dx) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (N * C > SOFTMAX_GRAIN)
#endif
    for (int64_t r = 0; r < N; r++) {
        if (log_)
            bwd_row(true, C, y + r * C, dy + r * C, dx + r * C);
        else
            bwd_row(false, C, y + r * C, dy + r * C, dx + r * C);
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
