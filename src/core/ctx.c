/*
 * ctx.c: the context (step arena, tape, sticky error, RNG position) and step tensors.
 */
#include "internal.h"
#include "../kernels/backend.h"

#include <stdlib.h>

qkv_ctx_params qkv_ctx_default_params(void) {
    qkv_ctx_params p;
    memset(&p, 0, sizeof p);
    p.arena_bytes = (size_t)16 << 20;
    p.poison = false;
    p.kernels = QKV_KERNELS_FAST;
    p.seed = 0;
    return p;
}

qkv_status qkv_ctx_new(const qkv_ctx_params *p, qkv_ctx **out) {
    if (!out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_ctx_new: out is NULL");
    *out = NULL;
    qkv_ctx_params def = qkv_ctx_default_params();
    if (!p) p = &def;
    if (!qkv__backend_of(p->kernels))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_ctx_new: unknown kernel set %d", (int)p->kernels);
    qkv_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return QKV_ERROR(QKV_ERR_OOM, "qkv_ctx_new: out of memory");
    const char *env = getenv("QKV_ARENA_POISON");
    bool poison = p->poison || (env && env[0] == '1');
    qkv__arena_init(&ctx->arena, p->arena_bytes, poison);
    ctx->grad_enabled = true;
    ctx->training = false;
    ctx->backend = qkv__backend_of(p->kernels);
    ctx->seed = p->seed;
    *out = ctx;
    return QKV_OK;
}

void qkv_ctx_free(qkv_ctx *ctx) {
    if (!ctx) return;
    qkv__arena_free(&ctx->arena);
    free(ctx);
}

void qkv_ctx_reset(qkv_ctx *ctx) {
    if (!ctx) return;
    qkv__arena_reset(&ctx->arena);
    ctx->tape = NULL;
    ctx->tape_size = 0;
    ctx->backward_done = false;
    ctx->status = QKV_OK;
    ctx->step++;
    ctx->rng_calls = 0;
    ctx->n_spare_grads = 0;
}

qkv_status qkv_ctx_status(const qkv_ctx *ctx) { return ctx ? ctx->status : QKV_ERR_INVALID_ARG; }
void qkv_ctx_set_grad_enabled(qkv_ctx *ctx, bool enabled) { ctx->grad_enabled = enabled; }
bool qkv_ctx_grad_enabled(const qkv_ctx *ctx) { return ctx->grad_enabled; }
void qkv_ctx_set_training(qkv_ctx *ctx, bool training) { ctx->training = training; }
bool qkv_ctx_training(const qkv_ctx *ctx) { return ctx->training; }
void qkv_ctx_set_kernels(qkv_ctx *ctx, qkv_kernels k) {
    const qkv_backend *b = qkv__backend_of(k);
    if (b) ctx->backend = b; /* an unknown set leaves the kernels as they are */
}
qkv_kernels qkv_ctx_kernels(const qkv_ctx *ctx) { return ctx->backend->kind; }
size_t qkv_ctx_arena_used(const qkv_ctx *ctx) { return ctx->arena.used; }
size_t qkv_ctx_arena_peak(const qkv_ctx *ctx) { return ctx->arena.peak; }
uint64_t qkv_ctx_arena_mallocs(const qkv_ctx *ctx) { return ctx->arena.mallocs; }
int64_t qkv_tape_size(const qkv_ctx *ctx) { return ctx->tape_size; }

void qkv_ctx_set_rng(qkv_ctx *ctx, uint64_t seed, uint64_t step) {
    ctx->seed = seed;
    ctx->step = step;
    ctx->rng_calls = 0;
}

void qkv_ctx_get_rng(const qkv_ctx *ctx, uint64_t *seed, uint64_t *step) {
    if (seed) *seed = ctx->seed;
    if (step) *step = ctx->step;
}

uint64_t qkv__next_stream(qkv_ctx *ctx) { return ctx->rng_calls++; }

/* ---- dtypes and shapes ---------------------------------------------------------------------- */

qkv_dtype qkv_real_dtype(void) { return QKV_REAL; }

size_t qkv_dtype_size(qkv_dtype dt) {
    switch (dt) {
    case QKV_F32: return 4;
    case QKV_F64: return 8;
    case QKV_I32: return 4;
    }
    return 0;
}

const char *qkv_dtype_name(qkv_dtype dt) {
    switch (dt) {
    case QKV_F32: return "F32";
    case QKV_F64: return "F64";
    case QKV_I32: return "I32";
    }
    return "?";
}

int64_t qkv_tensor_numel(const qkv_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

bool qkv_tensor_is_contiguous(const qkv_tensor *t) {
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != expect) return false;
        expect *= t->shape[d];
    }
    return true;
}

bool qkv_tensor_same_shape(const qkv_tensor *a, const qkv_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

char *qkv_tensor_shape_str(const qkv_tensor *t, char *buf, size_t size) {
    if (!t) {
        snprintf(buf, size, "NULL");
        return buf;
    }
    size_t n = 0;
    n += (size_t)snprintf(buf + n, size - n, "(");
    for (int d = 0; d < t->ndim && n < size; d++)
        n += (size_t)snprintf(buf + n, size - n, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (n < size) snprintf(buf + n, size - n, ") %s", qkv_dtype_name(t->dtype));
    return buf;
}

void qkv__set_contiguous_strides(qkv_tensor *t) {
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        t->stride[d] = s;
        s *= t->shape[d];
    }
}

/* ---- step tensors --------------------------------------------------------------------------- */

static qkv_tensor *tensor_header(qkv_ctx *ctx, qkv_dtype dt, int ndim, const int64_t *shape,
                                 int64_t *numel) {
    if (ndim < 0 || ndim > QKV_MAX_DIMS)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "tensor: %d dims (at most %d)", ndim, QKV_MAX_DIMS);
    if (qkv_dtype_size(dt) == 0) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "tensor: bad dtype %d", (int)dt);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return QKV_FAIL(ctx, QKV_ERR_SHAPE, "tensor: negative dim %lld", (long long)shape[d]);
        if (shape[d] && n > INT64_MAX / 8 / shape[d])
            return QKV_FAIL(ctx, QKV_ERR_OOM, "tensor: size overflows");
        n *= shape[d];
    }
    qkv_tensor *t = qkv__arena_alloc(&ctx->arena, sizeof *t);
    if (!t) return QKV_FAIL(ctx, QKV_ERR_OOM, "tensor: out of memory for a header");
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    qkv__set_contiguous_strides(t);
    *numel = n;
    return t;
}

qkv_tensor *qkv__alloc(qkv_ctx *ctx, qkv_dtype dt, int ndim, const int64_t *shape) {
    if (!ctx || ctx->status) return NULL;
    int64_t n = 0;
    qkv_tensor *t = tensor_header(ctx, dt, ndim, shape, &n);
    if (!t) return NULL;
    size_t bytes = (size_t)n * qkv_dtype_size(dt);
    t->data = qkv__arena_alloc(&ctx->arena, bytes);
    if (!t->data) {
        char buf[96];
        return QKV_FAIL(ctx, QKV_ERR_OOM, "tensor %s: out of memory (%zu bytes)",
                        qkv_tensor_shape_str(t, buf, sizeof buf), bytes);
    }
    return t;
}

qkv_tensor *qkv__alloc_like(qkv_ctx *ctx, const qkv_tensor *t) {
    return qkv__alloc(ctx, t->dtype, t->ndim, t->shape);
}

qkv_tensor *qkv__alloc_over(qkv_ctx *ctx, qkv_tensor *t) {
    if (!ctx || ctx->status) return NULL;
    QKV_ASSERT(!t->base && qkv_tensor_is_contiguous(t));
    int64_t n = 0;
    qkv_tensor *over = tensor_header(ctx, t->dtype, t->ndim, t->shape, &n);
    if (over) over->data = t->data;
    return over;
}

void *qkv__scratch(qkv_ctx *ctx, size_t bytes) {
    if (!ctx || ctx->status) return NULL;
    void *p = qkv__arena_alloc(&ctx->arena, bytes);
    if (!p) return QKV_FAIL(ctx, QKV_ERR_OOM, "out of memory (%zu bytes of scratch)", bytes);
    return p;
}

qkv_tensor *qkv_tensor_new(qkv_ctx *ctx, qkv_dtype dt, int ndim, const int64_t *shape) {
    if (!ctx) return NULL;
    if (ndim > 0 && !shape) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "qkv_tensor_new: shape is NULL");
    return qkv__alloc(ctx, dt, ndim, shape);
}

void qkv__zero_bytes(void *p, size_t bytes) {
    enum { ZERO_CHUNK = 1 << 18 }; /* 256 KiB */
    if (bytes < 4 * (size_t)ZERO_CHUNK) {
        memset(p, 0, bytes);
        return;
    }
    const int64_t chunks = (int64_t)((bytes + ZERO_CHUNK - 1) / ZERO_CHUNK);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; c++) {
        const size_t off = (size_t)c * ZERO_CHUNK, left = bytes - off;
        memset((unsigned char *)p + off, 0, left < ZERO_CHUNK ? left : ZERO_CHUNK);
    }
}

qkv_tensor *qkv_tensor_zeros(qkv_ctx *ctx, qkv_dtype dt, int ndim, const int64_t *shape) {
    qkv_tensor *t = qkv_tensor_new(ctx, dt, ndim, shape);
    if (t) qkv__zero_bytes(t->data, (size_t)qkv_tensor_numel(t) * qkv_dtype_size(dt));
    return t;
}

qkv_tensor *qkv_tensor_from(qkv_ctx *ctx, qkv_dtype dt, int ndim, const int64_t *shape,
                            const void *data) {
    if (ctx && !data) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "qkv_tensor_from: data is NULL");
    qkv_tensor *t = qkv_tensor_new(ctx, dt, ndim, shape);
    if (t) memcpy(t->data, data, (size_t)qkv_tensor_numel(t) * qkv_dtype_size(dt));
    return t;
}

void qkv_tensor_requires_grad(qkv_tensor *t) {
    if (t && t->dtype != QKV_I32) t->flags |= QKV_REQUIRES_GRAD;
}

/* ---- views ---------------------------------------------------------------------------------- */

static qkv_tensor *view_of(qkv_ctx *ctx, qkv_tensor *t) {
    qkv_tensor *v = qkv__arena_alloc(&ctx->arena, sizeof *v);
    if (!v) return QKV_FAIL(ctx, QKV_ERR_OOM, "view: out of memory");
    *v = *t;
    v->flags = (t->flags & QKV_REQUIRES_GRAD) | QKV_VIEW;
    v->name = NULL;
    v->base = t->base ? t->base : t;
    v->offset = t->base ? t->offset : 0;
    v->grad = NULL; /* derived from the base's gradient by qkv__grad */
    return v;
}

qkv_tensor *qkv_reshape(qkv_ctx *ctx, qkv_tensor *t, int ndim, const int64_t *shape) {
    if (!QKV_OP_BEGIN(ctx, "reshape", t)) return NULL;
    char buf[96];
    if (ndim < 0 || ndim > QKV_MAX_DIMS || (ndim > 0 && !shape))
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "reshape: bad target rank %d", ndim);
    if (!qkv_tensor_is_contiguous(t))
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "reshape: input %s is a strided view; call qkv_contiguous first",
                        qkv_tensor_shape_str(t, buf, sizeof buf));
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return QKV_FAIL(ctx, QKV_ERR_SHAPE, "reshape: negative dim");
        n *= shape[d];
    }
    if (n != qkv_tensor_numel(t))
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "reshape: %s has %lld elements, target has %lld",
                        qkv_tensor_shape_str(t, buf, sizeof buf), (long long)qkv_tensor_numel(t),
                        (long long)n);
    qkv_tensor *v = view_of(ctx, t);
    if (!v) return NULL;
    v->ndim = ndim;
    for (int d = 0; d < ndim; d++) v->shape[d] = shape[d];
    qkv__set_contiguous_strides(v);
    return v;
}

qkv_tensor *qkv_permute(qkv_ctx *ctx, qkv_tensor *t, const int *perm) {
    if (!QKV_OP_BEGIN(ctx, "permute", t)) return NULL;
    if (!perm) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "permute: perm is NULL");
    bool seen[QKV_MAX_DIMS] = {false};
    for (int d = 0; d < t->ndim; d++) {
        if (perm[d] < 0 || perm[d] >= t->ndim || seen[perm[d]])
            return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "permute: perm is not a permutation of %d dims", t->ndim);
        seen[perm[d]] = true;
    }
    qkv_tensor *v = view_of(ctx, t);
    if (!v) return NULL;
    for (int d = 0; d < t->ndim; d++) {
        v->shape[d] = t->shape[perm[d]];
        v->stride[d] = t->stride[perm[d]];
    }
    return v;
}

qkv_tensor *qkv_narrow(qkv_ctx *ctx, qkv_tensor *t, int dim, int64_t start, int64_t length) {
    if (!QKV_OP_BEGIN(ctx, "narrow", t)) return NULL;
    char buf[96];
    if (dim < 0) dim += t->ndim;
    if (dim < 0 || dim >= t->ndim || start < 0 || length < 0 || start > t->shape[dim] - length)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "narrow: [%lld, %lld) along dim %d is outside %s", (long long)start,
                        (long long)(start + length), dim, qkv_tensor_shape_str(t, buf, sizeof buf));
    qkv_tensor *v = view_of(ctx, t);
    if (!v) return NULL;
    v->shape[dim] = length;
    v->offset += start * t->stride[dim];
    v->data = (unsigned char *)t->data + (size_t)(start * t->stride[dim]) * qkv_dtype_size(t->dtype);
    return v;
}
