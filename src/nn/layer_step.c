/*
 * layer_step.c: one incremental decoding step of a Transformer layer (qkv_layer_step): the same
 * residual blocks as layer.c, with the attention sub-layers running qkv_mha_step on the layer's
 * caches:
 *
 *   post-LN:  x = norm1(x + SA_step(x));  [x = norm2(x + CA_step(x))];  x = normF(x + FF(x))
 *   pre-LN:   x = x + SA_step(norm1(x));  [x = x + CA_step(norm2(x))];  x = x + FF(normF(x))
 *
 * (the bracket for decoder layers; normF is norm3 in decoder layers, norm2 in encoder layers).
 * Every operation acts row-wise except attention, so rows t0 .. t0+T-1 of the full forward are
 * reproduced exactly when the caches hold positions 0 .. t0-1.
 *
 * Dims: N rows, T new positions, C d_model.
 */
#include "nn_internal.h"

static qkv_tensor *norm(qkv_ctx *ctx, const qkv_layer *l, int i, qkv_tensor *x) {
    return qkv_layernorm(ctx, x, l->norm_weight[i], l->norm_bias[i], l->cfg.layer_norm_eps);
}

/* The input of sub-layer i: norm_i(x) in pre-LN, x in post-LN. */
static qkv_tensor *block_in(qkv_ctx *ctx, const qkv_layer *l, int i, qkv_tensor *x) {
    return l->cfg.norm_first ? norm(ctx, l, i, x) : x;
}

/* The residual sum of sub-layer i with output f (a linear's, not read again): x + drop(f), then
 * norm_i in post-LN, in one pass per row where nothing needs a gradient. */
static qkv_tensor *block_out(qkv_ctx *ctx, const qkv_layer *l, int i, qkv_tensor *x,
                             qkv_tensor *f) {
    if (l->cfg.norm_first) return qkv_add_dropout(ctx, x, f, l->cfg.dropout);
    return qkv__add_layernorm_over(ctx, x, f, l->cfg.dropout, l->norm_weight[i], l->norm_bias[i],
                                   l->cfg.layer_norm_eps);
}

qkv_tensor *qkv_layer_step(qkv_ctx *ctx, const qkv_layer *l, qkv_tensor *x, int64_t t0,
                           const qkv_layer_cache *cache, const qkv_mask *self_mask,
                           const qkv_mask *cross_mask, qkv_tensor **self_weights,
                           qkv_tensor **cross_weights) {
    if (self_weights) *self_weights = NULL;
    if (cross_weights) *cross_weights = NULL;
    if (!QKV_OP_BEGIN(ctx, "layer_step", x)) return NULL;
    if (!l || !l->linear1_weight)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "layer_step: layer is not initialised");
    if (!cache || !cache->self_k || !cache->self_v ||
        (l->decoder && (!cache->cross_k || !cache->cross_v)))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "layer_step: missing cache tensors (%s layer)",
                        l->decoder ? "decoder" : "encoder");
    int i = 0;
    qkv_tensor *f = qkv__mha_step_rows(ctx, &l->self_attn, block_in(ctx, l, i, x), cache->self_k,
                                       cache->self_v, NULL, cache->self_rows, t0, true, self_mask,
                                       self_weights);
    x = block_out(ctx, l, i++, x, f);
    if (l->decoder) {
        f = qkv__mha_step_rows(ctx, &l->cross_attn, block_in(ctx, l, i, x), cache->cross_k,
                               cache->cross_v, cache->cross_rows, NULL, t0, false, cross_mask,
                               cross_weights);
        x = block_out(ctx, l, i++, x, f);
    }
    f = qkv__layer_feed_forward(ctx, l, block_in(ctx, l, i, x));
    x = block_out(ctx, l, i, x, f);
    if (ctx->status) {
        if (self_weights) *self_weights = NULL;
        if (cross_weights) *cross_weights = NULL;
    }
    return x;
}
