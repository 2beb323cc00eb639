/*
 * log_probs.c: the log-probabilities the searches read from a step's logits (V per row): the
 * log-sum-exp and the largest logit (vectorised, one clone per vector width, the same bits in
 * each: kernels/rowreduce.h), log-softmax rows with <pad> excluded, and a window of such rows
 * computed a few at a time, so that a beam's rows are computed once.
 */
#include "infer_internal.h"

#include "../kernels/rowreduce.h"

#include <math.h>
#include <stdlib.h>

/* The row loops of dec_logsumexp (kernels/rowreduce.h), compiled for each vector width: the
 * lanes and their order are fixed, so every clone gives the same bits. */
QKV_CLONES static qkv_real max_of(const qkv_real *x, int32_t V) { return qkv__row_max(x, V); }
QKV_CLONES static double sum_exp(const qkv_real *x, int32_t V, double mx) { return qkv__row_sum_exp_d(x, mx, V); }

/* The first v < V other than skip with (double)x[v] - lse == target, V when none: 16 values
 * compared at once (exact comparisons: every clone finds the same v). */
QKV_CLONES static int32_t first_equal(const qkv_real *x, int32_t V, int32_t skip, double lse,
                                      double target) {
    int32_t v = 0;
    for (; v + 16 <= V; v += 16) {
        int hit = 0;
        for (int i = 0; i < 16; i++)
            hit |= (double)x[v + i] - lse == target;
        if (hit)
            for (int i = 0; i < 16; i++)
                if (v + i != skip && (double)x[v + i] - lse == target) return v + i;
    }
    for (; v < V; v++)
        if (v != skip && (double)x[v] - lse == target) return v;
    return V;
}

double dec_max_except(const qkv_real *logits, int32_t V, int32_t skip) {
    if (skip < 0 || skip >= V) return max_of(logits, V);
    const double below = max_of(logits, skip), above = max_of(logits + skip + 1, V - skip - 1);
    return below >= above || below != below ? below : above; /* NaN when a logit is */
}

/* A plain function around the clone: clang names a cloned function's dispatcher differently
 * from what callers in other files expect (as qkv__sdpa_mm_acc). */
int32_t dec_first_logp(const qkv_real *logits, int32_t V, int32_t skip, double lse, double target) {
    return first_equal(logits, V, skip, lse, target);
}

double dec_logsumexp(const qkv_real *logits, int32_t V) {
    const double mx = max_of(logits, V); /* NaN when a logit is */
    if (V > 0 && (mx == INFINITY || mx == -INFINITY)) return NAN; /* +-inf - mx: NaN, as exp(NaN) */
    return mx + log(sum_exp(logits, V, mx));
}

void dec_log_softmax(const qkv_real *logits, int32_t V, int32_t pad_id, double *out) {
    const double lse = dec_logsumexp(logits, V);
    for (int32_t v = 0; v < V; v++)
        out[v] = v == pad_id ? -INFINITY : (double)logits[v] - lse;
}

/* Rows per window: up to 64 rows or ~4 MiB (at least 2 rows), and at least min_rows (a whole
 * beam), whichever is more. */
static int32_t window_rows(int32_t V, int32_t min_rows) {
    int32_t rows = (int32_t)((size_t)(4 << 20) / sizeof(double) / (size_t)(V > 0 ? V : 1));
    if (rows > 64) rows = 64;
    if (rows < 2) rows = 2;
    return rows < min_rows ? min_rows : rows;
}

qkv_status dec_logp_window_init(dec_logp_window *w, int32_t V, int32_t min_rows) {
    w->V = V;
    w->cap = window_rows(V, min_rows);
    w->lo = w->hi = 0;
    w->logp = malloc(sizeof(double) * (size_t)w->cap * (size_t)V);
    return w->logp ? QKV_OK
                   : QKV_ERROR(QKV_ERR_OOM, "decode: out of memory for %d rows of %d "
                                            "log-probabilities", w->cap, V);
}

void dec_logp_window_free(dec_logp_window *w) {
    free(w->logp);
    w->logp = NULL;
}

const double *dec_logp_rows(dec_logp_window *w, const dec_job *j, const qkv_real *logits,
                            int32_t n, int32_t r, int32_t cnt) {
    const int32_t V = w->V;
    if (r < w->lo || r + cnt > w->hi) {
        const int32_t lo = r, hi = n - r < w->cap ? n : r + w->cap; /* hi >= r + cnt: cnt <= cap */
        int32_t have = lo; /* rows lo .. have - 1 are already there: move them to the front */
        if (lo >= w->lo && lo < w->hi) {
            have = w->hi;
            memmove(w->logp, w->logp + (size_t)(lo - w->lo) * (size_t)V,
                    sizeof(double) * (size_t)(have - lo) * (size_t)V);
        }
#pragma omp parallel for schedule(static) if ((int64_t)(hi - have) * V >= 32768)
        for (int32_t i = have; i < hi; i++)
            dec_log_softmax(logits + (size_t)i * (size_t)V, V, j->pad_id,
                            w->logp + (size_t)(i - lo) * (size_t)V);
        w->lo = lo;
        w->hi = hi;
    }
    return w->logp + (size_t)(r - w->lo) * (size_t)V;
}

