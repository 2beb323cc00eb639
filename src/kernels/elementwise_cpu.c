/*
 * elementwise_cpu.c: fast elementwise kernels. Work is cut into fixed chunks of QKV_CHUNK
 * elements handed to OpenMP threads; reductions sum per-chunk partials in chunk order, so the
 * result does not depend on the thread count.
 */
#include "elementwise.h"
#include "rowreduce.h"
#include "select.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define QKV_CHUNK 4096
#define BIAS_BLOCK 64                 /* columns of the bias gradient per OpenMP task */
#define BIAS_GRAIN ((int64_t)1 << 16) /* below this many elements, the bias kernels stay on one thread */

/* Chunks of QKV_CHUNK elements over the threads: for (c) body(first, len). */
#ifdef QKV_WITH_OPENMP
#define FOR_CHUNKS(n, grain, first, len, ...)                                                      \
    do {                                                                                           \
        const int64_t n_ = (n), grain_ = (grain), chunks_ = (n_ + QKV_CHUNK - 1) / QKV_CHUNK;      \
        _Pragma("omp parallel for schedule(static) if (n_ > grain_)")                              \
        for (int64_t c_ = 0; c_ < chunks_; c_++) {                                                 \
            const int64_t first = c_ * QKV_CHUNK, len = n_ - first < QKV_CHUNK ? n_ - first : QKV_CHUNK; \
            __VA_ARGS__;                                                                           \
        }                                                                                          \
    } while (0)
#else
#define FOR_CHUNKS(n, grain, first, len, ...)                                                      \
    do {                                                                                           \
        for (int64_t first = 0; first < (n); first += QKV_CHUNK) {                                 \
            const int64_t len = (n) - first < QKV_CHUNK ? (n) - first : QKV_CHUNK;                 \
            __VA_ARGS__;                                                                           \
        }                                                                                          \
    } while (0)
#endif

QKV_ROW_INLINE void relu_apart(int64_t from, int64_t to, const qkv_real *restrict x, qkv_real *restrict y) {
    for (int64_t i = from; i < to; i++) y[i] = keep_or_zero(x[i], x[i] > 0);
}

/* ReLU as a branch-free select (select.h); in place (x == y) through one pointer. */
QKV_CLONES
static void relu_range(int64_t n, const qkv_real *x, qkv_real *y) {
    const int64_t body = QKV_VECTOR_BODY(n);
    if (x == y) {
        for (int64_t i = 0; i < body; i++) y[i] = keep_or_zero(y[i], y[i] > 0);
        for (int64_t i = body; i < n; i++) y[i] = keep_or_zero(y[i], y[i] > 0);
        return;
    }
    relu_apart(0, body, x, y);
    relu_apart(body, n, x, y);
}

QKV_CLONES
static void relu_bwd_range(int64_t n, const qkv_real *restrict x, const qkv_real *restrict dy, qkv_real *restrict dx) {
    const int64_t body = QKV_VECTOR_BODY(n);
    for (int64_t i = 0; i < body; i++) dx[i] += keep_or_zero(dy[i], x[i] > 0);
    for (int64_t i = body; i < n; i++) dx[i] += keep_or_zero(dy[i], x[i] > 0);
}

/* GELU with the tanh approximation (Hendrycks & Gimpel 2016) as a logistic (elementwise.h), in
 * qkv_real with the branch-free exp of rowreduce.h so that the loops vectorise (libm's tanh is a
 * call per element):  u = sqrt(2 / pi) (x + 0.044715 x^3),  e = e^{-2u},  s = 1 / (1 + e),
 *   y = x / (1 + e),   dy/dx = s + 2 x s (e s) u',   u' = sqrt(2 / pi) (1 + 3 0.044715 x^2).
 * Where the exp clamps (-2u > 88, x < -10.0) the true y is below 1e-37 |x|: y and the gradient
 * are set to 0 (+0), as the gradient's second term is where e underflows (x > 10.0); these masks
 * also keep x^2 = inf (|x| > 1.8e19) from making 0 inf = NaN. NaN stays NaN. Within 4 + 4 |u|
 * ulps of a long double evaluation (test: u's rounding, amplified 2 |u| times by e^{-2u}). */
#define GELU_C 0.79788456080286535588 /* sqrt(2 / pi) */
#define GELU_A 0.044715

QKV_CLONES
static void gelu_tanh_range(int64_t n, const qkv_real *restrict x, qkv_real *restrict y) {
    QKV_LANE_LOOP(i, n, {
        const qkv_real v = x[i], u = (qkv_real)GELU_C * (v + (qkv_real)GELU_A * v * v * v);
        y[i] = keep_or_zero(v / (1 + qkv__exp_r(-2 * u)), !(u < -44));
    });
}

QKV_CLONES
static void gelu_tanh_bwd_range(int64_t n, const qkv_real *restrict x, const qkv_real *restrict dy,
                                qkv_real *restrict dx) {
    QKV_LANE_LOOP(i, n, {
        const qkv_real v = x[i], u = (qkv_real)GELU_C * (v + (qkv_real)GELU_A * v * v * v);
        const qkv_real e = qkv__exp_r(-2 * u), s = keep_or_zero(1 / (1 + e), !(u < -44));
        const qkv_real du = (qkv_real)GELU_C * (1 + 3 * (qkv_real)GELU_A * v * v);
        dx[i] += dy[i] * (s + keep_or_zero(2 * v * s * (e * s) * du, (e > 0) & (s > 0)));
    });
}

static void unary_fwd(qkv_unary op, int64_t n, const qkv_real *x, qkv_real *y) {
    if (op == QKV_UN_RELU) {
        FOR_CHUNKS(n, 4 * QKV_CHUNK, first, len, relu_range(len, x + first, y + first));
        return;
    }
    if (op == QKV_UN_GELU_TANH) { /* x, y distinct: unary ops allocate their output */
        FOR_CHUNKS(n, QKV_CHUNK, first, len, gelu_tanh_range(len, x + first, y + first));
        return;
    }
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n > QKV_CHUNK)
#endif
    for (int64_t i = 0; i < n; i++) y[i] = (qkv_real)qkv__unary(op, x[i]);
}

static void unary_bwd(qkv_unary op, int64_t n, const qkv_real *x, const qkv_real *y,
                      const qkv_real *dy, qkv_real *dx) {
    if (op == QKV_UN_RELU) {
        FOR_CHUNKS(n, 4 * QKV_CHUNK, first, len, relu_bwd_range(len, x + first, dy + first, dx + first));
        return;
    }
    if (op == QKV_UN_GELU_TANH) {
        FOR_CHUNKS(n, QKV_CHUNK, first, len, gelu_tanh_bwd_range(len, x + first, dy + first, dx + first));
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

/* y = a + b or a * b over n elements, element by element (the same bits at every vector width);
 * y is distinct from a and b (binary ops allocate their output). */
QKV_CLONES
static void binary_range(bool mul, int64_t n, const qkv_real *restrict a,
                         const qkv_real *restrict b, qkv_real *restrict y) {
    const int64_t body = QKV_VECTOR_BODY(n);
    if (mul) {
        for (int64_t i = 0; i < body; i++)
            y[i] = a[i] * b[i];
        for (int64_t i = body; i < n; i++)
            y[i] = a[i] * b[i];
    } else {
        for (int64_t i = 0; i < body; i++)
            y[i] = a[i] + b[i];
        for (int64_t i = body; i < n; i++)
            y[i] = a[i] + b[i];
    }
}

/* y = a + s or a * s over n elements; y distinct from a. */
QKV_CLONES
static void binary_scalar_range(bool mul, int64_t n, const qkv_real *restrict a, qkv_real s,
                                qkv_real *restrict y) {
    const int64_t body = QKV_VECTOR_BODY(n);
    if (mul) {
        for (int64_t i = 0; i < body; i++)
            y[i] = a[i] * s;
        for (int64_t i = body; i < n; i++)
            y[i] = a[i] * s;
    } else {
        for (int64_t i = 0; i < body; i++)
            y[i] = a[i] + s;
        for (int64_t i = body; i < n; i++)
            y[i] = a[i] + s;
    }
}

/* d += x, or d += x * b when b is not NULL, over n elements; d distinct from x and b. */
QKV_CLONES
static void accumulate_range(int64_t n, const qkv_real *restrict x, const qkv_real *restrict b,
                             qkv_real *restrict d) {
    const int64_t body = QKV_VECTOR_BODY(n);
    if (b) {
        for (int64_t i = 0; i < body; i++)
            d[i] += x[i] * b[i];
        for (int64_t i = body; i < n; i++)
            d[i] += x[i] * b[i];
    } else {
        for (int64_t i = 0; i < body; i++)
            d[i] += x[i];
        for (int64_t i = body; i < n; i++)
            d[i] += x[i];
    }
}

static void binary_fwd(bool mul, const qkv_bcast *g, const qkv_real *a, const qkv_real *b, qkv_real *y) {
    const int64_t L = g->shape[3], R = g->shape[0] * g->shape[1] * g->shape[2], s3 = g->bstride[3];
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (R * L > QKV_CHUNK)
#endif
    for (int64_t r = 0; r < R; r++) {
        const qkv_real *ar = a + r * L, *br = b + b_row_offset(g, r);
        if (s3 == 1)
            binary_range(mul, L, ar, br, y + r * L);
        else
            binary_scalar_range(mul, L, ar, br[0], y + r * L);
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
            if (!mul)
                accumulate_range(L, dy + r * L, NULL, da + r * L);
            else if (s3 == 1)
                accumulate_range(L, dy + r * L, br, da + r * L);
            else
                for (int64_t i = 0; i < L; i++)
                    da[r * L + i] += dy[r * L + i] * br[0];
        }
    }
    /* b broadcast along no dim: every row of a has its own row of b, so rows may go to any
     * thread; otherwise rows in order (the summation order of the reference, any thread count) */
    bool b_full = true;
    for (int d = 0; d < 4; d++) b_full &= g->shape[d] == 1 || g->bstride[d] != 0;
    (void)b_full; /* read by the OpenMP clause only */
    if (db)
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (b_full && R * L > 4 * QKV_CHUNK)
#endif
        for (int64_t r = 0; r < R; r++) {
            qkv_real *dbr = db + b_row_offset(g, r);
            const qkv_real *dyr = dy + r * L, *ar = a + r * L;
            if (s3 == 1)
                accumulate_range(L, dyr, mul ? ar : NULL, dbr);
            else
                for (int64_t i = 0; i < L; i++)
                    dbr[0] += mul ? dyr[i] * ar[i] : dyr[i];
        }
}

/* Dropout over groups of 64 elements, the random words of 16 Philox blocks generated at once.
 * Element i is kept when u_i >= p with u_i = (r_i >> 8) 2^-24 (qkv_rng_uniform); that float is
 * exact, so the test is the integer compare (r_i >> 8) >= ceil(p 2^24), the same decision as the
 * reference kernel's. The decision selects x_i / (1 - p) or 0 without a branch (select.h). */
#define DROPOUT_KEEP(v, k) (((r[k] >> 8) >= threshold) & (!relu | ((v) > 0)))

/* x and y distinct (tensors never overlap partially) */
QKV_ROW_INLINE void dropout_apart(int64_t from, int64_t to, uint32_t threshold, qkv_real scale, bool relu,
                                  const uint32_t *restrict r, const qkv_real *restrict x, qkv_real *restrict y,
                                  bool accumulate) {
    if (accumulate)
        for (int64_t k = from; k < to; k++) y[k] += keep_or_zero(x[k] * scale, DROPOUT_KEEP(x[k], k));
    else
        for (int64_t k = from; k < to; k++) y[k] = keep_or_zero(x[k] * scale, DROPOUT_KEEP(x[k], k));
}

QKV_CLONES
static void dropout_group(int64_t len, uint32_t threshold, qkv_real scale, bool relu, const uint32_t *restrict r,
                          const qkv_real *x, qkv_real *y, bool accumulate) {
    const int64_t body = QKV_VECTOR_BODY(len);
    if (x == y) { /* in place (linear_relu_dropout): through one pointer */
        for (int64_t k = 0; k < body; k++) y[k] = keep_or_zero(y[k] * scale, DROPOUT_KEEP(y[k], k));
        for (int64_t k = body; k < len; k++) y[k] = keep_or_zero(y[k] * scale, DROPOUT_KEEP(y[k], k));
        return;
    }
    dropout_apart(0, body, threshold, scale, relu, r, x, y, accumulate);
    dropout_apart(body, len, threshold, scale, relu, r, x, y, accumulate);
}
#undef DROPOUT_KEEP

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
                                   qkv_real *restrict dx, bool accumulate) {
    const int64_t body = QKV_VECTOR_BODY(n);
    if (accumulate) {
        for (int64_t i = 0; i < body; i++) dx[i] += keep_or_zero(dy[i] * scale, y[i] > 0);
        for (int64_t i = body; i < n; i++) dx[i] += keep_or_zero(dy[i] * scale, y[i] > 0);
    } else { /* 0 + v: a kept -0 becomes +0, as zeroing dx and accumulating gives */
        for (int64_t i = 0; i < body; i++) dx[i] = (qkv_real)0 + keep_or_zero(dy[i] * scale, y[i] > 0);
        for (int64_t i = body; i < n; i++) dx[i] = (qkv_real)0 + keep_or_zero(dy[i] * scale, y[i] > 0);
    }
}

static void relu_dropout_bwd(int64_t n, qkv_real scale, const qkv_real *y, const qkv_real *dy, qkv_real *dx,
                             bool accumulate) {
    const int64_t chunks = (n + QKV_CHUNK - 1) / QKV_CHUNK;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n > 4 * QKV_CHUNK)
#endif
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t first = c * QKV_CHUNK, len = n - first < QKV_CHUNK ? n - first : QKV_CHUNK;
        relu_dropout_bwd_range(len, scale, y + first, dy + first, dx + first, accumulate);
    }
}

static double sum_of(int64_t n, const qkv_real *x) {
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

static void sum(int64_t n, const qkv_real *x, double factor, qkv_real *y) {
    y[0] = (qkv_real)(sum_of(n, x) * factor);
}

static void sum_bwd(int64_t n, const qkv_real *dy, double factor, qkv_real *dx) {
    const qkv_real g = (qkv_real)((double)dy[0] * factor);
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n > QKV_CHUNK)
#endif
    for (int64_t i = 0; i < n; i++) dx[i] += g;
}

/* y = s x, or y += s x when accumulate, over n elements; y distinct from x. */
QKV_CLONES
static void scale_chunk(int64_t n, qkv_real s, const qkv_real *restrict x, qkv_real *restrict y,
                        bool accumulate) {
    const int64_t body = QKV_VECTOR_BODY(n);
    if (accumulate) {
        for (int64_t i = 0; i < body; i++)
            y[i] += s * x[i];
        for (int64_t i = body; i < n; i++)
            y[i] += s * x[i];
    } else {
        for (int64_t i = 0; i < body; i++)
            y[i] = s * x[i];
        for (int64_t i = body; i < n; i++)
            y[i] = s * x[i];
    }
}

static void scale(int64_t n, qkv_real s, const qkv_real *x, qkv_real *y, bool accumulate) {
    FOR_CHUNKS(n, 4 * QKV_CHUNK, first, len, scale_chunk(len, s, x + first, y + first, accumulate));
}

static void fill(int64_t n, qkv_real v, qkv_real *y) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n > 4 * QKV_CHUNK)
#endif
    for (int64_t i = 0; i < n; i++) y[i] = v;
}

/* Rows spread over the threads. */
static void broadcast_rows(int64_t N, int64_t O, const qkv_real *b, qkv_real *y) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (N * O > BIAS_GRAIN)
#endif
    for (int64_t r = 0; r < N; r++) memcpy(y + r * O, b, sizeof(qkv_real) * (size_t)O);
}

/* db[o] += sum_r dy[r, o] over columns [o0, o0 + n): rows outer, columns inner (vectorises); each
 * column still adds its rows in row order. */
static void sum_rows_block(int64_t N, int64_t O, int64_t o0, int64_t n, const qkv_real *restrict dy,
                           qkv_real *restrict db) {
    for (int64_t r = 0; r < N; r++) {
        const qkv_real *row = dy + r * O + o0;
        if (n == BIAS_BLOCK)
            for (int64_t o = 0; o < BIAS_BLOCK; o++) db[o0 + o] += row[o];
        else
            for (int64_t o = 0; o < n; o++) db[o0 + o] += row[o];
    }
}

/* Column blocks of BIAS_BLOCK, one per OpenMP task. */
static void sum_rows(int64_t N, int64_t O, const qkv_real *dy, qkv_real *db) {
    const int64_t blocks = (O + BIAS_BLOCK - 1) / BIAS_BLOCK;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (N * O > BIAS_GRAIN && blocks > 1)
#endif
    for (int64_t k = 0; k < blocks; k++) {
        const int64_t o0 = k * BIAS_BLOCK;
        sum_rows_block(N, O, o0, O - o0 < BIAS_BLOCK ? O - o0 : BIAS_BLOCK, dy, db);
    }
}

const qkv_elementwise_kernels qkv_elementwise_cpu = {
    unary_fwd, unary_bwd, binary_fwd, binary_bwd, dropout, relu_dropout_bwd, sum, sum_bwd, scale, fill, broadcast_rows,
    sum_rows};

