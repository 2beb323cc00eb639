/*
 * ngram_lm.c: an interpolated Kneser-Ney n-gram language model over the symbols of a text corpus
 * (characters or words, QKV_CORPUS_TEXT), the reference figure of the language-model task
 * (`qkv data baseline lm`, docs/data.md, RESULTS.md).
 *
 * Events: every line is <bos> s_1 .. s_m <eos>; each s_j and the final <eos> is predicted from
 * the symbols before it (<bos> included, nothing before <bos>). Symbols outside the training
 * vocabulary are <unk>. V = the predictable symbols: <unk>, <eos> and the training symbols.
 *
 * Adjusted counts (KenLM's rule): a(g) of an n-gram g of order k is its count c(g) when k = N
 * (the model's order) or g starts with <bos>; otherwise the number of distinct symbols v with
 * c(v g) > 0 (Kneser-Ney's continuation count). One discount per order from the counts of
 * counts of a at that order: D_k = n1 / (n1 + 2 n2) (Ney, Essen & Kneser 1994; 0.5 when no
 * n-gram of the order has a = 1). With h' = h without its first symbol,
 *
 *   P_0(w)     = 1 / V
 *   P_k(w | h) = (max(a(h w) - D_k, 0) + D_k T(h) P_{k-1}(w | h')) / A(h)    (|h| = k - 1)
 *   where A(h) = sum_w a(h w), T(h) = #{w : a(h w) > 0};  P_k(w | h) = P_{k-1}(w | h') when
 *   A(h) = 0 (h never seen as a context)
 *
 * and a symbol is scored with P_K, K = min(N, symbols before it + 1): interpolated Kneser-Ney
 * with one discount per order (Chen & Goodman 1999, not their modified three-discount variant).
 * It sums to 1 over V for every history (tests/datasets/test_ngram_lm.c checks it);
 * scripts/ngram_reference.py is an independent implementation (the test's fixture).
 *
 * Storage: an n-gram of order k is the pair (its first k - 1 symbols as an entry, its last
 * symbol) in one open-addressing hash table; the empty n-gram is entry 0. Counts and sums are
 * integers; probabilities are computed in double in a fixed order: deterministic.
 */
#include "recipes.h"
#include "data/data_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WHO "qkv_ngram"
#define ROOT 0

typedef struct gram {
    int32_t prefix; /* entry of the first k - 1 symbols (ROOT for a unigram) */
    int32_t sym;    /* the last symbol */
    int32_t suffix; /* entry of the last k - 1 symbols (ROOT for a unigram) */
    int32_t order;  /* k */
    int64_t count;  /* c(g): occurrences as an event */
    int64_t adj;    /* a(g) */
    int64_t left;   /* distinct v with c(v g) > 0 */
    int64_t total;  /* A(g) as a context */
    int64_t types;  /* T(g) as a context */
} gram;

struct qkv_ngram {
    int order; /* N */
    qkv_vocab *vocab;
    int32_t n_predictable; /* V */
    double *discount;      /* (N + 1), [k] for order k */
    gram *g;
    int32_t n, cap;
    int32_t *slot; /* hash table of entry ids, -1 empty */
    int64_t n_slots;
};

static uint64_t hash_pair(int32_t prefix, int32_t sym) {
    uint64_t h = ((uint64_t)(uint32_t)prefix << 32 | (uint32_t)sym) * UINT64_C(0x9E3779B97F4A7C15);
    return h ^ (h >> 29);
}

/* The entry (prefix, sym), or -1. */
static int32_t find(const qkv_ngram *m, int32_t prefix, int32_t sym) {
    if (prefix < 0) return -1;
    for (uint64_t i = hash_pair(prefix, sym) & (uint64_t)(m->n_slots - 1);;
         i = (i + 1) & (uint64_t)(m->n_slots - 1)) {
        const int32_t e = m->slot[i];
        if (e < 0) return -1;
        if (m->g[e].prefix == prefix && m->g[e].sym == sym) return e;
    }
}

static bool rehash(qkv_ngram *m, int64_t n_slots) {
    int32_t *slot = malloc(sizeof *slot * (size_t)n_slots);
    if (!slot) return false;
    memset(slot, 0xFF, sizeof *slot * (size_t)n_slots);
    for (int32_t e = 1; e < m->n; e++) {
        uint64_t i = hash_pair(m->g[e].prefix, m->g[e].sym) & (uint64_t)(n_slots - 1);
        while (slot[i] >= 0)
            i = (i + 1) & (uint64_t)(n_slots - 1);
        slot[i] = e;
    }
    free(m->slot);
    m->slot = slot;
    m->n_slots = n_slots;
    return true;
}

/* The entry (prefix, sym), added when missing; -1 when out of memory. */
static int32_t intern(qkv_ngram *m, int32_t prefix, int32_t sym) {
    const int32_t e = find(m, prefix, sym);
    if (e >= 0) return e;
    if (m->n == INT32_MAX) return -1;
    if (m->n == m->cap) {
        const int32_t cap = m->cap < INT32_MAX / 2 ? 2 * m->cap : INT32_MAX;
        gram *g = realloc(m->g, sizeof *g * (size_t)cap);
        if (!g) return -1;
        m->g = g;
        m->cap = cap;
    }
    if (2 * (int64_t)(m->n + 1) > m->n_slots && !rehash(m, 2 * m->n_slots)) return -1;
    const gram *p = &m->g[prefix];
    const int32_t suffix = prefix == ROOT ? ROOT : find(m, p->suffix, sym); /* exists: see below */
    m->g[m->n] = (gram){.prefix = prefix, .sym = sym, .suffix = suffix, .order = p->order + 1};
    uint64_t i = hash_pair(prefix, sym) & (uint64_t)(m->n_slots - 1);
    while (m->slot[i] >= 0)
        i = (i + 1) & (uint64_t)(m->n_slots - 1);
    m->slot[i] = m->n;
    return m->n++;
}

void qkv_ngram_free(qkv_ngram *m) {
    if (!m) return;
    qkv_vocab_free(m->vocab);
    free(m->discount);
    free(m->g);
    free(m->slot);
    free(m);
}

/* The ids of example i of c under the model's vocabulary, after <bos>: ids[0] = <bos>. */
static qkv_status line_ids(const qkv_ngram *m, const qkv_corpus *c, int64_t i, int32_t **buf,
                           int64_t *cap, int64_t *n) {
    const int64_t len = qkv_corpus_length(c, i, QKV_FIELD_TGT);
    if (len + 2 > *cap) {
        int64_t want = 2 * (len + 2);
        int32_t *b = realloc(*buf, sizeof *b * (size_t)want);
        if (!b) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
        *buf = b;
        *cap = want;
    }
    (*buf)[0] = QKV_VOCAB_BOS;
    for (int64_t k = 0; k < len; k++) {
        size_t sl = 0;
        const char *s = qkv_corpus_symbol(c, i, QKV_FIELD_TGT, k, &sl);
        const int32_t id = qkv_vocab_find(m->vocab, s, sl);
        (*buf)[k + 1] = id < QKV_VOCAB_RESERVED ? QKV_VOCAB_UNK : id;
    }
    (*buf)[len + 1] = QKV_VOCAB_EOS;
    *n = len + 2;
    return QKV_OK;
}

/* Count every n-gram of orders 1 .. N ending at each predicted position of every line. The
 * n-grams ending at position j of order k extend those ending at j - 1 of order k - 1, so their
 * suffixes (ending at j, order k - 1) are always interned before them. */
static qkv_status count_all(qkv_ngram *m, const qkv_corpus *c) {
    const int N = m->order;
    int32_t *ids = NULL, *prev = malloc(sizeof *prev * (size_t)(N + 1)),
            *cur = malloc(sizeof *cur * (size_t)(N + 1));
    int64_t cap = 0, n = 0;
    qkv_status st = prev && cur ? QKV_OK : QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
    for (int64_t i = 0; i < qkv_corpus_size(c) && !st; i++) {
        if ((st = line_ids(m, c, i, &ids, &cap, &n))) break;
        prev[0] = ROOT;
        prev[1] = intern(m, ROOT, QKV_VOCAB_BOS); /* a context, never an event */
        if (prev[1] < 0) {
            st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
            break;
        }
        int top = 1; /* the highest order of the n-grams ending at j - 1 */
        for (int64_t j = 1; j < n && !st; j++) {
            cur[0] = ROOT;
            const int K = top + 1 < N ? top + 1 : N;
            for (int k = 1; k <= K; k++) {
                cur[k] = intern(m, prev[k - 1], ids[j]);
                if (cur[k] < 0) {
                    st = QKV_ERROR(QKV_ERR_OOM, "%s: out of memory (%d n-grams)", WHO, m->n);
                    break;
                }
                m->g[cur[k]].count++;
            }
            memcpy(prev, cur, sizeof *prev * (size_t)(K + 1));
            top = K;
        }
    }
    free(ids);
    free(prev);
    free(cur);
    return st;
}

/* Adjusted counts, discounts and the context sums. */
static qkv_status finish(qkv_ngram *m) {
    const int N = m->order;
    for (int32_t e = 1; e < m->n; e++) /* every (k+1)-gram v g seen adds v to g's left set */
        if (m->g[e].count > 0 && m->g[e].order >= 2) m->g[m->g[e].suffix].left++;
    int64_t *n1 = calloc((size_t)N + 1, sizeof *n1), *n2 = calloc((size_t)N + 1, sizeof *n2);
    if (!n1 || !n2) {
        free(n1);
        free(n2);
        return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", WHO);
    }
    for (int32_t e = 1; e < m->n; e++) {
        gram *g = &m->g[e];
        int32_t first = e; /* the entry of g's first symbol */
        while (m->g[first].order > 1)
            first = m->g[first].prefix;
        const bool raw = g->order == N || m->g[first].sym == QKV_VOCAB_BOS;
        g->adj = raw ? g->count : g->left;
        n1[g->order] += g->adj == 1;
        n2[g->order] += g->adj == 2;
        gram *h = &m->g[g->prefix];
        h->total += g->adj;
        h->types += g->adj > 0;
    }
    for (int k = 1; k <= N; k++)
        m->discount[k] = n1[k] > 0 ? (double)n1[k] / (double)(n1[k] + 2 * n2[k]) : 0.5;
    free(n1);
    free(n2);
    return QKV_OK;
}

qkv_status qkv_ngram_train(const qkv_corpus *train, int order, qkv_ngram **out) {
    if (!train || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_train: NULL argument", WHO);
    *out = NULL;
    if (qkv_corpus_kind_of(train) != QKV_CORPUS_TEXT)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_train: %s is not a text corpus", WHO,
                         qkv_corpus_name(train));
    if (order < 1 || order > 64)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_train: order %d is not in 1 .. 64", WHO, order);
    if (qkv_corpus_size(train) == 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_train: %s has no lines", WHO,
                         qkv_corpus_name(train));
    qkv_ngram *m = calloc(1, sizeof *m);
    if (!m) return QKV_ERROR(QKV_ERR_OOM, "%s_train: out of memory", WHO);
    m->order = order;
    m->cap = 1024;
    m->g = malloc(sizeof *m->g * (size_t)m->cap);
    m->discount = calloc((size_t)order + 1, sizeof *m->discount);
    qkv_status st = m->g && m->discount && rehash(m, 2048)
                        ? qkv_vocab_build(train, QKV_FIELD_TGT, 1, false, &m->vocab)
                        : QKV_ERROR(QKV_ERR_OOM, "%s_train: out of memory", WHO);
    if (!st) {
        m->g[0] = (gram){.prefix = -1, .sym = -1, .suffix = -1, .order = 0};
        m->n = 1;
        m->n_predictable = qkv_vocab_size(m->vocab) - 2; /* all but <pad> and <bos> */
        st = count_all(m, train);
    }
    if (!st) st = finish(m);
    if (st) {
        qkv_ngram_free(m);
        return st;
    }
    *out = m;
    return QKV_OK;
}

int qkv_ngram_order(const qkv_ngram *m) {
    return m ? m->order : 0;
}
int32_t qkv_ngram_vocab_size(const qkv_ngram *m) {
    return m ? m->n_predictable : 0;
}
const qkv_vocab *qkv_ngram_vocab(const qkv_ngram *m) {
    return m ? m->vocab : NULL;
}
double qkv_ngram_discount(const qkv_ngram *m, int k) {
    return m && k >= 1 && k <= m->order ? m->discount[k] : NAN;
}
int64_t qkv_ngram_count(const qkv_ngram *m) {
    return m ? m->n - 1 : 0;
}

/* P(w | hist[0, n)) by the recursion above (hist ends just before w). */
static double prob(const qkv_ngram *m, const int32_t *hist, int64_t n, int32_t w) {
    const int K = n + 1 < m->order ? (int)n + 1 : m->order;
    double p = 1.0 / (double)m->n_predictable;
    for (int k = 1; k <= K; k++) {
        int32_t h = ROOT; /* the last k - 1 symbols of the history */
        for (int64_t i = n - (k - 1); i < n && h >= 0; i++)
            h = find(m, h, hist[i]);
        if (h < 0 || m->g[h].total == 0) continue;
        const int32_t e = find(m, h, w);
        const double a = e >= 0 ? (double)m->g[e].adj : 0, D = m->discount[k];
        p = (fmax(a - D, 0) + D * (double)m->g[h].types * p) / (double)m->g[h].total;
    }
    return p;
}

qkv_status qkv_ngram_logprob(const qkv_ngram *m, const int32_t *history, int64_t n, int32_t w,
                             double *logp) {
    if (!m || !logp || (n > 0 && !history) || n < 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_logprob: NULL or negative argument", WHO);
    const int32_t V = qkv_vocab_size(m->vocab);
    if (w < 0 || w >= V || w == QKV_VOCAB_PAD || w == QKV_VOCAB_BOS)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_logprob: symbol %d cannot be predicted", WHO, w);
    for (int64_t i = 0; i < n; i++)
        if (history[i] < 0 || history[i] >= V || history[i] == QKV_VOCAB_PAD)
            return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_logprob: history symbol %d is not a symbol",
                             WHO, history[i]);
    *logp = log(prob(m, history, n, w));
    return QKV_OK;
}

qkv_status qkv_ngram_score(const qkv_ngram *m, const qkv_corpus *c, double *nats, int64_t *events) {
    if (!m || !c || !nats || !events)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_score: NULL argument", WHO);
    if (qkv_corpus_kind_of(c) != QKV_CORPUS_TEXT)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s_score: %s is not a text corpus", WHO,
                         qkv_corpus_name(c));
    int32_t *ids = NULL;
    int64_t cap = 0, n = 0, count = 0;
    double sum = 0;
    qkv_status st = QKV_OK;
    for (int64_t i = 0; i < qkv_corpus_size(c) && !st; i++) {
        if ((st = line_ids(m, c, i, &ids, &cap, &n))) break;
        for (int64_t j = 1; j < n; j++) {
            sum -= log(prob(m, ids, j, ids[j]));
            count++;
        }
    }
    free(ids);
    if (!st) *nats = sum, *events = count;
    return st;
}
