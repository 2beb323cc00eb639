/*
 * kernels/optim.h: kernel table of the optimiser family: the element-wise arithmetic of a
 * training step on the parameter blocks (src/train/optim.c, clip.c, ema.c drive it).
 *
 *   update       one optimiser step over n elements of one parameter (torch.optim's rules,
 *                written out in train/optim.c):
 *                  SGD    d = g (+ wd p);  b = momentum b + d;  d = nesterov ? d + momentum b : b;
 *                         p += -lr d
 *                  Adam   d = g (+ wd p);  m = lerp(m, d, 1 - beta1);  v = beta2 v + (1 - beta2) d d;
 *                         p += -(lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)
 *                  AdamW  p *= 1 - lr wd, then Adam without the L2 term
 *   sum_squares  sum of x_i^2 in double, in rowreduce.h's fixed order (the same bits for every
 *                vector width), for the gradient norm
 *   scale        x *= c (gradient clipping)
 *   average      avg = d avg + (1 - d) x, each element in double and rounded once (the EMA)
 *
 * Every element is computed on its own and in the same order of operations in both
 * implementations: the reference loops and the vectorised clones give the same bits.
 */
#ifndef QKV_KERNELS_OPTIM_H
#define QKV_KERNELS_OPTIM_H

#include "../core/internal.h"
#include "qkv/qkv_optim.h"

/* The scalars of one step, computed in double by the driver and rounded to qkv_real once, as
 * PyTorch does with its Python floats. */
typedef struct qkv_optim_rule {
    qkv_optim_kind kind;
    qkv_real lr, momentum, wd;
    bool nesterov;
    qkv_real w1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps; /* Adam(W); w1 = 1 - beta1 */
    qkv_real decay_factor;                                         /* AdamW: 1 - lr wd */
} qkv_optim_rule;

typedef struct qkv_optim_kernels {
    /* One step of rule r over p, g and the state: m (SGD's momentum buffer, Adam's first moment)
     * and v (Adam's second moment; unused by SGD). decay: the parameter takes weight decay. */
    void (*update)(const qkv_optim_rule *r, bool decay, qkv_real *p, const qkv_real *g, qkv_real *m, qkv_real *v,
                   int64_t n);
    double (*sum_squares)(const qkv_real *x, int64_t n);
    void (*scale)(qkv_real *x, qkv_real c, int64_t n);
    void (*average)(qkv_real *avg, const qkv_real *x, double d, int64_t n);
} qkv_optim_kernels;

extern const qkv_optim_kernels qkv_optim_ref;
extern const qkv_optim_kernels qkv_optim_cpu;

#endif
