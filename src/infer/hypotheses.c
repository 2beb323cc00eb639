/*
 * hypotheses.c: the hypotheses of a search: a row's tokens stored as a hypothesis with its score
 * and its length-normalised score (score / lp(length), qkv_length_penalty), the sort by that
 * score, and freeing them.
 */
#include "infer_internal.h"

#include <math.h>
#include <stdlib.h>

double qkv_length_penalty_value(qkv_length_penalty kind, double alpha, int32_t length) {
    switch (kind) {
    case QKV_LENGTH_PENALTY_AVERAGE:
        return (double)length;
    case QKV_LENGTH_PENALTY_GNMT:
        return pow((5.0 + (double)length) / 6.0, alpha);
    case QKV_LENGTH_PENALTY_NONE:
        break;
    }
    return 1.0;
}

void qkv_hypotheses_free(qkv_hypotheses *h) {
    if (!h) return;
    if (h->hyp)
        for (int64_t i = 0; i < (int64_t)h->batch * h->n_best; i++)
            free(h->hyp[i].tokens);
    free(h->hyp);
    free(h->count);
    memset(h, 0, sizeof *h);
}

qkv_status dec_store(const dec_job *j, const qkv_session *s, int32_t row, int32_t b, int32_t last,
                     double score, qkv_hypothesis *h) {
    const int32_t P = j->prompt_len[b], t = qkv_session_length(s), len = t - P + 1;
    free(h->tokens);
    h->tokens = malloc(sizeof(int32_t) * (size_t)len);
    if (!h->tokens) return QKV_ERROR(QKV_ERR_OOM, "decode: out of memory for a hypothesis");
    if (len > 1)
        memcpy(h->tokens, qkv_session_tokens(s, row) + P, sizeof(int32_t) * (size_t)(len - 1));
    h->tokens[len - 1] = last;
    h->length = len;
    h->score = score;
    h->norm_score = score / qkv_length_penalty_value(j->p.length_penalty, j->p.alpha, len);
    h->finished = last == j->p.eos_id;
    return QKV_OK;
}

static int by_norm_score(const void *a, const void *b) {
    const qkv_hypothesis *x = a, *y = b;
    return x->norm_score > y->norm_score ? -1 : x->norm_score < y->norm_score ? 1 : 0;
}

void dec_sort_hypotheses(qkv_hypotheses *h) {
    /* insertion sort: stable, and n_best is small */
    for (int32_t b = 0; b < h->batch; b++) {
        qkv_hypothesis *list = h->hyp + (size_t)b * h->n_best;
        for (int32_t i = 1; i < h->count[b]; i++)
            for (int32_t k = i; k > 0 && by_norm_score(&list[k - 1], &list[k]) > 0; k--) {
                qkv_hypothesis tmp = list[k];
                list[k] = list[k - 1];
                list[k - 1] = tmp;
            }
    }
}

