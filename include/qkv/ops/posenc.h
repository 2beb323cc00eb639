/* ops/posenc.h: positional encodings, absolute and relative. */
#ifndef QKV_OPS_POSENC_H
#define QKV_OPS_POSENC_H
#include "../qkv_graph.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Fixed sinusoidal table (Vaswani et al. 2017) for positions offset .. offset+T-1:
 * pe[t, 2i] = sin(t / 10000^(2i/C)), pe[t, 2i+1] = cos(...) -> (T, C), no gradient. */
QKV_API qkv_tensor *qkv_sinusoidal_pe(qkv_ctx *ctx, int64_t T, int64_t C, int64_t offset);

/* Rotary embedding (Su et al. 2021) of x (B, H, T, D), D even, positions offset .. offset+T-1,
 * pairs (x[2i], x[2i+1]) rotated by angle t * base^(-2i/D). Backward rotates back. */
QKV_API qkv_tensor *qkv_rope(qkv_ctx *ctx, qkv_tensor *x, int64_t offset, double base);

/* ALiBi (Press et al. 2022): head slopes m_h = 2^(-8 (h+1) / H) (the paper's geometric sequence,
 * with its interpolation for H not a power of two) into slopes[H]. */
QKV_API void qkv_alibi_slopes(int64_t H, qkv_real *slopes);
/* Bias (H, T, S) = -m_h |i - j| (no gradient), to add to scores. */
QKV_API qkv_tensor *qkv_alibi_bias(qkv_ctx *ctx, int64_t H, int64_t T, int64_t S);

/* T5 relative bias (Raffel et al. 2020): table (buckets, H) learnable; bucket(j - i) as in
 * T5's _relative_position_bucket(bidirectional, num_buckets, max_distance) -> bias (H, T, S). */
QKV_API int32_t qkv_t5_bucket(int64_t relative_position, bool bidirectional, int32_t num_buckets,
                              int32_t max_distance);
QKV_API qkv_tensor *qkv_t5_bias(qkv_ctx *ctx, qkv_tensor *table, int64_t T, int64_t S,
                                bool bidirectional, int32_t max_distance);

/* Shaw et al. (2018) relative positions, distance clipped to [-K, K]:
 * keys:   e_ij += q_i . a^K_{clip(j-i)}: q (B, H, T, D), rel_k (2K+1, D) -> (B, H, T, S) term;
 * values: o_i  += sum_j a_ij a^V_{clip(j-i)}: weights (B, H, T, S), rel_v (2K+1, D) -> (B,H,T,D). */
QKV_API qkv_tensor *qkv_shaw_scores(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *rel_k, int64_t S);
QKV_API qkv_tensor *qkv_shaw_values(qkv_ctx *ctx, qkv_tensor *weights, qkv_tensor *rel_v);

#ifdef __cplusplus
}
#endif
#endif
