/*
 * elementwise.c: add / mul with broadcasting, scale, activations, dropout, sum, mean.
 *
 * Activations save nothing: backward reads the input x and the output y from the tape entry
 * (tanh' = 1 - y^2, sigmoid' = y (1 - y), GELU' from x). Dropout saves only its Philox stream.
 * Broadcasting: b's shape aligns with the trailing dims of a; each of b's dims equals a's or 1.
 * The gradient of b sums over the broadcast dims in a fixed order.
 */
#include "../kernels/elementwise.h"
#include "../kernels/backend.h"
#include "ops_internal.h"

/* ---- unary ---------------------------------------------------------------------------------- */

static void unary_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_real *dx = qkv__grad(ctx, e->in[0]);
    if (!dx) return;
    ctx->backend->elementwise->unary_bwd((qkv_unary)e->i[0], qkv_tensor_numel(e->out), qkv__data(e->in[0]),
                                                qkv__data(e->out), (const qkv_real *)e->out->grad, dx);
}

static const qkv_op_desc unary_ops[] = {
    [QKV_UN_RELU] = {"relu", unary_backward},
    [QKV_UN_GELU_ERF] = {"gelu", unary_backward},
    [QKV_UN_GELU_TANH] = {"gelu_tanh", unary_backward},
    [QKV_UN_TANH] = {"tanh", unary_backward},
    [QKV_UN_SIGMOID] = {"sigmoid", unary_backward},
};

static qkv_tensor *unary(qkv_ctx *ctx, qkv_tensor *x, qkv_unary op) {
    const char *name = unary_ops[op].name;
    if (!QKV_OP_BEGIN(ctx, name, x)) return NULL;
    if (!qkv__check_real(ctx, name, x, "x")) return NULL;
    x = qkv__contig(ctx, x);
    qkv_tensor *y = qkv__alloc_like(ctx, x);
    if (!y) return NULL;
    ctx->backend->elementwise->unary_fwd(op, qkv_tensor_numel(x), qkv__data(x), qkv__data(y));
    qkv_tape_entry *e = qkv__record(ctx, &unary_ops[op], y, 1, &x);
    if (e) e->i[0] = op;
    return y;
}

qkv_tensor *qkv_relu(qkv_ctx *ctx, qkv_tensor *x) { return unary(ctx, x, QKV_UN_RELU); }
qkv_tensor *qkv_tanh(qkv_ctx *ctx, qkv_tensor *x) { return unary(ctx, x, QKV_UN_TANH); }
qkv_tensor *qkv_sigmoid(qkv_ctx *ctx, qkv_tensor *x) { return unary(ctx, x, QKV_UN_SIGMOID); }

qkv_tensor *qkv_gelu(qkv_ctx *ctx, qkv_tensor *x, qkv_gelu_kind kind) {
    if (kind != QKV_GELU_ERF && kind != QKV_GELU_TANH)
        return ctx ? QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "gelu: unknown kind %d", (int)kind) : NULL;
    return unary(ctx, x, kind == QKV_GELU_ERF ? QKV_UN_GELU_ERF : QKV_UN_GELU_TANH);
}

/* ---- binary with broadcasting --------------------------------------------------------------- */

static bool broadcast_geometry(qkv_ctx *ctx, const char *op, const qkv_tensor *a, const qkv_tensor *b,
                               qkv_bcast *g) {
    char ba[96], bb[96];
    bool ok = b->ndim <= a->ndim;
    const int pad = 4 - a->ndim, bpad = a->ndim - b->ndim;
    int64_t bstrides[QKV_MAX_DIMS];
    int64_t stride = 1; /* b is contiguous here */
    for (int d = b->ndim - 1; d >= 0; d--) {
        bstrides[d] = stride;
        stride *= b->shape[d];
    }
    for (int d = 0; d < 4; d++) {
        g->shape[d] = 1;
        g->bstride[d] = 0;
    }
    for (int d = 0; ok && d < a->ndim; d++) {
        g->shape[pad + d] = a->shape[d];
        int bd = d - bpad;
        if (bd < 0) continue;
        if (b->shape[bd] == a->shape[d])
            g->bstride[pad + d] = a->shape[d] == 1 ? 0 : bstrides[bd];
        else if (b->shape[bd] != 1)
            ok = false;
    }
    if (!ok)
        QKV_FAIL(ctx, QKV_ERR_SHAPE, "%s: b %s does not broadcast onto a %s", op,
                 qkv_tensor_shape_str(b, bb, sizeof bb), qkv_tensor_shape_str(a, ba, sizeof ba));
    return ok;
}

static void binary_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_bcast g;
    broadcast_geometry(ctx, e->op->name, e->in[0], e->in[1], &g);
    qkv_real *da = qkv__grad(ctx, e->in[0]), *db = qkv__grad(ctx, e->in[1]);
    ctx->backend->elementwise->binary_bwd(e->i[0] != 0, &g, qkv__data(e->in[0]), qkv__data(e->in[1]),
                                                 (const qkv_real *)e->out->grad, da, db);
}

static const qkv_op_desc add_op = {"add", binary_backward};
static const qkv_op_desc mul_op = {"mul", binary_backward};

static qkv_tensor *binary(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b, bool mul) {
    const char *name = mul ? "mul" : "add";
    if (!QKV_OP_BEGIN(ctx, name, a, b)) return NULL;
    if (!qkv__check_real(ctx, name, a, "a") || !qkv__check_real(ctx, name, b, "b")) return NULL;
    a = qkv__contig(ctx, a);
    b = qkv__contig(ctx, b);
    qkv_bcast g;
    if (ctx->status || !broadcast_geometry(ctx, name, a, b, &g)) return NULL;
    qkv_tensor *y = qkv__alloc_like(ctx, a);
    if (!y) return NULL;
    ctx->backend->elementwise->binary_fwd(mul, &g, qkv__data(a), qkv__data(b), qkv__data(y));
    qkv_tape_entry *e = qkv__record(ctx, mul ? &mul_op : &add_op, y, 2, (qkv_tensor *[]){a, b});
    if (e) e->i[0] = mul;
    return y;
}

qkv_tensor *qkv_add(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b) { return binary(ctx, a, b, false); }
qkv_tensor *qkv_mul(qkv_ctx *ctx, qkv_tensor *a, qkv_tensor *b) { return binary(ctx, a, b, true); }

/* ---- scale ---------------------------------------------------------------------------------- */

static void scale_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_real *dx = qkv__grad(ctx, e->in[0]);
    if (!dx) return;
    ctx->backend->elementwise->scale(qkv_tensor_numel(e->out), (qkv_real)e->f[0],
                                            (const qkv_real *)e->out->grad, dx, true);
}

static const qkv_op_desc scale_op = {"scale", scale_backward};

qkv_tensor *qkv_scale(qkv_ctx *ctx, qkv_tensor *x, double s) {
    if (!QKV_OP_BEGIN(ctx, "scale", x)) return NULL;
    if (!qkv__check_real(ctx, "scale", x, "x")) return NULL;
    x = qkv__contig(ctx, x);
    qkv_tensor *y = qkv__alloc_like(ctx, x);
    if (!y) return NULL;
    ctx->backend->elementwise->scale(qkv_tensor_numel(x), (qkv_real)s, qkv__data(x), qkv__data(y), false);
    qkv_tape_entry *e = qkv__record(ctx, &scale_op, y, 1, &x);
    if (e) e->f[0] = s;
    return y;
}

/* ---- dropout -------------------------------------------------------------------------------- */

/* What a dropout's backward needs to regenerate its mask: p, and the Philox key and counter
 * (seed, step, stream) of the forward (entry e, which may be NULL when nothing is recorded). */
static void save_dropout(qkv_tape_entry *e, const qkv_ctx *ctx, double p, uint64_t stream) {
    if (!e) return;
    e->f[0] = p;
    e->i[0] = (int64_t)ctx->seed;
    e->i[1] = (int64_t)ctx->step;
    e->i[2] = (int64_t)stream;
}

/* dx (+)= keep dy / (1 - p) with the mask saved by save_dropout (= where overwrite). */
static void replay_dropout(qkv_ctx *ctx, const qkv_tape_entry *e, const qkv_real *dy, qkv_real *dx, bool overwrite) {
    ctx->backend->elementwise->dropout(qkv_tensor_numel(e->out), e->f[0], (uint64_t)e->i[0], (uint64_t)e->i[1],
                                              (uint64_t)e->i[2], false, dy, dx, !overwrite);
}

static void dropout_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    bool fresh;
    qkv_real *dx = qkv__grad_into(ctx, e->in[0], &fresh);
    if (!dx) return;
    replay_dropout(ctx, e, (const qkv_real *)e->out->grad, dx, fresh);
}

static const qkv_op_desc dropout_op = {"dropout", dropout_backward};

qkv_tensor *qkv_dropout(qkv_ctx *ctx, qkv_tensor *x, double p) {
    if (!QKV_OP_BEGIN(ctx, "dropout", x)) return NULL;
    if (!qkv__check_real(ctx, "dropout", x, "x")) return NULL;
    if (!(p >= 0 && p < 1)) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "dropout: p = %g is not in [0, 1)", p);
    if (!ctx->training || p == 0) return x;
    x = qkv__contig(ctx, x);
    qkv_tensor *y = qkv__alloc_like(ctx, x);
    if (!y) return NULL;
    const uint64_t stream = qkv__next_stream(ctx);
    ctx->backend->elementwise->dropout(qkv_tensor_numel(x), p, ctx->seed, ctx->step, stream, false,
                                              qkv__data(x), qkv__data(y), false);
    qkv_tape_entry *e = qkv__record(ctx, &dropout_op, y, 1, &x);
    save_dropout(e, ctx, p, stream);
    return y;
}

/* ---- relu + dropout ------------------------------------------------------------------------- */

/* dropout(relu(x)) in one pass, with the random stream qkv_dropout would use at this point, so
 * the fused op gives the bits of the pair. Backward needs no random numbers: y > 0 exactly where
 * the element was kept and x > 0, the only places with a gradient (dy / (1 - p)). Saves the
 * ReLU output, one pass forward, the regeneration of the mask and one pass backward. */
static void relu_dropout_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_real *dx = qkv__grad(ctx, e->in[0]);
    if (!dx) return;
    ctx->backend->elementwise->relu_dropout_bwd(qkv_tensor_numel(e->out), (qkv_real)(1.0 / (1.0 - e->f[0])),
                                                       qkv__data(e->out), (const qkv_real *)e->out->grad, dx,
                                                       true);
}

static const qkv_op_desc relu_dropout_op = {"relu_dropout", relu_dropout_backward};

qkv_tensor *qkv_relu_dropout(qkv_ctx *ctx, qkv_tensor *x, double p) {
    if (!QKV_OP_BEGIN(ctx, "relu_dropout", x)) return NULL;
    if (!qkv__check_real(ctx, "relu_dropout", x, "x")) return NULL;
    if (!(p >= 0 && p < 1)) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "relu_dropout: p = %g is not in [0, 1)", p);
    if (!ctx->training || p == 0) return qkv_relu(ctx, x);
    x = qkv__contig(ctx, x);
    qkv_tensor *y = qkv__alloc_like(ctx, x);
    if (!y) return NULL;
    const uint64_t stream = qkv__next_stream(ctx);
    ctx->backend->elementwise->dropout(qkv_tensor_numel(x), p, ctx->seed, ctx->step, stream, true,
                                              qkv__data(x), qkv__data(y), false);
    qkv_tape_entry *e = qkv__record(ctx, &relu_dropout_op, y, 1, &x);
    if (e) e->f[0] = p;
    return y;
}

/* ---- residual + dropout ---------------------------------------------------------------------- */

/* y = x + dropout(f, p): a residual connection around a dropped-out sub-layer output, with the
 * bits of qkv_add(x, qkv_dropout(f, p)) (same random stream) but without keeping dropout(f).
 * Backward: dx += dy, df += keep dy / (1 - p) with the mask regenerated from the stream (each
 * stored rather than added where nothing else has reached that gradient yet). */
static void add_dropout_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    const int64_t n = qkv_tensor_numel(e->out);
    const qkv_real *dy = (const qkv_real *)e->out->grad;
    bool x_fresh, f_fresh;
    qkv_real *dx = qkv__grad_into(ctx, e->in[0], &x_fresh), *df = qkv__grad_into(ctx, e->in[1], &f_fresh);
    if (dx) ctx->backend->elementwise->scale(n, 1, dy, dx, !x_fresh);
    if (df) replay_dropout(ctx, e, dy, df, f_fresh);
}

static const qkv_op_desc add_dropout_op = {"add_dropout", add_dropout_backward};

qkv_tensor *qkv_add_dropout(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *f, double p) {
    if (!QKV_OP_BEGIN(ctx, "add_dropout", x, f)) return NULL;
    if (!qkv__check_real(ctx, "add_dropout", x, "x") || !qkv__check_real(ctx, "add_dropout", f, "f")) return NULL;
    if (!(p >= 0 && p < 1)) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "add_dropout: p = %g is not in [0, 1)", p);
    if (!qkv_tensor_same_shape(x, f)) {
        char bx[96], bf[96];
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "add_dropout: x %s and f %s differ in shape",
                        qkv_tensor_shape_str(x, bx, sizeof bx), qkv_tensor_shape_str(f, bf, sizeof bf));
    }
    if (!ctx->training || p == 0) return qkv_add(ctx, x, f);
    x = qkv__contig(ctx, x);
    f = qkv__contig(ctx, f);
    qkv_tensor *y = qkv__alloc_like(ctx, x);
    if (!y) return NULL;
    const int64_t n = qkv_tensor_numel(x);
    const uint64_t stream = qkv__next_stream(ctx);
    ctx->backend->elementwise->scale(n, 1, qkv__data(x), qkv__data(y), false); /* y = x */
    /* y += keep ? f / (1 - p) : 0, i.e. x + dropout(f) with the same rounding */
    ctx->backend->elementwise->dropout(n, p, ctx->seed, ctx->step, stream, false, qkv__data(f), qkv__data(y),
                                              true);
    qkv_tape_entry *e = qkv__record(ctx, &add_dropout_op, y, 2, (qkv_tensor *[]){x, f});
    save_dropout(e, ctx, p, stream);
    return y;
}

bool qkv__sum_fits_over(const qkv_tensor *x, const qkv_tensor *f) {
    return !f->base && qkv_tensor_is_contiguous(f) && x->data != f->data &&
           !(x->base && x->base->data == f->data) && qkv_tensor_same_shape(x, f) &&
           f->dtype == QKV_REAL && x->dtype == QKV_REAL;
}

qkv_tensor *qkv__add_dropout_over(qkv_ctx *ctx, qkv_tensor *x, qkv_tensor *f, double p) {
    if (!QKV_OP_BEGIN(ctx, "add_dropout", x, f)) return NULL;
    /* the general op wherever f's storage cannot take the sum, and in evaluation (nothing is
     * kept for backward anyway) */
    if (!ctx->training || !qkv__sum_fits_over(x, f) || !(p > 0 && p < 1))
        return qkv_add_dropout(ctx, x, f, p);
    x = qkv__contig(ctx, x);
    qkv_tensor *y = qkv__alloc_over(ctx, f);
    if (!y) return NULL;
    const int64_t n = qkv_tensor_numel(x);
    const uint64_t stream = qkv__next_stream(ctx);
    const qkv_elementwise_kernels *ew = ctx->backend->elementwise;
    /* f = keep ? f / (1 - p) : 0 in place, then f += x: dropout(f) + x, which is x + dropout(f)
     * (addition commutes exactly), qkv_add_dropout's value */
    ew->dropout(n, p, ctx->seed, ctx->step, stream, false, qkv__data(f), qkv__data(f), false);
    ew->scale(n, 1, qkv__data(x), qkv__data(y), true);
    qkv_tape_entry *e = qkv__record(ctx, &add_dropout_op, y, 2, (qkv_tensor *[]){x, f});
    save_dropout(e, ctx, p, stream);
    return y;
}

qkv_tensor *qkv_full(qkv_ctx *ctx, int ndim, const int64_t *shape, double value) {
    if (!qkv__op_begin(ctx, "full", __FILE__, __LINE__, 0, NULL)) return NULL;
    if (ndim > 0 && !shape) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "full: NULL shape for %d dims", ndim);
    qkv_tensor *y = qkv__alloc(ctx, QKV_REAL, ndim, shape); /* checks ndim and the dims */
    if (!y) return NULL;
    ctx->backend->elementwise->fill(qkv_tensor_numel(y), (qkv_real)value, qkv__data(y));
    return y;
}

/* ---- reductions ----------------------------------------------------------------------------- */

static void sum_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_real *dx = qkv__grad(ctx, e->in[0]);
    if (!dx) return; /* f[0]: 1 or 1/n */
    ctx->backend->elementwise->sum_bwd(qkv_tensor_numel(e->in[0]), (const qkv_real *)e->out->grad, e->f[0], dx);
}

static const qkv_op_desc sum_op = {"sum", sum_backward};
static const qkv_op_desc mean_op = {"mean", sum_backward};

static qkv_tensor *reduce(qkv_ctx *ctx, qkv_tensor *x, bool mean) {
    const char *name = mean ? "mean" : "sum";
    if (!QKV_OP_BEGIN(ctx, name, x)) return NULL;
    if (!qkv__check_real(ctx, name, x, "x")) return NULL;
    x = qkv__contig(ctx, x);
    qkv_tensor *y = qkv__alloc(ctx, QKV_REAL, 0, NULL);
    if (!y) return NULL;
    const int64_t n = qkv_tensor_numel(x);
    const double factor = mean ? (n ? 1.0 / (double)n : 0.0) : 1.0;
    ctx->backend->elementwise->sum(n, qkv__data(x), factor, qkv__data(y));
    qkv_tape_entry *e = qkv__record(ctx, mean ? &mean_op : &sum_op, y, 1, &x);
    if (e) e->f[0] = factor;
    return y;
}

qkv_tensor *qkv_sum(qkv_ctx *ctx, qkv_tensor *x) { return reduce(ctx, x, false); }
qkv_tensor *qkv_mean(qkv_ctx *ctx, qkv_tensor *x) { return reduce(ctx, x, true); }
