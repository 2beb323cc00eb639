/* trainer_internal.h: the trainer's state, shared by trainer.c and checkpoint.c. */
#ifndef QKV_TRAINER_INTERNAL_H
#define QKV_TRAINER_INTERNAL_H

#include "../core/internal.h"
#include "qkv/qkv_train.h"

struct qkv_optim_kernels; /* kernels/optim.h */

struct qkv_trainer {
    qkv_model *model;
    qkv_train_config cfg;
    qkv_ctx *ctx;
    int64_t steps;       /* optimiser steps taken */
    int32_t accumulated; /* batches accumulated since the last optimiser step */
    qkv_real *ema;       /* the parameter average (ema.c), NULL when cfg.ema_decay is 0 */
    bool ema_swapped;    /* the model holds the average, ema the training weights */
};

/* trainer.c: whether a parameter (or the average) holds a non-finite value; what says which. */
bool qkv__trainer_nonfinite(const qkv_trainer *t, char *what, size_t size);

/* clip.c: qkv_clip_grad_norm, but a non-finite norm leaves the gradients unscaled (so the
 * trainer can still find the parameter whose gradient is not finite). */
double qkv__clip_grad_norm_finite(const struct qkv_optim_kernels *kern, qkv_params *p, double max_norm);

/* optim.c: qkv_optim_step with the given optimiser kernels (the context's backend). */
qkv_status qkv__optim_step(const struct qkv_optim_kernels *kern, qkv_params *p, const qkv_optim_config *c,
                           int64_t step, double lr);

/* ema.c */
double qkv__ema_decay_at(double decay, int64_t step);
qkv_status qkv__ema_init(qkv_trainer *t);
void qkv__ema_update(qkv_trainer *t); /* after optimiser step t->steps */

#endif
