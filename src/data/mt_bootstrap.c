/*
 * mt_bootstrap.c: bootstrap confidence intervals of corpus BLEU and chrF (Koehn 2004,
 * "Statistical Significance Tests for Machine Translation Evaluation"), as sacreBLEU 2.x's
 * --confidence computes them (significance.py: _bootstrap_resample, estimate_ci):
 *
 *   B resampled corpora of n sentences drawn with replacement from the per-sentence statistics;
 *   each is scored from its summed statistics; mean = their mean; with the B scores sorted,
 *   lo = B / 40, lower = s[lo], upper = s[B - 1 - lo], half_width = (upper - lower) / 2.
 *
 * Draws: sentence j of resample b is floor(n x / 2^32) for x the first 32-bit word of the Philox
 * block at counter (j low, j high, b, attempt) and key seed (Salmon et al. 2011) that Lemire's
 * rejection test accepts (the low 32 bits of n x at least 2^32 mod n), so every sentence is
 * equally likely.
 * A pure function of (seed, b, j): the interval is the same on every machine and thread count.
 * sacreBLEU draws with numpy's default_rng, so its intervals are close to these, not equal.
 * The mean is a compensated (Neumaier) sum divided by B (Python's statistics.mean is exactly
 * rounded; the two agree to the last bit or so).
 */
#include "mt_internal.h"

#include <math.h>
#include <stdlib.h>

/* Sentence j of resample b: uniform on [0, n), n < 2^32. */
static uint64_t draw(uint64_t seed, uint64_t b, uint64_t j, uint32_t n) {
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    const uint32_t threshold = (uint32_t)(-n) % n; /* 2^32 mod n */
    for (uint32_t attempt = 0;; attempt++) {
        const uint32_t ctr[4] = {(uint32_t)j, (uint32_t)(j >> 32), (uint32_t)b, attempt};
        uint32_t out[4];
        qkv_philox4x32(ctr, key, out);
        for (int w = 0; w < 4; w++) {
            const uint64_t m = (uint64_t)out[w] * n;
            if ((uint32_t)m >= threshold) return m >> 32;
        }
    }
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void estimate_ci(double *scores, int64_t B, uint64_t seed, qkv_bootstrap_ci *out) {
    double sum = 0.0, comp = 0.0;
    for (int64_t i = 0; i < B; i++) {
        const double t = sum + scores[i];
        comp += fabs(sum) >= fabs(scores[i]) ? (sum - t) + scores[i] : (scores[i] - t) + sum;
        sum = t;
    }
    qsort(scores, (size_t)B, sizeof *scores, cmp_double);
    const int64_t lo = B / 40, hi = B - lo - 1;
    *out = (qkv_bootstrap_ci){
        B, seed, (sum + comp) / (double)B, 0.5 * (scores[hi] - scores[lo]), scores[lo], scores[hi]};
}

static qkv_status check(const char *who, const void *sentences, int64_t n, int64_t resamples,
                        const void *out) {
    if (!sentences || !out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL argument", who);
    if (n < 1 || n > (int64_t)UINT32_MAX)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: %lld sentences (1 .. 2^32 - 1)", who,
                         (long long)n);
    if (resamples < 1 || resamples > 100000000)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: %lld resamples (1 .. 10^8)", who,
                         (long long)resamples);
    return QKV_OK;
}

qkv_status qkv_bleu_bootstrap(const qkv_bleu_stats *sentences, int64_t n, const qkv_bleu_opts *opts,
                              int64_t resamples, uint64_t seed, qkv_bootstrap_ci *out) {
    static const char who[] = "qkv_bleu_bootstrap";
    qkv_status st = check(who, sentences, n, resamples, out);
    if (st) return st;
    double *scores = malloc((size_t)resamples * sizeof *scores);
    if (!scores) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", who);
    for (int64_t b = 0; b < resamples && st == QKV_OK; b++) {
        qkv_bleu_stats sum = {0};
        for (int64_t j = 0; j < n && st == QKV_OK; j++)
            st = qkv_bleu_stats_merge(
                &sum, &sentences[draw(seed, (uint64_t)b, (uint64_t)j, (uint32_t)n)]);
        qkv_bleu_result r;
        if (st == QKV_OK) st = qkv_bleu_compute(&sum, opts, &r);
        if (st == QKV_OK) scores[b] = r.score;
    }
    if (st == QKV_OK) estimate_ci(scores, resamples, seed, out);
    free(scores);
    return st;
}

qkv_status qkv_chrf_bootstrap(const qkv_chrf_stats *sentences, int64_t n, const qkv_chrf_opts *opts,
                              int64_t resamples, uint64_t seed, qkv_bootstrap_ci *out) {
    static const char who[] = "qkv_chrf_bootstrap";
    qkv_status st = check(who, sentences, n, resamples, out);
    if (st) return st;
    double *scores = malloc((size_t)resamples * sizeof *scores);
    if (!scores) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", who);
    for (int64_t b = 0; b < resamples && st == QKV_OK; b++) {
        qkv_chrf_stats sum = {0};
        for (int64_t j = 0; j < n && st == QKV_OK; j++)
            st = qkv_chrf_stats_merge(
                &sum, &sentences[draw(seed, (uint64_t)b, (uint64_t)j, (uint32_t)n)]);
        if (st == QKV_OK) st = qkv_chrf_compute(&sum, opts, &scores[b]);
    }
    if (st == QKV_OK) estimate_ci(scores, resamples, seed, out);
    free(scores);
    return st;
}
