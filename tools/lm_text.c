/* lm_text.c: see lm_text.h. */
#include "lm_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


const char *lm_unit_name(lm_unit u) {
    return config_switch_table(SWITCH_UNIT)->names[u];
}
const qkv_tokenizer *lm_unit_tokenizer(lm_unit u) {
    return qkv_tokenizer_shared(u == LM_UNIT_WORD ? QKV_TOKENIZER_WORDS : QKV_TOKENIZER_CHARS);
}
const char *lm_long_lines_name(lm_long_lines l) {
    return config_switch_table(SWITCH_LONG_LINES)->names[l];
}

bool lm_read_text_opts(config *cfg, int64_t max_len, lm_text_opts *o) {
    int u = 0, l = 0;
    if (!config_switch(cfg, "data.unit", SWITCH_UNIT, 0, &u) ||
        !config_switch(cfg, "data.long_lines", SWITCH_LONG_LINES, 0, &l))
        return false;
    *o = (lm_text_opts){
        .unit = (lm_unit)u, .long_lines = (lm_long_lines)l, .max_symbols = max_len - 1};
    return true;
}

qkv_status lm_text_read(const char *path, const lm_text_opts *o, lm_text *out) {
    memset(out, 0, sizeof *out);
    if (o->max_symbols < 1)
        return qkv_set_error(QKV_ERR_INVALID_ARG,
                             "a language model needs model.max_len >= 2 (got %lld)",
                             (long long)o->max_symbols + 1);
    qkv_read_opts ro = {.tgt_tokenizer = lm_unit_tokenizer(o->unit)};
    if (o->long_lines == LM_LONG_ERROR) ro.max_tgt_len = o->max_symbols;
    if (o->long_lines == LM_LONG_SPLIT) ro.text_chunk = o->max_symbols;
    qkv_status st = qkv_corpus_read(QKV_CORPUS_TEXT, path, &ro, &out->corpus);
    if (st) {
        if (o->long_lines == LM_LONG_ERROR && strstr(qkv_last_error(), "more than the maximum")) {
            char
                msg[700]; /* the reader's message, its " [file.c:line]" suffix replaced by a hint */
            snprintf(msg, sizeof msg, "%s", qkv_last_error());
            char *at = strstr(msg, " [");
            if (at) *at = '\0';
            st = qkv_set_error(
                st,
                "%s (model.max_len - 1: one position is <bos>; data.long_lines = split or skip "
                "accepts longer lines)",
                msg);
        }
        return st;
    }
    const int64_t n = qkv_corpus_size(out->corpus);
    out->continues = calloc((size_t)(n ? n : 1), sizeof *out->continues);
    if (o->long_lines == LM_LONG_SKIP)
        out->subset = malloc(sizeof *out->subset * (size_t)(n ? n : 1));
    if (!out->continues || (o->long_lines == LM_LONG_SKIP && !out->subset)) {
        lm_text_free(out);
        return qkv_set_error(QKV_ERR_OOM, "%s: out of memory", path);
    }
    for (int64_t i = 0; i < n; i++) {
        const int64_t len = qkv_corpus_length(out->corpus, i, QKV_FIELD_TGT);
        const int64_t line = qkv_corpus_line(out->corpus, i);
        out->continues[i] = i + 1 < n && qkv_corpus_line(out->corpus, i + 1) == line;
        if (out->subset && len > o->max_symbols) {
            out->skipped++;
            continue;
        }
        if (out->subset) out->subset[out->n_subset++] = i;
        out->symbols += len;
        out->lines += !out->continues[i];
    }
    if (out->subset && out->n_subset == 0) {
        lm_text_free(out);
        return qkv_set_error(QKV_ERR_FORMAT,
                             "%s: every line is longer than %lld symbols (model.max_len - 1)", path,
                             (long long)o->max_symbols);
    }
    return QKV_OK;
}

qkv_status lm_text_encode(lm_text *t, const qkv_vocab *v) {
    return qkv_dataset_encode(t->corpus, NULL, v, false, &t->data);
}

void lm_text_free(lm_text *t) {
    qkv_dataset_free(t->data);
    qkv_corpus_free(t->corpus);
    free(t->continues);
    free(t->subset);
    memset(t, 0, sizeof *t);
}

qkv_batch_opts lm_batch_opts(const lm_text *t, int64_t max_tokens) {
    qkv_batch_opts bo = qkv_batch_default_opts(max_tokens);
    bo.decoder = true;
    bo.subset = t->subset;
    bo.n_subset = t->subset ? t->n_subset : 0;
    return bo;
}

const int32_t *lm_batch_targets(const lm_text *t, const qkv_batch *b, int32_t **buf, size_t *cap) {
    const size_t n = (size_t)(b->rows * b->dec_cols);
    if (n > *cap) {
        int32_t *g = realloc(*buf, sizeof *g * n);
        if (!g) return NULL;
        *buf = g;
        *cap = n;
    }
    memcpy(*buf, b->dec_out, sizeof **buf * n);
    for (int64_t r = 0; r < b->rows; r++)
        if (t->continues[b->example[r]])
            (*buf)[r * b->dec_cols + b->tgt_len[r]] = QKV_VOCAB_PAD; /* no line end */
    return *buf;
}

qkv_status lm_text_score(const qkv_model *m, const lm_text *t, int64_t max_tokens, lm_score *out) {
    memset(out, 0, sizeof *out);
    const int64_t L = m->cfg.max_len;
    qkv_batch_opts bo = lm_batch_opts(t, max_tokens > L ? max_tokens : L);
    bo.shuffle = false;
    qkv_batcher *batcher = NULL;
    qkv_ctx *ctx = NULL;
    int32_t *tgt = NULL;
    size_t cap = 0;
    qkv_ctx_params cp = qkv_ctx_default_params();
    qkv_status st = qkv_batcher_new(t->data, &bo, &batcher);
    if (!st) st = qkv_ctx_new(&cp, &ctx);
    if (!st) {
        qkv_ctx_set_grad_enabled(ctx, false);
        qkv_ctx_set_training(ctx, false);
    }
    const int64_t nb = st ? 0 : qkv_batcher_num_batches(batcher);
    for (int64_t i = 0; i < nb && !st; i++) {
        qkv_batch b;
        if ((st = qkv_batcher_next(batcher, &b))) break;
        const int32_t *y = lm_batch_targets(t, &b, &tgt, &cap);
        if (!y) {
            st = qkv_set_error(QKV_ERR_OOM, "out of memory");
            break;
        }
        qkv_ctx_reset(ctx);
        const int64_t T = b.dec_cols;
        qkv_tensor *in = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){b.rows, T}, b.dec_in);
        qkv_tensor *logits = qkv_model_lm(ctx, m, in, NULL); /* (B, T, V) */
        if ((st = qkv_ctx_status(ctx))) break;
        const int64_t V = logits->shape[2];
        for (int64_t k = 0; k < b.rows * T; k++) {
            if (y[k] == QKV_VOCAB_PAD) continue;
            const qkv_real *x = (const qkv_real *)logits->data + k * V;
            double max = -INFINITY, sum = 0;
            for (int64_t v = 0; v < V; v++)
                max = fmax(max, (double)x[v]);
            for (int64_t v = 0; v < V; v++)
                sum += exp((double)x[v] - max);
            out->nats += max + log(sum) - (double)x[y[k]];
            out->events++;
        }
    }
    free(tgt);
    qkv_ctx_free(ctx);
    qkv_batcher_free(batcher);
    return st;
}
