/*
 * test_model.c: whole models. The encoder-decoder matches PyTorch (nn.Transformer between
 * embeddings and a generator, post- and pre-LN, with padding): logits, label-smoothed loss and
 * every parameter gradient; model files round-trip; the configuration JSON round-trips and
 * rejects unknown keys; encoder-only (token and pooled heads) and decoder-only models have the
 * right shapes and gradients, and the language model is causal.
 */
#include "fixture.h"
#include "testutil.h"

#include <stdio.h>
#include <unistd.h>

static qkv_model_config seq2seq_config(bool norm_first) {
    qkv_model_config c = qkv_model_default_config(QKV_ARCH_ENCODER_DECODER, 8, 2, 2);
    c.src_vocab = 11;
    c.tgt_vocab = 13;
    c.dim_feedforward = 16;
    c.dropout = 0;
    c.norm_first = norm_first;
    return c;
}

static void seq2seq_parity(const char *file, bool norm_first) {
    fixture f;
    if (!fixture_open(&f, file)) return;
    qkv_model_config cfg = seq2seq_config(norm_first);
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&cfg, 1, &m));
    if (!m) return;
    CHECK_MSG(qkv_params_count(m->params) == 2 + 2 * 12 + 2 * 18 + 4 + 2, "%lld parameters", (long long)qkv_params_count(m->params));
    fixture_params(&f, m->params, "param.");
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_training(ctx, true); /* dropout 0: training mode must not change anything */
    qkv_tensor *src = fixture_tensor(ctx, &f, "input.src", QKV_I32);
    qkv_tensor *tgt_in = fixture_tensor(ctx, &f, "input.tgt_in", QKV_I32);
    qkv_tensor *tgt_out = fixture_tensor(ctx, &f, "input.tgt_out", QKV_I32);
    qkv_tensor *memory = qkv_model_encode(ctx, m, src, NULL);
    qkv_tensor *logits = qkv_model_decode(ctx, m, tgt_in, memory, src, NULL, NULL); /* (B, T, V) */
    const int64_t BT = tgt_in->shape[0] * tgt_in->shape[1];
    qkv_tensor *loss = qkv_cross_entropy(ctx, qkv_reshape(ctx, logits, 2, (int64_t[]){BT, 13}),
                                         qkv_reshape(ctx, tgt_out, 1, &BT), 0, 0.1);
    CHECK_OK(qkv_ctx_status(ctx));
    if (!qkv_ctx_status(ctx)) {
        expect_close(&f, "seq2seq logits", logits->data, "out.logits", qkv_tensor_numel(logits));
        expect_close(&f, "seq2seq loss", loss->data, "out.loss", 1);
        CHECK_OK(qkv_backward(ctx, loss));
        expect_param_grads(&f, m->params, file);
    }
    /* the model file round-trips: same logits after save and load */
    qkv_model *back = tu_model_roundtrip(m);
    if (back && logits) {
        qkv_ctx_reset(ctx);
        qkv_ctx_set_grad_enabled(ctx, false);
        src = fixture_tensor(ctx, &f, "input.src", QKV_I32);
        tgt_in = fixture_tensor(ctx, &f, "input.tgt_in", QKV_I32);
        qkv_tensor *again = qkv_model_decode(ctx, back, tgt_in, qkv_model_encode(ctx, back, src, NULL), src, NULL, NULL);
        CHECK_OK(qkv_ctx_status(ctx));
        if (again) expect_close(&f, "seq2seq logits after save + load", again->data, "out.logits", qkv_tensor_numel(again));
        CHECK(back->cfg.norm_first == norm_first && back->cfg.n_decoder_layers == 2);
    }
    qkv_model_free(back);
    qkv_ctx_free(ctx);
    qkv_model_free(m);
    qkv_st_close(f.file);
}

TEST(model_seq2seq_matches_pytorch_post_ln) { seq2seq_parity("ref_seq2seq_post.safetensors", false); }
TEST(model_seq2seq_matches_pytorch_pre_ln) { seq2seq_parity("ref_seq2seq_pre.safetensors", true); }

TEST(model_config_json_round_trip_and_errors) {
    qkv_model_config c = seq2seq_config(true);
    c.self_attn.score = QKV_SCORE_COSINE;
    c.cross_attn.relpos = QKV_RELPOS_ALIBI;
    c.dec_self_attn.relpos = QKV_RELPOS_T5;
    c.pos = QKV_POS_LEARNED;
    c.dropout = 0.125;
    char json[4096];
    CHECK_OK(qkv_model_config_to_json(&c, json, sizeof json));
    qkv_model_config back;
    CHECK_OK(qkv_model_config_from_json(json, &back));
    CHECK(back.norm_first && back.pos == QKV_POS_LEARNED && back.dropout == 0.125 &&
          back.self_attn.score == QKV_SCORE_COSINE && back.cross_attn.relpos == QKV_RELPOS_ALIBI &&
          back.dec_self_attn.relpos == QKV_RELPOS_T5 && back.tgt_vocab == 13 && back.src_vocab == 11);
    CHECK_ERR(qkv_model_config_from_json("{\"arch\":\"encoder\",\"d_modle\":8}", &back), QKV_ERR_INVALID_ARG, "d_modle");
    CHECK_ERR(qkv_model_config_from_json("{\"arch\":\"transformer-xl\"}", &back), QKV_ERR_INVALID_ARG, "arch");
    CHECK_ERR(qkv_model_config_from_json("{\"arch\":\"encoder\",\"dropout\":\"high\"}", &back), QKV_ERR_INVALID_ARG,
              "dropout");
    CHECK_ERR(qkv_model_config_from_json("{\"arch\":", &back), QKV_ERR_FORMAT, "JSON");
    c.d_model = 8;
    c.cross_attn.score = (qkv_score_kind)9;
    CHECK_ERR(qkv_model_config_to_json(&c, json, sizeof json), QKV_ERR_INVALID_ARG, "cross_attn: unknown score");
    c.cross_attn.score = QKV_SCORE_DOT;
    c.d_model = 9; /* not a multiple of 2 heads */
    CHECK_ERR(qkv_model_config_to_json(&c, json, sizeof json), QKV_ERR_INVALID_ARG, "n_heads");
}

TEST(model_load_rejects_files_that_are_not_qkv_models) {
    char path[512];
    snprintf(path, sizeof path, "%s/ref_ops.safetensors", qkv_test_data_dir());
    qkv_model *m = NULL;
    CHECK_ERR(qkv_model_load(path, &m), QKV_ERR_FORMAT, "not a qkv model file");
    CHECK(m == NULL);
    CHECK_ERR(qkv_model_load("/nonexistent/model.safetensors", &m), QKV_ERR_IO, "nonexistent");
}

/* The configuration comes from the file's header: a header-only file asking for a 10^7 x 64
 * embedding is refused before the 4 blocks of 2.56 GB are allocated (the loader allocated them
 * and only then found the tensors missing; libFuzzer: "out-of-memory (malloc(2560073856))").
 * The file is also refused when its tensors are there but too small to hold the configuration. */
TEST(model_load_bounds_the_configuration_by_the_file) {
    char path[] = "/tmp/qkv_model_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    const char *keys[] = {"qkv.format", "qkv.arch", "qkv.config"};
    const char *values[] = {"1", "encoder",
                            ("{\"arch\":\"encoder\",\"src_vocab\":10000000,\"tgt_vocab\":5,\"d_model\":64,"
                             "\"n_heads\":1,\"dim_feedforward\":8,\"n_encoder_layers\":1,\"n_decoder_layers\":0}")};
    CHECK_OK(qkv_st_save(path, NULL, 0, keys, values, 3));
    qkv_model *m = NULL;
    CHECK_ERR(qkv_model_load(path, &m), QKV_ERR_FORMAT, "describes 640018445 parameter values but the file holds only 0");
    CHECK(m == NULL);
    const float x[4] = {0};
    const qkv_st_tensor t = {"embed.weight", "F32", 1, (const int64_t[]){4}, x};
    CHECK_OK(qkv_st_save(path, &t, 1, keys, values, 3));
    CHECK_ERR(qkv_model_load(path, &m), QKV_ERR_FORMAT, "but the file holds only 4");
    unlink(path);
}

static qkv_model *small_model(qkv_arch arch, qkv_head_kind head) {
    qkv_model_config c = qkv_model_default_config(arch, 4, 2, 1);
    c.src_vocab = 7;
    c.tgt_vocab = arch == QKV_ARCH_ENCODER ? 3 : 7;
    c.dim_feedforward = 6;
    c.dropout = 0;
    c.head = head;
    c.max_len = 16;
    c.pos = QKV_POS_LEARNED;
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&c, 3, &m));
    return m;
}

static qkv_tensor *classify_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    (void)in;
    const qkv_model *m = user;
    /* batch of 2, second row padded after 2 tokens */
    qkv_tensor *ids = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){2, 4}, (int32_t[]){1, 2, 3, 4, 5, 6, 0, 0});
    return m->cfg.arch == QKV_ARCH_ENCODER ? qkv_model_classify(ctx, m, ids, NULL) : qkv_model_lm(ctx, m, ids, NULL);
}

TEST(model_encoder_only_and_decoder_only_shapes_and_gradients) {
    const struct {
        qkv_arch arch;
        qkv_head_kind head;
        int ndim;
        int64_t last;
    } cases[] = {{QKV_ARCH_ENCODER, QKV_HEAD_TOKEN, 3, 3}, {QKV_ARCH_ENCODER, QKV_HEAD_POOLED, 2, 3}, {QKV_ARCH_DECODER, QKV_HEAD_TOKEN, 3, 7}};
    for (size_t k = 0; k < 3; k++) {
        qkv_model *m = small_model(cases[k].arch, cases[k].head);
        if (!m) continue;
        qkv_ctx *ctx = tu_ctx();
        qkv_tensor *y = classify_fn(ctx, NULL, m);
        CHECK_OK(qkv_ctx_status(ctx));
        CHECK(y && y->ndim == cases[k].ndim && y->shape[0] == 2 && y->shape[y->ndim - 1] == cases[k].last);
        qkv_ctx_free(ctx);
#ifdef QKV_DOUBLE
        qkv_tensor *in[64];
        int n = 0;
        for (int64_t i = 0; i < qkv_params_count(m->params) && n < 64; i++) in[n++] = qkv_params_get(m->params, i);
        tu_gradcheck(cases[k].arch == QKV_ARCH_ENCODER ? "encoder-only model" : "decoder-only model", classify_fn, in, n, m, NULL);
#endif
        qkv_model_free(m);
    }
}

TEST(model_lm_is_causal_and_pooled_head_ignores_padding) {
    qkv_model *lm = small_model(QKV_ARCH_DECODER, QKV_HEAD_TOKEN);
    qkv_model *cls = small_model(QKV_ARCH_ENCODER, QKV_HEAD_POOLED);
    if (!lm || !cls) return;
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *a = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, 5}, (int32_t[]){3, 1, 4, 1, 5});
    qkv_tensor *b = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, 5}, (int32_t[]){3, 1, 4, 6, 2});
    qkv_tensor *ya = qkv_model_lm(ctx, lm, a, NULL), *yb = qkv_model_lm(ctx, lm, b, NULL);
    CHECK(ya && yb && memcmp(ya->data, yb->data, sizeof(qkv_real) * 3 * 7) == 0);  /* positions 0..2 */
    CHECK(ya && yb && memcmp(ya->data, yb->data, sizeof(qkv_real) * 5 * 7) != 0);
    /* appending padding does not change a pooled classification */
    qkv_tensor *p1 = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, 3}, (int32_t[]){3, 1, 4});
    qkv_tensor *p2 = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, 5}, (int32_t[]){3, 1, 4, 0, 0});
    qkv_tensor *c1 = qkv_model_classify(ctx, cls, p1, NULL), *c2 = qkv_model_classify(ctx, cls, p2, NULL);
    CHECK_OK(qkv_ctx_status(ctx));
    if (c1 && c2)
        for (int i = 0; i < 3; i++) CHECK_NEAR(((qkv_real *)c1->data)[i], ((qkv_real *)c2->data)[i], 1e-5);
    /* too long, out-of-vocabulary ids: clear errors */
    qkv_tensor *longer = qkv_tensor_zeros(ctx, QKV_I32, 2, (int64_t[]){1, 17});
    CHECK(qkv_model_lm(ctx, lm, longer, NULL) == NULL && strstr(qkv_last_error(), "max_len 16"));
    qkv_ctx_reset(ctx);
    qkv_tensor *oov = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, 2}, (int32_t[]){1, 99});
    CHECK(qkv_model_lm(ctx, lm, oov, NULL) == NULL && strstr(qkv_last_error(), "99"));
    qkv_ctx_free(ctx);
    qkv_model_free(lm);
    qkv_model_free(cls);
}
