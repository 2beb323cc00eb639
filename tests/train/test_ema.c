/*
 * test_ema.c: the trainer's exponential moving average of the parameters (src/train/ema.c).
 *   - after each step the average equals the recurrence ema_t = d_t ema_{t-1} + (1 - d_t) theta_t,
 *     d_t = min(decay, (1 + t) / (10 + t)), ema_0 = the initial weights, computed here in double
 *     from snapshots of the weights (both the ramp and the clamped regime are exercised);
 *   - swapping puts the average into the model and swapping again restores the training weights
 *     bit for bit; steps and checkpoints are refused while the model holds the average;
 *   - a checkpoint carries the average: 3 steps, save, load into a fresh trainer, 3 more steps
 *     equals 6 steps at once, weights and average bit for bit; a checkpoint with an average does
 *     not load into a trainer without one, nor the reverse;
 *   - a decay outside [0, 1) is refused, and a trainer without an average has none to swap.
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

enum { N_IMG = 6, SIDE = 4, K = 3 };

static qkv_model *image_model(void) {
    qkv_model_config c = qkv_model_image_config(SIDE, SIDE, 1, 2, K, 8, 2, 1);
    c.dropout = 0.1;
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&c, 3, &m));
    return m;
}

static qkv_train_config ema_config(double decay) {
    qkv_train_config c = qkv_train_default_config();
    c.schedule = (qkv_lr_schedule){.kind = QKV_LR_CONSTANT, .base_lr = 1e-2};
    c.optim.lr = 1e-2;
    c.ema_decay = decay;
    return c;
}

/* Batch `step`: N_IMG random images with labels 0 .. K-1. */
typedef struct {
    qkv_real pixels[N_IMG * SIDE * SIDE];
    int32_t labels[N_IMG];
    qkv_train_batch b;
} image_batch;

static void make_batch(image_batch *ib, int step) {
    tu_fill_uniform(ib->pixels, N_IMG * SIDE * SIDE, 0, 1, 100 + (uint64_t)step);
    for (int i = 0; i < N_IMG; i++)
        ib->labels[i] = (i + step) % K;
    ib->b = (qkv_train_batch){
        .batch = N_IMG, .labels = ib->labels, .pixels = ib->pixels, .image_shape = {SIDE, SIDE, 1}};
}

static void step(qkv_trainer *t, int i) {
    image_batch ib;
    make_batch(&ib, i);
    CHECK_OK(qkv_trainer_step(t, &ib.b, NULL));
}

static qkv_real *params_of(const qkv_model *m) {
    const int64_t n = qkv_params_numel(m->params);
    qkv_real *x = malloc(sizeof(qkv_real) * (size_t)n);
    memcpy(x, qkv_params_block(m->params, QKV_BLOCK_DATA), sizeof(qkv_real) * (size_t)n);
    return x;
}

static bool same_params(const qkv_model *m, const qkv_real *x) {
    return !memcmp(qkv_params_block(m->params, QKV_BLOCK_DATA), x,
                   sizeof(qkv_real) * (size_t)qkv_params_numel(m->params));
}

TEST(ema_follows_its_recurrence_from_the_initial_weights) {
    const double decay =
        0.4; /* the ramp 2/11, 3/12, ... is below it for t < 5, at or above after */
    qkv_model *m = image_model();
    qkv_trainer *t = NULL;
    qkv_train_config c = ema_config(decay);
    CHECK_OK(qkv_trainer_new(m, &c, &t));
    if (!t) return;
    CHECK(qkv_trainer_has_ema(t));
    const int64_t n = qkv_params_numel(m->params);
    double *ref = malloc(sizeof(double) * (size_t)n);
    const qkv_real *theta = qkv_params_block(m->params, QKV_BLOCK_DATA);
    for (int64_t i = 0; i < n; i++)
        ref[i] = (double)theta[i];
    for (int s = 1; s <= 8; s++) {
        step(t, s);
        const double d = fmin(decay, (1.0 + s) / (10.0 + s));
        for (int64_t i = 0; i < n; i++)
            ref[i] = d * ref[i] + (1 - d) * (double)theta[i];
    }
    qkv_real *trained = params_of(m);
    CHECK_OK(qkv_trainer_swap_ema(t));
    double worst = 0, moved = 0;
    for (int64_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)theta[i] - ref[i]) / fmax(1, fabs(ref[i])));
        moved = fmax(moved, fabs((double)theta[i] - (double)trained[i]));
    }
    CHECK_MSG(worst < (sizeof(qkv_real) == 4 ? 1e-6 : 1e-14), "average off by %g", worst);
    CHECK_MSG(moved > 1e-4, "the average equals the last weights (%g)", moved);
    /* while the model holds the average: no step, no checkpoint */
    image_batch ib;
    make_batch(&ib, 9);
    CHECK_ERR(qkv_trainer_step(t, &ib.b, NULL), QKV_ERR_STATE, "swap it back");
    char path[] = "/tmp/qkv_ema_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_ERR(qkv_trainer_save(t, path, 0, 0, 0), QKV_ERR_STATE, "swap it back");
    CHECK_OK(qkv_trainer_swap_ema(t));
    CHECK(same_params(m, trained));
    unlink(path);
    free(trained);
    free(ref);
    qkv_trainer_free(t);
    qkv_model_free(m);
}

TEST(ema_resumes_bit_identically) {
    char path[] = "/tmp/qkv_ema_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    qkv_train_config c = ema_config(0.9);
    /* 6 steps at once */
    qkv_model *m1 = image_model();
    qkv_trainer *t1 = NULL;
    CHECK_OK(qkv_trainer_new(m1, &c, &t1));
    for (int s = 0; s < 6 && t1; s++)
        step(t1, s);
    /* 3 steps, a checkpoint, a fresh trainer, 3 more */
    qkv_model *m2 = image_model();
    qkv_trainer *t2 = NULL;
    CHECK_OK(qkv_trainer_new(m2, &c, &t2));
    for (int s = 0; s < 3 && t2; s++)
        step(t2, s);
    CHECK_OK(qkv_trainer_save(t2, path, 0, 3, 0));
    qkv_trainer_free(t2);
    qkv_model_free(m2);
    m2 = image_model();
    CHECK_OK(qkv_trainer_new(m2, &c, &t2));
    CHECK_OK(qkv_trainer_load(t2, path, NULL, NULL, NULL));
    for (int s = 3; s < 6 && t2; s++)
        step(t2, s);
    if (!t1 || !t2) return;
    qkv_real *w = params_of(m1);
    CHECK(same_params(m2, w));
    free(w);
    CHECK_OK(qkv_trainer_swap_ema(t1));
    CHECK_OK(qkv_trainer_swap_ema(t2));
    w = params_of(m1);
    CHECK(same_params(m2, w));
    free(w);
    CHECK_OK(qkv_trainer_swap_ema(t1));
    CHECK_OK(qkv_trainer_swap_ema(t2));
    /* the checkpoint (with an average) into a trainer without one, and the reverse */
    qkv_model *m3 = image_model();
    qkv_trainer *t3 = NULL;
    qkv_train_config plain = ema_config(0);
    CHECK_OK(qkv_trainer_new(m3, &plain, &t3));
    CHECK_ERR(qkv_trainer_load(t3, path, NULL, NULL, NULL), QKV_ERR_FORMAT,
              "holds a parameter average");
    CHECK_OK(qkv_trainer_save(t3, path, 0, 0, 0));
    CHECK_ERR(qkv_trainer_load(t2, path, NULL, NULL, NULL), QKV_ERR_FORMAT,
              "lacks a parameter average");
    unlink(path);
    qkv_trainer_free(t1);
    qkv_trainer_free(t2);
    qkv_trainer_free(t3);
    qkv_model_free(m1);
    qkv_model_free(m2);
    qkv_model_free(m3);
}

TEST(ema_decay_is_checked_and_optional) {
    qkv_model *m = image_model();
    qkv_trainer *t = NULL;
    qkv_train_config c = ema_config(1.0);
    CHECK_ERR(qkv_trainer_new(m, &c, &t), QKV_ERR_INVALID_ARG, "ema_decay 1 is not in [0, 1)");
    c.ema_decay = -0.5;
    CHECK_ERR(qkv_trainer_new(m, &c, &t), QKV_ERR_INVALID_ARG, "ema_decay");
    c.ema_decay = 0;
    CHECK_OK(qkv_trainer_new(m, &c, &t));
    CHECK(!qkv_trainer_has_ema(t));
    CHECK_ERR(qkv_trainer_swap_ema(t), QKV_ERR_STATE, "no average");
    qkv_trainer_free(t);
    qkv_model_free(m);
}
