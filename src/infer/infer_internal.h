/*
 * infer_internal.h: what the decoding files share: the session layout (session.c, step.c) and
 * the description of one decoding job with its helpers (decode.c) used by the search strategies
 * (greedy.c, beam.c, sample.c, mask_predict.c).
 *
 * Dims: B inputs, N rows, L positions per row, S source length, C d_model, H heads, D = C / H,
 * V target vocabulary.
 */
#ifndef QKV_INFER_INTERNAL_H
#define QKV_INFER_INTERNAL_H

#include "../nn/nn_internal.h"
#include "../kernels/backend.h"
#include "../kernels/gemm/gemm.h"
#include "qkv/qkv_decode.h"

/* ---- session ----------------------------------------------------------------------------------
 */

struct qkv_session {
    const qkv_model *m;
    qkv_session_params p;
    uint64_t serial;         /* which qkv_session_new made it (1, 2, ..): tests tell a reused
                              * session from a new one that malloc put at the same address */
    qkv_ctx *ctx;            /* step arena: reset at every step; gradients off */
    bool encoder_decoder;    /* else a decoder-only LM */
    int32_t n_layers;        /* decoder layers (the LM's causal stack) */
    int32_t n;               /* rows now */
    int32_t t;               /* positions fed so far */
    int32_t S;               /* source length of the encoded batch */
    bool started;            /* encode / start was called */
    int64_t H, D, C, L;      /* heads, head size, width, positions per row (= p.max_len) */
    qkv_real *self_kv;       /* per layer K then V: (max_rows, H, L, D) each */
    int32_t *self_rows;      /* (max_rows, L): row r's key position j is in self_kv row
                              * self_rows[r L + j] (the row that computed it) */
    bool self_rows_used;     /* self_rows is passed to the steps (after a reordering gather, and
                              * in qkv_session_new's measure run); else it is the identity */
    qkv_real *cross_kv;      /* per layer K then V: (n_src, H, S, D) each (S <= max_src_len), one
                              * row per source, read by row r at src_row[r] */
    qkv_tensor *headers;     /* 4 per layer: self K, self V, cross K, cross V */
    qkv_layer_cache *caches; /* per layer, pointing at the headers */
    int32_t *tokens;         /* (max_rows, L) tokens fed per row */
    int32_t *src;            /* (n, S) contiguous: the source ids of each row */
    qkv_real *memory;        /* use_cache false: (n, S, C) contiguous encoder output */
    qkv_tensor memory_t;     /* header over memory */
    int32_t *src_of;         /* (N) which source row the per-source data at each position holds */
    int32_t *src_next, *move_from, *move_to; /* (N) each: qkv_session_gather's work lists */
    int32_t *src_row, *src_row_next; /* (N) each: the cross-cache row (source) each row reads */
    int32_t *gather_needed;          /* (N): gather_rows' flags, old rows other rows read */
    int32_t n_src;                   /* cross-cache rows filled (the encoded batch) */
    unsigned char *scratch; /* qkv_session_gather: one buffer of the largest per-row block x N */
    size_t scratch_bytes;
    qkv__panels *panels; /* the weight panels (p.weight_panels, kernels/gemm/gemm_panels.c), or NULL */
    /* What the session's context runs on: its kernels' backend, and two copies of it that the
     * session owns, so that the context knows nothing of decoding: one multiplying from the
     * panels (steps after the first of a batch), one for the arena measure run. */
    const qkv_backend *backend;
    qkv_backend with_panels, measuring;
};

/* Point the cache headers at the current layout: n rows (all max_rows self-cache rows once
 * self_rows is in use, since rows past n may hold keys the table names), the source length S. */
void qkv__session_sync_headers(qkv_session *s);
/* The decoder step on tokens (n, T) at position s->t, without argument checks; advances s->t.
 * -> logits (n, T, V) in the session arena, or NULL with the context's status set. */
qkv_tensor *qkv__session_forward(qkv_session *s, const int32_t *tokens, int32_t T);

/* I32 (n, len) marking pad_id in ids (row stride ld) in ctx's arena, or NULL when no id is
 * pad_id (step.c). */
qkv_tensor *dec_padding_of(qkv_ctx *ctx, const int32_t *ids, int64_t n, int64_t len, int64_t ld,
                           int32_t pad);

/* ---- one decoding job ------------------------------------------------------------------------ */

/* qkv_decode.h's decoder: a model and the session the last call kept (NULL: none). */
struct qkv_decoder {
    const qkv_model *m;
    qkv_session *spare;
};

typedef struct dec_job {
    const qkv_model *m;
    qkv_decoder *decoder; /* keeps the session between calls; NULL: a session for this call only */
    qkv_decode_params p; /* validated; max_len resolved (>= 1) */
    int32_t batch;       /* B */
    int32_t V;           /* target vocabulary */
    int32_t pad_id;
    /* what every input starts from: the user's prompt (decoder-only) or BOS (encoder-decoder) */
    const int32_t *prompt; /* back to back */
    int64_t *prompt_off;   /* (B) */
    const int32_t *prompt_len;
    int32_t prompt_min, prompt_max;
    /* encoder-decoder sources, padded: (B, src_max) with pad_id */
    int32_t *src_padded;
    int32_t src_max;
    qkv_hypotheses *out;
} dec_job;

/* The token forced at position t of input b (its prompt), or -1 when t is past the prompt. */
static inline int32_t dec_forced(const dec_job *j, int32_t b, int32_t t) {
    return t < j->prompt_len[b] ? j->prompt[j->prompt_off[b] + t] : -1;
}

/* Open a session for up to max_width rows per input (the decoder's kept one when it fits, else a
 * new one): encode (encoder-decoder) or start (decoder-only) one row per input, feed the prompt
 * positions all inputs share (prompt_min), replicate each row width times (row b * width + i),
 * and copy the logits of the last fed position into *first ((B * width, V), malloc'd; free it).
 * End the search with dec_end. */
qkv_status dec_begin(const dec_job *j, int32_t width, int32_t max_width, qkv_session **s,
                     qkv_real **first);
/* The end of a search begun by dec_begin: s becomes the decoder's kept session after a
 * successful call (st == QKV_OK), replacing and freeing any other; after a failure, or without a
 * decoder, it is freed. */
void dec_end(const dec_job *j, qkv_session *s, qkv_status st);

/* log sum_v exp(logits[v]) in double (the max first), over all V ids (padding included); the
 * exponentials vectorised, the same bits in every vector width (decode.c). NaN for a row with a
 * NaN, a +inf or only -inf logits. */
double dec_logsumexp(const qkv_real *logits, int32_t V);
/* max_v logits[v] over v != skip (-inf when there is none; NaN when a logit is NaN). */
double dec_max_except(const qkv_real *logits, int32_t V, int32_t skip);
/* The first v < V other than skip with (double)logits[v] - lse == target; V when there is none. */
int32_t dec_first_logp(const qkv_real *logits, int32_t V, int32_t skip, double lse, double target);
/* log_softmax of one row of V logits in double, with -inf at the padding id:
 * out[v] = (double)logits[v] - dec_logsumexp(logits, V). */
void dec_log_softmax(const qkv_real *logits, int32_t V, int32_t pad_id, double *out);

/* log_softmax rows of a step's logits computed a window at a time, the rows of a window in
 * parallel (each row alone, so the values do not depend on the thread count): the strategies
 * walk the rows in ascending order and ask for each row (or each beam's rows) here. */
typedef struct dec_logp_window {
    double *logp;         /* (cap, V): rows lo .. hi - 1 of the current logits */
    int32_t V, cap, lo, hi;
} dec_logp_window;
/* A window of max(min_rows, up to 64 rows within ~4 MiB, 2) rows. */
qkv_status dec_logp_window_init(dec_logp_window *w, int32_t V, int32_t min_rows);
void dec_logp_window_free(dec_logp_window *w);
/* Forget the rows computed: the next step's logits are new. */
static inline void dec_logp_window_clear(dec_logp_window *w) { w->lo = w->hi = 0; }
/* The log-probabilities of rows r .. r + cnt - 1 of logits (n, V) (cnt <= the window's rows),
 * back to back; when they are not all there, the window moves to start at r (keeping the rows it
 * already has) and computes the rest. */
const double *dec_logp_rows(dec_logp_window *w, const dec_job *j, const qkv_real *logits,
                            int32_t n, int32_t r, int32_t cnt);

/* Fill *h (freeing its old tokens) with a hypothesis of input b: the tokens fed to session row
 * `row` after the prompt of b, then `last`; the score and the normalised score under the job's
 * length penalty. */
qkv_status dec_store(const dec_job *j, const qkv_session *s, int32_t row, int32_t b, int32_t last,
                     double score, qkv_hypothesis *h);

/* Whether p has a control of the next token on (controls.c). */
bool dec_controls_on(const qkv_decode_params *p);
/* Apply the job's controls to x, the V logits of a session row whose fed tokens are fed[0, t)
 * (in place: a step's logits belong to the search until the next step). */
qkv_status dec_control_logits(const dec_job *j, const int32_t *fed, int32_t t, qkv_real *x);

/* The strategies (greedy.c, beam.c, sample.c); the job's output is allocated and zeroed. */
qkv_status dec_greedy(const dec_job *j);
qkv_status dec_beam(const dec_job *j);
qkv_status dec_sample(const dec_job *j);
qkv_status dec_mask_predict(const dec_job *j); /* mask_predict.c: non-autoregressive models */

/* Mask-predict's re-mask count after pass t of T (1 <= t < T) for a row of length L:
 * floor(L (T - t) / T). */
int32_t dec_mask_predict_count(int32_t L, int32_t T, int32_t t);
/* masked[i] = whether position i is among the n of lowest score[0 .. L) (ties: the lower
 * position first). */
void dec_mask_lowest(const double *score, int32_t L, int32_t n, bool *masked);

/* Decoding with independent rows (greedy and sampling): width rows per input, the token of each
 * row chosen by choose(user, logits row, position, input b, row-in-input i, &log-probabilities)
 * -> token; choose NULL: greedy, dec_argmax of every row's log-probabilities, computed for all
 * rows of a step at once (in parallel) without writing the rows out. Rows leave the batch when
 * they end; each stores its hypothesis in slot i. */
typedef int32_t (*dec_choose_fn)(const dec_job *j, void *user, const qkv_real *logits,
                                 const double *logp, int32_t t, int32_t b, int32_t i);
qkv_status dec_independent_rows(const dec_job *j, int32_t width, dec_choose_fn choose, void *user);

/* The most probable token of a log-probability row (ties: the lowest id; never pad_id). */
int32_t dec_argmax(const dec_job *j, const double *logp);
/* dec_argmax of the row dec_log_softmax(logits) would write, its values made on the fly (the same
 * doubles, so the same token); *logp_best: that token's log-probability. */
int32_t dec_argmax_logits(const dec_job *j, const qkv_real *logits, double *logp_best);

/* Order each input's stored hypotheses by normalised score, best first (stable). */
void dec_sort_hypotheses(qkv_hypotheses *h);

#endif
