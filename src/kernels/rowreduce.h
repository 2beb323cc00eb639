/*
 * kernels/rowreduce.h: row reductions shared by the fast last-dim kernels (norm, softmax, loss).
 *
 * Without -ffast-math a compiler may not reorder a floating-point sum, so a plain `s += x[i]`
 * loop runs one element at a time. These helpers keep QKV_LANES independent partial sums
 * (acc[k] collects x[i] for i = k mod QKV_LANES), which the compiler turns into vector adds, and
 * combine the lanes in a fixed tree at the end. Partial sums are double whatever qkv_real is, so
 * the fast kernels lose no accuracy against the reference kernels' double accumulation.
 * The order of summation depends only on n, never on the thread count.
 */
#ifndef QKV_KERNELS_ROWREDUCE_H
#define QKV_KERNELS_ROWREDUCE_H

#include "../core/internal.h"

#include <math.h>

#define QKV_LANES 8

/* exp in the precision of qkv_real (expf in the float build). */
static inline qkv_real qkv__exp_r(qkv_real x) {
#ifdef QKV_DOUBLE
    return exp(x);
#else
    return expf(x);
#endif
}

static inline double qkv__lanes_total(const double acc[QKV_LANES]) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* sum_i x[i] */
static inline double qkv__row_sum(const qkv_real *x, int64_t n) {
    double acc[QKV_LANES] = {0};
    int64_t i = 0;
    for (; i + QKV_LANES <= n; i += QKV_LANES)
        for (int k = 0; k < QKV_LANES; k++)
            acc[k] += (double)x[i + k];
    for (int k = 0; i < n; i++, k++)
        acc[k] += (double)x[i];
    return qkv__lanes_total(acc);
}

/* sum_i a[i] b[i] */
static inline double qkv__row_dot(const qkv_real *a, const qkv_real *b, int64_t n) {
    double acc[QKV_LANES] = {0};
    int64_t i = 0;
    for (; i + QKV_LANES <= n; i += QKV_LANES)
        for (int k = 0; k < QKV_LANES; k++)
            acc[k] += (double)a[i + k] * (double)b[i + k];
    for (int k = 0; i < n; i++, k++)
        acc[k] += (double)a[i] * (double)b[i];
    return qkv__lanes_total(acc);
}

/* sum_i (x[i] - c)^2 */
static inline double qkv__row_sumsq(const qkv_real *x, double c, int64_t n) {
    double acc[QKV_LANES] = {0};
    int64_t i = 0;
    for (; i + QKV_LANES <= n; i += QKV_LANES)
        for (int k = 0; k < QKV_LANES; k++) {
            double d = (double)x[i + k] - c;
            acc[k] += d * d;
        }
    for (int k = 0; i < n; i++, k++) {
        double d = (double)x[i] - c;
        acc[k] += d * d;
    }
    return qkv__lanes_total(acc);
}

/* max_i x[i]: -inf for n = 0, NaN when some x[i] is NaN (so NaN reaches the output). */
static inline qkv_real qkv__row_max(const qkv_real *x, int64_t n) {
    qkv_real acc[QKV_LANES];
    for (int k = 0; k < QKV_LANES; k++)
        acc[k] = -(qkv_real)INFINITY;
    int64_t i = 0;
    for (; i + QKV_LANES <= n; i += QKV_LANES)
        for (int k = 0; k < QKV_LANES; k++) {
            qkv_real v = x[i + k];
            acc[k] = (v > acc[k] || v != v) ? v : acc[k]; /* once NaN, acc[k] stays NaN */
        }
    for (int k = 0; i < n; i++, k++)
        acc[k] = (x[i] > acc[k] || x[i] != x[i]) ? x[i] : acc[k];
    qkv_real m = acc[0];
    for (int k = 1; k < QKV_LANES; k++)
        m = (acc[k] > m || acc[k] != acc[k]) ? acc[k] : m;
    return m;
}

/* sum_i exp(x[i] - m), writing e[i] = exp(x[i] - m) when e is not NULL. */
static inline double qkv__row_sum_exp(const qkv_real *x, qkv_real m, qkv_real *e, int64_t n) {
    double acc[QKV_LANES] = {0};
    int64_t i = 0;
    for (; i + QKV_LANES <= n; i += QKV_LANES)
        for (int k = 0; k < QKV_LANES; k++) {
            qkv_real v = qkv__exp_r(x[i + k] - m);
            if (e) e[i + k] = v;
            acc[k] += (double)v;
        }
    for (int k = 0; i < n; i++, k++) {
        qkv_real v = qkv__exp_r(x[i] - m);
        if (e) e[i] = v;
        acc[k] += (double)v;
    }
    return qkv__lanes_total(acc);
}

#endif
