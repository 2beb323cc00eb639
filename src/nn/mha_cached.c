/*
 * mha_cached.c: incremental multi-head attention for autoregressive decoding (a KV cache).
 *
 * Dims: N rows (batch x beam), T new positions, L cache capacity, S attended keys, C d_model,
 * H heads, D = C / H.
 *
 * Causal self-attention of position t only reads keys and values of positions <= t, and those
 * depend only on their own rows, so decoding keeps k_j = x_j W_k^T and v_j = x_j W_v^T of every
 * earlier position in a cache (Ott et al. 2019, fairseq's incremental state; CTranslate2) and a
 * step of T new rows computes
 *   q, k_new, v_new = x W_{q,k,v}^T      (RoPE: rotated at positions t0 .. t0+T-1)
 *   cache[:, :, t0 .. t0+T-1] = k_new, v_new
 *   o_i = Attention(q_i, K[0 .. t0+T-1], V[0 .. t0+T-1] | j <= t0 + i)
 * with the module's own score function, normaliser and relative encoding at query offset t0
 * (qkv__mha_attend, shared with qkv_mha_forward), which is O(T (t0 + T) C) per step instead of
 * re-running O((t0 + T)^2 C) over the prefix. Cross-attention projects the encoder memory once
 * (qkv_mha_cache_memory) and each step only projects its queries.
 *
 * A single-token step (T = 1, the decoding loop) of the plain scaled-dot softmax attention (with or
 * without RoPE) with the fast kernels attends over the cache in place (kernels/attend_cached.h):
 * no copy of the narrowed cache, no transposed K, o written in the merged-heads layout. Other
 * steps, other variants and the reference kernels take qkv__mha_attend.
 *
 * Cross-attention caches may hold one row per source with kv_rows mapping each row to its source
 * (qkv__mha_step_rows; beam search's hypotheses of a sentence share one projected memory). A
 * self-attention cache may be read through a table self_rows (N, L) giving the cache row of each
 * row's key position (qkv_layer_cache.self_rows): the decoding session reorders hypotheses by
 * rewriting that table, and every key and value stays in the row that computed it.
 *
 * Nothing is saved for backward: writing into the cache is not differentiable, so both calls
 * refuse to run when a parameter or input would need a gradient.
 */
#include "nn_internal.h"

#include "../kernels/attend_cached.h"
#include "../kernels/backend.h"

#include <math.h>

/* cache must be a real (N, H, len, D) tensor with a contiguous last dim. */
static bool check_cache(qkv_ctx *ctx, const qkv_mha *m, const char *op, const qkv_tensor *c,
                        const char *arg, int64_t N) {
    const int64_t H = m->cfg.n_heads, D = m->cfg.d_model / H;
    if (!qkv__check_real(ctx, op, c, arg)) return false;
    char b[96];
    if (c->ndim != 4 || c->shape[0] != N || c->shape[1] != H || c->shape[3] != D ||
        (D > 1 && c->stride[3] != 1)) {
        QKV_FAIL(ctx, QKV_ERR_SHAPE,
                 "%s: %s %s is not (N = %lld, H = %lld, len, D = %lld) with a contiguous last dim",
                 op, arg, qkv_tensor_shape_str(c, b, sizeof b), (long long)N, (long long)H,
                 (long long)D);
        return false;
    }
    return true;
}

/* cache[n, h, at + t, :] = src[n, h, t, :] for src (N, H, T, D): a copy between two views (the
 * backend's layout kernels). */
static void write_rows(qkv_ctx *ctx, const qkv_tensor *src, qkv_tensor *cache, int64_t at) {
    const qkv_view4 from = qkv__view4(src);
    qkv_view4 into = qkv__view4(cache);
    into.shape[0] = from.shape[0], into.shape[2] = from.shape[2]; /* rows n < N, positions at .. at + T - 1 */
    ctx->backend->layout->copy(sizeof(qkv_real), qkv__data(src), &from, qkv__data(cache) + at * cache->stride[2],
                               &into);
}

/* The new keys or values (N, H, T, D) with a unit last stride (views of the projection are; a
 * rotated tensor is contiguous). */
static qkv_tensor *unit_last_stride(qkv_ctx *ctx, qkv_tensor *t) {
    return t && t->shape[3] > 1 && t->stride[3] != 1 ? qkv_contiguous(ctx, t) : t;
}

/* The merged attention output (N, 1, C) of a single-token step over the first S cache positions,
 * attended in place; or NULL (status untouched) when the step does not qualify (see the top). */
static qkv_tensor *attend_in_place(qkv_ctx *ctx, const qkv_mha *m, const qkv_tensor *q,
                                   const qkv_tensor *cache_k, const qkv_tensor *cache_v,
                                   const int32_t *kv_rows, const int32_t *self_rows, int64_t S,
                                   const qkv_mask *mk, qkv_tensor **weights_out) {
    const qkv_mha_config *c = &m->cfg;
    const int64_t N = q->shape[0], H = q->shape[1], T = q->shape[2], D = q->shape[3];
    const qkv_tensor *kp = mk->key_padding;
    if (!ctx->backend->attend_cached || T != 1 || weights_out || !c->use_fused ||
        c->score != QKV_SCORE_SCALED_DOT || c->norm != QKV_NORM_SOFTMAX ||
        (c->relpos != QKV_RELPOS_NONE && c->relpos != QKV_RELPOS_ROPE) ||
        (ctx->training && c->dropout > 0) || (D > 1 && q->stride[3] != 1) ||
        cache_v->stride[0] != cache_k->stride[0] || cache_v->stride[1] != cache_k->stride[1] ||
        cache_v->stride[2] != cache_k->stride[2] || mk->causal || mk->window_left >= 0 ||
        mk->allowed ||
        (mk->window_right >= 0 && S - 1 > mk->window_right) || /* every key j <= 0 + right */
        (kp && (kp->dtype != QKV_I32 || kp->ndim != 2 || kp->shape[0] != N || kp->shape[1] != S)))
        return NULL;
    if (kp) kp = qkv__contig(ctx, (qkv_tensor *)kp);
    qkv_tensor *o = qkv__alloc(ctx, QKV_REAL, 3, (int64_t[]){N, 1, H * D}); /* (N, 1, C) */
    if (!o || ctx->status) return NULL;
    const qkv_attend_cached_problem p = {.N = N,
                                         .H = H,
                                         .S = S,
                                         .D = D,
                                         .scale = 1 / sqrt((double)D),
                                         .q = qkv__data(q),
                                         .q_sn = q->stride[0],
                                         .q_sh = q->stride[1],
                                         .k = qkv__data(cache_k),
                                         .v = qkv__data(cache_v),
                                         .kv_sn = cache_k->stride[0],
                                         .kv_sh = cache_k->stride[1],
                                         .kv_sj = cache_k->stride[2],
                                         .kv_rows = kv_rows,
                                         .key_rows = self_rows,
                                         .key_rows_ld = cache_k->shape[2],
                                         .key_padding = kp ? qkv__idata(kp) : NULL,
                                         .o = qkv__data(o),
                                         .o_sn = H * D};
    return ctx->backend->attend_cached(ctx, &p) ? o : NULL;
}

qkv_status qkv_mha_cache_memory(qkv_ctx *ctx, const qkv_mha *m, qkv_tensor *memory,
                                qkv_tensor *cache_k, qkv_tensor *cache_v) {
    if (!QKV_OP_BEGIN(ctx, "mha_cache_memory", memory, cache_k, cache_v))
        return ctx ? (ctx->status ? ctx->status : QKV_ERR_INVALID_ARG) : QKV_ERR_INVALID_ARG;
    if (!m || !m->in_proj_weight) {
        QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "mha_cache_memory: module is not initialised");
        return ctx->status;
    }
    const int64_t C = m->cfg.d_model;
    char b[96];
    if (!qkv__check_real(ctx, "mha_cache_memory", memory, "memory")) return ctx->status;
    if (memory->ndim != 3 || memory->shape[2] != C) {
        QKV_FAIL(ctx, QKV_ERR_SHAPE, "mha_cache_memory: memory %s is not (N, S, %lld)",
                 qkv_tensor_shape_str(memory, b, sizeof b), (long long)C);
        return ctx->status;
    }
    const int64_t N = memory->shape[0], S = memory->shape[1];
    if (!check_cache(ctx, m, "mha_cache_memory", cache_k, "cache_k", N) ||
        !check_cache(ctx, m, "mha_cache_memory", cache_v, "cache_v", N))
        return ctx->status;
    if (cache_k->shape[2] != S || cache_v->shape[2] != S) {
        QKV_FAIL(ctx, QKV_ERR_SHAPE,
                 "mha_cache_memory: caches hold %lld / %lld positions, memory has S = %lld",
                 (long long)cache_k->shape[2], (long long)cache_v->shape[2], (long long)S);
        return ctx->status;
    }
    if (!qkv__refuse_grad(ctx, "mha_cache_memory", 2, (qkv_tensor *[]){memory, m->in_proj_weight}))
        return ctx->status;
    qkv_tensor *kv[2] = {NULL, NULL};
    qkv__mha_project(ctx, m, memory, 1, 2, kv); /* (N, H, S, D) each */
    if (ctx->status) return ctx->status;
    if (m->cfg.relpos == QKV_RELPOS_ROPE) kv[0] = qkv_rope(ctx, kv[0], 0, m->cfg.rope_base);
    kv[0] = unit_last_stride(ctx, kv[0]);
    kv[1] = unit_last_stride(ctx, kv[1]);
    if (ctx->status) return ctx->status;
    write_rows(ctx, kv[0], cache_k, 0);
    write_rows(ctx, kv[1], cache_v, 0);
    return QKV_OK;
}

/* The first S positions of a cache (R, H, L, D) as row n sees them, gathered into a new
 * contiguous (N, H, S, D): position j from cache row rows[n row_sn + j row_sj] (kv_rows: one row
 * per row, row_sn 1, row_sj 0; a table self_rows (N, L): row_sn L, row_sj 1). */
static qkv_tensor *gather_rows(qkv_ctx *ctx, const qkv_tensor *cache, const int32_t *rows,
                               int64_t row_sn, int64_t row_sj, int64_t N, int64_t S) {
    const int64_t H = cache->shape[1], D = cache->shape[3];
    qkv_tensor *g = qkv__alloc(ctx, QKV_REAL, 4, (int64_t[]){N, H, S, D});
    if (!g || ctx->backend->measure_only) return g; /* the arena measure run: the allocation is the point */
    const int64_t cs[3] = {cache->stride[0], cache->stride[1], cache->stride[2]};
    ctx->backend->layout->gather(qkv__data(cache), cs, H, D, rows, row_sn, row_sj, N, S, qkv__data(g));
    return g;
}

qkv_tensor *qkv_mha_step(qkv_ctx *ctx, const qkv_mha *m, qkv_tensor *x, qkv_tensor *cache_k,
                         qkv_tensor *cache_v, int64_t t0, bool self_attn, const qkv_mask *mask,
                         qkv_tensor **weights_out) {
    return qkv__mha_step_rows(ctx, m, x, cache_k, cache_v, NULL, NULL, t0, self_attn, mask,
                              weights_out);
}

qkv_tensor *qkv__mha_step_rows(qkv_ctx *ctx, const qkv_mha *m, qkv_tensor *x, qkv_tensor *cache_k,
                               qkv_tensor *cache_v, const int32_t *kv_rows,
                               const int32_t *self_rows, int64_t t0, bool self_attn,
                               const qkv_mask *mask, qkv_tensor **weights_out) {
    if (weights_out) *weights_out = NULL;
    if (!QKV_OP_BEGIN(ctx, "mha_step", x, cache_k, cache_v)) return NULL;
    if (!m || !m->in_proj_weight)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "mha_step: module is not initialised");
    const int64_t C = m->cfg.d_model;
    char b[96];
    if (!qkv__check_real(ctx, "mha_step", x, "x")) return NULL;
    if (x->ndim != 3 || x->shape[2] != C || x->shape[1] < 1)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "mha_step: x %s is not (N, T >= 1, %lld)",
                        qkv_tensor_shape_str(x, b, sizeof b), (long long)C);
    const int64_t N = x->shape[0], T = x->shape[1];
    if (kv_rows && self_attn)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                        "mha_step: shared cache rows are for cross-attention only");
    if (self_rows && !self_attn)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                        "mha_step: a table of key rows is for self-attention only");
    const int64_t R =
        (kv_rows || self_rows) && cache_k && cache_k->ndim == 4 ? cache_k->shape[0] : N;
    if (!check_cache(ctx, m, "mha_step", cache_k, "cache_k", R) ||
        !check_cache(ctx, m, "mha_step", cache_v, "cache_v", R))
        return NULL;
    for (int64_t n = 0; kv_rows && n < N; n++)
        if (kv_rows[n] < 0 || kv_rows[n] >= R)
            return QKV_FAIL(ctx, QKV_ERR_SHAPE,
                            "mha_step: row %lld reads cache row %d, outside 0 .. %lld",
                            (long long)n, kv_rows[n], (long long)(R - 1));
    if (cache_k->shape[2] != cache_v->shape[2])
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "mha_step: cache_k holds %lld positions, cache_v %lld",
                        (long long)cache_k->shape[2], (long long)cache_v->shape[2]);
    const int64_t L = cache_k->shape[2];
    if (t0 < 0 || (self_attn && t0 > L - T))
        return QKV_FAIL(ctx, QKV_ERR_SHAPE,
                        "mha_step: positions %lld .. %lld do not fit a cache of %lld positions",
                        (long long)t0, (long long)(t0 + T - 1), (long long)L);
    if (self_rows && R < N)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "mha_step: caches of %lld rows for %lld rows",
                        (long long)R, (long long)N);
    for (int64_t n = 0; self_rows && n < N; n++) /* O(N (t0 + T)) against the O(N H S D) step */
        for (int64_t j = 0; j < t0 + T; j++) {
            const int32_t r = self_rows[n * L + j];
            if (j < t0 && (r < 0 || r >= R))
                return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                                "mha_step: row %lld reads position %lld from cache row %d, "
                                "outside 0 .. %lld",
                                (long long)n, (long long)j, r, (long long)(R - 1));
            if (j >= t0 && r != n)
                return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                                "mha_step: the new position %lld of row %lld must map to its own "
                                "row (the table says %d)",
                                (long long)j, (long long)n, r);
        }
    qkv_mask mk = mask ? *mask : qkv_mask_none();
    if (self_attn) {
        if (mk.causal || mk.window_left >= 0 || mk.window_right >= 0 || mk.allowed)
            return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG,
                            "mha_step: a self-attention step takes only key_padding in its mask "
                            "(the causal rule "
                            "j <= t0 + i is implied)");
        mk.window_right = (int32_t)t0; /* j <= i + t0: causal at query offset t0 */
    }
    if (!qkv__refuse_grad(ctx, "mha_step", 2, (qkv_tensor *[]){x, m->in_proj_weight})) return NULL;

    qkv_tensor *q = NULL, *kv[2] = {NULL, NULL};
    if (self_attn) {
        qkv_tensor *qkv[3] = {NULL, NULL, NULL};
        qkv__mha_project(ctx, m, x, 0, 3, qkv); /* (N, H, T, D) each */
        q = qkv[0], kv[0] = qkv[1], kv[1] = qkv[2];
    } else {
        qkv__mha_project(ctx, m, x, 0, 1, &q);
    }
    if (ctx->status) return NULL;
    if (m->cfg.relpos == QKV_RELPOS_ROPE) {
        q = qkv_rope(ctx, q, t0, m->cfg.rope_base);
        if (self_attn) kv[0] = qkv_rope(ctx, kv[0], t0, m->cfg.rope_base);
    }
    const int64_t S = self_attn ? t0 + T : L;
    if (self_attn) {
        kv[0] = unit_last_stride(ctx, kv[0]);
        kv[1] = unit_last_stride(ctx, kv[1]);
        if (ctx->status) return NULL;
        write_rows(ctx, kv[0], cache_k, t0);
        write_rows(ctx, kv[1], cache_v, t0);
    }
    qkv_tensor *o =
        attend_in_place(ctx, m, q, cache_k, cache_v, kv_rows, self_rows, S, &mk, weights_out);
    if (o || ctx->status)
        return o ? qkv_linear(ctx, o, m->out_proj_weight, m->out_proj_bias) : NULL;
    if (kv_rows || self_rows) { /* the general path wants each row's keys in its own row */
        const int32_t *rows = kv_rows ? kv_rows : self_rows;
        const int64_t row_sn = kv_rows ? 1 : L, row_sj = kv_rows ? 0 : 1;
        cache_k = gather_rows(ctx, cache_k, rows, row_sn, row_sj, N, S); /* (N, H, S, D) */
        cache_v = gather_rows(ctx, cache_v, rows, row_sn, row_sj, N, S);
        if (!cache_k || !cache_v) return NULL;
    }
    qkv_tensor *k = qkv_narrow(ctx, cache_k, 2, 0, S); /* (N, H, S, D) */
    qkv_tensor *v = qkv_narrow(ctx, cache_v, 2, 0, S); /* (N, H, S, D) */
    return qkv__mha_attend(ctx, m, q, k, v, &mk, t0, weights_out);
}
