/*
 * optim_ref.c: the optimiser family's reference kernels (kernels/optim.h): one scalar loop per
 * rule, the definitions written out. torch's lerp(a, b, w) is a + w (b - a) for |w| < 0.5 and
 * b - (b - a)(1 - w) otherwise.
 */
#include "optim.h"
#include "rowreduce.h"

#ifdef QKV_DOUBLE
#define real_sqrt sqrt
#else
#define real_sqrt sqrtf
#endif

#include <math.h>

static void update(const qkv_optim_rule *r, bool decay, qkv_real *p, const qkv_real *g, qkv_real *m, qkv_real *v,
                   int64_t n) {
    const bool adamw = r->kind == QKV_OPTIM_ADAMW;
    for (int64_t i = 0; i < n; i++) {
        qkv_real d = g[i];
        if (r->kind == QKV_OPTIM_SGD) {
            if (decay && r->wd != 0) d = d + r->wd * p[i];
            if (r->momentum != 0) {
                m[i] = m[i] * r->momentum + d;
                d = r->nesterov ? d + r->momentum * m[i] : m[i];
            }
            p[i] = p[i] + -r->lr * d;
            continue;
        }
        if (!adamw && decay && r->wd != 0) d = d + r->wd * p[i];
        const qkv_real pi = adamw && decay ? p[i] * r->decay_factor : p[i];
        const qkv_real mi = r->w1 < (qkv_real)0.5 ? m[i] + r->w1 * (d - m[i]) : d - (d - m[i]) * ((qkv_real)1 - r->w1);
        const qkv_real vi = v[i] * r->beta2 + r->one_minus_beta2 * d * d;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - r->step_size * mi / (real_sqrt(vi) / r->bc2_sqrt + r->eps);
    }
}

static double sum_squares(const qkv_real *x, int64_t n) {
    return qkv__row_dot(x, x, n);
}

static void scale(qkv_real *x, qkv_real c, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i] *= c;
}

static void average(qkv_real *avg, const qkv_real *x, double d, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        avg[i] = (qkv_real)(d * (double)avg[i] + (1.0 - d) * (double)x[i]);
}

const qkv_optim_kernels qkv_optim_ref = {update, sum_squares, scale, average};
