/*
 * optim_cpu.c: the optimiser family's fast kernels (kernels/optim.h). Adam's common case and the
 * gradient norm's sums are vectorised (QKV_CLONES: AVX-512, AVX2 and the baseline); sqrt and
 * division are correctly rounded at any vector width and the sums run in rowreduce.h's fixed
 * order, so the bits are the reference loops'. The drivers in src/train/ split the blocks into
 * ranges and run these on the threads.
 */
#include "optim.h"
#include "rowreduce.h"
#include "select.h"

#include <math.h>

#ifdef QKV_DOUBLE
#define real_sqrt sqrt
#else
#define real_sqrt sqrtf
#endif

static void sgd_range(const qkv_optim_rule *r, bool decay, qkv_real *restrict p, const qkv_real *restrict g,
                      qkv_real *restrict b, int64_t n) {
    const qkv_real lr = r->lr, mom = r->momentum, wd = decay ? r->wd : 0;
    for (int64_t i = 0; i < n; i++) {
        qkv_real d = g[i];
        if (wd != 0) d = d + wd * p[i];
        if (mom != 0) {
            b[i] = b[i] * mom + d;
            d = r->nesterov ? d + mom * b[i] : b[i];
        }
        p[i] = p[i] + -lr * d;
    }
}

/* Adam(W) over n elements. Where it is inlined with constant `lerp_low` (w1 < 0.5: torch_lerp's
 * branch) and `l2`, the loop has no branch and vectorises. */
static inline void adam_elems(const qkv_optim_rule *r, bool lerp_low, qkv_real l2, qkv_real keep,
                              qkv_real *restrict p, const qkv_real *restrict g, qkv_real *restrict m,
                              qkv_real *restrict v, int64_t n) {
    const qkv_real w1 = r->w1, b2 = r->beta2, omb2 = r->one_minus_beta2;
    const qkv_real ss = r->step_size, bc2s = r->bc2_sqrt, eps = r->eps;
    for (int64_t i = 0; i < n; i++) {
        qkv_real d = g[i];
        if (l2 != 0) d = d + l2 * p[i];
        const qkv_real pi = p[i] * keep;
        const qkv_real mi = lerp_low ? m[i] + w1 * (d - m[i]) : d - (d - m[i]) * ((qkv_real)1 - w1);
        const qkv_real vi = v[i] * b2 + omb2 * d * d;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - ss * mi / (real_sqrt(vi) / bc2s + eps);
    }
}

/* The common case (beta1 > 0.5, no L2 term): a vectorised body of QKV_VECTOR_BODY(n) elements
 * and a scalar rest (GCC's -O2 vectorises only loops without an epilogue, kernels/select.h). */
QKV_CLONES
static void adam_common(const qkv_optim_rule *r, qkv_real keep, qkv_real *restrict p, const qkv_real *restrict g,
                        qkv_real *restrict m, qkv_real *restrict v, int64_t n) {
    const int64_t body = QKV_VECTOR_BODY(n);
    adam_elems(r, true, 0, keep, p, g, m, v, body);
    adam_elems(r, true, 0, keep, p + body, g + body, m + body, v + body, n - body);
}

static void adam_range(const qkv_optim_rule *r, bool decay, qkv_real *restrict p, const qkv_real *restrict g,
                       qkv_real *restrict m, qkv_real *restrict v, int64_t n) {
    const bool adamw = r->kind == QKV_OPTIM_ADAMW;
    const qkv_real l2 = (!adamw && decay) ? r->wd : 0;
    const qkv_real keep = (adamw && decay) ? r->decay_factor : 1;
    const bool lerp_low = r->w1 < (qkv_real)0.5;
    if (lerp_low && l2 == 0)
        adam_common(r, keep, p, g, m, v, n);
    else
        adam_elems(r, lerp_low, l2, keep, p, g, m, v, n);
}

static void update(const qkv_optim_rule *r, bool decay, qkv_real *p, const qkv_real *g, qkv_real *m, qkv_real *v,
                   int64_t n) {
    if (r->kind == QKV_OPTIM_SGD)
        sgd_range(r, decay, p, g, m, n);
    else
        adam_range(r, decay, p, g, m, v, n);
}

QKV_CLONES
static double sum_squares(const qkv_real *x, int64_t n) {
    return qkv__row_dot(x, x, n);
}

QKV_CLONES
static void scale(qkv_real *restrict x, qkv_real c, int64_t n) {
    const int64_t body = QKV_VECTOR_BODY(n);
    for (int64_t i = 0; i < body; i++) x[i] *= c;
    for (int64_t i = body; i < n; i++) x[i] *= c;
}

static void average(qkv_real *restrict avg, const qkv_real *restrict x, double d, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        avg[i] = (qkv_real)(d * (double)avg[i] + (1.0 - d) * (double)x[i]);
}

const qkv_optim_kernels qkv_optim_cpu = {update, sum_squares, scale, average};
