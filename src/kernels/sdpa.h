/*
 * kernels/sdpa.h: kernel table of the fused scaled-dot-product attention (qkv_sdpa), the problem
 * description both implementations share, and the mask rule every kernel follows.
 *
 *   s_ij = scale * q_i . k_j - m_h |i - j|          (the ALiBi term only with slopes)
 *   o_i  = sum_j softmax_j(s_ij) v_j                 over the allowed j of row i
 *   lse_i = log sum_j exp(s_ij)                      saved for backward; -inf when no j is allowed
 *
 * With attention dropout (training, p > 0) the weights are dropped after the softmax, as
 * torch.nn.functional.scaled_dot_product_attention(dropout_p = p) does:
 *   o_i = sum_j z_ij softmax_j(s_ij) v_j,   z_ij = keep_ij / (1 - p),
 * keep_ij being the decision qkv_dropout makes for element ((b H + h) T + i) S + j of a
 * (B, H, T, S) weights tensor at the same Philox position (seed, step, stream): Philox word r of
 * that element index, kept when (r >> 8) >= ceil(p 2^24) (sdpa_keep). lse stays the undropped one.
 *
 * Two implementations with the same math: _ref (one row of scores at a time, double sums: the
 * oracle) and _cpu (FlashAttention-2 tiling with an online softmax; never stores (T, S)).
 */
#ifndef QKV_KERNELS_SDPA_H
#define QKV_KERNELS_SDPA_H

#include "../core/internal.h"

#include <math.h>

/* One attention problem: geometry, scale, ALiBi slopes and the mask (contiguous), and the layouts
 * of q, k, v: row (b, h, i) of q starts at b lq.outer + h lq.inner + i lq.ld (head views of a
 * projection are read in place); their gradients have the same layouts. o, lse and dout are
 * contiguous. */
typedef struct qkv_sdpa_problem {
    int64_t B, H, T, S, D, Dv;
    qkv__mat_layout lq, lk, lv;
    double scale;
    const qkv_real *alibi;             /* (H) slopes m_h, or NULL */
    bool causal;                       /* j <= i */
    int64_t window_left, window_right; /* i - left <= j <= i + right; < 0 = unlimited */
    const int32_t *key_padding;        /* (B, S), nonzero = padded key; or NULL */
    const int32_t *allowed;            /* (T, S) or (B, T, S), nonzero = may attend; or NULL */
    int64_t allowed_bstride;           /* 0 for (T, S), T * S for (B, T, S) */
    double dropout;                    /* p in [0, 1); 0 = no dropout */
    uint64_t seed, step, stream;       /* Philox position of the dropout (qkv_dropout's) */
} qkv_sdpa_problem;

/* Offset of row i of head bh = b H + h in a tensor of layout l. */
static inline int64_t sdpa_row(qkv__mat_layout l, int64_t H, int64_t bh, int64_t i) {
    return bh / H * l.outer + bh % H * l.inner + i * l.ld;
}

/* Whether query i of batch entry b may attend to key j: every active rule must allow it. This is
 * the rule of qkv_mask_allows (ops/attention.h), restated on the problem's contiguous mask data. */
static inline bool sdpa_allowed(const qkv_sdpa_problem *p, int64_t b, int64_t i, int64_t j) {
    if (p->causal && j > i) return false;
    if (p->window_left >= 0 && j < i - p->window_left) return false;
    if (p->window_right >= 0 && j > i + p->window_right) return false;
    if (p->key_padding && p->key_padding[b * p->S + j]) return false;
    if (p->allowed && !p->allowed[b * p->allowed_bstride + i * p->S + j]) return false;
    return true;
}

/* The ALiBi term m_h |i - j| (0 without slopes). */
static inline double sdpa_alibi(const qkv_sdpa_problem *p, int64_t h, int64_t i, int64_t j) {
    return p->alibi ? (double)p->alibi[h] * (double)(i > j ? i - j : j - i) : 0.0;
}

/* Integer keep test of dropout with probability p on a Philox word r: u = (r >> 8) 2^-24 >= p,
 * exact since u is; the test of qkv_dropout's kernels (kernels/elementwise_cpu.c). */
static inline uint32_t sdpa_keep_threshold(double p) {
    return (uint32_t)ceil((double)(float)p * 16777216.0);
}

/* Philox element index of weight (i, j) of head bh = b H + h in the (B, H, T, S) layout. */
static inline uint64_t sdpa_weight_index(const qkv_sdpa_problem *p, int64_t bh, int64_t i,
                                         int64_t j) {
    return ((uint64_t)bh * (uint64_t)p->T + (uint64_t)i) * (uint64_t)p->S + (uint64_t)j;
}

typedef struct qkv_sdpa_kernels {
    /* o (B, H, T, Dv) and lse (B, H, T) from q (B, H, T, D), k (B, H, S, D), v (B, H, S, Dv),
     * with the problem's dropout when p->dropout > 0.
     * A row with no allowed key gets o = 0 and lse = -inf. Scratch comes from ctx's arena;
     * returns false (with the context's error set) when it cannot be had. */
    bool (*fwd)(qkv_ctx *ctx, const qkv_sdpa_problem *p, const qkv_real *q, const qkv_real *k,
                const qkv_real *v, qkv_real *o, qkv_real *lse);
    /* dq (B, H, T, D), dk (B, H, S, D), dv (B, H, S, Dv) += the gradients of sum(o * dout), given
     * the forward's o and lse (the dropout mask is regenerated from the Philox position, never
     * stored). Any of dq, dk, dv may be NULL (not needed). */
    bool (*bwd)(qkv_ctx *ctx, const qkv_sdpa_problem *p, const qkv_real *q, const qkv_real *k,
                const qkv_real *v, const qkv_real *o, const qkv_real *lse, const qkv_real *dout,
                qkv_real *dq, qkv_real *dk, qkv_real *dv);
} qkv_sdpa_kernels;

/* The tiled kernel's tile product (kernels/sdpa_cpu.c), for the tests: c[r][0:n] +=
 * sum_{x < kk} a[r][x] b[x][0:n] for r < m (row-major, leading dimensions lda, ldb, ldc), each
 * element summed in x order with separate multiplies and adds, in whichever clone the CPU
 * selects (AVX-512, AVX2 or the x86-64 baseline): the bits of the plain triple loop. */
void qkv__sdpa_mm_acc(int64_t m, int64_t n, int64_t kk, const qkv_real *a, int64_t lda,
                      const qkv_real *b, int64_t ldb, qkv_real *c, int64_t ldc);

/* The CPU backward runs one task per head in one pass when B H is at least this many heads per
 * thread (fewer tasks would leave threads idle: then two passes, which split heads into blocks).
 * Both schedules give the same bits (sdpa_cpu.c), so the choice never changes a result. */
#define QKV_SDPA_ONE_PASS_HEADS_PER_THREAD 4

extern const qkv_sdpa_kernels qkv_sdpa_ref;
extern const qkv_sdpa_kernels qkv_sdpa_cpu;

#endif
