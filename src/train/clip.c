/*
 * clip.c: global gradient-norm clipping, torch.nn.utils.clip_grad_norm_(norm_type=2).
 *
 *   norm = sqrt(sum over every gradient element of g^2),   c = max_norm / (norm + 1e-6),
 *   g *= c when c < 1 (torch multiplies by min(c, 1); multiplying by 1 changes nothing).
 *
 * The sum runs in double over the contiguous gradient block, split into at most PARTS ranges
 * whose bounds depend only on the element count: each range is summed by the optimiser kernels'
 * sum_squares (kernels/optim.h: QKV_LANES partial sums in a fixed order), then the partial sums
 * are added in range order, so the norm is bit-identical for any thread count and vector width.
 */
#include "qkv/qkv_optim.h"

#include "trainer_internal.h"
#include "../kernels/backend.h"

#include <math.h>

#define PARTS 256
#define PART_MIN 4096            /* elements per range at least (small tables: fewer ranges) */
#define GRAIN ((int64_t)1 << 15) /* below this many elements, stay on one thread */

/* Range k of `parts` near-equal ranges over n elements: [*lo, *hi). */
static inline void part_bounds(int64_t n, int64_t parts, int64_t k, int64_t *lo, int64_t *hi) {
    *lo = n / parts * k + (k < n % parts ? k : n % parts);
    *hi = *lo + n / parts + (k < n % parts);
}

/* Over the parts of g (n elements), on the threads: partial[k] = the sum of squares of part k,
 * or, with partial NULL, part k *= scale. */
static void over_parts(const qkv_optim_kernels *kern, qkv_real *g, int64_t n, int64_t parts, double *partial,
                       qkv_real scale) {
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n > GRAIN)
#endif
    for (int64_t k = 0; k < parts; k++) {
        int64_t lo, hi;
        part_bounds(n, parts, k, &lo, &hi);
        if (partial)
            partial[k] = kern->sum_squares(g + lo, hi - lo);
        else
            kern->scale(g + lo, scale, hi - lo);
    }
}

/* The norm of p's gradients, and the scaling when max_norm > 0 and it clips; with only_finite,
 * a non-finite norm leaves the gradients as they are. */
static double clip(const qkv_optim_kernels *kern, qkv_params *p, double max_norm, bool only_finite) {
    qkv_real *g = qkv_params_block(p, QKV_BLOCK_GRAD);
    if (!g) {
        QKV_ERROR(p ? QKV_ERR_STATE : QKV_ERR_INVALID_ARG, "qkv_clip_grad_norm: %s",
                  p ? "the parameter table is not finalized" : "NULL table");
        return NAN;
    }
    const int64_t n = qkv_params_numel(p);
    int64_t parts = (n + PART_MIN - 1) / PART_MIN;
    if (parts > PARTS) parts = PARTS;
    double partial[PARTS];
    over_parts(kern, g, n, parts, partial, 0);
    double total = 0;
    for (int64_t k = 0; k < parts; k++)
        total += partial[k];
    const double norm = sqrt(total);
    if (max_norm > 0 && !(only_finite && !isfinite(norm))) {
        const double c = max_norm / (norm + 1e-6);
        if (!(c >= 1)) { /* also NaN: torch's clamp keeps it and the gradients become NaN */
            over_parts(kern, g, n, parts, NULL, (qkv_real)c);
        }
    }
    return norm;
}

double qkv_clip_grad_norm(qkv_params *p, double max_norm) {
    return clip(qkv__backend_of(QKV_KERNELS_FAST)->optim, p, max_norm, false);
}

double qkv__clip_grad_norm_finite(const qkv_optim_kernels *kern, qkv_params *p, double max_norm) {
    return clip(kern, p, max_norm, true);
}
