/*
 * kernels/elementwise.h: kernel tables of the elementwise family. Two implementations with the
 * same math: _ref (plain loops, the oracle) and _cpu (OpenMP over fixed-size chunks, vectorisable
 * loops). Every kernel's result is independent of the thread count.
 */
#ifndef QKV_KERNELS_ELEMENTWISE_H
#define QKV_KERNELS_ELEMENTWISE_H

#include "../core/internal.h"

typedef enum { QKV_UN_RELU, QKV_UN_GELU_ERF, QKV_UN_GELU_TANH, QKV_UN_TANH, QKV_UN_SIGMOID } qkv_unary;

/* Broadcast geometry, padded to 4 dims: b's stride is 0 along broadcast dims. */
typedef struct {
    int64_t shape[4];   /* a's (and the output's) shape */
    int64_t bstride[4]; /* b's strides in elements, 0 where b has size 1 */
} qkv_bcast;

typedef struct qkv_elementwise_kernels {
    void (*unary_fwd)(qkv_unary op, int64_t n, const qkv_real *x, qkv_real *y);
    /* dx += dy * f'(x) (given x and y = f(x)) */
    void (*unary_bwd)(qkv_unary op, int64_t n, const qkv_real *x, const qkv_real *y,
                      const qkv_real *dy, qkv_real *dx);
    /* y = a (+|*) b[bcast] */
    void (*binary_fwd)(bool mul, const qkv_bcast *g, const qkv_real *a, const qkv_real *b, qkv_real *y);
    /* da += dy (* b);  db[bcast] += sum dy (* a): the b reduction runs in a fixed order */
    void (*binary_bwd)(bool mul, const qkv_bcast *g, const qkv_real *a, const qkv_real *b,
                       const qkv_real *dy, qkv_real *da, qkv_real *db);
    /* y = keep ? x / (1 - p) : 0, keep(i) = uniform(seed, step, stream, i) >= p; backward is the
     * same map applied to dy and accumulated. With relu, x is replaced by max(x, 0) (forward of
     * the fused relu + dropout). */
    void (*dropout)(int64_t n, double p, uint64_t seed, uint64_t step, uint64_t stream, bool relu,
                    const qkv_real *x, qkv_real *y, bool accumulate);
    /* backward of y = dropout(relu(x)): dx (+)= y > 0 ? dy * scale : 0 (y > 0 exactly where the
     * element was kept and x > 0: no random numbers needed); accumulate false writes
     * 0 + that, the bits of zeroing dx first and accumulating */
    void (*relu_dropout_bwd)(int64_t n, qkv_real scale, const qkv_real *y, const qkv_real *dy, qkv_real *dx,
                             bool accumulate);
    /* y[0] = (qkv_real)(factor * sum_i x_i), the sum in double (qkv_sum: factor 1; qkv_mean: 1/n) */
    void (*sum)(int64_t n, const qkv_real *x, double factor, qkv_real *y);
    /* dx[i] += (qkv_real)(dy[0] factor): the backward of sum and mean (dy the scalar's gradient) */
    void (*sum_bwd)(int64_t n, const qkv_real *dy, double factor, qkv_real *dx);
    /* y (=|+=) s * x: scale's forward (accumulate false) and backward (accumulate true) */
    void (*scale)(int64_t n, qkv_real s, const qkv_real *x, qkv_real *y, bool accumulate);
    /* y[i] = v */
    void (*fill)(int64_t n, qkv_real v, qkv_real *y);
    /* y (N, O): every row = b (O): a linear layer's bias before the product adds into it */
    void (*broadcast_rows)(int64_t N, int64_t O, const qkv_real *b, qkv_real *y);
    /* db (O) += sum over the N rows of dy (N, O), each column summed in row order (the bias
     * gradient; the same bits for any thread count) */
    void (*sum_rows)(int64_t N, int64_t O, const qkv_real *dy, qkv_real *db);
} qkv_elementwise_kernels;

extern const qkv_elementwise_kernels qkv_elementwise_ref;
extern const qkv_elementwise_kernels qkv_elementwise_cpu;

/* The scalar math shared by both implementations. */
#include <math.h>
static inline double qkv__unary(qkv_unary op, double x) {
    switch (op) {
    case QKV_UN_RELU: return x > 0 ? x : 0;
    case QKV_UN_GELU_ERF: return 0.5 * x * (1 + erf(x * 0.70710678118654752440));
    case QKV_UN_GELU_TANH: { /* 0.5 x (1 + tanh u) = x / (1 + e^{-2u}): no cancellation for x << 0 */
        const double c = 0.79788456080286535588; /* sqrt(2/pi) */
        return x / (1 + exp(-2 * c * (x + 0.044715 * x * x * x)));
    }
    case QKV_UN_TANH: return tanh(x);
    case QKV_UN_SIGMOID: return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
    }
    return 0;
}
/* f'(x), with y = f(x) where that is cheaper. ReLU'(0) = 0 as in PyTorch. */
static inline double qkv__unary_grad(qkv_unary op, double x, double y) {
    switch (op) {
    case QKV_UN_RELU: return x > 0 ? 1 : 0;
    case QKV_UN_GELU_ERF: /* Phi(x) + x phi(x) */
        return 0.5 * (1 + erf(x * 0.70710678118654752440)) + x * 0.39894228040143267794 * exp(-0.5 * x * x);
    case QKV_UN_GELU_TANH: { /* s + 2 x s (1 - s) u', s = sigma(2u) = 1 / (1 + e), 1 - s = e s */
        const double c = 0.79788456080286535588;
        const double e = exp(-2 * c * (x + 0.044715 * x * x * x)), s = 1 / (1 + e);
        if (s == 0 || e == 0) return s; /* the tails (and no 0 inf below) */
        return s + 2 * x * s * (e * s) * c * (1 + 3 * 0.044715 * x * x);
    }
    case QKV_UN_TANH: return 1 - y * y;
    case QKV_UN_SIGMOID: return y * (1 - y);
    }
    return 0;
}

#endif
