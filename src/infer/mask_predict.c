/*
 * mask_predict.c: decoding of non-autoregressive models (qkv_model_config.nat) by mask-predict
 * (Ghazvininejad, Levy, Liu & Zettlemoyer 2019, section 3.2), batched over inputs and length
 * candidates. With one iteration it is the parallel decoding of Gu et al. (2018): every token
 * predicted at once from a fully masked target.
 *
 * For input b: the length logits (qkv_model_length_logits) give the l = length_beam most probable
 * lengths among 1 .. max_len (ties: the shorter first); each candidate length L is one row.
 * With T = iterations, a row of length L runs
 *
 *   pass 0:       Y = all mask_id; for every position i: y_i = argmax_v p(v | X, Y),
 *                 s_i = log p(y_i | X, Y)
 *   pass t = 1 .. T-1:
 *                 n = floor(L (T - t) / T); re-mask the n positions of lowest s_i (ties: the
 *                 lower position first); predict the masked positions as in pass 0 from the
 *                 observed others; the other tokens keep their y_i and s_i
 *
 * and scores sum_i s_i, ranked by the average log-probability (1 / L) sum_i s_i, the paper's
 * choice among the length candidates (norm_score; ties: the more probable length). p is the
 * log_softmax of the logits over the whole vocabulary; the argmax skips pad_id and mask_id (ties:
 * the lowest id), which are never targets. A pass runs only the rows that have masked positions
 * (n = 0 ends a row early), all of them in one decoder call (rows padded to the longest); the
 * encoder runs once per call. Everything is a pure function of the model and the inputs.
 *
 * Dims: B inputs, K length candidates per input, N = B K rows, A rows in a pass, S source
 * length, L a row's length, W the widest active row, C d_model, V target vocabulary.
 */
#include "infer_internal.h"

#include <math.h>
#include <stdlib.h>

int32_t dec_mask_predict_count(int32_t L, int32_t T, int32_t t) {
    return (int32_t)((int64_t)L * (T - t) / T);
}

void dec_mask_lowest(const double *score, int32_t L, int32_t n, bool *masked) {
    for (int32_t i = 0; i < L; i++) {
        int32_t rank = 0; /* positions that come before i: lower score, or equal and earlier */
        for (int32_t k = 0; k < L && rank < n; k++)
            rank += score[k] < score[i] || (score[k] == score[i] && k < i);
        masked[i] = rank < n;
    }
}

/* One row: a length candidate of input `input`. */
typedef struct {
    int32_t input, L;
    int32_t *tok;  /* (L) */
    double *score; /* (L) log-probability of each token when it was last predicted */
    bool *masked;  /* (L) */
} mp_row;

/* The K most probable lengths of one input among 1 .. max_len (ties: the shorter first) -> out. */
static void top_lengths(const qkv_real *logits, int32_t max_len, int32_t K, int32_t *out) {
    for (int32_t k = 0; k < K; k++) {
        int32_t best = -1;
        for (int32_t L = 1; L <= max_len; L++) {
            bool taken = false;
            for (int32_t q = 0; q < k && !taken; q++)
                taken = out[q] == L;
            if (!taken && (best < 0 || logits[L] > logits[best])) best = L;
        }
        out[k] = best;
    }
}

/* Encode the sources and pick each input's length candidates: rows[b K + k].L, and the encoder
 * output into *memory ((B, S, C), malloc'd). */
static qkv_status encode_and_lengths(const dec_job *j, qkv_ctx *ctx, int32_t K, mp_row *rows,
                                     qkv_real **memory) {
    const qkv_model *m = j->m;
    const int64_t B = j->batch, S = j->src_max, C = m->cfg.d_model;
    qkv_ctx_reset(ctx);
    qkv_tensor *src = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, S}, j->src_padded);
    qkv_tensor *mem = qkv_contiguous(ctx, qkv_model_encode(ctx, m, src, NULL)); /* (B, S, C) */
    qkv_tensor *len = qkv_model_length_logits(ctx, m, mem, src); /* (B, max_len + 1) */
    qkv_status st = qkv_ctx_status(ctx);
    if (st) return st;
    *memory = malloc(sizeof(qkv_real) * (size_t)(B * S * C));
    int32_t *cand = malloc(sizeof(int32_t) * (size_t)K);
    if (!*memory || !cand) {
        free(cand);
        return QKV_ERROR(QKV_ERR_OOM, "decode: out of memory for the encoder output");
    }
    memcpy(*memory, qkv__data(mem), sizeof(qkv_real) * (size_t)(B * S * C));
    for (int32_t b = 0; b < B; b++) {
        top_lengths(qkv__data(len) + (int64_t)b * (m->cfg.max_len + 1), j->p.max_len, K, cand);
        for (int32_t k = 0; k < K; k++)
            rows[b * K + k] = (mp_row){.input = b, .L = cand[k]};
    }
    free(cand);
    return QKV_OK;
}

/* One decoder pass over the rows in `active` (n_active of them): feed each row's tokens with its
 * masked positions set to mask_id, and re-predict those positions. */
static qkv_status predict(const dec_job *j, qkv_ctx *ctx, const qkv_real *memory, mp_row *rows,
                          const int32_t *active, int32_t n_active, double *logp) {
    const qkv_model *m = j->m;
    const int64_t A = n_active, S = j->src_max, C = m->cfg.d_model, V = j->V;
    int64_t W = 0;
    for (int32_t a = 0; a < n_active; a++)
        if (rows[active[a]].L > W) W = rows[active[a]].L;
    qkv_ctx_reset(ctx);
    qkv_tensor *src = qkv__alloc(ctx, QKV_I32, 2, (int64_t[]){A, S});
    qkv_tensor *tgt = qkv__alloc(ctx, QKV_I32, 2, (int64_t[]){A, W});
    qkv_tensor *mem = qkv__alloc(ctx, QKV_REAL, 3, (int64_t[]){A, S, C});
    if (!src || !tgt || !mem) return qkv_ctx_status(ctx);
    for (int64_t a = 0; a < A; a++) {
        const mp_row *r = &rows[active[a]];
        memcpy(qkv__idata(src) + a * S, j->src_padded + (int64_t)r->input * S,
               sizeof(int32_t) * (size_t)S);
        memcpy(qkv__data(mem) + a * S * C, memory + (int64_t)r->input * S * C,
               sizeof(qkv_real) * (size_t)(S * C));
        for (int64_t i = 0; i < W; i++)
            qkv__idata(tgt)[a * W + i] = i >= r->L      ? j->pad_id
                                         : r->masked[i] ? m->cfg.mask_id
                                                        : r->tok[i];
    }
    qkv_tensor *logits = qkv_model_decode(ctx, m, tgt, mem, src, NULL, NULL); /* (A, W, V) */
    qkv_status st = qkv_ctx_status(ctx);
    if (st) return st;
    for (int64_t a = 0; a < A; a++) {
        mp_row *r = &rows[active[a]];
        for (int32_t i = 0; i < r->L; i++) {
            if (!r->masked[i]) continue;
            dec_log_softmax(qkv__data(logits) + (a * W + i) * V, (int32_t)V, j->pad_id, logp);
            int32_t best = -1; /* the lowest id of the largest log-probability, never pad or mask */
            for (int32_t v = 0; v < V; v++)
                if (v != j->pad_id && v != m->cfg.mask_id && (best < 0 || logp[v] > logp[best]))
                    best = v;
            r->tok[i] = best;
            r->score[i] = logp[best];
        }
    }
    return QKV_OK;
}

/* Input b's K rows, best average log-probability first (stable: ties keep the length order), into
 * its n_best hypothesis slots. order: K ints of scratch. */
static qkv_status store(const dec_job *j, const mp_row *rows, int32_t K, int32_t b,
                        int32_t *order) {
    const mp_row *cand = rows + (size_t)b * K;
    double *sum = malloc(sizeof(double) * (size_t)K);
    if (!sum) return QKV_ERROR(QKV_ERR_OOM, "decode: out of memory");
    for (int32_t k = 0; k < K; k++) {
        order[k] = k;
        sum[k] = 0;
        for (int32_t i = 0; i < cand[k].L; i++)
            sum[k] += cand[k].score[i];
    }
#define AVG(k) (sum[k] / cand[k].L)
    for (int32_t k = 1; k < K; k++) /* insertion sort by average, descending, stable */
        for (int32_t q = k; q > 0 && AVG(order[q]) > AVG(order[q - 1]); q--) {
            const int32_t tmp = order[q];
            order[q] = order[q - 1];
            order[q - 1] = tmp;
        }
    qkv_status st = QKV_OK;
    const int32_t n = K < j->p.n_best ? K : j->p.n_best;
    for (int32_t k = 0; k < n && !st; k++) {
        const mp_row *r = &cand[order[k]];
        qkv_hypothesis *h = &j->out->hyp[(size_t)b * j->p.n_best + (size_t)k];
        h->tokens = malloc(sizeof(int32_t) * (size_t)r->L);
        if (!h->tokens) {
            st = QKV_ERROR(QKV_ERR_OOM, "decode: out of memory for a hypothesis");
            break;
        }
        memcpy(h->tokens, r->tok, sizeof(int32_t) * (size_t)r->L);
        h->length = r->L;
        h->score = sum[order[k]];
        h->norm_score = AVG(order[k]);
        h->finished = true;
        j->out->count[b]++;
    }
#undef AVG
    free(sum);
    return st;
}

qkv_status dec_mask_predict(const dec_job *j) {
    const int32_t B = j->batch, T = j->p.iterations;
    const int32_t K = j->p.length_beam < j->p.max_len ? j->p.length_beam : j->p.max_len, N = B * K;
    qkv_ctx_params cp = qkv_ctx_default_params();
    cp.kernels = j->p.kernels;
    qkv_ctx *ctx = NULL;
    qkv_status st = qkv_ctx_new(&cp, &ctx);
    if (st) return st;
    qkv_ctx_set_grad_enabled(ctx, false);
    mp_row *rows = calloc((size_t)N, sizeof *rows);
    int32_t *active = malloc(sizeof(int32_t) * (size_t)N);
    double *logp = malloc(sizeof(double) * (size_t)j->V);
    int32_t *tok = NULL;
    double *score = NULL;
    bool *masked = NULL;
    qkv_real *memory = NULL;
    if (!rows || !active || !logp) st = QKV_ERROR(QKV_ERR_OOM, "decode: out of memory");
    if (!st) st = encode_and_lengths(j, ctx, K, rows, &memory);
    if (!st) { /* every row's arrays in three blocks */
        int64_t total = 0;
        for (int32_t r = 0; r < N; r++)
            total += rows[r].L;
        tok = malloc(sizeof(int32_t) * (size_t)total);
        score = malloc(sizeof(double) * (size_t)total);
        masked = malloc(sizeof(bool) * (size_t)total);
        if (!tok || !score || !masked) st = QKV_ERROR(QKV_ERR_OOM, "decode: out of memory");
        for (int64_t r = 0, at = 0; !st && r < N; at += rows[r].L, r++) {
            rows[r].tok = tok + at, rows[r].score = score + at, rows[r].masked = masked + at;
            for (int32_t i = 0; i < rows[r].L; i++)
                rows[r].masked[i] = true, rows[r].score[i] = 0;
        }
    }
    for (int32_t t = 0; !st && t < T; t++) {
        int32_t n_active = 0;
        for (int32_t r = 0; r < N; r++) {
            if (t > 0)
                dec_mask_lowest(rows[r].score, rows[r].L, dec_mask_predict_count(rows[r].L, T, t),
                                rows[r].masked);
            bool any = false;
            for (int32_t i = 0; i < rows[r].L && !any; i++)
                any = rows[r].masked[i];
            if (any) active[n_active++] = r;
        }
        if (n_active == 0) break; /* n = 0 from here on: nothing left to re-predict */
        st = predict(j, ctx, memory, rows, active, n_active, logp);
    }
    for (int32_t b = 0; !st && b < B; b++)
        st = store(j, rows, K, b, active);
    free(tok), free(score), free(masked), free(memory);
    free(rows), free(active), free(logp);
    qkv_ctx_free(ctx);
    return st;
}
