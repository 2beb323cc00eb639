/*
 * beam.c: beam search over a flat batch x beam axis (CTranslate2 / fairseq style).
 *
 * Each sentence b keeps up to K alive hypotheses (rows of the session; one at the start) with
 * cumulative log-probabilities s_k. A step scores every extension s_k + log p(v | row k) (pad_id
 * excluded) and keeps the 2K best (ties: the lower row, then the lower id), walking them best
 * first:
 *   - a candidate among the first K that ends with EOS, or any of the first K when this is the
 *     last allowed token (max_len), is finished: set aside with its length-penalised score
 *     s / lp(length) (the penalty enters only here, at finalisation);
 *   - other EOS candidates are dropped; the first K remaining candidates are the new beam.
 * 2K candidates guarantee K alive extensions even when K of them end with EOS. A sentence is
 * done when it has K finished hypotheses (fairseq's stopping rule), reached max_len, or has no
 * alive candidate; its rows leave the batch. The surviving rows are gathered from their parents
 * (qkv_session_gather: every cache row and token history follows), so a hypothesis's tokens are
 * its row's history. The n_best finished hypotheses with the best normalised scores are
 * returned, best first.
 *
 * With K = 1 this is greedy search, token for token and score for score; with K at least the
 * number of sequences of at most max_len tokens nothing is pruned and the result is the exact
 * maximum of s / lp(length) (tests/decode).
 *
 * Dims: B sentences, K beam size, N <= B K rows, V target vocabulary.
 */
#include "infer_internal.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    double score; /* cumulative log-probability */
    int32_t row;  /* parent row in the current batch */
    int32_t v;    /* token */
} candidate;

typedef struct {
    int32_t off, cnt; /* rows [off, off + cnt) of the current batch */
    int32_t n_fin;    /* finished hypotheses set aside */
    bool done;
} sentence;

/* Insert c into list (n of cap, ordered by descending score, then by arrival: candidates arrive
 * by ascending row, then id, so an equal score ranks after the ones already there). */
static void push(candidate *list, int32_t *n, int32_t cap, candidate c) {
    if (*n == cap && !(c.score > list[cap - 1].score)) return;
    int32_t at = *n < cap ? (*n)++ : cap - 1;
    while (at > 0 && list[at - 1].score < c.score) {
        list[at] = list[at - 1];
        at--;
    }
    list[at] = c;
}

/* Move the n_best best of the finished hypotheses of each sentence into the output. */
static void finalize(const dec_job *j, qkv_hypothesis *fin, const sentence *sent, int32_t cap) {
    qkv_hypotheses *out = j->out;
    qkv_hypotheses one = {1, cap, (int32_t[]){0}, NULL, j->p.eos_id};
    for (int32_t b = 0; b < j->batch; b++) {
        one.count[0] = sent[b].n_fin;
        one.hyp = fin + (size_t)b * cap;
        dec_sort_hypotheses(&one);
        const int32_t keep = sent[b].n_fin < out->n_best ? sent[b].n_fin : out->n_best;
        for (int32_t i = 0; i < sent[b].n_fin; i++) {
            if (i < keep) {
                out->hyp[(size_t)b * out->n_best + i] = one.hyp[i];
            } else {
                free(one.hyp[i].tokens);
            }
            one.hyp[i].tokens = NULL;
        }
        out->count[b] = keep;
    }
}

qkv_status dec_beam(const dec_job *j) {
    qkv_session *s = NULL;
    qkv_real *first = NULL;
    qkv_status st = dec_begin(j, 1, j->p.beam_size, &s, &first);
    if (st) return st;
    const int32_t B = j->batch, K = j->p.beam_size, V = j->V, cap = 2 * K, eos = j->p.eos_id;
    const size_t N = (size_t)B * (size_t)K;
    sentence *sent = calloc((size_t)B, sizeof *sent);
    qkv_hypothesis *fin = calloc((size_t)B * (size_t)cap, sizeof *fin);
    double *cum = calloc(N, sizeof *cum), *next_cum = calloc(N, sizeof *next_cum);
    int32_t *parents = malloc(sizeof(int32_t) * N), *tokens = malloc(sizeof(int32_t) * N);
    candidate *cand = malloc(sizeof(candidate) * (size_t)cap);
    dec_logp_window win = {0};
    if (!sent || !fin || !cum || !next_cum || !parents || !tokens || !cand)
        st = QKV_ERROR(QKV_ERR_OOM, "beam search: out of memory for %d x %d rows", B, K);
    if (!st) st = dec_logp_window_init(&win, V, K);
    for (int32_t b = 0; !st && b < B; b++)
        sent[b] = (sentence){b, 1, 0, false};
    const bool controls = dec_controls_on(&j->p);
    qkv_real *logits = first; /* (rows, V) */
    int32_t rows = B;          /* rows of logits */
    while (!st) {
        const int32_t t = qkv_session_length(s);
        for (int32_t b = 0; controls && b < B && !st; b++) /* before anything reads the logits */
            if (!sent[b].done && dec_forced(j, b, t) < 0)
                for (int32_t k = 0; k < sent[b].cnt && !st; k++)
                    st = dec_control_logits(j, qkv_session_tokens(s, sent[b].off + k), t,
                                            logits + (size_t)(sent[b].off + k) * V);
        if (st) break;
        int32_t n_new = 0;
        for (int32_t b = 0; b < B && !st; b++) {
            sentence *se = &sent[b];
            if (se->done) continue;
            const int32_t forced = dec_forced(j, b, t), off = n_new;
            if (forced >= 0) { /* inside the prompt: every row takes the prompt token */
                for (int32_t k = 0; k < se->cnt; k++, n_new++) {
                    parents[n_new] = se->off + k;
                    tokens[n_new] = forced;
                    next_cum[n_new] = cum[se->off + k];
                }
                se->off = off;
                continue;
            }
            const bool last = t - j->prompt_len[b] + 1 == j->p.max_len;
            int32_t nc = 0;
            const double *beam_logp = dec_logp_rows(&win, j, logits, rows, se->off, se->cnt);
            for (int32_t k = 0; k < se->cnt; k++) {
                const int32_t r = se->off + k;
                const double *logp = beam_logp + (size_t)k * (size_t)V;
                for (int32_t v = 0; v < V; v++) {
                    const double sc = cum[r] + logp[v];
                    if (sc > -INFINITY)
                        push(cand, &nc, cap, (candidate){sc, r, v}); /* not -inf or NaN */
                }
            }
            int32_t alive = 0;
            for (int32_t rank = 0; rank < nc && !st; rank++) {
                const candidate c = cand[rank];
                const bool ends = c.v == eos || last;
                if (ends && rank < K) {
                    st = dec_store(j, s, c.row, b, c.v, c.score,
                                   &fin[(size_t)b * cap + se->n_fin++]);
                } else if (!ends && alive < K) {
                    parents[n_new] = c.row;
                    tokens[n_new] = c.v;
                    next_cum[n_new++] = c.score;
                    alive++;
                }
            }
            if (se->n_fin >= K || last || alive == 0) {
                se->done = true;
                n_new -= alive; /* its rows leave the batch */
            } else {
                se->off = off;
                se->cnt = alive;
            }
        }
        if (st || n_new == 0) break;
        st = qkv_session_gather(s, parents, n_new);
        double *swap = cum;
        cum = next_cum;
        next_cum = swap;
        qkv_tensor *out = NULL;
        if (!st) st = qkv_session_step(s, tokens, 1, &out); /* (n_new, 1, V) */
        if (!st) logits = qkv__data(out);
        rows = n_new;
        dec_logp_window_clear(&win);
    }
    if (!st) finalize(j, fin, sent, cap);
    if (fin)
        for (size_t i = 0; i < (size_t)B * (size_t)cap; i++)
            free(fin[i].tokens);
    free(sent);
    free(fin);
    free(cum);
    free(next_cum);
    free(parents);
    free(tokens);
    free(cand);
    dec_logp_window_free(&win);
    free(first);
    dec_end(j, s, st);
    return st;
}
