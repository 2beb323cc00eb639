/*
 * tape.c: recording ops and replaying them backwards (reverse-mode automatic differentiation).
 *
 * Each differentiable op, when an input requires a gradient and recording is on, appends an
 * entry (op descriptor, inputs, output, saved tensors, attributes) to a singly linked list in the
 * step arena. qkv_backward seeds d(loss) = 1 and calls the entries' backward functions newest
 * first; each accumulates into its inputs' gradients, which are allocated (zeroed) on first use.
 * Because every op appends after its inputs exist, reverse order is a valid topological order.
 */
#include "internal.h"
#include "../kernels/backend.h"

bool qkv__op_begin(qkv_ctx *ctx, const char *op, const char *file, int line, int n,
                   qkv_tensor *const *in) {
    if (!ctx) {
        qkv__error(QKV_ERR_INVALID_ARG, file, line, "%s: context is NULL", op);
        return false;
    }
    if (ctx->status != QKV_OK) return false;
    for (int i = 0; i < n; i++) {
        if (!in[i]) {
            qkv__fail(ctx, QKV_ERR_INVALID_ARG, file, line, "%s: input %d is NULL", op, i);
            return false;
        }
        if (in[i]->device != ctx->backend->device) {
            qkv__fail(ctx, QKV_ERR_INVALID_ARG, file, line,
                      "%s: input %d is on device %d, the context's backend (%s) computes on device %d", op, i,
                      (int)in[i]->device, ctx->backend->name, (int)ctx->backend->device);
            return false;
        }
    }
    return true;
}

bool qkv__check_dtype(qkv_ctx *ctx, const char *op, const qkv_tensor *t, const char *arg,
                      qkv_dtype want, const char *file, int line) {
    if (t->dtype == want) return true;
    char buf[96];
    qkv__fail(ctx, QKV_ERR_SHAPE, file, line, "%s: %s must be %s, got %s", op, arg,
              qkv_dtype_name(want), qkv_tensor_shape_str(t, buf, sizeof buf));
    return false;
}

int64_t qkv__rows(const qkv_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d + 1 < t->ndim; d++) n *= t->shape[d];
    return n;
}

bool qkv__needs_grad(const qkv_ctx *ctx, int n, qkv_tensor *const *in) {
    if (!ctx->grad_enabled) return false;
    for (int i = 0; i < n; i++)
        if (in[i] && (in[i]->flags & QKV_REQUIRES_GRAD)) return true;
    return false;
}

qkv_tape_entry *qkv__record(qkv_ctx *ctx, const qkv_op_desc *op, qkv_tensor *out, int n,
                            qkv_tensor *const *in) {
    QKV_ASSERT(n <= QKV_MAX_IN);
    if (ctx->status != QKV_OK || !qkv__needs_grad(ctx, n, in)) return NULL;
    if (ctx->backward_done) {
        QKV_FAIL(ctx, QKV_ERR_STATE, "%s: recording after backward; call qkv_ctx_reset first", op->name);
        return NULL;
    }
    qkv_tape_entry *e = qkv__arena_alloc(&ctx->arena, sizeof *e);
    if (!e) {
        QKV_FAIL(ctx, QKV_ERR_OOM, "%s: out of memory for a tape entry", op->name);
        return NULL;
    }
    memset(e, 0, sizeof *e);
    e->op = op;
    e->n_in = n;
    for (int i = 0; i < n; i++) e->in[i] = in[i];
    e->out = out;
    out->flags |= QKV_REQUIRES_GRAD;
    e->prev = ctx->tape;
    ctx->tape = e;
    ctx->tape_size++;
    return e;
}

bool qkv__refuse_grad(qkv_ctx *ctx, const char *op, int n, qkv_tensor *const *in) {
    if (!qkv__needs_grad(ctx, n, in)) return true;
    QKV_FAIL(ctx, QKV_ERR_UNSUPPORTED,
             "%s is not differentiable but an input requires a gradient; disable gradients "
             "(qkv_ctx_set_grad_enabled) or detach the input", op);
    return false;
}

/*
 * Gradient buffers of intermediate tensors are recycled during backward. The tape is replayed
 * in reverse, so when the entry that produced a tensor runs its backward, every consumer of the
 * tensor (and of its views, which alias its gradient) has already added its part: the gradient
 * is complete, the producer reads it one last time, and the buffer is free for the gradient of
 * an earlier tensor of the same size (layers repeat their shapes, so most find one). This keeps
 * the backward pass's working set to a few buffers that stay in cache, instead of one fresh
 * buffer per tensor. As in PyTorch (retain_grad), only leaves (inputs, parameters) keep their
 * gradients after backward; views and tensors not produced by a tape entry are never released.
 */
static void *take_spare_grad(qkv_ctx *ctx, size_t bytes) {
    for (int i = ctx->n_spare_grads - 1; i >= 0; i--) {
        if (ctx->spare_grads[i].bytes != bytes) continue;
        void *p = ctx->spare_grads[i].data;
        ctx->spare_grads[i] = ctx->spare_grads[--ctx->n_spare_grads];
        return p;
    }
    return NULL;
}

void qkv__grad_scratch_release(qkv_ctx *ctx, void *p, size_t bytes) {
    if (!p || ctx->n_spare_grads == QKV_SPARE_GRADS) return;
    if (ctx->arena.poison) memset(p, 0xFF, bytes); /* a stale read shows up as NaN */
    ctx->spare_grads[ctx->n_spare_grads].data = p;
    ctx->spare_grads[ctx->n_spare_grads].bytes = bytes;
    ctx->n_spare_grads++;
}

qkv_real *qkv__grad_scratch(qkv_ctx *ctx, size_t bytes) {
    void *p = take_spare_grad(ctx, bytes);
    if (!p) p = qkv__arena_alloc(&ctx->arena, bytes);
    if (!p) QKV_FAIL(ctx, QKV_ERR_OOM, "backward: out of memory for a temporary (%zu bytes)", bytes);
    return p;
}

static void release_grad(qkv_ctx *ctx, qkv_tensor *t) {
    if (t->base || !t->grad) return;
    qkv__grad_scratch_release(ctx, t->grad, (size_t)qkv_tensor_numel(t) * sizeof(qkv_real));
    t->grad = NULL;
}

/* A fresh gradient buffer for t (not a view, none yet), zeroed or not; NULL when out of memory. */
static qkv_real *new_grad(qkv_ctx *ctx, qkv_tensor *t, bool zero) {
    size_t bytes = (size_t)qkv_tensor_numel(t) * sizeof(qkv_real);
    void *g = take_spare_grad(ctx, bytes);
    if (!g) g = qkv__arena_alloc(&ctx->arena, bytes);
    if (!g) {
        QKV_FAIL(ctx, QKV_ERR_OOM, "backward: out of memory for a gradient (%zu bytes)", bytes);
        return NULL;
    }
    if (zero) qkv__zero_bytes(g, bytes);
    t->grad = g;
    return (qkv_real *)g;
}

qkv_real *qkv__grad(qkv_ctx *ctx, qkv_tensor *t) {
    if (!t || !(t->flags & QKV_REQUIRES_GRAD) || t->dtype != QKV_REAL) return NULL;
    if (t->grad) return (qkv_real *)t->grad;
    if (t->base) {
        qkv_real *bg = qkv__grad(ctx, t->base);
        if (!bg) return NULL;
        t->grad = bg + t->offset;
        return (qkv_real *)t->grad;
    }
    return new_grad(ctx, t, true);
}

qkv_real *qkv__grad_into(qkv_ctx *ctx, qkv_tensor *t, bool *overwrite) {
    *overwrite = false;
    if (!t || !(t->flags & QKV_REQUIRES_GRAD) || t->dtype != QKV_REAL) return NULL;
    if (t->grad || t->base) return qkv__grad(ctx, t);
    qkv_real *g = new_grad(ctx, t, false);
    *overwrite = g != NULL;
    return g;
}

/* True when some gradient has reached t (directly or through a view of it). */
static bool has_grad(const qkv_tensor *t) { return t->grad != NULL || (t->base && t->base->grad); }

static qkv_status replay(qkv_ctx *ctx) {
    for (qkv_tape_entry *e = ctx->tape; e && ctx->status == QKV_OK; e = e->prev) {
        if (!has_grad(e->out)) continue; /* nothing downstream of this op reached the loss */
        if (!qkv__grad(ctx, e->out)) break;
        e->op->backward(ctx, e);
        release_grad(ctx, e->out);
    }
    ctx->backward_done = true;
    return ctx->status;
}

static qkv_status backward_begin(qkv_ctx *ctx, qkv_tensor *y) {
    if (!ctx) return QKV_ERROR(QKV_ERR_INVALID_ARG, "backward: context is NULL");
    if (ctx->status != QKV_OK) return ctx->status;
    if (!y) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "backward: output is NULL"), ctx->status;
    if (ctx->backward_done)
        return QKV_FAIL(ctx, QKV_ERR_STATE, "backward: already ran on this tape; call qkv_ctx_reset"),
               ctx->status;
    if (!(y->flags & QKV_REQUIRES_GRAD) || y->dtype != QKV_REAL)
        return QKV_FAIL(ctx, QKV_ERR_STATE, "backward: the output does not depend on anything that "
                                            "requires a gradient"),
               ctx->status;
    return QKV_OK;
}

qkv_status qkv_backward(qkv_ctx *ctx, qkv_tensor *loss) {
    qkv_status st = backward_begin(ctx, loss);
    if (st) return st;
    if (qkv_tensor_numel(loss) != 1) {
        char buf[96];
        QKV_FAIL(ctx, QKV_ERR_SHAPE, "backward: loss must have one element, got %s",
                 qkv_tensor_shape_str(loss, buf, sizeof buf));
        return ctx->status;
    }
    qkv_real *g = qkv__grad(ctx, loss);
    if (!g) return ctx->status;
    g[0] += 1;
    return replay(ctx);
}

qkv_status qkv_backward_from(qkv_ctx *ctx, qkv_tensor *y, const qkv_tensor *dy) {
    qkv_status st = backward_begin(ctx, y);
    if (st) return st;
    if (!dy || !qkv_tensor_same_shape(y, dy) || dy->dtype != QKV_REAL || !qkv_tensor_is_contiguous(dy) ||
        !qkv_tensor_is_contiguous(y)) {
        QKV_FAIL(ctx, QKV_ERR_SHAPE, "backward_from: dy must be a contiguous tensor of y's shape and dtype");
        return ctx->status;
    }
    qkv_real *g = qkv__grad(ctx, y);
    if (!g) return ctx->status;
    ctx->backend->elementwise->scale(qkv_tensor_numel(y), 1, (const qkv_real *)dy->data, g, true); /* g += dy */
    return replay(ctx);
}
