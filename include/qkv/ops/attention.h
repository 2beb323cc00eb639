/*
 * ops/attention.h: the attention family as building blocks, a fused scaled-dot-product op, and
 * multi-head attention.
 *
 *   scores  e_ij = score(q_i, k_j)            dot, scaled dot, additive, general, cosine
 *   weights a_ij = normalize_j(e_ij | mask)   softmax, ReLU (optionally row-normalised), sigmoid
 *   output  o_i  = sum_j a_ij v_j
 *
 * Masks never materialise a (T, S) tensor unless the user supplies an arbitrary one: a position
 * (i, j) is allowed when every active rule allows it. A row with no allowed key gives zero
 * weights and a zero output, never NaN, forward and backward.
 */
#ifndef QKV_OPS_ATTENTION_H
#define QKV_OPS_ATTENTION_H
#include "../qkv_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef enum qkv_score_kind {
    QKV_SCORE_DOT = 0,        /* q . k */
    QKV_SCORE_SCALED_DOT = 1, /* q . k / sqrt(D)   (Vaswani et al. 2017) */
    QKV_SCORE_ADDITIVE = 2,   /* v^T tanh(W_q q + W_k k)  (Bahdanau et al. 2015) */
    QKV_SCORE_GENERAL = 3,    /* q^T W k   (Luong et al. 2015, "general"/bilinear) */
    QKV_SCORE_COSINE = 4      /* g * cos(q, k), g fixed or learned  (Henry et al. 2020) */
} qkv_score_kind;

typedef enum qkv_attn_norm {
    QKV_NORM_SOFTMAX = 0,
    QKV_NORM_RELU = 1,         /* a = relu(e) */
    QKV_NORM_RELU_ROWNORM = 2, /* a = relu(e) / (sum_j relu(e_j) + eps), eps = 1e-6 */
    QKV_NORM_SIGMOID = 3       /* a = sigmoid(e)  (no normalisation across keys) */
} qkv_attn_norm;

/* Which (i, j) pairs may attend. All fields off = everything allowed. */
typedef struct qkv_mask {
    bool causal;                /* j <= i */
    int32_t window_left;        /* j >= i - window_left; < 0 = unlimited */
    int32_t window_right;       /* j <= i + window_right; < 0 = unlimited */
    const qkv_tensor *key_padding; /* I32 (B, S), nonzero = padded key (torch key_padding_mask) */
    const qkv_tensor *allowed;  /* I32 (T, S) or (B, T, S), nonzero = may attend (graph edges) */
} qkv_mask;

/* A mask that allows everything (windows unlimited). */
QKV_API qkv_mask qkv_mask_none(void);
/* Whether position (b, i, j) is allowed (the reference rule every kernel follows). */
QKV_API bool qkv_mask_allows(const qkv_mask *m, int64_t b, int64_t i, int64_t j);

/* Dot-product family: q (B, H, T, D), k (B, H, S, D) -> scores (B, H, T, S).
 * kind DOT: q.k; SCALED_DOT: q.k / sqrt(D); COSINE: g * q.k / (|q| |k|) with g = cos_scale
 * (a tensor of 1 or H elements, learnable) or, when cos_scale is NULL, g = fixed_scale. */
QKV_API qkv_tensor *qkv_attn_scores(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k,
                                    qkv_score_kind kind, qkv_tensor *cos_scale,
                                    double fixed_scale);

/* Additive scores, fused so the (B, H, T, S, A) tanh tensor is never stored:
 * qp (B, H, T, A) = W_q q, kp (B, H, S, A) = W_k k (computed by qkv_linear beforehand),
 * v (H, A): e_bhij = sum_a v_ha tanh(qp_bhia + kp_bhja) -> (B, H, T, S). */
QKV_API qkv_tensor *qkv_additive_scores(qkv_ctx *ctx, qkv_tensor *qp, qkv_tensor *kp,
                                        qkv_tensor *v);

/* scores (B, H, T, S) -> weights (B, H, T, S); masked positions get weight 0 and gradient 0. */
QKV_API qkv_tensor *qkv_attn_normalize(qkv_ctx *ctx, qkv_tensor *scores, qkv_attn_norm norm,
                                       const qkv_mask *mask);

/* Fused scaled-dot-product attention: softmax(q k^T * scale + alibi | mask) v, tiled over keys
 * with an online softmax (Milakov & Gimelshein 2018; Dao et al. 2022), so neither forward nor
 * backward stores a (T, S) matrix: memory is O(B H T D). Saves the row log-sum-exp.
 * q (B, H, T, D), k (B, H, S, D), v (B, H, S, Dv) -> (B, H, T, Dv); strided views are fine.
 * scale: any finite number (1 / sqrt(D) for the usual attention). mask: NULL (all allowed) or the
 * rule above, with (i, j) absolute positions (causal is j <= i also when T != S); its tensors
 * must stay valid until backward has run. A row with no allowed key gives o_i = 0 and zero
 * gradients. alibi_slopes: NULL or H slopes m_h adding -m_h |i - j| to the scores (Press et al.
 * 2022), copied by the call. Results do not depend on the thread count. */
QKV_API qkv_tensor *qkv_sdpa(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                             double scale, const qkv_mask *mask, const qkv_real *alibi_slopes);

/* ---- Multi-head attention (module) ---------------------------------------------------------
 * Parameters are named as torch.nn.MultiheadAttention's state_dict under `prefix`:
 *   <prefix>in_proj_weight (3C, C), <prefix>in_proj_bias (3C), <prefix>out_proj.weight (C, C),
 *   <prefix>out_proj.bias (C); extra ones for some variants:
 *   additive: <prefix>additive.w_q (H*A, D)... see docs/attention.md. */

typedef enum qkv_relpos_kind {
    QKV_RELPOS_NONE = 0,
    QKV_RELPOS_SHAW = 1,  /* clipped relative key/value embeddings (Shaw et al. 2018) */
    QKV_RELPOS_T5 = 2,    /* bucketed relative bias per head (Raffel et al. 2020) */
    QKV_RELPOS_ROPE = 3,  /* rotary q/k (Su et al. 2021) */
    QKV_RELPOS_ALIBI = 4  /* linear distance bias (Press et al. 2022) */
} qkv_relpos_kind;

typedef struct qkv_mha_config {
    int32_t d_model;    /* C */
    int32_t n_heads;    /* H; C % H == 0, D = C / H */
    qkv_score_kind score;
    qkv_attn_norm norm;
    bool bias;                 /* biases on the projections (torch default true) */
    bool cos_scale_learnable;  /* cosine: learn g per head (init cos_scale_init) */
    double cos_scale_init;     /* cosine: g (default 10) */
    int32_t additive_dim;      /* additive: A per head (default D) */
    qkv_relpos_kind relpos;
    int32_t relpos_max_distance; /* Shaw: clip distance K; T5: max distance */
    int32_t relpos_buckets;      /* T5: number of buckets */
    bool relpos_bidirectional;   /* T5: encoder true, decoder self-attention false */
    double rope_base;            /* RoPE: 10000 */
    bool use_fused;              /* use qkv_sdpa when the variant allows it (default true) */
} qkv_mha_config;

QKV_API qkv_mha_config qkv_mha_default_config(int32_t d_model, int32_t n_heads);

typedef struct qkv_mha {
    qkv_mha_config cfg;
    qkv_tensor *in_proj_weight;  /* (3C, C) rows: W_q; W_k; W_v */
    qkv_tensor *in_proj_bias;    /* (3C) or NULL */
    qkv_tensor *out_proj_weight; /* (C, C) W^O */
    qkv_tensor *out_proj_bias;   /* (C) or NULL */
    qkv_tensor *general_weight;  /* general: (H, D, D) */
    qkv_tensor *additive_wq;     /* additive: (H*A, C)... q side */
    qkv_tensor *additive_wk;     /* additive: (H*A, C) k side */
    qkv_tensor *additive_v;      /* additive: (H, A) */
    qkv_tensor *cos_scale;       /* cosine, learnable: (H) */
    qkv_tensor *rel_k;           /* Shaw: (2K+1, D) */
    qkv_tensor *rel_v;           /* Shaw: (2K+1, D) */
    qkv_tensor *t5_bias;         /* T5: (buckets, H) */
} qkv_mha;

/* Register the module's parameters in p (names prefixed by prefix, e.g. "encoder.layers.0.self_attn."). */
QKV_API qkv_status qkv_mha_init(qkv_mha *m, const qkv_mha_config *cfg, qkv_params *p,
                                const char *prefix);
/* Initialise registered parameters (after qkv_params_finalize) as torch does: xavier uniform
 * in_proj, zero biases, out_proj as nn.Linear default... */
QKV_API void qkv_mha_reset_parameters(qkv_mha *m, uint64_t seed);
/* query (B, T, C), key (B, S, C), value (B, S, C) -> (B, T, C). Self-attention passes the same
 * tensor three times. weights_out: NULL, or receives the attention weights (B, H, T, S) of every
 * head (forces the unfused path). */
QKV_API qkv_tensor *qkv_mha_forward(qkv_ctx *ctx, const qkv_mha *m, qkv_tensor *query,
                                    qkv_tensor *key, qkv_tensor *value, const qkv_mask *mask,
                                    qkv_tensor **weights_out);

#ifdef __cplusplus
}
#endif
#endif
