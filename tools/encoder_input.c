/* encoder_input.c: see encoder_input.h. */
#include "encoder_input.h"

#include "task.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Philox stream of the word-dropout coins. */
#define WORD_DROPOUT_STREAM 0x3D0Fu

bool enc_input_read_settings(config *cfg, bool training, enc_input_settings *s) {
    memset(s, 0, sizeof *s);
    s->min_count = s->feature_min_count = 1;
    if (training && (!config_int(cfg, "data.min_count", 1, 1, INT64_C(1) << 40, &s->min_count) ||
                     !config_int(cfg, "data.feature_min_count", 1, 1, INT64_C(1) << 40,
                                 &s->feature_min_count) ||
                     !config_double(cfg, "train.word_dropout", 0, 0, 1e9, &s->word_dropout)))
        return false;
    const char *list = NULL;
    if (!config_str(cfg, "model.features", "", &list)) return false;
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const size_t n = strcspn(p, " \t,");
        if (!n) break;
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(n < 31 ? n : 31), p);
        const int f = n < 31 ? qkv_word_feature_from_name(name) : -1;
        if (f < 0)
            return config_fail(cfg, "model.features",
                               "model.features: unknown feature '%.*s' (lower, prefix1, prefix2, "
                               "prefix3, suffix1, "
                               "suffix2, suffix3, suffix4, shape)",
                               (int)n, p);
        for (int k = 0; k < s->n_features; k++)
            if (s->features[k] == (qkv_word_feature)f)
                return config_fail(cfg, "model.features", "model.features: '%s' is listed twice",
                                   name);
        s->features[s->n_features++] = (qkv_word_feature)f;
        p += n;
    }
    return true;
}

void enc_input_features_line(const enc_input_settings *s, char *buf, size_t size) {
    size_t used = (size_t)snprintf(buf, size, "model.features =");
    for (int k = 0; k < s->n_features && used < size; k++)
        used +=
            (size_t)snprintf(buf + used, size - used, " %s", qkv_word_feature_name(s->features[k]));
}

/* ---- vocabularies ---------------------------------------------------------------------------- */

/* A growable scratch buffer for one feature string. */
typedef struct {
    char *p;
    size_t cap;
} strbuf;

static qkv_status feature_of(strbuf *sb, qkv_word_feature f, const char *tok, size_t len,
                             size_t *n) {
    if (sb->cap < len + 8) {
        char *g = realloc(sb->p, len + 8);
        if (!g) return qkv_set_error(QKV_ERR_OOM, "out of memory");
        sb->p = g;
        sb->cap = len + 8;
    }
    return qkv_word_feature_of(f, tok, len, sb->p, sb->cap, n);
}

static qkv_status feature_file(char *buf, size_t size, const char *dir, qkv_word_feature f) {
    char name[64];
    snprintf(name, sizeof name, "feat.%s.vocab", qkv_word_feature_name(f));
    return task_path(buf, size, dir, name);
}

/* The vocabulary of feature f over the source tokens of c: values seen at least min_count times,
 * in byte order. */
static qkv_status build_feature_vocab(const qkv_corpus *c, qkv_word_feature f, int64_t min_count,
                                      qkv_vocab **out) {
    qkv_vocab *all = NULL, *kept = NULL;
    int64_t *count = NULL, cap = 0;
    strbuf sb = {NULL, 0};
    qkv_status st = qkv_vocab_new(&all);
    for (int64_t i = 0; !st && i < qkv_corpus_size(c); i++)
        for (int64_t k = 0; !st && k < qkv_corpus_length(c, i, QKV_FIELD_SRC); k++) {
            size_t len = 0, n = 0;
            const char *tok = qkv_corpus_symbol(c, i, QKV_FIELD_SRC, k, &len);
            int32_t id = 0;
            if ((st = feature_of(&sb, f, tok, len, &n)) || (st = qkv_vocab_add(all, sb.p, n, &id)))
                break;
            if (id >= cap) {
                const int64_t grown = 2 * cap > id + 1 ? 2 * cap : id + 1024;
                int64_t *g = realloc(count, sizeof *g * (size_t)grown);
                if (!g) {
                    st = qkv_set_error(QKV_ERR_OOM, "out of memory");
                    break;
                }
                memset(g + cap, 0, sizeof *g * (size_t)(grown - cap));
                count = g;
                cap = grown;
            }
            count[id]++;
        }
    if (!st) st = qkv_vocab_new(&kept);
    for (int32_t id = QKV_VOCAB_RESERVED; !st && id < qkv_vocab_size(all); id++) {
        const char *sym = qkv_vocab_symbol(all, id);
        if (count[id] >= min_count) st = qkv_vocab_add(kept, sym, strlen(sym), NULL);
    }
    if (!st) st = qkv_vocab_sort(kept);
    qkv_vocab_free(all);
    free(count);
    free(sb.p);
    if (st)
        qkv_vocab_free(kept);
    else
        *out = kept;
    return st;
}

qkv_status enc_input_build(enc_input *in, const enc_input_settings *s, const qkv_corpus *train,
                           const char *dir) {
    memset(in, 0, sizeof *in);
    in->s = *s;
    in->owns_words = true;
    char path[1024];
    qkv_status st = qkv_vocab_build(train, QKV_FIELD_SRC, s->min_count, true, &in->words);
    if (!st && !(st = task_path(path, sizeof path, dir, "src.vocab")))
        st = qkv_vocab_save(in->words, path);
    for (int k = 0; !st && k < s->n_features; k++) {
        st = build_feature_vocab(train, s->features[k], s->feature_min_count, &in->feat[k]);
        if (!st && !(st = feature_file(path, sizeof path, dir, s->features[k])))
            st = qkv_vocab_save(in->feat[k], path);
    }
    if (st) enc_input_free(in);
    return st;
}

qkv_status enc_input_load(enc_input *in, const enc_input_settings *s, const char *dir,
                          qkv_vocab *words) {
    memset(in, 0, sizeof *in);
    in->s = *s;
    char path[1024];
    qkv_status st = QKV_OK;
    if (words) {
        in->words = words;
    } else {
        in->owns_words = true;
        if (!(st = task_path(path, sizeof path, dir, "src.vocab")))
            st = qkv_vocab_load(path, &in->words);
    }
    for (int k = 0; !st && k < s->n_features; k++)
        if (!(st = feature_file(path, sizeof path, dir, s->features[k])))
            st = qkv_vocab_load(path, &in->feat[k]);
    if (st) enc_input_free(in);
    return st;
}

qkv_status enc_input_count_words(enc_input *in, const qkv_dataset *d) {
    free(in->word_count);
    in->word_count = calloc((size_t)qkv_vocab_size(in->words), sizeof *in->word_count);
    if (!in->word_count) return qkv_set_error(QKV_ERR_OOM, "out of memory");
    for (int64_t i = 0; i < qkv_dataset_size(d); i++) {
        qkv_example ex;
        qkv_status st = qkv_dataset_get(d, i, &ex);
        if (st) return st;
        for (int64_t s = 0; s < ex.src_len; s++)
            in->word_count[ex.src[s]]++;
    }
    return QKV_OK;
}

void enc_input_free(enc_input *in) {
    if (in->owns_words) qkv_vocab_free(in->words);
    for (int k = 0; k < QKV_FEAT_COUNT; k++)
        qkv_vocab_free(in->feat[k]);
    free(in->word_count);
    memset(in, 0, sizeof *in);
}

/* ---- encoding -------------------------------------------------------------------------------- */

static qkv_status token_ids(const enc_input *in, strbuf *sb, const char *tok, size_t len,
                            int32_t *word, int32_t *feats) {
    if (word) {
        const int32_t id = qkv_vocab_find(in->words, tok, len);
        *word = id >= 0 ? id : QKV_VOCAB_UNK;
    }
    for (int k = 0; k < in->s.n_features; k++) {
        size_t n = 0;
        qkv_status st = feature_of(sb, in->s.features[k], tok, len, &n);
        if (st) return st;
        const int32_t id = qkv_vocab_find(in->feat[k], sb->p, n);
        feats[k] = id >= 0 ? id : QKV_VOCAB_UNK;
    }
    return QKV_OK;
}

qkv_status enc_input_token(const enc_input *in, const char *tok, size_t len, int32_t *word,
                           int32_t *feats) {
    strbuf sb = {NULL, 0};
    qkv_status st = token_ids(in, &sb, tok, len, word, feats);
    free(sb.p);
    return st;
}

qkv_status enc_input_encode(const enc_input *in, const qkv_corpus *c, enc_feats *out) {
    memset(out, 0, sizeof *out);
    const int64_t n = qkv_corpus_size(c), F = in->s.n_features;
    out->n = n;
    out->start = malloc(sizeof *out->start * (size_t)(n + 1));
    if (!out->start) return qkv_set_error(QKV_ERR_OOM, "out of memory");
    out->start[0] = 0;
    for (int64_t i = 0; i < n; i++)
        out->start[i + 1] = out->start[i] + qkv_corpus_length(c, i, QKV_FIELD_SRC);
    out->ids = malloc(sizeof *out->ids * (size_t)(out->start[n] * F + 1));
    if (!out->ids) {
        enc_feats_free(out);
        return qkv_set_error(QKV_ERR_OOM, "out of memory");
    }
    strbuf sb = {NULL, 0};
    qkv_status st = QKV_OK;
    for (int64_t i = 0; i < n && !st && F > 0; i++)
        for (int64_t k = 0; k < out->start[i + 1] - out->start[i] && !st; k++) {
            size_t len = 0;
            const char *tok = qkv_corpus_symbol(c, i, QKV_FIELD_SRC, k, &len);
            st = token_ids(in, &sb, tok, len, NULL, out->ids + (out->start[i] + k) * F);
        }
    free(sb.p);
    if (st) enc_feats_free(out);
    return st;
}

void enc_feats_free(enc_feats *f) {
    free(f->start);
    free(f->ids);
    memset(f, 0, sizeof *f);
}

/* ---- batches ----------------------------------------------------------------------------------
 */

static bool reserve(int32_t **p, size_t *cap, size_t n) {
    if (n <= *cap) return true;
    int32_t *g = realloc(*p, sizeof *g * n);
    if (!g) return false;
    *p = g;
    *cap = n;
    return true;
}

int32_t *enc_batch_labels(enc_batch_buf *buf, size_t n) {
    return reserve(&buf->labels, &buf->cap_labels, n ? n : 1) ? buf->labels : NULL;
}

void enc_batch_buf_free(enc_batch_buf *buf) {
    free(buf->src);
    free(buf->feats);
    free(buf->labels);
    memset(buf, 0, sizeof *buf);
}

qkv_status enc_input_batch(const enc_input *in, const enc_feats *f, const qkv_batch *b,
                           const uint64_t *train_seed, enc_batch_buf *buf, const int32_t **src,
                           const int32_t **feats) {
    const int64_t B = b->rows, S = b->src_cols, F = in->s.n_features;
    if (!reserve(&buf->src, &buf->cap_src, (size_t)(B * S)) ||
        !reserve(&buf->feats, &buf->cap_feats, (size_t)(B * S * F + 1)))
        return qkv_set_error(QKV_ERR_OOM, "out of memory");
    memcpy(buf->src, b->src, sizeof *buf->src * (size_t)(B * S));
    int lower = -1;
    for (int k = 0; k < F; k++)
        if (in->s.features[k] == QKV_FEAT_LOWER) lower = k;
    for (int64_t r = 0; r < B; r++) {
        const int64_t e = b->example[r], len = b->src_len[r];
        int32_t *fr = buf->feats + r * S * F;
        if (F > 0) {
            memcpy(fr, f->ids + f->start[e] * F, sizeof *fr * (size_t)(len * F));
            memset(fr + len * F, 0, sizeof *fr * (size_t)((S - len) * F)); /* padding: <pad> */
        }
        if (!train_seed || !(in->s.word_dropout > 0) || !in->word_count) continue;
        for (int64_t s = 0; s < len; s++) {
            int32_t *w = &buf->src[r * S + s];
            if (*w < QKV_VOCAB_RESERVED) continue;
            const double alpha = in->s.word_dropout,
                         p = alpha / (alpha + (double)in->word_count[*w]);
            const uint64_t index = ((uint64_t)b->index << 32) | (uint64_t)(r * S + s);
            if (qkv_rng_uniform(*train_seed, b->epoch, WORD_DROPOUT_STREAM, index) < p) {
                *w = QKV_VOCAB_UNK;
                if (lower >= 0) fr[s * F + lower] = QKV_VOCAB_UNK;
            }
        }
    }
    *src = buf->src;
    *feats = F > 0 ? buf->feats : NULL;
    return QKV_OK;
}

/* ---- forward ----------------------------------------------------------------------------------
 */

qkv_tensor *enc_logits(qkv_ctx *ctx, const qkv_model *m, int64_t B, int64_t S, const int32_t *src,
                       const int32_t *feats, qkv_tensor **weights_out) {
    qkv_tensor *s = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, S}, src);
    qkv_tensor *f =
        feats ? qkv_tensor_from(ctx, QKV_I32, 3, (int64_t[]){B, S, m->cfg.n_features}, feats)
              : NULL;
    return qkv_model_classify_features(ctx, m, s, f, weights_out);
}

qkv_status enc_forward_all(const qkv_model *m, const enc_input *in, const qkv_dataset *d,
                           const enc_feats *f, int64_t max_tokens, enc_logits_fn fn, void *user) {
    qkv_batch_opts bo =
        qkv_batch_default_opts(max_tokens > m->cfg.max_len ? max_tokens : m->cfg.max_len);
    bo.shuffle = false;
    qkv_batcher *batcher = NULL;
    qkv_ctx *ctx = NULL;
    enc_batch_buf buf;
    memset(&buf, 0, sizeof buf);
    qkv_ctx_params cp = qkv_ctx_default_params();
    qkv_status st = qkv_batcher_new(d, &bo, &batcher);
    if (!st) st = qkv_ctx_new(&cp, &ctx);
    if (!st) {
        qkv_ctx_set_grad_enabled(ctx, false);
        qkv_ctx_set_training(ctx, false);
    }
    const int64_t n = st ? 0 : qkv_batcher_num_batches(batcher);
    for (int64_t i = 0; i < n && !st; i++) {
        qkv_batch b;
        const int32_t *src = NULL, *feats = NULL;
        if ((st = qkv_batcher_next(batcher, &b)) ||
            (st = enc_input_batch(in, f, &b, NULL, &buf, &src, &feats)))
            break;
        qkv_ctx_reset(ctx);
        qkv_tensor *logits = enc_logits(ctx, m, b.rows, b.src_cols, src, feats, NULL);
        if ((st = qkv_ctx_status(ctx))) break;
        st = fn(user, &b, logits);
    }
    enc_batch_buf_free(&buf);
    qkv_ctx_free(ctx);
    qkv_batcher_free(batcher);
    return st;
}

int32_t enc_argmax(const qkv_real *logits, int64_t K) {
    int32_t best = QKV_VOCAB_RESERVED;
    for (int32_t k = QKV_VOCAB_RESERVED + 1; k < K; k++)
        if (logits[k] > logits[best]) best = k;
    return best;
}

double enc_label_probability(const qkv_real *x, int64_t K, int32_t id) {
    double max = -INFINITY, sum = 0;
    for (int64_t k = QKV_VOCAB_RESERVED; k < K; k++)
        max = fmax(max, (double)x[k]);
    for (int64_t k = QKV_VOCAB_RESERVED; k < K; k++)
        sum += exp((double)x[k] - max);
    return exp((double)x[id] - max) / sum;
}
