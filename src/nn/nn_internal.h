/*
 * nn_internal.h: stages of the modules shared between their full forward (mha.c, layer.c,
 * model.c) and the incremental decoding step (mha_cached.c, src/infer), so both
 * run the same ops in the same order. Not part of the public API.
 *
 * Dims: B batch (or N decoding rows), T query length, S key length, C d_model, H heads,
 * D = C / H. query_offset is the position of the first query (0 for a full sequence, t for the
 * queries of positions t .. t+T-1 in incremental decoding): relative encodings (Shaw, T5, ALiBi)
 * measure distances from it.
 */
#ifndef QKV_NN_INTERNAL_H
#define QKV_NN_INTERNAL_H

#include "../core/internal.h"
#include "../ops/ops_internal.h"
#include "qkv/qkv_model.h"

/* Inference's guard on a model's output y (logits): NaN or an infinity in it is an error naming
 * `op` and the element, not an answer (weights or a configuration value that overflow float
 * arithmetic). A no-op while gradients are on: training checks its loss instead. Returns y, or
 * NULL with the context's status set. */
qkv_tensor *qkv__finite_output(qkv_ctx *ctx, const char *op, qkv_tensor *y);
/* The ranges of an attention configuration's values (qkv_mha_init's and qkv_model_config_check's
 * one rule); messages start with `who`. */
qkv_status qkv__mha_config_check(const qkv_mha_config *cfg, const char *who);
/* Project x (B, L, C) with rows [first*C, (first+count)*C) of in_proj_weight (first 0: q, 1: k,
 * 2: v) and split into `count` head tensors heads[i] (B, H, L, D): strided views of one GEMM's
 * output. On error the sticky status is set and heads are left untouched. */
void qkv__mha_project(qkv_ctx *ctx, const qkv_mha *m, qkv_tensor *x, int first, int count,
                      qkv_tensor **heads);

/* Scores (B, H, T, S) of the configured score function plus the relative-position term (Shaw
 * keys, T5 or ALiBi bias) for queries at query_offset .. query_offset+T-1 and keys 0 .. S-1.
 * q (B, H, T, D) and k (B, H, S, D) are already projected (and rotated, for RoPE). */
qkv_tensor *qkv__mha_scores(qkv_ctx *ctx, const qkv_mha *m, qkv_tensor *q, qkv_tensor *k,
                            int64_t query_offset);

/* qkv_mha_step with caches of R rows read through a map. Cross-attention: row n attends over
 * cache row kv_rows[n] (kv_rows NULL: R = N, row n over row n); self-attention takes NULL there.
 * Self-attention: self_rows NULL, or (N, L): row n reads key position j < t0 from cache row
 * self_rows[n L + j] (R >= N) and writes its new positions into row n, which the table must name
 * (qkv_layer_cache.self_rows). */
qkv_tensor *qkv__mha_step_rows(qkv_ctx *ctx, const qkv_mha *m, qkv_tensor *x, qkv_tensor *cache_k,
                               qkv_tensor *cache_v, const int32_t *kv_rows,
                               const int32_t *self_rows, int64_t t0, bool self_attn,
                               const qkv_mask *mask, qkv_tensor **weights_out);
/* The rest of attention after the projections: weights = normalize(scores | mask) (or the fused
 * qkv_sdpa where the variant allows it), o = weights v (+ Shaw values), merge heads, output
 * projection -> (B, T, C). weights_out as in qkv_mha_forward. */
qkv_tensor *qkv__mha_attend(qkv_ctx *ctx, const qkv_mha *m, qkv_tensor *q, qkv_tensor *k,
                            qkv_tensor *v, const qkv_mask *mask, int64_t query_offset,
                            qkv_tensor **weights_out);

/* The layer's feed-forward block FF(x) = linear2(dropout(act(linear1(x)))), x (B, T, C). */
qkv_tensor *qkv__layer_feed_forward(qkv_ctx *ctx, const qkv_layer *l, qkv_tensor *x);

/* The output side of a token model, the one forward of training, evaluation and cached
 * decoding: ids (N, T) at positions t0 .. t0+T-1 -> embedding -> the decoder layers of an
 * encoder-decoder (cross-attention on memory (N, S, C), or on the caches) or the causal stack of
 * a decoder-only model -> final norm -> output projection -> logits (N, T, V). caches NULL: the
 * whole sequence (t0 = 0); otherwise one qkv_layer_cache per layer holding positions
 * 0 .. t0-1, and the rows are those of the whole-sequence forward, bit for bit. The weights
 * outputs take one tensor per layer (NULL: none). */
qkv_tensor *qkv__model_logits(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *ids, int64_t t0, qkv_tensor *memory,
                              const qkv_layer_cache *caches, const qkv_mask *self_mask, const qkv_mask *cross_mask,
                              qkv_tensor **self_weights_out, qkv_tensor **cross_weights_out);

/* What the encoder stack lets its caller do between stages: before each layer and before the
 * final norm, `between` gets the activations x (B, S, C) and the self mask, and returns the
 * tensor to go on with. A decoding session moves x out of the arena there and resets the context,
 * so the arena holds one layer's activations instead of the stack's (rebuilding the mask's
 * key-padding tensor in the fresh arena). NULL, or NULL on error with the context's status set. */
typedef struct qkv__stage_hook {
    qkv_tensor *(*between)(void *user, qkv_ctx *ctx, qkv_tensor *x, qkv_mask *mask);
    void *user;
} qkv__stage_hook;

/* The encoder stack over embedded x (B, S, C) with the self mask: the encoder layers, then the
 * final norm; the one forward of qkv_model_encode, the encoder-only models and a decoding
 * session's encoding (hook: between the stages; NULL for none). weights_out: one tensor per
 * layer, or NULL. */
qkv_tensor *qkv__encoder_stack(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *x, const qkv_mask *mask,
                               qkv_tensor **weights_out, const qkv__stage_hook *hook);

/* Token embedding of ids (B, T) at positions offset .. offset+T-1: table lookup (* sqrt(C) when
 * the model scales embeddings) + absolute positions (sinusoidal or the learned table pos), then
 * dropout -> (B, T, C). */
qkv_tensor *qkv__model_embed(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *table, qkv_tensor *pos,
                             qkv_tensor *ids, int64_t offset);

/* The image front-end (patch_embed.c): register and initialise patch_embed.proj, class_token and
 * pos_embedding; embed pixels (B, H_img, W_img, Ch) -> (B, L, C) (shape checked, dropout
 * applied); pool the encoder output (B, L, C) -> (B, C) ([CLS] row or mean). */
qkv_status qkv__image_register(qkv_model *m);
void qkv__image_init(qkv_model *m, uint64_t seed);
qkv_tensor *qkv__image_embed(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *pixels);
qkv_tensor *qkv__image_pool(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *h);
/* Non-autoregressive models (nat.c): register length_head.{weight,bias} after the other
 * parameters, and initialise them (deterministic in seed). */
qkv_status qkv__nat_register(qkv_model *m);
void qkv__nat_init(qkv_model *m, uint64_t seed);
/* Feature inputs of encoder-only models (model_features.c): register and initialise the tables
 * embed_features.<k>.weight, and the sum over k of E_k[features[:, :, k]] -> (B, S, C) for
 * src (B, S) and features I32 (B, S, n_features) (shape checked). */
qkv_status qkv__model_features_register(qkv_model *m);
void qkv__model_features_init(qkv_model *m, uint64_t seed);
qkv_tensor *qkv__model_features_sum(qkv_ctx *ctx, const qkv_model *m, const qkv_tensor *src,
                                    qkv_tensor *features);

#endif
