/*
 * greedy.c: greedy search, and the row loop it shares with sampling (rows that never interact).
 *
 *   y_g = argmax_v log p(v | y_<g, x)     (ties: the lowest id; pad_id never)
 *
 * until EOS or max_len tokens. Every row decodes on its own, so a row that ends leaves the batch
 * at once (qkv_session_gather keeps the others, in place) and later steps run on fewer rows.
 * A row is fed its prompt tokens while its position is inside the prompt (decoder-only inputs of
 * different lengths); after that the chooser picks each token.
 *
 * Dims: N rows, V target vocabulary.
 */
#include "infer_internal.h"

#include <math.h>
#include <stdlib.h>

qkv_status dec_independent_rows(const dec_job *j, int32_t width, dec_choose_fn choose, void *user) {
    qkv_session *s = NULL;
    qkv_real *first = NULL;
    qkv_status st = dec_begin(j, width, width, &s, &first);
    if (st) return st;
    const int32_t V = j->V, n_total = j->batch * width;
    int32_t *input = malloc(sizeof(int32_t) * (size_t)n_total); /* row -> b * width + i */
    int32_t *keep = malloc(sizeof(int32_t) * (size_t)n_total);
    int32_t *next = malloc(sizeof(int32_t) * (size_t)n_total);
    double *score = calloc((size_t)n_total, sizeof(double));
    /* greedy (choose NULL): each row's token and its log-probability, for all rows of a step */
    int32_t *best = choose ? NULL : malloc(sizeof(int32_t) * (size_t)n_total);
    double *best_logp = choose ? NULL : malloc(sizeof(double) * (size_t)n_total);
    dec_logp_window win = {0};
    if (!input || !keep || !next || !score || (!choose && (!best || !best_logp)))
        st = QKV_ERROR(QKV_ERR_OOM, "decode: out of memory");
    if (!st && choose) st = dec_logp_window_init(&win, V, 1);
    for (int32_t r = 0; !st && r < n_total; r++)
        input[r] = r;
    const bool controls = dec_controls_on(&j->p);
    qkv_real *logits = first; /* (n, V) */
    while (!st) {
        const int32_t t = qkv_session_length(s), n = qkv_session_rows(s);
        for (int32_t r = 0; controls && r < n && !st; r++) /* before anything reads the logits */
            if (dec_forced(j, input[r] / width, t) < 0)
                st = dec_control_logits(j, qkv_session_tokens(s, r), t, logits + (size_t)r * V);
        if (st) break;
        if (!choose) {
#pragma omp parallel for schedule(static) if ((int64_t)n * V >= 32768)
            for (int32_t r = 0; r < n; r++) {
                const qkv_real *row = logits + (size_t)r * V;
                if (dec_forced(j, input[r] / width, t) < 0)
                    best[r] = dec_argmax_logits(j, row, &best_logp[r]);
            }
        }
        int32_t n_keep = 0;
        for (int32_t r = 0; r < n && !st; r++) {
            const int32_t g = input[r], b = g / width, i = g % width;
            const int32_t forced = dec_forced(j, b, t);
            if (forced >= 0) { /* still inside the prompt */
                next[n_keep] = forced;
                keep[n_keep++] = r;
                continue;
            }
            int32_t tok;
            if (choose) {
                const double *logp = dec_logp_rows(&win, j, logits, n, r, 1);
                tok = choose(j, user, logits + (size_t)r * V, logp, t, b, i);
                score[g] += logp[tok];
            } else {
                tok = best[r];
                score[g] += best_logp[r];
            }
            if (tok == j->p.eos_id || t - j->prompt_len[b] + 1 == j->p.max_len) {
                st = dec_store(j, s, r, b, tok, score[g], &j->out->hyp[(size_t)g]);
                j->out->count[b]++;
                continue;
            }
            next[n_keep] = tok;
            keep[n_keep++] = r;
        }
        if (st || n_keep == 0) break;
        for (int32_t k = 0; k < n_keep; k++)
            input[k] = input[keep[k]];
        st = qkv_session_gather(s, keep, n_keep);
        qkv_tensor *out = NULL;
        if (!st) st = qkv_session_step(s, next, 1, &out); /* (n_keep, 1, V) */
        if (!st) logits = qkv__data(out);
        dec_logp_window_clear(&win);
    }
    if (!st) dec_sort_hypotheses(j->out);
    free(input);
    free(keep);
    free(next);
    free(score);
    free(best);
    free(best_logp);
    dec_logp_window_free(&win);
    free(first);
    dec_end(j, s, st);
    return st;
}

int32_t dec_argmax(const dec_job *j, const double *logp) {
    int32_t best = j->pad_id == 0 && j->V > 1 ? 1 : 0; /* the lowest id that is not pad */
    for (int32_t v = best + 1; v < j->V; v++)
        if (logp[v] > logp[best]) best = v;
    return best;
}

int32_t dec_argmax_logits(const dec_job *j, const qkv_real *logits, double *logp_best) {
    const double lse = dec_logsumexp(logits, j->V);
    if (j->V >= 2 && isfinite(lse)) {
        /* Every logit is finite or -inf here (a NaN or +inf makes lse NaN), and x -> (double)x -
         * lse never decreases: the largest log-probability is that of the largest logit other than
         * pad_id, and the loop below picks the first token whose value equals it, which two
         * vectorised passes find. */
        const double top = dec_max_except(logits, j->V, j->pad_id) - lse;
        *logp_best = top;
        return dec_first_logp(logits, j->V, j->pad_id, lse, top);
    }
    int32_t best = j->pad_id == 0 && j->V > 1 ? 1 : 0; /* as dec_argmax */
    double top = best == j->pad_id ? -INFINITY : (double)logits[best] - lse;
    for (int32_t v = best + 1; v < j->V; v++) {
        const double lp = v == j->pad_id ? -INFINITY : (double)logits[v] - lse;
        if (lp > top) best = v, top = lp;
    }
    *logp_best = top;
    return best;
}

qkv_status dec_greedy(const dec_job *j) {
    return dec_independent_rows(j, 1, NULL, NULL);
}
