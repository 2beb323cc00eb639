/*
 * shape.c: layout ops that copy: contiguous, head merge, concatenation; head split is a view.
 *
 * contiguous: y[idx] = x[sum_d idx_d * stride_d]; backward scatters dy back through the same
 * strides (into the base tensor's gradient when x is a view).
 * concat along dim: every input is a slab of the output; backward slices dy back.
 * The copies and their scatter-adds are the backend's layout kernels (kernels/layout.h).
 */
#include "../core/internal.h"
#include "../kernels/backend.h"

static void contiguous_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_tensor *x = e->in[0];
    qkv_real *dx = qkv__grad(ctx, x);
    if (!dx) return;
    const qkv_view4 into = qkv__view4(x), from = qkv__view4(e->out); /* y: x's shape, dense */
    ctx->backend->layout->add((const qkv_real *)e->out->grad, &from, dx, &into); /* dx[view] += dy */
}

static const qkv_op_desc contiguous_op = {"contiguous", contiguous_backward};

qkv_tensor *qkv_contiguous(qkv_ctx *ctx, qkv_tensor *x) {
    if (!QKV_OP_BEGIN(ctx, "contiguous", x)) return NULL;
    if (qkv_tensor_is_contiguous(x)) return x;
    qkv_tensor *y = qkv__alloc_like(ctx, x);
    if (!y) return NULL;
    const qkv_view4 from = qkv__view4(x), into = qkv__view4(y);
    ctx->backend->layout->copy(qkv_dtype_size(x->dtype), x->data, &from, y->data, &into);
    qkv__record(ctx, &contiguous_op, y, 1, &x);
    return y;
}

qkv_tensor *qkv__contig(qkv_ctx *ctx, qkv_tensor *t) {
    if (!t || qkv_tensor_is_contiguous(t)) return t;
    return qkv_contiguous(ctx, t);
}

qkv_tensor *qkv_split_heads(qkv_ctx *ctx, qkv_tensor *x, int n_heads) {
    if (!QKV_OP_BEGIN(ctx, "split_heads", x)) return NULL;
    char buf[96];
    if (x->ndim != 3 || n_heads <= 0 || x->shape[2] % n_heads != 0)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "split_heads: x %s is not (B, T, H*D) for H = %d",
                        qkv_tensor_shape_str(x, buf, sizeof buf), n_heads);
    x = qkv__contig(ctx, x);
    int64_t shape[4] = {x->shape[0], x->shape[1], n_heads, x->shape[2] / n_heads};
    qkv_tensor *v = qkv_reshape(ctx, x, 4, shape); /* (B, T, H, D) */
    return qkv_permute(ctx, v, (const int[]){0, 2, 1, 3}); /* (B, H, T, D) view */
}

qkv_tensor *qkv_merge_heads(qkv_ctx *ctx, qkv_tensor *x) {
    if (!QKV_OP_BEGIN(ctx, "merge_heads", x)) return NULL;
    char buf[96];
    if (x->ndim != 4)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "merge_heads: x %s is not (B, H, T, D)",
                        qkv_tensor_shape_str(x, buf, sizeof buf));
    qkv_tensor *p = qkv_permute(ctx, x, (const int[]){0, 2, 1, 3}); /* (B, T, H, D) view */
    qkv_tensor *c = qkv_contiguous(ctx, p);
    if (!c) return NULL;
    int64_t shape[3] = {x->shape[0], x->shape[2], x->shape[1] * x->shape[3]};
    return qkv_reshape(ctx, c, 3, shape); /* (B, T, H*D) */
}

/* ---- concat --------------------------------------------------------------------------------- */

static void concat_geometry(const qkv_tensor *t, int dim, int64_t *outer, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int d = 0; d < dim; d++) *outer *= t->shape[d];
    for (int d = dim + 1; d < t->ndim; d++) *inner *= t->shape[d];
}

static void concat_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    const int dim = (int)e->i[0];
    const qkv_tensor *y = e->out;
    const qkv_real *dy = (const qkv_real *)y->grad;
    int64_t outer, inner;
    concat_geometry(y, dim, &outer, &inner);
    const int64_t ychunk = y->shape[dim] * inner;
    int64_t at = 0;
    for (int k = 0; k < e->n_in; k++) {
        qkv_tensor *x = e->in[k];
        const int64_t chunk = x->shape[dim] * inner;
        qkv_real *dx = qkv__grad(ctx, x);
        const qkv_view4 slab = qkv__view_rows(outer, chunk, ychunk), dense = qkv__view_rows(outer, chunk, chunk);
        if (dx) ctx->backend->layout->add(dy + at, &slab, dx, &dense); /* dx += dy's slab */
        at += chunk;
    }
}

static const qkv_op_desc concat_op = {"concat", concat_backward};

qkv_tensor *qkv_concat(qkv_ctx *ctx, qkv_tensor *const *xs, int n, int dim) {
    if (!ctx || ctx->status) return NULL;
    if (!xs || n < 1) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "concat: no inputs");
    if (n > QKV_MAX_IN)
        return QKV_FAIL(ctx, QKV_ERR_UNSUPPORTED, "concat: %d inputs (at most %d per call)", n, QKV_MAX_IN);
    if (!qkv__op_begin(ctx, "concat", __FILE__, __LINE__, n, xs)) return NULL;
    const qkv_tensor *first = xs[0];
    if (dim < 0) dim += first->ndim;
    if (dim < 0 || dim >= first->ndim)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "concat: dim out of range for %d-dim inputs", first->ndim);
    int64_t shape[QKV_MAX_DIMS];
    for (int d = 0; d < first->ndim; d++) shape[d] = first->shape[d];
    shape[dim] = 0;
    qkv_tensor *in[QKV_MAX_IN];
    for (int k = 0; k < n; k++) {
        const qkv_tensor *x = xs[k];
        char b0[96], b1[96];
        bool ok = x->ndim == first->ndim && x->dtype == first->dtype;
        for (int d = 0; ok && d < x->ndim; d++) ok = d == dim || x->shape[d] == first->shape[d];
        if (!ok)
            return QKV_FAIL(ctx, QKV_ERR_SHAPE, "concat: input %d %s does not match input 0 %s outside dim %d",
                            k, qkv_tensor_shape_str(x, b1, sizeof b1), qkv_tensor_shape_str(first, b0, sizeof b0), dim);
        shape[dim] += x->shape[dim];
        in[k] = qkv__contig(ctx, xs[k]);
    }
    qkv_tensor *y = qkv__alloc(ctx, first->dtype, first->ndim, shape);
    if (!y) return NULL;
    int64_t outer, inner;
    concat_geometry(y, dim, &outer, &inner);
    const size_t es = qkv_dtype_size(y->dtype);
    const int64_t ychunk = y->shape[dim] * inner;
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
        const int64_t chunk = in[k]->shape[dim] * inner;
        const qkv_view4 dense = qkv__view_rows(outer, chunk, chunk), slab = qkv__view_rows(outer, chunk, ychunk);
        ctx->backend->layout->copy(es, in[k]->data, &dense, (unsigned char *)y->data + (size_t)at * es, &slab);
        at += chunk;
    }
    qkv_tape_entry *e = qkv__record(ctx, &concat_op, y, n, in);
    if (e) e->i[0] = dim;
    return y;
}
