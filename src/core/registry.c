/*
 * registry.c: the name, value and help line of every value of the API's enumerations
 * (qkv_registry.h). The names are those of model files: changing one breaks every file that uses
 * it, so a name is added, never renamed.
 */
#include "qkv/qkv.h"
#include "qkv/qkv_registry.h"
#include "qkv/qkv_tokenizer.h"

#include <stdio.h>
#include <string.h>

#define TABLE(id, reg_name, what, c_type, ...)                                                                   \
    static const qkv_registry_entry id##_entries[] = {__VA_ARGS__};                                            \
    static const qkv_registry id = {reg_name, what, c_type, (int)(sizeof id##_entries / sizeof *id##_entries), \
                                    id##_entries};

TABLE(arch, "arch", "architecture", "qkv_arch",
      {"encoder-decoder", QKV_ARCH_ENCODER_DECODER, "encoder and autoregressive decoder with cross-attention (Vaswani et al. 2017)"},
      {"encoder", QKV_ARCH_ENCODER, "encoder only: one prediction per token or per sequence (tagging, classification, images)"},
      {"decoder", QKV_ARCH_DECODER, "decoder only, causal: a language model"})

TABLE(pos, "pos", "absolute positional encoding", "qkv_abs_pos",
      {"none", QKV_POS_NONE, "no absolute positions (relative ones may stand in)"},
      {"sinusoidal", QKV_POS_SINUSOIDAL, "fixed sin/cos of the position (Vaswani et al. 2017)"},
      {"learned", QKV_POS_LEARNED, "one learned vector per position (Gehring et al. 2017)"},
      {"sincos_2d", QKV_POS_SINCOS_2D, "image models: fixed 2-D sin/cos of the patch's row and column (MAE, He et al. 2022)"})

TABLE(activation, "activation", "feed-forward activation", "qkv_activation",
      {"relu", QKV_ACT_RELU, "max(0, x)"},
      {"gelu", QKV_ACT_GELU, "x Phi(x), the exact GELU (Hendrycks & Gimpel 2016)"},
      {"gelu_tanh", QKV_ACT_GELU_TANH, "GELU's tanh approximation (GPT-2)"})

TABLE(head, "head", "encoder-only output head", "qkv_head_kind",
      {"token", QKV_HEAD_TOKEN, "one prediction per token (tagging)"},
      {"pooled", QKV_HEAD_POOLED, "one prediction per sequence: the mean over its tokens (image models: or the [CLS] token)"})

TABLE(score, "score", "attention score function", "qkv_score_kind",
      {"dot", QKV_SCORE_DOT, "q . k"},
      {"scaled_dot", QKV_SCORE_SCALED_DOT, "q . k / sqrt(D) (Vaswani et al. 2017)"},
      {"additive", QKV_SCORE_ADDITIVE, "v^T tanh(W_q q + W_k k) (Bahdanau et al. 2015)"},
      {"general", QKV_SCORE_GENERAL, "q^T W k, bilinear (Luong et al. 2015)"},
      {"cosine", QKV_SCORE_COSINE, "g cos(q, k), g fixed or learned per head (Henry et al. 2020)"})

TABLE(norm, "norm", "attention normaliser", "qkv_attn_norm",
      {"softmax", QKV_NORM_SOFTMAX, "exp(e_j) / sum_k exp(e_k) over the allowed keys"},
      {"relu", QKV_NORM_RELU, "relu(e_j), not normalised"},
      {"relu_rownorm", QKV_NORM_RELU_ROWNORM, "relu(e_j) / (sum_k relu(e_k) + 1e-6)"},
      {"sigmoid", QKV_NORM_SIGMOID, "sigmoid(e_j), each key on its own"},
      {"sparsemax", QKV_NORM_SPARSEMAX, "max(e_j - tau, 0) summing to 1: sparse weights (Martins & Astudillo 2016)"})

TABLE(relpos, "relpos", "relative positional encoding", "qkv_relpos_kind",
      {"none", QKV_RELPOS_NONE, "no relative positions"},
      {"shaw", QKV_RELPOS_SHAW, "clipped relative key and value embeddings (Shaw et al. 2018)"},
      {"t5", QKV_RELPOS_T5, "bucketed relative bias per head (Raffel et al. 2020)"},
      {"rope", QKV_RELPOS_ROPE, "rotary q and k (Su et al. 2021)"},
      {"alibi", QKV_RELPOS_ALIBI, "linear distance bias per head (Press et al. 2022)"})

TABLE(lr_schedule, "lr_schedule", "learning-rate schedule", "qkv_lr_kind",
      {"constant", QKV_LR_CONSTANT, "base_lr at every step"},
      {"inv_sqrt", QKV_LR_INV_SQRT, "linear warm-up, then decay as 1/sqrt(step) (Vaswani et al. 2017)"},
      {"cosine", QKV_LR_WARMUP_COSINE, "linear warm-up, then cosine decay to min_lr at the last step (Loshchilov & Hutter 2017)"})

TABLE(scheduled_sampling, "scheduled_sampling", "scheduled sampling decay", "qkv_ss_kind",
      {"none", QKV_SS_NONE, "teacher forcing: always the gold token"},
      {"linear", QKV_SS_LINEAR, "p_gold = max(min_gold, 1 - step / decay_steps) (Bengio et al. 2015)"},
      {"exponential", QKV_SS_EXPONENTIAL, "p_gold = max(min_gold, k^step), k < 1 (Bengio et al. 2015)"},
      {"inverse_sigmoid", QKV_SS_INVERSE_SIGMOID, "p_gold = k / (k + exp(step / k)), k >= 1 (Bengio et al. 2015)"})

TABLE(decode_strategy, "decode_strategy", "decoding strategy", "qkv_decode_strategy",
      {"greedy", QKV_DECODE_GREEDY, "the most probable token at every step"},
      {"beam", QKV_DECODE_BEAM, "beam search over the K best prefixes"},
      {"sample", QKV_DECODE_SAMPLE, "ancestral sampling (temperature, top-k, top-p)"},
      {"mask_predict", QKV_DECODE_MASK_PREDICT, "non-autoregressive models: mask-predict (Ghazvininejad et al. 2019)"})

TABLE(length_penalty, "length_penalty", "beam search length penalty", "qkv_length_penalty",
      {"none", QKV_LENGTH_PENALTY_NONE, "rank by the sum of log-probabilities"},
      {"average", QKV_LENGTH_PENALTY_AVERAGE, "rank by the mean log-probability per token"},
      {"gnmt", QKV_LENGTH_PENALTY_GNMT, "divide by ((5 + length) / 6)^alpha (Wu et al. 2016)"})

TABLE(tokenizer, "tokenizer", "tokenizer", "qkv_tokenizer_kind",
      {"chars", QKV_TOKENIZER_CHARS, "every UTF-8 character is a symbol, spaces included"},
      {"tokens", QKV_TOKENIZER_TOKENS, "already tokenized: symbols between single spaces"},
      {"words", QKV_TOKENIZER_WORDS, "maximal runs of bytes other than space and TAB"})

static const qkv_registry *const registries[QKV_REGISTRY_COUNT] = {
    [QKV_REGISTRY_ARCH] = &arch,
    [QKV_REGISTRY_POS] = &pos,
    [QKV_REGISTRY_ACTIVATION] = &activation,
    [QKV_REGISTRY_HEAD] = &head,
    [QKV_REGISTRY_SCORE] = &score,
    [QKV_REGISTRY_NORM] = &norm,
    [QKV_REGISTRY_RELPOS] = &relpos,
    [QKV_REGISTRY_LR_SCHEDULE] = &lr_schedule,
    [QKV_REGISTRY_SCHEDULED_SAMPLING] = &scheduled_sampling,
    [QKV_REGISTRY_DECODE_STRATEGY] = &decode_strategy,
    [QKV_REGISTRY_LENGTH_PENALTY] = &length_penalty,
    [QKV_REGISTRY_TOKENIZER] = &tokenizer,
};

const qkv_registry *qkv_registry_get(qkv_registry_id id) {
    return (unsigned)id < QKV_REGISTRY_COUNT ? registries[id] : NULL;
}

const qkv_registry *qkv_registry_by_name(const char *name) {
    for (int i = 0; name && i < QKV_REGISTRY_COUNT; i++)
        if (!strcmp(registries[i]->name, name)) return registries[i];
    return NULL;
}

const qkv_registry_entry *qkv_registry_entry_of(qkv_registry_id id, int value) {
    const qkv_registry *r = qkv_registry_get(id);
    for (int i = 0; r && i < r->count; i++)
        if (r->entries[i].value == value) return &r->entries[i];
    return NULL;
}

const char *qkv_registry_name(qkv_registry_id id, int value) {
    const qkv_registry_entry *e = qkv_registry_entry_of(id, value);
    return e ? e->name : NULL;
}

size_t qkv_registry_list(qkv_registry_id id, char *buf, size_t size) {
    const qkv_registry *r = qkv_registry_get(id);
    size_t len = 0;
    if (buf && size) buf[0] = '\0';
    for (int i = 0; r && i < r->count; i++) {
        const int n = snprintf(buf && len < size ? buf + len : NULL, buf && len < size ? size - len : 0, "%s%s",
                               i ? ", " : "", r->entries[i].name);
        len += (size_t)n;
    }
    return len;
}

qkv_status qkv_registry_parse(qkv_registry_id id, const char *name, int *value) {
    const qkv_registry *r = qkv_registry_get(id);
    if (!r || !name || !value) return qkv_set_error(QKV_ERR_INVALID_ARG, "qkv_registry_parse: bad argument");
    for (int i = 0; i < r->count; i++)
        if (!strcmp(r->entries[i].name, name)) {
            *value = r->entries[i].value;
            return QKV_OK;
        }
    char names[512];
    qkv_registry_list(id, names, sizeof names);
    return qkv_set_error(QKV_ERR_INVALID_ARG, "unknown %s '%.100s' (one of: %s)", r->what, name, names);
}
