/*
 * kernels/attend_cached.h: scaled-dot-product attention of one new query per row over a KV cache
 * read in place (the decoding step of mha_cached.c).
 *
 *   s_j = scale q . k_j,   o = sum_j softmax_j(s_j) v_j     over keys j < S not padded
 *
 * for every row n and head h, where q, k_j and v_j are (D) vectors at strided places: q inside
 * the projection's output, k and v inside the session's (N, H, L, D) cache buffers, and o written
 * straight into the merged-heads layout (N, H D) the output projection reads. A row with no
 * allowed key gets o = 0 and one with a NaN score o = NaN, as qkv_sdpa. The math is qkv_sdpa's
 * forward with T = 1; what differs is only the data movement: qkv_sdpa wants contiguous
 * operands, so every step would copy the narrowed cache and build a transposed copy of K
 * (O(N H S D) each, per layer and step), then merge the heads of o into another tensor. With
 * kv_rows, rows share cache rows (the beams of a sentence attending over its one copy of the
 * projected source); with key_rows, each key has its own row (beam search's hypotheses reading
 * the keys of their common prefix where they were written, instead of copies of them).
 *
 * Determinism: (n, h) pairs are independent tasks; each sums its keys and dimensions in a fixed
 * order, so the result does not depend on the thread count.
 */
#ifndef QKV_KERNELS_ATTEND_CACHED_H
#define QKV_KERNELS_ATTEND_CACHED_H

#include "../core/internal.h"

typedef struct qkv_attend_cached_problem {
    int64_t N, H, S, D; /* rows, heads, keys attended (positions 0 .. S-1), head size */
    double scale;
    const qkv_real *q;     /* q[n][h][:] at q + n q_sn + h q_sh, unit stride */
    int64_t q_sn, q_sh;    /* element strides */
    const qkv_real *k, *v; /* k[n][h][j][:] at k + n kv_sn + h kv_sh + j kv_sj, unit stride */
    int64_t kv_sn, kv_sh, kv_sj;
    const int32_t *kv_rows;     /* NULL, or (N): row n reads k and v of row kv_rows[n] */
    const int32_t *key_rows;    /* NULL, or (N, key_rows_ld): key j of row n is read from row
                                 * key_rows[n key_rows_ld + j] (replaces kv_rows) */
    int64_t key_rows_ld;
    const int32_t *key_padding; /* (N, S) contiguous, nonzero = masked key; or NULL */
    qkv_real *o;                /* o[n][h D + d] at o + n o_sn + h D + d */
    int64_t o_sn;
} qkv_attend_cached_problem;

/* Runs the problem; scratch comes from ctx's arena (S reals and S offsets per thread). Returns
 * false (with the context's error set) when the scratch cannot be had. */
bool qkv__attend_cached(qkv_ctx *ctx, const qkv_attend_cached_problem *p);

/* Tests: false makes qkv__attend_cached use its portable loops where it would use AVX2 (the
 * same bits); true, the default, lets it choose. */
void qkv__attend_cached_vector(bool on);

#endif
