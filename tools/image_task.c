/*
 * image_task.c: image classification (task = image), e.g. the 8x8 digits: a ViT-style encoder
 * (the image front-end of qkv_model.h and docs/images.md: patches, [CLS] or mean pooling, 1-D or
 * 2-D positions) predicts one class per image.
 *
 * Data: "label<TAB>p1 p2 ... pN" lines (QKV_CORPUS_LABELED), N = image.height x image.width x
 * image.channels pixel values in row-major order, channels last (the digits: "7<TAB>0 3 16 ...",
 * 64 values). Every value is a decimal integer (the data layer's ids, so the batcher's
 * fingerprint covers the pixels); the model reads value / data.pixel_scale. The classes
 * (tgt.vocab) are the labels of the training file in byte order; a dev or test label outside them,
 * a line with another number of values, or a value that is not a decimal integer is an error
 * naming file and line. Batches hold train.batch images (the batcher's token budget is
 * train.batch x N with at most train.batch rows), shuffled by Philox per epoch as for every task.
 *
 * Metric: accuracy = correct images / images (it picks the best checkpoint); `qkv eval` adds the
 * confusion matrix (rows: gold class, columns: predicted). A prediction is the arg max of the
 * logits over the classes, its probability the softmax over them.
 *
 * Inference inputs (`qkv decode`, `qkv attn`): one image per line, its N values separated by
 * spaces; a data line ("label<TAB>values") is read too, its label ignored, so a split file can be
 * decoded as it is. The attention maps have one token per patch, "r<row>c<column>" of the patch
 * grid ("[CLS]" first with a class token).
 */
#include "encoder_input.h"
#include "encoder_lines.h"
#include "input_lines.h"
#include "run_dir.h"
#include "task.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EVAL_BATCH 256 /* images per evaluation forward pass */
#define DECODE_BATCH 64
#define MAX_MATRIX 32 /* classes up to which `qkv eval` prints the confusion matrix */
#define NAME 48       /* bytes of a patch token's name, "r<row>c<column>" */


/* The numbers of an image: its shape (from the model) and the pixel scale (task.conf). */
typedef struct image_shape {
    int32_t height, width, channels;
    int64_t values; /* height x width x channels */
    double scale;   /* data.pixel_scale */
} image_shape;

static image_shape shape_of(const qkv_model_config *c, double scale) {
    const qkv_image_config *i = &c->image;
    return (image_shape){i->height, i->width, i->channels,
                         (int64_t)i->height * i->width * i->channels, scale};
}

/* One pixel value: a decimal integer in [0, 2^31 - 1]. */
static bool parse_value(const char *s, size_t len, int32_t *v) {
    if (len == 0 || len > 10) return false;
    int64_t x = 0;
    for (size_t k = 0; k < len; k++) {
        if (s[k] < '0' || s[k] > '9') return false;
        x = 10 * x + (s[k] - '0');
    }
    if (x > INT32_MAX) return false;
    *v = (int32_t)x;
    return true;
}

static qkv_status bad_count(const char *file, int64_t line, int64_t n, const image_shape *sh) {
    return qkv_set_error(
        QKV_ERR_FORMAT, "%s:%lld: %lld pixel values, but an image of %d x %d x %d has %lld", file,
        (long long)line, (long long)n, sh->height, sh->width, sh->channels, (long long)sh->values);
}

static qkv_status bad_value(const char *file, int64_t line, int64_t k, const char *s, size_t len) {
    return qkv_set_error(
        QKV_ERR_FORMAT,
        "%s:%lld: pixel value %lld '%.*s' is not a decimal integer in [0, 2^31 - 1]", file,
        (long long)line, (long long)k + 1, (int)(len < 40 ? len : 40), s);
}

/* ---- image files ---------------------------------------------------------------------------- */

typedef struct image_set {
    qkv_corpus *corpus;
    qkv_dataset *data; /* source: the pixel values as ids; target: the class id */
    qkv_real *pixels;  /* (n, H, W, Ch), value / scale */
    int64_t n;
} image_set;

/* Read a split file: the checks above, then the dataset (classes: labels) and the pixels. */
static qkv_status image_set_load(image_set *t, const char *path, const image_shape *sh,
                                 const qkv_vocab *labels) {
    memset(t, 0, sizeof *t);
    qkv_status st = qkv_corpus_read(QKV_CORPUS_LABELED, path, NULL, &t->corpus);
    if (st) return st;
    const char *file = qkv_corpus_name(t->corpus);
    t->n = qkv_corpus_size(t->corpus);
    if (t->n == 0) /* no images would score an accuracy of 0 / 0 */
        return qkv_set_error(QKV_ERR_FORMAT, "%s: no images (the file is empty)", file);
    for (int64_t i = 0; i < t->n; i++) {
        const int64_t line = qkv_corpus_line(t->corpus, i),
                      n = qkv_corpus_length(t->corpus, i, QKV_FIELD_SRC);
        if (n != sh->values) return bad_count(file, line, n, sh);
        for (int64_t k = 0; k < n; k++) {
            size_t len = 0;
            int32_t v;
            const char *s = qkv_corpus_symbol(t->corpus, i, QKV_FIELD_SRC, k, &len);
            if (!parse_value(s, len, &v)) return bad_value(file, line, k, s, len);
        }
        size_t len = 0;
        const char *label = qkv_corpus_symbol(t->corpus, i, QKV_FIELD_TGT, 0, &len);
        const int32_t id = qkv_vocab_find(labels, label, len);
        if (id < QKV_VOCAB_RESERVED)
            return qkv_set_error(QKV_ERR_FORMAT, "%s:%lld: label '%.*s' is %s", file,
                                 (long long)line, (int)len, label,
                                 id < 0 ? "not one of the classes of the training data (tgt.vocab)"
                                        : "a reserved symbol, not a class");
    }
    if ((st = qkv_dataset_encode(t->corpus, NULL, labels, true, &t->data))) return st;
    t->pixels = malloc(sizeof(qkv_real) * (size_t)(t->n * sh->values + 1));
    if (!t->pixels) return qkv_set_error(QKV_ERR_OOM, "out of memory");
    for (int64_t i = 0; i < t->n && !st; i++) {
        qkv_example ex;
        if (!(st = qkv_dataset_get(t->data, i, &ex)))
            for (int64_t k = 0; k < sh->values; k++)
                t->pixels[i * sh->values + k] = (qkv_real)((double)ex.src[k] / sh->scale);
    }
    return st;
}

static void image_set_free(image_set *t) {
    free(t->pixels);
    qkv_dataset_free(t->data);
    qkv_corpus_free(t->corpus);
    memset(t, 0, sizeof *t);
}

static int32_t gold_of(const image_set *t, int64_t i) {
    qkv_example ex;
    return qkv_dataset_get(t->data, i, &ex) ? -1 : ex.tgt[0];
}

/* The logits (B, K) of B images in ctx (evaluation mode, no gradient); weights_out as
 * qkv_model_classify_image. */
static qkv_tensor *image_logits(qkv_ctx *ctx, const qkv_model *m, const qkv_real *pixels, int64_t B,
                                qkv_tensor **weights_out) {
    const qkv_image_config *c = &m->cfg.image;
    qkv_tensor *x =
        qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){B, c->height, c->width, c->channels}, pixels);
    return x ? qkv_model_classify_image(ctx, m, x, weights_out) : NULL;
}

static qkv_ctx *eval_ctx(void) {
    qkv_ctx_params cp = qkv_ctx_default_params();
    qkv_ctx *ctx = NULL;
    if (qkv_ctx_new(&cp, &ctx)) return NULL;
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_ctx_set_training(ctx, false);
    return ctx;
}

/* The predicted class of every image of t into pred (t->n), its probability into prob (NULL:
 * not wanted). */
static qkv_status predict_set(const qkv_model *m, const image_set *t, const image_shape *sh,
                              int32_t *pred, double *prob) {
    qkv_ctx *ctx = eval_ctx();
    if (!ctx) return qkv_set_error(QKV_ERR_OOM, "out of memory");
    qkv_status st = QKV_OK;
    for (int64_t at = 0; at < t->n && !st; at += EVAL_BATCH) {
        const int64_t B = t->n - at < EVAL_BATCH ? t->n - at : EVAL_BATCH;
        qkv_ctx_reset(ctx);
        qkv_tensor *logits = image_logits(ctx, m, t->pixels + at * sh->values, B, NULL);
        if ((st = qkv_ctx_status(ctx))) break;
        const int64_t K = logits->shape[1];
        for (int64_t r = 0; r < B; r++) {
            const qkv_real *x = (const qkv_real *)logits->data + r * K;
            pred[at + r] = enc_argmax(x, K);
            if (prob) prob[at + r] = enc_label_probability(x, K, pred[at + r]);
        }
    }
    qkv_ctx_free(ctx);
    return st;
}

/* Predictions of t and the confusion counts conf[gold][pred] over the class ids (K x K, K the
 * vocabulary size; NULL: not wanted); the accuracy into *acc. */
static qkv_status score_set(const qkv_model *m, const image_set *t, const image_shape *sh,
                            qkv_accuracy *acc, int32_t *pred, double *prob, int64_t *conf) {
    memset(acc, 0, sizeof *acc);
    qkv_status st = predict_set(m, t, sh, pred, prob);
    const int64_t K = m->cfg.tgt_vocab;
    for (int64_t i = 0; i < t->n && !st; i++) {
        const int32_t gold = gold_of(t, i);
        qkv_accuracy_add(acc, &pred[i], &gold, 1, -1);
        if (conf) conf[gold * K + pred[i]]++;
    }
    return st;
}

/* ---- the task of `qkv train` ---------------------------------------------------------------- */

typedef struct image_task {
    task base;
    int64_t batch;     /* train.batch */
    image_shape shape; /* from the configuration */
    qkv_vocab *labels;
    image_set train, dev;
    qkv_real *buf;   /* (batch, H, W, Ch) */
    int32_t *target; /* (batch) */
    int32_t *pred;   /* dev predictions */
} image_task;

static bool image_create(config *cfg, task **out) {
    image_task *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(cfg->error, sizeof cfg->error, "out of memory");
        return false;
    }
    t->base.ops = &image_task_ops;
    *out = &t->base;
    for (int i = 0; i < cfg->n; i++) /* read by task_read_common for the token tasks */
        if (!strcmp(cfg->entries[i].key, "train.max_tokens"))
            return config_fail(
                cfg, "train.max_tokens",
                "train.max_tokens counts tokens; an image batch is train.batch images");
    int64_t h, w, ch, p, window, batch;
    int pool = 0;
    task_settings *s = &t->base.s;
    if (!task_read_common(cfg, s) || !config_int(cfg, "train.batch", 64, 1, 1 << 20, &batch) ||
        !config_int(cfg, "image.height", 0, 0, 65536, &h) ||
        !config_int(cfg, "image.width", 0, 0, 65536, &w) ||
        !config_int(cfg, "image.channels", 1, 1, 65536, &ch) ||
        !config_int(cfg, "image.patch", 1, 1, 65536, &p) ||
        !config_int(cfg, "image.window", 0, 0, 65536, &window) ||
        !config_switch(cfg, "image.pooling", SWITCH_POOLING, 0, &pool) ||
        !config_double(cfg, "data.pixel_scale", 1, 1e-30, 1e30, &t->shape.scale))
        return false;
    if (h == 0 || w == 0) {
        snprintf(cfg->error, sizeof cfg->error,
                 "%s: task = image needs image.height and image.width",
                 cfg->path ? cfg->path : "--set");
        return false;
    }
    if (h * w * ch > (1 << 24))
        return config_fail(cfg, "image.height",
                           "images of %lld x %lld x %lld values are too large (at most 2^24)",
                           (long long)h, (long long)w, (long long)ch);
    const int64_t tokens = (h / p) * (w / p) + (pool == 0);
    if (!task_read_encoder_model(cfg, QKV_HEAD_POOLED, tokens, &s->model)) return false;
    qkv_model_config *m = &s->model;
    m->src_vocab = 0;
    m->scale_embeddings = false;
    m->image = (qkv_image_config){(int32_t)h, (int32_t)w, (int32_t)ch, (int32_t)p, (int32_t)window,
                                  pool == 0};
    t->shape = shape_of(m, t->shape.scale);
    t->batch = batch;
    qkv_model_config probe = *m; /* the classes are known after reading the data */
    probe.tgt_vocab = QKV_VOCAB_RESERVED + 2;
    if (qkv_model_config_check(&probe)) {
        snprintf(cfg->error, sizeof cfg->error, "%s: %s", cfg->path ? cfg->path : "--set",
                 qkv_last_error());
        return false;
    }
    return true;
}

static qkv_status image_prepare(task *base, bool resume) {
    image_task *t = (image_task *)base;
    task_settings *s = &base->s;
    char path[1024], scale[64];
    qkv_status st = QKV_OK;
    if (resume) {
        if ((st = task_path(path, sizeof path, s->out_dir, "tgt.vocab")) ||
            (st = qkv_vocab_load(path, &t->labels)))
            return st;
    } else {
        qkv_corpus *c = NULL; /* the classes: every training label, in byte order */
        snprintf(scale, sizeof scale, "data.pixel_scale = %.17g", t->shape.scale);
        const char *lines[] = {scale};
        st = qkv_corpus_read(QKV_CORPUS_LABELED, s->train_path, NULL, &c);
        if (!st) st = qkv_vocab_build(c, QKV_FIELD_TGT, 1, true, &t->labels);
        qkv_corpus_free(c);
        if (st || (st = task_path(path, sizeof path, s->out_dir, "tgt.vocab")) ||
            (st = qkv_vocab_save(t->labels, path)) ||
            (st = task_write_conf(s->out_dir, "image", lines, 1)))
            return st;
    }
    if ((st = image_set_load(&t->train, s->train_path, &t->shape, t->labels)) ||
        (st = image_set_load(&t->dev, s->dev_path, &t->shape, t->labels)))
        return st;
    t->buf = malloc(sizeof(qkv_real) * (size_t)(t->batch * t->shape.values));
    t->target = malloc(sizeof(int32_t) * (size_t)t->batch);
    t->pred = malloc(sizeof(int32_t) * (size_t)(t->dev.n + 1));
    if (!t->buf || !t->target || !t->pred) return qkv_set_error(QKV_ERR_OOM, "out of memory");
    s->model.tgt_vocab = qkv_vocab_size(t->labels);
    base->train = t->train.data;
    base->batch_opts = qkv_batch_default_opts(t->batch * t->shape.values);
    base->batch_opts.max_rows = t->batch;
    base->batch_opts.seed = s->train.seed;
    return QKV_OK;
}

static qkv_status image_batch(task *base, const qkv_batch *b, qkv_train_batch *out) {
    image_task *t = (image_task *)base;
    const image_shape *sh = &t->shape;
    for (int64_t r = 0; r < b->rows; r++) { /* (B, H, W, Ch) */
        memcpy(t->buf + r * sh->values, t->train.pixels + b->example[r] * sh->values,
               sizeof(qkv_real) * (size_t)sh->values);
        t->target[r] = b->tgt[r * b->tgt_cols];
    }
    *out = (qkv_train_batch){.batch = (int32_t)b->rows,
                             .labels = t->target,
                             .pixels = t->buf,
                             .image_shape = {sh->height, sh->width, sh->channels}};
    return QKV_OK;
}

static qkv_status image_evaluate(task *base, const qkv_model *m, task_metrics *out) {
    image_task *t = (image_task *)base;
    qkv_accuracy acc;
    memset(out, 0, sizeof *out);
    qkv_status st = score_set(m, &t->dev, &t->shape, &acc, t->pred, NULL, NULL);
    if (st) return st;
    task_metrics_add(out, "accuracy", "accuracy", 100 * qkv_accuracy_rate(&acc));
    out->items = acc.total;
    out->unit = "images";
    return QKV_OK;
}

static void image_describe(const task *base, FILE *f) {
    const image_task *t = (const image_task *)base;
    const qkv_model_config *m = &base->s.model;
    const int p = m->image.patch_size, k = qkv_image_config_window(&m->image);
    char window[48] = "";
    if (k != p) snprintf(window, sizeof window, " in %d x %d windows", k, k);
    fprintf(f,
            "%lld training images (%d x %d x %d), %lld dev images | %d classes | %d x %d patches%s "
            "(%d tokens), %s",
            (long long)t->train.n, m->image.height, m->image.width, m->image.channels,
            (long long)t->dev.n, qkv_vocab_size(t->labels) - QKV_VOCAB_RESERVED, p, p, window,
            (m->image.height / p) * (m->image.width / p),
            m->image.class_token ? "[CLS]" : "mean pooling");
}

static void image_free(task *base) {
    image_task *t = (image_task *)base;
    image_set_free(&t->train);
    image_set_free(&t->dev);
    qkv_vocab_free(t->labels);
    free(t->buf);
    free(t->target);
    free(t->pred);
    free(t);
}

/* ---- qkv eval / decode / attn on an image run -------------------------------------------------
 */

/* The image shape of the run's model and the pixel scale of its task.conf; false after a message.
 */
static bool open_run(run_dir *r, const char *cmd, image_shape *sh) {
    double scale = 1;
    if (!config_double(&r->conf, "data.pixel_scale", 1, 1e-30, 1e30, &scale) ||
        !config_check_unused(&r->conf)) {
        fprintf(stderr, "qkv %s: %s\n", cmd, r->conf.error);
        return false;
    }
    *sh = shape_of(&r->model->cfg, scale);
    return true;
}

static void print_confusion(const run_dir *r, const int64_t *conf) {
    const int32_t K = qkv_vocab_size(r->tgt), n = K - QKV_VOCAB_RESERVED;
    if (n > MAX_MATRIX) {
        printf("(no confusion matrix for more than %d classes)\n", MAX_MATRIX);
        return;
    }
    int width = 4;
    for (int32_t k = QKV_VOCAB_RESERVED; k < K; k++) {
        const int len = (int)strlen(qkv_vocab_symbol(r->tgt, k)) + 1;
        width = len > width ? len : width;
    }
    for (int64_t i = 0; i < (int64_t)K * K; i++) {
        const int len = snprintf(NULL, 0, " %lld", (long long)conf[i]);
        width = len > width ? len : width;
    }
    printf("confusion matrix (rows: gold class, columns: predicted)\n%*s", width, "");
    for (int32_t p = QKV_VOCAB_RESERVED; p < K; p++)
        printf("%*s", width, qkv_vocab_symbol(r->tgt, p));
    printf("\n");
    for (int32_t g = QKV_VOCAB_RESERVED; g < K; g++) {
        printf("%*s", width, qkv_vocab_symbol(r->tgt, g));
        for (int32_t p = QKV_VOCAB_RESERVED; p < K; p++)
            printf("%*lld", width, (long long)conf[(int64_t)g * K + p]);
        printf("\n");
    }
}

static int image_eval_run(run_dir *r, const char *data, const task_run_opts *o) {
    image_shape sh;
    if (!open_run(r, "eval", &sh)) return 1;
    const clock_t c0 = clock();
    image_set t;
    memset(&t, 0, sizeof t);
    qkv_accuracy acc;
    int32_t *pred = NULL;
    double *prob = NULL;
    const int64_t K = qkv_vocab_size(r->tgt);
    int64_t *conf = calloc((size_t)(K * K), sizeof *conf);
    int rc = 1;
    qkv_status st =
        conf ? image_set_load(&t, data, &sh, r->tgt) : qkv_set_error(QKV_ERR_OOM, "out of memory");
    if (!st) {
        pred = malloc(sizeof *pred * (size_t)(t.n + 1));
        prob = malloc(sizeof *prob * (size_t)(t.n + 1));
        st = pred && prob ? score_set(r->model, &t, &sh, &acc, pred, prob, conf)
                          : qkv_set_error(QKV_ERR_OOM, "out of memory");
    }
    if (st) {
        fprintf(stderr, "qkv eval: %s\n", qkv_last_error());
    } else {
        for (int64_t i = 0; i < o->show && i < t.n; i++)
            printf("%s\t%.4f\t(gold %s, line %lld)\n", qkv_vocab_symbol(r->tgt, pred[i]), prob[i],
                   qkv_vocab_symbol(r->tgt, gold_of(&t, i)),
                   (long long)qkv_corpus_line(t.corpus, i));
        print_confusion(r, conf);
        printf("%s: %lld images: accuracy %.2f%% (%lld errors) (CPU %.1f s)\n", data,
               (long long)acc.total, 100 * qkv_accuracy_rate(&acc),
               (long long)(acc.total - acc.correct), (double)(clock() - c0) / CLOCKS_PER_SEC);
        rc = 0;
    }
    free(pred);
    free(prob);
    free(conf);
    image_set_free(&t);
    return rc;
}

/* One inference input: "v1 v2 ..." or "label<TAB>v1 v2 ..." into out (sh->values reals); *empty
 * for a line without values. */
static qkv_status parse_line(const char *file, int64_t line, const char *text,
                             const image_shape *sh, qkv_real *out, bool *empty) {
    const char *tab = strrchr(text, '\t');
    const char *p = tab ? tab + 1 : text;
    int64_t n = 0;
    *empty = !tab;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p) break;
        const size_t len = strcspn(p, " ");
        int32_t v;
        if (!parse_value(p, len, &v)) return bad_value(file, line, n, p, len);
        if (n < sh->values) out[n] = (qkv_real)((double)v / sh->scale);
        n++, p += len, *empty = false;
    }
    return *empty || n == sh->values ? QKV_OK : bad_count(file, line, n, sh);
}

/* label<TAB>probability of the images of pending lines with a row (row[i] >= 0); empty lines
 * stay empty. */
static bool flush(const run_dir *r, qkv_ctx *ctx, const qkv_real *pixels, const int64_t *row,
                  int64_t n_lines, int64_t n_rows) {
    qkv_tensor *logits = NULL;
    if (n_rows > 0) {
        qkv_ctx_reset(ctx);
        logits = image_logits(ctx, r->model, pixels, n_rows, NULL);
        if (qkv_ctx_status(ctx)) {
            fprintf(stderr, "qkv decode: %s\n", qkv_last_error());
            return false;
        }
    }
    for (int64_t i = 0; i < n_lines; i++) {
        if (row[i] >= 0) {
            const int64_t K = logits->shape[1];
            const qkv_real *x = (const qkv_real *)logits->data + row[i] * K;
            const int32_t best = enc_argmax(x, K);
            printf("%s\t%.4f", qkv_vocab_symbol(r->tgt, best), enc_label_probability(x, K, best));
        }
        printf("\n");
    }
    fflush(stdout);
    return true;
}

typedef struct {
    const run_dir *r;
    const image_shape *sh;
    qkv_ctx *ctx;
    qkv_real *pixels;            /* (DECODE_BATCH, sh->values) */
    int64_t row[DECODE_BATCH];   /* each pending line's image row, -1 for an empty line */
    int64_t n_lines, n_rows;
    bool stream;
} image_lines;

static int image_decode_line(void *user, const char *file, int64_t line_no, char *line) {
    image_lines *d = user;
    bool empty = false;
    if (parse_line(file, line_no, line, d->sh, d->pixels + d->n_rows * d->sh->values, &empty)) {
        fprintf(stderr, "qkv decode: %s\n", qkv_last_error());
        return 1;
    }
    d->row[d->n_lines++] = empty ? -1 : d->n_rows++;
    if (!d->stream && d->n_lines < DECODE_BATCH) return 0;
    const bool ok = flush(d->r, d->ctx, d->pixels, d->row, d->n_lines, d->n_rows);
    d->n_lines = d->n_rows = 0;
    return !ok;
}

static int image_decode_run(run_dir *r, const char *const *files, int n_files,
                            const task_run_opts *o) {
    image_shape sh;
    if (!open_run(r, "decode", &sh)) return 1;
    image_lines d = {.r = r, .sh = &sh, .ctx = eval_ctx(), .stream = o->stream};
    d.pixels = malloc(sizeof(qkv_real) * (size_t)(DECODE_BATCH * sh.values));
    int rc = d.ctx && d.pixels ? 0 : 1;
    if (rc) fprintf(stderr, "qkv decode: out of memory\n");
    if (rc == 0) rc = input_for_each_line("decode", files, n_files, image_decode_line, &d);
    if (rc == 0 && !flush(r, d.ctx, d.pixels, d.row, d.n_lines, d.n_rows)) rc = 1;
    free(d.pixels);
    qkv_ctx_free(d.ctx);
    return rc;
}

static int image_attn_run(run_dir *r, const char *input, const task_run_opts *o) {
    image_shape sh;
    if (!open_run(r, "attn", &sh)) return 1;
    const qkv_model_config *c = &r->model->cfg;
    const int32_t P = c->image.patch_size, cols = c->image.width / P;
    const int64_t N = (int64_t)(c->image.height / P) * cols, cls = c->image.class_token,
                  S = cls + N;
    qkv_ctx *ctx = eval_ctx();
    qkv_real *pixels = malloc(sizeof(qkv_real) * (size_t)sh.values);
    qkv_tensor **w = calloc((size_t)c->n_encoder_layers, sizeof *w);
    char *names = malloc((size_t)S * NAME);
    const char **tokens = malloc(sizeof *tokens * (size_t)S);
    int rc = 1;
    bool empty = false;
    if (!ctx || !pixels || !w || !names || !tokens) {
        fprintf(stderr, "qkv attn: out of memory\n");
    } else if (parse_line("<input>", 1, input, &sh, pixels, &empty) || empty) {
        fprintf(stderr, "qkv attn: %s\n",
                empty ? "the input has no pixel values" : qkv_last_error());
    } else {
        qkv_tensor *logits = image_logits(ctx, r->model, pixels, 1, w);
        if (qkv_ctx_status(ctx)) {
            fprintf(stderr, "qkv attn: %s\n", qkv_last_error());
        } else {
            for (int64_t s = 0; s < S; s++) { /* [CLS], then the patches in raster order */
                tokens[s] = names + s * NAME;
                if (cls && s == 0)
                    snprintf(names, NAME, "[CLS]");
                else
                    snprintf(names + s * NAME, NAME, "r%lldc%lld", (long long)((s - cls) / cols),
                             (long long)((s - cls) % cols));
            }
            const qkv_real *x = (const qkv_real *)logits->data;
            const int32_t best = enc_argmax(x, logits->shape[1]);
            const char *label = qkv_vocab_symbol(r->tgt, best);
            char title[128];
            snprintf(title, sizeof title, "%d x %d x %d image -> %s", c->image.height,
                     c->image.width, c->image.channels, label);
            printf("%s (p = %.4f)\n", title, enc_label_probability(x, logits->shape[1], best));
            rc = task_attn_write(&(task_attn){.run = o->run,
                                              .out_dir = o->out_dir,
                                              .stack = "encoder",
                                              .kind = QKV_ATTN_SELF,
                                              .weights = w,
                                              .n_layers = c->n_encoder_layers,
                                              .n_heads = c->n_heads,
                                              .rows = S,
                                              .cols = S,
                                              .row_labels = tokens,
                                              .col_labels = tokens,
                                              .page = {.title = title,
                                                       .input_tokens = tokens,
                                                       .n_input = S,
                                                       .output_tokens = &label,
                                                       .n_output = 1},
                                              .terminal = o->terminal,
                                              .layer = o->layer,
                                              .head = o->head});
        }
    }
    free(tokens);
    free(names);
    free(w);
    free(pixels);
    qkv_ctx_free(ctx);
    return rc;
}

const task_ops image_task_ops = {.name = "image",
                                 .summary = "label<TAB>pixels lines: a ViT-style encoder over image patches, accuracy",
                                 .select = "accuracy",
                                 .lower_is_better = false,
                                 .create = image_create,
                                 .prepare = image_prepare,
                                 .batch = image_batch,
                                 .evaluate = image_evaluate,
                                 .describe = image_describe,
                                 .free = image_free,
                                 .eval_run = image_eval_run,
                                 .decode_run = image_decode_run,
                                 .attn_run = image_attn_run,
                                 .rate_unit = "images",
                                 .reads_images = true};
