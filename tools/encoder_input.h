/*
 * encoder_input.h: the inputs of the encoder-only tasks (tagging, classify): each token is
 * looked up in the word vocabulary (src.vocab: training words seen at least data.min_count
 * times; others are <unk>) and, when model.features names spelling features
 * (qkv_word_feature_of: lower, prefix1-3, suffix1-4, shape), each feature in its own vocabulary
 * (feat.<name>.vocab: feature values seen at least data.feature_min_count times in training;
 * others are <unk>). The model sums the embeddings (qkv_model_classify_features).
 *
 * Word dropout (Kiperwasser & Goldberg 2016, section 6): during training a word seen c times in
 * the training data is replaced by <unk> with probability alpha / (alpha + c), so the model
 * learns the <unk> path, with the spelling features, from the rare words; the `lower` feature
 * (the word itself, lower-cased) is dropped with it. The coin of position (r, s) of batch i of
 * epoch e is Philox(seed, e, stream, i * 2^32 + r * S + s): a pure function of the batch, so a
 * resumed run draws the same coins.
 *
 * Also here: the forward pass of an encoder-only model over a data set, in length-sorted
 * batches, and the lookup of free text (qkv decode, qkv attn).
 */
#ifndef QKV_TOOLS_ENCODER_INPUT_H
#define QKV_TOOLS_ENCODER_INPUT_H

#include "config.h"
#include "qkv/qkv.h"
#include "qkv/qkv_data.h"

typedef struct enc_input_settings {
    int64_t min_count;         /* data.min_count */
    int64_t feature_min_count; /* data.feature_min_count */
    int n_features;            /* model.features */
    qkv_word_feature features[QKV_FEAT_COUNT];
    double word_dropout; /* train.word_dropout: alpha (0: off) */
} enc_input_settings;

/* data.min_count, data.feature_min_count, model.features, train.word_dropout (training); with
 * training false only model.features (task.conf of a run). False with cfg->error. */
bool enc_input_read_settings(config *cfg, bool training, enc_input_settings *s);
/* "model.features = suffix1 shape" (or "model.features =" when none) into buf. */
void enc_input_features_line(const enc_input_settings *s, char *buf, size_t size);

typedef struct enc_input {
    enc_input_settings s;
    qkv_vocab *words;                /* src.vocab */
    qkv_vocab *feat[QKV_FEAT_COUNT]; /* feat.<name>.vocab, in the order of s.features */
    bool owns_words;
    int64_t *word_count; /* training count of each word id (word dropout), NULL without */
} enc_input;

/* Fresh run: build the vocabularies from the source tokens of train and save them into dir. */
qkv_status enc_input_build(enc_input *in, const enc_input_settings *s, const qkv_corpus *train,
                           const char *dir);
/* Resume or inference: load the vocabularies from dir (words: words when not NULL, e.g. the
 * run_dir's src vocabulary, not owned). */
qkv_status enc_input_load(enc_input *in, const enc_input_settings *s, const char *dir,
                          qkv_vocab *words);
/* Count the training words of d (encoded with in->words) for word dropout. */
qkv_status enc_input_count_words(enc_input *in, const qkv_dataset *d);
void enc_input_free(enc_input *in);

/* The feature ids of every source token of a corpus: feats[(start[i] + s) * F + k]. */
typedef struct enc_feats {
    int64_t n;
    int64_t *start; /* n + 1 token offsets */
    int32_t *ids;
} enc_feats;

qkv_status enc_input_encode(const enc_input *in, const qkv_corpus *c, enc_feats *out);
void enc_feats_free(enc_feats *f);
/* One token: its word id and its n_features feature ids. */
qkv_status enc_input_token(const enc_input *in, const char *tok, size_t len, int32_t *word,
                           int32_t *feats);

/* The src (B, S) and features (B, S, F) of a batch (features NULL without them), with word
 * dropout when train_seed is given (non-NULL). Buffers are owned by buf. */
typedef struct enc_batch_buf {
    int32_t *src, *feats, *labels;
    size_t cap_src, cap_feats, cap_labels;
} enc_batch_buf;
qkv_status enc_input_batch(const enc_input *in, const enc_feats *f, const qkv_batch *b,
                           const uint64_t *train_seed, enc_batch_buf *buf, const int32_t **src,
                           const int32_t **feats);
/* labels buffer of n entries. */
int32_t *enc_batch_labels(enc_batch_buf *buf, size_t n);
void enc_batch_buf_free(enc_batch_buf *buf);

/* Logits of the model for src (B, S) and feats (B, S, F) or NULL, in ctx (no gradient):
 * (B, S, K) token head, (B, K) pooled head; weights_out as qkv_model_classify. */
qkv_tensor *enc_logits(qkv_ctx *ctx, const qkv_model *m, int64_t B, int64_t S, const int32_t *src,
                       const int32_t *feats, qkv_tensor **weights_out);

/* Run m over every example of d (features f) in unshuffled batches of at most max_tokens
 * tokens and hand each batch's logits to fn. */
typedef qkv_status (*enc_logits_fn)(void *user, const qkv_batch *b, const qkv_tensor *logits);
qkv_status enc_forward_all(const qkv_model *m, const enc_input *in, const qkv_dataset *d,
                           const enc_feats *f, int64_t max_tokens, enc_logits_fn fn, void *user);

/* The arg max over the data symbols (ids >= QKV_VOCAB_RESERVED) of one row of K logits. */
int32_t enc_argmax(const qkv_real *logits, int64_t K);
/* p(id) under the softmax over the data symbols (ids >= QKV_VOCAB_RESERVED) of the same row. */
double enc_label_probability(const qkv_real *logits, int64_t K, int32_t id);

#endif
