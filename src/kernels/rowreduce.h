/*
 * kernels/rowreduce.h: row loops shared by the fast last-dim kernels (norm, softmax, loss).
 *
 * Vectorisation without -ffast-math. A compiler may not reorder a floating-point sum, so a plain
 * `s += x[i]` loop runs one element at a time; and GCC at -O2 (its "very cheap" vectoriser) only
 * vectorises loops whose vector code needs no scalar epilogue. Hence two idioms:
 *   - reductions keep QKV_LANES independent partial sums (acc[k] collects x[i] for
 *     i = k mod QKV_LANES), combined in a fixed tree at the end; the partial sums are double
 *     whatever qkv_real is, so the fast kernels lose no accuracy against the reference kernels'
 *     double accumulation, and the order depends only on n, never on the thread count;
 *   - elementwise row loops are written as QKV_LANE_LOOP: blocks with a constant trip count.
 * exp: libm's expf is a call the compiler cannot vectorise; qkv__exp_r is a branch-free version
 * that it can (float build).
 */
#ifndef QKV_KERNELS_ROWREDUCE_H
#define QKV_KERNELS_ROWREDUCE_H

#include "../core/internal.h"

#include <float.h>
#include <math.h>

#define QKV_LANES 8

/* for (i = 0; i < n; i++) { body }, cut into blocks of QKV_LANES iterations with a constant
 * inner trip count, plus a scalar tail. The body must not depend on the iteration order and the
 * pointers it writes must not alias those it reads (declare them restrict). */
#define QKV_LANE_LOOP(i, n, ...)                                                                   \
    do {                                                                                           \
        int64_t i##_blk = 0;                                                                       \
        for (; i##_blk + QKV_LANES <= (n); i##_blk += QKV_LANES)                                   \
            for (int i##_k = 0; i##_k < QKV_LANES; i##_k++) {                                      \
                const int64_t i = i##_blk + i##_k;                                                 \
                __VA_ARGS__                                                                        \
            }                                                                                      \
        for (int64_t i = i##_blk; i < (n); i++) {                                                  \
            __VA_ARGS__                                                                            \
        }                                                                                          \
    } while (0)

/* For row helpers with flag arguments: inlined at every call, the flags become constants and
 * the branches on them leave the loops (GCC -O2 would not always inline them by itself). */
#if defined(__GNUC__)
#define QKV_ROW_INLINE __attribute__((always_inline)) static inline
#else
#define QKV_ROW_INLINE static inline
#endif

/* e^x in the precision of qkv_real, for the fast kernels, whose arguments are x - max or
 * x - logsumexp (<= 0 up to rounding).
 * Float build: Cody-Waite reduction x = n ln2 + r, |r| <= ln2 / 2, with n rounded by the
 * 1.5 * 2^23 trick (no float-to-int conversion), Cephes' expf polynomial for e^r, and 2^n built
 * from the exponent bits. Within 1 ulp of the correctly rounded value (1.02 where the compiler
 * fuses multiply-adds). Branch-free (the
 * compiler vectorises it); -inf and results below FLT_MIN (x < -87.336) give 0, NaN stays NaN,
 * x is clamped to <= 88. Needs float arithmetic evaluated in float (FLT_EVAL_METHOD 0);
 * otherwise, and in the double build, libm's exp. */
static inline qkv_real qkv__exp_r(qkv_real x) {
#if defined(QKV_DOUBLE)
    return exp(x);
#elif FLT_EVAL_METHOD != 0
    return expf(x);
#else
    typedef union {
        float f;
        uint32_t u;
    } bits;
    const float magic = 12582912.0f; /* 1.5 * 2^23: t = magic + n has n in its low bits */
    /* xc = min(x, 88) keeping NaN, as integer masks: GCC -O2 vectorises those, not a ?: */
    const uint32_t big = -(uint32_t)(x > 88.0f);
    const bits xb = {x}, cap = {88.0f};
    bits xcb;
    xcb.u = (xb.u & ~big) | (cap.u & big);
    const float xc = xcb.f;
    const float t = xc * 1.44269504088896341f + magic, n = t - magic;
    const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f; /* ln2 = hi + lo */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const bits tb = {t}, mb = {magic};
    bits scale, y;
    scale.u = (tb.u - mb.u + 127u) << 23; /* 2^n */
    y.f = p * scale.f;
    y.u &= -(uint32_t) !(xc < -87.33654f); /* below FLT_MIN: 0 (NaN compares false: kept) */
    return y.f;
#endif
}

/* e^x in double for x <= 0 (and NaN), for scores kept in double (the decoders' log-softmax):
 * Cody-Waite reduction x = n ln2 + r, |r| <= ln2 / 2, n rounded by the 1.5 * 2^52 trick, e^r by
 * its Taylor polynomial of degree 13 (the first term left out is below 5e-18 relative) in Horner
 * form, 2^n from the exponent bits. Branch-free, as qkv__exp_r, so the lane loops vectorise it;
 * with -ffp-contract=off every vector width gives the same bits. Below -708 (where 2^n would
 * leave the normal range) the result is 0, as it is for -inf; NaN stays NaN. */
static inline double qkv__exp_nonpositive_d(double x) {
    typedef union {
        double f;
        uint64_t u;
    } bits;
    const double magic = 0x1.8p52; /* t = magic + n has n in its low bits */
    const uint64_t small = -(uint64_t)(x < -708.0); /* NaN compares false: kept */
    const bits xb = {x}, floor = {-708.0};
    bits xcb;
    xcb.u = (xb.u & ~small) | (floor.u & small);
    const double xc = xcb.f;
    const double t = xc * 1.4426950408889634 + magic, n = t - magic;
    const double r = (xc - n * 0x1.62e42fee00000p-1) - n * 0x1.a39ef35793c76p-33; /* ln2 = hi + lo */
    double p = r * (1.0 / 6227020800.0) + 1.0 / 479001600.0; /* 1/13!, 1/12! */
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    const bits tb = {t}, mb = {magic};
    bits scale, y;
    scale.u = (tb.u - mb.u + 1023u) << 52; /* 2^n */
    y.f = p * scale.f;
    y.u &= ~small;
    return y.f;
}

QKV_ROW_INLINE double qkv__lanes_total(const double acc[QKV_LANES]) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* sum_i x[i] */
QKV_ROW_INLINE double qkv__row_sum(const qkv_real *restrict x, int64_t n) {
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
QKV_ROW_INLINE double qkv__row_dot(const qkv_real *restrict a, const qkv_real *restrict b,
                                  int64_t n) {
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
QKV_ROW_INLINE double qkv__row_sumsq(const qkv_real *restrict x, double c, int64_t n) {
    double acc[QKV_LANES] = {0};
    int64_t i = 0;
    for (; i + QKV_LANES <= n; i += QKV_LANES)
        for (int k = 0; k < QKV_LANES; k++) {
            const double d = (double)x[i + k] - c;
            acc[k] += d * d;
        }
    for (int k = 0; i < n; i++, k++) {
        const double d = (double)x[i] - c;
        acc[k] += d * d;
    }
    return qkv__lanes_total(acc);
}

/* max_i x[i]: -inf for n = 0, NaN when some x[i] is NaN (so NaN reaches the output). */
QKV_ROW_INLINE qkv_real qkv__row_max(const qkv_real *restrict x, int64_t n) {
    qkv_real acc[QKV_LANES];
    for (int k = 0; k < QKV_LANES; k++)
        acc[k] = -(qkv_real)INFINITY;
    int64_t i = 0;
    for (; i + QKV_LANES <= n; i += QKV_LANES)
        for (int k = 0; k < QKV_LANES; k++) {
            const qkv_real v = x[i + k];
            acc[k] = (v > acc[k] || v != v) ? v : acc[k]; /* once NaN, acc[k] stays NaN */
        }
    for (int k = 0; i < n; i++, k++)
        acc[k] = (x[i] > acc[k] || x[i] != x[i]) ? x[i] : acc[k];
    qkv_real m = acc[0];
    for (int k = 1; k < QKV_LANES; k++)
        m = (acc[k] > m || acc[k] != acc[k]) ? acc[k] : m;
    return m;
}

/* sum_i exp(x[i] - m) */
QKV_ROW_INLINE double qkv__row_sum_exp(const qkv_real *restrict x, qkv_real m, int64_t n) {
    double acc[QKV_LANES] = {0};
    int64_t i = 0;
    for (; i + QKV_LANES <= n; i += QKV_LANES)
        for (int k = 0; k < QKV_LANES; k++)
            acc[k] += (double)qkv__exp_r(x[i + k] - m);
    for (int k = 0; i < n; i++, k++)
        acc[k] += (double)qkv__exp_r(x[i] - m);
    return qkv__lanes_total(acc);
}

/* sum_i exp(x[i] - m), the exponentials in double (qkv__exp_nonpositive_d) */
QKV_ROW_INLINE double qkv__row_sum_exp_d(const qkv_real *restrict x, double m, int64_t n) {
    double acc[QKV_LANES] = {0};
    int64_t i = 0;
    for (; i + QKV_LANES <= n; i += QKV_LANES)
        for (int k = 0; k < QKV_LANES; k++)
            acc[k] += qkv__exp_nonpositive_d((double)x[i + k] - m);
    for (int k = 0; i < n; i++, k++)
        acc[k] += qkv__exp_nonpositive_d((double)x[i] - m);
    return qkv__lanes_total(acc);
}

/* x[i] = exp(x[i] - m) in place (-inf - m gives +0). A loop of its own over a multiple of 16,
 * then the rest, so that the AVX-512 clone runs it 16 wide (QKV_LANE_LOOP's blocks of
 * QKV_LANES hold it to 8: 5 % of the fused attention's forward at T = 4096); elementwise, so
 * every width gives the same bits. */
QKV_ROW_INLINE void qkv__row_exp_shift(qkv_real *restrict x, qkv_real m, int64_t n) {
    const int64_t body = n & ~(int64_t)15;
    for (int64_t i = 0; i < body; i++)
        x[i] = qkv__exp_r(x[i] - m);
    for (int64_t i = body; i < n; i++)
        x[i] = qkv__exp_r(x[i] - m);
}

/* e[i] = exp(x[i] - m); returns sum_i e[i] */
QKV_ROW_INLINE double qkv__row_exp(const qkv_real *restrict x, qkv_real m, qkv_real *restrict e,
                                  int64_t n) {
    double acc[QKV_LANES] = {0};
    int64_t i = 0;
    for (; i + QKV_LANES <= n; i += QKV_LANES)
        for (int k = 0; k < QKV_LANES; k++) {
            e[i + k] = qkv__exp_r(x[i + k] - m);
            acc[k] += (double)e[i + k];
        }
    for (int k = 0; i < n; i++, k++) {
        e[i] = qkv__exp_r(x[i] - m);
        acc[k] += (double)e[i];
    }
    return qkv__lanes_total(acc);
}

#endif
