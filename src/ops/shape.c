/*
 * shape.c: layout ops that copy: contiguous, head merge, concatenation; head split is a view.
 *
 * contiguous: y[idx] = x[sum_d idx_d * stride_d]; backward scatters dy back through the same
 * strides (into the base tensor's gradient when x is a view).
 * concat along dim: every input is a slab of the output; backward slices dy back.
 */
#include "../core/internal.h"

/* A (<= 4-D) strided tensor as rows: shape and strides padded to 4 dims in front; a row is the
 * last dim, rows are numbered in row-major order over the first three. */
static void strided_offsets_4d(const qkv_tensor *t, int64_t sh[4], int64_t st[4]) {
    int pad = 4 - t->ndim;
    for (int d = 0; d < 4; d++) {
        sh[d] = d < pad ? 1 : t->shape[d - pad];
        st[d] = d < pad ? 0 : t->stride[d - pad];
    }
}

/* Offset (in elements) of the first element of row r. */
static inline int64_t row_offset(const int64_t sh[4], const int64_t st[4], int64_t r) {
    const int64_t i2 = r % sh[2], i01 = r / sh[2];
    return (i01 / sh[1]) * st[0] + (i01 % sh[1]) * st[1] + i2 * st[2];
}

/* Copies of more elements than this run over the threads (a copy is bound by memory bandwidth:
 * below ~64 K elements the threads' start costs more than the second core brings). */
enum { COPY_PARALLEL_MIN = 1 << 16 };

/* Whether the strided layout maps distinct elements to distinct offsets, by a sufficient test:
 * with the dims of more than one element ordered by |stride|, each stride exceeds the farthest
 * offset the smaller ones reach. Every view qkv makes (permute, narrow, reshape) passes; a
 * caller-built header that overlaps itself (a zero stride, or shape (2, 2) with strides (1, 1))
 * does not, and its backward then adds serially, in element order. Only the OpenMP build splits
 * that loop, so only it needs the test. */
#ifdef QKV_WITH_OPENMP
static bool one_to_one(const int64_t sh[4], const int64_t st[4]) {
    int64_t size[4], stride[4];
    int n = 0;
    for (int d = 0; d < 4; d++)
        if (sh[d] > 1) {
            const int64_t a = st[d] < 0 ? -st[d] : st[d];
            int at = n++;
            for (; at > 0 && stride[at - 1] > a; at--) { /* insertion by |stride| */
                stride[at] = stride[at - 1];
                size[at] = size[at - 1];
            }
            stride[at] = a;
            size[at] = sh[d];
        }
    int64_t reach = 0; /* the largest offset the smaller dims reach */
    for (int i = 0; i < n; i++) {
        if (stride[i] <= reach) return false;
        reach += (size[i] - 1) * stride[i];
    }
    return true;
}
#endif

static void contiguous_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_tensor *x = e->in[0];
    qkv_real *dx = qkv__grad(ctx, x);
    if (!dx) return;
    const qkv_real *dy = (const qkv_real *)e->out->grad;
    int64_t sh[4], st[4];
    strided_offsets_4d(x, sh, st);
    const int64_t rows = sh[0] * sh[1] * sh[2], L = sh[3], s3 = st[3];
    /* when the view is one-to-one each element of dx receives one element of dy, so rows in
     * parallel add exactly what the serial loop adds */
#pragma omp parallel for schedule(static) if (rows * L > COPY_PARALLEL_MIN && one_to_one(sh, st))
    for (int64_t r = 0; r < rows; r++) {
        qkv_real *d = dx + row_offset(sh, st, r);
        const qkv_real *g = dy + r * L;
        if (s3 == 1) {
            for (int64_t i = 0; i < L; i++)
                d[i] += g[i];
        } else {
            for (int64_t i = 0; i < L; i++)
                d[i * s3] += g[i];
        }
    }
}

static const qkv_op_desc contiguous_op = {"contiguous", contiguous_backward};

qkv_tensor *qkv_contiguous(qkv_ctx *ctx, qkv_tensor *x) {
    if (!QKV_OP_BEGIN(ctx, "contiguous", x)) return NULL;
    if (qkv_tensor_is_contiguous(x)) return x;
    qkv_tensor *y = qkv__alloc_like(ctx, x);
    if (!y) return NULL;
    int64_t sh[4], st[4];
    strided_offsets_4d(x, sh, st);
    const int64_t rows = sh[0] * sh[1] * sh[2], L = sh[3], s3 = st[3];
    const size_t es = qkv_dtype_size(x->dtype);
    const unsigned char *src = x->data;
    unsigned char *dst = y->data;
#pragma omp parallel for schedule(static) if (rows * L > COPY_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const unsigned char *s = src + (size_t)row_offset(sh, st, r) * es;
        unsigned char *d = dst + (size_t)(r * L) * es;
        if (s3 == 1) {
            memcpy(d, s, (size_t)L * es);
        } else if (es == 4) { /* constant sizes: the compiler inlines the copies */
            for (int64_t i = 0; i < L; i++)
                memcpy(d + (size_t)i * 4, s + (size_t)(i * s3) * 4, 4);
        } else if (es == 8) {
            for (int64_t i = 0; i < L; i++)
                memcpy(d + (size_t)i * 8, s + (size_t)(i * s3) * 8, 8);
        } else {
            for (int64_t i = 0; i < L; i++)
                memcpy(d + (size_t)i * es, s + (size_t)(i * s3) * es, es);
        }
    }
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
        if (dx)
            for (int64_t o = 0; o < outer; o++)
                for (int64_t i = 0; i < chunk; i++) dx[o * chunk + i] += dy[o * ychunk + at + i];
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
        for (int64_t o = 0; o < outer; o++)
            memcpy((unsigned char *)y->data + (size_t)(o * ychunk + at) * es,
                   (const unsigned char *)in[k]->data + (size_t)(o * chunk) * es, (size_t)chunk * es);
        at += chunk;
    }
    qkv_tape_entry *e = qkv__record(ctx, &concat_op, y, n, in);
    if (e) e->i[0] = dim;
    return y;
}
