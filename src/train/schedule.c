/*
 * schedule.c: learning-rate schedules (qkv_optim.h): constant, the Transformer's inverse square
 * root with linear warm-up (Vaswani et al. 2017, "Attention Is All You Need", eq. 3), and linear
 * warm-up followed by cosine decay (Loshchilov & Hutter 2017, SGDR, without restarts; the shape
 * of transformers.get_cosine_schedule_with_warmup with a floor min_lr).
 * All arithmetic is in double; step is the optimiser's 1-based step.
 */
#include "qkv/qkv_optim.h"

#include "../core/internal.h"
#include "qkv/qkv_registry.h"

#include <math.h>

qkv_status qkv_lr_check(const qkv_lr_schedule *s) {
    if (!s) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_lr_check: NULL schedule");
    if (!qkv_registry_name(QKV_REGISTRY_LR_SCHEDULE, s->kind))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "lr schedule: unknown kind %d", (int)s->kind);
    if (!(s->base_lr >= 0) || !isfinite(s->base_lr))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "lr schedule: base_lr %g must be finite and >= 0",
                         s->base_lr);
    if (s->warmup_steps < 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "lr schedule: warmup_steps %lld is negative",
                         (long long)s->warmup_steps);
    if (s->kind == QKV_LR_INV_SQRT && s->d_model < 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "lr schedule: d_model %lld is negative",
                         (long long)s->d_model);
    if (s->kind == QKV_LR_WARMUP_COSINE) {
        if (s->total_steps < s->warmup_steps)
            return QKV_ERROR(QKV_ERR_INVALID_ARG,
                             "lr schedule: total_steps %lld < warmup_steps "
                             "%lld",
                             (long long)s->total_steps, (long long)s->warmup_steps);
        if (!(s->min_lr >= 0) || !isfinite(s->min_lr))
            return QKV_ERROR(QKV_ERR_INVALID_ARG, "lr schedule: min_lr %g must be finite and >= 0",
                             s->min_lr);
    }
    return QKV_OK;
}

double qkv_lr_at(const qkv_lr_schedule *s, int64_t step) {
    if (qkv_lr_check(s) != QKV_OK) return NAN;
    if (s->kind == QKV_LR_CONSTANT) return s->base_lr;
    const double t = (double)step, w = (double)s->warmup_steps;
    if (s->kind == QKV_LR_INV_SQRT) {
        if (step <= 0) return 0;
        double scale = s->d_model > 0 ? 1 / sqrt((double)s->d_model) : (w > 0 ? sqrt(w) : 1);
        double shape = w > 0 ? fmin(1 / sqrt(t), t * pow(w, -1.5)) : 1 / sqrt(t);
        return s->base_lr * scale * shape;
    }
    /* WARMUP_COSINE */
    if (step <= 0) return s->warmup_steps > 0 ? 0 : s->base_lr;
    if (step <= s->warmup_steps) return s->base_lr * t / w;
    if (step >= s->total_steps) return s->min_lr;
    const double progress = (t - w) / ((double)s->total_steps - w);
    return s->min_lr +
           (s->base_lr - s->min_lr) * 0.5 * (1 + cos(3.14159265358979323846 * progress));
}
