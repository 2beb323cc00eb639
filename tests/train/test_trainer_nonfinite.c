/*
 * test_trainer_nonfinite.c: the trainer never applies a non-finite step. eps <= 0 is refused
 * (Adam's 0 / (0 + 0) for a parameter whose gradient has stayed 0 is NaN); a step whose loss or
 * gradient norm is NaN or infinite returns QKV_ERR_NONFINITE naming the step (and the parameter
 * of the first non-finite gradient) with the parameters, the optimiser moments and the step count
 * as they were, so the caller can stop or go on with the next batch; a checkpoint of non-finite
 * parameters is refused.
 */
#include "copy_task.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* The copy task's model: width 8, dropout 0.1. */
static qkv_model *tiny_model(void) { return copy_model(3, 0.1, 8); }

/* A trainer of configuration c on a new tiny model (*m). */
static qkv_trainer *tiny_trainer(const qkv_train_config *c, qkv_model **m) {
    qkv_trainer *t = NULL;
    *m = tiny_model();
    CHECK_OK(qkv_trainer_new(*m, c, &t));
    return t;
}

/* The parameters and both optimiser moments, to compare bit for bit. */
typedef struct {
    qkv_real *blocks[3];
    size_t bytes;
} snapshot;

static snapshot take(const qkv_model *m) {
    snapshot s;
    const qkv_param_block which[3] = {QKV_BLOCK_DATA, QKV_BLOCK_M, QKV_BLOCK_V};
    s.bytes = sizeof(qkv_real) * (size_t)qkv_params_numel(m->params);
    for (int i = 0; i < 3; i++) {
        s.blocks[i] = malloc(s.bytes);
        memcpy(s.blocks[i], qkv_params_block(m->params, which[i]), s.bytes);
    }
    return s;
}

static bool same(const snapshot *s, const qkv_model *m) {
    const qkv_param_block which[3] = {QKV_BLOCK_DATA, QKV_BLOCK_M, QKV_BLOCK_V};
    bool ok = true;
    for (int i = 0; i < 3; i++) ok = ok && memcmp(s->blocks[i], qkv_params_block(m->params, which[i]), s->bytes) == 0;
    return ok;
}

static void drop(snapshot *s) {
    for (int i = 0; i < 3; i++) free(s->blocks[i]);
}

TEST(trainer_refuses_eps_zero) {
    qkv_model *m = tiny_model();
    qkv_train_config c = qkv_train_default_config();
    c.optim.eps = 0;
    qkv_trainer *t = NULL;
    CHECK_ERR(qkv_trainer_new(m, &c, &t), QKV_ERR_INVALID_ARG, "eps");
    CHECK(t == NULL);
    c.optim.eps = -1e-9;
    CHECK_ERR(qkv_trainer_new(m, &c, &t), QKV_ERR_INVALID_ARG, "eps");
    c.optim.eps = 1e-60; /* 0 once rounded to float */
    if (sizeof(qkv_real) == 4) CHECK_ERR(qkv_trainer_new(m, &c, &t), QKV_ERR_INVALID_ARG, "eps");
    /* the optimiser itself too */
    qkv_optim_config o = qkv_optim_default(QKV_OPTIM_ADAMW);
    o.eps = 0;
    CHECK_ERR(qkv_optim_step(m->params, &o, 1, 1e-3), QKV_ERR_INVALID_ARG, "eps");
    CHECK_ERR(qkv_optim_check(&o), QKV_ERR_INVALID_ARG, "eps");
    o.eps = 1e-8;
    CHECK_OK(qkv_optim_check(&o));
    qkv_model_free(m);
}

TEST(trainer_step_refuses_a_nonfinite_loss_and_changes_nothing) {
    qkv_train_config c = qkv_train_default_config();
    c.schedule.warmup_steps = 2;
    qkv_model *m = NULL;
    qkv_trainer *t = tiny_trainer(&c, &m);
    copy_batch cb;
    make_copy_batch(&cb, 1);
    qkv_step_stats st;
    CHECK_OK(qkv_trainer_step(t, &cb.batch, &st));
    CHECK(st.stepped && isfinite(st.loss));
    /* a NaN bias of the output projection: a NaN logit in every row, so the loss is NaN */
    qkv_real *w = NULL;
    for (int64_t i = 0; i < qkv_params_count(m->params); i++) {
        qkv_tensor *p = qkv_params_get(m->params, i);
        if (!strcmp(p->name, "generator.bias")) w = (qkv_real *)p->data;
    }
    CHECK(w != NULL);
    if (!w) goto out;
    const qkv_real kept = w[0];
    w[0] = (qkv_real)NAN;
    snapshot before = take(m);
    make_copy_batch(&cb, 2);
    memset(&st, 0x55, sizeof st);
    CHECK_ERR(qkv_trainer_step(t, &cb.batch, &st), QKV_ERR_NONFINITE, "step 2");
    CHECK_MSG(strstr(qkv_last_error(), "loss is nan"), "message: %s", qkv_last_error());
    CHECK(!st.stepped && isnan(st.loss) && st.nonfinite == QKV_NONFINITE_LOSS);
    CHECK(same(&before, m) && qkv_trainer_steps(t) == 1);
    /* the weight repaired, the next batch trains as usual: the failed step left no trace */
    w[0] = kept;
    CHECK_OK(qkv_trainer_step(t, &cb.batch, &st));
    CHECK(st.stepped && isfinite(st.loss) && st.nonfinite == QKV_FINITE && qkv_trainer_steps(t) == 2);
    drop(&before);
out:
    qkv_trainer_free(t);
    qkv_model_free(m);
}

TEST(trainer_step_refuses_a_nonfinite_gradient_and_names_the_parameter) {
    qkv_train_config c = qkv_train_default_config();
    c.accum_steps = 2;
    qkv_model *m = NULL;
    qkv_trainer *t = tiny_trainer(&c, &m);
    copy_batch cb;
    make_copy_batch(&cb, 1);
    qkv_step_stats st;
    CHECK_OK(qkv_trainer_step(t, &cb.batch, &st));
    CHECK(!st.stepped);
    /* an infinite gradient element in the third parameter, as an overflow in the backward leaves */
    qkv_tensor *p = qkv_params_get(m->params, 2);
    const ptrdiff_t at = (const qkv_real *)p->data - qkv_params_block(m->params, QKV_BLOCK_DATA);
    qkv_params_block(m->params, QKV_BLOCK_GRAD)[at + 1] = (qkv_real)INFINITY;
    snapshot before = take(m);
    make_copy_batch(&cb, 2);
    CHECK_ERR(qkv_trainer_step(t, &cb.batch, &st), QKV_ERR_NONFINITE, "step 1");
    char expect[200];
    snprintf(expect, sizeof expect, "gradient norm is inf (first non-finite gradient: %s, element 1)", p->name);
    CHECK_MSG(strstr(qkv_last_error(), expect), "message: %s, expected %s", qkv_last_error(), expect);
    CHECK(!st.stepped && isfinite(st.loss) && isinf(st.grad_norm) && st.nonfinite == QKV_NONFINITE_GRAD);
    CHECK(same(&before, m) && qkv_trainer_steps(t) == 0);
    /* the accumulation was dropped: two clean batches make the next step */
    CHECK_OK(qkv_trainer_step(t, &cb.batch, &st));
    CHECK(!st.stepped);
    CHECK_OK(qkv_trainer_step(t, &cb.batch, &st));
    CHECK(st.stepped && isfinite(st.grad_norm) && qkv_trainer_steps(t) == 1);
    drop(&before);
    qkv_trainer_free(t);
    qkv_model_free(m);
}

TEST(trainer_save_refuses_nonfinite_parameters) {
    const qkv_train_config c = qkv_train_default_config();
    qkv_model *m = NULL;
    qkv_trainer *t = tiny_trainer(&c, &m);
    qkv_tensor *p = qkv_params_get(m->params, 1);
    ((qkv_real *)p->data)[0] = (qkv_real)NAN;
    char path[] = "/tmp/qkv_nonfinite_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    unlink(path);
    CHECK_ERR(qkv_trainer_save(t, path, 0, 0, 0), QKV_ERR_NONFINITE, p->name);
    struct stat sb;
    CHECK(stat(path, &sb) != 0);
    CHECK_ERR(qkv_trainer_check_finite(t), QKV_ERR_NONFINITE, p->name);
    ((qkv_real *)p->data)[0] = 0;
    CHECK_OK(qkv_trainer_check_finite(t));
    qkv_trainer_free(t);
    qkv_model_free(m);
}
