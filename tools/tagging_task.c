/*
 * tagging_task.c: sequence labelling (task = tagging), e.g. part-of-speech tagging on Brown: an
 * encoder-only Transformer with a token head (qkv_model.h) predicts one tag per token.
 *
 * Data: token-per-line files "word<TAB>tag1[<TAB>tag2 ...]" with a blank line after each
 * sentence (QKV_CORPUS_TAGGED); data.tag_column picks the tag column (Brown: 1 full tags,
 * 2 universal tags). Inputs: encoder_input.h (word vocabulary with data.min_count, spelling
 * features, word dropout). tgt.vocab holds the training tags; a dev or test tag never seen in
 * training can never be predicted and counts as an error.
 *
 * Metrics, over all tokens (punctuation included, as the reference taggers are scored):
 *   accuracy              correct tags / tokens
 *   universal_accuracy    with eval.universal = brown: predicted and gold tags both mapped to
 *                         the 12 universal tags (qkv_brown_universal_tag) before comparing, so
 *                         a model trained on Brown's full tags gives both figures
 *   oov_accuracy          accuracy on the tokens whose word is not in src.vocab (with
 *                         data.min_count = 1: the words never seen in training)
 * The model with the best dev accuracy is kept. A prediction is the arg max over the tags (the
 * reserved ids <pad> <unk> <bos> <eos> are never predicted).
 */
#include "encoder_input.h"
#include "encoder_lines.h"
#include "encoder_task.h"
#include "run_dir.h"
#include "task.h"
#include "recipes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct tagging_settings {
    int64_t tag_column;  /* data.tag_column */
    int64_t max_len;     /* data.max_src_len: longest sentence read */
    bool universal;      /* eval.universal = brown */
    int64_t eval_tokens; /* eval.max_tokens: tokens per evaluation batch */
} tagging_settings;


/* The tagging keys; with training false the ones of task.conf only. */
static bool read_tagging(config *cfg, bool training, tagging_settings *ts) {
    int e = 0;
    memset(ts, 0, sizeof *ts);
    if (!config_int(cfg, "data.tag_column", 1, 1, 64, &ts->tag_column) ||
        !config_switch(cfg, "eval.universal", SWITCH_UNIVERSAL, 0, &e))
        return false;
    ts->universal = e == 1;
    return !training ||
           (config_int(cfg, "data.max_src_len", 256, 1, 1 << 20, &ts->max_len) &&
            config_int(cfg, "eval.max_tokens", 8192, 1, INT64_C(1) << 30, &ts->eval_tokens));
}

/* ---- scoring -----------------------------------------------------------------------------------
 */

/* A tagged file encoded for a run. */
static qkv_status tag_set_load(enc_set *t, const char *path, int64_t tag_column, int64_t max_len,
                               const enc_input *in, const qkv_vocab *tags) {
    const qkv_read_opts ro = {
        .max_src_len = max_len, .max_tgt_len = max_len, .tag_column = (int)tag_column};
    return enc_set_load(t, QKV_CORPUS_TAGGED, path, &ro, in, tags);
}

typedef struct tag_counts {
    qkv_accuracy all, universal, oov, oov_universal;
    int64_t sentences;
} tag_counts;

typedef struct {
    const enc_feats *feats;
    int32_t *pred; /* per token of the set */
} pred_sink;

static qkv_status store_predictions(void *user, const qkv_batch *b, const qkv_tensor *logits) {
    pred_sink *p = user;
    const int64_t S = b->src_cols, K = logits->shape[2];
    for (int64_t r = 0; r < b->rows; r++) {
        const int64_t at = p->feats->start[b->example[r]];
        for (int64_t s = 0; s < b->src_len[r]; s++)
            p->pred[at + s] = enc_argmax((const qkv_real *)logits->data + (r * S + s) * K, K);
    }
    return QKV_OK;
}

/* The universal tag of a full tag given as text[0, len). */
static const char *universal_of(const char *text, size_t len) {
    char tag[128];
    snprintf(tag, sizeof tag, "%.*s", (int)(len < sizeof tag ? len : sizeof tag - 1), text);
    return qkv_brown_universal_tag(tag);
}

/* Tag every sentence of t with m and count; pred_out (may be NULL) receives the predictions
 * (malloc'd, one per token in file order). */
static qkv_status score_set(const qkv_model *m, const enc_input *in, const qkv_vocab *tags,
                            const enc_set *t, bool universal, int64_t max_tokens, tag_counts *c,
                            int32_t **pred_out) {
    memset(c, 0, sizeof *c);
    const int64_t n_tok = t->feats.start[t->feats.n];
    pred_sink sink = {&t->feats, malloc(sizeof(int32_t) * (size_t)(n_tok ? n_tok : 1))};
    if (!sink.pred) return qkv_set_error(QKV_ERR_OOM, "out of memory");
    qkv_status st =
        enc_forward_all(m, in, t->data, &t->feats, max_tokens, store_predictions, &sink);
    for (int64_t i = 0; i < t->feats.n && !st; i++) {
        qkv_example ex;
        if ((st = qkv_dataset_get(t->data, i, &ex))) break;
        c->sentences++;
        for (int64_t s = 0; s < ex.src_len; s++) {
            const int32_t pred = sink.pred[t->feats.start[i] + s];
            const bool oov = ex.src[s] == QKV_VOCAB_UNK, right = pred == ex.tgt[s];
            c->all.total++, c->all.correct += right;
            c->oov.total += oov, c->oov.correct += oov && right;
            if (!universal) continue;
            size_t len = 0;
            const char *gold = qkv_corpus_symbol(t->corpus, i, QKV_FIELD_TGT, s, &len);
            const char *p = qkv_vocab_symbol(tags, pred);
            const bool uright = !strcmp(universal_of(p, strlen(p)), universal_of(gold, len));
            c->universal.total++, c->universal.correct += uright;
            c->oov_universal.total += oov, c->oov_universal.correct += oov && uright;
        }
    }
    if (!st && pred_out)
        *pred_out = sink.pred;
    else
        free(sink.pred);
    return st;
}

/* ---- the task of `qkv train`
 * ---------------------------------------------------------------------- */

typedef struct tagging_task {
    task base;
    tagging_settings ts;
    enc_input_settings is;
    enc_input in;
    qkv_vocab *tags;
    enc_set train, dev;
    enc_batch_buf buf;
} tagging_task;

static bool tagging_create(config *cfg, task **out) {
    tagging_task *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(cfg->error, sizeof cfg->error, "out of memory");
        return false;
    }
    t->base.ops = &tagging_task_ops;
    *out = &t->base;
    return task_read_common(cfg, &t->base.s) && read_tagging(cfg, true, &t->ts) &&
           enc_input_read_settings(cfg, true, &t->is) &&
           task_read_encoder_model(cfg, QKV_HEAD_TOKEN, t->ts.max_len, &t->base.s.model) &&
           enc_task_check_max_len(cfg, &t->base.s.model, t->ts.max_len);
}

static qkv_status tagging_prepare(task *base, bool resume) {
    tagging_task *t = (tagging_task *)base;
    const task_settings *s = &base->s;
    qkv_read_opts ro = {.max_src_len = t->ts.max_len,
                        .max_tgt_len = t->ts.max_len,
                        .tag_column = (int)t->ts.tag_column};
    qkv_status st = qkv_corpus_read(QKV_CORPUS_TAGGED, s->train_path, &ro, &t->train.corpus);
    if (st) return st;
    char features[512], column[64];
    enc_input_features_line(&t->is, features, sizeof features);
    snprintf(column, sizeof column, "data.tag_column = %lld", (long long)t->ts.tag_column);
    const char *lines[] = {column, features,
                           t->ts.universal ? "eval.universal = brown" : "eval.universal = none"};
    if ((st = enc_task_vocabs(&t->in, &t->is, t->train.corpus, resume, true, s->out_dir, "tagging",
                              lines, 3, &t->tags)) ||
        (st = enc_task_encode_train(&t->in, &t->is, &t->train, t->tags)) ||
        (st = tag_set_load(&t->dev, s->dev_path, t->ts.tag_column, t->ts.max_len, &t->in, t->tags)))
        return st;
    enc_task_finish_prepare(base, &t->in, t->tags, &t->train, 4);
    return QKV_OK;
}

static qkv_status tagging_batch(task *base, const qkv_batch *b, qkv_train_batch *out) {
    tagging_task *t = (tagging_task *)base;
    const int32_t *src = NULL, *feats = NULL;
    qkv_status st =
        enc_input_batch(&t->in, &t->train.feats, b, &base->s.train.seed, &t->buf, &src, &feats);
    if (st) return st;
    const int64_t B = b->rows, S = b->src_cols, T = b->tgt_cols;
    int32_t *labels = enc_batch_labels(&t->buf, (size_t)(B * S));
    if (!labels) return qkv_set_error(QKV_ERR_OOM, "out of memory");
    for (int64_t r = 0; r < B; r++)
        for (int64_t s = 0; s < S; s++)
            labels[r * S + s] = s < b->src_len[r] ? b->tgt[r * T + s] : QKV_NO_LABEL;
    *out = (qkv_train_batch){.batch = (int32_t)B,
                             .src_len = (int32_t)S,
                             .src = src,
                             .labels = labels,
                             .features = feats};
    return QKV_OK;
}

static qkv_status tagging_evaluate(task *base, const qkv_model *m, task_metrics *out) {
    tagging_task *t = (tagging_task *)base;
    tag_counts c;
    memset(out, 0, sizeof *out);
    qkv_status st =
        score_set(m, &t->in, t->tags, &t->dev, t->ts.universal, t->ts.eval_tokens, &c, NULL);
    if (st) return st;
    task_metrics_add(out, "accuracy", "accuracy", 100 * qkv_accuracy_rate(&c.all));
    if (t->ts.universal)
        task_metrics_add(out, "universal_accuracy", "universal",
                         100 * qkv_accuracy_rate(&c.universal));
    task_metrics_add(out, "oov_accuracy", "OOV", 100 * qkv_accuracy_rate(&c.oov));
    out->items = c.all.total;
    out->unit = "tokens";
    return QKV_OK;
}

static void tagging_describe(const task *base, FILE *f) {
    const tagging_task *t = (const tagging_task *)base;
    const int64_t n_tok = t->train.feats.start[t->train.feats.n],
                  dev_tok = t->dev.feats.start[t->dev.feats.n];
    fprintf(f,
            "%lld training sentences (%lld tokens), %lld dev sentences (%lld tokens) | %d words, "
            "%d tags",
            (long long)qkv_dataset_size(t->train.data), (long long)n_tok,
            (long long)qkv_dataset_size(t->dev.data), (long long)dev_tok,
            qkv_vocab_size(t->in.words), qkv_vocab_size(t->tags));
    enc_task_describe_features(&t->in, f);
}

static void tagging_free(task *base) {
    tagging_task *t = (tagging_task *)base;
    enc_batch_buf_free(&t->buf);
    enc_set_free(&t->dev);
    enc_set_free(&t->train);
    qkv_vocab_free(t->tags);
    enc_input_free(&t->in);
    free(t);
}

/* ---- qkv eval / decode / attn on a tagging run
 * ------------------------------------------------------ */

static void print_tagged(FILE *f, const enc_set *t, const qkv_vocab *tags, int64_t i,
                         const int32_t *pred) {
    qkv_example ex;
    qkv_dataset_get(t->data, i, &ex);
    for (int64_t s = 0; s < ex.src_len; s++) {
        size_t wl = 0, gl = 0;
        const char *w = qkv_corpus_symbol(t->corpus, i, QKV_FIELD_SRC, s, &wl);
        const char *g = qkv_corpus_symbol(t->corpus, i, QKV_FIELD_TGT, s, &gl);
        const char *p = qkv_vocab_symbol(tags, pred[t->feats.start[i] + s]);
        fprintf(f, "%s%.*s/%s", s ? " " : "", (int)wl, w, p);
        if (strlen(p) != gl || memcmp(p, g, gl)) fprintf(f, "[%.*s]", (int)gl, g);
    }
    fprintf(f, "\n");
}

static int tagging_eval_run(run_dir *r, const char *data, const task_run_opts *o) {
    tagging_settings ts;
    enc_input in;
    if (!enc_open_run_conf(r, "eval", QKV_HEAD_TOKEN, read_tagging(&r->conf, false, &ts), &in))
        return 1;
    enc_set t;
    tag_counts c;
    int32_t *pred = NULL;
    int rc = 1;
    const clock_t c0 = clock();
    if (tag_set_load(&t, data, ts.tag_column, r->model->cfg.max_len, &in, r->tgt) ||
        score_set(r->model, &in, r->tgt, &t, ts.universal, 8192, &c, &pred)) {
        fprintf(stderr, "qkv eval: %s\n", qkv_last_error());
    } else {
        for (int64_t i = 0; i < o->show && i < t.feats.n; i++)
            print_tagged(stdout, &t, r->tgt, i, pred);
        printf("%s: %lld sentences, %lld tokens: accuracy %.2f%%", data, (long long)c.sentences,
               (long long)c.all.total, 100 * qkv_accuracy_rate(&c.all));
        if (ts.universal) printf(", universal %.2f%%", 100 * qkv_accuracy_rate(&c.universal));
        printf("; OOV tokens (not in src.vocab) %.2f%%: accuracy %.2f%%",
               c.all.total ? 100.0 * (double)c.oov.total / (double)c.all.total : 0.0,
               100 * qkv_accuracy_rate(&c.oov));
        if (ts.universal) printf(", universal %.2f%%", 100 * qkv_accuracy_rate(&c.oov_universal));
        printf(" (CPU %.1f s)\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
        rc = 0;
    }
    free(pred);
    enc_set_free(&t);
    enc_input_free(&in);
    return rc;
}

/* word/TAG for every token of every line */
static void print_tags(void *user, const enc_lines *l, const qkv_tensor *logits) {
    const run_dir *r = user;
    for (int64_t i = 0; i < l->n; i++) {
        const int64_t row = l->row[i];
        for (int64_t k = l->start[i]; row >= 0 && k < l->start[i + 1]; k++) {
            const int64_t S = logits->shape[1], K = logits->shape[2];
            const qkv_real *x = (const qkv_real *)logits->data + (row * S + (k - l->start[i])) * K;
            printf("%s%s/%s", k > l->start[i] ? " " : "", l->tok[k],
                   qkv_vocab_symbol(r->tgt, enc_argmax(x, K)));
        }
        printf("\n");
    }
}

static int tagging_decode_run(run_dir *r, const char *const *files, int n_files,
                              const task_run_opts *o) {
    tagging_settings ts;
    return enc_decode_run(r, QKV_HEAD_TOKEN, read_tagging(&r->conf, false, &ts), files, n_files, o,
                          print_tags, r);
}

static int tagging_attn_run(run_dir *r, const char *input, const task_run_opts *o) {
    tagging_settings ts;
    return enc_attn_run(r, QKV_HEAD_TOKEN, read_tagging(&r->conf, false, &ts), input, o);
}

const task_ops tagging_task_ops = {.name = "tagging",
                                   .summary = "token-per-line tagged sentences: encoder-only, token head, accuracy",
                                   .select = "accuracy",
                                   .lower_is_better = false,
                                   .create = tagging_create,
                                   .prepare = tagging_prepare,
                                   .batch = tagging_batch,
                                   .evaluate = tagging_evaluate,
                                   .describe = tagging_describe,
                                   .free = tagging_free,
                                   .eval_run = tagging_eval_run,
                                   .decode_run = tagging_decode_run,
                                   .attn_run = tagging_attn_run};
