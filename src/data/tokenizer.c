/*
 * tokenizer.c: the table of tokenizers and the qkv_tokenizer API (qkv_tokenizer.h). A tokenizer is
 * an ops table (data_internal.h) and, for one that learns a model (subwords), its state. Adding a
 * tokenizer is its file (split; join and loading its model when it has them), a line in `table`
 * below, and its line in QKV_TOKENIZER_KIND_VALUES (qkv_enums.h: the enum constant and its name).
 */
#include "data_internal.h"

#include "qkv/qkv_registry.h"

#include <stdlib.h>
#include <string.h>

/* Every tokenizer by its kind; those that take no model file are also the shared instances
 * (qkv_tokenizer_shared). */
static const qkv_tokenizer table[] = {
    [QKV_TOKENIZER_CHARS] = {&qkv__tokenizer_chars, NULL},
    [QKV_TOKENIZER_TOKENS] = {&qkv__tokenizer_tokens, NULL},
    [QKV_TOKENIZER_WORDS] = {&qkv__tokenizer_words, NULL},
    [QKV_TOKENIZER_BPE] = {&qkv__tokenizer_bpe, NULL},
};

#define N_KINDS (sizeof table / sizeof *table)

const qkv_tokenizer *qkv_tokenizer_shared(qkv_tokenizer_kind kind) {
    return (unsigned)kind < N_KINDS && table[kind].ops && !table[kind].ops->load ? &table[kind] : NULL;
}

bool qkv_tokenizer_takes_model(qkv_tokenizer_kind kind) {
    return (unsigned)kind < N_KINDS && table[kind].ops && table[kind].ops->load;
}

qkv_status qkv_tokenizer_new(qkv_tokenizer_kind kind, const char *model_path, qkv_tokenizer **out) {
    if (!out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_tokenizer_new: NULL argument");
    *out = NULL;
    if ((unsigned)kind >= N_KINDS || !table[kind].ops)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_tokenizer_new: unknown tokenizer kind %d", (int)kind);
    const qkv__tokenizer_ops *ops = table[kind].ops;
    const char *name = qkv_registry_name(QKV_REGISTRY_TOKENIZER, (int)kind);
    if (model_path && !ops->load)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "tokenizer '%s' takes no model file (given %.200s)", name, model_path);
    if (!model_path && ops->load)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "tokenizer '%s' needs its model file (qkv tokenizer learn writes one)",
                         name);
    qkv_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return QKV_ERROR(QKV_ERR_OOM, "qkv_tokenizer_new: out of memory");
    t->ops = ops;
    if (ops->load) {
        qkv_status st = ops->load(model_path, &t->state);
        if (st) {
            free(t);
            return st;
        }
    }
    *out = t;
    return QKV_OK;
}

qkv_status qkv_tokenizer_from_name(const char *name, const char *model_path, qkv_tokenizer **out) {
    if (out) *out = NULL;
    int kind;
    qkv_status st = qkv_registry_parse(QKV_REGISTRY_TOKENIZER, name, &kind);
    return st ? st : qkv_tokenizer_new((qkv_tokenizer_kind)kind, model_path, out);
}

void qkv_tokenizer_free(qkv_tokenizer *t) {
    for (size_t i = 0; i < N_KINDS; i++)
        if (t == &table[i]) return; /* a shared instance lives forever */
    if (t && t->state) t->ops->free_state(t->state);
    free(t);
}

qkv_tokenizer_kind qkv_tokenizer_kind_of(const qkv_tokenizer *t) {
    return t ? t->ops->kind : QKV_TOKENIZER_CHARS;
}

const char *qkv_tokenizer_name(const qkv_tokenizer *t) {
    return t ? qkv_registry_name(QKV_REGISTRY_TOKENIZER, (int)t->ops->kind) : NULL;
}

const char *qkv_tokenizer_unit(const qkv_tokenizer *t) {
    return t ? t->ops->unit : NULL;
}

qkv_status qkv_tokenizer_split(const qkv_tokenizer *t, const char *text, size_t len, const char *what,
                               qkv_symbol_fn emit, void *ctx) {
    if (!t || (!text && len) || !emit) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_tokenizer_split: NULL argument");
    return len ? t->ops->split(t, text, len, what ? what : "text", emit, ctx) : QKV_OK;
}

qkv_status qkv_tokenizer_add_fallback(const qkv_tokenizer *t, qkv_vocab *v) {
    if (!t || !v) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_tokenizer_add_fallback: NULL argument");
    return t->ops->add_fallback ? t->ops->add_fallback(t, v) : QKV_OK;
}

static qkv_status count_one(void *ctx, size_t off, size_t len, const char *sym, size_t sym_len) {
    (void)off, (void)len, (void)sym, (void)sym_len;
    ++*(int64_t *)ctx;
    return QKV_OK;
}

int64_t qkv_tokenizer_count(const qkv_tokenizer *t, const char *text, size_t len) {
    int64_t n = 0;
    return qkv_tokenizer_split(t, text, len, NULL, count_one, &n) ? -1 : n;
}

qkv_status qkv_tokenizer_join(const qkv_tokenizer *t, const char *const *syms, const size_t *lens, int64_t n,
                              char *out, size_t size, size_t *out_len) {
    if (!t || n < 0 || (n && (!syms || !lens)) || (!out && size))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_tokenizer_join: bad argument");
    for (int64_t i = 0; i < n; i++)
        if (!syms[i] && lens[i]) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_tokenizer_join: NULL symbol %lld", (long long)i);
    qkv__buf text = {0};
    qkv_status st = QKV_OK;
    if (t->ops->join) {
        st = t->ops->join(t, syms, lens, n, &text);
    } else {
        for (int64_t i = 0; i < n; i++) {
            if (i) qkv__buf_str(&text, t->ops->separator);
            qkv__buf_add(&text, syms[i], lens[i]);
        }
    }
    if (!st && text.oom) st = QKV_ERROR(QKV_ERR_OOM, "qkv_tokenizer_join: out of memory");
    if (!st) {
        if (size) { /* what fits before the NUL */
            const size_t k = text.n < size ? text.n : size - 1;
            if (k) memcpy(out, text.p, k);
            out[k] = '\0';
        }
        if (out_len) *out_len = text.n;
    }
    qkv__buf_free(&text);
    return st;
}
