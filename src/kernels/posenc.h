/*
 * kernels/posenc.h: kernel tables of the positional-encoding family (the ops with real compute:
 * RoPE, the T5 bias, Shaw's relative terms). Two implementations with the same math: _ref (plain
 * loops straight from the definition, double accumulators: the oracle) and _cpu (OpenMP over
 * independent rows, cos/sin tables, GEMMs through qkv_gemm, per-distance bucketing). Every
 * kernel's result is independent of the thread count.
 *
 * Backward kernels accumulate (+=) into the input gradients; a NULL gradient pointer means that
 * input needs none.
 */
#ifndef QKV_KERNELS_POSENC_H
#define QKV_KERNELS_POSENC_H

#include "../core/internal.h"

#include <math.h>

/* T5 bias geometry. bias (H, T, S); query i sits at position offset + i, key j at j. */
typedef struct qkv_t5_geom {
    int64_t H, T, S, offset;
    int32_t num_buckets, max_distance;
    bool bidirectional;
    /* bucket[j - i + T - 1]: the bucket of relative position j - offset - i, for the T + S - 1
     * diagonals (precomputed by the op; the reference recomputes every entry instead). */
    const int32_t *bucket;
} qkv_t5_geom;

/* Shaw geometry: N rows (all leading dims times T); row n is the query at position
 * i = offset + n % T (offset 0 unless the op's *_at variant gave one); key j sits at j. */
typedef struct qkv_shaw_geom {
    int64_t N, T, S, D, K, offset;
} qkv_shaw_geom;

/* Position of the query of row n. */
static inline int64_t qkv__shaw_query(const qkv_shaw_geom *g, int64_t n) {
    return g->offset + n % g->T;
}

typedef struct qkv_posenc_kernels {
    /* RoPE over N blocks of (T, D): y = rot(+angle) x, or with inverse rot(-angle) x (the
     * backward); accumulate adds into y instead of overwriting it. table: T * D reals of scratch
     * (the fast kernel's cos/sin table; the reference computes every angle itself). */
    void (*rope)(int64_t N, int64_t T, int64_t D, int64_t offset, double base, bool inverse,
                 const qkv_real *x, qkv_real *y, bool accumulate, qkv_real *table);
    /* bias[h, i, j] = table[bucket(i, j) * H + h] */
    void (*t5_fwd)(const qkv_t5_geom *g, const qkv_real *table, qkv_real *bias);
    /* dtable[b * H + h] += sum over (i, j) in bucket b of dbias[h, i, j].
     * scratch: H * (T + S - 1 + num_buckets) doubles. */
    void (*t5_bwd)(const qkv_t5_geom *g, const qkv_real *dbias, qkv_real *dtable, double *scratch);
    /* e[n, j] = q[n, :] . rel_k[k(i, j), :]. scratch: qkv__shaw_scratch(g, 1) reals. */
    void (*shaw_scores_fwd)(const qkv_shaw_geom *g, const qkv_real *q, const qkv_real *rel_k,
                            qkv_real *e, qkv_real *scratch);
    /* dq += de rel_k (by distance), drel_k += (by distance) de^T q. scratch: (g, 1). */
    void (*shaw_scores_bwd)(const qkv_shaw_geom *g, const qkv_real *q, const qkv_real *rel_k,
                            const qkv_real *de, qkv_real *dq, qkv_real *drel_k, qkv_real *scratch);
    /* o[n, :] = sum_j a[n, j] rel_v[k(i, j), :]. scratch: (g, 1). */
    void (*shaw_values_fwd)(const qkv_shaw_geom *g, const qkv_real *a, const qkv_real *rel_v,
                            qkv_real *o, qkv_real *scratch);
    /* da[n, j] += do[n, :] . rel_v[k(i, j), :], drel_v[r] += sum_{k(i,j)=r} a[n, j] do[n, :].
     * scratch: (g, 2). */
    void (*shaw_values_bwd)(const qkv_shaw_geom *g, const qkv_real *a, const qkv_real *rel_v,
                            const qkv_real *dout, qkv_real *da, qkv_real *drel_v,
                            qkv_real *scratch);
    /* The fixed position tables (no input tensor; one implementation, posenc_tables.c, in both
     * tables: they write the values of their definitions, with libm's sin, cos, exp and pow):
     *   alibi   bias (H, T, S) = -m_h |p - j| with p = offset + i (+0 on the diagonal); m the
     *           H slopes (qkv_alibi_slopes)
     *   sinusoidal   pe (T, C): pe[t, 2k] = sin(p w_k), pe[t, 2k + 1] = cos(p w_k),
     *           p = offset + t, w_k = exp(-2k ln(10000) / C)
     *   sincos_2d    pe (rows cols, C), C = 4Q: sin / cos of the row, then of the column, times
     *           w_k = 10000^(-k / Q) */
    void (*alibi)(int64_t H, int64_t T, int64_t S, int64_t offset, const qkv_real *m, qkv_real *bias);
    void (*sinusoidal)(int64_t T, int64_t C, int64_t offset, qkv_real *pe);
    void (*sincos_2d)(int64_t rows, int64_t cols, int64_t C, qkv_real *pe);
} qkv_posenc_kernels;

void qkv__alibi_table(int64_t H, int64_t T, int64_t S, int64_t offset, const qkv_real *m, qkv_real *bias);
void qkv__sinusoidal_table(int64_t T, int64_t C, int64_t offset, qkv_real *pe);
void qkv__sincos_2d_table(int64_t rows, int64_t cols, int64_t C, qkv_real *pe);

extern const qkv_posenc_kernels qkv_posenc_ref;
extern const qkv_posenc_kernels qkv_posenc_cpu;

/* ---- math shared by both implementations ------------------------------------------------------
 */

/* RoPE frequency of pair i: theta_i = base^(-2i/D). */
static inline double qkv__rope_theta(int64_t i, int64_t D, double base) {
    return pow(base, -2.0 * (double)i / (double)D);
}

/* Shaw table row of (i, j): clamp(j - i, -K, K) + K. */
static inline int64_t qkv__shaw_row(int64_t i, int64_t j, int64_t K) {
    const int64_t d = j - i;
    return (d < -K ? -K : d > K ? K : d) + K;
}

/* The table rows Shaw's op can touch: distances j - i lie in [-(offset+T-1), S-1-offset], so
 * rows [*r_lo, *r_lo + count) with count <= 2K+1 (fewer when K exceeds the sequence lengths).
 * Returns count (0 when T or S is 0). */
static inline int64_t qkv__shaw_rows_used(const qkv_shaw_geom *g, int64_t *r_lo) {
    if (g->T <= 0 || g->S <= 0) {
        *r_lo = 0;
        return 0;
    }
    int64_t dlo = -(g->offset + g->T - 1), dhi = g->S - 1 - g->offset; /* dlo <= dhi */
    dlo = dlo < -g->K ? -g->K : dlo > g->K ? g->K : dlo;
    dhi = dhi < -g->K ? -g->K : dhi > g->K ? g->K : dhi;
    *r_lo = dlo + g->K;
    return dhi - dlo + 1;
}

/* Reals of scratch a Shaw kernel needs: `copies` (N, rows used) matrices. */
static inline int64_t qkv__shaw_scratch(const qkv_shaw_geom *g, int copies) {
    int64_t r_lo;
    return copies * g->N * qkv__shaw_rows_used(g, &r_lo);
}

#endif
