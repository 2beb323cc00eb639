/*
 * qkv_optim.h: optimisers (SGD with momentum, Adam, AdamW), learning-rate schedules and global
 * gradient-norm clipping, all acting on a finalized parameter table (qkv_tensor.h).
 *
 * The update rules are PyTorch's (torch.optim.SGD / Adam / AdamW, non-amsgrad, maximize=False):
 *
 *   SGD:   g = grad + wd * p                       (L2 decay, skipped when wd == 0)
 *          b = momentum * b + g                    (dampening 0; b starts at 0, so b_1 = g_1)
 *          g = nesterov ? g + momentum * b : b     (when momentum != 0)
 *          p = p - lr * g
 *   Adam:  g = grad + wd * p                       (L2 decay added to the gradient)
 *          m = m + (1 - beta1) * (g - m)           (torch's lerp form of beta1 m + (1-beta1) g)
 *          v = beta2 * v + (1 - beta2) * g * g
 *          p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 *   AdamW: p = p * (1 - lr * wd)                   (decoupled decay, before the Adam step)
 *          then Adam with wd = 0.
 *
 * m lives in the QKV_BLOCK_M block (the SGD momentum buffer too), v in QKV_BLOCK_V. Parameters
 * flagged QKV_NO_DECAY (biases, norm gains) get no weight decay. Each step is one
 * OpenMP-parallel pass over the contiguous blocks; every element is updated independently, so
 * the result does not depend on the thread count.
 */
#ifndef QKV_OPTIM_H
#define QKV_OPTIM_H

#include "qkv_base.h"
#include "qkv_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum qkv_optim_kind { QKV_OPTIM_SGD, QKV_OPTIM_ADAM, QKV_OPTIM_ADAMW } qkv_optim_kind;

typedef struct qkv_optim_config {
    qkv_optim_kind kind;
    double lr;           /* the base rate (a schedule's base_lr); qkv_optim_step takes its own */
    double momentum;     /* SGD; 0 = plain SGD */
    bool nesterov;       /* SGD; needs momentum > 0 */
    double beta1, beta2; /* Adam, AdamW: in [0, 1) */
    double eps;          /* Adam, AdamW: added to the bias-corrected sqrt(v) */
    double weight_decay; /* SGD, Adam: L2 added to the gradient; AdamW: decoupled */
} qkv_optim_config;

/* PyTorch's defaults: lr 1e-3; SGD momentum 0, nesterov off, weight decay 0; Adam betas
 * (0.9, 0.999), eps 1e-8, weight decay 0; AdamW the same with weight decay 1e-2. */
QKV_API qkv_optim_config qkv_optim_default(qkv_optim_kind kind);

/* One update of every parameter from its gradient. step is 1-based (the bias corrections use
 * beta^step); lr is this step's rate (qkv_lr_at(schedule, step), or c->lr). Errors:
 * QKV_ERR_STATE when the table is not finalized, QKV_ERR_INVALID_ARG for step < 1, a negative
 * or non-finite lr, or an out-of-range setting (as torch rejects them). */
QKV_API qkv_status qkv_optim_step(qkv_params *p, const qkv_optim_config *c, int64_t step,
                                  double lr);
/* The checks qkv_optim_step makes of c alone (for a caller that wants them before the first
 * step): QKV_OK, or QKV_ERR_INVALID_ARG naming the bad setting. Adam(W)'s eps must be > 0 (also
 * once rounded to qkv_real): with eps = 0, which torch allows, a parameter whose gradient has
 * always been 0 gets 0 / 0 = NaN. */
QKV_API qkv_status qkv_optim_check(const qkv_optim_config *c);

/* ---- learning-rate schedules ------------------------------------------------------------------
 * step is the 1-based optimiser step; every schedule gives 0 at step <= 0 except CONSTANT.
 *
 *   CONSTANT:       base_lr.
 *   INV_SQRT:       "Attention Is All You Need", eq. (3), with w = warmup_steps:
 *                     d_model > 0:  base_lr * d_model^-0.5 * min(step^-0.5, step * w^-1.5)
 *                                   (the paper's rule is base_lr = 1);
 *                     d_model == 0: base_lr * w^0.5 * min(step^-0.5, step * w^-1.5), normalised
 *                                   so the peak, at step == w, equals base_lr.
 *                   Linear warm-up to step w, then decay as 1/sqrt(step). w == 0: no warm-up
 *                   (base_lr * step^-0.5, times d_model^-0.5 when d_model > 0).
 *   WARMUP_COSINE:  base_lr * step / w for step <= w (linear from 0; base_lr at step w), then
 *                   min_lr + (base_lr - min_lr) * (1 + cos(pi * (step - w) / (total - w))) / 2
 *                   up to total_steps, and min_lr after. w == 0: the decay starts at step 0.
 * ------------------------------------------------------------------------------------------- */

/* qkv_lr_kind: qkv_enums.h lists its values. */

typedef struct qkv_lr_schedule {
    qkv_lr_kind kind;
    double base_lr;
    int64_t warmup_steps;
    int64_t total_steps; /* WARMUP_COSINE: end of the decay (>= warmup_steps) */
    double min_lr;       /* WARMUP_COSINE: the final rate */
    int64_t d_model;     /* INV_SQRT: > 0 selects the paper's d_model^-0.5 scale */
} qkv_lr_schedule;

/* QKV_OK, or QKV_ERR_INVALID_ARG naming the bad field. */
QKV_API qkv_status qkv_lr_check(const qkv_lr_schedule *s);
/* The rate at a step; NaN when the schedule fails qkv_lr_check (qkv_optim_step rejects NaN). */
QKV_API double qkv_lr_at(const qkv_lr_schedule *s, int64_t step);

/* ---- gradient clipping ------------------------------------------------------------------------
 * torch.nn.utils.clip_grad_norm_ with the L2 norm: norm = sqrt(sum of every squared gradient
 * element), accumulated in double in a fixed order (bit-identical for any thread count); when
 * max_norm > 0 and c = max_norm / (norm + 1e-6) < 1, every gradient is multiplied by c.
 * Returns the norm before clipping (max_norm <= 0: only computes it); NaN with qkv_last_error()
 * set when p is NULL or not finalized. A non-finite norm scales as torch does (to NaN / 0). */
QKV_API double qkv_clip_grad_norm(qkv_params *p, double max_norm);

#ifdef __cplusplus
}
#endif

#endif
