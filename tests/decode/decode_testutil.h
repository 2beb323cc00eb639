/*
 * decode_testutil.h: what the decoding tests share: tiny random models in every attention
 * variant, decode parameters for the run's kernel set, an independent scorer (teacher forcing
 * through the full-sequence forward, qkv_model_decode / qkv_model_lm, with a log-softmax in
 * double) and an exhaustive search over every sequence of at most max_len tokens.
 *
 * Vocabularies of the test models: pad 0, BOS 1, EOS 2, then ordinary tokens.
 */
#ifndef QKV_TEST_DECODE_UTIL_H
#define QKV_TEST_DECODE_UTIL_H

#include "testutil.h"

#define DT_PAD 0
#define DT_BOS 1
#define DT_EOS 2

/* float 1e-5, double 1e-10 (relative to max(1, |x|)) */
#ifdef QKV_DOUBLE
#define DT_TOL 1e-10
#else
#define DT_TOL 1e-5
#endif

typedef struct dt_variant {
    const char *name;
    qkv_score_kind score;
    qkv_attn_norm norm;
    qkv_relpos_kind relpos;
    qkv_abs_pos pos;
    bool norm_first;
    bool tie;      /* tie the output projection to the target embedding */
    bool no_final; /* no final LayerNorm */
    bool bidirectional_t5;
} dt_variant;

/* The variants every cached-vs-full test runs (score functions, normalisers, relative and
 * absolute positions, pre/post-LN). */
extern const dt_variant dt_variants[];
extern const int dt_n_variants;

/* Encoder-decoder: d_model 8, 2 heads, 2 + 2 layers, src vocab 11, tgt vocab tgt_vocab,
 * max_len 16, dropout 0; the output projection scaled by `sharpen` (peakier distributions). */
qkv_model *dt_seq2seq(const dt_variant *v, int32_t tgt_vocab, double sharpen, uint64_t seed);
/* Decoder-only LM with the same sizes (vocab `vocab`). */
qkv_model *dt_lm(const dt_variant *v, int32_t vocab, double sharpen, uint64_t seed);

/* Defaults with the run's kernel set. */
/* *m initialised from cfg with its parameters in a new *p (free it) under prefix, reset with
 * seed. */
void dt_mha(qkv_mha *m, qkv_params **p, const qkv_mha_config *cfg, const char *prefix,
            uint64_t seed);

qkv_decode_params dt_params(qkv_decode_strategy strategy);

/* Whether two decode results are the same bits: counts, and per hypothesis its length, finished
 * flag, tokens, score and normalised score. */
bool dt_same_bits(const qkv_hypotheses *x, const qkv_hypotheses *y);

/* Sum of log p(tokens[g] | prefix) under the full forward: encoder-decoder with prefix [BOS] +
 * tokens[<g] and source src (src_len ids), or decoder-only with prefix prompt + tokens[<g]. The
 * padding token's probability is kept in the normaliser (as the decoders do). */
double dt_teacher_score(const qkv_model *m, const int32_t *src, int32_t src_len,
                        const int32_t *tokens, int32_t len);

/* The next-token logits (V, in double) after fed[0, n_fed) under the full forward: an
 * encoder-decoder's fed tokens start with BOS, a decoder-only's with its prompt. */
void dt_next_logits(const qkv_model *m, const int32_t *src, int32_t src_len, const int32_t *fed, int32_t n_fed,
                    double *out);

/* Every sequence of at most max_len tokens (ending with EOS, or max_len long), pad never used,
 * with its log-probability, into a malloc'd list (*n entries). */
typedef struct dt_seq {
    int32_t tokens[8];
    int32_t length;
    double score;
} dt_seq;
dt_seq *dt_exhaustive(const qkv_model *m, const int32_t *src, int32_t src_len, int32_t max_len,
                      int32_t *n);

/* Whether two token lists are equal. */
bool dt_same_tokens(const int32_t *a, int32_t na, const int32_t *b, int32_t nb);

#endif
