/*
 * dataset.c: a corpus encoded into int32 ids, one (source, target) pair of id sequences per
 * example, stored back to back per field with offset arrays (example i's source is
 * src[src_off[i] .. src_off[i + 1])).
 *
 * A field is encoded with a vocabulary (unknown symbols -> <unk>, or an error when strict) or,
 * with a NULL vocabulary, read as decimal integers that are the ids themselves.
 */
#include "data_internal.h"

#include <stdlib.h>
#include <string.h>

struct qkv_dataset {
    char *name;
    int64_t n;
    int64_t *line;   /* (n) */
    int64_t *off[2]; /* (n + 1) per field */
    int32_t *ids[2]; /* per field: all ids back to back */
    int64_t unknowns[2];
};

static const char *const field_name[2] = {"source", "target"};

/* The line of symbol k of example i: a tagged corpus has one token per line. */
static int64_t symbol_line(const qkv_corpus *c, int64_t i, int64_t k) {
    int64_t line = qkv_corpus_line(c, i);
    return qkv_corpus_kind_of(c) == QKV_CORPUS_TAGGED ? line + k : line;
}

static qkv_status encode_field(qkv_dataset *d, const qkv_corpus *c, int field, const qkv_vocab *v,
                               bool strict) {
    int64_t total = 0;
    for (int64_t i = 0; i < d->n; i++)
        total += qkv_corpus_length(c, i, field);
    d->ids[field] = malloc((size_t)(total ? total : 1) * sizeof(int32_t));
    if (!d->ids[field]) return QKV_ERROR(QKV_ERR_OOM, "qkv_dataset_encode: out of memory");
    int64_t at = 0;
    char q[200];
    for (int64_t i = 0; i < d->n; i++) {
        d->off[field][i] = at;
        int64_t m = qkv_corpus_length(c, i, field);
        for (int64_t k = 0; k < m; k++) {
            size_t len;
            const char *s = qkv_corpus_symbol(c, i, field, k, &len);
            int32_t id;
            if (v) {
                qkv_status st =
                    qkv_vocab_lookup(v, s, len, strict, d->name, symbol_line(c, i, k), &id);
                if (st) return st;
                if (id == QKV_VOCAB_UNK && qkv_vocab_find(v, s, len) < 0) d->unknowns[field]++;
            } else {
                int64_t x;
                if (!qkv__parse_uint(s, len, INT32_MAX, &x))
                    return QKV_ERROR(QKV_ERR_FORMAT,
                                     "%s:%lld: %s symbol %s is not a decimal integer in [0, "
                                     "2^31 - 1] (the %s has no vocabulary: its symbols are ids)",
                                     d->name, (long long)symbol_line(c, i, k), field_name[field],
                                     qkv__quote(q, sizeof q, s, len), field_name[field]);
                id = (int32_t)x;
            }
            d->ids[field][at++] = id;
        }
    }
    d->off[field][d->n] = at;
    return QKV_OK;
}

qkv_status qkv_dataset_encode(const qkv_corpus *c, const qkv_vocab *src_vocab,
                              const qkv_vocab *tgt_vocab, bool strict, qkv_dataset **out) {
    if (!c || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_dataset_encode: NULL argument");
    *out = NULL;
    qkv_dataset *d = calloc(1, sizeof *d);
    if (!d) return QKV_ERROR(QKV_ERR_OOM, "qkv_dataset_encode: out of memory");
    const char *name = qkv_corpus_name(c);
    d->n = qkv_corpus_size(c);
    d->name = malloc(strlen(name) + 1);
    d->line = malloc((size_t)(d->n ? d->n : 1) * sizeof *d->line);
    d->off[0] = malloc((size_t)(d->n + 1) * sizeof(int64_t));
    d->off[1] = malloc((size_t)(d->n + 1) * sizeof(int64_t));
    qkv_status st = QKV_OK;
    if (!d->name || !d->line || !d->off[0] || !d->off[1]) {
        st = QKV_ERROR(QKV_ERR_OOM, "qkv_dataset_encode: out of memory");
    } else {
        strcpy(d->name, name);
        for (int64_t i = 0; i < d->n; i++)
            d->line[i] = qkv_corpus_line(c, i);
        st = encode_field(d, c, QKV_FIELD_SRC, src_vocab, strict);
        if (!st) st = encode_field(d, c, QKV_FIELD_TGT, tgt_vocab, strict);
    }
    if (st) {
        qkv_dataset_free(d);
        return st;
    }
    *out = d;
    return QKV_OK;
}

void qkv_dataset_free(qkv_dataset *d) {
    if (!d) return;
    free(d->name);
    free(d->line);
    for (int f = 0; f < 2; f++) {
        free(d->off[f]);
        free(d->ids[f]);
    }
    free(d);
}

int64_t qkv_dataset_size(const qkv_dataset *d) {
    return d ? d->n : 0;
}
const char *qkv_dataset_name(const qkv_dataset *d) {
    return d ? d->name : NULL;
}

qkv_status qkv_dataset_get(const qkv_dataset *d, int64_t i, qkv_example *out) {
    if (!d || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_dataset_get: NULL argument");
    if (i < 0 || i >= d->n)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_dataset_get: %s: example %lld out of range [0, %lld)", d->name,
                         (long long)i, (long long)d->n);
    out->src = d->ids[0] + d->off[0][i];
    out->src_len = d->off[0][i + 1] - d->off[0][i];
    out->tgt = d->ids[1] + d->off[1][i];
    out->tgt_len = d->off[1][i + 1] - d->off[1][i];
    out->line = d->line[i];
    return QKV_OK;
}

int64_t qkv_dataset_unknowns(const qkv_dataset *d, int field) {
    if (!d || (field != QKV_FIELD_SRC && field != QKV_FIELD_TGT)) return 0;
    return d->unknowns[field];
}
