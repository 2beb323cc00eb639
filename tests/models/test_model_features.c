/*
 * test_model_features.c: feature inputs of encoder-only models (src/nn/model_features.c).
 *   - the sum: a model with features gives the logits of the same model without them whose token
 *     embedding row w holds E[w] + sum_k E_k[f_k(w)] (features a function of the token here);
 *   - finite-difference gradients of every parameter, feature tables included (double build),
 *     token and pooled heads;
 *   - model files round-trip the feature tables and their sizes; models without features write
 *     the configuration JSON they always wrote;
 *   - bad inputs: missing or unexpected features, wrong shapes, ids outside a table;
 *   - the trainer learns a task that only the features can solve (every token is <unk>).
 */
#include "testutil.h"

#include "qkv/qkv_train.h"

#include <stdio.h>
#include <unistd.h>

enum { V = 7, F = 2 };
static const int32_t feature_vocab[F] = {3, 5};

/* the features of token w: a fixed function, so a featureless model can absorb them */
static int32_t feat_of(int32_t w, int k) {
    return k == 0 ? w % 3 : (w * 2 + 1) % 5;
}

static qkv_model_config features_config(qkv_head_kind head, int n_features) {
    qkv_model_config c = qkv_model_default_config(QKV_ARCH_ENCODER, 4, 2, 1);
    c.src_vocab = V;
    c.tgt_vocab = 3;
    c.dim_feedforward = 6;
    c.dropout = 0;
    c.head = head;
    c.max_len = 8;
    c.n_features = n_features;
    for (int k = 0; k < n_features; k++)
        c.feature_vocab[k] = feature_vocab[k];
    return c;
}

static const int32_t ids_data[2 * 4] = {1, 2, 3, 4, 5, 6, 0, 0}; /* second row padded */

static qkv_tensor *features_of_ids(qkv_ctx *ctx) {
    int32_t f[2 * 4 * F];
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < F; k++)
            f[i * F + k] = feat_of(ids_data[i], k);
    return qkv_tensor_from(ctx, QKV_I32, 3, (int64_t[]){2, 4, F}, f);
}

static qkv_tensor *featured_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    (void)in;
    const qkv_model *m = user;
    qkv_tensor *ids = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){2, 4}, ids_data);
    return qkv_model_classify_features(ctx, m, ids, features_of_ids(ctx), NULL);
}

TEST(model_features_are_summed_into_the_token_embedding) {
    for (int head = 0; head < 2; head++) {
        qkv_model_config cf = features_config((qkv_head_kind)head, F),
                         c0 = features_config((qkv_head_kind)head, 0);
        qkv_model *mf = NULL, *m0 = NULL;
        CHECK_OK(qkv_model_new(&cf, 5, &mf));
        CHECK_OK(qkv_model_new(&c0, 6, &m0));
        if (!mf || !m0) return;
        CHECK(qkv_params_count(mf->params) == qkv_params_count(m0->params) + F);
        CHECK(qkv_params_find(mf->params, "embed_features.1.weight") != NULL);
        /* copy every shared parameter; fold the features into m0's token table */
        for (int64_t i = 0; i < qkv_params_count(m0->params); i++) {
            qkv_tensor *dst = qkv_params_get(m0->params, i),
                       *src = qkv_params_find(mf->params, dst->name);
            CHECK(src != NULL && qkv_tensor_numel(src) == qkv_tensor_numel(dst));
            if (src) memcpy(dst->data, src->data, sizeof(qkv_real) * (size_t)qkv_tensor_numel(dst));
        }
        qkv_real *e = m0->src_embed->data;
        for (int32_t w = 0; w < V; w++)
            for (int k = 0; k < F; k++)
                for (int j = 0; j < 4; j++)
                    e[w * 4 + j] += ((qkv_real *)mf->feature_embed[k]->data)[feat_of(w, k) * 4 + j];
        qkv_ctx *ctx = tu_ctx();
        qkv_ctx_set_grad_enabled(ctx, false);
        qkv_tensor *yf = featured_fn(ctx, NULL, mf);
        qkv_tensor *y0 = qkv_model_classify(
            ctx, m0, qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){2, 4}, ids_data), NULL);
        CHECK_OK(qkv_ctx_status(ctx));
        if (yf && y0) {
            CHECK(qkv_tensor_same_shape(yf, y0));
            const int64_t n = qkv_tensor_numel(y0);
            /* pooled: both rows; token: the unpadded positions (0..3, 4..5) */
            for (int64_t i = 0; i < n; i++) {
                if (head == QKV_HEAD_TOKEN && (i / 3 == 6 || i / 3 == 7)) continue;
                CHECK_NEAR(((qkv_real *)yf->data)[i], ((qkv_real *)y0->data)[i], 1e-5);
            }
        }
        qkv_ctx_free(ctx);
        qkv_model_free(mf);
        qkv_model_free(m0);
    }
}

TEST(model_features_gradients) {
#ifndef QKV_DOUBLE
    TU_NEED_DOUBLE();
#else
    for (int head = 0; head < 2; head++) {
        qkv_model_config c = features_config((qkv_head_kind)head, F);
        qkv_model *m = NULL;
        CHECK_OK(qkv_model_new(&c, 9, &m));
        if (!m) return;
        qkv_tensor *in[64];
        int n = 0;
        for (int64_t i = 0; i < qkv_params_count(m->params) && n < 64; i++)
            in[n++] = qkv_params_get(m->params, i);
        tu_gradcheck(head ? "pooled head with features" : "token head with features", featured_fn,
                     in, n, m, NULL);
        qkv_model_free(m);
    }
#endif
}

TEST(model_features_file_round_trip) {
    qkv_model_config c = features_config(QKV_HEAD_TOKEN, F);
    qkv_model *m = NULL, *back = NULL;
    CHECK_OK(qkv_model_new(&c, 11, &m));
    if (!m) return;
    char json[4096];
    CHECK_OK(qkv_model_config_to_json(&m->cfg, json, sizeof json));
    CHECK_MSG(strstr(json, "\"features\":[3,5]"), "%s", json);
    qkv_model_config plain = features_config(QKV_HEAD_TOKEN, 0);
    CHECK_OK(qkv_model_config_to_json(&plain, json, sizeof json));
    CHECK(!strstr(json, "features")); /* files without features are unchanged */
    back = tu_model_roundtrip(m);
    if (back) {
        CHECK(back->cfg.n_features == F && back->cfg.feature_vocab[0] == 3 &&
              back->cfg.feature_vocab[1] == 5);
        CHECK(back->feature_embed[1] && back->feature_embed[1]->shape[0] == 5 &&
              back->feature_embed[1]->shape[1] == 4);
        qkv_ctx *ctx = tu_ctx();
        qkv_ctx_set_grad_enabled(ctx, false);
        qkv_tensor *a = featured_fn(ctx, NULL, m), *b = featured_fn(ctx, NULL, back);
        CHECK_OK(qkv_ctx_status(ctx));
        CHECK(a && b &&
              memcmp(a->data, b->data, sizeof(qkv_real) * (size_t)qkv_tensor_numel(a)) == 0);
        qkv_ctx_free(ctx);
    }
    qkv_model_free(back);
    qkv_model_free(m);
}

TEST(model_features_bad_inputs) {
    qkv_model_config c = features_config(QKV_HEAD_TOKEN, F);
    qkv_model *m = NULL, *plain = NULL;
    CHECK_OK(qkv_model_new(&c, 1, &m));
    qkv_model_config p = features_config(QKV_HEAD_TOKEN, 0);
    CHECK_OK(qkv_model_new(&p, 1, &plain));
    if (!m || !plain) return;
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *ids = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){2, 4}, ids_data);
    TU_EXPECT_FAIL(ctx, qkv_model_classify(ctx, m, ids, NULL), QKV_ERR_INVALID_ARG,
                   "model_classify", "2 feature inputs");
    ids = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){2, 4}, ids_data);
    TU_EXPECT_FAIL(ctx, qkv_model_classify_features(ctx, plain, ids, features_of_ids(ctx), NULL),
                   QKV_ERR_INVALID_ARG, "model_classify", "0 feature inputs");
    ids = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){2, 4}, ids_data);
    qkv_tensor *short_f = qkv_tensor_zeros(ctx, QKV_I32, 3, (int64_t[]){2, 3, F});
    TU_EXPECT_FAIL(ctx, qkv_model_classify_features(ctx, m, ids, short_f, NULL), QKV_ERR_SHAPE,
                   "model_classify", "(2, 3, 2)");
    ids = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){2, 4}, ids_data);
    qkv_tensor *big = features_of_ids(ctx);
    ((int32_t *)big->data)[3] = 5; /* feature 1 has 5 ids: 0..4 */
    TU_EXPECT_FAIL(ctx, qkv_model_classify_features(ctx, m, ids, big, NULL), QKV_ERR_INVALID_ARG,
                   "embedding", "5");
    qkv_ctx_free(ctx);
    /* configurations */
    qkv_model_config bad = c;
    bad.feature_vocab[1] = 0;
    CHECK_ERR(qkv_model_config_check(&bad), QKV_ERR_INVALID_ARG, "feature_vocab[1]");
    bad = c;
    bad.n_features = QKV_MODEL_MAX_FEATURES + 1;
    CHECK_ERR(qkv_model_config_check(&bad), QKV_ERR_INVALID_ARG, "n_features");
    bad = qkv_model_default_config(QKV_ARCH_ENCODER_DECODER, 4, 2, 1);
    bad.src_vocab = bad.tgt_vocab = 5;
    bad.n_features = 1;
    bad.feature_vocab[0] = 3;
    CHECK_ERR(qkv_model_config_check(&bad), QKV_ERR_INVALID_ARG, "encoder-only");
    qkv_model_config from;
    CHECK_ERR(
        qkv_model_config_from_json(
            "{\"arch\":\"encoder\",\"src_vocab\":5,\"tgt_vocab\":3,\"features\":[2,\"x\"]}", &from),
        QKV_ERR_INVALID_ARG, "features");
    qkv_model_free(m);
    qkv_model_free(plain);
}

/* Every token is <unk> (id 1); the tag is the parity of feature 0: only the features can tell. */
TEST(model_features_trainer_learns_from_features_alone) {
    enum { NB = 8, L = 5 };
    qkv_model_config c = qkv_model_default_config(QKV_ARCH_ENCODER, 16, 2, 1);
    c.src_vocab = 4;
    c.tgt_vocab = 2;
    c.dim_feedforward = 32;
    c.dropout = 0;
    c.max_len = L;
    c.n_features = 1;
    c.feature_vocab[0] = 6;
    qkv_model *m = NULL;
    qkv_trainer *t = NULL;
    CHECK_OK(qkv_model_new(&c, 2, &m));
    qkv_train_config tc = qkv_train_default_config();
    tc.schedule = (qkv_lr_schedule){.kind = QKV_LR_CONSTANT, .base_lr = 3e-3};
    tc.label_smoothing = 0;
    if (m) CHECK_OK(qkv_trainer_new(m, &tc, &t));
    if (!t) {
        qkv_model_free(m);
        return;
    }
    int32_t src[NB * L], labels[NB * L], feats[NB * L];
    qkv_train_batch b = {
        .batch = NB, .src_len = L, .src = src, .labels = labels, .features = feats};
    for (int step = 0; step < 60; step++) {
        for (int i = 0; i < NB * L; i++) {
            feats[i] = (int32_t)(qkv_rng_uniform(8, (uint64_t)step, 0, (uint64_t)i) * 6);
            src[i] = 1; /* <unk> */
            labels[i] = feats[i] % 2;
        }
        CHECK_OK(qkv_trainer_step(t, &b, NULL));
    }
    /* held-out batch: every position right */
    for (int i = 0; i < NB * L; i++)
        feats[i] = i % 6, labels[i] = feats[i] % 2;
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *y = qkv_model_classify_features(
        ctx, m, qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){NB, L}, src),
        qkv_tensor_from(ctx, QKV_I32, 3, (int64_t[]){NB, L, 1}, feats), NULL);
    qkv_tensor *pred = qkv_argmax(ctx, y);
    CHECK_OK(qkv_ctx_status(ctx));
    int right = 0;
    for (int i = 0; pred && i < NB * L; i++)
        right += ((int32_t *)pred->data)[i] == labels[i];
    CHECK_MSG(right == NB * L, "%d of %d right", right, NB * L);
    /* a batch without its features is refused */
    b.features = NULL;
    CHECK_ERR(qkv_trainer_step(t, &b, NULL), QKV_ERR_INVALID_ARG, "feature inputs");
    qkv_ctx_free(ctx);
    qkv_trainer_free(t);
    qkv_model_free(m);
}

/* Initialisation: the F feature tables start at N(0, 1 / (C F)), so together they weigh what the
 * token table (N(0, 1 / C)) does. */
TEST(model_features_initial_scale) {
    qkv_model_config c = qkv_model_default_config(QKV_ARCH_ENCODER, 16, 2, 1);
    c.src_vocab = 1000;
    c.tgt_vocab = 3;
    c.n_features = 4;
    for (int k = 0; k < 4; k++)
        c.feature_vocab[k] = 1000;
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&c, 3, &m));
    if (!m) return;
    double token = 0, feat = 0;
    for (int64_t i = 0; i < 16000; i++) {
        token += pow((double)((qkv_real *)m->src_embed->data)[i], 2) / 16000;
        for (int k = 0; k < 4; k++)
            feat += pow((double)((qkv_real *)m->feature_embed[k]->data)[i], 2) / 16000;
    }
    CHECK_NEAR(token, 1.0 / 16, 0.05 / 16); /* 16,000 samples: the variance within 5 % */
    CHECK_NEAR(feat, 1.0 / 16, 0.05 / 16);  /* the sum over the 4 tables */
    qkv_model_free(m);
}
