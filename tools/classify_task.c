/*
 * classify_task.c: sequence classification (task = classify), e.g. spam vs ham: an encoder-only
 * Transformer with a pooled head (the mean of the encoder outputs over the tokens, qkv_model.h)
 * predicts one label per text.
 *
 * Data: "label<TAB>t1 t2 ..." lines (QKV_CORPUS_LABELED). Inputs: encoder_input.h (token
 * vocabulary with data.min_count, optional spelling features, word dropout). tgt.vocab holds the
 * labels in the order the training file first shows them; a dev or test label never seen in
 * training counts as an error.
 *
 * Metrics: accuracy (correct texts / texts; it picks the best checkpoint), and with exactly two
 * labels the precision, recall and F1 of the positive label, the first label of the training
 * file (tgt.vocab's first data symbol):
 *   precision = TP / (TP + FP), recall = TP / (TP + FN), F1 = 2 P R / (P + R)   (0 when undefined)
 * A prediction is the arg max over the labels; its probability is the softmax over the labels
 * (the reserved ids excluded).
 */
#include "encoder_input.h"
#include "encoder_lines.h"
#include "encoder_task.h"
#include "run_dir.h"
#include "task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct classify_settings {
    int64_t max_len;      /* data.max_src_len */
    int64_t eval_tokens;  /* eval.max_tokens */
    const char *positive; /* eval.positive; NULL: the first label of the training file */
} classify_settings;

static bool read_classify(config *cfg, classify_settings *cs) {
    return config_int(cfg, "data.max_src_len", 512, 1, 1 << 20, &cs->max_len) &&
           config_int(cfg, "eval.max_tokens", 8192, 1, INT64_C(1) << 30, &cs->eval_tokens) &&
           config_str(cfg, "eval.positive", NULL, &cs->positive);
}

/* *id = the label precision, recall and F1 are about: `name` (eval.positive), or the first label
 * of the training file when name is NULL. An error naming the key when name is no label. */
static qkv_status positive_id(const qkv_vocab *labels, const char *name, int32_t *id) {
    *id = name ? qkv_vocab_find(labels, name, strlen(name)) : QKV_VOCAB_RESERVED;
    if (*id < QKV_VOCAB_RESERVED)
        return qkv_set_error(QKV_ERR_INVALID_ARG,
                             "eval.positive = '%s' is not a label of the training file", name);
    return QKV_OK;
}

/* ---- scoring -----------------------------------------------------------------------------------
 */

/* A labeled file encoded for a run. */
static qkv_status label_set_load(enc_set *t, const char *path, int64_t max_len, const enc_input *in,
                                 const qkv_vocab *labels) {
    const qkv_read_opts ro = {.max_src_len = max_len};
    return enc_set_load(t, QKV_CORPUS_LABELED, path, &ro, in, labels);
}

typedef struct label_counts {
    qkv_accuracy all;
    int64_t tp, fp, fn; /* of the positive label */
} label_counts;

typedef struct {
    int32_t *pred;
    double *prob;
} label_sink;

static qkv_status store_labels(void *user, const qkv_batch *b, const qkv_tensor *logits) {
    label_sink *p = user;
    const int64_t K = logits->shape[1];
    for (int64_t r = 0; r < b->rows; r++) {
        const qkv_real *x = (const qkv_real *)logits->data + r * K;
        const int32_t best = enc_argmax(x, K);
        p->pred[b->example[r]] = best;
        if (p->prob) p->prob[b->example[r]] = enc_label_probability(x, K, best);
    }
    return QKV_OK;
}

static qkv_status score_set(const qkv_model *m, const enc_input *in, const enc_set *t,
                            int64_t max_tokens, int32_t positive, label_counts *c, label_sink *out) {
    memset(c, 0, sizeof *c);
    const int64_t n = qkv_dataset_size(t->data);
    label_sink sink = {malloc(sizeof(int32_t) * (size_t)(n ? n : 1)),
                       out ? malloc(sizeof(double) * (size_t)(n ? n : 1)) : NULL};
    qkv_status st =
        !sink.pred || (out && !sink.prob)
            ? qkv_set_error(QKV_ERR_OOM, "out of memory")
            : enc_forward_all(m, in, t->data, &t->feats, max_tokens, store_labels, &sink);
    for (int64_t i = 0; i < n && !st; i++) {
        qkv_example ex;
        if ((st = qkv_dataset_get(t->data, i, &ex))) break;
        const int32_t gold = ex.tgt[0], pred = sink.pred[i];
        c->all.total++, c->all.correct += pred == gold;
        c->tp += pred == positive && gold == positive;
        c->fp += pred == positive && gold != positive;
        c->fn += pred != positive && gold == positive;
    }
    if (!st && out) {
        *out = sink;
    } else {
        free(sink.pred);
        free(sink.prob);
    }
    return st;
}

static double ratio(int64_t a, int64_t b) {
    return b ? (double)a / (double)b : 0;
}
static double precision(const label_counts *c) {
    return ratio(c->tp, c->tp + c->fp);
}
static double recall(const label_counts *c) {
    return ratio(c->tp, c->tp + c->fn);
}
static double f1(const label_counts *c) {
    const double p = precision(c), r = recall(c);
    return p + r > 0 ? 2 * p * r / (p + r) : 0;
}

/* ---- the task of `qkv train`
 * ---------------------------------------------------------------------- */

typedef struct classify_task {
    task base;
    classify_settings cs;
    enc_input_settings is;
    enc_input in;
    qkv_vocab *labels;
    int32_t positive; /* label id of precision / recall / F1 */
    enc_set train, dev;
    enc_batch_buf buf;
} classify_task;

static bool classify_create(config *cfg, task **out) {
    classify_task *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(cfg->error, sizeof cfg->error, "out of memory");
        return false;
    }
    t->base.ops = &classify_task_ops;
    *out = &t->base;
    return task_read_common(cfg, &t->base.s) && read_classify(cfg, &t->cs) &&
           enc_input_read_settings(cfg, true, &t->is) &&
           task_read_encoder_model(cfg, QKV_HEAD_POOLED, t->cs.max_len, &t->base.s.model) &&
           enc_task_check_max_len(cfg, &t->base.s.model, t->cs.max_len);
}

static qkv_status classify_prepare(task *base, bool resume) {
    classify_task *t = (classify_task *)base;
    const task_settings *s = &base->s;
    qkv_read_opts ro = {.max_src_len = t->cs.max_len};
    qkv_status st = qkv_corpus_read(QKV_CORPUS_LABELED, s->train_path, &ro, &t->train.corpus);
    if (st) return st;
    char features[512], positive[512];
    enc_input_features_line(&t->is, features, sizeof features);
    snprintf(positive, sizeof positive, "eval.positive = %s", t->cs.positive ? t->cs.positive : "");
    const char *lines[] = {features, positive};
    /* labels in first-seen order: the first label of the file is the default positive one */
    if ((st = enc_task_vocabs(&t->in, &t->is, t->train.corpus, resume, false, s->out_dir,
                              "classify", lines, t->cs.positive ? 2 : 1, &t->labels)) ||
        (st = enc_task_encode_train(&t->in, &t->is, &t->train, t->labels)) ||
        (st = label_set_load(&t->dev, s->dev_path, t->cs.max_len, &t->in, t->labels)))
        return st;
    if ((st = positive_id(t->labels, t->cs.positive, &t->positive))) return st;
    enc_task_finish_prepare(base, &t->in, t->labels, &t->train, 8);
    return QKV_OK;
}

static qkv_status classify_batch(task *base, const qkv_batch *b, qkv_train_batch *out) {
    classify_task *t = (classify_task *)base;
    const int32_t *src = NULL, *feats = NULL;
    qkv_status st =
        enc_input_batch(&t->in, &t->train.feats, b, &base->s.train.seed, &t->buf, &src, &feats);
    if (st) return st;
    int32_t *labels = enc_batch_labels(&t->buf, (size_t)b->rows);
    if (!labels) return qkv_set_error(QKV_ERR_OOM, "out of memory");
    for (int64_t r = 0; r < b->rows; r++)
        labels[r] = b->tgt[r * b->tgt_cols]; /* (B, 1) */
    *out = (qkv_train_batch){.batch = (int32_t)b->rows,
                             .src_len = (int32_t)b->src_cols,
                             .src = src,
                             .labels = labels,
                             .features = feats};
    return QKV_OK;
}

static qkv_status classify_evaluate(task *base, const qkv_model *m, task_metrics *out) {
    classify_task *t = (classify_task *)base;
    label_counts c;
    memset(out, 0, sizeof *out);
    qkv_status st = score_set(m, &t->in, &t->dev, t->cs.eval_tokens, t->positive, &c, NULL);
    if (st) return st;
    task_metrics_add(out, "accuracy", "accuracy", 100 * qkv_accuracy_rate(&c.all));
    if (qkv_vocab_size(t->labels) == QKV_VOCAB_RESERVED + 2) {
        task_metrics_add(out, "precision", "precision", 100 * precision(&c));
        task_metrics_add(out, "recall", "recall", 100 * recall(&c));
        task_metrics_add(out, "f1", "F1", 100 * f1(&c));
    }
    out->items = c.all.total;
    out->unit = "texts";
    return QKV_OK;
}

static void classify_describe(const task *base, FILE *f) {
    const classify_task *t = (const classify_task *)base;
    const int n_labels = qkv_vocab_size(t->labels) - QKV_VOCAB_RESERVED;
    fprintf(f, "%lld training texts (%lld tokens), %lld dev texts | %d tokens, %d labels",
            (long long)qkv_dataset_size(t->train.data),
            (long long)t->train.feats.start[t->train.feats.n],
            (long long)qkv_dataset_size(t->dev.data), qkv_vocab_size(t->in.words), n_labels);
    if (n_labels == 2) fprintf(f, " (positive: %s)", qkv_vocab_symbol(t->labels, t->positive));
    enc_task_describe_features(&t->in, f);
}

static void classify_free(task *base) {
    classify_task *t = (classify_task *)base;
    enc_batch_buf_free(&t->buf);
    enc_set_free(&t->dev);
    enc_set_free(&t->train);
    qkv_vocab_free(t->labels);
    enc_input_free(&t->in);
    free(t);
}

/* ---- qkv eval / decode / attn on a classify run
 * ----------------------------------------------------- */

/* eval.positive of a run's task.conf (consumed, so that the input checks see no unknown key);
 * false with the message on stderr when it is no label of the run. */
static bool run_positive(run_dir *r, const char *cmd, int32_t *id) {
    const char *name = NULL;
    if (!config_str(&r->conf, "eval.positive", NULL, &name)) {
        fprintf(stderr, "qkv %s: %s\n", cmd, r->conf.error);
        return false;
    }
    if (positive_id(r->tgt, name && *name ? name : NULL, id)) {
        fprintf(stderr, "qkv %s: %s\n", cmd, qkv_last_error());
        return false;
    }
    return true;
}

static int classify_eval_run(run_dir *r, const char *data, const task_run_opts *o) {
    enc_input in;
    int32_t positive;
    if (!run_positive(r, "eval", &positive) || !enc_open_run_conf(r, "eval", QKV_HEAD_POOLED, true, &in))
        return 1;
    enc_set t;
    label_counts c;
    label_sink out = {NULL, NULL};
    int rc = 1;
    const clock_t c0 = clock();
    if (label_set_load(&t, data, r->model->cfg.max_len, &in, r->tgt) ||
        score_set(r->model, &in, &t, 8192, positive, &c, &out)) {
        fprintf(stderr, "qkv eval: %s\n", qkv_last_error());
    } else {
        for (int64_t i = 0; i < o->show && i < qkv_dataset_size(t.data); i++) {
            size_t gl = 0, tl = 0;
            const char *gold = qkv_corpus_symbol(t.corpus, i, QKV_FIELD_TGT, 0, &gl);
            const char *text = qkv_corpus_key(t.corpus, i, &tl);
            printf("%s\t%.4f\t(gold %.*s)\t%.*s%s\n", qkv_vocab_symbol(r->tgt, out.pred[i]),
                   out.prob[i], (int)gl, gold, (int)(tl < 80 ? tl : 80), text,
                   tl > 80 ? " ..." : "");
        }
        printf("%s: %lld texts: accuracy %.2f%%", data, (long long)c.all.total,
               100 * qkv_accuracy_rate(&c.all));
        if (qkv_vocab_size(r->tgt) == QKV_VOCAB_RESERVED + 2)
            printf("; %s: precision %.2f%%, recall %.2f%%, F1 %.2f%%",
                   qkv_vocab_symbol(r->tgt, positive), 100 * precision(&c), 100 * recall(&c),
                   100 * f1(&c));
        printf(" (CPU %.1f s)\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
        rc = 0;
    }
    free(out.pred);
    free(out.prob);
    enc_set_free(&t);
    enc_input_free(&in);
    return rc;
}

/* label<TAB>probability for every line */
static void print_labels(void *user, const enc_lines *l, const qkv_tensor *logits) {
    const run_dir *r = user;
    for (int64_t i = 0; i < l->n; i++) {
        if (l->row[i] >= 0) {
            const int64_t K = logits->shape[1];
            const qkv_real *x = (const qkv_real *)logits->data + l->row[i] * K;
            const int32_t best = enc_argmax(x, K);
            printf("%s\t%.4f", qkv_vocab_symbol(r->tgt, best), enc_label_probability(x, K, best));
        }
        printf("\n");
    }
}

static int classify_decode_run(run_dir *r, const char *const *files, int n_files,
                               const task_run_opts *o) {
    int32_t positive;
    if (!run_positive(r, "decode", &positive)) return 1;
    return enc_decode_run(r, QKV_HEAD_POOLED, true, files, n_files, o, print_labels, r);
}

static int classify_attn_run(run_dir *r, const char *input, const task_run_opts *o) {
    int32_t positive;
    if (!run_positive(r, "attn", &positive)) return 1;
    return enc_attn_run(r, QKV_HEAD_POOLED, true, input, o);
}

const task_ops classify_task_ops = {.name = "classify",
                                    .summary = "label<TAB>tokens lines: encoder-only, pooled head, accuracy (and P / R / F1)",
                                    .select = "accuracy",
                                    .lower_is_better = false,
                                    .create = classify_create,
                                    .prepare = classify_prepare,
                                    .batch = classify_batch,
                                    .evaluate = classify_evaluate,
                                    .describe = classify_describe,
                                    .free = classify_free,
                                    .eval_run = classify_eval_run,
                                    .decode_run = classify_decode_run,
                                    .attn_run = classify_attn_run,
                                    .rate_unit = "texts"};
