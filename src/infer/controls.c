/*
 * controls.c: the controls of the next token (qkv_decode_params: allowed, no_repeat_ngram,
 * repetition_penalty), applied to a step's logits in place before a search reads them.
 *
 * With h the hypothesis' tokens (those fed after the first position) and x its row of logits:
 *   allowed            x_v = -inf for every v whose flag is 0, except EOS
 *   no_repeat_ngram n  x_v = -inf for every v such that h ends with h[i .. i + n - 2] and
 *                      h[i + n - 1] = v for some i (fairseq's _no_repeat_ngram; n = 1: v in h)
 *   repetition_penalty x_v = x_v / theta if x_v > 0 else x_v * theta, once for each distinct v
 *                      in h (Keskar et al. 2019, eq. in section 4.1; HF's
 *                      RepetitionPenaltyLogitsProcessor)
 * The scores a search reports are then log-probabilities under the controlled distribution.
 */
#include "infer_internal.h"

#include <math.h>
#include <stdlib.h>

bool dec_controls_on(const qkv_decode_params *p) {
    return p->allowed || p->no_repeat_ngram > 0 || p->repetition_penalty != 1;
}

static int by_id(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

qkv_status dec_control_logits(const dec_job *j, const int32_t *fed, int32_t t, qkv_real *x) {
    const qkv_decode_params *p = &j->p;
    const int32_t V = j->V, *h = fed + 1, L = t - 1; /* the hypothesis' tokens */
    if (p->allowed)
        for (int32_t v = 0; v < V; v++)
            if (!p->allowed[v] && v != p->eos_id) x[v] = (qkv_real)-INFINITY;
    const int32_t n = p->no_repeat_ngram;
    if (n > 0)
        for (int32_t i = 0; i + n <= L; i++) {
            int32_t k = 0;
            while (k < n - 1 && h[i + k] == h[L - n + 1 + k])
                k++;
            if (k == n - 1 && h[i + n - 1] >= 0 && h[i + n - 1] < V) x[h[i + n - 1]] = (qkv_real)-INFINITY;
        }
    if (p->repetition_penalty != 1 && L > 0) {
        int32_t stack[256], *ids = L <= 256 ? stack : malloc(sizeof(int32_t) * (size_t)L);
        if (!ids) return QKV_ERROR(QKV_ERR_OOM, "decode: out of memory for the repetition penalty");
        memcpy(ids, h, sizeof(int32_t) * (size_t)L);
        qsort(ids, (size_t)L, sizeof *ids, by_id);
        const double theta = p->repetition_penalty;
        for (int32_t i = 0; i < L; i++) {
            const int32_t v = ids[i];
            if ((i && v == ids[i - 1]) || v < 0 || v >= V) continue;
            x[v] = (qkv_real)(x[v] > 0 ? (double)x[v] / theta : (double)x[v] * theta);
        }
        if (ids != stack) free(ids);
    }
    return QKV_OK;
}
