/*
 * embedding.c: table lookup (torch.nn.functional.embedding) and arange.
 *
 * y[..., :] = table[ids[...], :] for table (V, C) and ids I32 (...) with at most 3 dims, so that
 * y (..., C) has at most 4. Also the learned absolute positional encoding (ids = arange(0, T)).
 * Backward scatter-adds: dtable[ids[n], :] += dy[n, :] (repeated ids accumulate, in token
 * order). ids are an index, not a value: they never carry a gradient.
 * Saved for backward: ids (saved[0]); the table is the tape entry's input.
 */
#include "../kernels/embedding.h"
#include "../kernels/backend.h"

static void embedding_backward(qkv_ctx *ctx, qkv_tape_entry *e) {
    qkv_real *dtable = qkv__grad(ctx, e->in[0]);
    if (!dtable) return;
    const qkv_tensor *ids = e->saved[0];
    ctx->backend->embedding->bwd(qkv_tensor_numel(ids), e->in[0]->shape[0],
                                        e->in[0]->shape[1], qkv__idata(ids),
                                        (const qkv_real *)e->out->grad, dtable);
}

static const qkv_op_desc embedding_op = {"embedding", embedding_backward};

qkv_tensor *qkv_embedding(qkv_ctx *ctx, qkv_tensor *table, qkv_tensor *ids) {
    if (!QKV_OP_BEGIN(ctx, "embedding", table, ids)) return NULL;
    if (!qkv__check_real(ctx, "embedding", table, "table") ||
        !qkv__check_i32(ctx, "embedding", ids, "ids"))
        return NULL;
    char bt[96], bi[96];
    if (table->ndim != 2)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "embedding: table %s must be (V, C)",
                        qkv_tensor_shape_str(table, bt, sizeof bt));
    if (ids->ndim > QKV_MAX_DIMS - 1)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "embedding: ids %s have more than %d dims",
                        qkv_tensor_shape_str(ids, bi, sizeof bi), QKV_MAX_DIMS - 1);
    if (ids->flags & QKV_REQUIRES_GRAD)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                        "embedding: ids %s are marked as requiring a gradient; indices have none",
                        qkv_tensor_shape_str(ids, bi, sizeof bi));
    table = qkv__contig(ctx, table);
    ids = qkv__contig(ctx, ids);
    if (ctx->status) return NULL;
    const int64_t V = table->shape[0], C = table->shape[1], n = qkv_tensor_numel(ids);
    const int32_t *id = qkv__idata(ids);
    for (int64_t i = 0; i < n; i++)
        if (id[i] < 0 || id[i] >= V)
            return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                            "embedding: id %d at flat position %lld of ids %s is outside [0, %lld) "
                            "(table %s)",
                            (int)id[i], (long long)i, qkv_tensor_shape_str(ids, bi, sizeof bi),
                            (long long)V, qkv_tensor_shape_str(table, bt, sizeof bt));
    int64_t shape[QKV_MAX_DIMS];
    for (int d = 0; d < ids->ndim; d++)
        shape[d] = ids->shape[d];
    shape[ids->ndim] = C;
    qkv_tensor *y = qkv__alloc(ctx, QKV_REAL, ids->ndim + 1, shape); /* (..., C) */
    if (!y) return NULL;
    ctx->backend->embedding->fwd(n, C, qkv__data(table), id, qkv__data(y));
    qkv_tape_entry *e = qkv__record(ctx, &embedding_op, y, 1, &table);
    if (e) e->saved[0] = ids;
    return y;
}

qkv_tensor *qkv_arange(qkv_ctx *ctx, int64_t start, int64_t n) {
    if (!qkv__op_begin(ctx, "arange", __FILE__, __LINE__, 0, NULL)) return NULL;
    if (n < 0 || start < INT32_MIN || start > INT32_MAX ||
        (n > 0 && n - 1 > (int64_t)INT32_MAX - start))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                        "arange: start %lld, n %lld: need n >= 0 and every value in I32 range",
                        (long long)start, (long long)n);
    qkv_tensor *y = qkv__alloc(ctx, QKV_I32, 1, &n); /* (n) */
    if (!y) return NULL;
    int32_t *yd = qkv__idata(y);
    for (int64_t i = 0; i < n; i++)
        yd[i] = (int32_t)(start + i);
    return y;
}
