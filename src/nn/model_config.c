/*
 * model_config.c: model configuration defaults, validation and JSON (de)serialisation. The JSON
 * goes into the "qkv.config" metadata of model files so a file describes its own architecture.
 */
#include "../io/json.h"
#include "nn_internal.h"
#include "qkv/qkv_registry.h"

#include <errno.h>
#include <stdlib.h>

qkv_model_config qkv_model_default_config(qkv_arch arch, int32_t d_model, int32_t n_heads, int32_t n_layers) {
    qkv_model_config c;
    memset(&c, 0, sizeof c);
    c.arch = arch;
    c.d_model = d_model;
    c.n_heads = n_heads;
    c.dim_feedforward = 4 * d_model;
    c.n_encoder_layers = arch == QKV_ARCH_DECODER ? 0 : n_layers;
    c.n_decoder_layers = arch == QKV_ARCH_ENCODER_DECODER || arch == QKV_ARCH_DECODER ? n_layers : 0;
    if (arch == QKV_ARCH_DECODER) { /* the decoder-only stack is held in encoder_layers */
        c.n_encoder_layers = n_layers;
        c.n_decoder_layers = 0;
    }
    c.max_len = 512;
    c.pos = QKV_POS_SINUSOIDAL;
    c.scale_embeddings = true;
    c.norm_first = false;
    c.final_norm = true;
    c.tie_embeddings = false;
    c.share_embeddings = false;
    c.activation = QKV_ACT_RELU;
    c.dropout = 0.1;
    c.layer_norm_eps = 1e-5;
    c.head = QKV_HEAD_TOKEN;
    c.pad_id = 0;
    c.bos_id = 2; /* QKV_VOCAB_BOS, QKV_VOCAB_EOS */
    c.eos_id = 3;
    c.self_attn = qkv_mha_default_config(d_model, n_heads);
    c.dec_self_attn = qkv_mha_default_config(d_model, n_heads);
    c.dec_self_attn.relpos_bidirectional = false;
    c.cross_attn = qkv_mha_default_config(d_model, n_heads);
    if (arch == QKV_ARCH_DECODER) c.self_attn.relpos_bidirectional = false;
    c.nat = false;
    c.mask_id = -1;
    return c;
}

#define BAD(...) QKV_ERROR(QKV_ERR_INVALID_ARG, "model config: " __VA_ARGS__)

/* Upper bounds far past any model this library trains, low enough that no size computed from
 * them overflows: width, feed-forward width, vocabularies (and feature tables). */
enum { MAX_WIDTH = 1 << 16, MAX_FEEDFORWARD = 1 << 20, MAX_VOCAB = 1 << 24 };

bool qkv_model_is_image(const qkv_model_config *c) {
    if (!c) return false;
    const qkv_image_config *i = &c->image;
    return i->height || i->width || i->channels || i->patch_size || i->class_token;
}

qkv_model_config qkv_model_image_config(int32_t height, int32_t width, int32_t channels, int32_t patch_size,
                                        int32_t n_classes, int32_t d_model, int32_t n_heads, int32_t n_layers) {
    qkv_model_config c = qkv_model_default_config(QKV_ARCH_ENCODER, d_model, n_heads, n_layers);
    c.tgt_vocab = n_classes;
    c.head = QKV_HEAD_POOLED;
    c.pos = QKV_POS_LEARNED;
    c.scale_embeddings = false;
    c.norm_first = true;
    c.activation = QKV_ACT_GELU;
    c.image = (qkv_image_config){height, width, channels, patch_size, 0, true};
    if (patch_size > 0 && height > 0 && width > 0) { /* max_len: exactly the tokens of an image */
        const int64_t n = 1 + (int64_t)(height / patch_size) * (width / patch_size);
        if (n <= 1 << 20) c.max_len = (int32_t)n;
    }
    return c;
}

int32_t qkv_image_config_window(const qkv_image_config *im) {
    return im->window ? im->window : im->patch_size;
}

/* The image front-end's rules (src/nn/patch_embed.c). */
static qkv_status check_image(const qkv_model_config *c) {
    const qkv_image_config *i = &c->image;
    const int32_t lim = 1 << 16;
    if (c->arch != QKV_ARCH_ENCODER) return BAD("image input needs an encoder-only model (arch \"encoder\")");
    if (i->height < 1 || i->width < 1 || i->channels < 1 || i->patch_size < 1 || i->height > lim ||
        i->width > lim || i->channels > lim || i->patch_size > lim)
        return BAD("image height %d, width %d, channels %d and patch_size %d must be in 1 .. %d", i->height, i->width,
                   i->channels, i->patch_size, lim);
    if (i->height % i->patch_size || i->width % i->patch_size)
        return BAD("image %d x %d is not divisible into %d x %d patches (patch_size)", i->height, i->width,
                   i->patch_size, i->patch_size);
    const int32_t K = qkv_image_config_window(i), P = i->patch_size;
    if (K < P || (K - P) % 2 || K > 3 * P)
        return BAD("image window %d must be at least patch_size %d, exceed it by an even number (a window centred on "
                   "its patch) and by at most twice it (3 x patch_size)",
                   K, P);
    const int64_t token_dim = (int64_t)K * K * i->channels;
    if (token_dim > 1 << 24)
        return BAD("image tokens of %lld values (%s %d x %d x %d) are too large (at most 2^24)", (long long)token_dim,
                   K == P ? "patches" : "windows", K, K, i->channels);
    const int64_t n = (int64_t)(i->height / i->patch_size) * (i->width / i->patch_size) + i->class_token;
    if (n > c->max_len)
        return BAD("max_len %d is smaller than the %lld tokens of an image (%lld patches%s)", c->max_len, (long long)n,
                   (long long)(n - i->class_token), i->class_token ? " + [CLS]" : "");
    if (c->src_vocab != 0) return BAD("an image model has no input vocabulary: src_vocab must be 0, got %d", c->src_vocab);
    if (c->head != QKV_HEAD_POOLED) return BAD("an image model classifies whole images: head must be \"pooled\"");
    if (c->scale_embeddings) return BAD("an image model does not scale its patch embeddings: set scale_embeddings false");
    if (c->pos == QKV_POS_SINCOS_2D && c->d_model % 4)
        return BAD("pos sincos_2d needs d_model %d to be a multiple of 4", c->d_model);
    return QKV_OK;
}

qkv_status qkv_model_config_check(const qkv_model_config *c) {
    if (!c) return BAD("NULL");
    if (!qkv_registry_name(QKV_REGISTRY_ARCH, c->arch)) return BAD("unknown arch %d", (int)c->arch);
    if (c->d_model <= 0 || c->n_heads <= 0 || c->d_model % c->n_heads || c->d_model > MAX_WIDTH)
        return BAD("d_model %d must be a positive multiple of n_heads %d, at most %d", c->d_model, c->n_heads,
                   MAX_WIDTH);
    if (c->dim_feedforward <= 0 || c->dim_feedforward > MAX_FEEDFORWARD)
        return BAD("dim_feedforward %d is not in [1, %d]", c->dim_feedforward, MAX_FEEDFORWARD);
    if (c->n_encoder_layers < 0 || c->n_decoder_layers < 0 || c->n_encoder_layers > 1000 || c->n_decoder_layers > 1000)
        return BAD("layer counts %d / %d out of range", c->n_encoder_layers, c->n_decoder_layers);
    if (c->arch == QKV_ARCH_ENCODER_DECODER && (c->n_encoder_layers < 1 || c->n_decoder_layers < 1))
        return BAD("an encoder-decoder needs at least one encoder and one decoder layer");
    if (c->arch != QKV_ARCH_ENCODER_DECODER && (c->n_encoder_layers < 1 || c->n_decoder_layers != 0))
        return BAD("encoder-only and decoder-only models use n_encoder_layers >= 1 and n_decoder_layers = 0");
    const bool image = qkv_model_is_image(c);
    if ((c->src_vocab <= 0 && c->arch != QKV_ARCH_DECODER && !image) || c->src_vocab > MAX_VOCAB || c->src_vocab < 0)
        return BAD("src_vocab %d is not in [1, %d]", c->src_vocab, MAX_VOCAB);
    if (c->tgt_vocab <= 0 || c->tgt_vocab > MAX_VOCAB) return BAD("tgt_vocab %d is not in [1, %d]", c->tgt_vocab, MAX_VOCAB);
    if (c->max_len <= 0 || c->max_len > (1 << 20)) return BAD("max_len %d out of range", c->max_len);
    if (!qkv_registry_name(QKV_REGISTRY_POS, c->pos)) return BAD("unknown positional encoding %d", (int)c->pos);
    if (!qkv_registry_name(QKV_REGISTRY_ACTIVATION, c->activation))
        return BAD("unknown activation %d", (int)c->activation);
    if (!qkv_registry_name(QKV_REGISTRY_HEAD, c->head)) return BAD("unknown head %d", (int)c->head);
    if (!(c->dropout >= 0 && c->dropout < 1)) return BAD("dropout %g is not in [0, 1)", c->dropout);
    if (!(c->layer_norm_eps > 0 && c->layer_norm_eps <= 1)) return BAD("layer_norm_eps %g is not in (0, 1]", c->layer_norm_eps);
    const int32_t pad_vocab = c->arch == QKV_ARCH_ENCODER_DECODER || c->arch == QKV_ARCH_DECODER ? c->tgt_vocab : c->src_vocab;
    if (!image && c->image.window) return BAD("image.window %d is set on a model that reads tokens, not images", c->image.window);
    if (image) {
        qkv_status st = check_image(c);
        if (st) return st;
    } else if (c->pos == QKV_POS_SINCOS_2D) {
        return BAD("pos sincos_2d is for image models (set image.height, width, channels, patch_size)");
    }
    if (!image && (c->pad_id < 0 || c->pad_id >= pad_vocab))
        return BAD("pad_id %d outside the %s vocabulary (%d)", c->pad_id,
                   c->arch == QKV_ARCH_ENCODER ? "source" : "target", pad_vocab);
    /* an encoder-decoder pads its sources with the same id */
    if (c->arch == QKV_ARCH_ENCODER_DECODER && c->pad_id >= c->src_vocab)
        return BAD("pad_id %d outside the source vocabulary (%d)", c->pad_id, c->src_vocab);
    const int32_t special[2] = {c->bos_id, c->eos_id}; /* -1: not recorded (older model files) */
    for (int k = 0; k < 2 && c->arch != QKV_ARCH_ENCODER; k++)
        if (special[k] < -1 || special[k] >= c->tgt_vocab || special[k] == c->pad_id)
            return BAD("bos_id %d and eos_id %d must be target ids in 0 .. %d other than pad_id %d (-1: not "
                       "recorded)",
                       c->bos_id, c->eos_id, c->tgt_vocab - 1, c->pad_id);
    if (c->tie_embeddings && c->arch == QKV_ARCH_ENCODER) return BAD("tie_embeddings needs a decoder (the head predicts classes)");
    if (c->share_embeddings && (c->arch != QKV_ARCH_ENCODER_DECODER || c->src_vocab != c->tgt_vocab))
        return BAD("share_embeddings needs an encoder-decoder with one vocabulary (src_vocab %d, tgt_vocab %d)",
                   c->src_vocab, c->tgt_vocab);
    if (c->n_features < 0 || c->n_features > QKV_MODEL_MAX_FEATURES)
        return BAD("n_features %d is not in [0, %d]", c->n_features, QKV_MODEL_MAX_FEATURES);
    if (c->n_features > 0 && c->arch != QKV_ARCH_ENCODER) return BAD("feature inputs need an encoder-only model");
    for (int k = 0; k < c->n_features; k++)
        if (c->feature_vocab[k] <= 0 || c->feature_vocab[k] > MAX_VOCAB)
            return BAD("feature_vocab[%d] = %d is not in [1, %d]", k, c->feature_vocab[k], MAX_VOCAB);
    const qkv_mha_config *attn[3] = {&c->self_attn, &c->dec_self_attn, &c->cross_attn};
    static const char *const attn_who[3] = {"model config: self_attn", "model config: dec_self_attn",
                                            "model config: cross_attn"};
    for (int i = 0; i < 3; i++) {
        qkv_mha_config a = *attn[i]; /* the layers take the model's width and heads (model.c) */
        a.d_model = c->d_model;
        a.n_heads = c->n_heads;
        a.dropout = 0;
        qkv_status st = qkv__mha_config_check(&a, attn_who[i]);
        if (st) return st;
    }
    if (c->nat && c->arch != QKV_ARCH_ENCODER_DECODER)
        return BAD("nat (non-autoregressive decoding) needs an encoder-decoder model, not %s",
                   c->arch == QKV_ARCH_ENCODER ? "an encoder-only one" : "a decoder-only one");
    if (c->nat && (c->mask_id < 0 || c->mask_id >= c->tgt_vocab || c->mask_id == c->pad_id))
        return BAD("nat: mask_id %d must be a target id in 0 .. %d other than pad_id %d", c->mask_id, c->tgt_vocab - 1,
                   c->pad_id);
    if (!c->nat && c->mask_id != -1) return BAD("mask_id %d is set but nat is false (-1 when not nat)", c->mask_id);
    /* The first mask-predict pass feeds mask_id at every position: without absolute positions or
     * Shaw's relative values, every value vector is the same and so is every position's output. */
    if (c->nat && c->pos == QKV_POS_NONE && c->dec_self_attn.relpos != QKV_RELPOS_SHAW)
        return BAD("nat needs absolute positions (pos sinusoidal or learned) or Shaw relative positions in "
                   "dec_self_attn: from an all-mask input the decoder could not tell the positions apart");
    return QKV_OK;
}

/* ---- JSON ----------------------------------------------------------------------------------- */

/* The name of a checked configuration's enum value (qkv_registry.h). */
#define NAME(registry, value) qkv_registry_name(QKV_REGISTRY_##registry, (int)(value))

typedef struct {
    char *buf;
    size_t size, used;
    bool overflow;
} writer;

static void put(writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(writer *w, const char *fmt, ...) {
    if (w->overflow) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(w->buf + w->used, w->size - w->used, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= w->size - w->used) w->overflow = true;
    else w->used += (size_t)n;
}

static void put_attn(writer *w, const char *name, const qkv_mha_config *a) {
    put(w, ",\"%s\":{\"score\":\"%s\",\"norm\":\"%s\",\"bias\":%s,\"cos_scale_learnable\":%s,\"cos_scale_init\":%.17g,"
           "\"additive_dim\":%d,\"relpos\":\"%s\",\"relpos_max_distance\":%d,\"relpos_buckets\":%d,"
           "\"relpos_bidirectional\":%s,\"rope_base\":%.17g,\"use_fused\":%s,\"fused_always\":%s}",
        name, NAME(SCORE, a->score), NAME(NORM, a->norm), a->bias ? "true" : "false",
        a->cos_scale_learnable ? "true" : "false", a->cos_scale_init, a->additive_dim, NAME(RELPOS, a->relpos),
        a->relpos_max_distance, a->relpos_buckets, a->relpos_bidirectional ? "true" : "false", a->rope_base,
        a->use_fused ? "true" : "false", a->fused_always ? "true" : "false");
}

qkv_status qkv_model_config_to_json(const qkv_model_config *c, char *buf, size_t size) {
    qkv_status st = qkv_model_config_check(c);
    if (st) return st;
    if (!buf || size == 0) return QKV_ERROR(QKV_ERR_INVALID_ARG, "model config: no output buffer");
    writer w = {buf, size, 0, false};
    put(&w, "{\"arch\":\"%s\",\"src_vocab\":%d,\"tgt_vocab\":%d,\"d_model\":%d,\"n_heads\":%d,\"dim_feedforward\":%d,"
            "\"n_encoder_layers\":%d,\"n_decoder_layers\":%d,\"max_len\":%d,\"pos\":\"%s\",\"scale_embeddings\":%s,"
            "\"norm_first\":%s,\"final_norm\":%s,\"tie_embeddings\":%s,\"activation\":\"%s\",\"dropout\":%.17g,"
            "\"layer_norm_eps\":%.17g,\"head\":\"%s\",\"pad_id\":%d",
        NAME(ARCH, c->arch), c->src_vocab, c->tgt_vocab, c->d_model, c->n_heads, c->dim_feedforward, c->n_encoder_layers,
        c->n_decoder_layers, c->max_len, NAME(POS, c->pos), c->scale_embeddings ? "true" : "false",
        c->norm_first ? "true" : "false", c->final_norm ? "true" : "false", c->tie_embeddings ? "true" : "false",
        NAME(ACTIVATION, c->activation), c->dropout, c->layer_norm_eps, NAME(HEAD, c->head), c->pad_id);
    if (c->share_embeddings) put(&w, ",\"share_embeddings\":true"); /* only then: older models keep their JSON */
    put_attn(&w, "self_attn", &c->self_attn);
    put_attn(&w, "dec_self_attn", &c->dec_self_attn);
    put_attn(&w, "cross_attn", &c->cross_attn);
    if (qkv_model_is_image(c)) { /* "window" only when the tokens overlap: plain patch models keep their JSON */
        put(&w, ",\"image\":{\"height\":%d,\"width\":%d,\"channels\":%d,\"patch_size\":%d,", c->image.height,
            c->image.width, c->image.channels, c->image.patch_size);
        if (qkv_image_config_window(&c->image) != c->image.patch_size) put(&w, "\"window\":%d,", c->image.window);
        put(&w, "\"class_token\":%s}", c->image.class_token ? "true" : "false");
    }
    if (c->arch != QKV_ARCH_ENCODER && c->bos_id >= 0) put(&w, ",\"bos_id\":%d", c->bos_id);
    if (c->arch != QKV_ARCH_ENCODER && c->eos_id >= 0) put(&w, ",\"eos_id\":%d", c->eos_id);
    if (c->nat) put(&w, ",\"nat\":true,\"mask_id\":%d", c->mask_id); /* absent: autoregressive */
    if (c->n_features > 0) { /* absent without features: files stay as they were */
        put(&w, ",\"features\":[");
        for (int k = 0; k < c->n_features; k++) put(&w, "%s%d", k ? "," : "", c->feature_vocab[k]);
        put(&w, "]");
    }
    put(&w, "}");
    if (w.overflow) return QKV_ERROR(QKV_ERR_INVALID_ARG, "model config: JSON does not fit in %zu bytes", size);
    return QKV_OK;
}

/* Readers for one member; each fails with a message naming the key. */
static qkv_status get_int(const qkv_json_value *v, const char *key, int32_t *out) {
    if (v->type != QKV_JSON_INT || v->magnitude > INT32_MAX)
        return BAD("\"%s\" must be an integer of at most 2^31-1", key);
    *out = v->negative ? -(int32_t)v->magnitude : (int32_t)v->magnitude;
    return QKV_OK;
}
static qkv_status get_double(const qkv_json_value *v, const char *key, double *out) {
    if (v->type == QKV_JSON_INT) {
        *out = v->negative ? -(double)v->magnitude : (double)v->magnitude;
        return QKV_OK;
    }
    if (v->type != QKV_JSON_NUMBER) return BAD("\"%s\" must be a number", key);
    char *end = NULL;
    errno = 0;
    *out = strtod(v->str, &end);
    if (errno || !end || *end) return BAD("\"%s\": bad number '%s'", key, v->str);
    return QKV_OK;
}
static qkv_status get_bool(const qkv_json_value *v, const char *key, bool *out) {
    if (v->type != QKV_JSON_BOOL) return BAD("\"%s\" must be true or false", key);
    *out = v->boolean;
    return QKV_OK;
}
static qkv_status get_enum(const qkv_json_value *v, const char *key, qkv_registry_id id, int *out) {
    char names[512];
    qkv_registry_list(id, names, sizeof names);
    if (v->type != QKV_JSON_STRING)
        return BAD("\"%s\" must be a string, one of: %s (got %s)", key, names, qkv_json_type_name(v->type));
    if (qkv_registry_parse(id, v->str, out) == QKV_OK) return QKV_OK;
    return BAD("\"%s\": unknown %s '%.100s' (one of: %s)", key, qkv_registry_get(id)->what, v->str, names);
}

static qkv_status read_attn(const qkv_json_value *obj, const char *name, qkv_mha_config *a) {
    if (obj->type != QKV_JSON_OBJECT) return BAD("\"%s\" must be an object", name);
    for (int64_t i = 0; i < obj->count; i++) {
        const qkv_json_value *v = &obj->items[i];
        const char *k = v->key;
        int e = 0;
        qkv_status st;
        if (!strcmp(k, "score")) st = get_enum(v, k, QKV_REGISTRY_SCORE, &e), a->score = (qkv_score_kind)e;
        else if (!strcmp(k, "norm")) st = get_enum(v, k, QKV_REGISTRY_NORM, &e), a->norm = (qkv_attn_norm)e;
        else if (!strcmp(k, "relpos")) st = get_enum(v, k, QKV_REGISTRY_RELPOS, &e), a->relpos = (qkv_relpos_kind)e;
        else if (!strcmp(k, "bias")) st = get_bool(v, k, &a->bias);
        else if (!strcmp(k, "cos_scale_learnable")) st = get_bool(v, k, &a->cos_scale_learnable);
        else if (!strcmp(k, "cos_scale_init")) st = get_double(v, k, &a->cos_scale_init);
        else if (!strcmp(k, "additive_dim")) st = get_int(v, k, &a->additive_dim);
        else if (!strcmp(k, "relpos_max_distance")) st = get_int(v, k, &a->relpos_max_distance);
        else if (!strcmp(k, "relpos_buckets")) st = get_int(v, k, &a->relpos_buckets);
        else if (!strcmp(k, "relpos_bidirectional")) st = get_bool(v, k, &a->relpos_bidirectional);
        else if (!strcmp(k, "rope_base")) st = get_double(v, k, &a->rope_base);
        else if (!strcmp(k, "use_fused")) st = get_bool(v, k, &a->use_fused);
        else if (!strcmp(k, "fused_always")) st = get_bool(v, k, &a->fused_always);
        else st = BAD("unknown key \"%s.%s\"", name, k);
        if (st) return st;
    }
    return QKV_OK;
}

static qkv_status read_image(const qkv_json_value *obj, qkv_image_config *im) {
    if (obj->type != QKV_JSON_OBJECT) return BAD("\"image\" must be an object");
    for (int64_t i = 0; i < obj->count; i++) {
        const qkv_json_value *v = &obj->items[i];
        const char *k = v->key;
        qkv_status st;
        if (!strcmp(k, "height")) st = get_int(v, k, &im->height);
        else if (!strcmp(k, "width")) st = get_int(v, k, &im->width);
        else if (!strcmp(k, "channels")) st = get_int(v, k, &im->channels);
        else if (!strcmp(k, "patch_size")) st = get_int(v, k, &im->patch_size);
        else if (!strcmp(k, "window")) st = get_int(v, k, &im->window);
        else if (!strcmp(k, "class_token")) st = get_bool(v, k, &im->class_token);
        else st = BAD("unknown key \"image.%s\"", k);
        if (st) return st;
    }
    return QKV_OK;
}

/* "features": [V_0, V_1, ...], the sizes of the feature tables. */
static qkv_status read_features(const qkv_json_value *v, qkv_model_config *c) {
    if (v->type != QKV_JSON_ARRAY || v->count > QKV_MODEL_MAX_FEATURES)
        return BAD("\"features\" must be an array of at most %d table sizes", QKV_MODEL_MAX_FEATURES);
    for (int64_t k = 0; k < v->count; k++) {
        qkv_status st = get_int(&v->items[k], "features", &c->feature_vocab[k]);
        if (st) return st;
    }
    c->n_features = (int32_t)v->count;
    return QKV_OK;
}

qkv_status qkv_model_config_from_json(const char *json, qkv_model_config *c) {
    if (!json || !c) return BAD("NULL argument");
    qkv_json_doc *doc = NULL;
    qkv_status st = qkv_json_parse(json, strlen(json), &doc, NULL);
    if (st) return st;
    const qkv_json_value *root = qkv_json_root(doc);
    const qkv_json_value *arch = qkv_json_get(root, "arch");
    int a = 0;
    if (root->type != QKV_JSON_OBJECT) st = BAD("the configuration must be a JSON object");
    else if (!arch) st = BAD("missing \"arch\"");
    else st = get_enum(arch, "arch", QKV_REGISTRY_ARCH, &a);
    if (!st) {
        /* defaults for the fields a file may leave out, then every member present */
        *c = qkv_model_default_config((qkv_arch)a, 64, 1, 1);
        c->bos_id = c->eos_id = -1; /* not recorded unless the file says (files before they were) */
        for (int64_t i = 0; i < root->count && !st; i++) {
            const qkv_json_value *v = &root->items[i];
            const char *k = v->key;
            int e = 0;
            if (!strcmp(k, "arch")) continue;
            else if (!strcmp(k, "src_vocab")) st = get_int(v, k, &c->src_vocab);
            else if (!strcmp(k, "tgt_vocab")) st = get_int(v, k, &c->tgt_vocab);
            else if (!strcmp(k, "d_model")) st = get_int(v, k, &c->d_model);
            else if (!strcmp(k, "n_heads")) st = get_int(v, k, &c->n_heads);
            else if (!strcmp(k, "dim_feedforward")) st = get_int(v, k, &c->dim_feedforward);
            else if (!strcmp(k, "n_encoder_layers")) st = get_int(v, k, &c->n_encoder_layers);
            else if (!strcmp(k, "n_decoder_layers")) st = get_int(v, k, &c->n_decoder_layers);
            else if (!strcmp(k, "max_len")) st = get_int(v, k, &c->max_len);
            else if (!strcmp(k, "pos")) st = get_enum(v, k, QKV_REGISTRY_POS, &e), c->pos = (qkv_abs_pos)e;
            else if (!strcmp(k, "scale_embeddings")) st = get_bool(v, k, &c->scale_embeddings);
            else if (!strcmp(k, "norm_first")) st = get_bool(v, k, &c->norm_first);
            else if (!strcmp(k, "final_norm")) st = get_bool(v, k, &c->final_norm);
            else if (!strcmp(k, "tie_embeddings")) st = get_bool(v, k, &c->tie_embeddings);
            else if (!strcmp(k, "share_embeddings")) st = get_bool(v, k, &c->share_embeddings);
            else if (!strcmp(k, "activation")) st = get_enum(v, k, QKV_REGISTRY_ACTIVATION, &e), c->activation = (qkv_activation)e;
            else if (!strcmp(k, "dropout")) st = get_double(v, k, &c->dropout);
            else if (!strcmp(k, "layer_norm_eps")) st = get_double(v, k, &c->layer_norm_eps);
            else if (!strcmp(k, "head")) st = get_enum(v, k, QKV_REGISTRY_HEAD, &e), c->head = (qkv_head_kind)e;
            else if (!strcmp(k, "pad_id")) st = get_int(v, k, &c->pad_id);
            else if (!strcmp(k, "bos_id")) st = get_int(v, k, &c->bos_id);
            else if (!strcmp(k, "eos_id")) st = get_int(v, k, &c->eos_id);
            else if (!strcmp(k, "self_attn")) st = read_attn(v, k, &c->self_attn);
            else if (!strcmp(k, "dec_self_attn")) st = read_attn(v, k, &c->dec_self_attn);
            else if (!strcmp(k, "cross_attn")) st = read_attn(v, k, &c->cross_attn);
            else if (!strcmp(k, "image")) st = read_image(v, &c->image);
            else if (!strcmp(k, "nat")) st = get_bool(v, k, &c->nat);
            else if (!strcmp(k, "mask_id")) st = get_int(v, k, &c->mask_id);
            else if (!strcmp(k, "features")) st = read_features(v, c);
            else st = BAD("unknown key \"%s\"", k);
        }
    }
    qkv_json_free(doc);
    return st ? st : qkv_model_config_check(c);
}
