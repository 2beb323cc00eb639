/*
 * kernels/attention.h: kernel tables of the attention building blocks (scores, additive scores,
 * normalisers) and the mask helpers the kernels share.
 *
 * Two implementations with the same math: attention_ref.c (naive loops accumulating in double,
 * masks evaluated through qkv_mask_allows: the oracle) and attention_cpu.c (qkv_gemm per head for
 * the dot products, OpenMP over independent rows, masks evaluated per row as a band plus tensor
 * lookups). Every kernel's result is independent of the thread count. Backward kernels
 * accumulate (+=) into gradients; a NULL gradient pointer means "not needed".
 *
 * Layouts (row-major; q and k of the dot kernels as in qkv_attn_dims): q (B, H, T, D), k (B, H, S, D), scores / weights
 * (B, H, T, S); additive: qp (B, H, T, A), kp (B, H, S, A), v (H, A) with A in dims.D.
 */
#ifndef QKV_KERNELS_ATTENTION_H
#define QKV_KERNELS_ATTENTION_H

#include "../core/internal.h"

#include <math.h>

/* COSINE scores clamp each norm from below: |q| -> max(|q|, eps) (as torch.nn.functional
 * .cosine_similarity). RELU_ROWNORM divides by sum_j relu(e_j) + eps. */
#define QKV_COSINE_EPS 1e-8
#define QKV_ROWNORM_EPS 1e-6

typedef struct qkv_attn_dims {
    int64_t B, H, T, S;
    int64_t D; /* head size (dot, cosine) or additive width A */
    /* dot kernels: where q (B, H, T, D) and k (B, H, S, D) and their gradients live; head views
     * of a projection (B, L, C) need no copy. The other kernels take contiguous tensors. */
    qkv__mat_layout lq, lk;
} qkv_attn_dims;

typedef struct qkv_attention_kernels {
    /* e = alpha q k^T for every (b, h). */
    void (*dot_fwd)(const qkv_attn_dims *d, qkv_real alpha, const qkv_real *q, const qkv_real *k,
                    qkv_real *e);
    /* dq += alpha de k;  dk += alpha de^T q. */
    void (*dot_bwd)(const qkv_attn_dims *d, qkv_real alpha, const qkv_real *q, const qkv_real *k,
                    const qkv_real *de, qkv_real *dq, qkv_real *dk);
    /* nq = max(|q_i|, eps) (B, H, T), nk = max(|k_j|, eps) (B, H, S);
     * e = g_h (q_i . k_j) / (nq_i nk_j) with g_h = g[gn == 1 ? 0 : h]. */
    void (*cos_fwd)(const qkv_attn_dims *d, const qkv_real *g, int64_t gn, const qkv_real *q,
                    const qkv_real *k, qkv_real *nq, qkv_real *nk, qkv_real *e);
    /* Gradients of the cosine scores given the saved norms and the forward output e;
     * dg (gn elements) += sum de * cos. False after recording an error (out of scratch). */
    bool (*cos_bwd)(qkv_ctx *ctx, const qkv_attn_dims *d, const qkv_real *g, int64_t gn,
                    const qkv_real *q, const qkv_real *k, const qkv_real *nq, const qkv_real *nk,
                    const qkv_real *e, const qkv_real *de, qkv_real *dq, qkv_real *dk,
                    qkv_real *dg);
    /* e_bhij = sum_a v_ha tanh(qp_bhia + kp_bhja). */
    void (*additive_fwd)(const qkv_attn_dims *d, const qkv_real *qp, const qkv_real *kp,
                         const qkv_real *v, qkv_real *e);
    /* Recomputes the tanh terms; dqp, dkp, dv may each be NULL. */
    bool (*additive_bwd)(qkv_ctx *ctx, const qkv_attn_dims *d, const qkv_real *qp,
                         const qkv_real *kp, const qkv_real *v, const qkv_real *de, qkv_real *dqp,
                         qkv_real *dkp, qkv_real *dv);
    /* a = normalize(e | mask) row by row; mask NULL = none. z (B, H, T) receives the
     * denominator sum_j relu(e_j) + eps of RELU_ROWNORM (NULL for the other normalisers). */
    void (*normalize_fwd)(const qkv_attn_dims *d, qkv_attn_norm norm, const qkv_mask *m,
                          const qkv_real *e, qkv_real *a, qkv_real *z);
    /* de += d a / d e applied to da. */
    void (*normalize_bwd)(const qkv_attn_dims *d, qkv_attn_norm norm, const qkv_mask *m,
                          const qkv_real *e, const qkv_real *a, const qkv_real *z,
                          const qkv_real *da, qkv_real *de);
} qkv_attention_kernels;

extern const qkv_attention_kernels qkv_attention_ref;
extern const qkv_attention_kernels qkv_attention_cpu;

/* Whether a saved cosine norm max(|x|, eps) is |x| itself (then it has a gradient) rather than
 * the clamp eps. Both kernel sets decide with this same test on the same saved value. */
static inline bool qkv__cos_unclamped(qkv_real n) {
    return n > (qkv_real)QKV_COSINE_EPS;
}

/* ---- masks (shared by the op files and the kernels) ------------------------------------------ */

/* Validate mask against scores of shape (B, T, S) for op: dtypes I32, key_padding (B, S),
 * allowed (T, S) or (B, T, S). Fails with a message naming op, the field and the shapes. */
bool qkv__mask_check(qkv_ctx *ctx, const char *op, const qkv_mask *m, int64_t B, int64_t T,
                     int64_t S);

/* The rule of qkv_mask_allows for one query row (b, i), split for fast kernels: causal and
 * window give a band [lo, hi) of keys; key_padding and allowed are looked up per key inside it.
 * Equivalent to qkv_mask_allows (the tests check it against that function). */
typedef struct qkv_mask_row {
    int64_t lo, hi;         /* keys outside [lo, hi) are masked; lo == hi: none allowed */
    const int32_t *padding; /* key_padding row b (stride padding_stride), or NULL */
    const int32_t *allowed; /* allowed row (b, i) (stride allowed_stride), or NULL */
    int64_t padding_stride, allowed_stride;
} qkv_mask_row;

static inline qkv_mask_row qkv__mask_row(const qkv_mask *m, int64_t b, int64_t i, int64_t S) {
    qkv_mask_row r = {0, S, NULL, NULL, 0, 0};
    if (!m) return r;
    if (m->causal && i + 1 < r.hi) r.hi = i + 1;
    if (m->window_right >= 0 && i + m->window_right + 1 < r.hi) r.hi = i + m->window_right + 1;
    if (m->window_left >= 0 && i - m->window_left > r.lo) r.lo = i - m->window_left;
    if (r.lo > r.hi) r.lo = r.hi; /* empty band; 0 <= lo <= hi <= S always */
    if (m->key_padding) {
        const qkv_tensor *p = m->key_padding; /* (B, S) */
        r.padding = (const int32_t *)p->data + b * p->stride[0];
        r.padding_stride = p->stride[1];
    }
    if (m->allowed) {
        const qkv_tensor *a = m->allowed; /* (T, S) or (B, T, S) */
        const int32_t *base = (const int32_t *)a->data;
        if (a->ndim == 3) base += b * a->stride[0];
        r.allowed = base + i * a->stride[a->ndim - 2];
        r.allowed_stride = a->stride[a->ndim - 1];
    }
    return r;
}

/* Whether key j (inside the band) passes the tensor masks of the row. */
static inline bool qkv__mask_row_key(const qkv_mask_row *r, int64_t j) {
    return (!r->padding || r->padding[j * r->padding_stride] == 0) &&
           (!r->allowed || r->allowed[j * r->allowed_stride] != 0);
}

/* Real-typed libm calls: expf / tanhf in the float build, exp / tanh in the double build. */
#ifdef QKV_DOUBLE
#define qkv__rexp exp
#define qkv__rtanh tanh
#define qkv__rsqrt sqrt
#else
#define qkv__rexp expf
#define qkv__rtanh tanhf
#define qkv__rsqrt sqrtf
#endif

#endif
