/*
 * clip.c: global gradient-norm clipping, torch.nn.utils.clip_grad_norm_(norm_type=2).
 *
 *   norm = sqrt(sum over every gradient element of g^2),   c = max_norm / (norm + 1e-6),
 *   g *= c when c < 1 (torch multiplies by min(c, 1); multiplying by 1 changes nothing).
 *
 * The sum runs in double over the contiguous gradient block, split into at most PARTS ranges
 * whose bounds depend only on the element count: each range is summed in order, then the
 * partial sums are added in range order, so the norm is bit-identical for any thread count.
 */
#include "qkv/qkv_optim.h"

#include "../core/internal.h"

#include <math.h>

#define PARTS 256
#define PART_MIN 4096            /* elements per range at least (small tables: fewer ranges) */
#define GRAIN ((int64_t)1 << 15) /* below this many elements, stay on one thread */

double qkv_clip_grad_norm(qkv_params *p, double max_norm) {
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
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n > GRAIN)
#endif
    for (int64_t k = 0; k < parts; k++) {
        const int64_t lo = n / parts * k + (k < n % parts ? k : n % parts);
        const int64_t hi = lo + n / parts + (k < n % parts);
        double s = 0;
        for (int64_t i = lo; i < hi; i++)
            s += (double)g[i] * (double)g[i];
        partial[k] = s;
    }
    double total = 0;
    for (int64_t k = 0; k < parts; k++)
        total += partial[k];
    const double norm = sqrt(total);
    if (max_norm > 0) {
        const double c = max_norm / (norm + 1e-6);
        if (!(c >= 1)) { /* also NaN: torch's clamp keeps it and the gradients become NaN */
            const qkv_real cr = (qkv_real)c;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (n > GRAIN)
#endif
            for (int64_t i = 0; i < n; i++)
                g[i] *= cr;
        }
    }
    return norm;
}
