/*
 * bpe_model.c: the byte-pair-encoding model (bpe.h): its symbols and merges, and its file.
 *
 * The file is UTF-8 text, one item per line ('\n' ends):
 *
 *   #qkv-bpe 1
 *   #byte-fallback: yes                 or no
 *   #alphabet: abcdefghijklmnopqrstu...  the characters of the alphabet other than the marker,
 *                                        back to back (a TAB among them is a character)
 *   #merges: 3                           the number of lines that follow
 *   ▁ t                                  a merge: left and right symbol, one space between; line
 *   h e                                  k of them has rank k - 1 (applied first)
 *   ▁t he
 *
 * A merge names symbols that exist before it: characters of the alphabet (the marker "▁"
 * included) or what an earlier merge made. The loader refuses anything else, with the line: a
 * file cut short, a merge of a symbol it never made (a merges file of another alphabet), a
 * duplicate, a byte symbol, a space, a carriage return, invalid UTF-8.
 */
#include "bpe.h"

#include <stdio.h>
#include <stdlib.h>

/* A model file larger than this is refused before it is read. */
#define MAX_FILE_BYTES ((uint64_t)1 << 30)
#define MAX_MERGES 10000000

/* ---- strtab (hashed with qkv_fnv1a32, as the vocabulary is) ---- */

int32_t qkv__strtab_find(const qkv__strtab *t, const char *s, size_t len) {
    if (!t->slot) return -1;
    for (uint32_t i = qkv_fnv1a32(s, len) & t->mask;; i = (i + 1) & t->mask) {
        const int32_t id = t->slot[i];
        if (id < 0) return -1;
        if (t->len[id] == len && !memcmp(t->text.p + t->off[id], s, len)) return id;
    }
}

static bool strtab_rehash(qkv__strtab *t, uint32_t slots) {
    int32_t *slot = malloc((size_t)slots * sizeof *slot);
    if (!slot) return false;
    for (uint32_t i = 0; i < slots; i++)
        slot[i] = -1;
    for (int32_t id = 0; id < t->n; id++) {
        uint32_t i = qkv_fnv1a32(t->text.p + t->off[id], t->len[id]) & (slots - 1);
        while (slot[i] >= 0)
            i = (i + 1) & (slots - 1);
        slot[i] = id;
    }
    free(t->slot);
    t->slot = slot;
    t->mask = slots - 1;
    return true;
}

int32_t qkv__strtab_add(qkv__strtab *t, const char *s, size_t len) {
    int32_t id = qkv__strtab_find(t, s, len);
    if (id >= 0) return id;
    if (t->n == INT32_MAX / 4 || len > UINT32_MAX) return -1;
    if (t->n == t->cap) {
        const int32_t cap = t->cap ? t->cap * 2 : 512;
        size_t *off = realloc(t->off, (size_t)cap * sizeof *off);
        if (off) t->off = off;
        uint32_t *ln = realloc(t->len, (size_t)cap * sizeof *ln);
        if (ln) t->len = ln;
        if (!off || !ln) return -1;
        t->cap = cap;
    }
    if ((uint32_t)(t->n + 1) * 2 > (t->slot ? t->mask + 1 : 0) &&
        !strtab_rehash(t, t->slot ? (t->mask + 1) * 2 : 1024))
        return -1;
    const size_t at = t->text.n;
    qkv__buf_add(&t->text, s, len);
    qkv__buf_ch(&t->text, '\0'); /* each string NUL-terminated; text.p is never NULL */
    if (t->text.oom) return -1;
    id = t->n++;
    t->off[id] = at;
    t->len[id] = (uint32_t)len;
    uint32_t i = qkv_fnv1a32(s, len) & t->mask;
    while (t->slot[i] >= 0)
        i = (i + 1) & t->mask;
    t->slot[i] = id;
    return id;
}

void qkv__strtab_free(qkv__strtab *t) {
    qkv__buf_free(&t->text);
    free(t->off);
    free(t->len);
    free(t->slot);
    memset(t, 0, sizeof *t);
}

/* ---- pairmap ---- */

static uint32_t pair_hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (uint32_t)key;
}

int32_t qkv__pairmap_get(const qkv__pairmap *m, int32_t left, int32_t right) {
    if (!m->key) return -1;
    const uint64_t key = qkv__pair_key(left, right);
    for (uint32_t i = pair_hash(key) & m->mask;; i = (i + 1) & m->mask) {
        if (m->key[i] == key) return m->val[i];
        if (m->key[i] == UINT64_MAX) return -1;
    }
}

static bool pairmap_grow(qkv__pairmap *m) {
    const uint32_t slots = m->key ? (m->mask + 1) * 2 : 1024;
    if (slots == 0) return false;
    uint64_t *key = malloc((size_t)slots * sizeof *key);
    int32_t *val = malloc((size_t)slots * sizeof *val);
    if (!key || !val) {
        free(key);
        free(val);
        return false;
    }
    for (uint32_t i = 0; i < slots; i++)
        key[i] = UINT64_MAX;
    for (uint32_t j = 0; m->key && j <= m->mask; j++) {
        if (m->key[j] == UINT64_MAX) continue;
        uint32_t i = pair_hash(m->key[j]) & (slots - 1);
        while (key[i] != UINT64_MAX)
            i = (i + 1) & (slots - 1);
        key[i] = m->key[j];
        val[i] = m->val[j];
    }
    free(m->key);
    free(m->val);
    m->key = key;
    m->val = val;
    m->mask = slots - 1;
    return true;
}

bool qkv__pairmap_put(qkv__pairmap *m, int32_t left, int32_t right, int32_t val) {
    if ((!m->key || (uint64_t)(m->n + 1) * 2 > (uint64_t)m->mask + 1) && !pairmap_grow(m)) return false;
    const uint64_t key = qkv__pair_key(left, right);
    uint32_t i = pair_hash(key) & m->mask;
    while (m->key[i] != UINT64_MAX && m->key[i] != key)
        i = (i + 1) & m->mask;
    if (m->key[i] == UINT64_MAX) m->n++;
    m->key[i] = key;
    m->val[i] = val;
    return true;
}

void qkv__pairmap_free(qkv__pairmap *m) {
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof *m);
}

/* ---- the model ---- */

static const char hex[] = "0123456789ABCDEF";

bool qkv__bpe_is_byte(const char *s, size_t len, unsigned *byte) {
    if (len != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return false;
    const char *hi = memchr(hex, s[3], 16), *lo = memchr(hex, s[4], 16);
    if (!hi || !lo || !s[3] || !s[4]) return false;
    if (byte) *byte = (unsigned)((hi - hex) * 16 + (lo - hex));
    return true;
}

qkv_status qkv__bpe_init(qkv__bpe *m, bool byte_fallback) {
    memset(m, 0, sizeof *m);
    m->byte_fallback = byte_fallback;
    for (unsigned b = 0; b < QKV_BPE_BYTES; b++) {
        const char spell[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        if (qkv__strtab_add(&m->sym, spell, 6) < 0) goto oom;
    }
    m->marker = qkv__strtab_add(&m->sym, QKV_BPE_MARKER, QKV_BPE_MARKER_LEN);
    if (m->marker < 0) goto oom;
    m->n_alphabet = 1;
    return QKV_OK;
oom:
    qkv__bpe_free(m);
    return QKV_ERROR(QKV_ERR_OOM, "BPE model: out of memory");
}

void qkv__bpe_free(qkv__bpe *m) {
    if (!m) return;
    qkv__strtab_free(&m->sym);
    qkv__pairmap_free(&m->rank);
    free(m->merge);
    memset(m, 0, sizeof *m);
}

qkv_status qkv__bpe_add_char(qkv__bpe *m, const char *c, size_t len) {
    if (m->n_merges || m->sym.n != QKV_BPE_BYTES + m->n_alphabet)
        return QKV_ERROR(QKV_ERR_STATE, "BPE model: a character added after the merges");
    if (qkv__strtab_add(&m->sym, c, len) < 0) return QKV_ERROR(QKV_ERR_OOM, "BPE model: out of memory");
    if (m->sym.n != QKV_BPE_BYTES + m->n_alphabet + 1)
        return QKV_ERROR(QKV_ERR_FORMAT, "BPE model: a character of the alphabet given twice");
    m->n_alphabet++;
    return QKV_OK;
}

qkv_status qkv__bpe_add_merge(qkv__bpe *m, int32_t left, int32_t right) {
    if (left < QKV_BPE_BYTES || right < QKV_BPE_BYTES || left >= m->sym.n || right >= m->sym.n)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "BPE model: a merge of a byte symbol or of no symbol");
    if (qkv__pairmap_get(&m->rank, left, right) >= 0)
        return QKV_ERROR(QKV_ERR_FORMAT, "BPE model: the same merge twice");
    if (m->n_merges == MAX_MERGES)
        return QKV_ERROR(QKV_ERR_FORMAT, "BPE model: more than %d merges", MAX_MERGES);
    size_t nl, nr;
    const char *l = qkv__strtab_str(&m->sym, left, &nl), *r = qkv__strtab_str(&m->sym, right, &nr);
    char stack[64], *cat = nl + nr <= sizeof stack ? stack : malloc(nl + nr);
    if (!cat) return QKV_ERROR(QKV_ERR_OOM, "BPE model: out of memory");
    memcpy(cat, l, nl); /* l and r point into sym's text, which the add below may move */
    memcpy(cat + nl, r, nr);
    qkv_status st = QKV_OK;
    if (qkv__bpe_is_byte(cat, nl + nr, NULL)) {
        st = QKV_ERROR(QKV_ERR_FORMAT, "BPE model: a merge that spells a byte symbol (%.6s)", cat);
        goto done;
    }
    int32_t result = qkv__strtab_add(&m->sym, cat, nl + nr);
    if ((m->n_merges & (m->n_merges - 1)) == 0) { /* 0, 1, 2, 4, ...: grow to twice */
        int32_t *g = realloc(m->merge, (size_t)(m->n_merges ? 2 * m->n_merges : 1) * 3 * sizeof *g);
        if (g) m->merge = g;
        else result = -1;
    }
    if (result < 0 || !qkv__pairmap_put(&m->rank, left, right, m->n_merges)) {
        st = QKV_ERROR(QKV_ERR_OOM, "BPE model: out of memory");
        goto done;
    }
    int32_t *row = m->merge + 3 * (size_t)m->n_merges++;
    row[0] = left, row[1] = right, row[2] = result;
done:
    if (cat != stack) free(cat);
    return st;
}

/* ---- the file ---- */

qkv_status qkv__bpe_save(const qkv__bpe *m, const char *path) {
    qkv__buf b = {0};
    qkv__buf_str(&b, "#qkv-bpe 1\n#byte-fallback: ");
    qkv__buf_str(&b, m->byte_fallback ? "yes" : "no");
    qkv__buf_str(&b, "\n#alphabet: ");
    for (int32_t id = QKV_BPE_BYTES; id < QKV_BPE_BYTES + m->n_alphabet; id++) {
        if (id == m->marker) continue;
        size_t n;
        const char *c = qkv__strtab_str(&m->sym, id, &n);
        qkv__buf_add(&b, c, n);
    }
    qkv__buf_str(&b, "\n#merges: ");
    qkv__buf_i64(&b, m->n_merges);
    qkv__buf_ch(&b, '\n');
    for (int32_t r = 0; r < m->n_merges; r++) {
        size_t nl, nr;
        const char *l = qkv__strtab_str(&m->sym, m->merge[3 * (size_t)r], &nl);
        const char *rt = qkv__strtab_str(&m->sym, m->merge[3 * (size_t)r + 1], &nr);
        qkv__buf_add(&b, l, nl);
        qkv__buf_ch(&b, ' ');
        qkv__buf_add(&b, rt, nr);
        qkv__buf_ch(&b, '\n');
    }
    qkv_status st = b.oom ? QKV_ERROR(QKV_ERR_OOM, "BPE model %s: out of memory", path)
                          : qkv__write_file_atomic("BPE model", path, b.p, b.n);
    qkv__buf_free(&b);
    return st;
}

/* The header line `key` at text[*pos]: its value (after "key") and length; NULL when the line
 * does not start with key. */
static const char *header(const char *text, size_t len, size_t *pos, const char *key, size_t *n) {
    if (*pos >= len) return NULL;
    size_t line_len;
    const char *line = qkv__take_line(text, len, pos, &line_len);
    const size_t k = strlen(key);
    if (line_len < k || memcmp(line, key, k)) return NULL;
    *n = line_len - k;
    return line + k;
}

/* s[0, n) has no invalid UTF-8, space, carriage return or NUL: NULL, or what it has. */
static const char *bad_text(const char *s, size_t n, size_t *at) {
    for (size_t i = 0; i < n;) {
        const int k = qkv__utf8_char_len((const unsigned char *)s + i, n - i);
        *at = i;
        if (k == 0) return "invalid UTF-8";
        if (s[i] == ' ') return "a space";
        if (s[i] == '\r') return "a carriage return (CRLF line ends?)";
        if (s[i] == '\0') return "a NUL byte";
        i += (size_t)k;
    }
    return NULL;
}

#define FAIL(line, ...)                                                                            \
    do {                                                                                           \
        char msg_[256];                                                                            \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);                                                  \
        st = QKV_ERROR(QKV_ERR_FORMAT, "BPE model %s:%lld: %s", name, (long long)(line), msg_);    \
        goto fail;                                                                                 \
    } while (0)

qkv_status qkv__bpe_parse(const char *text, size_t len, const char *name, qkv__bpe *m) {
    memset(m, 0, sizeof *m);
    qkv_status st;
    size_t pos = 0, n = 0;
    const char *v;
    char quoted[200];
    if (!(v = header(text, len, &pos, "#qkv-bpe ", &n)) || n != 1 || v[0] != '1')
        return QKV_ERROR(QKV_ERR_FORMAT,
                         "BPE model %s:1: not a BPE model of qkv (its first line is not '#qkv-bpe 1'; "
                         "qkv tokenizer learn writes one)", name);
    if (!(v = header(text, len, &pos, "#byte-fallback: ", &n)) ||
        !((n == 3 && !memcmp(v, "yes", 3)) || (n == 2 && !memcmp(v, "no", 2))))
        return QKV_ERROR(QKV_ERR_FORMAT, "BPE model %s:2: expected '#byte-fallback: yes' or '... no'", name);
    if ((st = qkv__bpe_init(m, n == 3))) return st;
    if (!(v = header(text, len, &pos, "#alphabet: ", &n))) FAIL(3, "expected '#alphabet: ' and the characters");
    for (size_t i = 0; i < n;) {
        const int k = qkv__utf8_char_len((const unsigned char *)v + i, n - i);
        if (k == 0) FAIL(3, "invalid UTF-8 in the alphabet, at its byte %zu", i + 1);
        if (v[i] == ' ' || qkv__bpe_always_bytes(v + i, k))
            FAIL(3, "the alphabet has %s, which is never a character of it",
                 qkv__quote(quoted, sizeof quoted, v + i, (size_t)k));
        if (qkv__strtab_find(&m->sym, v + i, (size_t)k) >= 0)
            FAIL(3, "the alphabet has %s twice", qkv__quote(quoted, sizeof quoted, v + i, (size_t)k));
        if ((st = qkv__bpe_add_char(m, v + i, (size_t)k))) goto fail;
        i += (size_t)k;
    }
    int64_t count;
    if (!(v = header(text, len, &pos, "#merges: ", &n)) || !qkv__parse_uint(v, n, MAX_MERGES, &count))
        FAIL(4, "expected '#merges: N', N the number of merges that follow (at most %d)", MAX_MERGES);
    int64_t line_no = 4;
    for (int64_t r = 0; r < count; r++) {
        line_no++;
        if (pos >= len)
            FAIL(line_no, "the file ends after %lld of its %lld merges (cut short?)", (long long)r, (long long)count);
        size_t line_len, at;
        const char *line = qkv__take_line(text, len, &pos, &line_len);
        const char *sp = memchr(line, ' ', line_len);
        if (!sp || sp == line || sp == line + line_len - 1)
            FAIL(line_no, "expected a merge: two symbols with one space between (got %s)",
                 qkv__quote(quoted, sizeof quoted, line, line_len));
        const size_t nl = (size_t)(sp - line), nr = line_len - nl - 1;
        const char *bad = bad_text(line, nl, &at);
        if (!bad) {
            bad = bad_text(sp + 1, nr, &at);
            at += nl + 1;
        }
        if (bad) FAIL(line_no, "%s at byte %zu of the merge", bad, at + 1);
        const int32_t left = qkv__strtab_find(&m->sym, line, nl), right = qkv__strtab_find(&m->sym, sp + 1, nr);
        for (int side = 0; side < 2; side++) {
            const int32_t id = side ? right : left;
            const char *s = side ? sp + 1 : line;
            const size_t sn = side ? nr : nl;
            if (id < 0)
                FAIL(line_no, "%s is neither a character of the alphabet nor made by an earlier merge "
                              "(a merges file of another alphabet, or out of order?)",
                     qkv__quote(quoted, sizeof quoted, s, sn));
            if (id < QKV_BPE_BYTES) FAIL(line_no, "%s is a byte symbol, which never merges", qkv__quote(quoted, sizeof quoted, s, sn));
        }
        if (nl + nr == 6) {
            char cat[6];
            memcpy(cat, line, nl);
            memcpy(cat + nl, sp + 1, nr);
            if (qkv__bpe_is_byte(cat, 6, NULL)) FAIL(line_no, "the merge spells a byte symbol (%.6s)", cat);
        }
        if (qkv__pairmap_get(&m->rank, left, right) >= 0)
            FAIL(line_no, "the merge %s is given twice", qkv__quote(quoted, sizeof quoted, line, line_len));
        if ((st = qkv__bpe_add_merge(m, left, right))) goto fail;
    }
    if (pos < len) FAIL(line_no + 1, "more lines than the %lld merges the header announces", (long long)count);
    return QKV_OK;
fail:
    qkv__bpe_free(m);
    return st;
}

qkv_status qkv__bpe_load(const char *path, qkv__bpe *m) {
    memset(m, 0, sizeof *m);
    char *text;
    size_t len;
    qkv_status st = qkv__read_regular("BPE model", path, MAX_FILE_BYTES, &text, &len);
    if (st) return st;
    st = qkv__bpe_parse(text, len, path, m);
    free(text);
    return st;
}
