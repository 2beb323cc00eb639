/*
 * trainer.c: one training step of a qkv_model (qkv_train.h): teacher forcing or two-pass
 * scheduled sampling, label-smoothed cross-entropy, optional guided attention, gradient
 * accumulation, clipping, and an optimiser step on a learning-rate schedule; non-autoregressive
 * models train on masked targets (nat_loss.c).
 *
 * Dims: B batch, S source length, T target length, V vocabulary, H heads.
 */
#include "trainer_internal.h"
#include "../kernels/backend.h"
#include "qkv/qkv_registry.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Philox stream of scheduled sampling's coin flips (dropout uses small per-step streams). */
#define SS_STREAM 0x55AAu

qkv_train_config qkv_train_default_config(void) {
    qkv_train_config c;
    memset(&c, 0, sizeof c);
    c.optim = qkv_optim_default(QKV_OPTIM_ADAMW);
    c.optim.beta2 = 0.98;
    c.optim.eps = 1e-9;
    c.optim.lr = 1e-3;
    c.schedule = (qkv_lr_schedule){.kind = QKV_LR_INV_SQRT, .base_lr = 1e-3, .warmup_steps = 4000};
    c.clip_norm = 1.0;
    c.label_smoothing = 0.1;
    c.accum_steps = 1;
    c.seed = 1;
    c.ss_kind = QKV_SS_NONE;
    c.ss_k = 0.999;
    c.ss_decay_steps = 10000;
    c.ss_min_gold = 0.75;
    c.guided_weight = 0;
    c.guided_sigma = 0.2;
    c.length_weight = 0.1;
    return c;
}

double qkv_ss_gold_probability(const qkv_train_config *c, int64_t step) {
    const double i = (double)(step > 0 ? step : 0);
    switch (c->ss_kind) {
    case QKV_SS_NONE: return 1;
    case QKV_SS_LINEAR: return fmax(c->ss_min_gold, 1 - i / (double)c->ss_decay_steps);
    case QKV_SS_EXPONENTIAL: return fmax(c->ss_min_gold, pow(c->ss_k, i));
    case QKV_SS_INVERSE_SIGMOID: return c->ss_k / (c->ss_k + exp(i / c->ss_k));
    }
    return 1;
}

static qkv_status check_config(const qkv_model *m, const qkv_train_config *c) {
    if (c->accum_steps < 1) return QKV_ERROR(QKV_ERR_INVALID_ARG, "trainer: accum_steps %d must be >= 1", c->accum_steps);
    if (!(c->label_smoothing >= 0 && c->label_smoothing <= 1))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "trainer: label_smoothing %g is not in [0, 1]", c->label_smoothing);
    if (!qkv_registry_name(QKV_REGISTRY_SCHEDULED_SAMPLING, c->ss_kind))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "trainer: unknown scheduled sampling kind %d", (int)c->ss_kind);
    if (c->ss_kind == QKV_SS_LINEAR && c->ss_decay_steps <= 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "trainer: ss_decay_steps must be positive");
    if (c->ss_kind == QKV_SS_EXPONENTIAL && !(c->ss_k > 0 && c->ss_k < 1))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "trainer: exponential scheduled sampling needs 0 < k < 1, got %g", c->ss_k);
    if (c->ss_kind == QKV_SS_INVERSE_SIGMOID && !(c->ss_k >= 1))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "trainer: inverse-sigmoid scheduled sampling needs k >= 1, got %g", c->ss_k);
    qkv_status st = qkv_optim_check(&c->optim);
    if (st) return st;
    if ((c->ss_kind != QKV_SS_NONE || c->guided_weight != 0) && m->cfg.arch != QKV_ARCH_ENCODER_DECODER)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "trainer: scheduled sampling and guided attention need an encoder-decoder");
    if (!(c->guided_weight >= 0) || !(c->guided_sigma > 0))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "trainer: guided_weight %g must be >= 0 and guided_sigma %g > 0",
                         c->guided_weight, c->guided_sigma);
    if (!(c->length_weight >= 0 && isfinite(c->length_weight)))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "trainer: length_weight %g must be finite and >= 0", c->length_weight);
    if (!(c->ema_decay >= 0 && c->ema_decay < 1))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "trainer: ema_decay %g is not in [0, 1)", c->ema_decay);
    if (m->cfg.nat && (c->ss_kind != QKV_SS_NONE || c->guided_weight != 0))
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "trainer: scheduled sampling and guided attention are for autoregressive decoders, the model is nat");
    return qkv_lr_check(&c->schedule);
}

qkv_status qkv_trainer_new(qkv_model *m, const qkv_train_config *c, qkv_trainer **out) {
    if (!out || !m || !c) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_trainer_new: NULL argument");
    *out = NULL;
    qkv_status st = check_config(m, c);
    if (st) return st;
    qkv_trainer *t = calloc(1, sizeof *t);
    if (!t) return QKV_ERROR(QKV_ERR_OOM, "qkv_trainer_new: out of memory");
    qkv_ctx_params cp = qkv_ctx_default_params();
    cp.seed = c->seed;
    st = qkv_ctx_new(&cp, &t->ctx);
    if (st) {
        free(t);
        return st;
    }
    t->model = m;
    t->cfg = *c;
    if ((st = qkv__ema_init(t))) {
        qkv_trainer_free(t);
        return st;
    }
    *out = t;
    return QKV_OK;
}

void qkv_trainer_free(qkv_trainer *t) {
    if (!t) return;
    qkv_ctx_free(t->ctx);
    free(t->ema);
    free(t);
}

int64_t qkv_trainer_steps(const qkv_trainer *t) { return t ? t->steps : 0; }
qkv_ctx *qkv_trainer_ctx(qkv_trainer *t) { return t ? t->ctx : NULL; }

/* ---- loss ----------------------------------------------------------------------------------- */

static qkv_tensor *ids(qkv_ctx *ctx, const int32_t *data, int64_t rows, int64_t cols, const char *what) {
    if (!data) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "trainer: the batch has no %s", what);
    if (rows < 1 || cols < 1) return QKV_FAIL(ctx, QKV_ERR_SHAPE, "trainer: %s is empty (%lld x %lld)", what, (long long)rows, (long long)cols);
    return qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){rows, cols}, data);
}

static int64_t count_not(const int32_t *x, int64_t n, int32_t skip) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) c += x[i] != skip;
    return c;
}

/* The guided attention term of a batch: true lengths from the padding. */
static qkv_tensor *guided_loss(qkv_ctx *ctx, const qkv_trainer *t, const qkv_train_batch *b, qkv_tensor **maps) {
    const int32_t pad = t->model->cfg.pad_id;
    int32_t *src_len = qkv__scratch(ctx, sizeof(int32_t) * (size_t)b->batch);
    int32_t *tgt_len = qkv__scratch(ctx, sizeof(int32_t) * (size_t)b->batch);
    if (!src_len || !tgt_len) return NULL;
    for (int32_t r = 0; r < b->batch; r++) {
        src_len[r] = (int32_t)count_not(b->src + (int64_t)r * b->src_len, b->src_len, pad);
        tgt_len[r] = (int32_t)count_not(b->tgt_out + (int64_t)r * b->tgt_len, b->tgt_len, pad);
    }
    return qkv_guided_attention_loss(ctx, maps, t->model->cfg.n_decoder_layers, src_len, tgt_len, t->cfg.guided_sigma);
}

/* Scheduled sampling's decoder input: gold tokens, each after BOS replaced with probability
 * 1 - p_gold by pass 1's prediction of it. */
static qkv_tensor *mixed_decoder_input(qkv_ctx *ctx, const qkv_trainer *t, const qkv_train_batch *b, qkv_tensor *src,
                                       qkv_tensor *tgt_in, double p_gold) {
    const qkv_model *m = t->model;
    const int64_t B = b->batch, T = b->tgt_len;
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_ctx_set_training(ctx, false); /* pass 1: no dropout, no tape */
    qkv_tensor *memory = qkv_model_encode(ctx, m, src, NULL);
    qkv_tensor *pred = qkv_argmax(ctx, qkv_model_decode(ctx, m, tgt_in, memory, src, NULL, NULL)); /* (B, T) */
    qkv_ctx_set_grad_enabled(ctx, true);
    qkv_ctx_set_training(ctx, true);
    if (!pred) return NULL;
    qkv_tensor *mixed = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, T}, b->tgt_in);
    if (!mixed) return NULL;
    uint64_t seed, step;
    qkv_ctx_get_rng(ctx, &seed, &step);
    for (int64_t r = 0; r < B; r++)
        for (int64_t i = 1; i < T; i++) {
            int32_t *x = &qkv__idata(mixed)[r * T + i];
            if (*x == m->cfg.pad_id) continue;
            if (qkv_rng_uniform(seed, step, SS_STREAM, (uint64_t)(r * T + i)) >= p_gold)
                *x = qkv__idata(pred)[r * T + i - 1]; /* the model's guess of this input token */
        }
    return mixed;
}

/* Image models: the batch's pixels as a (B, H_img, W_img, Ch) tensor. */
static qkv_tensor *pixels_of(qkv_ctx *ctx, const qkv_model_config *c, const qkv_train_batch *b) {
    const int32_t *s = b->image_shape;
    if (!b->pixels) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "trainer: the batch has no pixels (the model reads images)");
    if (s[0] != c->image.height || s[1] != c->image.width || s[2] != c->image.channels)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "trainer: batch images %d x %d x %d do not match the model's %d x %d x %d", s[0],
                        s[1], s[2], c->image.height, c->image.width, c->image.channels);
    return qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){b->batch, s[0], s[1], s[2]}, b->pixels);
}

/* A non-autoregressive batch: masks from the context's RNG position, then the NAT loss. */
static qkv_tensor *nat_batch_loss(qkv_ctx *ctx, qkv_trainer *t, const qkv_train_batch *b, qkv_tensor **ce_out,
                                  qkv_tensor **length_out, int64_t *tokens) {
    const int64_t B = b->batch, T = b->tgt_len;
    qkv_tensor *src = ids(ctx, b->src, B, b->src_len, "src");
    qkv_tensor *tgt = ids(ctx, b->tgt_out, B, T, "tgt_out (the NAT target)");
    bool *masked = src && tgt ? qkv__scratch(ctx, sizeof(bool) * (size_t)(B * T)) : NULL;
    if (!masked) return NULL;
    uint64_t seed, step;
    qkv_ctx_get_rng(ctx, &seed, &step);
    qkv_status st = qkv_nat_sample_mask(b->tgt_out, (int32_t)B, (int32_t)T, t->model->cfg.pad_id, seed, step, masked);
    if (st) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", qkv_last_error());
        return QKV_FAIL(ctx, st, "trainer: %s", msg);
    }
    qkv_tensor *loss = qkv_nat_loss(ctx, t->model, src, tgt, masked, t->cfg.label_smoothing, t->cfg.length_weight,
                                    ce_out, length_out);
    *tokens = 0;
    for (int64_t i = 0; loss && i < B * T; i++) *tokens += masked[i];
    return loss;
}

/* Forward of the batch to the scalar loss to minimise; *ce receives the cross-entropy. */
static qkv_tensor *batch_loss(qkv_ctx *ctx, qkv_trainer *t, const qkv_train_batch *b, double p_gold, qkv_tensor **ce_out,
                              qkv_tensor **guided_out, qkv_tensor **length_out, int64_t *tokens) {
    const qkv_model *m = t->model;
    const qkv_model_config *c = &m->cfg;
    const int64_t B = b->batch;
    *length_out = NULL;
    if (B < 1) return QKV_FAIL(ctx, QKV_ERR_SHAPE, "trainer: empty batch");
    if (c->nat) {
        *guided_out = NULL;
        return nat_batch_loss(ctx, t, b, ce_out, length_out, tokens);
    }
    const bool image = qkv_model_is_image(c);
    qkv_tensor *src = image ? pixels_of(ctx, c, b) : ids(ctx, b->src, B, c->arch == QKV_ARCH_DECODER ? b->tgt_len : b->src_len, "src");
    qkv_tensor *logits = NULL, *targets = NULL;
    int32_t ignore = c->pad_id;
    *guided_out = NULL;
    switch (c->arch) {
    case QKV_ARCH_ENCODER_DECODER: {
        /* teacher forcing starts every row from the model's bos_id: the id decoding will feed */
        for (int64_t r = 0; c->bos_id >= 0 && b->tgt_in && b->tgt_len > 0 && r < B; r++)
            if (b->tgt_in[r * b->tgt_len] != c->bos_id)
                return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                                "trainer: tgt_in row %lld starts with %d, not the model's bos_id %d "
                                "(qkv_model_config.bos_id, stored with the model for decoding)",
                                (long long)r, b->tgt_in[r * b->tgt_len], c->bos_id);
        qkv_tensor *tgt_in = ids(ctx, b->tgt_in, B, b->tgt_len, "tgt_in");
        targets = ids(ctx, b->tgt_out, B, b->tgt_len, "tgt_out");
        if (t->cfg.ss_kind != QKV_SS_NONE && src && tgt_in) tgt_in = mixed_decoder_input(ctx, t, b, src, tgt_in, p_gold);
        qkv_tensor *memory = qkv_model_encode(ctx, m, src, NULL);
        qkv_tensor **maps = NULL;
        if (t->cfg.guided_weight > 0) {
            maps = qkv__scratch(ctx, sizeof *maps * (size_t)c->n_decoder_layers);
            if (maps) memset(maps, 0, sizeof *maps * (size_t)c->n_decoder_layers);
        }
        logits = qkv_model_decode(ctx, m, tgt_in, memory, src, NULL, maps);
        if (maps && logits) *guided_out = guided_loss(ctx, t, b, maps);
        break;
    }
    case QKV_ARCH_ENCODER:
        if (!b->labels) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "trainer: the batch has no labels");
        logits = image ? qkv_model_classify_image(ctx, m, src, NULL)
                       : qkv_model_classify_features(
                             ctx, m, src,
                             b->features ? qkv_tensor_from(ctx, QKV_I32, 3, (int64_t[]){B, b->src_len, c->n_features}, b->features)
                                         : NULL,
                             NULL);
        targets = c->head == QKV_HEAD_POOLED ? qkv_tensor_from(ctx, QKV_I32, 1, (int64_t[]){B}, b->labels)
                                             : ids(ctx, b->labels, B, b->src_len, "labels");
        ignore = QKV_NO_LABEL;
        break;
    case QKV_ARCH_DECODER:
        logits = qkv_model_lm(ctx, m, src, NULL);
        targets = ids(ctx, b->tgt_out, B, b->tgt_len, "tgt_out");
        break;
    }
    if (!logits || !targets) return NULL;
    const int64_t V = logits->shape[logits->ndim - 1], N = qkv_tensor_numel(targets);
    qkv_tensor *ce = qkv_cross_entropy(ctx, qkv_reshape(ctx, logits, 2, (int64_t[]){N, V}),
                                       qkv_reshape(ctx, targets, 1, &N), ignore, t->cfg.label_smoothing);
    *ce_out = ce;
    *tokens = ce ? count_not(qkv__idata(targets), N, ignore) : 0;
    if (*guided_out) return qkv_add(ctx, ce, qkv_scale(ctx, *guided_out, t->cfg.guided_weight));
    return ce;
}

/* "nan", "inf" or "-inf" (printf's "%g" may print "-nan"). */
static const char *nonfinite_name(double v) { return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

/* The first parameter element of block b (data, gradient) that is not finite: its index and
 * element, or -1. */
static int64_t first_nonfinite(const qkv_params *p, const qkv_real *block, int64_t *element) {
    const qkv_real *base = qkv_params_block(p, QKV_BLOCK_DATA);
    for (int64_t k = 0, n = qkv_params_count(p); k < n; k++) {
        const qkv_tensor *x = qkv_params_get((qkv_params *)p, k);
        const qkv_real *v = block + ((const qkv_real *)x->data - base);
        for (int64_t i = 0, numel = qkv_tensor_numel(x); i < numel; i++)
            if (!isfinite(v[i])) {
                *element = i;
                return k;
            }
    }
    return -1;
}

bool qkv__trainer_nonfinite(const qkv_trainer *t, char *what, size_t size) {
    const qkv_params *p = t->model->params;
    const qkv_real *base = qkv_params_block(p, QKV_BLOCK_DATA);
    for (int b = 0; b < (t->ema ? 2 : 1); b++) {
        /* while the average is swapped in, the model holds it and ema the training weights */
        const bool average = (b == 1) != t->ema_swapped;
        const qkv_real *block = b == 0 ? base : t->ema;
        int64_t e = 0;
        const int64_t k = first_nonfinite(p, block, &e);
        if (k >= 0) {
            const qkv_tensor *x = qkv_params_get((qkv_params *)p, k);
            const double v = (double)block[((const qkv_real *)x->data - base) + e];
            snprintf(what, size, "%s%.200s, element %lld, is %s after step %lld",
                     average ? "the parameter average of " : "parameter ", x->name, (long long)e,
                     nonfinite_name(v), (long long)t->steps);
            return true;
        }
    }
    return false;
}

qkv_status qkv_trainer_check_finite(const qkv_trainer *t) {
    if (!t) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_trainer_check_finite: NULL argument");
    char what[320];
    if (qkv__trainer_nonfinite(t, what, sizeof what))
        return QKV_ERROR(QKV_ERR_NONFINITE, "qkv_trainer_check_finite: %s", what);
    return QKV_OK;
}

qkv_status qkv_trainer_step(qkv_trainer *t, const qkv_train_batch *b, qkv_step_stats *stats) {
    if (!t || !b) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_trainer_step: NULL argument");
    if (t->ema_swapped)
        return QKV_ERROR(QKV_ERR_STATE, "qkv_trainer_step: the model holds the parameter average; swap it back first");
    qkv_step_stats s;
    memset(&s, 0, sizeof s);
    s.grad_norm = NAN;
    qkv_ctx *ctx = t->ctx;
    qkv_params *p = t->model->params;
    if (t->accumulated == 0) qkv_params_zero_grad(p);
    qkv_ctx_reset(ctx);
    qkv_ctx_set_training(ctx, true);
    qkv_ctx_set_grad_enabled(ctx, true);
    s.gold_probability = qkv_ss_gold_probability(&t->cfg, t->steps + 1);
    qkv_tensor *ce = NULL, *guided = NULL, *length = NULL;
    qkv_tensor *loss = batch_loss(ctx, t, b, s.gold_probability, &ce, &guided, &length, &s.tokens);
    if (loss && t->cfg.accum_steps > 1) loss = qkv_scale(ctx, loss, 1.0 / t->cfg.accum_steps); /* average */
    qkv_status st = qkv_ctx_status(ctx);
    if (!st) {
        s.loss = (double)qkv__data(ce)[0];
        s.guided_loss = guided ? (double)qkv__data(guided)[0] : 0;
        s.length_loss = length ? (double)qkv__data(length)[0] : 0;
        if (!isfinite((double)qkv__data(loss)[0])) {
            const char *what = !isfinite(s.loss)          ? "the loss"
                               : !isfinite(s.guided_loss) ? "the guided attention loss"
                               : !isfinite(s.length_loss) ? "the length loss"
                                                          : "the weighted sum of the losses";
            const double v = !isfinite(s.loss) ? s.loss : !isfinite(s.guided_loss) ? s.guided_loss
                             : !isfinite(s.length_loss) ? s.length_loss : (double)qkv__data(loss)[0];
            s.nonfinite = QKV_NONFINITE_LOSS;
            st = QKV_ERROR(QKV_ERR_NONFINITE, "qkv_trainer_step: step %lld: %s is %s; the step was not applied",
                           (long long)(t->steps + 1), what, nonfinite_name(v));
        }
    }
    if (!st) st = qkv_backward(ctx, loss);
    if (st) {
        /* nothing was applied; drop a partial accumulation so the next step starts clean */
        t->accumulated = 0;
        if (st == QKV_ERR_NONFINITE && stats) *stats = s;
        return st;
    }
    if (++t->accumulated == t->cfg.accum_steps) {
        t->accumulated = 0;
        s.grad_norm = qkv__clip_grad_norm_finite(ctx->backend->optim, p, t->cfg.clip_norm);
        if (!isfinite(s.grad_norm)) {
            int64_t e = 0;
            const int64_t k = first_nonfinite(p, qkv_params_block(p, QKV_BLOCK_GRAD), &e);
            char where[300] = "";
            if (k >= 0)
                snprintf(where, sizeof where, " (first non-finite gradient: %.200s, element %lld)",
                         qkv_params_get(p, k)->name, (long long)e);
            s.nonfinite = QKV_NONFINITE_GRAD;
            if (stats) *stats = s;
            return QKV_ERROR(QKV_ERR_NONFINITE, "qkv_trainer_step: step %lld: the gradient norm is %s%s; the step was not applied",
                             (long long)(t->steps + 1), nonfinite_name(s.grad_norm), where);
        }
        s.lr = qkv_lr_at(&t->cfg.schedule, t->steps + 1);
        st = qkv__optim_step(ctx->backend->optim, p, &t->cfg.optim, t->steps + 1, s.lr);
        if (st) return st;
        t->steps++;
        qkv__ema_update(t);
        s.stepped = true;
    }
    if (stats) *stats = s;
    return QKV_OK;
}

qkv_status qkv_trainer_eval_loss(qkv_trainer *t, const qkv_train_batch *b, double *loss, int64_t *tokens) {
    if (!t || !b) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_trainer_eval_loss: NULL argument");
    qkv_ctx *ctx = t->ctx;
    uint64_t seed, step;
    qkv_ctx_get_rng(ctx, &seed, &step); /* evaluation must not move the training RNG */
    qkv_ctx_reset(ctx);
    qkv_ctx_set_training(ctx, false);
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_train_config saved = t->cfg;
    t->cfg.ss_kind = QKV_SS_NONE;
    t->cfg.guided_weight = 0;
    qkv_tensor *ce = NULL, *guided = NULL, *length = NULL;
    int64_t n = 0;
    batch_loss(ctx, t, b, 1.0, &ce, &guided, &length, &n);
    t->cfg = saved;
    qkv_status st = qkv_ctx_status(ctx);
    if (!st) {
        if (loss) *loss = (double)qkv__data(ce)[0];
        if (tokens) *tokens = n;
    }
    qkv_ctx_set_grad_enabled(ctx, true);
    qkv_ctx_set_rng(ctx, seed, step);
    return st;
}
