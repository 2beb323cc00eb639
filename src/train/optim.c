/*
 * optim.c: SGD (momentum, Nesterov), Adam and AdamW on a parameter table: the settings' checks,
 * the step's scalars and the walk over the blocks; the element-wise rules are the optimiser
 * kernels (kernels/optim.h, where the rules are written out).
 *
 * The rules are torch.optim's single-tensor implementations, written in the same order of
 * operations and in the parameter type (qkv_real), with the per-step scalars (bias corrections,
 * step size) computed here in double and rounded once, as PyTorch does with its Python floats.
 *
 * One pass over the four contiguous blocks (data, grad, m, v) in fixed chunks of CHUNK elements,
 * OpenMP-parallel over chunks; a chunk that spans several parameters is split at their
 * boundaries so QKV_NO_DECAY applies per parameter. Elements are independent: the result is the
 * same for any thread count.
 */
#include "qkv/qkv_optim.h"

#include "trainer_internal.h"
#include "../kernels/backend.h"

#include <math.h>

#define CHUNK 4096               /* elements per parallel work item */
#define GRAIN ((int64_t)1 << 15) /* below this many elements, stay on one thread */

qkv_optim_config qkv_optim_default(qkv_optim_kind kind) {
    qkv_optim_config c = {.kind = kind, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    if (kind == QKV_OPTIM_ADAMW) c.weight_decay = 1e-2;
    return c;
}

static int64_t offset_of(const qkv_params *p, const qkv_real *base, int64_t k) {
    return (int64_t)((const qkv_real *)qkv_params_get(p, k)->data - base);
}

/* The parameter that holds element e (the last k with offset(k) <= e). */
static int64_t param_at(const qkv_params *p, const qkv_real *base, int64_t e) {
    int64_t lo = 0, hi = qkv_params_count(p) - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (offset_of(p, base, mid) <= e)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The settings alone (fn names the caller in messages). */
static qkv_status check_settings(const char *fn, const qkv_optim_config *c) {
    if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: weight_decay %g must be finite and >= 0", fn,
                         c->weight_decay);
    switch (c->kind) {
    case QKV_OPTIM_SGD:
        if (!(c->momentum >= 0) || !isfinite(c->momentum))
            return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: SGD momentum %g must be finite and >= 0",
                             fn, c->momentum);
        if (c->nesterov && c->momentum == 0)
            return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: Nesterov momentum needs momentum > 0", fn);
        return QKV_OK;
    case QKV_OPTIM_ADAM:
    case QKV_OPTIM_ADAMW:
        if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
            return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: betas (%g, %g) must be in [0, 1)", fn,
                             c->beta1, c->beta2);
        /* torch accepts eps = 0, but then a parameter whose gradient has been 0 since the start
         * (an unused embedding row) is updated by 0 / (0 + 0) = NaN at the first step */
        if (!((qkv_real)c->eps > 0) || !isfinite(c->eps))
            return QKV_ERROR(QKV_ERR_INVALID_ARG,
                             "%s: eps %g must be finite and > 0 (and not 0 once rounded to %s)", fn,
                             c->eps, sizeof(qkv_real) == 4 ? "float" : "double");
        return QKV_OK;
    }
    return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: unknown optimiser kind %d", fn, (int)c->kind);
}

qkv_status qkv_optim_check(const qkv_optim_config *c) {
    if (!c) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_optim_check: NULL argument");
    return check_settings("qkv_optim_check", c);
}

static qkv_status check_config(const qkv_optim_config *c, int64_t step, double lr) {
    if (!(lr >= 0) || !isfinite(lr))
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_optim_step: learning rate %g must be finite and >= 0", lr);
    qkv_status st = check_settings("qkv_optim_step", c);
    if (st != QKV_OK) return st;
    if (c->kind != QKV_OPTIM_SGD && step < 1)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_optim_step: step %lld must be >= 1 (it is 1-based: the bias "
                         "corrections use beta^step)",
                         (long long)step);
    return QKV_OK;
}

qkv_status qkv_optim_step(qkv_params *p, const qkv_optim_config *c, int64_t step, double lr) {
    return qkv__optim_step(qkv__backend_of(QKV_KERNELS_FAST)->optim, p, c, step, lr);
}

qkv_status qkv__optim_step(const qkv_optim_kernels *kern, qkv_params *p, const qkv_optim_config *c, int64_t step,
                           double lr) {
    if (!p || !c) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_optim_step: NULL argument");
    qkv_real *P = qkv_params_block(p, QKV_BLOCK_DATA), *G = qkv_params_block(p, QKV_BLOCK_GRAD);
    qkv_real *M = qkv_params_block(p, QKV_BLOCK_M), *V = qkv_params_block(p, QKV_BLOCK_V);
    if (!P) return QKV_ERROR(QKV_ERR_STATE, "qkv_optim_step: the parameter table is not finalized");
    qkv_status st = check_config(c, step, lr);
    if (st != QKV_OK) return st;

    qkv_optim_rule r = {.kind = c->kind,
              .lr = (qkv_real)lr,
              .momentum = (qkv_real)c->momentum,
              .wd = (qkv_real)c->weight_decay,
              .nesterov = c->nesterov};
    if (c->kind != QKV_OPTIM_SGD) {
        const double bc1 = 1.0 - pow(c->beta1, (double)step);
        const double bc2 = 1.0 - pow(c->beta2, (double)step);
        r.w1 = (qkv_real)(1.0 - c->beta1);
        r.beta2 = (qkv_real)c->beta2;
        r.one_minus_beta2 = (qkv_real)(1.0 - c->beta2);
        r.step_size = (qkv_real)(lr / bc1);
        r.bc2_sqrt = (qkv_real)sqrt(bc2);
        r.eps = (qkv_real)c->eps;
        r.decay_factor = (qkv_real)(1.0 - lr * c->weight_decay);
    }

    const int64_t numel = qkv_params_numel(p), chunks = (numel + CHUNK - 1) / CHUNK;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (numel > GRAIN)
#endif
    for (int64_t ch = 0; ch < chunks; ch++) {
        int64_t lo = ch * CHUNK, hi = lo + CHUNK < numel ? lo + CHUNK : numel;
        for (int64_t k = param_at(p, P, lo); lo < hi; k++) {
            const qkv_tensor *t = qkv_params_get(p, k);
            int64_t end = offset_of(p, P, k) + qkv_tensor_numel(t);
            int64_t e = end < hi ? end : hi;
            bool decay = !(t->flags & QKV_NO_DECAY);
            kern->update(&r, decay, P + lo, G + lo, M + lo, V + lo, e - lo);
            lo = e;
        }
    }
    return QKV_OK;
}
