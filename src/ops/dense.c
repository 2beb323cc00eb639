/*
 * dense.c: linear (y = x W^T + b) and matmul / batched matmul.
 *
 * Dims: N rows (all leading dims of x flattened), I = in features, O = out features.
 * Backward of y = x W^T + b:   dx += dy W,   dW += dy^T x,   db += sum_rows dy.
 * Backward of C = op(A) op(B): dA = dC op(B)^T, dB = op(A)^T dC, folded back through the
 * transposes (see matmul_backward). Nothing is saved: the inputs are on the tape already.
 */
#include "../core/internal.h"
#include "../kernels/backend.h"
#include "ops_internal.h"

#include <limits.h>

typedef void (*gemm_fn)(bool, bool, int64_t, int64_t, int64_t, qkv_real, const qkv_real *, int64_t,
                        const qkv_real *, int64_t, qkv_real, qkv_real *, int64_t);

static gemm_fn pick_gemm(const qkv_ctx *ctx) { return ctx->backend->gemm; }

static bool fits_blas(qkv_ctx *ctx, const char *op, int64_t a, int64_t b, int64_t c) {
    if (a <= INT_MAX && b <= INT_MAX && c <= INT_MAX) return true;
    QKV_FAIL(ctx, QKV_ERR_UNSUPPORTED, "%s: dimension over 2^31-1 (%lld, %lld, %lld)", op,
             (long long)a, (long long)b, (long long)c);
    return false;
}

/* ---- linear --------------------------------------------------------------------------------- */

void qkv__linear_grads(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *w, qkv_tensor *b, const qkv_real *dy) {
    const int64_t N = qkv__rows(x), I = qkv__last(x), O = w->shape[0];
    gemm_fn gemm = pick_gemm(ctx);
    bool fresh;
    qkv_real *dx = qkv__grad_into(ctx, x, &fresh);
    if (dx) gemm(false, false, N, I, O, 1, dy, O, qkv__data(w), I, fresh ? 0 : 1, dx, I); /* (N,O)(O,I) */
    qkv_real *dw = qkv__grad(ctx, w);
    if (dw) gemm(true, false, O, I, N, 1, dy, O, qkv__data(x), I, 1, dw, I); /* (O,N)(N,I) */
    qkv_real *db = qkv__grad(ctx, b);
    if (db) ctx->backend->elementwise->sum_rows(N, O, dy, db);
}

static void linear_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv__linear_grads(ctx, e->in[0], e->in[1], e->n_in > 2 ? e->in[2] : NULL, (const qkv_real *)e->out->grad);
}

static const qkv_op_desc linear_op = {"linear", linear_backward};

qkv_tensor *qkv__linear_compute(qkv_ctx *ctx, const char *op, qkv_tensor **x, qkv_tensor **weight,
                                qkv_tensor **bias) {
    if (!qkv__check_real(ctx, op, *x, "x") || !qkv__check_real(ctx, op, *weight, "weight") ||
        (*bias && !qkv__check_real(ctx, op, *bias, "bias")))
        return NULL;
    char bx[96], bw[96], bb[96];
    if ((*x)->ndim < 1 || (*weight)->ndim != 2 || (*weight)->shape[1] != qkv__last(*x) ||
        (*bias && ((*bias)->ndim != 1 || (*bias)->shape[0] != (*weight)->shape[0])))
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "%s: x %s, weight %s, bias %s do not fit y = x W^T + b", op,
                        qkv_tensor_shape_str(*x, bx, sizeof bx), qkv_tensor_shape_str(*weight, bw, sizeof bw),
                        qkv_tensor_shape_str(*bias, bb, sizeof bb));
    /* the weight panels key their copies by address: only a parameter's memory, which stays put
     * for a session's life, never an arena tensor (a contiguous copy included) */
    const qkv_tensor *w_in = *weight;
    const bool w_param =
        qkv_tensor_is_contiguous(w_in) &&
        ((w_in->flags & QKV_PARAM) || (w_in->base && (w_in->base->flags & QKV_PARAM)));
    *x = qkv__contig(ctx, *x);
    *weight = qkv__contig(ctx, *weight);
    if (*bias) *bias = qkv__contig(ctx, *bias);
    if (ctx->status) return NULL;
    const int64_t N = qkv__rows(*x), I = qkv__last(*x), O = (*weight)->shape[0];
    if (!fits_blas(ctx, op, N, I, O)) return NULL;
    int64_t shape[QKV_MAX_DIMS];
    for (int d = 0; d < (*x)->ndim; d++) shape[d] = (*x)->shape[d];
    shape[(*x)->ndim - 1] = O;
    qkv_tensor *y = qkv__alloc(ctx, QKV_REAL, (*x)->ndim, shape); /* (..., O) */
    if (!y) return NULL;
    qkv_real *yd = qkv__data(y);
    if (ctx->backend->measure_only) { /* a session's arena measure run (backend.h): zeros, no product */
        ctx->backend->elementwise->fill(N * O, 0, yd);
        return y;
    }
    /* a decoding session's weight panels: the bits of qkv_gemm's small-M kernel below */
    if (w_param && ctx->backend->linear_panels &&
        ctx->backend->linear_panels(ctx->backend, N, O, I, qkv__data(*x), qkv__data(*weight),
                                    *bias ? qkv__data(*bias) : NULL, yd))
        return y;
    /* qkv_gemm's small-M kernel or packed GEMM add the bias as they write y (the same bits as the
     * two steps below) */
    if (*bias && ctx->backend->linear_bias &&
        ctx->backend->linear_bias(N, O, I, qkv__data(*x), I, qkv__data(*weight), I, qkv__data(*bias), yd,
                          O))
        return y;
    if (*bias) ctx->backend->elementwise->broadcast_rows(N, O, qkv__data(*bias), yd);
    pick_gemm(ctx)(false, true, N, O, I, 1, qkv__data(*x), I, qkv__data(*weight), I, *bias ? 1 : 0, yd, O);
    return y;
}

qkv_tensor *qkv_linear(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *weight, qkv_tensor *bias) {
    if (!QKV_OP_BEGIN(ctx, "linear", x, weight)) return NULL;
    qkv_tensor *y = qkv__linear_compute(ctx, "linear", &x, &weight, &bias);
    if (!y) return NULL;
    qkv_tensor *in[3] = {x, weight, bias};
    qkv__record(ctx, &linear_op, y, bias ? 3 : 2, in);
    return y;
}

/* ---- matmul --------------------------------------------------------------------------------- */

/* Per-call geometry of a (possibly batched) matmul. b's leading dims equal the trailing leading
 * dims of a (none: one b for all; (H) under a's (B, H): one b per head), so batch entry s of a
 * uses b entry s % b_batch. */
typedef struct {
    int64_t batch, M, N, K;
    int64_t a_rows, a_cols, b_rows, b_cols; /* stored shapes of one a / b matrix */
    int64_t b_batch;                        /* number of b matrices */
} mm_geom;

static mm_geom geometry(const qkv_tensor *a, const qkv_tensor *b, bool ta, bool tb) {
    mm_geom g;
    g.a_rows = a->shape[a->ndim - 2];
    g.a_cols = a->shape[a->ndim - 1];
    g.b_rows = b->shape[b->ndim - 2];
    g.b_cols = b->shape[b->ndim - 1];
    g.M = ta ? g.a_cols : g.a_rows;
    g.K = ta ? g.a_rows : g.a_cols;
    g.N = tb ? g.b_rows : g.b_cols;
    g.batch = 1;
    for (int d = 0; d + 2 < a->ndim; d++) g.batch *= a->shape[d];
    g.b_batch = 1;
    for (int d = 0; d + 2 < b->ndim; d++) g.b_batch *= b->shape[d];
    return g;
}

static void matmul_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_tensor *a = e->in[0], *b = e->in[1];
    const bool ta = e->i[0] != 0, tb = e->i[1] != 0;
    const mm_geom g = geometry(a, b, ta, tb);
    const qkv_real *dc = (const qkv_real *)e->out->grad; /* (batch, M, N) */
    gemm_fn gemm = pick_gemm(ctx);
    qkv_real *da = qkv__grad(ctx, a), *db = qkv__grad(ctx, b);
    const int64_t a_size = g.a_rows * g.a_cols, b_size = g.b_rows * g.b_cols;
    qkv__mat_layout lb;
    if (ctx->backend->gemm_batched2 && a->ndim == 4 && b->ndim == 4 && g.b_batch == g.batch &&
        !qkv_tensor_is_contiguous(b) && qkv__head_layout(b, &lb)) { /* b read (and dB written) in place */
        const int64_t Bn = a->shape[0], H = a->shape[1];
        const qkv__mat_layout la = {g.a_cols, H * a_size, a_size}, lc = {g.N, H * g.M * g.N, g.M * g.N};
        const qkv_real *A = qkv__data(a), *Bd = qkv__data(b);
        if (da && !ta) /* dA (M,K) += dC (M,N) op(B)^T */
            ctx->backend->gemm_batched2(false, !tb, Bn, H, g.M, g.K, g.N, 1, dc, lc, Bd, lb, 1, da, la);
        else if (da) /* a = A^T: da (K,M) += op(B) dC^T */
            ctx->backend->gemm_batched2(tb, true, Bn, H, g.K, g.M, g.N, 1, Bd, lb, dc, lc, 1, da, la);
        if (db && !tb) /* dB (K,N) += op(A)^T dC */
            ctx->backend->gemm_batched2(!ta, false, Bn, H, g.K, g.N, g.M, 1, A, la, dc, lc, 1, db, lb);
        else if (db) /* b = B^T: db (N,K) += dC^T op(A) */
            ctx->backend->gemm_batched2(true, ta, Bn, H, g.N, g.K, g.M, 1, dc, lc, A, la, 1, db, lb);
        return;
    }
    if (ctx->backend->gemm_batched && g.b_batch == g.batch) { /* one b per entry: independent products */
        const qkv_real *A = qkv__data(a), *B = qkv__data(b);
        const int64_t c_size = g.M * g.N;
        if (da && !ta) /* dA (M,K) += dC (M,N) op(B)^T */
            ctx->backend->gemm_batched(false, !tb, g.batch, g.M, g.K, g.N, 1, dc, g.N, c_size, B, g.b_cols, b_size, 1, da,
                             g.a_cols, a_size);
        else if (da) /* a = A^T: da (K,M) += op(B) dC^T */
            ctx->backend->gemm_batched(tb, true, g.batch, g.K, g.M, g.N, 1, B, g.b_cols, b_size, dc, g.N, c_size, 1, da,
                             g.a_cols, a_size);
        if (db && !tb) /* dB (K,N) += op(A)^T dC */
            ctx->backend->gemm_batched(!ta, false, g.batch, g.K, g.N, g.M, 1, A, g.a_cols, a_size, dc, g.N, c_size, 1, db,
                             g.b_cols, b_size);
        else if (db) /* b = B^T: db (N,K) += dC^T op(A) */
            ctx->backend->gemm_batched(true, ta, g.batch, g.N, g.K, g.M, 1, dc, g.N, c_size, A, g.a_cols, a_size, 1, db,
                             g.b_cols, b_size);
        return;
    }
    for (int64_t s = 0; s < g.batch; s++) {
        const qkv_real *as = qkv__data(a) + s * a_size;
        const qkv_real *bs = qkv__data(b) + (s % g.b_batch) * b_size;
        const qkv_real *dcs = dc + s * g.M * g.N;
        if (da) {
            qkv_real *das = da + s * a_size;
            if (!ta) /* dA (M,K) += dC (M,N) op(B)^T */
                gemm(false, !tb, g.M, g.K, g.N, 1, dcs, g.N, bs, g.b_cols, 1, das, g.a_cols);
            else /* a = A^T: da (K,M) += op(B) dC^T */
                gemm(tb, true, g.K, g.M, g.N, 1, bs, g.b_cols, dcs, g.N, 1, das, g.a_cols);
        }
        if (db) {
            qkv_real *dbs = db + (s % g.b_batch) * b_size;
            if (!tb) /* dB (K,N) += op(A)^T dC */
                gemm(!ta, false, g.K, g.N, g.M, 1, as, g.a_cols, dcs, g.N, 1, dbs, g.b_cols);
            else /* b = B^T: db (N,K) += dC^T op(A) */
                gemm(true, ta, g.N, g.K, g.M, 1, dcs, g.N, as, g.a_cols, 1, dbs, g.b_cols);
        }
    }
}

static const qkv_op_desc matmul_op = {"matmul", matmul_backward};

qkv_tensor *qkv_matmul(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b, bool trans_a, bool trans_b) {
    if (!QKV_OP_BEGIN(ctx, "matmul", a, b)) return NULL;
    if (!qkv__check_real(ctx, "matmul", a, "a") || !qkv__check_real(ctx, "matmul", b, "b")) return NULL;
    char ba[96], bb[96];
    bool ok = a->ndim >= 2 && b->ndim >= 2 && b->ndim <= a->ndim;
    for (int d = 0; ok && d + 2 < b->ndim; d++) ok = a->shape[a->ndim - b->ndim + d] == b->shape[d];
    mm_geom g;
    if (ok) {
        g = geometry(a, b, trans_a, trans_b);
        ok = (trans_b ? g.b_cols : g.b_rows) == g.K;
    }
    if (!ok)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "matmul: a %s%s and b %s%s do not multiply",
                        qkv_tensor_shape_str(a, ba, sizeof ba), trans_a ? "^T" : "",
                        qkv_tensor_shape_str(b, bb, sizeof bb), trans_b ? "^T" : "");
    /* Per-head products read a 4-D b (B, H, K, N) where it is when it is a head view (e.g. the
     * value columns of a projection): no copy, its gradient goes straight back there. */
    qkv__mat_layout lb;
    const bool b_in_place = ctx->backend->gemm_batched2 && a->ndim == 4 && b->ndim == 4 && g.b_batch == g.batch &&
                            qkv__head_layout(b, &lb);
    a = qkv__contig(ctx, a);
    if (!b_in_place) b = qkv__contig(ctx, b);
    if (ctx->status) return NULL;
    if (!fits_blas(ctx, "matmul", g.M, g.N, g.K)) return NULL;
    int64_t shape[QKV_MAX_DIMS];
    for (int d = 0; d + 2 < a->ndim; d++) shape[d] = a->shape[d];
    shape[a->ndim - 2] = g.M;
    shape[a->ndim - 1] = g.N;
    qkv_tensor *c = qkv__alloc(ctx, QKV_REAL, a->ndim, shape); /* (..., M, N) */
    if (!c) return NULL;
    const int64_t a_size = g.a_rows * g.a_cols, b_size = g.b_rows * g.b_cols;
    if (b_in_place) {
        const int64_t H = a->shape[1];
        ctx->backend->gemm_batched2(trans_a, trans_b, a->shape[0], H, g.M, g.N, g.K, 1, qkv__data(a),
                           (qkv__mat_layout){g.a_cols, H * a_size, a_size}, qkv__data(b), lb, 0, qkv__data(c),
                           (qkv__mat_layout){g.N, H * g.M * g.N, g.M * g.N});
    } else if (ctx->backend->gemm_batched && (g.b_batch == g.batch || g.b_batch == 1)) {
        ctx->backend->gemm_batched(trans_a, trans_b, g.batch, g.M, g.N, g.K, 1, qkv__data(a), g.a_cols, a_size, qkv__data(b),
                         g.b_cols, g.b_batch == 1 ? 0 : b_size, 0, qkv__data(c), g.N, g.M * g.N);
    } else {
        gemm_fn gemm = pick_gemm(ctx);
        for (int64_t s = 0; s < g.batch; s++)
            gemm(trans_a, trans_b, g.M, g.N, g.K, 1, qkv__data(a) + s * a_size, g.a_cols,
                 qkv__data(b) + (s % g.b_batch) * b_size, g.b_cols, 0, qkv__data(c) + s * g.M * g.N, g.N);
    }
    qkv_tape_entry *e = qkv__record(ctx, &matmul_op, c, 2, (qkv_tensor *[]){a, b});
    if (e) {
        e->i[0] = trans_a;
        e->i[1] = trans_b;
    }
    return c;
}
