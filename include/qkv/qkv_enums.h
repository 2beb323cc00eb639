/*
 * qkv_enums.h: the enumerations of the API whose values model files, configuration files and the
 * command line name, each written once as a list of its values, one line per value: X(constant,
 * name, help). (Enumerations that are only codes inside the program, such as qkv_status or
 * qkv_dtype, stay in their headers.) The enum takes the constants in order from 0; the registry
 * (qkv_registry.h, src/core/registry.c) takes the names that model files, configuration files and
 * `qkv list` use, and the help lines, from the same list. A new value is a line at the end of its
 * list (docs/adding-an-op.md); a name, once released, is never changed: model files store it.
 */
#ifndef QKV_ENUMS_H
#define QKV_ENUMS_H

/* The enum constant of a list line. */
#define QKV_ENUM_CONSTANT(constant, name, help) constant,

/* ---- models (qkv_model.h) ---------------------------------------------------------------------- */

/* Architecture (registry "arch"):
 *   QKV_ARCH_ENCODER: sequence labelling or classification */
#define QKV_ARCH_VALUES(X)                                                                         \
    X(QKV_ARCH_ENCODER_DECODER, "encoder-decoder", "encoder and autoregressive decoder with cross-attention (Vaswani et al. 2017)") \
    X(QKV_ARCH_ENCODER, "encoder", "encoder only: one prediction per token or per sequence (tagging, classification, images)") \
    X(QKV_ARCH_DECODER, "decoder", "decoder only, causal: a language model")
typedef enum qkv_arch { QKV_ARCH_VALUES(QKV_ENUM_CONSTANT) } qkv_arch;

/* Absolute positional encoding (registry "pos") */
#define QKV_ABS_POS_VALUES(X)                                                                      \
    X(QKV_POS_NONE, "none", "no absolute positions (relative ones may stand in)")                  \
    X(QKV_POS_SINUSOIDAL, "sinusoidal", "fixed sin/cos of the position (Vaswani et al. 2017)")     \
    X(QKV_POS_LEARNED, "learned", "one learned vector per position (Gehring et al. 2017)")         \
    X(QKV_POS_SINCOS_2D, "sincos_2d", "image models: fixed 2-D sin/cos of the patch's row and column (MAE, He et al. 2022)")
typedef enum qkv_abs_pos { QKV_ABS_POS_VALUES(QKV_ENUM_CONSTANT) } qkv_abs_pos;

/* Encoder-only output head (registry "head"); pooled: the mean over the non-padded tokens */
#define QKV_HEAD_KIND_VALUES(X)                                                                    \
    X(QKV_HEAD_TOKEN, "token", "one prediction per token (tagging)")                               \
    X(QKV_HEAD_POOLED, "pooled", "one prediction per sequence: the mean over its tokens (image models: or the [CLS] token)")
typedef enum qkv_head_kind { QKV_HEAD_KIND_VALUES(QKV_ENUM_CONSTANT) } qkv_head_kind;

/* ---- layers and attention (qkv_nn.h, ops/attention.h) ------------------------------------------ */

/* Feed-forward activation (registry "activation") */
#define QKV_ACTIVATION_VALUES(X)                                                                   \
    X(QKV_ACT_RELU, "relu", "max(0, x)")                                                           \
    X(QKV_ACT_GELU, "gelu", "x Phi(x), the exact GELU (Hendrycks & Gimpel 2016)")                  \
    X(QKV_ACT_GELU_TANH, "gelu_tanh", "GELU's tanh approximation (GPT-2)")
typedef enum qkv_activation { QKV_ACTIVATION_VALUES(QKV_ENUM_CONSTANT) } qkv_activation;

/* Relative positional encoding (registry "relpos") */
#define QKV_RELPOS_KIND_VALUES(X)                                                                  \
    X(QKV_RELPOS_NONE, "none", "no relative positions")                                            \
    X(QKV_RELPOS_SHAW, "shaw", "clipped relative key and value embeddings (Shaw et al. 2018)")     \
    X(QKV_RELPOS_T5, "t5", "bucketed relative bias per head (Raffel et al. 2020)")                 \
    X(QKV_RELPOS_ROPE, "rope", "rotary q and k (Su et al. 2021)")                                  \
    X(QKV_RELPOS_ALIBI, "alibi", "linear distance bias per head (Press et al. 2022)")
typedef enum qkv_relpos_kind { QKV_RELPOS_KIND_VALUES(QKV_ENUM_CONSTANT) } qkv_relpos_kind;

/* Attention score function (registry "score"):
 *   QKV_SCORE_GENERAL: q^T W k (Luong et al. 2015, "general"/bilinear) */
#define QKV_SCORE_KIND_VALUES(X)                                                                   \
    X(QKV_SCORE_DOT, "dot", "q . k")                                                               \
    X(QKV_SCORE_SCALED_DOT, "scaled_dot", "q . k / sqrt(D) (Vaswani et al. 2017)")                 \
    X(QKV_SCORE_ADDITIVE, "additive", "v^T tanh(W_q q + W_k k) (Bahdanau et al. 2015)")            \
    X(QKV_SCORE_GENERAL, "general", "q^T W k, bilinear (Luong et al. 2015)")                       \
    X(QKV_SCORE_COSINE, "cosine", "g cos(q, k), g fixed or learned per head (Henry et al. 2020)")
typedef enum qkv_score_kind { QKV_SCORE_KIND_VALUES(QKV_ENUM_CONSTANT) } qkv_score_kind;

/* Attention normaliser (registry "norm"):
 *   QKV_NORM_RELU: a = relu(e)
 *   QKV_NORM_RELU_ROWNORM: a = relu(e) / (sum_j relu(e_j) + eps), eps = 1e-6
 *   QKV_NORM_SIGMOID: a = sigmoid(e) (no normalisation across keys)
 *   QKV_NORM_SPARSEMAX: a = argmin_{p in simplex} |p - e|^2 = max(e - tau, 0), tau such that sum
 *     a = 1: exact zeros below tau (Martins & Astudillo 2016) */
#define QKV_ATTN_NORM_VALUES(X)                                                                    \
    X(QKV_NORM_SOFTMAX, "softmax", "exp(e_j) / sum_k exp(e_k) over the allowed keys")              \
    X(QKV_NORM_RELU, "relu", "relu(e_j), not normalised")                                          \
    X(QKV_NORM_RELU_ROWNORM, "relu_rownorm", "relu(e_j) / (sum_k relu(e_k) + 1e-6)")               \
    X(QKV_NORM_SIGMOID, "sigmoid", "sigmoid(e_j), each key on its own")                            \
    X(QKV_NORM_SPARSEMAX, "sparsemax", "max(e_j - tau, 0) summing to 1: sparse weights (Martins & Astudillo 2016)")
typedef enum qkv_attn_norm { QKV_ATTN_NORM_VALUES(QKV_ENUM_CONSTANT) } qkv_attn_norm;

/* ---- training (qkv_optim.h, qkv_train.h) ------------------------------------------------------- */

/* Learning-rate schedule (registry "lr_schedule") */
#define QKV_LR_KIND_VALUES(X)                                                                      \
    X(QKV_LR_CONSTANT, "constant", "base_lr at every step")                                        \
    X(QKV_LR_INV_SQRT, "inv_sqrt", "linear warm-up, then decay as 1/sqrt(step) (Vaswani et al. 2017)") \
    X(QKV_LR_WARMUP_COSINE, "cosine", "linear warm-up, then cosine decay to min_lr at the last step (Loshchilov & Hutter 2017)")
typedef enum qkv_lr_kind { QKV_LR_KIND_VALUES(QKV_ENUM_CONSTANT) } qkv_lr_kind;

/* Scheduled sampling decay (registry "scheduled_sampling") */
#define QKV_SS_KIND_VALUES(X)                                                                      \
    X(QKV_SS_NONE, "none", "teacher forcing: always the gold token")                               \
    X(QKV_SS_LINEAR, "linear", "p_gold = max(min_gold, 1 - step / decay_steps) (Bengio et al. 2015)") \
    X(QKV_SS_EXPONENTIAL, "exponential", "p_gold = max(min_gold, k^step), k < 1 (Bengio et al. 2015)") \
    X(QKV_SS_INVERSE_SIGMOID, "inverse_sigmoid", "p_gold = k / (k + exp(step / k)), k >= 1 (Bengio et al. 2015)")
typedef enum qkv_ss_kind { QKV_SS_KIND_VALUES(QKV_ENUM_CONSTANT) } qkv_ss_kind;

/* ---- decoding (qkv_decode.h) ------------------------------------------------------------------- */

/* Decoding strategy (registry "decode_strategy"):
 *   QKV_DECODE_GREEDY: argmax at every step (ties: the lowest id) */
#define QKV_DECODE_STRATEGY_VALUES(X)                                                              \
    X(QKV_DECODE_GREEDY, "greedy", "the most probable token at every step")                        \
    X(QKV_DECODE_BEAM, "beam", "beam search over the K best prefixes")                             \
    X(QKV_DECODE_SAMPLE, "sample", "ancestral sampling (temperature, top-k, top-p)")               \
    X(QKV_DECODE_MASK_PREDICT, "mask_predict", "non-autoregressive models: mask-predict (Ghazvininejad et al. 2019)")
typedef enum qkv_decode_strategy { QKV_DECODE_STRATEGY_VALUES(QKV_ENUM_CONSTANT) } qkv_decode_strategy;

/* Beam search length penalty (registry "length_penalty"):
 *   QKV_LENGTH_PENALTY_NONE: lp = 1
 *   QKV_LENGTH_PENALTY_AVERAGE: lp = length (the mean log-probability per token)
 *   QKV_LENGTH_PENALTY_GNMT: lp = ((5 + length) / 6)^alpha (Wu et al. 2016, eq. 14) */
#define QKV_LENGTH_PENALTY_VALUES(X)                                                               \
    X(QKV_LENGTH_PENALTY_NONE, "none", "rank by the sum of log-probabilities")                     \
    X(QKV_LENGTH_PENALTY_AVERAGE, "average", "rank by the mean log-probability per token")         \
    X(QKV_LENGTH_PENALTY_GNMT, "gnmt", "divide by ((5 + length) / 6)^alpha (Wu et al. 2016)")
typedef enum qkv_length_penalty { QKV_LENGTH_PENALTY_VALUES(QKV_ENUM_CONSTANT) } qkv_length_penalty;

/* ---- data (qkv_tokenizer.h) -------------------------------------------------------------------- */

/* Tokenizer (registry "tokenizer") */
#define QKV_TOKENIZER_KIND_VALUES(X)                                                               \
    X(QKV_TOKENIZER_CHARS, "chars", "every UTF-8 character is a symbol, spaces included")          \
    X(QKV_TOKENIZER_TOKENS, "tokens", "already tokenized: symbols between single spaces")          \
    X(QKV_TOKENIZER_WORDS, "words", "maximal runs of bytes other than space and TAB")              \
    X(QKV_TOKENIZER_BPE, "bpe", "byte-pair-encoding subwords; its model file from `qkv tokenizer learn`")
typedef enum qkv_tokenizer_kind { QKV_TOKENIZER_KIND_VALUES(QKV_ENUM_CONSTANT) } qkv_tokenizer_kind;

/* ---- translation metrics (qkv_mt_metrics.h) ---------------------------------------------------- */

/* BLEU's tokenizer (registry "bleu_tokenizer"), sacreBLEU's names */
#define QKV_BLEU_TOKENIZER_VALUES(X)                                                               \
    X(QKV_BLEU_TOK_13A, "13a", "mteval-v13a: punctuation split off (sacreBLEU's default)")         \
    X(QKV_BLEU_TOK_NONE, "none", "split at whitespace only: the text is tokenized already")
typedef enum qkv_bleu_tokenizer { QKV_BLEU_TOKENIZER_VALUES(QKV_ENUM_CONSTANT) } qkv_bleu_tokenizer;

/* BLEU's smoothing of zero n-gram matches (registry "bleu_smooth"), sacreBLEU's names */
#define QKV_BLEU_SMOOTH_VALUES(X)                                                                  \
    X(QKV_BLEU_SMOOTH_EXP, "exp", "the k-th order without a match counts 1 / 2^k (sacreBLEU's default)") \
    X(QKV_BLEU_SMOOTH_NONE, "none", "no smoothing: a zero precision makes BLEU 0")                 \
    X(QKV_BLEU_SMOOTH_FLOOR, "floor", "a zero count of matches becomes the smoothing value (0.1)") \
    X(QKV_BLEU_SMOOTH_ADD_K, "add-k", "orders 2 and up: matches and totals both + k (1)")
typedef enum qkv_bleu_smooth { QKV_BLEU_SMOOTH_VALUES(QKV_ENUM_CONSTANT) } qkv_bleu_smooth;

#endif
