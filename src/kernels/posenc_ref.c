/*
 * posenc_ref.c: the reference (oracle) positional-encoding kernels: loops written straight from
 * the definitions, every angle and every bucket recomputed, double accumulators. Never
 * optimised; scratch arguments are ignored.
 */
#include "posenc.h"

/* ---- RoPE ------------------------------------------------------------------------------------ */

static void rope(int64_t N, int64_t T, int64_t D, int64_t offset, double base, bool inverse,
                 const qkv_real *x, qkv_real *y, bool accumulate, qkv_real *table) {
    (void)table;
    for (int64_t n = 0; n < N; n++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < D / 2; i++) {
                const double angle = (double)(offset + t) * qkv__rope_theta(i, D, base);
                const double c = cos(angle), s = inverse ? -sin(angle) : sin(angle);
                const int64_t at = (n * T + t) * D + 2 * i;
                const double x0 = x[at], x1 = x[at + 1];
                const double y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
                y[at] = (qkv_real)(accumulate ? y[at] + y0 : y0);
                y[at + 1] = (qkv_real)(accumulate ? y[at + 1] + y1 : y1);
            }
}

/* ---- T5 bias --------------------------------------------------------------------------------- */

static int32_t t5_bucket_of(const qkv_t5_geom *g, int64_t i, int64_t j) {
    return qkv_t5_bucket(j - (g->offset + i), g->bidirectional, g->num_buckets, g->max_distance);
}

static void t5_fwd(const qkv_t5_geom *g, const qkv_real *table, qkv_real *bias) {
    for (int64_t h = 0; h < g->H; h++)
        for (int64_t i = 0; i < g->T; i++)
            for (int64_t j = 0; j < g->S; j++)
                bias[(h * g->T + i) * g->S + j] = table[(int64_t)t5_bucket_of(g, i, j) * g->H + h];
}

static void t5_bwd(const qkv_t5_geom *g, const qkv_real *dbias, qkv_real *dtable, double *scratch) {
    (void)scratch;
    for (int64_t b = 0; b < g->num_buckets; b++)
        for (int64_t h = 0; h < g->H; h++) {
            double acc = 0;
            for (int64_t i = 0; i < g->T; i++)
                for (int64_t j = 0; j < g->S; j++)
                    if (t5_bucket_of(g, i, j) == b) acc += dbias[(h * g->T + i) * g->S + j];
            dtable[b * g->H + h] += (qkv_real)acc;
        }
}

/* ---- Shaw ------------------------------------------------------------------------------------ */

static void shaw_scores_fwd(const qkv_shaw_geom *g, const qkv_real *q, const qkv_real *rel_k,
                            qkv_real *e, qkv_real *scratch) {
    (void)scratch;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t j = 0; j < g->S; j++) {
            const qkv_real *a = rel_k + qkv__shaw_row(qkv__shaw_query(g, n), j, g->K) * g->D;
            double acc = 0;
            for (int64_t d = 0; d < g->D; d++)
                acc += (double)q[n * g->D + d] * a[d];
            e[n * g->S + j] = (qkv_real)acc;
        }
}

static void shaw_scores_bwd(const qkv_shaw_geom *g, const qkv_real *q, const qkv_real *rel_k,
                            const qkv_real *de, qkv_real *dq, qkv_real *drel_k, qkv_real *scratch) {
    (void)scratch;
    if (dq) /* dq[n, d] = sum_j de[n, j] rel_k[k(i, j), d] */
        for (int64_t n = 0; n < g->N; n++)
            for (int64_t d = 0; d < g->D; d++) {
                double acc = 0;
                for (int64_t j = 0; j < g->S; j++)
                    acc += (double)de[n * g->S + j] *
                           rel_k[qkv__shaw_row(qkv__shaw_query(g, n), j, g->K) * g->D + d];
                dq[n * g->D + d] += (qkv_real)acc;
            }
    if (drel_k) /* drel_k[r, d] = sum over (n, j) with k(i, j) = r of de[n, j] q[n, d] */
        for (int64_t r = 0; r <= 2 * g->K; r++)
            for (int64_t d = 0; d < g->D; d++) {
                double acc = 0;
                for (int64_t n = 0; n < g->N; n++)
                    for (int64_t j = 0; j < g->S; j++)
                        if (qkv__shaw_row(qkv__shaw_query(g, n), j, g->K) == r)
                            acc += (double)de[n * g->S + j] * q[n * g->D + d];
                drel_k[r * g->D + d] += (qkv_real)acc;
            }
}

static void shaw_values_fwd(const qkv_shaw_geom *g, const qkv_real *a, const qkv_real *rel_v,
                            qkv_real *o, qkv_real *scratch) {
    (void)scratch;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t d = 0; d < g->D; d++) {
            double acc = 0;
            for (int64_t j = 0; j < g->S; j++)
                acc += (double)a[n * g->S + j] *
                       rel_v[qkv__shaw_row(qkv__shaw_query(g, n), j, g->K) * g->D + d];
            o[n * g->D + d] = (qkv_real)acc;
        }
}

static void shaw_values_bwd(const qkv_shaw_geom *g, const qkv_real *a, const qkv_real *rel_v,
                            const qkv_real *dout, qkv_real *da, qkv_real *drel_v,
                            qkv_real *scratch) {
    (void)scratch;
    if (da) /* da[n, j] = do[n, :] . rel_v[k(i, j), :] */
        for (int64_t n = 0; n < g->N; n++)
            for (int64_t j = 0; j < g->S; j++) {
                const qkv_real *v = rel_v + qkv__shaw_row(qkv__shaw_query(g, n), j, g->K) * g->D;
                double acc = 0;
                for (int64_t d = 0; d < g->D; d++)
                    acc += (double)dout[n * g->D + d] * v[d];
                da[n * g->S + j] += (qkv_real)acc;
            }
    if (drel_v) /* drel_v[r, d] = sum over (n, j) with k(i, j) = r of a[n, j] do[n, d] */
        for (int64_t r = 0; r <= 2 * g->K; r++)
            for (int64_t d = 0; d < g->D; d++) {
                double acc = 0;
                for (int64_t n = 0; n < g->N; n++)
                    for (int64_t j = 0; j < g->S; j++)
                        if (qkv__shaw_row(qkv__shaw_query(g, n), j, g->K) == r)
                            acc += (double)a[n * g->S + j] * dout[n * g->D + d];
                drel_v[r * g->D + d] += (qkv_real)acc;
            }
}

const qkv_posenc_kernels qkv_posenc_ref = {
    rope,           t5_fwd, t5_bwd, shaw_scores_fwd, shaw_scores_bwd, shaw_values_fwd, shaw_values_bwd,
    qkv__alibi_table, qkv__sinusoidal_table, qkv__sincos_2d_table};
