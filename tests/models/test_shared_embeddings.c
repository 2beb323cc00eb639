/*
 * test_shared_embeddings.c: model.share_embeddings (one embedding for source and target, Press and
 * Wolf 2017), with and without the tied output projection.
 *   - the shared model has no tgt_embed.weight (nor generator.weight when tied), and the source
 *     embedding, target embedding (and output projection) are one tensor;
 *   - its logits and loss equal those of the unshared model whose target embedding (and output
 *     projection) hold a copy of the source embedding, bit for bit, and the gradient of the shared
 *     tensor is the sum of the copies' gradients;
 *   - a model file keeps it (save + load, the same logits), its JSON says so (an unshared one's
 *     JSON has no such key), and a configuration with two vocabularies or another architecture
 *     is refused.
 */
#include "testutil.h"

#include <math.h>
#include <string.h>

enum { V = 11, B = 2, S = 5, T = 4 };

static qkv_model_config config(bool share, bool tie) {
    qkv_model_config c = qkv_model_default_config(QKV_ARCH_ENCODER_DECODER, 8, 2, 1);
    c.src_vocab = c.tgt_vocab = V;
    c.share_embeddings = share;
    c.tie_embeddings = tie;
    c.dropout = 0;
    return c;
}

/* The loss of a fixed batch; its logits into *logits (ctx's arena). */
static qkv_tensor *loss_of(qkv_ctx *ctx, const qkv_model *m, qkv_tensor **logits) {
    static const int32_t src[B * S] = {4, 5, 6, 7, 8, 9, 10, 4, 0, 0};
    static const int32_t tin[B * T] = {2, 5, 6, 7, 2, 9, 3, 0}, tout[B * T] = {5, 6, 7, 3, 9, 3, 0, 0};
    qkv_tensor *s = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, S}, src);
    qkv_tensor *ti = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, T}, tin);
    qkv_tensor *to = qkv_tensor_from(ctx, QKV_I32, 1, (int64_t[]){B * T}, tout);
    *logits = qkv_model_decode(ctx, m, ti, qkv_model_encode(ctx, m, s, NULL), s, NULL, NULL);
    return qkv_cross_entropy(ctx, qkv_reshape(ctx, *logits, 2, (int64_t[]){B * T, V}), to, 0, 0.1);
}

static void copy_param(qkv_model *to, const char *to_name, const qkv_model *from, const char *from_name) {
    qkv_tensor *a = qkv_params_find(to->params, to_name), *b = qkv_params_find(from->params, from_name);
    CHECK_MSG(a && b && qkv_tensor_numel(a) == qkv_tensor_numel(b), "%s <- %s", to_name, from_name);
    if (a && b) memcpy(a->data, b->data, sizeof(qkv_real) * (size_t)qkv_tensor_numel(a));
}

static void check_equivalence(bool tie) {
    qkv_model_config cs = config(true, tie), cu = config(false, tie);
    qkv_model *shared = NULL, *plain = NULL;
    CHECK_OK(qkv_model_new(&cs, 7, &shared));
    CHECK_OK(qkv_model_new(&cu, 8, &plain));
    if (!shared || !plain) goto done;
    CHECK(shared->tgt_embed == shared->src_embed && (!tie || shared->out_w == shared->src_embed));
    CHECK(!qkv_params_find(shared->params, "tgt_embed.weight") &&
          (qkv_params_find(shared->params, "generator.weight") != NULL) == !tie);
    CHECK(qkv_params_count(plain->params) == qkv_params_count(shared->params) + 1);
    /* the unshared model with the shared one's values, the source embedding copied to the target's */
    for (int64_t i = 0; i < qkv_params_count(shared->params); i++) {
        const char *name = qkv_params_get(shared->params, i)->name;
        copy_param(plain, name, shared, name);
    }
    copy_param(plain, "tgt_embed.weight", shared, "src_embed.weight");
    qkv_ctx *a = tu_ctx(), *b = tu_ctx();
    qkv_tensor *la, *lb;
    qkv_tensor *loss_a = loss_of(a, shared, &la), *loss_b = loss_of(b, plain, &lb);
    static qkv_real logits[B * T * V]; /* the shared model's, for the model file below */
    CHECK_OK(qkv_ctx_status(a));
    CHECK_OK(qkv_ctx_status(b));
    if (la && lb && loss_a && loss_b) {
        CHECK(!memcmp(la->data, lb->data, sizeof(qkv_real) * (size_t)qkv_tensor_numel(la)));
        memcpy(logits, la->data, sizeof logits);
        CHECK(((qkv_real *)loss_a->data)[0] == ((qkv_real *)loss_b->data)[0]);
        qkv_params_zero_grad(shared->params);
        qkv_params_zero_grad(plain->params);
        CHECK_OK(qkv_backward(a, loss_a));
        CHECK_OK(qkv_backward(b, loss_b));
        const qkv_real *g = shared->src_embed->grad, *gs = plain->src_embed->grad, *gt = plain->tgt_embed->grad;
        int bad = 0;
        for (int64_t i = 0; i < (int64_t)V * 8; i++) /* tied: the projection's share is in gt */
            bad += fabs((double)g[i] - ((double)gs[i] + (double)gt[i])) > 1e-5 * fmax(1, fabs((double)g[i]));
        CHECK_MSG(bad == 0, "tie %d: %d gradient values differ from the sum of the copies'", tie, bad);
        double norm = 0;
        for (int64_t i = 0; i < (int64_t)V * 8; i++)
            norm += fabs((double)gt[i]) + fabs((double)gs[i]);
        CHECK(norm > 0);
    }
    qkv_ctx_free(a);
    qkv_ctx_free(b);
    /* a model file keeps the sharing */
    qkv_model *back = tu_model_roundtrip(shared);
    CHECK(back && back->cfg.share_embeddings && back->tgt_embed == back->src_embed);
    if (back) {
        qkv_ctx *c = tu_ctx();
        qkv_ctx_set_grad_enabled(c, false);
        qkv_tensor *lc;
        loss_of(c, back, &lc);
        CHECK(lc && !memcmp(lc->data, logits, sizeof logits));
        qkv_ctx_free(c);
    }
    qkv_model_free(back);
done:
    qkv_model_free(shared);
    qkv_model_free(plain);
}

TEST(model_shared_embeddings_equal_copies) {
    check_equivalence(false);
    check_equivalence(true);
}

TEST(model_shared_embeddings_config) {
    char json[8192];
    qkv_model_config c = config(true, false), back;
    CHECK_OK(qkv_model_config_to_json(&c, json, sizeof json));
    CHECK(strstr(json, "\"share_embeddings\":true"));
    CHECK_OK(qkv_model_config_from_json(json, &back));
    CHECK(back.share_embeddings);
    c = config(false, false);
    CHECK_OK(qkv_model_config_to_json(&c, json, sizeof json));
    CHECK(!strstr(json, "share_embeddings"));
    c = config(true, false);
    c.tgt_vocab = V + 1;
    CHECK_ERR(qkv_model_config_check(&c), QKV_ERR_INVALID_ARG, "share_embeddings needs an encoder-decoder with one vocabulary");
    c = qkv_model_default_config(QKV_ARCH_DECODER, 8, 2, 1);
    c.src_vocab = c.tgt_vocab = V;
    c.share_embeddings = true;
    CHECK_ERR(qkv_model_config_check(&c), QKV_ERR_INVALID_ARG, "share_embeddings needs an encoder-decoder");
}
