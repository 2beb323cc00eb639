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
#include "../qkv_tensor.h"
#ifdef __cplusplus
extern "C" {
#endif

/* qkv_score_kind, qkv_attn_norm: qkv_enums.h lists their values. */

/* Which (i, j) pairs may attend. All fields off = everything allowed; start from
 * qkv_mask_none() (a zero-initialised struct has window 0 on both sides: the diagonal only).
 * Mask tensors are read through their strides (views are fine) and must stay alive until the
 * backward pass of the ops that used them. */
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

/* Dot-product family: q (B, H, T, D), k (B, H, S, D) -> scores (B, H, T, S); strided views
 * (qkv_split_heads) are accepted. kind DOT: q.k; SCALED_DOT: q.k / sqrt(D); COSINE:
 * g * q.k / (max(|q|, eps) max(|k|, eps)), eps = 1e-8 (F.normalize's clamp), with g = cos_scale
 * (a tensor of 1 element, shared, or H elements, one per head; learnable) or, when cos_scale
 * is NULL, g = fixed_scale (must be finite). cos_scale must be NULL for the other kinds, and
 * fixed_scale is ignored by them. ADDITIVE is refused (use qkv_additive_scores) and so is
 * GENERAL (compose it: q^T W k = dot(q, k W^T), as the MHA module does). */
QKV_API qkv_tensor *qkv_attn_scores(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k,
                                    qkv_score_kind kind, qkv_tensor *cos_scale,
                                    double fixed_scale);

/* Additive scores, fused so the (B, H, T, S, A) tanh tensor is never stored:
 * qp (B, H, T, A) = W_q q, kp (B, H, S, A) = W_k k (computed by qkv_linear beforehand),
 * v (H, A): e_bhij = sum_a v_ha tanh(qp_bhia + kp_bhja) -> (B, H, T, S). */
QKV_API qkv_tensor *qkv_additive_scores(qkv_ctx *ctx, qkv_tensor *qp, qkv_tensor *kp,
                                        qkv_tensor *v);

/* scores (B, H, T, S) -> weights (B, H, T, S); masked positions get weight 0 and gradient 0
 * whatever their score holds. mask: NULL or a mask whose tensors fit (B, T, S) of the scores.
 * A row with no allowed key gives zeros (SOFTMAX also when every allowed score is -inf).
 * RELU_ROWNORM uses eps = 1e-6. */
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

/* qkv_sdpa with attention dropout (torch's dropout_p): in training mode (qkv_ctx_set_training)
 * with dropout_p > 0 the softmax weights are dropped with probability dropout_p and the kept ones
 * scaled by 1 / (1 - dropout_p), inside the tiled kernel (no (T, S) tensor, no stored mask). The
 * mask is the one qkv_dropout would draw at this point for the (B, H, T, S) weights tensor, and
 * the op advances the random position as that qkv_dropout call would: it equals
 * qkv_matmul(qkv_dropout(qkv_attn_normalize(scores), dropout_p), v) up to rounding. In
 * evaluation mode, or with dropout_p = 0, it is qkv_sdpa. dropout_p must be in [0, 1). */
QKV_API qkv_tensor *qkv_sdpa_dropout(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                                     double scale, const qkv_mask *mask,
                                     const qkv_real *alibi_slopes, double dropout_p);

/* Scaled-dot-product attention that keeps the (B, H, T, S) softmax weights for backward:
 * qkv_matmul(qkv_dropout(qkv_attn_normalize(qkv_attn_scores(q, k, SCALED_DOT-like scale),
 * SOFTMAX, mask), dropout_p), v) with the same bits forward and backward (same kernels, same
 * random stream), keeping one (B, H, T, S) tensor where that composition keeps three. Faster
 * than qkv_sdpa_dropout where a head's scores are small (the products run in BLAS), O(B H T S)
 * memory. Arguments as qkv_sdpa_dropout's, without ALiBi; a row with no allowed key gives 0. */
QKV_API qkv_tensor *qkv_sdpa_weights(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                                     double scale, const qkv_mask *mask, double dropout_p);
/* qkv_sdpa_weights with the heads merged: (B, T, H Dv), qkv_merge_heads of its output with the
 * same bits forward and backward, written in place instead of copied (one (B, T, H Dv) tensor
 * fewer per call). */
QKV_API qkv_tensor *qkv_sdpa_weights_merged(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *k, qkv_tensor *v,
                                            double scale, const qkv_mask *mask, double dropout_p);

#ifdef __cplusplus
}
#endif
#endif
