/*
 * posenc_rope.c: rotary position embedding (Su et al. 2021, "RoFormer", eq. 34).
 *
 * x (..., T, D), D even; token t sits at position p = offset + t. Pair i of the features,
 * (x[2i], x[2i+1]), is rotated by the angle p theta_i, theta_i = base^(-2i/D):
 *   y[2i]   = x[2i] cos(p theta_i) - x[2i+1] sin(p theta_i)
 *   y[2i+1] = x[2i] sin(p theta_i) + x[2i+1] cos(p theta_i)
 * This is the interleaved convention of the paper, GPT-J and the original LLaMA code (complex
 * multiplication of consecutive pairs). GPT-NeoX and the Hugging Face "rotate_half" code pair
 * x[i] with x[i + D/2] instead: the same rotation applied to permuted features, so weights move
 * between the two conventions by permuting the rows of W_q and W_k. Because rotations compose,
 * (R_m q) . (R_n k) = q . R_{n-m} k: the score depends on n - m only.
 *
 * Backward: R is orthogonal, so dx = R^T dy = rotation of dy by -p theta_i. Nothing is saved
 * (offset and base are attributes of the tape entry); the backward recomputes the angles.
 */
#include "../kernels/posenc.h"
#include "../kernels/backend.h"

static bool rope_run(qkv_ctx *ctx, const qkv_tensor *shape_of, int64_t offset, double base,
                     bool inverse, const qkv_real *x, qkv_real *y, bool accumulate) {
    const int64_t D = qkv__last(shape_of), T = shape_of->shape[shape_of->ndim - 2];
    const int64_t numel = qkv_tensor_numel(shape_of);
    if (numel == 0) return true;
    const int64_t N = numel / (T * D);
    qkv_real *table = qkv__scratch(ctx, sizeof(qkv_real) * (size_t)(T * D));
    if (!table) return false;
    ctx->backend->posenc->rope(N, T, D, offset, base, inverse, x, y, accumulate, table);
    return true;
}

static void rope_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_real *dx = qkv__grad(ctx, e->in[0]);
    if (!dx) return;
    rope_run(ctx, e->out, e->i[0], e->f[0], true, (const qkv_real *)e->out->grad, dx, true);
}

static const qkv_op_desc rope_op = {"rope", rope_backward};

qkv_tensor *qkv_rope(qkv_ctx *ctx, qkv_tensor *x, int64_t offset, double base) {
    if (!QKV_OP_BEGIN(ctx, "rope", x)) return NULL;
    if (!qkv__check_real(ctx, "rope", x, "x")) return NULL;
    char bx[96];
    if (x->ndim < 2 || qkv__last(x) % 2 != 0)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE,
                        "rope: x %s must be (..., T, D) with an even head size D (the features "
                        "rotate in pairs)",
                        qkv_tensor_shape_str(x, bx, sizeof bx));
    const int64_t T = x->shape[x->ndim - 2];
    if (offset < 0 || offset > INT64_MAX - T)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "rope: position offset %lld must be >= 0",
                        (long long)offset);
    if (!(base > 0) || isinf(base))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "rope: base %g must be finite and > 0", base);
    x = qkv__contig(ctx, x);
    if (ctx->status) return NULL;
    qkv_tensor *y = qkv__alloc_like(ctx, x); /* (..., T, D) */
    if (!y) return NULL;
    if (!rope_run(ctx, x, offset, base, false, qkv__data(x), qkv__data(y), false)) return NULL;
    qkv_tape_entry *e = qkv__record(ctx, &rope_op, y, 1, &x);
    if (e) {
        e->i[0] = offset;
        e->f[0] = base;
    }
    return y;
}
