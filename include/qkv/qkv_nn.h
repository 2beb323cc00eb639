/*
 * qkv_nn.h: modules built from ops: multi-head attention and the Transformer encoder and decoder
 * layers. A module is a plain struct of parameter tensors plus its configuration; *_init
 * registers the parameters (PyTorch state_dict names under a prefix) in a qkv_params table,
 * *_reset_parameters initialises them as PyTorch does, *_forward is forward code only (the tape
 * gives the backward).
 */
#ifndef QKV_NN_H
#define QKV_NN_H

#include "qkv_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- multi-head attention ------------------------------------------------------------------
 * head_h = Attention(Q W_q^h, K W_k^h, V W_v^h), MHA(Q, K, V) = Concat(head_1..head_H) W^O
 * (Vaswani et al. 2017). W_q, W_k, W_v are the three row blocks of in_proj_weight (3C, C), as in
 * torch.nn.MultiheadAttention. The score function acts per head on the projected q, k (D wide):
 *   DOT / SCALED_DOT / COSINE  qkv_attn_scores;
 *   GENERAL   q^T W_h k with general_weight (H, D, D)  (Luong et al. 2015);
 *   ADDITIVE  v_h^T tanh(A_q^h q + A_k^h k), additive_wq / additive_wk (H, A, D), additive_v (H, A)
 *             (Bahdanau et al. 2015).
 * Relative positions: Shaw adds q . a^K_{j-i} to the scores (scaled like the content term) and
 * sum_j a_ij a^V_{j-i} to the output; T5 and ALiBi add a per-head bias (H, T, S); RoPE rotates q
 * and k. Scaled dot + softmax (+ RoPE / ALiBi) runs through the fused O(T)-memory qkv_sdpa when
 * no attention weights are requested (attention dropout included: qkv_sdpa_dropout draws the
 * mask of the composed path), except in training with few keys (H S <= C, no ALiBi), where
 * qkv_sdpa_weights gives the composed ops' bits keeping only the weights (faster there; the module
 * calls qkv_sdpa_weights_merged, which writes the heads merged for the output projection). */

/* qkv_relpos_kind: qkv_enums.h lists its values. */

typedef struct qkv_mha_config {
    int32_t d_model;             /* C */
    int32_t n_heads;             /* H; C % H == 0, D = C / H */
    qkv_score_kind score;        /* default SCALED_DOT */
    qkv_attn_norm norm;          /* default SOFTMAX */
    bool bias;                   /* biases on the projections (default true, as torch) */
    double dropout;              /* on the attention weights in training mode (default 0) */
    bool cos_scale_learnable;    /* cosine: learn g per head (default true) */
    double cos_scale_init;       /* cosine: g or its initial value (default 10) */
    int32_t additive_dim;        /* additive: A (default D) */
    qkv_relpos_kind relpos;      /* default NONE */
    int32_t relpos_max_distance; /* Shaw: clip distance K (default 16); T5: max distance (128) */
    int32_t relpos_buckets;      /* T5: number of buckets (default 32) */
    bool relpos_bidirectional;   /* T5: true for encoders, false for causal decoders */
    double rope_base;            /* RoPE: default 10000 */
    bool use_fused;              /* allow qkv_sdpa (default true) */
    /* Take qkv_sdpa wherever it applies. By default (false) training takes qkv_sdpa_weights
     * (the composed arithmetic, keeping the weights) where H S <= C: faster there, and its
     * weights take no more than q, k, v (see qkv__mha_attend). */
    bool fused_always;
} qkv_mha_config;

QKV_API qkv_mha_config qkv_mha_default_config(int32_t d_model, int32_t n_heads);

typedef struct qkv_mha {
    qkv_mha_config cfg;
    qkv_tensor *in_proj_weight;  /* (3C, C): rows W_q; W_k; W_v */
    qkv_tensor *in_proj_bias;    /* (3C) or NULL */
    qkv_tensor *out_proj_weight; /* (C, C): W^O */
    qkv_tensor *out_proj_bias;   /* (C) or NULL */
    qkv_tensor *general_weight;  /* general: (H, D, D) */
    qkv_tensor *additive_wq;     /* additive: (H, A, D) */
    qkv_tensor *additive_wk;     /* additive: (H, A, D) */
    qkv_tensor *additive_v;      /* additive: (H, A) */
    qkv_tensor *cos_scale;       /* cosine with learnable scale: (H) */
    qkv_tensor *rel_k;           /* Shaw: (2K+1, D) */
    qkv_tensor *rel_v;           /* Shaw: (2K+1, D) */
    qkv_tensor *t5_bias;         /* T5: (buckets, H) */
} qkv_mha;

/* Register the parameters in p, named `<prefix>in_proj_weight`, `<prefix>out_proj.weight`, ...
 * (prefix e.g. "encoder.layers.0.self_attn."). Variant parameters: `<prefix>general_weight`,
 * `<prefix>additive_wq`, `<prefix>additive_wk`, `<prefix>additive_v`, `<prefix>cos_scale`,
 * `<prefix>rel_k`, `<prefix>rel_v`, `<prefix>t5_bias`. */
QKV_API qkv_status qkv_mha_init(qkv_mha *m, const qkv_mha_config *cfg, qkv_params *p,
                                const char *prefix);
/* Initialise (after qkv_params_finalize) as torch.nn.MultiheadAttention._reset_parameters:
 * xavier-uniform in_proj_weight, zero biases, out_proj.weight U(-1/sqrt C, 1/sqrt C); variant
 * parameters: xavier-uniform, Shaw tables N(0, D^-1/2), T5 table N(0, 0.1), cos_scale = init. */
QKV_API void qkv_mha_reset_parameters(qkv_mha *m, uint64_t seed);
/* query (B, T, C), key (B, S, C), value (B, S, C) -> (B, T, C). Self-attention passes the same
 * tensor three times (one GEMM computes q, k and v). weights_out: NULL, or receives the attention
 * weights (B, H, T, S) of every head (forces the unfused path). */
QKV_API qkv_tensor *qkv_mha_forward(qkv_ctx *ctx, const qkv_mha *m, qkv_tensor *query,
                                    qkv_tensor *key, qkv_tensor *value, const qkv_mask *mask,
                                    qkv_tensor **weights_out);

/* ---- incremental attention (decoding with a KV cache; src/nn/mha_cached.c) -----------------
 * Autoregressive decoding feeds T new positions t0 .. t0+T-1 at a time (T = 1 per generated
 * token, T > 1 for a prompt). A self-attention cache holds the keys and values of every earlier
 * position, so a step projects only the new rows and attends over the cache; a cross-attention
 * cache holds the projected encoder memory, computed once per source. The result equals rows
 * t0 .. t0+T-1 of qkv_mha_forward over the whole sequence with a causal mask, for every score
 * function, normaliser and relative encoding (RoPE rotates the new q and k at their positions;
 * Shaw, T5 and ALiBi measure distances from query position t0 + i).
 *
 * Caches are caller-owned tensors (N, H, L, D) (real dtype, last dim contiguous, any other
 * strides; e.g. headers over memory a decoding session allocates once). Writing into them is not
 * differentiable: these calls fail when gradients are enabled and a parameter requires one
 * (decode with qkv_ctx_set_grad_enabled(ctx, false)). */

/* Cross-attention: project memory (N, S, C) to keys and values (RoPE: keys rotated at positions
 * 0 .. S-1) and write them into cache_k / cache_v (N, H, S, D). Returns the context status. */
QKV_API qkv_status qkv_mha_cache_memory(qkv_ctx *ctx, const qkv_mha *m, qkv_tensor *memory,
                                        qkv_tensor *cache_k, qkv_tensor *cache_v);
/* One incremental attention step; x (N, T, C) holds the query rows of positions t0 .. t0+T-1.
 *   self_attn true:  cache_k / cache_v (N, H, L, D) hold positions 0 .. t0-1; the keys and values
 *                    of x are written at t0 .. t0+T-1 (t0 + T <= L) and query i attends to keys
 *                    j <= t0 + i. mask: NULL or only key_padding (N, t0+T) (the causal rule is
 *                    implied; other rules are refused).
 *   self_attn false: cache_k / cache_v (N, H, S, D) from qkv_mha_cache_memory; every key may be
 *                    attended subject to mask (NULL, or e.g. the memory's key_padding (N, S)).
 * -> (N, T, C). weights_out: NULL or receives the weights (N, H, T, keys) (unfused path). */
QKV_API qkv_tensor *qkv_mha_step(qkv_ctx *ctx, const qkv_mha *m, qkv_tensor *x,
                                 qkv_tensor *cache_k, qkv_tensor *cache_v, int64_t t0,
                                 bool self_attn, const qkv_mask *mask, qkv_tensor **weights_out);

/* ---- Transformer layers (torch.nn.TransformerEncoderLayer / TransformerDecoderLayer) --------
 * post-LN (norm_first false):  x = norm1(x + SA(x));  x = norm2(x + FF(x))
 * pre-LN  (norm_first true):   x = x + SA(norm1(x));  x = x + FF(norm2(x))
 * decoder adds cross-attention on the memory between the two, with norm2; its FF uses norm3.
 * FF(x) = linear2(dropout(act(linear1(x)))); every sub-layer output passes dropout. */

/* qkv_activation: qkv_enums.h lists its values. */

typedef struct qkv_layer_config {
    int32_t d_model, n_heads, dim_feedforward;
    bool norm_first;       /* pre-LN (true) or post-LN (false, the 2017 paper and torch default) */
    qkv_activation activation;
    double dropout;        /* residual and feed-forward dropout (training mode only) */
    double layer_norm_eps; /* default 1e-5 */
    qkv_mha_config self_attn;  /* the attention variant of the self-attention */
    qkv_mha_config cross_attn; /* decoder: the variant of the cross-attention */
} qkv_layer_config;

QKV_API qkv_layer_config qkv_layer_default_config(int32_t d_model, int32_t n_heads,
                                                  int32_t dim_feedforward);

typedef struct qkv_layer {
    qkv_layer_config cfg;
    bool decoder;
    qkv_mha self_attn, cross_attn; /* cross_attn: decoder only ("multihead_attn." in torch) */
    qkv_tensor *linear1_weight, *linear1_bias; /* (F, C), (F) */
    qkv_tensor *linear2_weight, *linear2_bias; /* (C, F), (C) */
    qkv_tensor *norm_weight[3], *norm_bias[3]; /* norm1..norm3: (C) each; norm3 decoder only */
} qkv_layer;

QKV_API qkv_status qkv_encoder_layer_init(qkv_layer *l, const qkv_layer_config *cfg,
                                          qkv_params *p, const char *prefix);
QKV_API qkv_status qkv_decoder_layer_init(qkv_layer *l, const qkv_layer_config *cfg,
                                          qkv_params *p, const char *prefix);
/* torch's defaults: attention as qkv_mha_reset_parameters, linears U(-1/sqrt(in), 1/sqrt(in))
 * for weight and bias, LayerNorm weight 1 and bias 0. */
QKV_API void qkv_layer_reset_parameters(qkv_layer *l, uint64_t seed);
/* x (B, T, C) -> (B, T, C). self_weights: NULL, or receives the self-attention weights
 * (B, H, T, T) of every head. */
QKV_API qkv_tensor *qkv_encoder_layer_forward(qkv_ctx *ctx, const qkv_layer *l, qkv_tensor *x,
                                              const qkv_mask *self_mask, qkv_tensor **self_weights);
/* x (B, T, C), memory (B, S, C) -> (B, T, C); weights (B, H, T, T) and (B, H, T, S) on request. */
QKV_API qkv_tensor *qkv_decoder_layer_forward(qkv_ctx *ctx, const qkv_layer *l, qkv_tensor *x,
                                              qkv_tensor *memory, const qkv_mask *self_mask,
                                              const qkv_mask *cross_mask, qkv_tensor **self_weights,
                                              qkv_tensor **cross_weights);

/* Incremental step of a layer (src/nn/layer.c): the caches of one layer. */
typedef struct qkv_layer_cache {
    qkv_tensor *self_k, *self_v;   /* (N, H, L, D), or (R, H, L, D) with self_rows: self-attention
                                    * keys / values by position */
    qkv_tensor *cross_k, *cross_v; /* decoder layers: (N, H, S, D) projected memory */
    /* NULL, or (N): row n attends over row cross_rows[n] of cross_k / cross_v, which then hold
     * one row per source (beams of a sentence share their memory instead of copies of it) */
    const int32_t *cross_rows;
    /* NULL, or (N, L) row-major: key position j < t0 of row n is read from row
     * self_rows[n L + j] of self_k / self_v, which then hold R >= N rows; the new positions
     * t0 .. t0+T-1 must map to n itself (the step writes them into row n). A reorder of the rows
     * (beam search) then moves table rows instead of the keys and values of their prefixes. */
    const int32_t *self_rows;
} qkv_layer_cache;
/* x (N, T, C) at positions t0 .. t0+T-1 -> (N, T, C), equal to those rows of the layer's forward
 * over the whole sequence with a causal self-attention mask: a decoder layer (self-attention,
 * cross-attention on the cached memory, feed-forward) or an encoder layer used causally (the
 * stack of a decoder-only LM; no cross-attention). self_mask / cross_mask / weights as in
 * qkv_mha_step. */
QKV_API qkv_tensor *qkv_layer_step(qkv_ctx *ctx, const qkv_layer *l, qkv_tensor *x, int64_t t0,
                                   const qkv_layer_cache *cache, const qkv_mask *self_mask,
                                   const qkv_mask *cross_mask, qkv_tensor **self_weights,
                                   qkv_tensor **cross_weights);

#ifdef __cplusplus
}
#endif
#endif
