/* trainer_internal.h: the trainer's state, shared by trainer.c and checkpoint.c. */
#ifndef QKV_TRAINER_INTERNAL_H
#define QKV_TRAINER_INTERNAL_H

#include "../core/internal.h"

struct qkv_trainer {
    qkv_model *model;
    qkv_train_config cfg;
    qkv_ctx *ctx;
    int64_t steps;       /* optimiser steps taken */
    int32_t accumulated; /* batches accumulated since the last optimiser step */
};

#endif
