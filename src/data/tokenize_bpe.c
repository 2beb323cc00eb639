/*
 * tokenize_bpe.c: the tokenizer "bpe" (qkv_tokenizer.h): byte-pair-encoding subwords with the
 * model of bpe.h (learned by bpe_learn.c, read by bpe_model.c).
 *
 * Splitting applies the merges to each word as subword-nmt's apply_bpe.py does: a pass merges every
 * occurrence (left to right, not overlapping) of the present pair of lowest rank; passes repeat
 * until no present pair has a rank. The passes run on a heap of (rank, position) entries over a
 * linked list of the word's symbols, so a word of n characters costs O(n log n) (apply_bpe.py's
 * loop is O(n^2)): entries are checked when they come out (the pair at that position may have
 * changed), and a pair that a pass creates with a rank below the pass's own waits until the pass
 * has ended (a model may make one symbol by two merges, "ab c" and "a bc", and a later-ranked
 * one can create a pair of an earlier rank).
 *
 * Joining concatenates the symbols, turns each marker into a space, each byte symbol into its
 * byte, and drops the space of the first marker; bytes that do not form valid UTF-8 (a model
 * that emits a broken byte sequence) become U+FFFD, one per byte.
 */
#include "bpe.h"

#include <stdlib.h>

/* ---- words ---- */

qkv_status qkv__bpe_words(const char *text, size_t len, qkv__bpe_word_fn fn, void *ctx) {
    size_t start = 0;
    bool after_space = false;
    for (size_t i = 0; len && i <= len; i++) {
        if (i < len && text[i] != ' ') continue;
        qkv_status st = fn(ctx, start, i - start, after_space);
        if (st) return st;
        start = i + 1;
        after_space = true;
    }
    return QKV_OK;
}

/* ---- split ---- */

typedef struct heap_entry {
    int32_t rank, pos; /* the pair starting at node pos */
} heap_entry;

typedef struct splitter {
    const qkv__bpe *m;
    const char *text;
    const char *what;
    qkv_symbol_fn emit;
    void *ctx;
    /* the nodes of the word under way: symbol id (-1: a character outside the alphabet, kept as
     * itself) and the span of text it covers; a linked list */
    int32_t *id, *next, *prev;
    size_t *off, *len;
    int32_t cap;
    heap_entry *heap, *deferred;
    int32_t n_heap, n_deferred, heap_cap;
} splitter;

static bool before(heap_entry a, heap_entry b) {
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void heap_push(splitter *s, heap_entry e) {
    int32_t i = s->n_heap++;
    while (i > 0 && before(e, s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = e;
}

static heap_entry heap_pop(splitter *s) {
    const heap_entry top = s->heap[0], last = s->heap[--s->n_heap];
    int32_t i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= s->n_heap) break;
        if (c + 1 < s->n_heap && before(s->heap[c + 1], s->heap[c])) c++;
        if (!before(s->heap[c], last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->n_heap) s->heap[i] = last;
    return top;
}

static int32_t rank_at(const splitter *s, int32_t pos) {
    const int32_t nx = s->next[pos];
    if (nx < 0 || s->id[pos] < QKV_BPE_BYTES || s->id[nx] < QKV_BPE_BYTES) return -1;
    return qkv__pairmap_get(&s->m->rank, s->id[pos], s->id[nx]);
}

/* Room for n nodes and their heap entries. */
static qkv_status reserve(splitter *s, size_t n) {
    if (n <= (size_t)s->cap) return QKV_OK;
    if (n > INT32_MAX / 4) return QKV_ERROR(QKV_ERR_SHAPE, "a word of the %s is too long (%zu bytes)", s->what, n);
    const int32_t cap = (int32_t)(n < 64 ? 64 : n);
    int32_t **ints[] = {&s->id, &s->next, &s->prev};
    for (size_t k = 0; k < 3; k++) {
        int32_t *p = realloc(*ints[k], (size_t)cap * sizeof *p);
        if (!p) goto oom;
        *ints[k] = p;
    }
    size_t **sizes[] = {&s->off, &s->len};
    for (size_t k = 0; k < 2; k++) {
        size_t *p = realloc(*sizes[k], (size_t)cap * sizeof *p);
        if (!p) goto oom;
        *sizes[k] = p;
    }
    /* a merge adds at most two entries and removes a node: 3 per node bounds both lists */
    heap_entry **lists[] = {&s->heap, &s->deferred};
    for (size_t k = 0; k < 2; k++) {
        heap_entry *p = realloc(*lists[k], (size_t)cap * 3 * sizeof *p);
        if (!p) goto oom;
        *lists[k] = p;
    }
    s->cap = cap;
    return QKV_OK;
oom:
    return QKV_ERROR(QKV_ERR_OOM, "bpe: out of memory splitting a word of %zu bytes", n);
}

static void add_node(splitter *s, int32_t *n, int32_t id, size_t off, size_t len) {
    s->id[*n] = id;
    s->off[*n] = off;
    s->len[*n] = len;
    s->prev[*n] = *n - 1;
    s->next[*n] = -1;
    if (*n) s->next[*n - 1] = *n;
    ++*n;
}

/* Push the pair at pos, or defer it when its rank is below the pass under way (cur). */
static void offer(splitter *s, int32_t pos, int32_t cur) {
    if (pos < 0) return;
    const int32_t r = rank_at(s, pos);
    if (r < 0) return;
    const heap_entry e = {r, pos};
    if (r < cur) s->deferred[s->n_deferred++] = e;
    else heap_push(s, e);
}

static qkv_status split_word(void *ctx, size_t off, size_t n, bool after_space) {
    splitter *s = ctx;
    const qkv__bpe *m = s->m;
    /* a node per byte at most, and the marker */
    qkv_status st = reserve(s, n + 1);
    if (st) return st;
    int32_t nodes = 0;
    add_node(s, &nodes, m->marker, after_space ? off - 1 : off, after_space ? 1 : 0);
    const unsigned char *t = (const unsigned char *)s->text;
    for (size_t i = off; i < off + n;) {
        const int k = qkv__utf8_char_len(t + i, off + n - i);
        if (k == 0) return QKV_ERROR(QKV_ERR_FORMAT, "invalid UTF-8 at byte %zu of the %s", i + 1, s->what);
        const int32_t id = qkv__bpe_char_id(m, s->text + i, k);
        if (id >= 0)
            add_node(s, &nodes, id, i, (size_t)k);
        else if (m->byte_fallback || qkv__bpe_always_bytes(s->text + i, k))
            for (int b = 0; b < k; b++)
                add_node(s, &nodes, t[i + b], i + b, 1);
        else
            add_node(s, &nodes, -1, i, (size_t)k);
        i += (size_t)k;
    }
    s->n_heap = s->n_deferred = 0;
    for (int32_t p = 0; p + 1 < nodes; p++)
        offer(s, p, -1);
    int32_t cur = -1; /* the rank of the pass under way */
    for (;;) {
        if (s->n_deferred && (!s->n_heap || s->heap[0].rank != cur)) { /* the pass ended */
            for (int32_t k = 0; k < s->n_deferred; k++)
                heap_push(s, s->deferred[k]);
            s->n_deferred = 0;
        }
        if (!s->n_heap) break;
        const heap_entry e = heap_pop(s);
        if (s->id[e.pos] == INT32_MIN || rank_at(s, e.pos) != e.rank) continue; /* stale */
        cur = e.rank;
        const int32_t right = s->next[e.pos];
        s->id[e.pos] = m->merge[3 * (size_t)e.rank + 2];
        s->len[e.pos] += s->len[right];
        s->next[e.pos] = s->next[right];
        if (s->next[right] >= 0) s->prev[s->next[right]] = e.pos;
        s->id[right] = INT32_MIN; /* gone */
        offer(s, s->prev[e.pos], cur);
        offer(s, e.pos, cur);
    }
    for (int32_t p = 0; p >= 0; p = s->next[p]) {
        size_t sym_len = s->len[p];
        const char *sym = s->id[p] >= 0 ? qkv__strtab_str(&m->sym, s->id[p], &sym_len) : s->text + s->off[p];
        st = s->emit(s->ctx, s->off[p], s->len[p], sym, sym_len);
        if (st) return st;
    }
    return QKV_OK;
}

static qkv_status split_bpe(const qkv_tokenizer *t, const char *text, size_t len, const char *what,
                            qkv_symbol_fn emit, void *ctx) {
    splitter s = {.m = t->state, .text = text, .what = what, .emit = emit, .ctx = ctx};
    qkv_status st = qkv__bpe_words(text, len, split_word, &s);
    free(s.id), free(s.next), free(s.prev), free(s.off), free(s.len), free(s.heap), free(s.deferred);
    return st;
}

/* ---- join ---- */

static qkv_status join_bpe(const qkv_tokenizer *t, const char *const *syms, const size_t *lens, int64_t n,
                           qkv__buf *out) {
    (void)t;
    qkv__buf raw = {0};
    bool drop_first = false;
    for (int64_t i = 0; i < n; i++) {
        unsigned byte;
        if (qkv__bpe_is_byte(syms[i], lens[i], &byte)) {
            qkv__buf_ch(&raw, (char)byte);
            continue;
        }
        for (size_t k = 0; k < lens[i];) {
            if (lens[i] - k >= QKV_BPE_MARKER_LEN && !memcmp(syms[i] + k, QKV_BPE_MARKER, QKV_BPE_MARKER_LEN)) {
                if (raw.n == 0) drop_first = true;
                qkv__buf_ch(&raw, ' ');
                k += QKV_BPE_MARKER_LEN;
            } else {
                qkv__buf_ch(&raw, syms[i][k++]);
            }
        }
    }
    for (size_t i = drop_first ? 1 : 0; i < raw.n;) {
        const int k = qkv__utf8_char_len((const unsigned char *)raw.p + i, raw.n - i);
        if (k) qkv__buf_add(out, raw.p + i, (size_t)k);
        else qkv__buf_str(out, "\xef\xbf\xbd");
        i += k ? (size_t)k : 1;
    }
    const bool oom = raw.oom;
    qkv__buf_free(&raw);
    return oom ? QKV_ERROR(QKV_ERR_OOM, "bpe: out of memory joining %lld symbols", (long long)n) : QKV_OK;
}

/* Every symbol of the model: bytes, alphabet, the results of merges. */
static qkv_status add_symbols(const qkv_tokenizer *t, qkv_vocab *v) {
    const qkv__bpe *m = t->state;
    for (int32_t id = 0; id < m->sym.n; id++) {
        size_t n;
        const char *s = qkv__strtab_str(&m->sym, id, &n);
        int32_t got;
        qkv_status st = qkv_vocab_add(v, s, n, &got);
        if (st) return st;
    }
    return QKV_OK;
}

/* ---- the model as the tokenizer's state ---- */

static qkv_status load_bpe(const char *path, void **state) {
    qkv__bpe *m = malloc(sizeof *m);
    if (!m) return QKV_ERROR(QKV_ERR_OOM, "bpe: out of memory");
    qkv_status st = qkv__bpe_load(path, m);
    if (st) {
        free(m);
        return st;
    }
    *state = m;
    return QKV_OK;
}

static void free_bpe(void *state) {
    qkv__bpe_free(state);
    free(state);
}

const qkv__tokenizer_ops qkv__tokenizer_bpe = {
    .kind = QKV_TOKENIZER_BPE,
    .unit = "subwords",
    .separator = " ",
    .split = split_bpe,
    .join = join_bpe,
    .add_fallback = add_symbols,
    .load = load_bpe,
    .free_state = free_bpe,
};
