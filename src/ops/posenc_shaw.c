/*
 * posenc_shaw.c: relative position representations of Shaw, Uszkoreit & Vaswani (2018).
 *
 * The distance j - i is clipped to [-K, K]; row k(i, j) = clamp(j - i, -K, K) + K of a learned
 * (2K+1, D) table is the edge representation between query i and key j (eq. 3-4 of the paper;
 * shared across heads, as there). Two terms, each the paper's addition to one side of
 * attention:
 *   scores (eq. 4):  e_ij = q_i . a^K_{k(i,j)}        q (..., T, D), rel_k (2K+1, D) -> (..., T, S)
 *   values (eq. 3):  o_i  = sum_j a_ij a^V_{k(i,j)}   a (..., T, S), rel_v (2K+1, Dv) -> (..., T,
 * Dv) The caller adds the first to the content scores q_i . k_j before scaling by 1/sqrt(D) and
 * normalising, and the second to the content output sum_j a_ij v_j.
 *
 * The *_at variants place query i at position query_offset + i (incremental decoding: T new
 * queries after query_offset earlier positions), so the distance is j - query_offset - i.
 *
 * Backward (nothing saved; both inputs are on the tape; the offset is kept in the entry):
 *   scores: dq_i += sum_j de_ij a^K_{k(i,j)},  da^K_r += sum_{k(i,j)=r} de_ij q_i
 *   values: da_ij += do_i . a^V_{k(i,j)},       da^V_r += sum_{k(i,j)=r} a_ij do_i
 * The fast kernels group keys by clipped distance so each product is one GEMM (kernels/posenc.h).
 */
#include "../kernels/posenc.h"
#include "../kernels/backend.h"

#include <limits.h>

/* rel must be a real (2K+1, width) table; width must equal want when want >= 0. */
static bool check_table(qkv_ctx *ctx, const char *op, const qkv_tensor *rel, const char *arg,
                        int64_t want) {
    if (!qkv__check_real(ctx, op, rel, arg)) return false;
    char br[96];
    if (rel->ndim != 2 || rel->shape[0] % 2 == 0) {
        QKV_FAIL(ctx, QKV_ERR_SHAPE,
                 "%s: %s %s must be (2K+1, D): an odd number of rows, one per "
                 "clipped distance -K .. K",
                 op, arg, qkv_tensor_shape_str(rel, br, sizeof br));
        return false;
    }
    if (want >= 0 && rel->shape[1] != want) {
        QKV_FAIL(ctx, QKV_ERR_SHAPE, "%s: %s %s must have %lld columns (the head size of q)", op,
                 arg, qkv_tensor_shape_str(rel, br, sizeof br), (long long)want);
        return false;
    }
    return true;
}

/* The fast kernels hand N, R and D to BLAS as int; scratch is N x R reals per copy. */
static qkv_real *shaw_scratch(qkv_ctx *ctx, const char *op, const qkv_shaw_geom *g, int copies) {
    int64_t r_lo;
    const int64_t R = qkv__shaw_rows_used(g, &r_lo);
    if (g->N > INT_MAX || R > INT_MAX || g->D > INT_MAX)
        return QKV_FAIL(ctx, QKV_ERR_UNSUPPORTED, "%s: dimension over 2^31-1 (N = %lld, D = %lld)",
                        op, (long long)g->N, (long long)g->D);
    if (g->N && R > INT64_MAX / 64 / g->N)
        return QKV_FAIL(ctx, QKV_ERR_OOM, "%s: scratch of %lld x %lld overflows", op,
                        (long long)g->N, (long long)R);
    return qkv__scratch(ctx, sizeof(qkv_real) * (size_t)(qkv__shaw_scratch(g, copies) + 1));
}

/* ---- scores ---------------------------------------------------------------------------------- */

static qkv_shaw_geom scores_geom(const qkv_tensor *q, const qkv_tensor *rel_k, int64_t S,
                                 int64_t offset) {
    return (qkv_shaw_geom){.N = qkv__rows(q),
                           .T = q->shape[q->ndim - 2],
                           .S = S,
                           .D = qkv__last(q),
                           .K = (rel_k->shape[0] - 1) / 2,
                           .offset = offset};
}

static void shaw_scores_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_tensor *q = e->in[0], *rel_k = e->in[1];
    const qkv_shaw_geom g = scores_geom(q, rel_k, qkv__last(e->out), e->i[0]);
    qkv_real *dq = qkv__grad(ctx, q), *drel = qkv__grad(ctx, rel_k);
    if (!dq && !drel) return;
    qkv_real *scratch = shaw_scratch(ctx, "shaw_scores", &g, 1);
    if (!scratch) return;
    ctx->backend->posenc->shaw_scores_bwd(&g, qkv__data(q), qkv__data(rel_k),
                                                 (const qkv_real *)e->out->grad, dq, drel, scratch);
}

static const qkv_op_desc shaw_scores_op = {"shaw_scores", shaw_scores_backward};

qkv_tensor *qkv_shaw_scores(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *rel_k, int64_t S) {
    return qkv_shaw_scores_at(ctx, q, rel_k, S, 0);
}

qkv_tensor *qkv_shaw_scores_at(qkv_ctx *ctx, qkv_tensor *q, qkv_tensor *rel_k, int64_t S,
                               int64_t query_offset) {
    if (!QKV_OP_BEGIN(ctx, "shaw_scores", q, rel_k)) return NULL;
    if (!qkv__check_real(ctx, "shaw_scores", q, "q")) return NULL;
    char bq[96];
    if (q->ndim < 2)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "shaw_scores: q %s must be (..., T, D)",
                        qkv_tensor_shape_str(q, bq, sizeof bq));
    if (!check_table(ctx, "shaw_scores", rel_k, "rel_k", qkv__last(q))) return NULL;
    if (S < 0)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "shaw_scores: key count S = %lld must be >= 0",
                        (long long)S);
    if (query_offset < 0)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "shaw_scores: query_offset = %lld must be >= 0",
                        (long long)query_offset);
    q = qkv__contig(ctx, q);
    rel_k = qkv__contig(ctx, rel_k);
    if (ctx->status) return NULL;
    int64_t shape[QKV_MAX_DIMS];
    for (int d = 0; d < q->ndim; d++)
        shape[d] = q->shape[d];
    shape[q->ndim - 1] = S;
    qkv_tensor *e = qkv__alloc(ctx, QKV_REAL, q->ndim, shape); /* (..., T, S) */
    if (!e) return NULL;
    const qkv_shaw_geom g = scores_geom(q, rel_k, S, query_offset);
    qkv_real *scratch = shaw_scratch(ctx, "shaw_scores", &g, 1);
    if (!scratch) return NULL;
    ctx->backend->posenc->shaw_scores_fwd(&g, qkv__data(q), qkv__data(rel_k), qkv__data(e),
                                                 scratch);
    qkv_tape_entry *te = qkv__record(ctx, &shaw_scores_op, e, 2, (qkv_tensor *[]){q, rel_k});
    if (te) te->i[0] = query_offset;
    return e;
}

/* ---- values ---------------------------------------------------------------------------------- */

static qkv_shaw_geom values_geom(const qkv_tensor *a, const qkv_tensor *rel_v, int64_t offset) {
    return (qkv_shaw_geom){.N = qkv__rows(a),
                           .T = a->shape[a->ndim - 2],
                           .S = qkv__last(a),
                           .D = rel_v->shape[1],
                           .K = (rel_v->shape[0] - 1) / 2,
                           .offset = offset};
}

static void shaw_values_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_tensor *a = e->in[0], *rel_v = e->in[1];
    const qkv_shaw_geom g = values_geom(a, rel_v, e->i[0]);
    qkv_real *da = qkv__grad(ctx, a), *drel = qkv__grad(ctx, rel_v);
    if (!da && !drel) return;
    qkv_real *scratch = shaw_scratch(ctx, "shaw_values", &g, 2);
    if (!scratch) return;
    ctx->backend->posenc->shaw_values_bwd(&g, qkv__data(a), qkv__data(rel_v),
                                                 (const qkv_real *)e->out->grad, da, drel, scratch);
}

static const qkv_op_desc shaw_values_op = {"shaw_values", shaw_values_backward};

qkv_tensor *qkv_shaw_values(qkv_ctx *ctx, qkv_tensor *weights, qkv_tensor *rel_v) {
    return qkv_shaw_values_at(ctx, weights, rel_v, 0);
}

qkv_tensor *qkv_shaw_values_at(qkv_ctx *ctx, qkv_tensor *weights, qkv_tensor *rel_v,
                               int64_t query_offset) {
    if (!QKV_OP_BEGIN(ctx, "shaw_values", weights, rel_v)) return NULL;
    if (!qkv__check_real(ctx, "shaw_values", weights, "weights")) return NULL;
    char bw[96];
    if (weights->ndim < 2)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "shaw_values: weights %s must be (..., T, S)",
                        qkv_tensor_shape_str(weights, bw, sizeof bw));
    if (!check_table(ctx, "shaw_values", rel_v, "rel_v", -1)) return NULL;
    if (query_offset < 0)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "shaw_values: query_offset = %lld must be >= 0",
                        (long long)query_offset);
    weights = qkv__contig(ctx, weights);
    rel_v = qkv__contig(ctx, rel_v);
    if (ctx->status) return NULL;
    int64_t shape[QKV_MAX_DIMS];
    for (int d = 0; d < weights->ndim; d++)
        shape[d] = weights->shape[d];
    shape[weights->ndim - 1] = rel_v->shape[1];
    qkv_tensor *o = qkv__alloc(ctx, QKV_REAL, weights->ndim, shape); /* (..., T, Dv) */
    if (!o) return NULL;
    const qkv_shaw_geom g = values_geom(weights, rel_v, query_offset);
    qkv_real *scratch = shaw_scratch(ctx, "shaw_values", &g, 1);
    if (!scratch) return NULL;
    ctx->backend->posenc->shaw_values_fwd(&g, qkv__data(weights), qkv__data(rel_v),
                                                 qkv__data(o), scratch);
    qkv_tape_entry *te = qkv__record(ctx, &shaw_values_op, o, 2, (qkv_tensor *[]){weights, rel_v});
    if (te) te->i[0] = query_offset;
    return o;
}
