/*
 * fuzz_model_config.c: libFuzzer target for a model file's "qkv.config" JSON through model
 * creation, saving and loading: qkv_model_config_from_json -> qkv_model_config_to_json ->
 * qkv_model_new -> qkv_model_save -> qkv_model_load (qkv_params_load).
 *
 * Input: the JSON text up to the first NUL byte; after it, optional patches (3 bytes each: a
 * 16-bit little-endian offset and a byte value) applied to the saved model file before it is
 * loaded again, so the loader also sees files whose header or data were damaged. An input whose
 * first 8 bytes are a little-endian header length that fits in it is a whole model file instead,
 * given to qkv_model_load as it is (its header's configuration decides what is allocated).
 *
 * Invariants:
 *   - a configuration is accepted or refused with a message (never a crash);
 *   - config -> JSON -> config is the identity, field by field (image.window by the window it
 *     means), and JSON -> config -> JSON gives the same text again;
 *   - an accepted configuration builds a model (or is refused with a message) whose parameter
 *     count stays under this target's own upper bound; configurations whose bound exceeds
 *     FZ_MAX_PARAMS are not built (a caller asking for a huge model gets one: that is not a bug);
 *   - an accepted configuration's initial weights are finite (its values are range-checked: a
 *     cos_scale_init beyond the float range is refused), and the saved file loads back with every
 *     parameter bit-identical; a patched file loads or is refused with a message. qkv_model_load is called on every patched file: the library itself
 *     must keep the allocation a file's header asks for in proportion to the file.
 */
#include "fuzz_util.h"

#include "qkv/qkv.h"

#include <math.h>

#define FZ_MAX_PARAMS (1 << 17)

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    qkv_set_num_threads(1);
    return 0;
}

static bool same_double(double a, double b) {
    return memcmp(&a, &b, sizeof a) == 0;
}

static bool same_attn(const qkv_mha_config *a, const qkv_mha_config *b) {
    return a->d_model == b->d_model && a->n_heads == b->n_heads && a->score == b->score && a->norm == b->norm &&
           a->bias == b->bias && same_double(a->dropout, b->dropout) &&
           a->cos_scale_learnable == b->cos_scale_learnable && same_double(a->cos_scale_init, b->cos_scale_init) &&
           a->additive_dim == b->additive_dim && a->relpos == b->relpos &&
           a->relpos_max_distance == b->relpos_max_distance && a->relpos_buckets == b->relpos_buckets &&
           a->relpos_bidirectional == b->relpos_bidirectional && same_double(a->rope_base, b->rope_base) &&
           a->use_fused == b->use_fused && a->fused_always == b->fused_always;
}

/* Every field of qkv_model_config (qkv_model.h). image.window is compared as the window it
 * means: the JSON leaves out a window equal to the patch size, which reads back as 0 (the same
 * thing). */
static bool same_config(const qkv_model_config *a, const qkv_model_config *b) {
    bool same = a->arch == b->arch && a->src_vocab == b->src_vocab && a->tgt_vocab == b->tgt_vocab &&
                a->d_model == b->d_model && a->n_heads == b->n_heads && a->dim_feedforward == b->dim_feedforward &&
                a->n_encoder_layers == b->n_encoder_layers && a->n_decoder_layers == b->n_decoder_layers &&
                a->max_len == b->max_len && a->pos == b->pos && a->scale_embeddings == b->scale_embeddings &&
                a->norm_first == b->norm_first && a->final_norm == b->final_norm &&
                a->tie_embeddings == b->tie_embeddings && a->activation == b->activation &&
                same_double(a->dropout, b->dropout) && same_double(a->layer_norm_eps, b->layer_norm_eps) &&
                a->head == b->head && a->pad_id == b->pad_id && a->n_features == b->n_features &&
                same_attn(&a->self_attn, &b->self_attn) && same_attn(&a->dec_self_attn, &b->dec_self_attn) &&
                same_attn(&a->cross_attn, &b->cross_attn) && a->image.height == b->image.height &&
                a->image.width == b->image.width && a->image.channels == b->image.channels &&
                a->image.patch_size == b->image.patch_size &&
                qkv_image_config_window(&a->image) == qkv_image_config_window(&b->image) &&
                a->image.class_token == b->image.class_token && a->nat == b->nat && a->mask_id == b->mask_id;
    for (int k = 0; same && k < a->n_features; k++)
        same = a->feature_vocab[k] == b->feature_vocab[k];
    return same;
}

/* An upper bound of the parameters of one attention block (src/nn/mha.c). */
static double attn_bound(const qkv_mha_config *a, double C, double H) {
    const double D = C / H, A = a->additive_dim > 0 ? a->additive_dim : D;
    const double K = a->relpos_max_distance > 0 ? a->relpos_max_distance : 128;
    return 4 * C * C + 4 * C + H * D * D + 2 * H * A * D + H * A + H + 2 * (2 * K + 1) * D +
           fabs((double)a->relpos_buckets) * H;
}

/* An upper bound of the parameters a configuration registers (src/nn/model.c, layer.c, mha.c,
 * patch_embed.c, model_features.c, nat.c), in doubles so that nothing overflows. */
static double param_bound(const qkv_model_config *c) {
    const double C = c->d_model, H = c->n_heads, F = c->dim_feedforward, L = c->max_len;
    double n = (fabs((double)c->src_vocab) + 2.0 * c->tgt_vocab + 2 * L + 2 * (L + 1)) * C + c->tgt_vocab + L + 1;
    for (int k = 0; k < c->n_features; k++)
        n += (double)c->feature_vocab[k] * C;
    const double window = c->image.window > c->image.patch_size ? c->image.window : c->image.patch_size;
    n += window * window * c->image.channels * C + 2 * C;
    const double layer = 2 * C * F + F + 8 * C;
    n += c->n_encoder_layers * (layer + attn_bound(&c->self_attn, C, H));
    n += c->n_decoder_layers *
         (layer + attn_bound(&c->dec_self_attn, C, H) + attn_bound(&c->cross_attn, C, H));
    return n + 4 * C;
}

/* The model file at path, each patch (offset, byte) applied. */
static void patch_file(const char *path, const uint8_t *patches, size_t n) {
    size_t size = 0;
    char *bytes = fz_read_file(path, &size);
    FZ_REQUIRE(bytes != NULL);
    for (size_t i = 0; i + 3 <= n && size; i += 3) {
        const size_t at = ((size_t)patches[i] | (size_t)patches[i + 1] << 8) % size;
        bytes[at] = (char)patches[i + 2];
    }
    fz_write_file(path, bytes, size);
    free(bytes);
}

static void check_model(const qkv_model_config *cfg, const uint8_t *patches, size_t n_patches) {
    const double bound = param_bound(cfg);
    if (bound > FZ_MAX_PARAMS) return;
    qkv_model *m = NULL;
    qkv_status st = qkv_model_new(cfg, 7, &m);
    FZ_REQUIRE((st == QKV_OK) == (m != NULL));
    if (st) { /* a few combinations are refused only when the layers are built */
        FZ_REQUIRE(st != QKV_ERR_OOM && qkv_last_error()[0] != '\0');
        return;
    }
    FZ_REQUIRE((double)qkv_params_numel(m->params) <= bound);
    for (int64_t i = 0; i < qkv_params_count(m->params); i++) {
        const qkv_tensor *t = qkv_params_get(m->params, i);
        for (int64_t k = 0; k < qkv_tensor_numel(t); k++) FZ_REQUIRE(isfinite(((const qkv_real *)t->data)[k]));
    }
    const char *path = fz_path("model.safetensors");
    FZ_REQUIRE(qkv_model_save(m, path) == QKV_OK);
    if (n_patches) patch_file(path, patches, n_patches);
    qkv_model *back = NULL;
    st = qkv_model_load(path, &back);
    FZ_REQUIRE((st == QKV_OK) == (back != NULL));
    FZ_REQUIRE(st == QKV_OK || qkv_last_error()[0] != '\0');
    if (!n_patches) {
        FZ_REQUIRE(st == QKV_OK && same_config(&m->cfg, &back->cfg));
        FZ_REQUIRE(qkv_params_count(back->params) == qkv_params_count(m->params));
        for (int64_t i = 0; i < qkv_params_count(m->params); i++) {
            const qkv_tensor *a = qkv_params_get(m->params, i), *b = qkv_params_get(back->params, i);
            FZ_REQUIRE(!strcmp(a->name, b->name) && qkv_tensor_numel(a) == qkv_tensor_numel(b));
            FZ_REQUIRE(!memcmp(a->data, b->data, (size_t)qkv_tensor_numel(a) * sizeof(qkv_real)));
        }
    }
    qkv_model_free(back);
    qkv_model_free(m);
    remove(path);
}

/* A whole file: loaded or refused with a message. */
static void load_file(const uint8_t *data, size_t size) {
    const char *path = fz_path("input.safetensors");
    fz_write_file(path, data, size);
    qkv_model *m = NULL;
    qkv_status st = qkv_model_load(path, &m);
    FZ_REQUIRE((st == QKV_OK) == (m != NULL));
    FZ_REQUIRE(st == QKV_OK || qkv_last_error()[0] != '\0');
    if (m) FZ_REQUIRE(qkv_model_config_check(&m->cfg) == QKV_OK);
    qkv_model_free(m);
    remove(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint64_t header = 0;
    for (int i = 0; i < 8 && (size_t)i < size; i++)
        header |= (uint64_t)data[i] << 8 * i;
    if (size >= 8 && header <= size - 8) {
        load_file(data, size);
        return 0;
    }
    const uint8_t *nul = memchr(data, 0, size);
    const size_t json_len = nul ? (size_t)(nul - data) : size;
    char *json = fz_strndup(data, json_len);
    qkv_model_config c1, c2;
    qkv_status st = qkv_model_config_from_json(json, &c1);
    free(json);
    FZ_REQUIRE(st == QKV_OK || qkv_last_error()[0] != '\0');
    if (st) return 0;
    FZ_REQUIRE(qkv_model_config_check(&c1) == QKV_OK);
    static char j1[8192], j2[8192];
    FZ_REQUIRE(qkv_model_config_to_json(&c1, j1, 4096) == QKV_OK); /* model files hold 4096 bytes */
    FZ_REQUIRE(qkv_model_config_from_json(j1, &c2) == QKV_OK);
    FZ_REQUIRE(same_config(&c1, &c2));
    FZ_REQUIRE(qkv_model_config_to_json(&c2, j2, sizeof j2) == QKV_OK && !strcmp(j1, j2));
    check_model(&c1, nul ? nul + 1 : NULL, nul ? size - json_len - 1 : 0);
    return 0;
}
