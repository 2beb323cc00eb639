/*
 * elementwise_cpu.c: fast elementwise kernels. Work is cut into fixed chunks of QKV_CHUNK
 * elements handed to OpenMP threads; reductions sum per-chunk partials in chunk order, so the
 * result does not depend on the thread count.
 */
#include "elementwise.h"
#include "select.h"

#include <math.h>
#include <stdlib.h>

#define QKV_CHUNK 4096

static void unary_fwd(qkv_unary op, int64_t n, const qkv_real *x, qkv_real *y) {
    if (op == QKV_UN_RELU) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n > 4 * QKV_CHUNK)
#endif
        for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0;
        return;
    }
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n > QKV_CHUNK)
#endif
    for (int64_t i = 0; i < n; i++) y[i] = (qkv_real)qkv__unary(op, x[i]);
}

static void unary_bwd(qkv_unary op, int64_t n, const qkv_real *x, const qkv_real *y,
                      const qkv_real *dy, qkv_real *dx) {
    if (op == QKV_UN_RELU) { /* the common case, as a select the compiler vectorises */
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n > 4 * QKV_CHUNK)
#endif
        for (int64_t i = 0; i < n; i++) dx[i] += x[i] > 0 ? dy[i] : 0;
        return;
    }
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n > QKV_CHUNK)
#endif
    for (int64_t i = 0; i < n; i++) dx[i] += (qkv_real)(dy[i] * qkv__unary_grad(op, x[i], y[i]));
}

/* Rows of the innermost dim: a is (R, L) with L = shape[3]; b row r starts at boff(r). */
static inline int64_t b_row_offset(const qkv_bcast *g, int64_t r) {
    int64_t i2 = r % g->shape[2], rest = r / g->shape[2];
    int64_t i1 = rest % g->shape[1], i0 = rest / g->shape[1];
    return i0 * g->bstride[0] + i1 * g->bstride[1] + i2 * g->bstride[2];
}

static void binary_fwd(bool mul, const qkv_bcast *g, const qkv_real *a, const qkv_real *b, qkv_real *y) {
    const int64_t L = g->shape[3], R = g->shape[0] * g->shape[1] * g->shape[2], s3 = g->bstride[3];
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (R * L > 4 * QKV_CHUNK)
#endif
    for (int64_t r = 0; r < R; r++) {
        const qkv_real *ar = a + r * L, *br = b + b_row_offset(g, r);
        qkv_real *yr = y + r * L;
        if (s3 == 1) {
            if (mul)
                for (int64_t i = 0; i < L; i++) yr[i] = ar[i] * br[i];
            else
                for (int64_t i = 0; i < L; i++) yr[i] = ar[i] + br[i];
        } else {
            const qkv_real bv = br[0];
            if (mul)
                for (int64_t i = 0; i < L; i++) yr[i] = ar[i] * bv;
            else
                for (int64_t i = 0; i < L; i++) yr[i] = ar[i] + bv;
        }
    }
}

static void binary_bwd(bool mul, const qkv_bcast *g, const qkv_real *a, const qkv_real *b,
                       const qkv_real *dy, qkv_real *da, qkv_real *db) {
    const int64_t L = g->shape[3], R = g->shape[0] * g->shape[1] * g->shape[2], s3 = g->bstride[3];
    if (da) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (R * L > 4 * QKV_CHUNK)
#endif
        for (int64_t r = 0; r < R; r++) {
            const qkv_real *br = b + b_row_offset(g, r);
            for (int64_t i = 0; i < L; i++) da[r * L + i] += mul ? dy[r * L + i] * br[s3 * i] : dy[r * L + i];
        }
    }
    if (db) /* rows in order: the same summation order as the reference, any thread count */
        for (int64_t r = 0; r < R; r++) {
            qkv_real *dbr = db + b_row_offset(g, r);
            const qkv_real *dyr = dy + r * L, *ar = a + r * L;
            if (s3 == 1) {
                if (mul)
                    for (int64_t i = 0; i < L; i++) dbr[i] += dyr[i] * ar[i];
                else
                    for (int64_t i = 0; i < L; i++) dbr[i] += dyr[i];
            } else {
                for (int64_t i = 0; i < L; i++) dbr[0] += mul ? dyr[i] * ar[i] : dyr[i];
            }
        }
}

/* Dropout over groups of 64 elements, the random words of 16 Philox blocks generated at once.
 * Element i is kept when u_i >= p with u_i = (r_i >> 8) 2^-24 (qkv_rng_uniform); that float is
 * exact, so the test is the integer compare (r_i >> 8) >= ceil(p 2^24), the same decision as the
 * reference kernel's. The decision selects x_i / (1 - p) or 0 without a branch (select.h). */
QKV_CLONES
static void dropout_group(int64_t len, uint32_t threshold, qkv_real scale, bool relu, const uint32_t *restrict r,
                          const qkv_real *restrict x, qkv_real *restrict y, bool accumulate) {
    const int64_t body = QKV_VECTOR_BODY(len);
#define KEEP(k) (((r[k] >> 8) >= threshold) & (!relu | (x[k] > 0)))
    if (accumulate) {
        for (int64_t k = 0; k < body; k++) y[k] += keep_or_zero(x[k] * scale, KEEP(k));
        for (int64_t k = body; k < len; k++) y[k] += keep_or_zero(x[k] * scale, KEEP(k));
    } else {
        for (int64_t k = 0; k < body; k++) y[k] = keep_or_zero(x[k] * scale, KEEP(k));
        for (int64_t k = body; k < len; k++) y[k] = keep_or_zero(x[k] * scale, KEEP(k));
    }
#undef KEEP
}

static void dropout(int64_t n, double p, uint64_t seed, uint64_t step, uint64_t stream, bool relu, const qkv_real *x,
                    qkv_real *y, bool accumulate) {
    enum { G = 4 * QKV_PHILOX_LANES };
    const qkv_real scale = (qkv_real)(1.0 / (1.0 - p));
    const uint32_t threshold = (uint32_t)ceil((double)(float)p * 16777216.0);
    const int64_t groups = (n + G - 1) / G;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n > QKV_CHUNK)
#endif
    for (int64_t g = 0; g < groups; g++) {
        uint32_t r[G];
        qkv__philox_blocks(seed, step, stream, (uint64_t)g * QKV_PHILOX_LANES, r);
        const int64_t first = g * G, len = n - first < G ? n - first : G;
        dropout_group(len, threshold, scale, relu, r, x + first, y + first, accumulate);
    }
}

QKV_CLONES
static void relu_dropout_bwd_range(int64_t n, qkv_real scale, const qkv_real *restrict y, const qkv_real *restrict dy,
                                   qkv_real *restrict dx) {
    const int64_t body = QKV_VECTOR_BODY(n);
    for (int64_t i = 0; i < body; i++) dx[i] += keep_or_zero(dy[i] * scale, y[i] > 0);
    for (int64_t i = body; i < n; i++) dx[i] += keep_or_zero(dy[i] * scale, y[i] > 0);
}

static void relu_dropout_bwd(int64_t n, qkv_real scale, const qkv_real *y, const qkv_real *dy, qkv_real *dx) {
    const int64_t chunks = (n + QKV_CHUNK - 1) / QKV_CHUNK;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n > 4 * QKV_CHUNK)
#endif
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t first = c * QKV_CHUNK, len = n - first < QKV_CHUNK ? n - first : QKV_CHUNK;
        relu_dropout_bwd_range(len, scale, y + first, dy + first, dx + first);
    }
}

static double sum(int64_t n, const qkv_real *x) {
    const int64_t chunks = (n + QKV_CHUNK - 1) / QKV_CHUNK;
    double partial_stack[64], *partial = chunks <= 64 ? partial_stack : malloc(sizeof(double) * (size_t)chunks);
    if (!partial) { /* no memory for partials: the serial loop gives the same chunked order */
        double s = 0;
        for (int64_t c = 0; c < chunks; c++) {
            double p = 0;
            for (int64_t i = c * QKV_CHUNK; i < n && i < (c + 1) * QKV_CHUNK; i++) p += x[i];
            s += p;
        }
        return s;
    }
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (chunks > 1)
#endif
    for (int64_t c = 0; c < chunks; c++) {
        double p = 0;
        for (int64_t i = c * QKV_CHUNK; i < n && i < (c + 1) * QKV_CHUNK; i++) p += x[i];
        partial[c] = p;
    }
    double s = 0;
    for (int64_t c = 0; c < chunks; c++) s += partial[c];
    if (partial != partial_stack) free(partial);
    return s;
}

static void scale(int64_t n, qkv_real s, const qkv_real *x, qkv_real *y, bool accumulate) {
    if (accumulate) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n > 4 * QKV_CHUNK)
#endif
        for (int64_t i = 0; i < n; i++) y[i] += s * x[i];
    } else {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n > 4 * QKV_CHUNK)
#endif
        for (int64_t i = 0; i < n; i++) y[i] = s * x[i];
    }
}

const qkv_elementwise_kernels qkv_elementwise_cpu = {unary_fwd,        unary_bwd, binary_fwd, binary_bwd, dropout,
                                                     relu_dropout_bwd, sum,       scale};
