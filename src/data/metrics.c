/*
 * metrics.c: edit distance, multi-reference WER / PER for G2P, and accuracy counters.
 *
 * Levenshtein distance by the two-row dynamic programme: D[i][j] = min(D[i-1][j] + 1,
 * D[i][j-1] + 1, D[i-1][j-1] + [a_i != b_j]), O(nb) memory.
 *
 * Multi-reference scoring (Phonetisaurus' rule, as in shtoshni/g2p and docs/data.md): a word's
 * closest reference minimises the distance to the hypothesis (ties: the shorter reference, then
 * the first); the word is an error when that distance is > 0; PER sums the distances over the
 * sums of the closest references' lengths.
 *
 * Detection of one positive class: precision tp / (tp + fp), recall tp / (tp + fn), F1 their
 * harmonic mean 2 tp / (2 tp + fp + fn); each 0 when its denominator is.
 */
#include "data_internal.h"

#include <stdlib.h>

int64_t qkv_edit_distance(const int32_t *a, int64_t na, const int32_t *b, int64_t nb) {
    if (na < 0 || nb < 0 || (na && !a) || (nb && !b)) return -1;
    if (na == 0) return nb;
    if (nb == 0) return na;
    int64_t stack[256];
    int64_t *row = nb + 1 <= 256 ? stack : malloc((size_t)(nb + 1) * sizeof *row);
    if (!row) return -1;
    for (int64_t j = 0; j <= nb; j++)
        row[j] = j; /* D[0][j] */
    for (int64_t i = 1; i <= na; i++) {
        int64_t diag = row[0]; /* D[i-1][j-1] */
        row[0] = i;
        for (int64_t j = 1; j <= nb; j++) {
            int64_t up = row[j]; /* D[i-1][j] */
            int64_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    int64_t d = row[nb];
    if (row != stack) free(row);
    return d;
}

int64_t qkv_seq_length(const int32_t *seq, int64_t len, int32_t stop) {
    if (!seq || len <= 0) return 0;
    for (int64_t i = 0; i < len; i++)
        if (seq[i] == stop) return i;
    return len;
}

/* The closest reference so far. */
typedef struct closest_ref {
    int64_t dist, len, index;
} closest_ref;

static void consider(closest_ref *c, int64_t dist, int64_t len, int64_t index) {
    if (c->index < 0 || dist < c->dist || (dist == c->dist && len < c->len))
        *c = (closest_ref){dist, len, index};
}

static void count(qkv_wer_counts *c, const closest_ref *best) {
    c->items++;
    c->item_errors += best->dist > 0;
    c->edits += best->dist;
    c->ref_len += best->len;
}

qkv_status qkv_wer_add(qkv_wer_counts *c, const int32_t *hyp, int64_t hyp_len,
                       const int32_t *const *refs, const int64_t *ref_lens, int64_t n_refs,
                       int64_t *closest) {
    if (!c || (!hyp && hyp_len) || hyp_len < 0 || !refs || !ref_lens)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_wer_add: NULL argument or negative length");
    if (n_refs < 1)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_wer_add: %lld references (at least one)",
                         (long long)n_refs);
    closest_ref best = {0, 0, -1};
    for (int64_t r = 0; r < n_refs; r++) {
        int64_t d = qkv_edit_distance(hyp, hyp_len, refs[r], ref_lens[r]);
        if (d < 0)
            return QKV_ERROR(QKV_ERR_INVALID_ARG,
                             "qkv_wer_add: reference %lld is NULL or has a negative length, or "
                             "out of memory",
                             (long long)r);
        consider(&best, d, ref_lens[r], r);
    }
    count(c, &best);
    if (closest) *closest = best.index;
    return QKV_OK;
}

qkv_status qkv_wer_add_group(qkv_wer_counts *c, const qkv_dataset *d, const qkv_groups *groups,
                             int64_t g, const int32_t *hyp, int64_t hyp_len, int64_t *closest) {
    if (!c || !d || !groups || !groups->start || (!hyp && hyp_len) || hyp_len < 0)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_wer_add_group: NULL argument or negative length");
    if (g < 0 || g >= groups->n)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_wer_add_group: group %lld out of range [0, %lld)", (long long)g,
                         (long long)groups->n);
    int64_t first = groups->start[g], end = groups->start[g + 1];
    if (first < 0 || end <= first || end > qkv_dataset_size(d))
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_wer_add_group: group %lld (examples %lld .. %lld) does not fit %s "
                         "(%lld examples): groups of another corpus?",
                         (long long)g, (long long)first, (long long)end - 1, qkv_dataset_name(d),
                         (long long)qkv_dataset_size(d));
    closest_ref best = {0, 0, -1};
    for (int64_t i = first; i < end; i++) {
        qkv_example e;
        qkv_dataset_get(d, i, &e);
        int64_t dist = qkv_edit_distance(hyp, hyp_len, e.tgt, e.tgt_len);
        if (dist < 0) return QKV_ERROR(QKV_ERR_OOM, "qkv_wer_add_group: out of memory");
        consider(&best, dist, e.tgt_len, i - first);
    }
    count(c, &best);
    if (closest) *closest = best.index;
    return QKV_OK;
}

double qkv_wer(const qkv_wer_counts *c) {
    return c && c->items ? (double)c->item_errors / (double)c->items : 0.0;
}

double qkv_per(const qkv_wer_counts *c) {
    return c && c->ref_len ? (double)c->edits / (double)c->ref_len : 0.0;
}

void qkv_accuracy_add(qkv_accuracy *a, const int32_t *pred, const int32_t *gold, int64_t n,
                      int32_t ignore_id) {
    if (!a || !pred || !gold) return;
    for (int64_t i = 0; i < n; i++) {
        if (ignore_id >= 0 && gold[i] == ignore_id) continue;
        a->total++;
        a->correct += pred[i] == gold[i];
    }
}

double qkv_accuracy_rate(const qkv_accuracy *a) {
    return a && a->total ? (double)a->correct / (double)a->total : 0.0;
}

void qkv_prf_add(qkv_prf *m, const int32_t *pred, const int32_t *gold, int64_t n,
                 int32_t positive) {
    if (!m || !pred || !gold) return;
    for (int64_t i = 0; i < n; i++) {
        m->tp += pred[i] == positive && gold[i] == positive;
        m->fp += pred[i] == positive && gold[i] != positive;
        m->fn += pred[i] != positive && gold[i] == positive;
    }
}

double qkv_precision(const qkv_prf *m) {
    return m->tp + m->fp ? (double)m->tp / (double)(m->tp + m->fp) : 0.0;
}

double qkv_recall(const qkv_prf *m) {
    return m->tp + m->fn ? (double)m->tp / (double)(m->tp + m->fn) : 0.0;
}

double qkv_f1(const qkv_prf *m) { /* 2 P R / (P + R) = 2 tp / (2 tp + fp + fn) */
    return m->tp ? 2.0 * (double)m->tp / (double)(2 * m->tp + m->fp + m->fn) : 0.0;
}
