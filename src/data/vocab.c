/*
 * vocab.c: the vocabulary: symbols <-> int32 ids, with the reserved ids 0 <pad>, 1 <unk>,
 * 2 <bos>, 3 <eos>.
 *
 * Symbols live in one array indexed by id (NUL-terminated copies); lookups go through an
 * open-addressing hash table (FNV-1a, linear probing, load factor <= 1/2) that maps a symbol to
 * its id. The text file format is one symbol per line, line k = id k - 1 (see qkv_data.h).
 */
#include "data_internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const reserved[QKV_VOCAB_RESERVED] = {"<pad>", "<unk>", "<bos>", "<eos>"};

int32_t qkv__vocab_reserved_id(const char *s, size_t len) {
    for (int32_t id = 0; id < QKV_VOCAB_RESERVED; id++)
        if (strlen(reserved[id]) == len && !memcmp(reserved[id], s, len)) return id;
    return -1;
}

struct qkv_vocab {
    int32_t n, cap; /* symbols, capacity of sym / len / hash */
    char **sym;     /* (n) NUL-terminated */
    size_t *len;    /* (n) */
    uint32_t *hash; /* (n) fnv1a32 of each symbol */
    int32_t *table; /* (mask + 1) slots: an id, or -1 for an empty slot */
    uint32_t mask;
};

static int32_t find(const qkv_vocab *v, const char *s, size_t len, uint32_t h) {
    for (uint32_t i = h & v->mask;; i = (i + 1) & v->mask) {
        int32_t id = v->table[i];
        if (id < 0) return -1;
        if (v->hash[id] == h && v->len[id] == len && memcmp(v->sym[id], s, len) == 0) return id;
    }
}

static void insert_slot(qkv_vocab *v, int32_t id) {
    uint32_t i = v->hash[id] & v->mask;
    while (v->table[i] >= 0)
        i = (i + 1) & v->mask;
    v->table[i] = id;
}

/* A table of `slots` (a power of two) slots holding every id. */
static bool rebuild_table(qkv_vocab *v, uint32_t slots) {
    int32_t *t = malloc((size_t)slots * sizeof *t);
    if (!t) return false;
    free(v->table);
    v->table = t;
    v->mask = slots - 1;
    for (uint32_t i = 0; i < slots; i++)
        t[i] = -1;
    for (int32_t id = 0; id < v->n; id++)
        insert_slot(v, id);
    return true;
}

static bool valid_symbol(const char *s, size_t len) {
    if (len == 0) return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] == '\n' || s[i] == '\r' || s[i] == '\0') return false;
    return true;
}

/* Append a symbol known to be absent. */
static qkv_status append(qkv_vocab *v, const char *s, size_t len, uint32_t h) {
    if (v->n == INT32_MAX) return QKV_ERROR(QKV_ERR_OOM, "qkv_vocab_add: the vocabulary is full");
    if (v->n == v->cap) {
        int32_t cap = v->cap > INT32_MAX / 2 ? INT32_MAX : v->cap * 2;
        char **sym = realloc(v->sym, (size_t)cap * sizeof *sym);
        if (sym) v->sym = sym;
        size_t *ln = realloc(v->len, (size_t)cap * sizeof *ln);
        if (ln) v->len = ln;
        uint32_t *hs = realloc(v->hash, (size_t)cap * sizeof *hs);
        if (hs) v->hash = hs;
        if (!sym || !ln || !hs) return QKV_ERROR(QKV_ERR_OOM, "qkv_vocab_add: out of memory");
        v->cap = cap;
    }
    if ((uint64_t)(v->n + 1) * 2 > (uint64_t)v->mask + 1) {
        if (v->mask >= 0x7FFFFFFFu || !rebuild_table(v, (v->mask + 1) * 2))
            return QKV_ERROR(QKV_ERR_OOM, "qkv_vocab_add: out of memory");
    }
    char *copy = malloc(len + 1);
    if (!copy) return QKV_ERROR(QKV_ERR_OOM, "qkv_vocab_add: out of memory");
    memcpy(copy, s, len);
    copy[len] = '\0';
    int32_t id = v->n++;
    v->sym[id] = copy;
    v->len[id] = len;
    v->hash[id] = h;
    insert_slot(v, id);
    return QKV_OK;
}

qkv_status qkv_vocab_new(qkv_vocab **out) {
    if (!out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_vocab_new: NULL argument");
    *out = NULL;
    qkv_vocab *v = calloc(1, sizeof *v);
    if (!v) return QKV_ERROR(QKV_ERR_OOM, "qkv_vocab_new: out of memory");
    v->cap = 16;
    v->sym = malloc((size_t)v->cap * sizeof *v->sym);
    v->len = malloc((size_t)v->cap * sizeof *v->len);
    v->hash = malloc((size_t)v->cap * sizeof *v->hash);
    if (!v->sym || !v->len || !v->hash || !rebuild_table(v, 32)) {
        qkv_vocab_free(v);
        return QKV_ERROR(QKV_ERR_OOM, "qkv_vocab_new: out of memory");
    }
    for (int i = 0; i < QKV_VOCAB_RESERVED; i++) {
        size_t len = strlen(reserved[i]);
        qkv_status st = append(v, reserved[i], len, qkv_fnv1a32(reserved[i], len));
        if (st) {
            qkv_vocab_free(v);
            return st;
        }
    }
    *out = v;
    return QKV_OK;
}

void qkv_vocab_free(qkv_vocab *v) {
    if (!v) return;
    for (int32_t i = 0; i < v->n; i++)
        free(v->sym[i]);
    free(v->sym);
    free(v->len);
    free(v->hash);
    free(v->table);
    free(v);
}

int32_t qkv_vocab_size(const qkv_vocab *v) {
    return v ? v->n : 0;
}

qkv_status qkv_vocab_add(qkv_vocab *v, const char *sym, size_t len, int32_t *id) {
    if (!v || (!sym && len)) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_vocab_add: NULL argument");
    if (!valid_symbol(sym, len)) {
        char q[200];
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_vocab_add: invalid symbol %s (empty, or with a newline, carriage "
                         "return or NUL byte)",
                         qkv__quote(q, sizeof q, sym ? sym : "", len));
    }
    uint32_t h = qkv_fnv1a32(sym, len);
    int32_t k = find(v, sym, len, h);
    if (k < 0) {
        qkv_status st = append(v, sym, len, h);
        if (st) return st;
        k = v->n - 1;
    }
    if (id) *id = k;
    return QKV_OK;
}

int32_t qkv_vocab_find(const qkv_vocab *v, const char *sym, size_t len) {
    if (!v || (!sym && len)) return -1;
    return find(v, sym ? sym : "", len, qkv_fnv1a32(sym, len));
}

const char *qkv_vocab_symbol(const qkv_vocab *v, int32_t id) {
    if (!v || id < 0 || id >= v->n) return NULL;
    return v->sym[id];
}

qkv_status qkv_vocab_lookup(const qkv_vocab *v, const char *sym, size_t len, bool strict,
                            const char *file, int64_t line, int32_t *id) {
    if (!v || !id || (!sym && len))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_vocab_lookup: NULL argument");
    int32_t k = qkv_vocab_find(v, sym, len);
    if (k >= 0) {
        *id = k;
        return QKV_OK;
    }
    if (!strict) {
        *id = QKV_VOCAB_UNK;
        return QKV_OK;
    }
    char q[200];
    return QKV_ERROR(QKV_ERR_FORMAT,
                     "%s:%lld: unknown symbol %s (not among the %d symbols of the vocabulary)",
                     file ? file : "<input>", (long long)line,
                     qkv__quote(q, sizeof q, sym ? sym : "", len), (int)v->n);
}

static int by_bytes(const void *pa, const void *pb) {
    const char *a = *(const char *const *)pa, *b = *(const char *const *)pb;
    return strcmp(a, b); /* symbols hold no NUL: byte order, a prefix first */
}

qkv_status qkv_vocab_sort(qkv_vocab *v) {
    if (!v) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_vocab_sort: NULL argument");
    int32_t m = v->n - QKV_VOCAB_RESERVED;
    if (m < 2) return QKV_OK;
    qsort(v->sym + QKV_VOCAB_RESERVED, (size_t)m, sizeof *v->sym, by_bytes);
    for (int32_t id = QKV_VOCAB_RESERVED; id < v->n; id++) {
        v->len[id] = strlen(v->sym[id]);
        v->hash[id] = qkv_fnv1a32(v->sym[id], v->len[id]);
    }
    if (!rebuild_table(v, v->mask + 1))
        return QKV_ERROR(QKV_ERR_OOM, "qkv_vocab_sort: out of memory");
    return QKV_OK;
}

qkv_status qkv_vocab_save(const qkv_vocab *v, const char *path) {
    if (!v || !path) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_vocab_save: NULL argument");
    qkv__buf b = {0};
    for (int32_t id = 0; id < v->n; id++) {
        qkv__buf_add(&b, v->sym[id], v->len[id]);
        qkv__buf_ch(&b, '\n');
    }
    qkv_status st = b.oom ? QKV_ERROR(QKV_ERR_OOM, "qkv_vocab_save: out of memory")
                          : qkv__write_file_atomic("qkv_vocab_save", path, b.p, b.n);
    qkv__buf_free(&b);
    return st;
}

qkv_status qkv_vocab_load(const char *path, qkv_vocab **out) {
    if (!path || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_vocab_load: NULL argument");
    *out = NULL;
    char *text;
    size_t size;
    qkv_status st = qkv__read_file("qkv_vocab_load", path, &text, &size);
    if (st) return st;
    qkv_vocab *v;
    st = qkv_vocab_new(&v);
    char q[200];
    int64_t line = 0;
    for (size_t pos = 0, len; !st && pos < size;) {
        const char *s = qkv__take_line(text, size, &pos, &len);
        line++;
        const char *bad = memchr(s, '\r', len)   ? "a carriage return (CRLF line ends?)"
                          : memchr(s, '\0', len) ? "a NUL byte"
                                                 : NULL;
        if (len == 0) {
            st = QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: empty line (a symbol is at least one byte)",
                           path, (long long)line);
        } else if (bad) {
            st = QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: %s in symbol %s", path, (long long)line, bad,
                           qkv__quote(q, sizeof q, s, len));
        } else if (line <= QKV_VOCAB_RESERVED) {
            const char *want = reserved[line - 1];
            if (len != strlen(want) || memcmp(s, want, len) != 0)
                st = QKV_ERROR(QKV_ERR_FORMAT,
                               "%s:%lld: expected the reserved symbol '%s' (id %lld), found %s",
                               path, (long long)line, want, (long long)(line - 1),
                               qkv__quote(q, sizeof q, s, len));
        } else {
            uint32_t h = qkv_fnv1a32(s, len);
            int32_t dup = find(v, s, len, h);
            if (dup >= 0)
                st = QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: duplicate symbol %s (also on line %lld)",
                               path, (long long)line, qkv__quote(q, sizeof q, s, len),
                               (long long)dup + 1);
            else
                st = append(v, s, len, h);
        }
    }
    if (!st && line < QKV_VOCAB_RESERVED)
        st = QKV_ERROR(QKV_ERR_FORMAT, "%s:%lld: missing the reserved symbol '%s' (id %lld)", path,
                       (long long)line + 1, reserved[line], (long long)line);
    free(text);
    if (st) {
        qkv_vocab_free(v);
        return st;
    }
    *out = v;
    return QKV_OK;
}

/* Tracked with a scratch vocabulary: ids in first-seen order, their counts alongside. */
qkv_status qkv_vocab_build(const qkv_corpus *c, int field, int64_t min_count, bool sorted,
                           qkv_vocab **out) {
    if (!c || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_vocab_build: NULL argument");
    if (field != QKV_FIELD_SRC && field != QKV_FIELD_TGT)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_vocab_build: field %d is neither source (0) "
                         "nor target (1)",
                         field);
    *out = NULL;
    qkv_vocab *seen, *v = NULL;
    qkv_status st = qkv_vocab_new(&seen);
    if (st) return st;
    int64_t *count = NULL, cap = 0;
    int64_t n = qkv_corpus_size(c);
    for (int64_t i = 0; i < n && !st; i++) {
        int64_t m = qkv_corpus_length(c, i, field);
        for (int64_t k = 0; k < m && !st; k++) {
            size_t len;
            const char *s = qkv_corpus_symbol(c, i, field, k, &len);
            int32_t id;
            st = qkv_vocab_add(seen, s, len, &id);
            if (st) break;
            if (id >= cap) {
                int64_t ncap = cap ? cap * 2 : 1024;
                int64_t *nc = realloc(count, (size_t)ncap * sizeof *nc);
                if (!nc) {
                    st = QKV_ERROR(QKV_ERR_OOM, "qkv_vocab_build: out of memory");
                    break;
                }
                memset(nc + cap, 0, (size_t)(ncap - cap) * sizeof *nc);
                count = nc;
                cap = ncap;
            }
            count[id]++;
        }
    }
    if (!st) st = qkv_vocab_new(&v);
    for (int32_t id = QKV_VOCAB_RESERVED; !st && id < seen->n; id++)
        if (count[id] >= min_count) st = append(v, seen->sym[id], seen->len[id], seen->hash[id]);
    if (!st && sorted) st = qkv_vocab_sort(v);
    free(count);
    qkv_vocab_free(seen);
    if (st) {
        qkv_vocab_free(v);
        return st;
    }
    *out = v;
    return QKV_OK;
}
