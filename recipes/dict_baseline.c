/*
 * dict_baseline.c: a word-for-word dictionary translation, the floor that a translation model
 * is compared with (`qkv data baseline mt-dict`, RESULTS.md): each English word is replaced by
 * one Spanish translation from the FreeDict English-Spanish dictionary (Debian
 * dict-freedict-eng-spa, FreeDict eng-spa 0.3.1: 5907 headwords from the Ergane word lists).
 *
 * Source: the dictionary in dictd's format (dictfmt; the .dict.dz gunzipped by
 * scripts/fetch_data.sh freedict, since dictzip is plain gzip with random-access tables):
 *   eng-spa.index   a line per entry: "headword<TAB>offset<TAB>length" (a fourth field, the
 *                   original headword of dictfmt --index-keep-orig, is ignored), offset and length
 *                   in dictd's base64 (A-Z a-z 0-9 + /, most significant digit first) locating the
 *                   entry in eng-spa.dict; the headword is the entry's headword lower-cased (ASCII)
 *                   without its punctuation ("X-rays" -> "xrays");
 *   eng-spa.dict    the entries: a first line "Headword /pronunciation/" (the pronunciation may be
 *                   missing), then the senses, one per line, numbered "1. " "2. " when there are
 *                   several, each a list of translations separated by ", ".
 * The "00database..." / "00-database-..." entries are dictd's metadata and are left out.
 *
 * A headword's translation: of the entries of a headword, the one whose headword is written as
 * the index writes it (lower case: "the" before "The" for The Hague), then the one with the
 * shortest pronunciation (the dictionary has multi-word entries truncated to their first word, e.g.
 * "a /ədei/ aldía", whose pronunciation spells the whole phrase), then the first in the index;
 * its first sense's first translation, with the annotations removed ("(...)", "[...]", "{...}",
 * "<...>" spans such as the gender mark "<f>"), blanks collapsed and trimmed; when that is empty,
 * the next translation of the sense, then of the next senses. An entry with nothing left is not
 * used.
 *
 * Translation of a text: words are maximal runs of ASCII letters and digits and the letters of
 * U+00C0 .. U+024F (but U+00D7, U+00F7), with an apostrophe (' or U+2019) inside a word joining its
 * two sides ("Lord's"); everything else (blanks, punctuation, other characters) is copied as it
 * is. A word is looked up as its key: lower case (ASCII and U+00C0 .. U+00DE), apostrophes
 * removed; when the key is not a headword, these forms of it are tried in order and the first
 * headword found is taken (the stem keeps at least two bytes):
 *   -ies -> -y, -es -> "", -s -> "" (not after s), -ied -> -y, -ed -> "", -ed -> -e,
 *   doubled consonant + ed -> the consonant once, -ing -> "", -ing -> -e, doubled consonant +
 *   ing -> the consonant once, and the King James Version's verb endings -eth and -est -> "" and
 *   -> -e ("cometh" -> "come")
 * (no Spanish inflection follows: the translation of the base is written). A word found is
 * replaced by its translation, whose first letter is made upper case (ASCII, U+00E0 .. U+00FE)
 * when the word's first letter is upper case; an unknown word is kept as it is. Deterministic.
 *
 * Reference: the FreeDict project, https://freedict.org (eng-spa, GPL-2.0-or-later); dictd's
 * formats: dictfmt(1), RFC 2229 (the DICT protocol).
 */
#include "recipes.h"
#include "data/data_internal.h"

#include <stdlib.h>
#include <string.h>

#define WHO "qkv_dict"
#define FAIL(...) QKV_ERROR(QKV_ERR_FORMAT, __VA_ARGS__)

typedef struct dict_entry {
    const char *kp;      /* keys.p + key, once the keys are all read */
    size_t key, key_len; /* in keys */
    size_t tr, tr_len;   /* in trs */
    int64_t order;       /* index line */
    int exact;           /* 1: the entry's headword is written as its key */
    size_t pron_len;     /* bytes of the pronunciation */
} dict_entry;

struct qkv_dict {
    qkv__buf keys, trs;
    dict_entry *e; /* sorted by key, one per key */
    int64_t n;
    size_t max_key;
};

void qkv_dict_free(qkv_dict *d) {
    if (!d) return;
    qkv__buf_free(&d->keys);
    qkv__buf_free(&d->trs);
    free(d->e);
    free(d);
}

int64_t qkv_dict_size(const qkv_dict *d) {
    return d ? d->n : 0;
}

/* ---- dictd's base64 numbers ---- */

/* s[0, n) as a number: 1 .. 10 digits (below 2^60). */
static bool b64_number(const char *s, size_t n, int64_t *out) {
    if (n == 0 || n > 10) return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        int k = qkv__base64_digit(s[i]);
        if (k < 0) return false;
        v = v * 64 + k;
    }
    *out = v;
    return true;
}

/* ---- characters ---- */

static bool is_blank(char c) {
    return c == ' ' || c == '\t';
}

/* The first problem of s[0, n): invalid UTF-8, or a control character other than TAB, '\n'
 * when newlines, and any when controls. Returns the byte's column (1-based) or 0 when none;
 * *utf8 tells which, *bad the byte. */
static size_t bad_byte(const char *s, size_t n, bool newlines, bool controls, bool *utf8,
                       unsigned char *bad) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            int k = qkv__utf8_char_len((const unsigned char *)s + i, n - i);
            if (!k) {
                *utf8 = true, *bad = c;
                return i + 1;
            }
            i += (size_t)k;
        } else if (!controls && ((c < 0x20 && c != '\t' && !(newlines && c == '\n')) || c == 0x7f)) {
            *utf8 = false, *bad = c;
            return i + 1;
        } else {
            i++;
        }
    }
    return 0;
}

/* The code point of the valid UTF-8 character at s[0, n) and its length *len. */
static uint32_t code_point(const unsigned char *s, size_t n, int *len) {
    int k = qkv__utf8_char_len(s, n);
    *len = k ? k : 1;
    if (k <= 1) return s[0];
    uint32_t cp = s[0] & (0xFF >> (k + 1));
    for (int i = 1; i < k; i++)
        cp = cp << 6 | (s[i] & 0x3F);
    return cp;
}

static bool is_word_cp(uint32_t cp) {
    return (cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') ||
           (cp >= 0xC0 && cp <= 0x24F && cp != 0xD7 && cp != 0xF7);
}

static bool is_apostrophe(uint32_t cp) {
    return cp == '\'' || cp == 0x2019;
}

static bool is_upper_cp(uint32_t cp) {
    return (cp >= 'A' && cp <= 'Z') || (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7);
}

/* ---- loading ---- */

/* The 1-based line of data at byte offset off. */
static int64_t line_at(const char *data, size_t off) {
    int64_t line = 1;
    for (size_t i = 0; i < off; i++)
        line += data[i] == '\n';
    return line;
}

/* The index's form of a headword: ASCII lower case, ASCII punctuation removed. */
static bool same_headword(const char *key, size_t nk, const char *hw, size_t nh) {
    size_t i = 0;
    for (size_t j = 0; j < nh; j++) {
        unsigned char c = (unsigned char)hw[j];
        if (c < 0x80 && !(c == ' ' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                          (c >= 'A' && c <= 'Z')))
            continue;
        if (c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
        if (i >= nk || (unsigned char)key[i] != c) return false;
        i++;
    }
    return i == nk;
}

/* Append to out the first translation of the sense s[0, n) with something left after the
 * annotations are removed; false when none has. */
static bool first_translation(const char *s, size_t n, qkv__buf *out) {
    size_t i = 0;
    while (i < n) {
        size_t end = i;
        int depth = 0;
        char close[8];
        size_t start = out->n;
        bool space = false;
        for (; end < n; end++) {
            char c = s[end];
            if (depth == 0 && c == ',') break;
            if (c == '(' || c == '[' || c == '{' || c == '<') {
                if (depth < 8) close[depth] = c == '(' ? ')' : c == '[' ? ']' : c == '{' ? '}' : '>';
                depth++;
                continue;
            }
            if (depth > 0) {
                if (depth <= 8 && c == close[depth - 1]) depth--;
                continue;
            }
            if (is_blank(c)) {
                space = true;
                continue;
            }
            if (space && out->n > start) qkv__buf_ch(out, ' ');
            space = false;
            qkv__buf_ch(out, c);
        }
        if (out->n > start) return true;
        i = end + 1;
    }
    return false;
}

typedef struct loader {
    const char *index_path, *dict_path;
    const char *dict;
    size_t dict_size;
    qkv_dict *d;
    size_t cap;
} loader;

/* The entry of index line `line`, headword key[0, nk), at dict[off, off + len). */
static qkv_status add_entry(loader *L, int64_t line, const char *key, size_t nk, size_t off,
                            size_t len) {
    char q[200], q2[200];
    const char *s = L->dict + off;
    bool utf8;
    unsigned char c;
    size_t col = bad_byte(s, len, true, false, &utf8, &c);
    if (col) {
        size_t at = off + col - 1, bol = at;
        while (bol > 0 && L->dict[bol - 1] != '\n')
            bol--;
        return FAIL("%s:%lld: %s (byte 0x%02X at column %zu) in the entry of %s (%s:%lld)",
                    L->dict_path, (long long)line_at(L->dict, at),
                    utf8 ? "invalid UTF-8" : "control character", c, at - bol + 1,
                    qkv__quote(q, sizeof q, key, nk), L->index_path, (long long)line);
    }
    /* the header: "Headword /pronunciation/" */
    const char *nl = memchr(s, '\n', len);
    size_t hl = nl ? (size_t)(nl - s) : len;
    size_t hw_len = hl, pron_len = 0;
    for (size_t i = 0; i + 1 < hl; i++)
        if (s[i] == ' ' && s[i + 1] == '/' && s[hl - 1] == '/' && hl - i >= 3) {
            hw_len = i;
            pron_len = hl - i - 3;
            break;
        }
    if (!same_headword(key, nk, s, hw_len))
        return FAIL("%s:%lld: the entry of %s (offset %zu, length %zu) starts with %s at %s:%lld, "
                    "another headword: is the index that of this dictionary?",
                    L->index_path, (long long)line, qkv__quote(q, sizeof q, key, nk), off, len,
                    qkv__quote(q2, sizeof q2, s, hl), L->dict_path,
                    (long long)line_at(L->dict, off));
    /* the senses */
    qkv_dict *d = L->d;
    size_t tr = d->trs.n;
    bool found = false, any_sense = false;
    for (size_t p = nl ? hl + 1 : len; p < len && !found;) {
        const char *ls = s + p, *le = memchr(ls, '\n', len - p);
        size_t ll = le ? (size_t)(le - ls) : len - p;
        p += ll + 1;
        size_t k = 0;
        while (k < ll && is_blank(ls[k]))
            k++;
        size_t num = k;
        while (num < ll && ls[num] >= '0' && ls[num] <= '9')
            num++;
        if (num > k && num + 1 < ll && ls[num] == '.' && ls[num + 1] == ' ') k = num + 2;
        if (k >= ll) continue;
        any_sense = true;
        found = first_translation(ls + k, ll - k, &d->trs);
    }
    if (!any_sense)
        return FAIL("%s:%lld: the entry of %s at %s:%lld has no translation (only %s): a wrong "
                    "length?",
                    L->index_path, (long long)line, qkv__quote(q, sizeof q, key, nk),
                    L->dict_path, (long long)line_at(L->dict, off),
                    qkv__quote(q2, sizeof q2, s, len));
    if (!found) return QKV_OK; /* annotations only: not used */
    if ((size_t)d->n == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 1024;
        dict_entry *e = realloc(d->e, cap * sizeof *e);
        if (!e) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
        d->e = e, L->cap = cap;
    }
    d->e[d->n++] = (dict_entry){.key = d->keys.n,
                                .key_len = nk,
                                .tr = tr,
                                .tr_len = d->trs.n - tr,
                                .order = line,
                                .exact = hw_len == nk && !memcmp(s, key, nk),
                                .pron_len = pron_len};
    qkv__buf_add(&d->keys, key, nk);
    if (nk > d->max_key) d->max_key = nk;
    return QKV_OK;
}

static int cmp_key(const dict_entry *a, const char *b, size_t nb) {
    size_t n = a->key_len < nb ? a->key_len : nb;
    int c = memcmp(a->kp, b, n);
    if (c) return c;
    return a->key_len < nb ? -1 : a->key_len > nb;
}

/* By key, then the preferred entry first. */
static int cmp_entry(const void *pa, const void *pb) {
    const dict_entry *a = pa, *b = pb;
    int c = cmp_key(a, b->kp, b->key_len);
    if (c) return c;
    if (a->exact != b->exact) return b->exact - a->exact;
    if (a->pron_len != b->pron_len) return a->pron_len < b->pron_len ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

static qkv_status read_index(loader *L, const char *index, size_t size) {
    char q[200], q2[200];
    int64_t line = 0;
    for (size_t pos = 0, len; pos < size;) {
        const char *s = qkv__take_line(index, size, &pos, &len);
        line++;
        bool utf8;
        unsigned char c;
        size_t col = bad_byte(s, len, false, false, &utf8, &c);
        if (col)
            return FAIL("%s:%lld: %s (byte 0x%02X at column %zu)", L->index_path,
                        (long long)line, utf8 ? "invalid UTF-8" : "control character", c, col);
        const char *t1 = memchr(s, '\t', len);
        const char *t2 = t1 ? memchr(t1 + 1, '\t', len - (size_t)(t1 + 1 - s)) : NULL;
        const char *t3 = t2 ? memchr(t2 + 1, '\t', len - (size_t)(t2 + 1 - s)) : NULL;
        size_t nk = t1 ? (size_t)(t1 - s) : 0;
        int64_t off, n;
        if (!t2 || nk == 0)
            return FAIL("%s:%lld: expected 'headword<TAB>offset<TAB>length' (dictd's index), got "
                        "%s",
                        L->index_path, (long long)line, qkv__quote(q, sizeof q, s, len));
        size_t end = t3 ? (size_t)(t3 - s) : len;
        if (!b64_number(t1 + 1, (size_t)(t2 - t1 - 1), &off) ||
            !b64_number(t2 + 1, end - (size_t)(t2 + 1 - s), &n))
            return FAIL("%s:%lld: offset or length of %s is not a dictd base64 number "
                        "(A-Z a-z 0-9 + /, at most 10 digits) in %s",
                        L->index_path, (long long)line, qkv__quote(q, sizeof q, s, nk),
                        qkv__quote(q2, sizeof q2, s, len));
        if ((uint64_t)off > L->dict_size || (uint64_t)n > L->dict_size - (uint64_t)off || n == 0)
            return FAIL("%s:%lld: the entry of %s (offset %lld, length %lld) is %s %s (%zu bytes): "
                        "is the index that of this dictionary, and the dictionary gunzipped?",
                        L->index_path, (long long)line, qkv__quote(q, sizeof q, s, nk),
                        (long long)off, (long long)n, n ? "past the end of" : "empty in",
                        L->dict_path, L->dict_size);
        if ((nk >= 10 && !memcmp(s, "00database", 10)) ||
            (nk >= 11 && !memcmp(s, "00-database", 11)))
            continue;
        qkv_status st = add_entry(L, line, s, nk, (size_t)off, (size_t)n);
        if (st) return st;
    }
    return QKV_OK;
}

qkv_status qkv_dict_load(const char *index_path, const char *dict_path, qkv_dict **out) {
    if (!index_path || !dict_path || !out)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_load: NULL argument", WHO);
    *out = NULL;
    char *index = NULL, *dict = NULL;
    size_t index_size = 0, dict_size = 0;
    qkv_status st = qkv__read_file(WHO, index_path, &index, &index_size);
    if (!st) st = qkv__read_file(WHO, dict_path, &dict, &dict_size);
    qkv_dict *d = st ? NULL : calloc(1, sizeof *d);
    if (!st && !d) st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
    if (!st) {
        loader L = {.index_path = index_path,
                    .dict_path = dict_path,
                    .dict = dict,
                    .dict_size = dict_size,
                    .d = d};
        st = read_index(&L, index, index_size);
    }
    if (!st && (d->keys.oom || d->trs.oom)) st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
    if (!st && d->n == 0) st = FAIL("%s: no headword with a translation", index_path);
    if (!st) {
        for (int64_t i = 0; i < d->n; i++)
            d->e[i].kp = d->keys.p + d->e[i].key;
        qsort(d->e, (size_t)d->n, sizeof *d->e, cmp_entry);
        int64_t m = 0;
        for (int64_t i = 0; i < d->n; i++)
            if (m == 0 || cmp_key(&d->e[m - 1], d->e[i].kp, d->e[i].key_len) != 0)
                d->e[m++] = d->e[i];
        d->n = m;
    }
    free(index);
    free(dict);
    if (st) {
        qkv_dict_free(d);
        return st;
    }
    *out = d;
    return QKV_OK;
}

/* ---- lookup and translation ---- */

static const dict_entry *find(const qkv_dict *d, const char *key, size_t n) {
    int64_t lo = 0, hi = d->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = cmp_key(&d->e[mid], key, n);
        if (c == 0) return &d->e[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *qkv_dict_lookup(const qkv_dict *d, const char *key, size_t len, size_t *tr_len) {
    const dict_entry *e = d && key ? find(d, key, len) : NULL;
    if (!e) return NULL;
    if (tr_len) *tr_len = e->tr_len;
    return d->trs.p + e->tr;
}

static bool ends_with(const char *s, size_t n, const char *suffix) {
    size_t k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

static bool is_consonant(char c) {
    return c >= 'b' && c <= 'z' && !strchr("eiou", c);
}

/* The entry of the key w[0, n) or of one of its de-inflected forms (buf: n + 2 bytes). */
static const dict_entry *find_word(const qkv_dict *d, const char *w, size_t n, char *buf) {
    const dict_entry *e = find(d, w, n);
    if (e) return e;
    static const struct {
        const char *suffix, *repl;
        bool doubled; /* the stem ends in a doubled consonant, kept once */
    } rules[] = {
        {"ies", "y", false},  {"es", "", false},  {"s", "", false},   {"ied", "y", false},
        {"ed", "", false},    {"ed", "e", false}, {"ed", "", true},   {"ing", "", false},
        {"ing", "e", false},  {"ing", "", true},  {"eth", "", false}, {"eth", "e", false},
        {"est", "", false},   {"est", "e", false},
    };
    for (size_t r = 0; r < sizeof rules / sizeof *rules; r++) {
        size_t k = strlen(rules[r].suffix);
        if (!ends_with(w, n, rules[r].suffix) || n - k < 2) continue;
        if (!strcmp(rules[r].suffix, "s") && w[n - 2] == 's') continue;
        size_t stem = n - k;
        if (rules[r].doubled) {
            if (stem < 3 || w[stem - 1] != w[stem - 2] || !is_consonant(w[stem - 1])) continue;
            stem--;
        }
        memcpy(buf, w, stem);
        size_t nr = strlen(rules[r].repl);
        memcpy(buf + stem, rules[r].repl, nr);
        if ((e = find(d, buf, stem + nr))) return e;
    }
    return NULL;
}

/* Append the translation t[0, n), its first letter upper case when upper. */
static void add_translation(qkv__buf *b, const char *t, size_t n, bool upper) {
    if (upper && n > 0 && t[0] >= 'a' && t[0] <= 'z') {
        qkv__buf_ch(b, (char)(t[0] - 'a' + 'A'));
        t++, n--;
    } else if (upper && n > 1 && (unsigned char)t[0] == 0xC3 && (unsigned char)t[1] >= 0xA0 &&
               (unsigned char)t[1] <= 0xBE && (unsigned char)t[1] != 0xB7) {
        qkv__buf_ch(b, (char)0xC3);
        qkv__buf_ch(b, (char)((unsigned char)t[1] - 0x20));
        t += 2, n -= 2;
    }
    qkv__buf_add(b, t, n);
}

qkv_status qkv_dict_translate(const qkv_dict *d, const char *text, size_t len, const char *what,
                              char **out, size_t *out_len, qkv_dict_counts *counts) {
    if (!d || (!text && len) || !out)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_translate: NULL argument", WHO);
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!what) what = "text";
    bool utf8;
    unsigned char c;
    size_t col = bad_byte(text, len, true, true, &utf8, &c);
    if (col)
        return FAIL("%s: invalid UTF-8 (byte 0x%02X at column %zu)", what, c, col);
    qkv__buf b = {0};
    char *key = malloc(d->max_key + 8), *buf = malloc(d->max_key + 8);
    qkv_dict_counts k = {0};
    for (size_t i = 0; i < len && key && buf;) {
        int cl;
        uint32_t cp = code_point((const unsigned char *)text + i, len - i, &cl);
        if (!is_word_cp(cp)) {
            qkv__buf_add(&b, text + i, (size_t)cl);
            i += (size_t)cl;
            continue;
        }
        /* the word text[i, j) and its key */
        size_t j = i, nk = 0;
        bool fits = true;
        const bool upper = is_upper_cp(cp);
        while (j < len) {
            uint32_t x = code_point((const unsigned char *)text + j, len - j, &cl);
            if (is_apostrophe(x)) {
                int cl2;
                if (j + (size_t)cl >= len ||
                    !is_word_cp(code_point((const unsigned char *)text + j + cl,
                                           len - j - (size_t)cl, &cl2)))
                    break;
                j += (size_t)cl;
                continue;
            }
            if (!is_word_cp(x)) break;
            if (nk + (size_t)cl > d->max_key + 4) {
                fits = false;
            } else if (x < 0x80) {
                key[nk++] = (char)(x >= 'A' && x <= 'Z' ? x - 'A' + 'a' : x);
            } else if (x >= 0xC0 && x <= 0xDE && x != 0xD7) {
                key[nk++] = (char)0xC3, key[nk++] = (char)(0xA0 + (x - 0xC0));
            } else {
                memcpy(key + nk, text + j, (size_t)cl);
                nk += (size_t)cl;
            }
            j += (size_t)cl;
        }
        const dict_entry *e = fits ? find_word(d, key, nk, buf) : NULL;
        k.words++;
        if (e) {
            k.translated++;
            add_translation(&b, d->trs.p + e->tr, e->tr_len, upper);
        } else {
            qkv__buf_add(&b, text + i, j - i);
        }
        i = j;
    }
    qkv__buf_ch(&b, '\0');
    const bool oom = !key || !buf || b.oom;
    free(key);
    free(buf);
    if (oom) {
        qkv__buf_free(&b);
        return QKV_ERROR(QKV_ERR_OOM, "%s_translate: out of memory", WHO);
    }
    *out = b.p;
    if (out_len) *out_len = b.n - 1;
    if (counts) {
        counts->words += k.words;
        counts->translated += k.translated;
    }
    return QKV_OK;
}
