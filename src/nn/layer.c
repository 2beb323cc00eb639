/*
 * layer.c: the Transformer encoder and decoder layers, post-LN and pre-LN, as
 * torch.nn.TransformerEncoderLayer / TransformerDecoderLayer (parameter names included):
 *
 *   encoder, post-LN:  x = norm1(x + drop(SA(x)));          x = norm2(x + drop(FF(x)))
 *   encoder, pre-LN:   x = x + drop(SA(norm1(x)));          x = x + drop(FF(norm2(x)))
 *   decoder adds       x = norm2(x + drop(CA(x, memory)))   (pre-LN: x + drop(CA(norm2(x), memory)))
 *   and its feed-forward block uses norm3.
 *   FF(x) = linear2(drop(act(linear1(x))))
 *
 * One forward serves the whole sequence (training, evaluation: qkv_encoder_layer_forward,
 * qkv_decoder_layer_forward) and incremental decoding on cached keys and values (qkv_layer_step;
 * a decoder-only LM's stack is encoder layers used causally). Dims: B batch (N decoding rows),
 * T positions, S source length, C d_model.
 */
#include "nn_internal.h"
#include "qkv/qkv_registry.h"

#include <math.h>
#include <stdio.h>

qkv_layer_config qkv_layer_default_config(int32_t d_model, int32_t n_heads, int32_t dim_feedforward) {
    qkv_layer_config c;
    memset(&c, 0, sizeof c);
    c.d_model = d_model;
    c.n_heads = n_heads;
    c.dim_feedforward = dim_feedforward;
    c.norm_first = false;
    c.activation = QKV_ACT_RELU;
    c.dropout = 0.1;
    c.layer_norm_eps = 1e-5;
    c.self_attn = qkv_mha_default_config(d_model, n_heads);
    c.cross_attn = qkv_mha_default_config(d_model, n_heads);
    c.self_attn.dropout = c.cross_attn.dropout = c.dropout; /* torch passes its dropout to MHA */
    return c;
}

static qkv_status layer_init(qkv_layer *l, const qkv_layer_config *cfg, qkv_params *p, const char *prefix,
                             bool decoder) {
    if (!l || !cfg || !p) return QKV_ERROR(QKV_ERR_INVALID_ARG, "layer_init: NULL argument");
    memset(l, 0, sizeof *l);
    const int64_t C = cfg->d_model, F = cfg->dim_feedforward;
    if (C <= 0 || F <= 0 || cfg->self_attn.d_model != C || (decoder && cfg->cross_attn.d_model != C))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "layer_init: d_model %lld / dim_feedforward %lld / attention widths disagree",
                         (long long)C, (long long)F);
    if (!(cfg->dropout >= 0 && cfg->dropout < 1) || !(cfg->layer_norm_eps > 0) ||
        !qkv_registry_name(QKV_REGISTRY_ACTIVATION, cfg->activation))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "layer_init: bad dropout %g, layer_norm_eps %g or activation %d",
                         cfg->dropout, cfg->layer_norm_eps, (int)cfg->activation);
    l->cfg = *cfg;
    l->decoder = decoder;
    char sub[256];
    snprintf(sub, sizeof sub, "%sself_attn.", prefix ? prefix : "");
    qkv_status st = qkv_mha_init(&l->self_attn, &cfg->self_attn, p, sub);
    if (!st && decoder) {
        snprintf(sub, sizeof sub, "%smultihead_attn.", prefix ? prefix : "");
        st = qkv_mha_init(&l->cross_attn, &cfg->cross_attn, p, sub);
    }
    if (!st) st = qkv__params_add_prefixed(p, prefix, "linear1.weight", 2, (const int64_t[]){F, C}, &l->linear1_weight);
    if (!st) st = qkv__params_add_prefixed(p, prefix, "linear1.bias", 1, (const int64_t[]){F}, &l->linear1_bias);
    if (!st) st = qkv__params_add_prefixed(p, prefix, "linear2.weight", 2, (const int64_t[]){C, F}, &l->linear2_weight);
    if (!st) st = qkv__params_add_prefixed(p, prefix, "linear2.bias", 1, (const int64_t[]){C}, &l->linear2_bias);
    for (int i = 0; i < (decoder ? 3 : 2) && !st; i++) {
        char name[32];
        snprintf(name, sizeof name, "norm%d.weight", i + 1);
        st = qkv__params_add_prefixed(p, prefix, name, 1, (const int64_t[]){C}, &l->norm_weight[i]);
        snprintf(name, sizeof name, "norm%d.bias", i + 1);
        if (!st) st = qkv__params_add_prefixed(p, prefix, name, 1, (const int64_t[]){C}, &l->norm_bias[i]);
    }
    return st;
}

qkv_status qkv_encoder_layer_init(qkv_layer *l, const qkv_layer_config *cfg, qkv_params *p, const char *prefix) {
    return layer_init(l, cfg, p, prefix, false);
}

qkv_status qkv_decoder_layer_init(qkv_layer *l, const qkv_layer_config *cfg, qkv_params *p, const char *prefix) {
    return layer_init(l, cfg, p, prefix, true);
}

void qkv_layer_reset_parameters(qkv_layer *l, uint64_t seed) {
    qkv_mha_reset_parameters(&l->self_attn, seed * 16 + 1);
    if (l->decoder) qkv_mha_reset_parameters(&l->cross_attn, seed * 16 + 2);
    const double a1 = 1 / sqrt((double)l->cfg.d_model), a2 = 1 / sqrt((double)l->cfg.dim_feedforward);
    qkv_init_uniform(l->linear1_weight, -a1, a1, seed * 16 + 3, 0);
    qkv_init_uniform(l->linear1_bias, -a1, a1, seed * 16 + 3, 1);
    qkv_init_uniform(l->linear2_weight, -a2, a2, seed * 16 + 4, 0);
    qkv_init_uniform(l->linear2_bias, -a2, a2, seed * 16 + 4, 1);
    for (int i = 0; i < 3; i++) {
        if (l->norm_weight[i]) qkv_init_constant(l->norm_weight[i], 1);
        if (l->norm_bias[i]) qkv_init_constant(l->norm_bias[i], 0);
    }
}

static qkv_tensor *norm(qkv_ctx *ctx, const qkv_layer *l, int i, qkv_tensor *x) {
    return qkv_layernorm(ctx, x, l->norm_weight[i], l->norm_bias[i], l->cfg.layer_norm_eps);
}

qkv_tensor *qkv__layer_feed_forward(qkv_ctx *ctx, const qkv_layer *l, qkv_tensor *x) {
    qkv_tensor *h = NULL; /* (B, T, F) */
    switch (l->cfg.activation) {
    case QKV_ACT_RELU: /* fused, the bits of linear + relu + dropout without the pre-activation */
        h = qkv_linear_relu_dropout(ctx, x, l->linear1_weight, l->linear1_bias, l->cfg.dropout);
        break;
    case QKV_ACT_GELU:
        h = qkv_gelu(ctx, qkv_linear(ctx, x, l->linear1_weight, l->linear1_bias), QKV_GELU_ERF);
        h = qkv_dropout(ctx, h, l->cfg.dropout);
        break;
    case QKV_ACT_GELU_TANH:
        h = qkv_gelu(ctx, qkv_linear(ctx, x, l->linear1_weight, l->linear1_bias), QKV_GELU_TANH);
        h = qkv_dropout(ctx, h, l->cfg.dropout);
        break;
    }
    return qkv_linear(ctx, h, l->linear2_weight, l->linear2_bias); /* (B, T, C) */
}

/* One residual sub-layer: post-LN norm(x + drop(f(x))) or pre-LN x + drop(f(norm(x))). */
typedef enum { SUB_SELF, SUB_CROSS, SUB_FF } sublayer;

/* What a layer attends with: the whole sequence (cache NULL: qkv_mha_forward over x and memory),
 * or the positions t0 .. t0+T-1 of an incremental decode on the cached keys and values
 * (qkv__mha_step_rows). */
typedef struct {
    qkv_tensor *memory; /* (B, S, C), decoder layers without a cache */
    const qkv_layer_cache *cache;
    int64_t t0;
    const qkv_mask *self_mask, *cross_mask;
    qkv_tensor **self_weights, **cross_weights;
} layer_inputs;

static qkv_tensor *sublayer_output(qkv_ctx *ctx, const qkv_layer *l, sublayer kind, qkv_tensor *in,
                                   const layer_inputs *a) {
    const qkv_layer_cache *c = a->cache;
    switch (kind) {
    case SUB_SELF:
        if (c)
            return qkv__mha_step_rows(ctx, &l->self_attn, in, c->self_k, c->self_v, NULL, c->self_rows, a->t0, true,
                                      a->self_mask, a->self_weights);
        return qkv_mha_forward(ctx, &l->self_attn, in, in, in, a->self_mask, a->self_weights);
    case SUB_CROSS:
        if (c)
            return qkv__mha_step_rows(ctx, &l->cross_attn, in, c->cross_k, c->cross_v, c->cross_rows, NULL, a->t0,
                                      false, a->cross_mask, a->cross_weights);
        return qkv_mha_forward(ctx, &l->cross_attn, in, a->memory, a->memory, a->cross_mask, a->cross_weights);
    case SUB_FF: return qkv__layer_feed_forward(ctx, l, in);
    }
    return NULL;
}

static qkv_tensor *residual(qkv_ctx *ctx, const qkv_layer *l, int norm_index, sublayer kind, qkv_tensor *x,
                            const layer_inputs *a) {
    qkv_tensor *in = l->cfg.norm_first ? norm(ctx, l, norm_index, x) : x;
    qkv_tensor *f = sublayer_output(ctx, l, kind, in, a);
    /* x + drop(f), the bits of the pair, over f's storage (f, a linear's output, is not read
     * again); post-LN: its norm too, in the same pass where nothing needs a gradient */
    if (l->cfg.norm_first) return qkv__add_dropout_over(ctx, x, f, l->cfg.dropout);
    return qkv__add_layernorm_over(ctx, x, f, l->cfg.dropout, l->norm_weight[norm_index],
                                   l->norm_bias[norm_index], l->cfg.layer_norm_eps);
}

/* The layer: self-attention, cross-attention (decoder layers), feed-forward. The one forward of
 * training, evaluation and incremental decoding: every operation acts row-wise except attention,
 * so with caches holding positions 0 .. t0-1 the rows t0 .. t0+T-1 are those of the forward over
 * the whole sequence, bit for bit. */
static qkv_tensor *layer_forward(qkv_ctx *ctx, const qkv_layer *l, qkv_tensor *x, const layer_inputs *a) {
    int i = 0;
    x = residual(ctx, l, i++, SUB_SELF, x, a);
    if (l->decoder) x = residual(ctx, l, i++, SUB_CROSS, x, a);
    return residual(ctx, l, i, SUB_FF, x, a);
}

qkv_tensor *qkv_encoder_layer_forward(qkv_ctx *ctx, const qkv_layer *l, qkv_tensor *x, const qkv_mask *self_mask,
                                      qkv_tensor **self_weights) {
    if (!QKV_OP_BEGIN(ctx, "encoder_layer", x)) return NULL;
    if (!l || l->decoder || !l->linear1_weight)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "encoder_layer: not an initialised encoder layer");
    const layer_inputs a = {.self_mask = self_mask, .self_weights = self_weights};
    return layer_forward(ctx, l, x, &a);
}

qkv_tensor *qkv_decoder_layer_forward(qkv_ctx *ctx, const qkv_layer *l, qkv_tensor *x, qkv_tensor *memory,
                                      const qkv_mask *self_mask, const qkv_mask *cross_mask, qkv_tensor **self_weights,
                                      qkv_tensor **cross_weights) {
    if (!QKV_OP_BEGIN(ctx, "decoder_layer", x, memory)) return NULL;
    if (!l || !l->decoder) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "decoder_layer: not an initialised decoder layer");
    const layer_inputs a = {memory, NULL, 0, self_mask, cross_mask, self_weights, cross_weights};
    return layer_forward(ctx, l, x, &a);
}

qkv_tensor *qkv_layer_step(qkv_ctx *ctx, const qkv_layer *l, qkv_tensor *x, int64_t t0, const qkv_layer_cache *cache,
                           const qkv_mask *self_mask, const qkv_mask *cross_mask, qkv_tensor **self_weights,
                           qkv_tensor **cross_weights) {
    if (self_weights) *self_weights = NULL;
    if (cross_weights) *cross_weights = NULL;
    if (!QKV_OP_BEGIN(ctx, "layer_step", x)) return NULL;
    if (!l || !l->linear1_weight) return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "layer_step: layer is not initialised");
    if (!cache || !cache->self_k || !cache->self_v || (l->decoder && (!cache->cross_k || !cache->cross_v)))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "layer_step: missing cache tensors (%s layer)",
                        l->decoder ? "decoder" : "encoder");
    const layer_inputs a = {NULL, cache, t0, self_mask, cross_mask, self_weights, cross_weights};
    x = layer_forward(ctx, l, x, &a);
    if (ctx->status) {
        if (self_weights) *self_weights = NULL;
        if (cross_weights) *cross_weights = NULL;
    }
    return x;
}
