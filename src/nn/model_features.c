/*
 * model_features.c: feature inputs of encoder-only models (qkv_model.h): n_features extra
 * embedding tables embed_features.<k>.weight (V_k, C) whose rows are summed into the token
 * embedding of every position,
 *
 *   x_bs = E[src_bs] + sum_k E_k[features_bsk]          (B, S, C), before the sqrt(C) scale,
 *
 * the way BERT sums its token and segment embeddings. The feature tables start at
 * N(0, (C F)^-1/2) (F = n_features; the token table is N(0, C^-1/2) when embeddings are scaled):
 * together the features start with the variance of the token embedding, so the input vector is
 * not F + 1 times as large as a token's. (With F tables as large as the token's, the embeddings
 * dwarfed what the layers add to the residual stream and a tagger learned context more slowly.)
 * With word spelling features (qkv_word_feature_of: suffixes, prefixes, shape) this is spaCy's
 * MultiHashEmbed with summation instead of concatenation + maxout, and without the hashing: the
 * feature vocabularies are explicit.
 *
 * Dims: B batch, S length, F n_features, C d_model.
 */
#include "nn_internal.h"

#include <math.h>
#include <stdio.h>

qkv_status qkv__model_features_register(qkv_model *m) {
    const qkv_model_config *c = &m->cfg;
    for (int k = 0; k < c->n_features; k++) {
        char name[64];
        snprintf(name, sizeof name, "embed_features.%d.weight", k);
        qkv_status st = qkv_params_add(
            m->params, name, 2, (int64_t[]){c->feature_vocab[k], c->d_model}, &m->feature_embed[k]);
        if (st) return st;
    }
    return QKV_OK;
}

void qkv__model_features_init(qkv_model *m, uint64_t seed) {
    const qkv_model_config *c = &m->cfg;
    const double std =
        (c->scale_embeddings ? 1 / sqrt((double)c->d_model) : 1.0) / sqrt((double)c->n_features);
    for (int k = 0; k < c->n_features; k++)
        qkv_init_normal(m->feature_embed[k], 0, std, seed, 1100 + (uint64_t)k);
}

qkv_tensor *qkv__model_features_sum(qkv_ctx *ctx, const qkv_model *m, const qkv_tensor *src,
                                    qkv_tensor *features) {
    const qkv_model_config *c = &m->cfg;
    const int64_t B = src->shape[0], S = src->shape[1], F = c->n_features;
    char b0[96], b1[96];
    if (!qkv__check_i32(ctx, "model_classify", features, "features")) return NULL;
    if (features->ndim != 3 || features->shape[0] != B || features->shape[1] != S ||
        features->shape[2] != F)
        return QKV_FAIL(ctx, QKV_ERR_SHAPE,
                        "model_classify: features %s do not match src %s and %lld feature tables",
                        qkv_tensor_shape_str(features, b0, sizeof b0),
                        qkv_tensor_shape_str(src, b1, sizeof b1), (long long)F);
    const int32_t *f = qkv__idata(features);
    qkv_tensor *sum = NULL;
    for (int64_t k = 0; k < F; k++) {
        qkv_tensor *ids =
            qkv__alloc(ctx, QKV_I32, 2, (int64_t[]){B, S}); /* feature k of every position */
        if (!ids) return NULL;
        for (int64_t b = 0; b < B; b++)
            for (int64_t s = 0; s < S; s++)
                qkv__idata(ids)[b * S + s] =
                    f[b * features->stride[0] + s * features->stride[1] + k * features->stride[2]];
        qkv_tensor *e = qkv_embedding(ctx, m->feature_embed[k], ids); /* (B, S, C) */
        sum = sum ? qkv_add(ctx, sum, e) : e;
    }
    return sum;
}
