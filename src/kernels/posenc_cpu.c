/*
 * posenc_cpu.c: fast positional-encoding kernels.
 *
 * - RoPE: one (T, D/2) cos/sin table per call (angles in double, as the reference), then the
 *   rotation streams over the N*T rows in parallel.
 * - T5 bias: the bucket depends only on the diagonal j - i, so the forward gathers from a
 *   per-diagonal bucket vector, and the backward first sums dbias along each diagonal, then adds
 *   the T + S - 1 diagonal sums into their buckets. One thread owns a head (a table column), in a
 *   fixed order: deterministic without atomics.
 * - Shaw: the term q_i . a_{k(i,j)} takes only the 2K+1 (fewer when K exceeds the lengths)
 *   values q_i . a_r per row, so one GEMM P = Q A^T (N x R) followed by a gather replaces the
 *   N x S x D loop; the values term buckets each weight row by clipped distance (W, N x R) and
 *   then O = W A in one GEMM. The backward of each is the transpose: bucket <-> gather. GEMMs run
 *   outside parallel regions (BLAS threads itself); gathers and buckets are row-parallel and
 *   each row is summed in a fixed order.
 */
#include "posenc.h"

#define POSENC_GRAIN 32768

/* ---- RoPE ------------------------------------------------------------------------------------ */

static void rope(int64_t N, int64_t T, int64_t D, int64_t offset, double base, bool inverse,
                 const qkv_real *x, qkv_real *y, bool accumulate, qkv_real *table) {
    const int64_t P = D / 2;
    qkv_real *cs = table, *sn = table + T * P; /* (T, P) each */
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (T * P > POSENC_GRAIN / 8)
#endif
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < P; i++) {
            const double angle = (double)(offset + t) * qkv__rope_theta(i, D, base);
            cs[t * P + i] = (qkv_real)cos(angle);
            sn[t * P + i] = (qkv_real)(inverse ? -sin(angle) : sin(angle));
        }
    const int64_t rows = N * T;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (rows * D > POSENC_GRAIN)
#endif
    for (int64_t r = 0; r < rows; r++) {
        const qkv_real *c = cs + (r % T) * P, *s = sn + (r % T) * P, *xr = x + r * D;
        qkv_real *yr = y + r * D;
        if (accumulate)
            for (int64_t i = 0; i < P; i++) {
                const qkv_real x0 = xr[2 * i], x1 = xr[2 * i + 1];
                yr[2 * i] += x0 * c[i] - x1 * s[i];
                yr[2 * i + 1] += x0 * s[i] + x1 * c[i];
            }
        else
            for (int64_t i = 0; i < P; i++) {
                const qkv_real x0 = xr[2 * i], x1 = xr[2 * i + 1];
                yr[2 * i] = x0 * c[i] - x1 * s[i];
                yr[2 * i + 1] = x0 * s[i] + x1 * c[i];
            }
    }
}

/* ---- T5 bias --------------------------------------------------------------------------------- */

static void t5_fwd(const qkv_t5_geom *g, const qkv_real *table, qkv_real *bias) {
    const int64_t H = g->H, T = g->T, S = g->S;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (H * T * S > POSENC_GRAIN)
#endif
    for (int64_t r = 0; r < H * T; r++) {
        const int64_t h = r / T, i = r % T;
        const int32_t *bk = g->bucket + (T - 1 - i); /* bk[j]: bucket of (i, j) */
        qkv_real *row = bias + r * S;
        for (int64_t j = 0; j < S; j++)
            row[j] = table[(int64_t)bk[j] * H + h];
    }
}

static void t5_bwd(const qkv_t5_geom *g, const qkv_real *dbias, qkv_real *dtable, double *scratch) {
    const int64_t H = g->H, T = g->T, S = g->S, nb = g->num_buckets;
    const int64_t ndiag = T + S - 1, per_head = ndiag + nb;
    if (T == 0 || S == 0) return;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (H * T * S > POSENC_GRAIN)
#endif
    for (int64_t h = 0; h < H; h++) {
        double *diag = scratch + h * per_head, *sum = diag + ndiag;
        for (int64_t d = 0; d < per_head; d++)
            diag[d] = 0;
        for (int64_t i = 0; i < T; i++) { /* diag[j - i + T - 1] += dbias[h, i, j] */
            const qkv_real *row = dbias + (h * T + i) * S;
            double *dg = diag + (T - 1 - i);
            for (int64_t j = 0; j < S; j++)
                dg[j] += row[j];
        }
        for (int64_t d = 0; d < ndiag; d++)
            sum[g->bucket[d]] += diag[d];
        for (int64_t b = 0; b < nb; b++)
            dtable[b * H + h] += (qkv_real)sum[b];
    }
}

/* ---- Shaw ------------------------------------------------------------------------------------ */

/* The three runs of keys of row i: [0, lo_end) clipped to distance -K (table row 0),
 * [lo_end, hi_start) unclipped (row j - i + K), [hi_start, S) clipped to +K (row 2K). */
static inline void shaw_runs(const qkv_shaw_geom *g, int64_t i, int64_t *lo_end,
                             int64_t *hi_start) {
    int64_t lo = i - g->K + 1, hi = i + g->K;
    lo = lo < 0 ? 0 : lo > g->S ? g->S : lo;
    hi = hi < lo ? lo : hi > g->S ? g->S : hi;
    *lo_end = lo;
    *hi_start = hi;
}

/* out[n, j] (+)= P[n, row(i, j) - r_lo]: spread the per-distance values over the keys. */
static void shaw_gather(const qkv_shaw_geom *g, int64_t r_lo, int64_t R, const qkv_real *P,
                        qkv_real *out, bool accumulate) {
    const int64_t S = g->S, K = g->K;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (g->N * S > POSENC_GRAIN)
#endif
    for (int64_t n = 0; n < g->N; n++) {
        const int64_t i = qkv__shaw_query(g, n);
        int64_t lo_end, hi_start;
        shaw_runs(g, i, &lo_end, &hi_start);
        const qkv_real *p = P + n * R;
        qkv_real *o = out + n * S;
        const int64_t mid = i - K + r_lo; /* P column of key j in the middle run: j - mid */
        if (accumulate) {
            for (int64_t j = 0; j < lo_end; j++)
                o[j] += p[0 - r_lo];
            for (int64_t j = lo_end; j < hi_start; j++)
                o[j] += p[j - mid];
            for (int64_t j = hi_start; j < S; j++)
                o[j] += p[2 * K - r_lo];
        } else {
            for (int64_t j = 0; j < lo_end; j++)
                o[j] = p[0 - r_lo];
            for (int64_t j = lo_end; j < hi_start; j++)
                o[j] = p[j - mid];
            for (int64_t j = hi_start; j < S; j++)
                o[j] = p[2 * K - r_lo];
        }
    }
}

/* P[n, r - r_lo] = sum over keys j with row(i, j) = r of in[n, j]: the transpose of the gather. */
static void shaw_bucket(const qkv_shaw_geom *g, int64_t r_lo, int64_t R, const qkv_real *in,
                        qkv_real *P) {
    const int64_t S = g->S, K = g->K;
#ifdef QKV_WITH_OPENMP
#pragma omp parallel for schedule(static) if (g->N * S > POSENC_GRAIN)
#endif
    for (int64_t n = 0; n < g->N; n++) {
        const int64_t i = qkv__shaw_query(g, n);
        int64_t lo_end, hi_start;
        shaw_runs(g, i, &lo_end, &hi_start);
        const qkv_real *x = in + n * S;
        qkv_real *p = P + n * R;
        for (int64_t r = 0; r < R; r++)
            p[r] = 0;
        const int64_t mid = i - K + r_lo;
        for (int64_t j = lo_end; j < hi_start; j++)
            p[j - mid] = x[j]; /* one key per distance */
        if (lo_end > 0) {
            double acc = 0;
            for (int64_t j = 0; j < lo_end; j++)
                acc += x[j];
            p[0 - r_lo] += (qkv_real)acc;
        }
        if (hi_start < S) { /* with K = 0 both clipped runs share row 0 */
            double acc = 0;
            for (int64_t j = hi_start; j < S; j++)
                acc += x[j];
            p[2 * K - r_lo] += (qkv_real)acc;
        }
    }
}

static void shaw_scores_fwd(const qkv_shaw_geom *g, const qkv_real *q, const qkv_real *rel_k,
                            qkv_real *e, qkv_real *scratch) {
    int64_t r_lo;
    const int64_t R = qkv__shaw_rows_used(g, &r_lo);
    if (R == 0 || g->N == 0) return; /* e is empty */
    /* P (N, R) = Q (N, D) A^T, A = rel_k rows r_lo .. r_lo+R-1 */
    qkv_gemm(false, true, g->N, R, g->D, 1, q, g->D, rel_k + r_lo * g->D, g->D, 0, scratch, R);
    shaw_gather(g, r_lo, R, scratch, e, false);
}

static void shaw_scores_bwd(const qkv_shaw_geom *g, const qkv_real *q, const qkv_real *rel_k,
                            const qkv_real *de, qkv_real *dq, qkv_real *drel_k, qkv_real *scratch) {
    int64_t r_lo;
    const int64_t R = qkv__shaw_rows_used(g, &r_lo);
    if (R == 0 || g->N == 0) return;
    shaw_bucket(g, r_lo, R, de, scratch); /* dP (N, R) */
    if (dq)                               /* dQ (N, D) += dP A */
        qkv_gemm(false, false, g->N, g->D, R, 1, scratch, R, rel_k + r_lo * g->D, g->D, 1, dq,
                 g->D);
    if (drel_k) /* dA (R, D) += dP^T Q */
        qkv_gemm(true, false, R, g->D, g->N, 1, scratch, R, q, g->D, 1, drel_k + r_lo * g->D, g->D);
}

static void shaw_values_fwd(const qkv_shaw_geom *g, const qkv_real *a, const qkv_real *rel_v,
                            qkv_real *o, qkv_real *scratch) {
    int64_t r_lo;
    const int64_t R = qkv__shaw_rows_used(g, &r_lo);
    if (R == 0) { /* no keys: an empty sum */
        for (int64_t n = 0; n < g->N * g->D; n++)
            o[n] = 0;
        return;
    }
    shaw_bucket(g, r_lo, R, a, scratch); /* W (N, R) */
    qkv_gemm(false, false, g->N, g->D, R, 1, scratch, R, rel_v + r_lo * g->D, g->D, 0, o, g->D);
}

static void shaw_values_bwd(const qkv_shaw_geom *g, const qkv_real *a, const qkv_real *rel_v,
                            const qkv_real *dout, qkv_real *da, qkv_real *drel_v,
                            qkv_real *scratch) {
    int64_t r_lo;
    const int64_t R = qkv__shaw_rows_used(g, &r_lo);
    if (R == 0 || g->N == 0) return;
    qkv_real *w = scratch, *dw = scratch + g->N * R;
    if (da) { /* dW (N, R) = dO A^T, spread back over the keys */
        qkv_gemm(false, true, g->N, R, g->D, 1, dout, g->D, rel_v + r_lo * g->D, g->D, 0, dw, R);
        shaw_gather(g, r_lo, R, dw, da, true);
    }
    if (drel_v) { /* dA (R, D) += W^T dO */
        shaw_bucket(g, r_lo, R, a, w);
        qkv_gemm(true, false, R, g->D, g->N, 1, w, R, dout, g->D, 1, drel_v + r_lo * g->D, g->D);
    }
}

const qkv_posenc_kernels qkv_posenc_cpu = {
    rope,           t5_fwd, t5_bwd, shaw_scores_fwd, shaw_scores_bwd, shaw_values_fwd, shaw_values_bwd,
    qkv__alibi_table, qkv__sinusoidal_table, qkv__sincos_2d_table};
