/*
 * qkv_decode.h: autoregressive decoding of encoder-decoder models and decoder-only language
 * models: greedy search, beam search (length penalties, n-best lists with scores) and sampling
 * (temperature, top-k, top-p), batched, with a KV cache; and mask-predict for non-autoregressive
 * encoder-decoders (qkv_model_config.nat). docs/decoding.md has the details.
 *
 * Two layers, as whisper.cpp / llama.cpp split model and state:
 *
 *   session  per-request state over a shared, read-only qkv_model: a step arena, the
 *            self-attention KV cache of every decoder layer (N, H, L, D), the cross-attention
 *            keys / values of the encoded source, and the tokens fed so far. Everything is
 *            allocated once by qkv_session_new for (max_rows, max_len, max_src_len); a step
 *            resets the arena, so memory does not grow with the number of steps (but for the
 *            weight panels, copies of the decoder weights that a session makes at its first
 *            batch of 8 or more rows: qkv_session_params.weight_panels). Rows are
 *            reordered or dropped with qkv_session_gather (beam search's reorder, finished
 *            sentences leaving the batch). Not thread-safe; one session per thread.
 *   decode   qkv_decode (encoder-decoder) and qkv_generate (decoder-only) run a whole search
 *            over a batch and return the hypotheses.
 *
 * Memory: qkv_decode and qkv_generate open a session, decode and free it. A qkv_decoder keeps
 * its last session for the next call, which reuses it when it is large enough (rows, positions
 * and source length at least the call's, the same kernels, cache mode and weight panels): its
 * caches, arena and panels are already mapped, where a fresh session page-faults in every byte
 * it touches (tens of thousands of faults a call on config S). Results are the bits
 * a fresh session gives. A kept session too small is replaced by one as large as both calls need
 * in each size (or, where that cannot be allocated, by one of the call's own sizes). It is taken
 * and given back atomically, so calls on one decoder from several threads stay safe (each then
 * works on its own session). The model holds no decoding state: a decoder refers to its model,
 * which must outlive it.
 *
 * Scores are natural-log probabilities under the model (log_softmax of the logits at
 * temperature 1), summed over the generated tokens, EOS included. The padding token is never
 * generated (its probability is not renormalised away: fairseq's convention).
 *
 * Dims: B inputs, N rows (B x beam or B x samples), T positions fed in one step, V target
 * vocabulary, L positions per row, S source length.
 */
#ifndef QKV_DECODE_H
#define QKV_DECODE_H

#include "qkv_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- session ----------------------------------------------------------------------------------
 */

typedef struct qkv_session qkv_session;

typedef struct qkv_session_params {
    int32_t max_rows;    /* N: most rows decoded at once (batch x beam); >= 1 */
    int32_t max_len;     /* L: most positions per row (prompt / BOS + generated tokens fed);
                            1 .. the model's max_len */
    int32_t max_src_len; /* encoder-decoder: longest source (1 .. model max_len); ignored for LMs */
    bool use_cache;      /* true (default): KV cache. false: every step re-runs the whole decoder
                            over all fed positions (the reference the cache is tested against,
                            and the benchmark's baseline) */
    qkv_kernels kernels; /* kernel set of the session's context (default FAST) */
    size_t arena_bytes;  /* initial step-arena size; 0: the context default (16 MiB) */
    bool weight_panels;  /* true (default): from the second step of an encoded / started batch,
                            each decoder weight that a step multiplies is copied once per batch
                            into the layout of the kernel that multiplies it, and multiplied
                            from there (AVX-512F CPUs, src/kernels/gemm/weight_copies.c): at
                            8 .. 96 rows a weight of at least 1 MiB into panels for those rows;
                            at more rows (and some smaller weights at 32 .. 96) into the packed
                            GEMM's panels, which it then never packs again (BENCHMARKS.md has
                            the gains). The same results bit for bit, for as much memory again
                            as the weights copied. false: no copy */
} qkv_session_params;

QKV_API qkv_session_params qkv_session_default_params(void);
/* Allocates every buffer, then runs the largest single-token steps (max_rows rows at positions
 * max_len - 1 and max_len - 2) so the arena reaches its high-water mark once: later single-token
 * steps never call malloc (a longer prompt step may grow it once). */
QKV_API qkv_status qkv_session_new(const qkv_model *m, const qkv_session_params *p,
                                   qkv_session **out);
QKV_API void qkv_session_free(qkv_session *s); /* accepts NULL */

/* Encoder-decoder: encode src I32 (B, S) row-major (keys equal to pad_id are masked, as in
 * qkv_model_encode) and cache every decoder layer's cross-attention keys / values. Starts B rows
 * at position 0 (row b = source b). B <= max_rows, S <= max_src_len. */
QKV_API qkv_status qkv_session_encode(qkv_session *s, const int32_t *src, int32_t B, int32_t S);
/* Decoder-only: start n_rows rows at position 0 with an empty cache. */
QKV_API qkv_status qkv_session_start(qkv_session *s, int32_t n_rows);
/* Feed tokens (N, T) row-major at positions t .. t+T-1 (t = qkv_session_length) of every row;
 * *logits receives the next-token logits (N, T, V) of those positions, a tensor of the session's
 * arena valid until the next call on s. t + T <= max_len; every token in [0, V). */
QKV_API qkv_status qkv_session_step(qkv_session *s, const int32_t *tokens, int32_t T,
                                    qkv_tensor **logits);
/* Keep rows: new row i is old row rows[i] (i < n_rows; rows may repeat, e.g. to expand a beam;
 * n_rows <= max_rows, may be 0). Every cached tensor and the token history move with the rows. */
QKV_API qkv_status qkv_session_gather(qkv_session *s, const int32_t *rows, int32_t n_rows);
QKV_API int32_t qkv_session_rows(const qkv_session *s);   /* N now */
QKV_API int32_t qkv_session_length(const qkv_session *s); /* positions fed so far */
/* The tokens fed to row `row` so far (qkv_session_length of them); NULL for a bad row. */
QKV_API const int32_t *qkv_session_tokens(const qkv_session *s, int32_t row);
/* The session's context (arena statistics: qkv_ctx_arena_peak, qkv_ctx_arena_mallocs). */
QKV_API const qkv_ctx *qkv_session_ctx(const qkv_session *s);

/* ---- search -----------------------------------------------------------------------------------
 */

/* qkv_decode_strategy: qkv_enums.h lists its values. */

/* How a finished hypothesis of `length` tokens (EOS included) and log-probability `score` is
 * ranked: by score / lp(length). */
/* qkv_length_penalty: qkv_enums.h lists its values. */

typedef struct qkv_decode_params {
    qkv_decode_strategy strategy; /* default BEAM */
    int32_t max_len;   /* most generated tokens per hypothesis, EOS included (mask-predict: the
                          longest target length considered); 0 (default): as many
                          as the model's max_len allows (encoder-decoder: max_len; decoder-only:
                          max_len + 1 - the longest prompt) */
    int32_t beam_size; /* beam search: K >= 1 (default 4) */
    int32_t n_best;    /* hypotheses returned per input: beam 1 .. K, the best first; sampling:
                          that many independent samples, ordered by normalised score; greedy: 1
                          (default 1) */
    qkv_length_penalty length_penalty; /* default AVERAGE */
    double alpha;                      /* GNMT exponent (default 0.6) */
    double temperature;                /* sampling: logits / temperature; 0 = argmax (default 1) */
    int32_t top_k;       /* sampling: keep the k most probable tokens; 0 = all (default 0) */
    double top_p;        /* sampling: keep the smallest set of most probable tokens whose
                            probability reaches top_p (after top-k), in (0, 1]; 1 = all (default) */
    uint64_t seed;       /* sampling: random stream (Philox of seed, position, row) (default 0) */
    int32_t bos_id;      /* encoder-decoder: first decoder input: QKV_DECODE_MODEL_ID (the
                            default) takes the model's (qkv_model_config.bos_id); any other id
                            must equal it */
    int32_t eos_id;      /* ends a hypothesis: QKV_DECODE_MODEL_ID (default) the model's eos_id;
                            -1: none, every hypothesis runs to max_len; any other id must equal
                            the model's */
    bool use_cache;      /* default true; false: the uncached reference (see qkv_session_params) */
    qkv_kernels kernels; /* default FAST */
    int32_t iterations;  /* mask-predict: decoder passes T >= 1 (default 10, the paper's) */
    int32_t length_beam; /* mask-predict: length candidates l >= 1 per input, n_best <= l
                            (default 5, the paper's) */
    bool weight_panels;  /* default true: the session's weight panels (qkv_session_params) */
    /* Controls of the next token (greedy, beam and sampling; mask-predict refuses them), applied
     * to each step's logits before anything else reads them, in this order. "The hypothesis'
     * tokens" are those fed after the first position: a decoder-only prompt after its first
     * token, an encoder-decoder's forced prefix, and what was generated. */
    const uint8_t *allowed;    /* NULL (default), or V flags: a token whose flag is 0 is never
                                  generated (its logit becomes -inf); EOS always may be
                                  (vocabulary restriction) */
    int32_t no_repeat_ngram;   /* n >= 1: a token that would repeat an n-gram of the hypothesis'
                                  tokens is never generated (fairseq's --no-repeat-ngram-size;
                                  1: no token twice); 0 (default): off */
    double repetition_penalty; /* theta > 0: the logit x of each distinct token of the hypothesis
                                  becomes x / theta when x > 0, x * theta otherwise (Keskar et al.
                                  2019, CTRL); 1 (default): off */
    /* Encoder-decoder: a forced target prefix. Input b's hypotheses continue prefix[o_b ..
     * o_b + prefix_len[b]) (the inputs' prefixes back to back, o_b the sum of the earlier
     * lengths; a length may be 0): the prefix is fed as decoder-only prompts are, so the returned
     * tokens and scores are those of the continuation. NULL (default): none. */
    const int32_t *prefix;
    const int32_t *prefix_len;
} qkv_decode_params;

/* bos_id / eos_id: the model's own (qkv_model_config), which decoding fills in. */
#define QKV_DECODE_MODEL_ID (-2)

QKV_API qkv_decode_params qkv_decode_default_params(void);

/* The divisor lp(length) of a length penalty (alpha used by GNMT only). */
QKV_API double qkv_length_penalty_value(qkv_length_penalty kind, double alpha, int32_t length);

typedef struct qkv_hypothesis {
    int32_t *tokens;   /* (length) generated ids; EOS is the last one when finished (mask-predict:
                          the predicted tokens, no EOS) */
    int32_t length;    /* >= 1 */
    double score;      /* sum of the log-probabilities of the tokens */
    double norm_score; /* score / lp(length): the ranking key (mask-predict: score / length, the
                          average log-probability, whatever length_penalty says) */
    bool finished;     /* ended with EOS (false: stopped at max_len); mask-predict: true */
} qkv_hypothesis;

typedef struct qkv_hypotheses {
    int32_t batch;       /* B */
    int32_t n_best;      /* slots per input */
    int32_t *count;      /* (B) hypotheses found per input (<= n_best; beam search may find fewer
                            on a tiny vocabulary) */
    qkv_hypothesis *hyp; /* (B, n_best): hyp[b * n_best + i], best first */
    int32_t eos_id;      /* the end token the decode used (the model's, or -1: none): a finished
                            hypothesis ends with it, e.g. qkv_seq_length(tokens, length, eos_id) */
} qkv_hypotheses;

/* Free what a decode call put in h (not h itself) and zero it; accepts NULL or a zeroed h. */
QKV_API void qkv_hypotheses_free(qkv_hypotheses *h);

/* Encoder-decoder: decode `batch` sources given back to back in src (src_len[b] ids each, no
 * padding; padded internally with pad_id) with the strategy of p (NULL: defaults). *out is
 * overwritten (free it with qkv_hypotheses_free). Errors: QKV_ERR_INVALID_ARG for NULL
 * pointers, bad parameters, ids outside the vocabulary or a model that is not encoder-decoder;
 * QKV_ERR_SHAPE for lengths < 1 or over the model's max_len; the message names the problem. */
QKV_API qkv_status qkv_decode(const qkv_model *m, const int32_t *src, const int32_t *src_len,
                              int32_t batch, const qkv_decode_params *p, qkv_hypotheses *out);
/* Decoder-only: continue `batch` prompts given back to back (prompt_len[b] >= 1 ids each; the
 * hypotheses hold the continuation only). Prompts of different lengths decode together: a row
 * is fed its own prompt tokens until its prompt ends. Prompt length + max_len - 1 must not exceed
 * the model's max_len. Errors as qkv_decode. */
QKV_API qkv_status qkv_generate(const qkv_model *m, const int32_t *prompt,
                                const int32_t *prompt_len, int32_t batch,
                                const qkv_decode_params *p, qkv_hypotheses *out);

/* A model's decoder: qkv_decode / qkv_generate that keep their session for the next call (see
 * Memory at the top). For repeated calls on one model: evaluation loops, a server. */
typedef struct qkv_decoder qkv_decoder;
QKV_API qkv_status qkv_decoder_new(const qkv_model *m, qkv_decoder **out);
QKV_API void qkv_decoder_free(qkv_decoder *d); /* accepts NULL */
/* Free the kept session now (the next call allocates a new one). Accepts NULL. */
QKV_API void qkv_decoder_release_memory(qkv_decoder *d);
QKV_API qkv_status qkv_decoder_decode(qkv_decoder *d, const int32_t *src, const int32_t *src_len,
                                      int32_t batch, const qkv_decode_params *p, qkv_hypotheses *out);
QKV_API qkv_status qkv_decoder_generate(qkv_decoder *d, const int32_t *prompt,
                                        const int32_t *prompt_len, int32_t batch,
                                        const qkv_decode_params *p, qkv_hypotheses *out);

#ifdef __cplusplus
}
#endif
#endif
