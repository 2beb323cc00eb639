/*
 * ema.c: an exponential moving average of the parameters over training (Polyak averaging), the
 * weights that are evaluated and saved when train config's ema_decay > 0.
 *
 * After optimiser step t (t = 1, 2, ...), with the parameters theta_t:
 *   d_t   = min(decay, (1 + t) / (10 + t))
 *   ema_t = d_t ema_{t-1} + (1 - d_t) theta_t            ema_0 = theta_0 (the initial weights)
 * The ramp (1 + t) / (10 + t) is the num_updates rule of TensorFlow's
 * tf.train.ExponentialMovingAverage: early on the average forgets the random initialisation fast
 * (with a constant 0.999 the initial weights would still weigh 0.999^2000 = 13.5 % after 2,000
 * steps). Each element is updated in double and rounded to qkv_real once (the optimiser kernels'
 * average, kernels/optim.h): bit-identical for any thread count and kernel set, and after a
 * checkpoint resume (the checkpoint holds ema.<name> for every parameter).
 *
 * Polyak & Juditsky (1992), "Acceleration of stochastic approximation by averaging"; the weight
 * EMA of timm's ModelEmaV2 and of Izmailov et al. (2018, SWA) for the same purpose: an average of
 * the weights of the last part of training generalises better than the weights of its last step.
 */
#include "trainer_internal.h"
#include "../kernels/backend.h"

#include <stdlib.h>
#include <string.h>

double qkv__ema_decay_at(double decay, int64_t step) {
    const double ramp = (1.0 + (double)step) / (10.0 + (double)step);
    return ramp < decay ? ramp : decay;
}

qkv_status qkv__ema_init(qkv_trainer *t) {
    if (!(t->cfg.ema_decay > 0)) return QKV_OK;
    const qkv_params *p = t->model->params;
    const int64_t n = qkv_params_numel(p);
    t->ema = malloc(sizeof(qkv_real) * (size_t)(n ? n : 1));
    if (!t->ema)
        return QKV_ERROR(QKV_ERR_OOM, "qkv_trainer_new: out of memory (parameter average)");
    const qkv_view4 all = qkv__view_rows(1, n, n);
    t->ctx->backend->layout->copy(sizeof(qkv_real), qkv_params_block(p, QKV_BLOCK_DATA), &all, t->ema, &all);
    return QKV_OK;
}

void qkv__ema_update(qkv_trainer *t) {
    if (!t->ema) return;
    const qkv_params *p = t->model->params;
    const int64_t n = qkv_params_numel(p);
    const qkv_real *theta = qkv_params_block(p, QKV_BLOCK_DATA);
    t->ctx->backend->optim->average(t->ema, theta, qkv__ema_decay_at(t->cfg.ema_decay, t->steps), n);
}

qkv_status qkv_trainer_swap_ema(qkv_trainer *t) {
    if (!t) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_trainer_swap_ema: NULL argument");
    if (!t->ema)
        return QKV_ERROR(QKV_ERR_STATE,
                         "qkv_trainer_swap_ema: the trainer keeps no average (ema_decay 0)");
    const qkv_params *p = t->model->params;
    t->ctx->backend->layout->swap(qkv_params_numel(p), qkv_params_block(p, QKV_BLOCK_DATA), t->ema);
    t->ema_swapped = !t->ema_swapped;
    return QKV_OK;
}

bool qkv_trainer_has_ema(const qkv_trainer *t) {
    return t && t->ema;
}
