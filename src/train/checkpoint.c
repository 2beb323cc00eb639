/*
 * checkpoint.c: training checkpoints. One safetensors file holds, in the build's real dtype,
 *   model.<name>    every parameter
 *   optim.m.<name>  the optimiser's first moment (Adam m, SGD momentum)
 *   optim.v.<name>  the second moment (Adam v)
 *   ema.<name>      the parameter average (ema.c), only with ema_decay > 0
 * and in its metadata the model configuration ("qkv.config"), the optimiser step, the RNG
 * position (seed, step) and the caller's data position (epoch, batch). The file is written to a
 * temporary name and renamed (qkv_st_save), so a crash never leaves a half-written checkpoint.
 * Loading validates everything before touching the trainer.
 */
#include "trainer_internal.h"
#include "qkv/qkv_io.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *block_prefix[4] = {"model.", "optim.m.", "optim.v.", "ema."};
static const qkv_param_block block_of[3] = {QKV_BLOCK_DATA, QKV_BLOCK_M, QKV_BLOCK_V};

/* Pointer to tensor i's slice of block b: a parameter block, or (b = 3) the trainer's average. */
static qkv_real *slice(const qkv_trainer *tr, int b, int64_t i) {
    const qkv_params *p = tr->model->params;
    const qkv_tensor *t = qkv_params_get(p, i);
    const ptrdiff_t at = (const qkv_real *)t->data - qkv_params_block(p, QKV_BLOCK_DATA);
    return (b == 3 ? tr->ema : qkv_params_block(p, block_of[b])) + at;
}

qkv_status qkv_trainer_save(const qkv_trainer *t, const char *path, int64_t data_epoch, int64_t data_batch,
                            uint64_t data_fingerprint) {
    if (!t || !path) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_trainer_save: NULL argument");
    if (t->accumulated)
        return QKV_ERROR(QKV_ERR_STATE, "qkv_trainer_save: %d batches are accumulated but not applied; save after an "
                                        "optimiser step", t->accumulated);
    if (t->ema_swapped)
        return QKV_ERROR(QKV_ERR_STATE, "qkv_trainer_save: the model holds the parameter average; swap it back first");
    char what[320];
    if (qkv__trainer_nonfinite(t, what, sizeof what))
        return QKV_ERROR(QKV_ERR_NONFINITE, "qkv_trainer_save: %s: not saved: %s", path, what);
    const qkv_params *p = t->model->params;
    const int64_t n = qkv_params_count(p), blocks = t->ema ? 4 : 3;
    qkv_st_tensor *ts = calloc((size_t)(blocks * n), sizeof *ts);
    char **names = calloc((size_t)(blocks * n), sizeof *names);
    qkv_status st = (!ts || !names) ? QKV_ERROR(QKV_ERR_OOM, "qkv_trainer_save: out of memory") : QKV_OK;
    for (int64_t k = 0; k < blocks * n && !st; k++) {
        const int b = (int)(k / n);
        const qkv_tensor *pt = qkv_params_get(p, k % n);
        size_t len = strlen(block_prefix[b]) + strlen(pt->name) + 1;
        names[k] = malloc(len);
        if (!names[k]) {
            st = QKV_ERROR(QKV_ERR_OOM, "qkv_trainer_save: out of memory");
            break;
        }
        snprintf(names[k], len, "%s%s", block_prefix[b], pt->name);
        ts[k] = (qkv_st_tensor){names[k], qkv_dtype_name(QKV_REAL), pt->ndim, pt->shape, slice(t, b, k % n)};
    }
    char json[4096], steps[32], seed[32], rng_step[32], epoch[32], batch[32], fingerprint[32];
    if (!st) st = qkv_model_config_to_json(&t->model->cfg, json, sizeof json);
    if (!st) {
        uint64_t s, r;
        qkv_ctx_get_rng(t->ctx, &s, &r);
        snprintf(steps, sizeof steps, "%" PRId64, t->steps);
        snprintf(seed, sizeof seed, "%" PRIu64, s);
        snprintf(rng_step, sizeof rng_step, "%" PRIu64, r);
        snprintf(epoch, sizeof epoch, "%" PRId64, data_epoch);
        snprintf(batch, sizeof batch, "%" PRId64, data_batch);
        snprintf(fingerprint, sizeof fingerprint, "%" PRIu64, data_fingerprint);
        const char *keys[] = {"qkv.checkpoint", "qkv.config", "train.steps", "train.rng_seed", "train.rng_step",
                              "data.epoch", "data.batch", "data.fingerprint"};
        const char *values[] = {"1", json, steps, seed, rng_step, epoch, batch, fingerprint};
        st = qkv_st_save(path, ts, blocks * n, keys, values, 8);
    }
    for (int64_t k = 0; names && k < blocks * n; k++) free(names[k]);
    free(names);
    free(ts);
    return st;
}

/* Decimal metadata values, strictly: digits only, no overflow. */
static bool parse_u64(const char *s, uint64_t *out) {
    if (!s || *s < '0' || *s > '9') return false;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

static bool parse_count(const char *s, int64_t *out) {
    uint64_t v;
    if (!parse_u64(s, &v) || v > INT64_MAX) return false;
    *out = (int64_t)v;
    return true;
}

/* Element i of a checkpoint tensor (F32 or F64, checked by the caller) in the build's dtype. */
static qkv_real element(const qkv_st_entry *e, int64_t i) {
    if (e->dtype == QKV_F64) {
        double v;
        memcpy(&v, (const char *)e->data + 8 * i, 8);
        return (qkv_real)v;
    }
    float v;
    memcpy(&v, (const char *)e->data + 4 * i, 4);
    return (qkv_real)v;
}

/* The file's name of parameter pt's tensor in block b ("optim.m.<name>", ...). */
static void block_name(int b, const qkv_tensor *pt, char *name, size_t size) {
    snprintf(name, size, "%s%s", block_prefix[b], pt->name);
}

/* Every value of tensor i of block b must be finite once converted to qkv_real (an F64 value
 * beyond float's range is not), and a second moment (Adam's running mean of squared gradients)
 * must not be negative: a NaN weight or moment would turn every later step into NaN, and the
 * trainer would only find out at its next save, so such a checkpoint is refused at load. */
static qkv_status check_values(const qkv_st_entry *e, const char *path, const char *name, int b, int64_t numel) {
    for (int64_t k = 0; k < numel; k++) {
        const qkv_real v = element(e, k);
        if (isfinite(v) && !(b == 2 && v < 0)) continue;
        const char *what = isnan(v) ? "NaN" : isinf(v) ? "an infinite value" : "a negative value";
        if (isinf(v) && e->dtype == QKV_F64) {
            double d;
            memcpy(&d, (const char *)e->data + 8 * k, 8);
            if (isfinite(d)) what = "a value beyond float's range";
        }
        return QKV_ERROR(QKV_ERR_FORMAT, "%s: tensor '%.300s' holds %s at element %lld%s", path, name, what,
                         (long long)k,
                         b == 2 && isfinite(v) ? " (a second moment is a mean of squares)" : "");
    }
    return QKV_OK;
}

qkv_status qkv_trainer_load(qkv_trainer *t, const char *path, int64_t *data_epoch, int64_t *data_batch,
                            uint64_t *data_fingerprint) {
    if (!t || !path) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_trainer_load: NULL argument");
    if (t->ema_swapped)
        return QKV_ERROR(QKV_ERR_STATE, "qkv_trainer_load: the model holds the parameter average; swap it back first");
    qkv_st_file *f = NULL;
    qkv_status st = qkv_st_open(path, &f);
    if (st) return st;
    qkv_params *p = t->model->params;
    const int64_t n = qkv_params_count(p), blocks = t->ema ? 4 : 3;
    int64_t steps = 0, epoch = 0, batch = 0;
    uint64_t seed = 0, rng_step = 0, fingerprint = 0;
    char json[4096];
    const char *file_json = qkv_st_metadata_get(f, "qkv.config");
    if (!qkv_st_metadata_get(f, "qkv.checkpoint") || !file_json)
        st = QKV_ERROR(QKV_ERR_FORMAT, "%s: not a qkv training checkpoint", path);
    else if (!parse_count(qkv_st_metadata_get(f, "train.steps"), &steps) ||
             !parse_u64(qkv_st_metadata_get(f, "train.rng_seed"), &seed) ||
             !parse_u64(qkv_st_metadata_get(f, "train.rng_step"), &rng_step) ||
             !parse_count(qkv_st_metadata_get(f, "data.epoch"), &epoch) ||
             !parse_count(qkv_st_metadata_get(f, "data.batch"), &batch) ||
             !parse_u64(qkv_st_metadata_get(f, "data.fingerprint"), &fingerprint))
        st = QKV_ERROR(QKV_ERR_FORMAT, "%s: missing or malformed train.* / data.* metadata", path);
    else if ((st = qkv_model_config_to_json(&t->model->cfg, json, sizeof json)) == QKV_OK && strcmp(json, file_json) != 0)
        st = QKV_ERROR(QKV_ERR_FORMAT, "%s: the checkpoint's model configuration differs from this model's", path);
    char first_ema[512];
    snprintf(first_ema, sizeof first_ema, "ema.%s", n ? qkv_params_get(p, 0)->name : "");
    qkv_st_entry probe;
    if (!st && n && (qkv_st_find(f, first_ema, &probe) == QKV_OK) != (t->ema != NULL))
        st = QKV_ERROR(QKV_ERR_FORMAT, "%s: the checkpoint %s a parameter average (ema.*), the trainer %s (ema_decay %g)",
                       path, t->ema ? "lacks" : "holds", t->ema ? "keeps one" : "does not", t->cfg.ema_decay);
    /* validate every tensor, its shape, dtype and values, before copying anything */
    for (int64_t k = 0; k < blocks * n && !st; k++) {
        const qkv_tensor *pt = qkv_params_get(p, k % n);
        char name[512];
        block_name((int)(k / n), pt, name, sizeof name);
        qkv_st_entry e;
        if (qkv_st_find(f, name, &e) != QKV_OK) {
            st = QKV_ERROR(QKV_ERR_FORMAT, "%s: tensor '%s' is missing", path, name);
            break;
        }
        bool same = e.ndim == pt->ndim && e.known_dtype && (e.dtype == QKV_F32 || e.dtype == QKV_F64);
        for (int d = 0; same && d < e.ndim; d++) same = e.shape[d] == pt->shape[d];
        if (!same) st = QKV_ERROR(QKV_ERR_FORMAT, "%s: tensor '%s' has the wrong shape or dtype (%s)", path, name, e.dtype_name);
        if (!st) st = check_values(&e, path, name, (int)(k / n), qkv_tensor_numel(pt));
    }
    if (!st && qkv_st_count(f) != blocks * n)
        st = QKV_ERROR(QKV_ERR_FORMAT, "%s: %lld tensors, expected %lld", path, (long long)qkv_st_count(f),
                       (long long)(blocks * n));
    for (int64_t k = 0; k < blocks * n && !st; k++) {
        const qkv_tensor *pt = qkv_params_get(p, k % n);
        char name[512];
        block_name((int)(k / n), pt, name, sizeof name);
        qkv_st_entry e;
        qkv_st_find(f, name, &e);
        qkv_real *dst = slice(t, (int)(k / n), k % n);
        for (int64_t i = 0, m = qkv_tensor_numel(pt); i < m; i++) dst[i] = element(&e, i);
    }
    qkv_st_close(f);
    if (st) return st;
    t->steps = steps;
    t->accumulated = 0;
    qkv_ctx_set_rng(t->ctx, seed, rng_step);
    if (data_epoch) *data_epoch = epoch;
    if (data_batch) *data_batch = batch;
    if (data_fingerprint) *data_fingerprint = fingerprint;
    return QKV_OK;
}
