/*
 * model.c: encoder-decoder, encoder-only and decoder-only Transformers (qkv_model.h), their
 * parameters, files and forward passes.
 *
 * Dims: B batch, S source length, T target length, C d_model, V vocabulary, K classes.
 */
#include "nn_internal.h"
#include "qkv/qkv_io.h"
#include "qkv/qkv_registry.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- construction --------------------------------------------------------------------------- */

static qkv_layer_config layer_config(const qkv_model_config *c, const qkv_mha_config *self,
                                     const qkv_mha_config *cross) {
    qkv_layer_config lc = qkv_layer_default_config(c->d_model, c->n_heads, c->dim_feedforward);
    lc.norm_first = c->norm_first;
    lc.activation = c->activation;
    lc.dropout = c->dropout;
    lc.layer_norm_eps = c->layer_norm_eps;
    lc.self_attn = *self;
    lc.cross_attn = *cross;
    lc.self_attn.d_model = lc.cross_attn.d_model = c->d_model;
    lc.self_attn.n_heads = lc.cross_attn.n_heads = c->n_heads;
    lc.self_attn.dropout = lc.cross_attn.dropout = c->dropout;
    return lc;
}

static qkv_status add(qkv_model *m, const char *name, int ndim, const int64_t *shape, qkv_tensor **out) {
    return qkv_params_add(m->params, name, ndim, shape, out);
}

static qkv_status register_stack(qkv_model *m, qkv_layer *layers, int n, const char *prefix, bool decoder,
                                 const qkv_layer_config *lc) {
    qkv_status st = QKV_OK;
    for (int i = 0; i < n && !st; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s%d.", prefix, i);
        st = decoder ? qkv_decoder_layer_init(&layers[i], lc, m->params, name)
                     : qkv_encoder_layer_init(&layers[i], lc, m->params, name);
    }
    return st;
}

static qkv_status register_params(qkv_model *m) {
    const qkv_model_config *c = &m->cfg;
    const int64_t C = c->d_model, L = c->max_len;
    const bool ed = c->arch == QKV_ARCH_ENCODER_DECODER;
    qkv_status st = QKV_OK;
    /* names: see qkv_model.h */
    const char *embed = ed ? "src_embed.weight" : "embed.weight";
    const char *pos = ed ? "src_pos.weight" : "pos.weight";
    const int64_t in_vocab = c->arch == QKV_ARCH_DECODER ? c->tgt_vocab : c->src_vocab;
    if (qkv_model_is_image(c)) st = qkv__image_register(m); /* patch_embed.c */
    else st = add(m, embed, 2, (int64_t[]){in_vocab, C}, &m->src_embed);
    if (!st && c->pos == QKV_POS_LEARNED && m->src_embed) st = add(m, pos, 2, (int64_t[]){L, C}, &m->src_pos);
    if (!st) st = qkv__model_features_register(m);
    if (!st && ed && !c->share_embeddings) st = add(m, "tgt_embed.weight", 2, (int64_t[]){c->tgt_vocab, C}, &m->tgt_embed);
    if (!st && ed && c->pos == QKV_POS_LEARNED) st = add(m, "tgt_pos.weight", 2, (int64_t[]){L, C}, &m->tgt_pos);
    const qkv_layer_config enc = layer_config(c, &c->self_attn, &c->cross_attn);
    const char *enc_prefix = ed ? "transformer.encoder.layers." : c->arch == QKV_ARCH_ENCODER ? "encoder.layers." : "layers.";
    if (!st) st = register_stack(m, m->encoder_layers, c->n_encoder_layers, enc_prefix, false, &enc);
    if (!st && ed) {
        const qkv_layer_config dec = layer_config(c, &c->dec_self_attn, &c->cross_attn);
        st = register_stack(m, m->decoder_layers, c->n_decoder_layers, "transformer.decoder.layers.", true, &dec);
    }
    if (!st && c->final_norm) {
        const char *w = ed ? "transformer.encoder.norm.weight" : c->arch == QKV_ARCH_ENCODER ? "encoder.norm.weight" : "norm.weight";
        const char *b = ed ? "transformer.encoder.norm.bias" : c->arch == QKV_ARCH_ENCODER ? "encoder.norm.bias" : "norm.bias";
        st = add(m, w, 1, (int64_t[]){C}, &m->enc_norm_w);
        if (!st) st = add(m, b, 1, (int64_t[]){C}, &m->enc_norm_b);
        if (!st && ed) st = add(m, "transformer.decoder.norm.weight", 1, (int64_t[]){C}, &m->dec_norm_w);
        if (!st && ed) st = add(m, "transformer.decoder.norm.bias", 1, (int64_t[]){C}, &m->dec_norm_b);
    }
    const char *head = ed ? "generator" : c->arch == QKV_ARCH_ENCODER ? "head" : "lm_head";
    char name[64];
    if (!st && !c->tie_embeddings) {
        snprintf(name, sizeof name, "%s.weight", head);
        st = add(m, name, 2, (int64_t[]){c->tgt_vocab, C}, &m->out_w);
    }
    if (!st) {
        snprintf(name, sizeof name, "%s.bias", head);
        st = add(m, name, 1, (int64_t[]){c->tgt_vocab}, &m->out_b);
    }
    if (!st && c->nat) st = qkv__nat_register(m);
    return st;
}

static void init_params(qkv_model *m, uint64_t seed) {
    const qkv_model_config *c = &m->cfg;
    const double C = c->d_model;
    /* embeddings N(0, C^-1/2) (fairseq's choice: unit variance after the sqrt(C) scale) */
    const double embed_std = c->scale_embeddings ? 1 / sqrt(C) : 1.0;
    if (m->src_embed) qkv_init_normal(m->src_embed, 0, embed_std, seed, 1000);
    if (m->patch_w) qkv__image_init(m, seed);
    if (m->tgt_embed && m->tgt_embed != m->src_embed) qkv_init_normal(m->tgt_embed, 0, embed_std, seed, 1001);
    if (m->src_pos) qkv_init_normal(m->src_pos, 0, 0.02, seed, 1002);
    qkv__model_features_init(m, seed);
    if (m->tgt_pos) qkv_init_normal(m->tgt_pos, 0, 0.02, seed, 1003);
    for (int i = 0; i < c->n_encoder_layers; i++) qkv_layer_reset_parameters(&m->encoder_layers[i], seed * 1024 + (uint64_t)i);
    for (int i = 0; i < c->n_decoder_layers; i++)
        qkv_layer_reset_parameters(&m->decoder_layers[i], seed * 1024 + 512 + (uint64_t)i);
    if (c->arch == QKV_ARCH_ENCODER_DECODER) {
        /* nn.Transformer._reset_parameters: xavier-uniform for every matrix inside the stacks */
        for (int64_t i = 0; i < qkv_params_count(m->params); i++) {
            qkv_tensor *t = qkv_params_get(m->params, i);
            if (t->ndim > 1 && !strncmp(t->name, "transformer.", 12)) qkv_init_xavier_uniform(t, seed, 2000 + (uint64_t)i);
        }
    }
    for (qkv_tensor **nw = (qkv_tensor *[]){m->enc_norm_w, m->dec_norm_w}, **end = nw + 2; nw < end; nw++)
        if (*nw) qkv_init_constant(*nw, 1);
    if (m->enc_norm_b) qkv_init_constant(m->enc_norm_b, 0);
    if (m->dec_norm_b) qkv_init_constant(m->dec_norm_b, 0);
    if (m->out_w != m->tgt_embed && m->out_w != m->src_embed)
        qkv_init_uniform(m->out_w, -1 / sqrt(C), 1 / sqrt(C), seed, 1004);
    qkv_init_constant(m->out_b, 0);
    if (c->nat) qkv__nat_init(m, seed);
}

/* The model's structure and parameter block; initialised from seed when init, else left for
 * qkv_model_load to fill (it requires every parameter in the file, so initialising values that
 * are overwritten at once would only cost time: ~0.3 s of every `qkv decode` of a G2P model). */
/* max_numel >= 0: refuse a configuration with more parameter values than that before allocating
 * them (qkv_model_load: the values its file holds, so a header cannot ask for gigabytes). */
static qkv_status model_create(const qkv_model_config *cfg, uint64_t seed, bool init, int64_t max_numel,
                               qkv_model **out) {
    *out = NULL;
    qkv_status st = qkv_model_config_check(cfg);
    if (st) return st;
    qkv_model *m = calloc(1, sizeof *m);
    if (!m) return QKV_ERROR(QKV_ERR_OOM, "qkv_model_new: out of memory");
    m->cfg = *cfg;
    m->encoder_layers = calloc((size_t)cfg->n_encoder_layers + 1, sizeof *m->encoder_layers);
    m->decoder_layers = calloc((size_t)cfg->n_decoder_layers + 1, sizeof *m->decoder_layers);
    st = (!m->encoder_layers || !m->decoder_layers) ? QKV_ERROR(QKV_ERR_OOM, "qkv_model_new: out of memory")
                                                    : qkv_params_new(&m->params);
    if (!st) st = register_params(m);
    if (!st && max_numel >= 0 && qkv_params_numel(m->params) > max_numel)
        st = QKV_ERROR(QKV_ERR_FORMAT,
                       "the configuration describes %lld parameter values but the file holds only %lld",
                       (long long)qkv_params_numel(m->params), (long long)max_numel);
    if (!st) st = qkv_params_finalize(m->params);
    if (st) {
        qkv_model_free(m);
        return st;
    }
    if (cfg->share_embeddings) m->tgt_embed = m->src_embed;
    if (cfg->tie_embeddings) m->out_w = m->tgt_embed ? m->tgt_embed : m->src_embed;
    if (init) init_params(m, seed);
    *out = m;
    return QKV_OK;
}

qkv_status qkv_model_new(const qkv_model_config *cfg, uint64_t seed, qkv_model **out) {
    if (!out) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_model_new: out is NULL");
    return model_create(cfg, seed, true, -1, out);
}

void qkv_model_free(qkv_model *m) {
    if (!m) return;
    qkv_params_free(m->params);
    free(m->encoder_layers);
    free(m->decoder_layers);
    free(m);
}

/* ---- files ---------------------------------------------------------------------------------- */

qkv_status qkv_model_save(const qkv_model *m, const char *path) {
    if (!m || !path) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_model_save: NULL argument");
    char json[4096];
    qkv_status st = qkv_model_config_to_json(&m->cfg, json, sizeof json);
    if (st) return st;
    const char *keys[] = {"qkv.format", "qkv.arch", "qkv.config"};
    const char *values[] = {"1", qkv_registry_name(QKV_REGISTRY_ARCH, m->cfg.arch), json};
    return qkv_params_save(m->params, path, keys, values, 3);
}

qkv_status qkv_model_load(const char *path, qkv_model **out) {
    if (!out || !path) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_model_load: NULL argument");
    *out = NULL;
    qkv_st_file *f = NULL;
    qkv_status st = qkv_st_open(path, &f);
    if (st) return st;
    const char *format = qkv_st_metadata_get(f, "qkv.format");
    const char *json = qkv_st_metadata_get(f, "qkv.config");
    qkv_model_config cfg;
    if (!format || !json)
        st = QKV_ERROR(QKV_ERR_FORMAT, "%s: not a qkv model file (no qkv.format / qkv.config metadata)", path);
    else if (strcmp(format, "1") != 0)
        st = QKV_ERROR(QKV_ERR_FORMAT, "%s: qkv.format %s is not supported by this qkv (1)", path, format);
    else if ((st = qkv_model_config_from_json(json, &cfg)) != QKV_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", qkv_last_error());
        st = QKV_ERROR(st, "%s: %s", path, msg);
    }
    int64_t file_numel = 0; /* every value of every tensor: each <= the file's size */
    for (int64_t i = 0, n = st ? 0 : qkv_st_count(f); i < n; i++) {
        qkv_st_entry e;
        if (qkv_st_get(f, i, &e)) continue;
        const size_t size = qkv_st_dtype_size(e.dtype_name); /* nbytes <= the file's size */
        if (size) file_numel += (int64_t)(e.nbytes / size);
    }
    qkv_st_close(f);
    qkv_model *m = NULL;
    if (!st && (st = model_create(&cfg, 0, false, file_numel, &m)) != QKV_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", qkv_last_error());
        st = QKV_ERROR(st, "%s: %s", path, msg);
    }
    if (!st) st = qkv_params_load(m->params, path);
    if (st) {
        qkv_model_free(m);
        return st;
    }
    *out = m;
    return QKV_OK;
}

/* ---- forward -------------------------------------------------------------------------------- */

/* I32 (B, L): 1 where ids == pad. */
static qkv_tensor *padding_of(qkv_ctx *ctx, const qkv_tensor *ids, int32_t pad) {
    qkv_tensor *mask = qkv__alloc(ctx, QKV_I32, 2, ids->shape);
    if (!mask) return NULL;
    const int32_t *id = qkv__idata(ids);
    int32_t *mk = qkv__idata(mask);
    for (int64_t i = 0, n = qkv_tensor_numel(ids); i < n; i++) mk[i] = id[i] == pad;
    return mask;
}

static bool check_ids(qkv_ctx *ctx, const qkv_model *m, const char *op, qkv_tensor *ids, const char *what) {
    char buf[96];
    if (!qkv__check_i32(ctx, op, ids, what)) return false;
    if (ids->ndim != 2 || ids->shape[0] < 1 || ids->shape[1] < 1) {
        QKV_FAIL(ctx, QKV_ERR_SHAPE, "%s: %s %s is not a (B, L) batch of token ids", op, what,
                 qkv_tensor_shape_str(ids, buf, sizeof buf));
        return false;
    }
    if (ids->shape[1] > m->cfg.max_len) {
        QKV_FAIL(ctx, QKV_ERR_SHAPE, "%s: %s length %lld exceeds the model's max_len %d", op, what,
                 (long long)ids->shape[1], m->cfg.max_len);
        return false;
    }
    return true;
}

/* x (B, L, C), looked-up embeddings -> (* sqrt C) + absolute positions offset .. offset+L-1, then
 * dropout. */
static qkv_tensor *embed_looked_up(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *x, qkv_tensor *pos, int64_t L,
                                   int64_t offset) {
    const qkv_model_config *c = &m->cfg;
    if (c->scale_embeddings) x = qkv_scale(ctx, x, sqrt((double)c->d_model));
    if (c->pos == QKV_POS_SINUSOIDAL) x = qkv_add(ctx, x, qkv_sinusoidal_pe(ctx, L, c->d_model, offset));
    if (c->pos == QKV_POS_LEARNED) x = qkv_add(ctx, x, qkv_embedding(ctx, pos, qkv_arange(ctx, offset, L)));
    return qkv_dropout(ctx, x, c->dropout);
}

/* ids (B, L) -> (B, L, C): embedding (* sqrt C) + absolute positions offset .. offset+L-1, then
 * dropout. */
qkv_tensor *qkv__model_embed(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *table, qkv_tensor *pos, qkv_tensor *ids,
                             int64_t offset) {
    return embed_looked_up(ctx, m, qkv_embedding(ctx, table, ids), pos, ids->shape[1], offset);
}

static qkv_tensor *embed(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *table, qkv_tensor *pos, qkv_tensor *ids) {
    return qkv__model_embed(ctx, m, table, pos, ids, 0);
}

static qkv_tensor *final_norm(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *x, qkv_tensor *w, qkv_tensor *b) {
    return w ? qkv_layernorm(ctx, x, w, b, m->cfg.layer_norm_eps) : x;
}

qkv_tensor *qkv__finite_output(qkv_ctx *ctx, const char *op, qkv_tensor *y) {
    if (!y || qkv_ctx_grad_enabled(ctx) || !qkv_tensor_is_contiguous(y)) return y;
    const qkv_real *x = qkv__data(y);
    const int64_t n = qkv_tensor_numel(y);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad |= x[i] - x[i] != 0; /* NaN for NaN and +-inf */
    if (!bad) return y;
    int64_t i = 0;
    while (x[i] - x[i] == 0) i++;
    char at[160];
    int k = snprintf(at, sizeof at, "(");
    for (int d = 0, rest = 0; d < y->ndim; d++) {
        int64_t stride = 1;
        for (int e = d + 1; e < y->ndim; e++) stride *= y->shape[e];
        rest = snprintf(at + k, sizeof at - (size_t)k, "%s%lld", d ? ", " : "", (long long)(i / stride % y->shape[d]));
        if (rest > 0 && (size_t)(k + rest) < sizeof at) k += rest;
    }
    snprintf(at + k, sizeof at - (size_t)k, ")");
    return QKV_FAIL(ctx, QKV_ERR_NONFINITE,
                    "%s: the output holds %s at %s of a %dD result: the model's weights or configuration "
                    "overflow float arithmetic",
                    op, isnan(x[i]) ? "NaN" : x[i] > 0 ? "+inf" : "-inf", at, y->ndim);
}

qkv_tensor *qkv__model_logits(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *ids, int64_t t0, qkv_tensor *memory,
                              const qkv_layer_cache *caches, const qkv_mask *self_mask, const qkv_mask *cross_mask,
                              qkv_tensor **self_weights_out, qkv_tensor **cross_weights_out) {
    const bool ed = m->cfg.arch == QKV_ARCH_ENCODER_DECODER;
    qkv_tensor *x = ed ? qkv__model_embed(ctx, m, m->tgt_embed, m->tgt_pos, ids, t0)
                       : qkv__model_embed(ctx, m, m->src_embed, m->src_pos, ids, t0); /* (N, T, C) */
    const qkv_layer *layers = ed ? m->decoder_layers : m->encoder_layers; /* decoder-only: held there */
    const int32_t n_layers = ed ? m->cfg.n_decoder_layers : m->cfg.n_encoder_layers;
    for (int32_t i = 0; i < n_layers; i++) {
        qkv_tensor **sw = self_weights_out ? &self_weights_out[i] : NULL;
        qkv_tensor **cw = cross_weights_out ? &cross_weights_out[i] : NULL;
        if (caches)
            x = qkv_layer_step(ctx, &layers[i], x, t0, &caches[i], self_mask, ed ? cross_mask : NULL, sw, cw);
        else if (ed)
            x = qkv_decoder_layer_forward(ctx, &layers[i], x, memory, self_mask, cross_mask, sw, cw);
        else
            x = qkv_encoder_layer_forward(ctx, &layers[i], x, self_mask, sw);
    }
    x = final_norm(ctx, m, x, ed ? m->dec_norm_w : m->enc_norm_w, ed ? m->dec_norm_b : m->enc_norm_b);
    return qkv_linear(ctx, x, m->out_w, m->out_b); /* (N, T, V) */
}

qkv_tensor *qkv__encoder_stack(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *x, const qkv_mask *mask,
                               qkv_tensor **weights_out, const qkv__stage_hook *hook) {
    qkv_mask self = *mask;
    for (int i = 0; i <= m->cfg.n_encoder_layers; i++) {
        if (hook && x && !ctx->status) x = hook->between(hook->user, ctx, x, &self);
        if (i == m->cfg.n_encoder_layers) break;
        x = qkv_encoder_layer_forward(ctx, &m->encoder_layers[i], x, &self, weights_out ? &weights_out[i] : NULL);
    }
    return final_norm(ctx, m, x, m->enc_norm_w, m->enc_norm_b);
}

qkv_tensor *qkv_model_encode(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *src, qkv_tensor **weights_out) {
    if (!QKV_OP_BEGIN(ctx, "model_encode", src)) return NULL;
    if (!m || m->cfg.arch != QKV_ARCH_ENCODER_DECODER)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "model_encode: needs an encoder-decoder model");
    if (!check_ids(ctx, m, "model_encode", src, "src")) return NULL;
    qkv_mask mask = qkv_mask_none();
    mask.key_padding = padding_of(ctx, src, m->cfg.pad_id);
    return qkv__encoder_stack(ctx, m, embed(ctx, m, m->src_embed, m->src_pos, src), &mask, weights_out, NULL);
}

qkv_tensor *qkv_model_decode(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *tgt_in, qkv_tensor *memory,
                             qkv_tensor *src, qkv_tensor **self_weights_out, qkv_tensor **cross_weights_out) {
    if (!QKV_OP_BEGIN(ctx, "model_decode", tgt_in, memory, src)) return NULL;
    if (!m || m->cfg.arch != QKV_ARCH_ENCODER_DECODER)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "model_decode: needs an encoder-decoder model");
    if (!check_ids(ctx, m, "model_decode", tgt_in, "tgt_in") || !check_ids(ctx, m, "model_decode", src, "src"))
        return NULL;
    char b0[96], b1[96];
    if (memory->ndim != 3 || memory->shape[0] != src->shape[0] || memory->shape[1] != src->shape[1] ||
        tgt_in->shape[0] != src->shape[0])
        return QKV_FAIL(ctx, QKV_ERR_SHAPE, "model_decode: memory %s does not match src %s", qkv_tensor_shape_str(memory, b0, sizeof b0),
                        qkv_tensor_shape_str(src, b1, sizeof b1));
    qkv_mask self_mask = qkv_mask_none(), cross_mask = qkv_mask_none();
    self_mask.causal = !m->cfg.nat; /* a non-autoregressive decoder sees every target position */
    self_mask.key_padding = padding_of(ctx, tgt_in, m->cfg.pad_id);
    cross_mask.key_padding = padding_of(ctx, src, m->cfg.pad_id);
    qkv_tensor *logits = qkv__model_logits(ctx, m, tgt_in, 0, memory, NULL, &self_mask, &cross_mask, self_weights_out,
                                           cross_weights_out); /* (B, T, V) */
    return qkv__finite_output(ctx, "model_decode", logits);
}

qkv_tensor *qkv_model_classify(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *src, qkv_tensor **weights_out) {
    return qkv_model_classify_features(ctx, m, src, NULL, weights_out);
}

qkv_tensor *qkv_model_classify_features(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *src, qkv_tensor *features,
                                        qkv_tensor **weights_out) {
    if (!QKV_OP_BEGIN(ctx, "model_classify", src)) return NULL;
    if (!m || m->cfg.arch != QKV_ARCH_ENCODER)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "model_classify: needs an encoder-only model");
    if (qkv_model_is_image(&m->cfg))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "model_classify: an image model reads pixels: call qkv_model_classify_image");
    if (!check_ids(ctx, m, "model_classify", src, "src")) return NULL;
    if ((m->cfg.n_features > 0) != (features != NULL))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "model_classify: the model has %d feature inputs but %s given",
                        m->cfg.n_features, features ? "features were" : "none were");
    qkv_mask mask = qkv_mask_none();
    qkv_tensor *pad = padding_of(ctx, src, m->cfg.pad_id);
    mask.key_padding = pad;
    qkv_tensor *x = qkv_embedding(ctx, m->src_embed, src); /* (B, S, C) */
    if (features) x = qkv_add(ctx, x, qkv__model_features_sum(ctx, m, src, features));
    x = qkv__encoder_stack(ctx, m, embed_looked_up(ctx, m, x, m->src_pos, src->shape[1], 0), &mask, weights_out, NULL);
    if (m->cfg.head == QKV_HEAD_POOLED && x) {
        /* mean over the non-padded positions: (B, 1, S) weights 1/len times x (B, S, C) */
        const int64_t B = src->shape[0], S = src->shape[1];
        qkv_tensor *w = qkv__alloc(ctx, QKV_REAL, 3, (int64_t[]){B, 1, S});
        if (!w) return NULL;
        for (int64_t b = 0; b < B; b++) {
            int64_t len = 0;
            for (int64_t s = 0; s < S; s++) len += !qkv__idata(pad)[b * S + s];
            for (int64_t s = 0; s < S; s++)
                qkv__data(w)[b * S + s] = qkv__idata(pad)[b * S + s] || !len ? 0 : (qkv_real)(1.0 / (double)len);
        }
        x = qkv_reshape(ctx, qkv_matmul(ctx, w, x, false, false), 2, (int64_t[]){B, m->cfg.d_model}); /* (B, C) */
    }
    return qkv__finite_output(ctx, "model_classify", qkv_linear(ctx, x, m->out_w, m->out_b)); /* (B, S, K) or (B, K) */
}

qkv_tensor *qkv_model_classify_image(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *pixels, qkv_tensor **weights_out) {
    if (!QKV_OP_BEGIN(ctx, "model_classify_image", pixels)) return NULL;
    if (!m || !qkv_model_is_image(&m->cfg))
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "model_classify_image: needs an image model (model config \"image\")");
    qkv_mask mask = qkv_mask_none(); /* every image has all its L tokens */
    qkv_tensor *x = qkv__encoder_stack(ctx, m, qkv__image_embed(ctx, m, pixels), &mask, weights_out, NULL); /* (B, L, C) */
    return qkv__finite_output(ctx, "model_classify_image",
                              qkv_linear(ctx, qkv__image_pool(ctx, m, x), m->out_w, m->out_b)); /* (B, K) */
}

qkv_tensor *qkv_model_lm(qkv_ctx *ctx, const qkv_model *m, qkv_tensor *tokens, qkv_tensor **weights_out) {
    if (!QKV_OP_BEGIN(ctx, "model_lm", tokens)) return NULL;
    if (!m || m->cfg.arch != QKV_ARCH_DECODER)
        return QKV_FAIL(ctx, QKV_ERR_INVALID_ARG, "model_lm: needs a decoder-only model");
    if (!check_ids(ctx, m, "model_lm", tokens, "tokens")) return NULL;
    qkv_mask mask = qkv_mask_none();
    mask.causal = true;
    mask.key_padding = padding_of(ctx, tokens, m->cfg.pad_id);
    qkv_tensor *logits = qkv__model_logits(ctx, m, tokens, 0, NULL, NULL, &mask, NULL, weights_out, NULL); /* (B, T, V) */
    return qkv__finite_output(ctx, "model_lm", logits);
}
