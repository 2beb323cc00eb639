/*
 * step.c: one incremental decoder step of a session (qkv_session_step): T new tokens per row at
 * positions t .. t+T-1 -> next-token logits (N, T, V).
 *
 * With the cache (the default) only the new positions run through the decoder:
 *   x = embed(tokens) * sqrt(C) + position(t .. t+T-1)           (qkv__model_embed at offset t)
 *   x = qkv_layer_step(layer_i, x, t, cache_i)    for every decoder layer (encoder-decoder) or
 *                                                 every causal layer (decoder-only)
 *   logits = final_norm(x) W_out^T + b_out
 * Relative encodings see absolute positions through the query offset t (RoPE rotates at t + i,
 * ALiBi / T5 bias rows t + i over keys 0 .. t+i, Shaw distances j - t - i). As in
 * qkv_model_decode / qkv_model_lm, keys whose token is pad_id are masked in self-attention, and
 * source keys equal to pad_id in cross-attention.
 *
 * Without the cache the step re-runs qkv_model_decode (or qkv_model_lm) over all t + T positions
 * fed so far and keeps the last T rows of the logits: the reference the cached step is tested
 * against, and the baseline of bench/bench_decode.c.
 *
 * The step resets the session's arena first, so the logits of the previous step die here and
 * memory stays at the high-water mark measured when the session was created.
 *
 * Dims: N rows, T new positions, t positions already fed, S source length, C d_model, V target
 * vocabulary.
 */
#include "infer_internal.h"

qkv_tensor *dec_padding_of(qkv_ctx *ctx, const int32_t *ids, int64_t n, int64_t len, int64_t ld,
                           int32_t pad) {
    bool any = false;
    for (int64_t r = 0; r < n && !any; r++)
        for (int64_t j = 0; j < len && !any; j++)
            any = ids[r * ld + j] == pad;
    if (!any) return NULL;
    qkv_tensor *mask = qkv__alloc(ctx, QKV_I32, 2, (int64_t[]){n, len});
    if (!mask) return NULL;
    int32_t *mk = qkv__idata(mask);
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < len; j++)
            mk[r * len + j] = ids[r * ld + j] == pad;
    return mask;
}

/* The fed tokens (n, len) as a contiguous I32 step tensor. */
static qkv_tensor *history(qkv_ctx *ctx, const qkv_session *s, int64_t len) {
    qkv_tensor *ids = qkv__alloc(ctx, QKV_I32, 2, (int64_t[]){s->n, len});
    if (!ids) return NULL;
    for (int64_t r = 0; r < s->n; r++)
        memcpy(qkv__idata(ids) + r * len, s->tokens + r * s->L, sizeof(int32_t) * (size_t)len);
    return ids;
}

static qkv_tensor *forward_cached(qkv_session *s, qkv_tensor *ids, int64_t t0, int64_t T) {
    qkv_ctx *ctx = s->ctx;
    const qkv_model *m = s->m;
    const int32_t pad = m->cfg.pad_id;
    const bool ed = s->encoder_decoder;
    qkv_mask self_mask = qkv_mask_none(), cross_mask = qkv_mask_none();
    self_mask.key_padding = dec_padding_of(ctx, s->tokens, s->n, t0 + T, s->L, pad);
    if (ed) cross_mask.key_padding = dec_padding_of(ctx, s->src, s->n, s->S, s->S, pad);
    return qkv__model_logits(ctx, m, ids, t0, NULL, s->caches, &self_mask, &cross_mask, NULL, NULL); /* (N, T, V) */
}

static qkv_tensor *forward_uncached(qkv_session *s, int64_t t0, int64_t T) {
    qkv_ctx *ctx = s->ctx;
    qkv_tensor *tgt = history(ctx, s, t0 + T); /* (N, t0 + T) */
    qkv_tensor *logits;                        /* (N, t0 + T, V) */
    if (s->encoder_decoder) {
        qkv_tensor *src = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){s->n, s->S}, s->src);
        logits = qkv_model_decode(ctx, s->m, tgt, &s->memory_t, src, NULL, NULL);
    } else {
        logits = qkv_model_lm(ctx, s->m, tgt, NULL);
    }
    return qkv_contiguous(ctx, qkv_narrow(ctx, logits, 1, t0, T)); /* (N, T, V) */
}

qkv_tensor *qkv__session_forward(qkv_session *s, const int32_t *tokens, int32_t T) {
    qkv_ctx *ctx = s->ctx;
    qkv_ctx_reset(ctx);
    const int64_t t0 = s->t;
    for (int64_t r = 0; r < s->n; r++) {
        memcpy(s->tokens + r * s->L + t0, tokens + r * T, sizeof(int32_t) * (size_t)T);
        for (int64_t i = 0; i < T; i++) s->self_rows[r * s->L + t0 + i] = (int32_t)r;
    }
    qkv_tensor *logits;
    if (s->n == 0) { /* no rows left: an empty result */
        logits = qkv__alloc(ctx, QKV_REAL, 3, (int64_t[]){0, T, s->m->cfg.tgt_vocab});
    } else if (s->p.use_cache) {
        qkv_tensor *ids = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){s->n, T}, tokens);
        logits = forward_cached(s, ids, t0, T);
    } else {
        logits = forward_uncached(s, t0, T);
    }
    logits = qkv__finite_output(ctx, "decode step", logits); /* (n, T, V) */
    if (qkv_ctx_status(ctx)) return NULL;
    s->t += T;
    return logits;
}

qkv_status qkv_session_step(qkv_session *s, const int32_t *tokens, int32_t T, qkv_tensor **logits) {
    if (logits) *logits = NULL;
    if (!s || !logits || (!tokens && s->n > 0))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_session_step: NULL argument");
    if (!s->started)
        return QKV_ERROR(QKV_ERR_STATE,
                         "qkv_session_step: call qkv_session_encode or qkv_session_start first");
    if (T < 1 || T > s->L - s->t)
        return QKV_ERROR(
            QKV_ERR_SHAPE,
            "qkv_session_step: %d new positions after %d do not fit the session's max_len %lld", T,
            s->t, (long long)s->L);
    const int32_t V = s->m->cfg.tgt_vocab;
    for (int64_t i = 0; i < (int64_t)s->n * T; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return QKV_ERROR(
                QKV_ERR_INVALID_ARG,
                "qkv_session_step: token %d of row %lld is outside the vocabulary (%d)", tokens[i],
                (long long)(i / T), V);
    /* the weight panels from the batch's second step on (positions already fed): a batch of one
     * step never copies */
    s->ctx->backend = s->t > 0 && s->panels ? &s->with_panels : s->backend;
    *logits = qkv__session_forward(s, tokens, T);
    s->ctx->backend = s->backend;
    return *logits ? QKV_OK : qkv_ctx_status(s->ctx);
}
