/*
 * lm_task.c: language modelling (task = lm): a decoder-only Transformer (qkv_model_lm: causal
 * self-attention layers, an output projection to the vocabulary) trained on plain text, one text
 * per line (lm_text.h: units, long lines, what is scored), with next-token label-smoothed
 * cross-entropy through the common loop of cmd_train.c.
 *
 * Vocabulary (tgt.vocab): the symbols of the training file seen at least data.min_count times,
 * in byte order, after the reserved <pad> <unk> <bos> <eos>; rarer or unseen symbols are <unk>
 * (trained on like any symbol when min_count > 1).
 *
 * Metrics on dev (no label smoothing, no dropout): cross-entropy in nats per token (it picks the
 * best checkpoint, lower is better), perplexity exp(cross-entropy), and bits per character (char
 * unit) or per word (word unit): cross-entropy / ln 2, the line ends counted as symbols.
 *
 * `qkv eval RUN FILE` prints the same figures for a file; `qkv decode RUN` continues prompts (one
 * per line, possibly empty: then the model writes a text from nothing) with qkv_generate (greedy
 * by default, --beam K, --sample with --temperature / --top-k / --top-p / --seed; --max-len N
 * symbols at most, <eos> included; --nbest N alone: beam search) and prints
 * "prompt<TAB>continuation"; `qkv attn RUN INPUT`
 * writes the causal self-attention maps of every layer and head over <bos> INPUT.
 */
#include "input_lines.h"
#include "lm_text.h"
#include "run_dir.h"
#include "task.h"
#include "qkv/qkv_decode.h"
#include "qkv/qkv_viz.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>


/* model.d_model, heads, layers, ff, dropout, norm_first, pos, activation, max_len,
 * tie_embeddings, attention.* into a decoder-only configuration. */
static bool read_lm_model(config *cfg, qkv_model_config *m) {
    int64_t d_model, heads, layers, v;
    int e;
    if (!config_int(cfg, "model.d_model", 256, 1, 65536, &d_model) ||
        !config_int(cfg, "model.heads", 4, 1, 1024, &heads) ||
        !config_int(cfg, "model.layers", 4, 1, 1000, &layers))
        return false;
    *m = qkv_model_default_config(QKV_ARCH_DECODER, (int32_t)d_model, (int32_t)heads,
                                  (int32_t)layers);
    if (!config_int(cfg, "model.ff", 4 * d_model, 1, 1 << 20, &v)) return false;
    m->dim_feedforward = (int32_t)v;
    if (!config_double(cfg, "model.dropout", 0.1, 0, 0.99, &m->dropout) ||
        !config_bool(cfg, "model.norm_first", false, &m->norm_first) ||
        !config_bool(cfg, "model.tie_embeddings", false, &m->tie_embeddings) ||
        !config_registry(cfg, "model.pos", QKV_REGISTRY_POS, QKV_POS_SINUSOIDAL, &e))
        return false;
    m->pos = (qkv_abs_pos)e;
    if (!config_registry(cfg, "model.activation", QKV_REGISTRY_ACTIVATION, QKV_ACT_RELU, &e)) return false;
    m->activation = (qkv_activation)e;
    if (!config_int(cfg, "model.max_len", 256, 2, 1 << 20, &v)) return false;
    m->max_len = (int32_t)v;
    m->pad_id = QKV_VOCAB_PAD;
    return task_read_attention(cfg, "model.attention", &m->self_attn);
}

/* The metrics of a score: cross-entropy, perplexity, bits per symbol. */
static void add_metrics(task_metrics *out, const lm_score *s, lm_unit unit) {
    const double ce = s->events ? s->nats / (double)s->events : NAN;
    task_metrics_add_plain(out, "loss", "cross-entropy", ce);
    task_metrics_add_plain(out, "ppl", "perplexity", exp(ce));
    if (unit == LM_UNIT_CHAR)
        task_metrics_add_plain(out, "bpc", "bits/char", ce / log(2));
    else
        task_metrics_add_plain(out, "bpw", "bits/word", ce / log(2));
    out->items = s->events;
    out->unit = unit == LM_UNIT_CHAR ? "characters and line ends" : "words and line ends";
}

/* ---- the task of `qkv train`
 * ---------------------------------------------------------------------- */

typedef struct lm_task {
    task base;
    lm_text_opts to;
    int64_t min_count, eval_tokens;
    qkv_vocab *vocab;
    lm_text train, dev;
    int32_t *tgt;
    size_t tgt_cap;
} lm_task;

static bool lm_create(config *cfg, task **out) {
    lm_task *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(cfg->error, sizeof cfg->error, "out of memory");
        return false;
    }
    t->base.ops = &lm_task_ops;
    *out = &t->base;
    return task_read_common(cfg, &t->base.s) && read_lm_model(cfg, &t->base.s.model) &&
           lm_read_text_opts(cfg, t->base.s.model.max_len, &t->to) &&
           config_int(cfg, "data.min_count", 1, 1, INT64_C(1) << 40, &t->min_count) &&
           config_int(cfg, "eval.max_tokens", 8192, 1, INT64_C(1) << 30, &t->eval_tokens);
}

static qkv_status lm_prepare(task *base, bool resume) {
    lm_task *t = (lm_task *)base;
    task_settings *s = &base->s;
    char path[1024], unit[64], lines[64];
    qkv_status st = lm_text_read(s->train_path, &t->to, &t->train);
    if (!st) st = task_path(path, sizeof path, s->out_dir, "tgt.vocab");
    if (st) return st;
    if (resume) {
        st = qkv_vocab_load(path, &t->vocab);
    } else {
        snprintf(unit, sizeof unit, "data.unit = %s", lm_unit_name(t->to.unit));
        snprintf(lines, sizeof lines, "data.long_lines = %s", lm_long_lines_name(t->to.long_lines));
        const char *conf[] = {unit, lines};
        if (!(st =
                  qkv_vocab_build(t->train.corpus, QKV_FIELD_TGT, t->min_count, true, &t->vocab)) &&
            !(st = qkv_vocab_save(t->vocab, path)))
            st = task_write_conf(s->out_dir, "lm", conf, 2);
    }
    if (st || (st = lm_text_encode(&t->train, t->vocab)) ||
        (st = lm_text_read(s->dev_path, &t->to, &t->dev)) ||
        (st = lm_text_encode(&t->dev, t->vocab)))
        return st;
    s->model.tgt_vocab = qkv_vocab_size(t->vocab);
    base->train = t->train.data;
    base->batch_opts = lm_batch_opts(&t->train, s->max_tokens);
    base->batch_opts.seed = s->train.seed;
    base->batch_opts.bucket_width = 8;
    return QKV_OK;
}

static qkv_status lm_batch(task *base, const qkv_batch *b, qkv_train_batch *out) {
    lm_task *t = (lm_task *)base;
    const int32_t *y = lm_batch_targets(&t->train, b, &t->tgt, &t->tgt_cap);
    if (!y) return qkv_set_error(QKV_ERR_OOM, "out of memory");
    *out = (qkv_train_batch){.batch = (int32_t)b->rows,
                             .src_len = (int32_t)b->dec_cols,
                             .tgt_len = (int32_t)b->dec_cols,
                             .src = b->dec_in,
                             .tgt_out = y};
    return QKV_OK;
}

static qkv_status lm_evaluate(task *base, const qkv_model *m, task_metrics *out) {
    lm_task *t = (lm_task *)base;
    lm_score sc;
    memset(out, 0, sizeof *out);
    qkv_status st = lm_text_score(m, &t->dev, t->eval_tokens, &sc);
    if (!st) add_metrics(out, &sc, t->to.unit);
    return st;
}

static void describe_text(const lm_text *x, FILE *f) {
    fprintf(f, "%lld lines", (long long)x->lines);
    const int64_t pieces = x->subset ? x->n_subset : qkv_dataset_size(x->data);
    if (pieces != x->lines) fprintf(f, " (%lld pieces)", (long long)pieces);
    if (x->skipped) fprintf(f, " (%lld too long, skipped)", (long long)x->skipped);
}

static void lm_describe(const task *base, FILE *f) {
    const lm_task *t = (const lm_task *)base;
    const char *unit = t->to.unit == LM_UNIT_CHAR ? "characters" : "words";
    describe_text(&t->train, f);
    fprintf(f, ", %lld %s for training; ", (long long)t->train.symbols, unit);
    describe_text(&t->dev, f);
    fprintf(f, " dev | %d symbols (%s)", qkv_vocab_size(t->vocab) - QKV_VOCAB_RESERVED, unit);
    const int64_t unk = qkv_dataset_unknowns(t->dev.data, QKV_FIELD_TGT);
    if (unk) fprintf(f, ", %lld dev %s unknown", (long long)unk, unit);
}

static void lm_free(task *base) {
    lm_task *t = (lm_task *)base;
    lm_text_free(&t->train);
    lm_text_free(&t->dev);
    qkv_vocab_free(t->vocab);
    free(t->tgt);
    free(t);
}

/* ---- qkv eval / decode / attn on an lm run
 * ---------------------------------------------------------- */

/* task.conf's keys and a check that the model is a language model over tgt.vocab. */
static bool open_run(run_dir *r, const char *cmd, lm_text_opts *o) {
    if (!lm_read_text_opts(&r->conf, r->model->cfg.max_len, o) || !config_check_unused(&r->conf)) {
        fprintf(stderr, "qkv %s: %s\n", cmd, r->conf.error);
        return false;
    }
    if (r->model->cfg.arch != QKV_ARCH_DECODER) {
        fprintf(
            stderr,
            "qkv %s: %s: task.conf says lm, but the model is not a decoder-only language model\n",
            cmd, r->dir);
        return false;
    }
    return true;
}

static int lm_eval_run(run_dir *r, const char *data, const task_run_opts *o) {
    (void)o;
    lm_text_opts to;
    if (!open_run(r, "eval", &to)) return 1;
    lm_text x;
    lm_score sc;
    int rc = 1;
    const clock_t c0 = clock();
    if (lm_text_read(data, &to, &x) || lm_text_encode(&x, r->tgt) ||
        lm_text_score(r->model, &x, 8192, &sc)) {
        fprintf(stderr, "qkv eval: %s\n", qkv_last_error());
    } else {
        task_metrics m;
        memset(&m, 0, sizeof m);
        add_metrics(&m, &sc, to.unit);
        printf("%s: %lld lines, %lld %s + %lld line ends:", data, (long long)x.lines,
               (long long)x.symbols, to.unit == LM_UNIT_CHAR ? "characters" : "words",
               (long long)x.lines);
        for (int i = 0; i < m.n; i++)
            printf("%s %s %.4f", i ? "," : "", m.m[i].label, m.m[i].value);
        const int64_t unk = qkv_dataset_unknowns(x.data, QKV_FIELD_TGT);
        if (unk) printf("; %lld unknown symbols (<unk>)", (long long)unk);
        if (x.skipped)
            printf("; %lld lines longer than %lld skipped", (long long)x.skipped,
                   (long long)to.max_symbols);
        printf(" (CPU %.1f s)\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
        rc = 0;
    }
    lm_text_free(&x);
    return rc;
}

/* Where encode_line's symbols go. */
typedef struct line_sink {
    const qkv_vocab *v;
    lm_unit unit;
    const char *file;
    int64_t line_no, k, max;
    int32_t *ids;
    char *copy;
    size_t at;
    const char **syms;
} line_sink;

static qkv_status line_symbol(void *ctx, size_t off, size_t len, const char *sym, size_t w) {
    (void)off, (void)len;
    line_sink *s = ctx;
    if (s->k == s->max)
        return qkv_set_error(QKV_ERR_SHAPE, "%s:%lld: longer than the model's limit of %lld %s (model.max_len - 1)",
                             s->file, (long long)s->line_no, (long long)s->max,
                             qkv_tokenizer_unit(lm_unit_tokenizer(s->unit)));
    const int32_t id = qkv_vocab_find(s->v, sym, w);
    s->ids[++s->k] = id >= QKV_VOCAB_RESERVED ? id : QKV_VOCAB_UNK;
    memcpy(s->copy + s->at, sym, w);
    s->copy[s->at + w] = '\0';
    if (s->syms) s->syms[s->k] = s->copy + s->at;
    s->at += w + 1;
    return QKV_OK;
}

/* The symbols of a line (lm_text.h) as ids of v after <bos> (unknown: <unk>): ids[0] = <bos>,
 * *n = symbols + 1. Error "FILE:LINE: ..." past max symbols. The symbol texts go to syms (NULL:
 * not kept), each NUL-terminated in the copy *text (malloc'd; the caller frees it). */
static qkv_status encode_line(const qkv_vocab *v, lm_unit unit, const char *file, int64_t line_no,
                              const char *line, int64_t max, int32_t *ids, int64_t *n, char **text,
                              const char **syms) {
    const size_t len = strlen(line);
    line_sink s = {.v = v, .unit = unit, .file = file, .line_no = line_no, .max = max, .ids = ids, .syms = syms,
                   .copy = malloc(2 * len + 1)}; /* each symbol with its NUL */
    if (!s.copy) return qkv_set_error(QKV_ERR_OOM, "out of memory");
    ids[0] = QKV_VOCAB_BOS;
    qkv_status st = input_line_split(lm_unit_tokenizer(unit), file, line_no, line, len, "prompt", line_symbol, &s);
    if (st) {
        free(s.copy);
        return st;
    }
    *n = s.k + 1;
    *text = s.copy;
    return QKV_OK;
}

typedef struct decode_state {
    const run_dir *r;
    lm_unit unit;
    qkv_decode_params dp;
    int32_t user_max; /* --max-len; 0: as long as the model allows */
    int32_t *ids;     /* (max_len) */
} decode_state;

/* Continue one prompt; print prompt<TAB>continuation (n-best: one line each, with its score). */
static int decode_line(void *user, const char *file, int64_t line_no, char *line) {
    decode_state *d = user;
    const int64_t L = d->r->model->cfg.max_len;
    int64_t n = 0;
    char *text = NULL;
    qkv_hypotheses h;
    memset(&h, 0, sizeof h);
    qkv_status st =
        encode_line(d->r->tgt, d->unit, file, line_no, line, L - 1, d->ids, &n, &text, NULL);
    if (!st) {
        /* <bos> and a prompt of n - 1 symbols leave room for L + 1 - n generated tokens */
        const int32_t len = (int32_t)n, room = (int32_t)(L + 1 - n);
        d->dp.max_len = d->user_max > 0 && d->user_max < room ? d->user_max : room;
        st = qkv_decoder_generate(d->r->decoder, d->ids, &len, 1, &d->dp, &h);
    }
    if (st) {
        fprintf(stderr, "qkv decode: %s\n", qkv_last_error());
    } else {
        for (int32_t k = 0; k < h.count[0]; k++) {
            const qkv_hypothesis *hy = &h.hyp[k];
            printf("%s\t", line);
            print_symbols(stdout, lm_unit_tokenizer(d->unit), d->r->tgt, hy->tokens, hy->length);
            if (d->dp.n_best > 1) printf("\t%.4f", hy->score);
            printf("\n");
        }
        fflush(stdout);
    }
    qkv_hypotheses_free(&h);
    free(text);
    return st ? 1 : 0;
}

static int lm_decode_run(run_dir *r, const char *const *files, int n_files,
                         const task_run_opts *o) {
    lm_text_opts to;
    if (!open_run(r, "decode", &to)) return 1;
    decode_state d = {.r = r, .unit = to.unit, .dp = *o->decode, .user_max = o->decode->max_len};
    if (!o->strategy_set) d.dp.strategy = d.dp.n_best > 1 ? QKV_DECODE_BEAM : QKV_DECODE_GREEDY;
    d.dp.bos_id = QKV_VOCAB_BOS;
    d.dp.eos_id = QKV_VOCAB_EOS;
    d.ids = malloc(sizeof *d.ids * (size_t)r->model->cfg.max_len);
    if (!d.ids) {
        fprintf(stderr, "qkv decode: out of memory\n");
        return 1;
    }
    /* each prompt alone: its continuation does not depend on the other lines */
    const int rc = input_for_each_line("decode", files, n_files, decode_line, &d);
    free(d.ids);
    return rc;
}

static int lm_attn_run(run_dir *r, const char *input, const task_run_opts *o) {
    lm_text_opts to;
    if (!open_run(r, "attn", &to)) return 1;
    const qkv_model_config *c = &r->model->cfg;
    const int64_t L = c->n_encoder_layers, H = c->n_heads, max = c->max_len;
    int rc = 1;
    char *text = NULL;
    qkv_ctx *ctx = NULL;
    int32_t *ids = malloc(sizeof *ids * (size_t)max);
    const char **in_label = calloc((size_t)max, sizeof *in_label),
               **out_label = calloc((size_t)max, sizeof *out_label);
    qkv_tensor **w = calloc((size_t)L, sizeof *w);
    qkv_ctx_params cp = qkv_ctx_default_params();
    int64_t T = 0;
    if (!ids || !in_label || !out_label || !w || qkv_ctx_new(&cp, &ctx)) {
        fprintf(stderr, "qkv attn: out of memory\n");
        goto done;
    }
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_ctx_set_training(ctx, false);
    if (encode_line(r->tgt, to.unit, "<input>", 1, input, max - 1, ids, &T, &text, in_label))
        goto fail;
    /* columns: what each position reads (<bos>, s_1 .. s_m); rows: what it predicts (s_1 .. s_m,
     * <eos>); a space shows as U+2423 */
    in_label[0] = "<bos>";
    for (int64_t t = 1; t < T; t++)
        if (!strcmp(in_label[t], " ")) in_label[t] = "\xE2\x90\xA3";
    for (int64_t t = 0; t < T; t++)
        out_label[t] = t + 1 < T ? in_label[t + 1] : "<eos>";
    qkv_tensor *tokens = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, T}, ids);
    qkv_tensor *logits = qkv_model_lm(ctx, r->model, tokens, w); /* (1, T, V) */
    if (qkv_ctx_status(ctx)) goto fail;
    const int64_t V = logits->shape[2];
    printf("%s -> next symbol predicted after each prefix:", input);
    for (int64_t t = 0; t < T; t++) {
        const qkv_real *x = (const qkv_real *)logits->data + t * V;
        int32_t best = 0;
        for (int32_t v = 1; v < V; v++)
            if (x[v] > x[best]) best = v;
        printf(" %s", best == QKV_VOCAB_EOS ? "<eos>"
                      : !strcmp(qkv_vocab_symbol(r->tgt, best), " ")
                          ? "\xE2\x90\xA3"
                          : qkv_vocab_symbol(r->tgt, best));
    }
    printf("\n");
    rc = task_attn_write(&(task_attn){.run = o->run,
                                      .out_dir = o->out_dir,
                                      .stack = "decoder",
                                      .kind = QKV_ATTN_MASKED_SELF,
                                      .weights = w,
                                      .n_layers = L,
                                      .n_heads = H,
                                      .rows = T,
                                      .cols = T,
                                      .row_labels = out_label,
                                      .col_labels = in_label,
                                      .page = {.title = input,
                                               .input_tokens = in_label,
                                               .n_input = T,
                                               .output_tokens = out_label,
                                               .n_output = T},
                                      .terminal = o->terminal,
                                      .layer = o->layer,
                                      .head = o->head});
    goto done;
fail:
    fprintf(stderr, "qkv attn: %s\n", qkv_last_error());
done:
    free(text);
    free(ids);
    free(in_label);
    free(out_label);
    free(w);
    qkv_ctx_free(ctx);
    return rc;
}

const task_ops lm_task_ops = {.name = "lm",
                              .summary = "plain text: decoder-only language model, cross-entropy, perplexity, bits per symbol",
                              .select = "loss",
                              .lower_is_better = true,
                              .create = lm_create,
                              .prepare = lm_prepare,
                              .batch = lm_batch,
                              .evaluate = lm_evaluate,
                              .describe = lm_describe,
                              .free = lm_free,
                              .eval_run = lm_eval_run,
                              .decode_run = lm_decode_run,
                              .attn_run = lm_attn_run,
                              .generates = true};
