/*
 * mt_ngram.c: n-gram match counts of a hypothesis against references, by sorting rather than
 * hashing (O(N L log L) for total length L and maximum order N, any L).
 *
 * Each n-gram gets a dense rank, equal ranks for equal n-grams: the rank of the n-gram at
 * position i is that of the pair (rank of the (n-1)-gram at i, symbol i + n - 1), pairs sorted
 * and numbered (order 1: the symbols themselves). Within a run of one n-gram, sorted by
 * sequence, the counts per sequence give the clipped matches min(c_hyp, c_ref) of BLEU (Papineni
 * et al. 2002: against the largest count among the references) and chrF (Popović 2015: against
 * each reference apart).
 *
 * mt_intern numbers words the same way: spans sorted by length, then content.
 */
#include "mt_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
    int64_t a, b; /* the key: rank of the prefix, last symbol */
    int64_t seq;  /* 0: the hypothesis, r: reference r */
    int64_t pos;  /* start of the n-gram in sym */
} entry;

static int entry_cmp(const void *x, const void *y) {
    const entry *p = x, *q = y;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    if (p->b != q->b) return p->b < q->b ? -1 : 1;
    if (p->seq != q->seq) return p->seq < q->seq ? -1 : 1;
    return (p->pos > q->pos) - (p->pos < q->pos);
}

bool mt_ngram_match(const int64_t *sym, const int64_t *start, int64_t n_refs, int max_order,
                    int64_t *hyp_total, int64_t *ref_total, int64_t *match, int64_t *match_max) {
    const int64_t n_seqs = n_refs + 1, total_len = start[n_seqs];
    for (int k = 0; k < max_order; k++) {
        hyp_total[k] = 0;
        if (match_max) match_max[k] = 0;
        for (int64_t r = 0; r < n_refs; r++) {
            if (ref_total) ref_total[r * max_order + k] = 0;
            if (match) match[r * max_order + k] = 0;
        }
    }
    if (total_len == 0) return true;
    entry *e = malloc((size_t)total_len * sizeof *e);
    int64_t *rank = malloc((size_t)total_len * sizeof *rank);
    int64_t *count = malloc((size_t)n_seqs * sizeof *count);
    if (!e || !rank || !count) {
        free(e), free(rank), free(count);
        return false;
    }
    for (int k = 0; k < max_order; k++) {
        const int64_t n = k + 1;
        int64_t m = 0;
        for (int64_t s = 0; s < n_seqs; s++)
            for (int64_t i = start[s]; i + n <= start[s + 1]; i++)
                e[m++] = (entry){k ? rank[i] : 0, sym[i + n - 1], s, i};
        if (m == 0) break;
        qsort(e, (size_t)m, sizeof *e, entry_cmp);
        int64_t next_rank = 0;
        for (int64_t g = 0; g < m;) {
            int64_t h = g;
            memset(count, 0, (size_t)n_seqs * sizeof *count);
            while (h < m && e[h].a == e[g].a && e[h].b == e[g].b) {
                rank[e[h].pos] = next_rank;
                count[e[h].seq]++;
                h++;
            }
            next_rank++;
            const int64_t c_hyp = count[0];
            int64_t c_max = 0;
            hyp_total[k] += c_hyp;
            for (int64_t r = 1; r < n_seqs; r++) {
                const int64_t c = count[r];
                if (c > c_max) c_max = c;
                if (ref_total) ref_total[(r - 1) * max_order + k] += c;
                if (match) match[(r - 1) * max_order + k] += c < c_hyp ? c : c_hyp;
            }
            if (match_max) match_max[k] += c_max < c_hyp ? c_max : c_hyp;
            g = h;
        }
    }
    free(e), free(rank), free(count);
    return true;
}

typedef struct word_ref {
    const uint32_t *p;
    size_t len, index;
} word_ref;

static int word_cmp(const void *x, const void *y) {
    const word_ref *a = x, *b = y;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    for (size_t i = 0; i < a->len; i++)
        if (a->p[i] != b->p[i]) return a->p[i] < b->p[i] ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

bool mt_intern(const uint32_t *t, const mt_span *words, size_t n, int64_t *ids) {
    if (n == 0) return true;
    word_ref *w = malloc(n * sizeof *w);
    if (!w) return false;
    for (size_t i = 0; i < n; i++)
        w[i] = (word_ref){t + words[i].start, words[i].len, i};
    qsort(w, n, sizeof *w, word_cmp);
    int64_t id = -1;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || w[i].len != w[i - 1].len ||
            memcmp(w[i].p, w[i - 1].p, w[i].len * sizeof *w[i].p) != 0)
            id++;
        ids[w[i].index] = id;
    }
    free(w);
    return true;
}
