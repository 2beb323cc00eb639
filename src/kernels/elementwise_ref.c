/* elementwise_ref.c: the reference (oracle) elementwise kernels: plain loops, double math. */
#include "elementwise.h"

static void unary_fwd(qkv_unary op, int64_t n, const qkv_real *x, qkv_real *y) {
    for (int64_t i = 0; i < n; i++) y[i] = (qkv_real)qkv__unary(op, x[i]);
}

static void unary_bwd(qkv_unary op, int64_t n, const qkv_real *x, const qkv_real *y,
                      const qkv_real *dy, qkv_real *dx) {
    for (int64_t i = 0; i < n; i++) dx[i] += (qkv_real)(dy[i] * qkv__unary_grad(op, x[i], y[i]));
}

#define FOR4(g)                                                                                   \
    for (int64_t i0 = 0; i0 < (g)->shape[0]; i0++)                                                \
        for (int64_t i1 = 0; i1 < (g)->shape[1]; i1++)                                            \
            for (int64_t i2 = 0; i2 < (g)->shape[2]; i2++)                                        \
                for (int64_t i3 = 0; i3 < (g)->shape[3]; i3++)

#define BIDX(g) (i0 * (g)->bstride[0] + i1 * (g)->bstride[1] + i2 * (g)->bstride[2] + i3 * (g)->bstride[3])

static void binary_fwd(bool mul, const qkv_bcast *g, const qkv_real *a, const qkv_real *b, qkv_real *y) {
    int64_t n = 0;
    FOR4(g) {
        y[n] = mul ? a[n] * b[BIDX(g)] : a[n] + b[BIDX(g)];
        n++;
    }
}

static void binary_bwd(bool mul, const qkv_bcast *g, const qkv_real *a, const qkv_real *b,
                       const qkv_real *dy, qkv_real *da, qkv_real *db) {
    int64_t n = 0;
    FOR4(g) {
        int64_t j = BIDX(g);
        if (da) da[n] += mul ? dy[n] * b[j] : dy[n];
        if (db) db[j] += mul ? dy[n] * a[n] : dy[n];
        n++;
    }
}

static void dropout(int64_t n, double p, uint64_t seed, uint64_t step, uint64_t stream, bool relu, const qkv_real *x,
                    qkv_real *y, bool accumulate) {
    const qkv_real scale = (qkv_real)(1.0 / (1.0 - p));
    for (int64_t i = 0; i < n; i++) {
        const qkv_real xi = relu && !(x[i] > 0) ? 0 : x[i];
        qkv_real v = qkv_rng_uniform(seed, step, stream, (uint64_t)i) >= (float)p ? xi * scale : 0;
        y[i] = accumulate ? y[i] + v : v;
    }
}

static void relu_dropout_bwd(int64_t n, qkv_real scale, const qkv_real *y, const qkv_real *dy, qkv_real *dx,
                             bool accumulate) {
    for (int64_t i = 0; i < n; i++) {
        if (!accumulate) dx[i] = 0;
        if (y[i] > 0) dx[i] += dy[i] * scale;
    }
}

static void sum(int64_t n, const qkv_real *x, double factor, qkv_real *y) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    y[0] = (qkv_real)(s * factor);
}

static void sum_bwd(int64_t n, const qkv_real *dy, double factor, qkv_real *dx) {
    const qkv_real g = (qkv_real)((double)dy[0] * factor);
    for (int64_t i = 0; i < n; i++) dx[i] += g;
}

static void scale(int64_t n, qkv_real s, const qkv_real *x, qkv_real *y, bool accumulate) {
    for (int64_t i = 0; i < n; i++) y[i] = accumulate ? y[i] + s * x[i] : s * x[i];
}

static void fill(int64_t n, qkv_real v, qkv_real *y) {
    for (int64_t i = 0; i < n; i++) y[i] = v;
}

static void broadcast_rows(int64_t N, int64_t O, const qkv_real *b, qkv_real *y) {
    for (int64_t r = 0; r < N; r++)
        for (int64_t o = 0; o < O; o++) y[r * O + o] = b[o];
}

static void sum_rows(int64_t N, int64_t O, const qkv_real *dy, qkv_real *db) {
    for (int64_t o = 0; o < O; o++)
        for (int64_t r = 0; r < N; r++) db[o] += dy[r * O + o];
}

const qkv_elementwise_kernels qkv_elementwise_ref = {
    unary_fwd, unary_bwd, binary_fwd, binary_bwd, dropout, relu_dropout_bwd, sum, sum_bwd, scale, fill, broadcast_rows,
    sum_rows};
