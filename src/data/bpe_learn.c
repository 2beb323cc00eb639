/*
 * bpe_learn.c: learning a byte-pair-encoding model (Sennrich, Haddow and Birch 2016, "Neural
 * Machine Translation of Rare Words with Subword Units"; subword-nmt's learn_bpe.py), the rules of
 * bpe.h.
 *
 * The learner counts the distinct words of the lines it is given. Learning then takes the
 * alphabet (characters seen at least min_char_count times, weighted by their words' counts), spells
 * every word as its marker and characters, and counts every adjacent pair of symbols inside words:
 * count(x, y) = sum over words w of freq(w) * (occurrences of x y in w). Each step merges the pair
 * of highest count (ties: the greater pair by UTF-8 bytes, as Python's max over (count, pair) in
 * learn_bpe.py), rewriting each word that holds it (left to right, not overlapping) and updating
 * the counts of that word's pairs only: a pair remembers the words it occurs in, and a heap of
 * (count, pair) entries, checked when they come out, finds the best pair. A pair whose merge would
 * spell a byte symbol is never taken. Characters outside the alphabet break words: no pair crosses
 * them.
 */
#include "bpe.h"

#include <stdlib.h>

#define MAX_MERGES 10000000

struct qkv_bpe_learner {
    qkv_bpe_opts o;
    qkv__strtab words; /* the characters of each distinct word (after its marker) */
    int64_t *freq;     /* (words.n) */
    int32_t freq_cap;
};

qkv_bpe_opts qkv_bpe_default_opts(void) {
    return (qkv_bpe_opts){.merges = 10000, .min_frequency = 2, .min_char_count = 1, .byte_fallback = true};
}

qkv_status qkv_bpe_learner_new(const qkv_bpe_opts *opts, qkv_bpe_learner **out) {
    if (!out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_bpe_learner_new: NULL argument");
    *out = NULL;
    const qkv_bpe_opts o = opts ? *opts : qkv_bpe_default_opts();
    if (o.merges < 0 || o.merges > MAX_MERGES)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "BPE: merges %d is outside 0..%d", (int)o.merges, MAX_MERGES);
    if (o.min_frequency < 1 || o.min_char_count < 1)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "BPE: min_frequency (%lld) and min_char_count (%lld) must be >= 1",
                         (long long)o.min_frequency, (long long)o.min_char_count);
    qkv_bpe_learner *l = calloc(1, sizeof *l);
    if (!l) return QKV_ERROR(QKV_ERR_OOM, "qkv_bpe_learner_new: out of memory");
    l->o = o;
    *out = l;
    return QKV_OK;
}

void qkv_bpe_learner_free(qkv_bpe_learner *l) {
    if (!l) return;
    qkv__strtab_free(&l->words);
    free(l->freq);
    free(l);
}

typedef struct adding {
    qkv_bpe_learner *l;
    const char *text;
} adding;

static qkv_status count_word(void *ctx, size_t off, size_t n, bool after_space) {
    (void)after_space;
    adding *a = ctx;
    qkv_bpe_learner *l = a->l;
    const int32_t id = qkv__strtab_add(&l->words, a->text + off, n);
    if (id < 0) return QKV_ERROR(QKV_ERR_OOM, "BPE: out of memory counting words");
    if (id == l->freq_cap) {
        const int32_t cap = l->freq_cap ? 2 * l->freq_cap : 1024;
        int64_t *f = realloc(l->freq, (size_t)cap * sizeof *f);
        if (!f) return QKV_ERROR(QKV_ERR_OOM, "BPE: out of memory counting words");
        memset(f + l->freq_cap, 0, (size_t)(cap - l->freq_cap) * sizeof *f);
        l->freq = f;
        l->freq_cap = cap;
    }
    l->freq[id]++;
    return QKV_OK;
}

qkv_status qkv_bpe_learner_add(qkv_bpe_learner *l, const char *text, size_t len, const char *what) {
    if (!l || (!text && len)) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_bpe_learner_add: NULL argument");
    if (!what) what = "text";
    for (size_t i = 0; i < len;) {
        const int k = qkv__utf8_char_len((const unsigned char *)text + i, len - i);
        if (k == 0) return QKV_ERROR(QKV_ERR_FORMAT, "invalid UTF-8 at byte %zu of the %s", i + 1, what);
        if (text[i] == '\n') return QKV_ERROR(QKV_ERR_FORMAT, "a newline in the %s (one line at a time)", what);
        i += (size_t)k;
    }
    adding a = {l, text};
    return qkv__bpe_words(text, len, count_word, &a);
}

/* ---- learning ---- */

typedef struct pair {
    int32_t left, right;
    int64_t count;
    int32_t *words, n_words, cap_words; /* the words it occurs in (with repeats and stale ones) */
    int32_t dirty;                      /* the step that last changed its count */
    bool banned;                        /* its merge would spell a byte symbol */
} pair;

typedef struct entry {
    int64_t count;
    int32_t pair;
} entry;

typedef struct learning {
    qkv__bpe *m;
    const int64_t *freq;
    int32_t *seq;        /* every word's symbols, back to back; -1 for a character outside the alphabet */
    int64_t *seq_off;    /* (n_words) */
    int32_t *seq_len;    /* (n_words) */
    int32_t *word_stamp; /* (n_words) the step that last rewrote the word */
    int32_t n_words;
    pair *pairs;
    int32_t n_pairs, cap_pairs;
    qkv__pairmap index; /* (left, right) -> its pair */
    entry *heap;
    int64_t n_heap, cap_heap;
    int32_t *changed; /* the pairs whose count the step under way changed */
    int32_t n_changed, cap_changed;
    int32_t step;
} learning;

static int cmp_sym(const qkv__bpe *m, int32_t a, int32_t b) {
    size_t na, nb;
    const char *sa = qkv__strtab_str(&m->sym, a, &na), *sb = qkv__strtab_str(&m->sym, b, &nb);
    const int c = memcmp(sa, sb, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
}

/* Whether entry a comes out of the heap before b: the higher count, then the greater pair. */
static bool better(const learning *L, entry a, entry b) {
    if (a.count != b.count) return a.count > b.count;
    const pair *p = &L->pairs[a.pair], *q = &L->pairs[b.pair];
    const int c = cmp_sym(L->m, p->left, q->left);
    return c ? c > 0 : cmp_sym(L->m, p->right, q->right) > 0;
}

static void sift_down(learning *L, int64_t i) {
    const entry e = L->heap[i];
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= L->n_heap) break;
        if (c + 1 < L->n_heap && better(L, L->heap[c + 1], L->heap[c])) c++;
        if (!better(L, L->heap[c], e)) break;
        L->heap[i] = L->heap[c];
        i = c;
    }
    L->heap[i] = e;
}

static bool heap_push(learning *L, entry e) {
    if (L->n_heap == L->cap_heap) {
        const int64_t cap = L->cap_heap ? 2 * L->cap_heap : 4096;
        entry *h = realloc(L->heap, (size_t)cap * sizeof *h);
        if (!h) return false;
        L->heap = h;
        L->cap_heap = cap;
    }
    int64_t i = L->n_heap++;
    while (i > 0 && better(L, e, L->heap[(i - 1) / 2])) {
        L->heap[i] = L->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    L->heap[i] = e;
    return true;
}

static entry heap_pop(learning *L) {
    const entry top = L->heap[0];
    L->heap[0] = L->heap[--L->n_heap];
    if (L->n_heap) sift_down(L, 0);
    return top;
}

/* The heap again from the pairs' counts, once stale entries outnumber live pairs. */
static void heap_rebuild(learning *L) {
    L->n_heap = 0;
    for (int32_t p = 0; p < L->n_pairs; p++)
        if (L->pairs[p].count > 0 && !L->pairs[p].banned) L->heap[L->n_heap++] = (entry){L->pairs[p].count, p};
    for (int64_t i = L->n_heap / 2 - 1; i >= 0; i--)
        sift_down(L, i);
}

static bool append_i32(int32_t **items, int32_t *n, int32_t *cap, int32_t v) {
    if (*n == *cap) {
        if (*cap > INT32_MAX / 2) return false;
        const int32_t c = *cap ? 2 * *cap : 4;
        int32_t *p = realloc(*items, (size_t)c * sizeof *p);
        if (!p) return false;
        *items = p;
        *cap = c;
    }
    (*items)[(*n)++] = v;
    return true;
}

/* count(left, right) += delta for word w; note w among the pair's words when `note`. */
static bool pair_add(learning *L, int32_t left, int32_t right, int64_t delta, int32_t w, bool note) {
    int32_t p = qkv__pairmap_get(&L->index, left, right);
    if (p < 0) {
        if (L->n_pairs == L->cap_pairs) {
            if (L->cap_pairs > INT32_MAX / 2) return false;
            const int32_t cap = L->cap_pairs ? 2 * L->cap_pairs : 1024;
            pair *q = realloc(L->pairs, (size_t)cap * sizeof *q);
            if (!q) return false;
            L->pairs = q;
            L->cap_pairs = cap;
        }
        p = L->n_pairs;
        if (!qkv__pairmap_put(&L->index, left, right, p)) return false;
        L->n_pairs++;
        size_t nl, nr;
        const char *l = qkv__strtab_str(&L->m->sym, left, &nl), *r = qkv__strtab_str(&L->m->sym, right, &nr);
        char cat[6];
        bool banned = false;
        if (nl + nr == 6) {
            memcpy(cat, l, nl);
            memcpy(cat + nl, r, nr);
            banned = qkv__bpe_is_byte(cat, 6, NULL);
        }
        L->pairs[p] = (pair){.left = left, .right = right, .dirty = INT32_MIN, .banned = banned};
        note = true;
    }
    pair *q = &L->pairs[p];
    q->count += delta;
    if (note && !append_i32(&q->words, &q->n_words, &q->cap_words, w)) return false;
    if (q->dirty != L->step) {
        q->dirty = L->step;
        if (!append_i32(&L->changed, &L->n_changed, &L->cap_changed, p)) return false;
    }
    return true;
}

/* Add (sign +1) or remove (-1) the counts of word w's pairs; note w among the words of every
 * pair (all) or of those that hold `fresh` (the symbol a merge just made: the word's other pairs
 * already have it). */
static bool word_pairs(learning *L, int32_t w, int64_t sign, bool all, int32_t fresh) {
    const int32_t *s = L->seq + L->seq_off[w];
    for (int32_t i = 0; i + 1 < L->seq_len[w]; i++)
        if (s[i] >= 0 && s[i + 1] >= 0 &&
            !pair_add(L, s[i], s[i + 1], sign * L->freq[w], w, all || s[i] == fresh || s[i + 1] == fresh))
            return false;
    return true;
}

/* Merge pair p (rank r) in every word that holds it. */
static bool apply_merge(learning *L, int32_t p, int32_t result) {
    const int32_t left = L->pairs[p].left, right = L->pairs[p].right;
    for (int32_t k = 0; k < L->pairs[p].n_words; k++) {
        const int32_t w = L->pairs[p].words[k];
        if (L->word_stamp[w] == L->step) continue;
        L->word_stamp[w] = L->step;
        int32_t *s = L->seq + L->seq_off[w];
        const int32_t n = L->seq_len[w];
        bool holds = false;
        for (int32_t i = 0; i + 1 < n && !holds; i++)
            holds = s[i] == left && s[i + 1] == right;
        if (!holds) continue;
        if (!word_pairs(L, w, -1, false, -1)) return false;
        int32_t j = 0;
        for (int32_t i = 0; i < n;) {
            if (i + 1 < n && s[i] == left && s[i + 1] == right) {
                s[j++] = result;
                i += 2;
            } else {
                s[j++] = s[i++];
            }
        }
        L->seq_len[w] = j;
        if (!word_pairs(L, w, +1, false, result)) return false;
    }
    return true;
}

typedef struct char_count {
    const char *s;
    size_t n;
} char_count;

static int by_bytes(const void *a, const void *b) {
    const char_count *x = a, *y = b;
    const int c = memcmp(x->s, y->s, x->n < y->n ? x->n : y->n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* The alphabet: the characters of the words, by count (each word's count) >= min_count, added to
 * m in UTF-8 byte order. A literal marker, '\r' and NUL are never in it. */
static qkv_status make_alphabet(const qkv_bpe_learner *l, qkv__bpe *m) {
    qkv__strtab chars = {0};
    int64_t *count = NULL;
    int32_t cap = 0;
    char_count *list = NULL;
    qkv_status st = QKV_OK;
    for (int32_t w = 0; w < l->words.n; w++) {
        size_t n;
        const char *s = qkv__strtab_str(&l->words, w, &n);
        for (size_t i = 0; i < n;) {
            const int k = qkv__utf8_char_len((const unsigned char *)s + i, n - i);
            if (!qkv__bpe_always_bytes(s + i, k)) {
                const int32_t id = qkv__strtab_add(&chars, s + i, (size_t)k);
                if (id < 0) goto oom;
                if (id == cap) {
                    const int32_t c = cap ? 2 * cap : 256;
                    int64_t *g = realloc(count, (size_t)c * sizeof *g);
                    if (!g) goto oom;
                    memset(g + cap, 0, (size_t)(c - cap) * sizeof *g);
                    count = g;
                    cap = c;
                }
                count[id] += l->freq[w];
            }
            i += (size_t)k;
        }
    }
    list = malloc((size_t)(chars.n ? chars.n : 1) * sizeof *list);
    if (!list) goto oom;
    int32_t n_list = 0;
    for (int32_t id = 0; id < chars.n; id++)
        if (count[id] >= l->o.min_char_count) {
            size_t n;
            const char *c = qkv__strtab_str(&chars, id, &n);
            list[n_list++] = (char_count){c, n};
        }
    qsort(list, (size_t)n_list, sizeof *list, by_bytes);
    for (int32_t i = 0; i < n_list && !st; i++)
        st = qkv__bpe_add_char(m, list[i].s, list[i].n);
    goto done;
oom:
    st = QKV_ERROR(QKV_ERR_OOM, "BPE: out of memory");
done:
    qkv__strtab_free(&chars);
    free(count);
    free(list);
    return st;
}

/* Every word as its symbols: the marker, then each character's (-1 outside the alphabet). */
static qkv_status spell_words(const qkv_bpe_learner *l, learning *L) {
    const qkv__bpe *m = L->m;
    const int32_t n_words = l->words.n;
    L->n_words = n_words;
    L->seq_off = malloc((size_t)(n_words + 1) * sizeof *L->seq_off);
    L->seq_len = malloc((size_t)(n_words + 1) * sizeof *L->seq_len);
    L->word_stamp = malloc((size_t)(n_words + 1) * sizeof *L->word_stamp);
    L->seq = malloc((l->words.text.n + (size_t)n_words + 1) * sizeof *L->seq);
    if (!L->seq_off || !L->seq_len || !L->word_stamp || !L->seq) return QKV_ERROR(QKV_ERR_OOM, "BPE: out of memory");
    int64_t at = 0;
    for (int32_t w = 0; w < n_words; w++) {
        size_t n;
        const char *s = qkv__strtab_str(&l->words, w, &n);
        L->seq_off[w] = at;
        L->word_stamp[w] = -1;
        L->seq[at++] = m->marker;
        for (size_t i = 0; i < n;) {
            const int k = qkv__utf8_char_len((const unsigned char *)s + i, n - i);
            L->seq[at++] = qkv__bpe_char_id(m, s + i, k);
            i += (size_t)k;
        }
        L->seq_len[w] = (int32_t)(at - L->seq_off[w]);
    }
    return QKV_OK;
}

static void learning_free(learning *L) {
    for (int32_t p = 0; p < L->n_pairs; p++)
        free(L->pairs[p].words);
    free(L->pairs);
    qkv__pairmap_free(&L->index);
    free(L->heap);
    free(L->changed);
    free(L->seq);
    free(L->seq_off);
    free(L->seq_len);
    free(L->word_stamp);
}

/* Push the pairs the step changed, with their new counts. */
static bool push_changed(learning *L) {
    for (int32_t k = 0; k < L->n_changed; k++) {
        const pair *q = &L->pairs[L->changed[k]];
        if (q->count > 0 && !q->banned && !heap_push(L, (entry){q->count, L->changed[k]})) return false;
    }
    L->n_changed = 0;
    return true;
}

static qkv_status learn(const qkv_bpe_learner *l, qkv__bpe *m) {
    learning L = {.m = m, .freq = l->freq, .step = -1};
    qkv_status st = make_alphabet(l, m);
    if (!st) st = spell_words(l, &L);
    if (st) goto done;
    for (int32_t w = 0; w < L.n_words; w++)
        if (!word_pairs(&L, w, +1, true, -1)) goto oom;
    if (!push_changed(&L)) goto oom;
    while (m->n_merges < l->o.merges && L.n_heap) {
        const entry e = heap_pop(&L);
        const pair *q = &L.pairs[e.pair];
        if (e.count != q->count) continue; /* stale */
        if (q->count < l->o.min_frequency) break;
        L.step = m->n_merges;
        if ((st = qkv__bpe_add_merge(m, q->left, q->right))) goto done;
        if (!apply_merge(&L, e.pair, m->merge[3 * (size_t)(m->n_merges - 1) + 2]) || !push_changed(&L)) goto oom;
        if (L.n_heap > 4 * (int64_t)L.n_pairs + 65536) heap_rebuild(&L);
    }
    goto done;
oom:
    st = QKV_ERROR(QKV_ERR_OOM, "BPE: out of memory learning the merges");
done:
    learning_free(&L);
    return st;
}

qkv_status qkv_bpe_learner_save(qkv_bpe_learner *l, const char *path, int32_t *merges, int32_t *chars) {
    if (!l || !path) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_bpe_learner_save: NULL argument");
    qkv__bpe m;
    qkv_status st = qkv__bpe_init(&m, l->o.byte_fallback);
    if (st) return st;
    st = learn(l, &m);
    if (!st) st = qkv__bpe_save(&m, path);
    if (!st && merges) *merges = m.n_merges;
    if (!st && chars) *chars = m.n_alphabet;
    qkv__bpe_free(&m);
    return st;
}
