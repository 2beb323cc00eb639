/*
 * ops/posenc.h: positional encodings, absolute and relative.
 *
 *   absolute  sinusoidal table (Vaswani et al. 2017); learned positions are qkv_embedding on
 *             qkv_arange (ops/embedding.h)
 *   relative  RoPE (Su et al. 2021), ALiBi (Press et al. 2022), T5 bucketed bias (Raffel et al.
 *             2020), Shaw clipped relative embeddings (Shaw et al. 2018)
 *
 * Index convention of every relative encoding: i is the query index (the T rows), j the key index
 * (the S columns), and the relative position is j - i ("memory_position - query_position", as in
 * T5). Queries and keys both count from 0 unless a query offset is given: for incremental
 * decoding, where the T new queries are the last T of S positions, pass query_offset = S - T to
 * the *_at variants (query i then sits at position query_offset + i).
 *
 * Changes to the first version of this header (all backwards compatible for callers):
 * - qkv_alibi_slopes returns a qkv_status (was void) so a bad H is reported, not ignored;
 * - qkv_alibi_bias_at and qkv_t5_bias_at add a query offset (incremental decoding);
 * - qkv_rope, qkv_shaw_scores and qkv_shaw_values accept any leading dims (2 to 4 dims: (T, D),
 *   (B, T, D), (B, H, T, D)); the attention layers pass (B, H, T, D);
 * - qkv_t5_bucket returns -1 (and sets qkv_last_error) for arguments T5 cannot bucket.
 * - qkv_shaw_scores_at and qkv_shaw_values_at add a query offset (incremental decoding).
 */
#ifndef QKV_OPS_POSENC_H
#define QKV_OPS_POSENC_H
#include "../qkv_tensor.h"
#ifdef __cplusplus
extern "C" {
#endif

/* Fixed sinusoidal table (Vaswani et al. 2017; the PyTorch tutorial's PositionalEncoding) for
 * positions p = offset .. offset+T-1:
 *   pe[t, 2i] = sin(p w_i), pe[t, 2i+1] = cos(p w_i), w_i = exp(-ln(10000) 2i / C)  -> (T, C).
 * Odd C: the last column is the sin of the unpaired index i = (C-1)/2 (the tutorial's code
 * fails for odd C). A constant: the output never requires a gradient. T, C, offset >= 0. */
QKV_API qkv_tensor *qkv_sinusoidal_pe(qkv_ctx *ctx, int64_t T, int64_t C, int64_t offset);

/* Fixed 2-D sin-cos table of a rows x cols grid (MoCo v3, Chen et al. 2021; MAE, He et al.
 * 2022), cells in raster order n = r cols + c, C a positive multiple of 4, Q = C / 4:
 *   pe[n, k] = sin(r w_k), pe[n, Q + k] = cos(r w_k),
 *   pe[n, 2Q + k] = sin(c w_k), pe[n, 3Q + k] = cos(c w_k),   w_k = 10000^(-k / Q), k < Q
 * -> (rows * cols, C): the first half encodes the row, the second the column (MAE's
 * get_2d_sincos_pos_embed has the two halves the other way round). A constant: never requires a
 * gradient. rows, cols >= 0. */
QKV_API qkv_tensor *qkv_sincos_2d_pe(qkv_ctx *ctx, int64_t rows, int64_t cols, int64_t C);

/* Rotary embedding (Su et al. 2021) of x (..., T, D), D even, positions p = offset+t:
 *   (y[2i], y[2i+1]) = rot(p theta_i) (x[2i], x[2i+1]),  theta_i = base^(-2i/D)
 * (the interleaved pairs of the paper, of GPT-J and of the original LLaMA code). The
 * "rotate_half" layout of GPT-NeoX / Hugging Face pairs x[i] with x[i + D/2] instead; the two are
 * the same map up to a fixed permutation of the D features (HF's LLaMA conversion permutes the
 * rows of W_q and W_k). Apply to q and k (not v) after the head split: q_m . k_n then depends on
 * n - m only. Backward rotates dy by -p theta_i. offset >= 0, base > 0 (usually 10000). */
QKV_API qkv_tensor *qkv_rope(qkv_ctx *ctx, qkv_tensor *x, int64_t offset, double base);

/* ALiBi (Press et al. 2022) head slopes into slopes[0 .. H-1]. H a power of two:
 * m_h = 2^(-8 (h+1) / H); otherwise the paper's get_slopes: with n the largest power of two
 * below H, slopes(n) followed by slopes(2n)[0::2][:H-n]. QKV_ERR_INVALID_ARG for H < 1 or a NULL
 * slopes. */
QKV_API qkv_status qkv_alibi_slopes(int64_t H, qkv_real *slopes);
/* Bias (H, T, S) = -m_h |i - j| with i the query index (0 .. T-1) and j the key index
 * (0 .. S-1), to add to the scores. A constant: no gradient. */
QKV_API qkv_tensor *qkv_alibi_bias(qkv_ctx *ctx, int64_t H, int64_t T, int64_t S);
/* The same with query i at position query_offset + i: -m_h |query_offset + i - j|. */
QKV_API qkv_tensor *qkv_alibi_bias_at(qkv_ctx *ctx, int64_t H, int64_t T, int64_t S,
                                      int64_t query_offset);

/* T5 relative position bucket (Raffel et al. 2020), exactly T5's _relative_position_bucket
 * (Mesh TensorFlow; Hugging Face T5Attention) of relative_position = key - query:
 *   bidirectional: n = num_buckets / 2, offset n for positive positions, r = |rp|;
 *   otherwise:     n = num_buckets, r = max(-rp, 0) (only the past is told apart);
 *   max_exact = n / 2; r < max_exact: bucket r; else
 *   min(n - 1, max_exact + trunc(log(r / max_exact) / log(max_distance / max_exact)
 *                                * (n - max_exact))),
 * evaluated in float32 as T5's code does (so exact boundaries such as r = 64 land where T5 puts
 * them). Needs max_exact >= 1 and max_distance > max_exact; otherwise returns -1 and sets
 * qkv_last_error. */
QKV_API int32_t qkv_t5_bucket(int64_t relative_position, bool bidirectional, int32_t num_buckets,
                              int32_t max_distance);
/* T5 relative bias: table (num_buckets, H) learnable (HF relative_attention_bias.weight),
 * bias[h, i, j] = table[bucket(j - i), h]  -> (H, T, S). Backward scatter-adds dbias into the
 * table (deterministic). */
QKV_API qkv_tensor *qkv_t5_bias(qkv_ctx *ctx, qkv_tensor *table, int64_t T, int64_t S,
                                bool bidirectional, int32_t max_distance);
/* The same with query i at position query_offset + i: bucket(j - query_offset - i). */
QKV_API qkv_tensor *qkv_t5_bias_at(qkv_ctx *ctx, qkv_tensor *table, int64_t T, int64_t S,
                                   int64_t query_offset, bool bidirectional, int32_t max_distance);

/* Shaw et al. (2018) relative positions: k(i, j) = clamp(j - i, -K, K) indexes row k + K of a
 * table of 2K+1 rows (K = (rows - 1) / 2; an even row count is an error). The tables are shared
 * by all heads, as in the paper.
 * keys:   term e_ij = q_i . a^K_{k(i,j)}:  q (..., T, D), rel_k (2K+1, D), S keys -> (..., T, S).
 *         The caller scales it like the content scores (1/sqrt(D)) and adds it to them.
 * values: term o_i = sum_j a_ij a^V_{k(i,j)}: weights (..., T, S), rel_v (2K+1, Dv)
 *         -> (..., T, Dv), to add to the content output sum_j a_ij v_j.
 * Both differentiate in both inputs. */
QKV_API qkv_tensor *qkv_shaw_scores(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *rel_k, int64_t S);
QKV_API qkv_tensor *qkv_shaw_values(qkv_ctx *ctx, qkv_tensor *weights, qkv_tensor *rel_v);
/* The same with query i at position query_offset + i: k(i, j) = clamp(j - query_offset - i, -K,
 * K). query_offset >= 0. */
QKV_API qkv_tensor *qkv_shaw_scores_at(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *rel_k, int64_t S,
                                       int64_t query_offset);
QKV_API qkv_tensor *qkv_shaw_values_at(qkv_ctx *ctx, qkv_tensor *weights, qkv_tensor *rel_v,
                                       int64_t query_offset);

#ifdef __cplusplus
}
#endif
#endif
