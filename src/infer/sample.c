/*
 * sample.c: ancestral sampling with temperature, top-k and nucleus (top-p) truncation.
 *
 * At each step the next token is drawn from
 *   q(v) ∝ exp(log p(v) / temperature)                         (pad_id excluded)
 * restricted to the k most probable tokens (top_k > 0; Fan et al. 2018), then to the smallest
 * set of most probable tokens whose mass under the renormalised q reaches top_p (Holtzman et al.
 * 2020; the order of Hugging Face's TopK then TopP warpers). temperature 0 or top_k 1 is the
 * argmax. The reported score stays the model's log p (temperature 1, no truncation).
 *
 * Randomness: u = U1 + U2 2^-24 in [0, 1) from Philox at (seed, position, sample id), sample id
 * = b * n_best + i, so a draw depends on neither the batch composition of a step nor the thread
 * count; the token is the first whose cumulative mass exceeds u times the kept mass, walking the
 * tokens by id (no truncation) or by descending q, then id (with top-k or top-p).
 *
 * n_best independent samples per input run as rows of one batch (rows leave it as they end).
 *
 * Dims: V target vocabulary.
 */
#include "infer_internal.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    double w;  /* unnormalised probability under the tempered, truncated distribution */
    int32_t v; /* token id */
} weighted;

/* Descending weight, then ascending id. */
static int by_weight(const void *a, const void *b) {
    const weighted *x = a, *y = b;
    if (x->w != y->w) return x->w > y->w ? -1 : 1;
    return (x->v > y->v) - (x->v < y->v);
}

static int32_t sample_choose(const dec_job *j, void *user, const qkv_real *logits,
                             const double *logp, int32_t t, int32_t b, int32_t i) {
    (void)logits;
    const qkv_decode_params *p = &j->p;
    if (p->temperature == 0 || p->top_k == 1) return dec_argmax(j, logp);
    weighted *c = user;
    const double mx = logp[dec_argmax(j, logp)];
    int32_t n = 0;
    for (int32_t v = 0; v < j->V; v++) {
        const double w = exp((logp[v] - mx) / p->temperature); /* 0 for pad_id */
        if (w > 0) c[n++] = (weighted){w, v};
    }
    if (n == 0) return dec_argmax(j, logp); /* non-finite logits: nothing to draw from */
    int32_t keep = n;
    if (p->top_k > 0 || p->top_p < 1) {
        qsort(c, (size_t)n, sizeof *c, by_weight);
        if (p->top_k > 0 && p->top_k < keep) keep = p->top_k;
        if (p->top_p < 1) {
            double total = 0, cum = 0;
            for (int32_t k = 0; k < keep; k++)
                total += c[k].w;
            for (int32_t k = 0; k < keep; k++) {
                cum += c[k].w;
                if (cum >= p->top_p * total) {
                    keep = k + 1;
                    break;
                }
            }
        }
    }
    double total = 0;
    for (int32_t k = 0; k < keep; k++)
        total += c[k].w;
    const uint64_t stream = (uint64_t)b * (uint64_t)p->n_best + (uint64_t)i;
    const double u = ((double)qkv_rng_uniform(p->seed, (uint64_t)t, stream, 0) +
                      (double)qkv_rng_uniform(p->seed, (uint64_t)t, stream, 1) / 16777216.0) *
                     total;
    double cum = 0;
    for (int32_t k = 0; k < keep; k++) {
        cum += c[k].w;
        if (u < cum) return c[k].v;
    }
    return c[keep - 1].v; /* u within rounding of the total */
}

qkv_status dec_sample(const dec_job *j) {
    weighted *work = malloc(sizeof(weighted) * (size_t)j->V);
    if (!work) return QKV_ERROR(QKV_ERR_OOM, "decode: out of memory");
    qkv_status st = dec_independent_rows(j, j->p.n_best, sample_choose, work);
    free(work);
    return st;
}
