/*
 * test_image_model.c: the ViT-style image front-end (src/nn/patch_embed.c). Two small ViTs match
 * PyTorch (scripts/gen_reference.py: vit_fixture; a 4 x 6 two-channel image in 2 x 2 patches,
 * [CLS] + learned positions + pre-LN + GELU, and mean pooling + 2-D sin-cos positions + post-LN
 * + ReLU): patch vectors, logits, label-smoothed loss, every parameter gradient and the pixels'
 * gradient, also after a save + load. Finite differences check the patch path (double build).
 * Properties: the patch vectors of a known image, the 2-D sin-cos table against its closed form,
 * one patch when P is the image size, configuration and input errors with clear messages, the
 * trainer on pixel batches (it learns a two-class toy problem; its checkpoint restores).
 */
#include "fixture.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

/* The fixtures' architecture (vit_fixture): 4 x 6 x 2 images, P 2, C 8, 2 heads, 2 layers. */
static qkv_model_config vit_config(bool class_token, qkv_abs_pos pos, bool norm_first,
                                   qkv_activation act, int32_t window) {
    qkv_model_config c = qkv_model_image_config(4, 6, 2, 2, 5, 8, 2, 2);
    c.image.class_token = class_token;
    c.image.window = window;
    c.pos = pos;
    c.norm_first = norm_first;
    c.activation = act;
    c.dim_feedforward = 16;
    c.dropout = 0;
    return c;
}

static int64_t fixture_param_count(const fixture *f) {
    int64_t n = 0;
    for (int64_t i = 0; i < qkv_st_count(f->file); i++) {
        qkv_st_entry e;
        if (qkv_st_get(f->file, i, &e) == QKV_OK && !strncmp(e.name, "param.", 6)) n++;
    }
    return n;
}

static void vit_parity(const char *file, bool class_token, qkv_abs_pos pos, bool norm_first,
                       qkv_activation act, int32_t window) {
    fixture f;
    if (!fixture_open(&f, file)) return;
    qkv_model_config cfg = vit_config(class_token, pos, norm_first, act, window);
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&cfg, 1, &m));
    if (!m) return;
    /* the same parameter set: every qkv name is read from the file and the counts agree */
    CHECK_MSG(qkv_params_count(m->params) == fixture_param_count(&f),
              "%lld qkv parameters, %lld in %s", (long long)qkv_params_count(m->params),
              (long long)fixture_param_count(&f), file);
    fixture_params(&f, m->params, "param.");
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_training(ctx, true); /* dropout 0: training mode must not change anything */
    qkv_tensor *pixels = fixture_tensor(ctx, &f, "input.pixels", QKV_REAL);
    qkv_tensor *labels = fixture_tensor(ctx, &f, "input.labels", QKV_I32);
    qkv_tensor_requires_grad(pixels);
    qkv_tensor *patches = window ? qkv_image_windows(ctx, pixels, 2, window)
                                 : qkv_image_patches(ctx, pixels, 2);
    qkv_tensor *logits = qkv_model_classify_image(ctx, m, pixels, NULL); /* (B, K) */
    qkv_tensor *loss = qkv_cross_entropy(ctx, logits, labels, QKV_NO_LABEL, 0.1);
    CHECK_OK(qkv_ctx_status(ctx));
    if (!qkv_ctx_status(ctx)) {
        CHECK(logits->ndim == 2 && logits->shape[0] == 3 && logits->shape[1] == 5);
        expect_close(&f, "image patches", patches->data, "out.patches", qkv_tensor_numel(patches));
        expect_close(&f, "vit logits", logits->data, "out.logits", qkv_tensor_numel(logits));
        expect_close(&f, "vit loss", loss->data, "out.loss", 1);
        CHECK_OK(qkv_backward(ctx, loss));
        expect_param_grads(&f, m->params, file);
        expect_close(&f, "vit grad of the pixels", pixels->grad, "grad.input.pixels",
                     qkv_tensor_numel(pixels));
    }
    /* the model file round-trips: configuration and parameters */
    qkv_model *back = tu_model_roundtrip(m);
    if (back) {
        CHECK(back->cfg.image.height == 4 && back->cfg.image.width == 6 &&
              back->cfg.image.channels == 2 && back->cfg.image.patch_size == 2 &&
              back->cfg.image.class_token == class_token && back->cfg.pos == pos &&
              qkv_image_config_window(&back->cfg.image) == (window ? window : 2));
        qkv_ctx_reset(ctx);
        qkv_ctx_set_grad_enabled(ctx, false);
        qkv_tensor *again = qkv_model_classify_image(
            ctx, back, fixture_tensor(ctx, &f, "input.pixels", QKV_REAL), NULL);
        CHECK_OK(qkv_ctx_status(ctx));
        if (again)
            expect_close(&f, "vit logits after save + load", again->data, "out.logits",
                         qkv_tensor_numel(again));
    }
    qkv_model_free(back);
    qkv_ctx_free(ctx);
    qkv_model_free(m);
    qkv_st_close(f.file);
}

TEST(image_model_matches_pytorch_cls_learned_pre_ln) {
    vit_parity("ref_vit_cls_learned.safetensors", true, QKV_POS_LEARNED, true, QKV_ACT_GELU, 0);
}
TEST(image_model_matches_pytorch_mean_sincos_post_ln) {
    vit_parity("ref_vit_mean_sincos.safetensors", false, QKV_POS_SINCOS_2D, false, QKV_ACT_RELU, 0);
}
/* 4 x 4 windows around the 2 x 2 patches: PyTorch's tokens are F.unfold's, and the fixture's
 * generator checks its Linear against Conv2d(kernel 4, stride 2, padding 1) */
TEST(image_model_matches_pytorch_overlapping_windows) {
    vit_parity("ref_vit_window.safetensors", false, QKV_POS_SINCOS_2D, true, QKV_ACT_GELU, 4);
}

/* pixel (b, r, c, ch) = 1000 b + 100 r + 10 c + ch: every value names its place */
static qkv_tensor *coded_image(qkv_ctx *ctx, int64_t B, int64_t H, int64_t W, int64_t Ch) {
    qkv_tensor *x = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){B, H, W, Ch});
    if (!x) return NULL;
    for (int64_t b = 0; b < B; b++)
        for (int64_t r = 0; r < H; r++)
            for (int64_t c = 0; c < W; c++)
                for (int64_t ch = 0; ch < Ch; ch++)
                    ((qkv_real *)x->data)[((b * H + r) * W + c) * Ch + ch] =
                        (qkv_real)(1000 * b + 100 * r + 10 * c + ch);
    return x;
}

TEST(image_patches_of_a_known_image) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = coded_image(ctx, 2, 4, 6, 2);
    qkv_tensor *p = qkv_image_patches(ctx, x, 2); /* (2, 6, 8): grid 2 x 3 */
    CHECK_OK(qkv_ctx_status(ctx));
    if (p) {
        CHECK(p->ndim == 3 && p->shape[0] == 2 && p->shape[1] == 6 && p->shape[2] == 8);
        /* image 1, patch (1, 2) = n 5: rows 2..3, columns 4..5, in (row, column, channel) order */
        const double want[8] = {1240, 1241, 1250, 1251, 1340, 1341, 1350, 1351};
        for (int k = 0; k < 8; k++)
            CHECK_NEAR(((qkv_real *)p->data)[(6 + 5) * 8 + k], want[k], 0);
        /* image 0, patch (0, 1) = n 1 */
        const double want01[8] = {20, 21, 30, 31, 120, 121, 130, 131};
        for (int k = 0; k < 8; k++)
            CHECK_NEAR(((qkv_real *)p->data)[1 * 8 + k], want01[k], 0);
    }
    /* P = 1: every pixel is a token, in raster order, its channels its vector */
    qkv_tensor *px = qkv_image_patches(ctx, x, 1);
    CHECK(px && px->shape[1] == 24 && px->shape[2] == 2);
    if (px) CHECK(memcmp(px->data, x->data, sizeof(qkv_real) * 96) == 0);
    /* P = the image size (square): one patch, the image row-major */
    qkv_tensor *sq = coded_image(ctx, 1, 4, 4, 1);
    qkv_tensor *one = qkv_image_patches(ctx, sq, 4);
    CHECK(one && one->shape[0] == 1 && one->shape[1] == 1 && one->shape[2] == 16);
    if (one) CHECK(memcmp(one->data, sq->data, sizeof(qkv_real) * 16) == 0);
    CHECK_OK(qkv_ctx_status(ctx));
    /* errors name the problem */
    TU_EXPECT_FAIL(ctx, qkv_image_patches(ctx, coded_image(ctx, 1, 4, 6, 1), 4), QKV_ERR_SHAPE,
                   "image_patches", "4 x 6 image is not divisible into 4 x 4");
    TU_EXPECT_FAIL(ctx, qkv_image_patches(ctx, coded_image(ctx, 1, 4, 6, 1), 0), QKV_ERR_SHAPE,
                   "image_patches", "0 x 0 patches");
    qkv_tensor *flat = qkv_tensor_zeros(ctx, QKV_REAL, 3, (int64_t[]){1, 4, 4});
    TU_EXPECT_FAIL(ctx, qkv_image_patches(ctx, flat, 2), QKV_ERR_SHAPE, "image_patches",
                   "(B, height, width, channels)");
    qkv_tensor *ints = qkv_tensor_zeros(ctx, QKV_I32, 4, (int64_t[]){1, 4, 4, 1});
    TU_EXPECT_FAIL(ctx, qkv_image_patches(ctx, ints, 2), QKV_ERR_SHAPE, "image_patches", "pixels");
    qkv_ctx_free(ctx);
}

TEST(image_windows_of_a_known_image) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = coded_image(ctx, 2, 4, 6, 2);
    qkv_tensor *w = qkv_image_windows(ctx, x, 2, 4); /* (2, 6, 32): 4 x 4 windows, padding 1 */
    CHECK_OK(qkv_ctx_status(ctx));
    if (w) {
        CHECK(w->ndim == 3 && w->shape[0] == 2 && w->shape[1] == 6 && w->shape[2] == 32);
        /* image 1, patch (1, 2) = n 5: rows 1..4, columns 3..6; row 4 and column 6 are padding */
        const double want[32] = {1130, 1131, 1140, 1141, 1150, 1151, 0, 0,    /* row 1 */
                                 1230, 1231, 1240, 1241, 1250, 1251, 0, 0,    /* row 2 */
                                 1330, 1331, 1340, 1341, 1350, 1351, 0, 0,    /* row 3 */
                                 0,    0,    0,    0,    0,    0,    0, 0};   /* row 4 */
        for (int k = 0; k < 32; k++)
            CHECK_NEAR(((qkv_real *)w->data)[(6 + 5) * 32 + k], want[k], 0);
        /* image 1, patch (0, 1) = n 1: rows -1..2, columns 1..4 */
        const double want01[32] = {0,    0,    0,    0,    0,    0,    0,    0,
                                   1010, 1011, 1020, 1021, 1030, 1031, 1040, 1041,
                                   1110, 1111, 1120, 1121, 1130, 1131, 1140, 1141,
                                   1210, 1211, 1220, 1221, 1230, 1231, 1240, 1241};
        for (int k = 0; k < 32; k++)
            CHECK_NEAR(((qkv_real *)w->data)[(6 + 1) * 32 + k], want01[k], 0);
    }
    /* P = 1, K = 3: the 3 x 3 neighbourhood of every pixel (a 3 x 3 convolution's input) */
    qkv_tensor *small = coded_image(ctx, 1, 2, 3, 1);
    qkv_tensor *w3 = qkv_image_windows(ctx, small, 1, 3);
    CHECK(w3 && w3->shape[1] == 6 && w3->shape[2] == 9);
    if (w3) { /* pixel (1, 2), the bottom-right corner */
        const double want12[9] = {1, 2, 0, 11, 12, 0, 0, 0, 0};
        for (int k = 0; k < 9; k++) CHECK_NEAR(((qkv_real *)w3->data)[5 * 9 + k], want12[k] * 10, 0);
    }
    /* a window of the patch size is the patches */
    qkv_tensor *same = qkv_image_windows(ctx, x, 2, 2), *p = qkv_image_patches(ctx, x, 2);
    CHECK(same && p && qkv_tensor_numel(same) == qkv_tensor_numel(p));
    if (same && p) CHECK(memcmp(same->data, p->data, sizeof(qkv_real) * 96) == 0);
    /* the gradient: each pixel receives once per window that reads it (dy = 1) */
    qkv_tensor *g = coded_image(ctx, 1, 4, 4, 1);
    qkv_tensor_requires_grad(g);
    qkv_tensor *gw = qkv_image_windows(ctx, g, 2, 4); /* 2 x 2 windows over a 4 x 4 image */
    CHECK_OK(qkv_backward(ctx, qkv_sum(ctx, gw)));
    if (g->grad) { /* rows 0 and 3 are read by one window row, rows 1 and 2 by both */
        const double reads[4] = {1, 2, 2, 1};
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 4; c++)
                CHECK_NEAR(((qkv_real *)g->grad)[r * 4 + c], reads[r] * reads[c], 0);
    }
    CHECK_OK(qkv_ctx_status(ctx));
    /* errors name the problem */
    TU_EXPECT_FAIL(ctx, qkv_image_windows(ctx, coded_image(ctx, 1, 4, 6, 1), 2, 3), QKV_ERR_SHAPE,
                   "image_windows", "window 3 must be at least the patch size 2");
    TU_EXPECT_FAIL(ctx, qkv_image_windows(ctx, coded_image(ctx, 1, 4, 6, 1), 2, 1), QKV_ERR_SHAPE,
                   "image_windows", "window 1");
    TU_EXPECT_FAIL(ctx, qkv_image_windows(ctx, coded_image(ctx, 1, 4, 6, 1), 2, 8), QKV_ERR_SHAPE,
                   "image_windows", "window 8 must be");
    TU_EXPECT_FAIL(ctx, qkv_image_windows(ctx, coded_image(ctx, 1, 4, 6, 1), 2, 1 << 30),
                   QKV_ERR_SHAPE, "image_windows", "window 1073741824");
    TU_EXPECT_FAIL(ctx, qkv_image_windows(ctx, coded_image(ctx, 1, 4, 6, 1), 4, 6), QKV_ERR_SHAPE,
                   "image_windows", "4 x 6 image is not divisible into 4 x 4");
    qkv_ctx_free(ctx);
}

TEST(sincos_2d_positions_closed_form) {
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *pe = qkv_sincos_2d_pe(ctx, 3, 4, 8); /* Q = 2: w = 1, 1/100 */
    CHECK_OK(qkv_ctx_status(ctx));
    if (pe) {
        CHECK(pe->ndim == 2 && pe->shape[0] == 12 && pe->shape[1] == 8);
        const int cells[3][2] = {{0, 0}, {2, 1}, {1, 3}};
        for (int i = 0; i < 3; i++) {
            const double r = cells[i][0], c = cells[i][1];
            const double want[8] = {sin(r), sin(r / 100), cos(r), cos(r / 100),
                                    sin(c), sin(c / 100), cos(c), cos(c / 100)};
            const qkv_real *row = ((qkv_real *)pe->data) + (cells[i][0] * 4 + cells[i][1]) * 8;
            for (int k = 0; k < 8; k++)
                CHECK_NEAR(row[k], want[k], 1e-7);
        }
    }
    /* C = 12, Q = 3: w_1 = 10000^(-1/3) */
    qkv_tensor *pe12 = qkv_sincos_2d_pe(ctx, 2, 2, 12);
    if (pe12) {
        const qkv_real *cell = ((qkv_real *)pe12->data) + 3 * 12; /* (1, 1) */
        CHECK_NEAR(cell[1], sin(pow(10000.0, -1.0 / 3)), 1e-7);
        CHECK_NEAR(cell[3 + 2], cos(pow(10000.0, -2.0 / 3)), 1e-7);
        CHECK_NEAR(cell[9 + 2], cos(pow(10000.0, -2.0 / 3)), 1e-7);
    }
    CHECK(!(pe && pe->flags & QKV_REQUIRES_GRAD));
    TU_EXPECT_FAIL(ctx, qkv_sincos_2d_pe(ctx, 2, 2, 6), QKV_ERR_INVALID_ARG, "sincos_2d_pe",
                   "multiple of 4");
    TU_EXPECT_FAIL(ctx, qkv_sincos_2d_pe(ctx, -1, 2, 8), QKV_ERR_INVALID_ARG, "sincos_2d_pe",
                   "-1 x 2");
    qkv_ctx_free(ctx);
}

static qkv_model *tiny_image_model(int32_t size, int32_t patch, bool class_token, qkv_abs_pos pos) {
    qkv_model_config c = qkv_model_image_config(size, size, 1, patch, 3, 4, 2, 1);
    c.image.class_token = class_token;
    c.pos = pos;
    c.dim_feedforward = 6;
    c.dropout = 0;
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&c, 5, &m));
    return m;
}

TEST(image_model_one_patch_and_attention_weights) {
    /* P = image size: one patch; with [CLS] two tokens; mean pooling reads the patch alone */
    qkv_model *cls = tiny_image_model(4, 4, true, QKV_POS_LEARNED);
    qkv_model *mean = tiny_image_model(4, 4, false, QKV_POS_NONE);
    if (!cls || !mean) return;
    CHECK(cls->pos_embedding && cls->pos_embedding->shape[1] == 2 && cls->class_token);
    CHECK(mean->class_token == NULL && mean->pos_embedding == NULL && mean->src_embed == NULL);
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *x = qkv_tensor_new(ctx, QKV_REAL, 4, (int64_t[]){2, 4, 4, 1});
    if (x) tu_fill_uniform(((qkv_real *)x->data), 32, 0, 1, 9);
    qkv_tensor *w = NULL;
    qkv_tensor *y = qkv_model_classify_image(ctx, cls, x, &w);
    CHECK_OK(qkv_ctx_status(ctx));
    CHECK(y && y->shape[0] == 2 && y->shape[1] == 3);
    CHECK(w && w->ndim == 4 && w->shape[0] == 2 && w->shape[1] == 2 && w->shape[2] == 2 &&
          w->shape[3] == 2);
    /* with one token, attention is the identity mix: the weights are all 1 */
    qkv_tensor *w1 = NULL;
    qkv_tensor *y1 = qkv_model_classify_image(ctx, mean, x, &w1);
    CHECK(y1 && w1 && w1->shape[2] == 1 && w1->shape[3] == 1);
    if (w1) CHECK(((qkv_real *)w1->data)[0] == 1 && ((qkv_real *)w1->data)[1] == 1);
    CHECK_OK(qkv_ctx_status(ctx));
    qkv_ctx_free(ctx);
    qkv_model_free(cls);
    qkv_model_free(mean);
}

TEST(image_model_config_errors_and_json) {
    qkv_model_config c = qkv_model_image_config(8, 8, 1, 2, 10, 16, 2, 2);
    CHECK_OK(qkv_model_config_check(&c));
    CHECK(qkv_model_is_image(&c) && c.max_len == 17 && c.head == QKV_HEAD_POOLED &&
          !c.scale_embeddings);
    c.pos = QKV_POS_SINCOS_2D;
    char json[4096];
    CHECK_OK(qkv_model_config_to_json(&c, json, sizeof json));
    CHECK(strstr(json, "\"image\":{\"height\":8,\"width\":8,\"channels\":1,\"patch_size\":2,"
                       "\"class_token\":true}"));
    CHECK(strstr(json, "\"pos\":\"sincos_2d\""));
    qkv_model_config back;
    CHECK_OK(qkv_model_config_from_json(json, &back));
    CHECK(back.image.height == 8 && back.image.patch_size == 2 && back.image.class_token &&
          back.pos == QKV_POS_SINCOS_2D);
    /* a window is written only when the tokens overlap, and read back */
    qkv_model_config wc = c;
    wc.image.window = 4;
    CHECK_OK(qkv_model_config_check(&wc));
    CHECK_OK(qkv_model_config_to_json(&wc, json, sizeof json));
    CHECK(strstr(json, "\"patch_size\":2,\"window\":4,\"class_token\":true}"));
    CHECK_OK(qkv_model_config_from_json(json, &back));
    CHECK(back.image.window == 4 && qkv_image_config_window(&back.image) == 4);
    wc.image.window = 2; /* = the patch: the plain model's JSON */
    CHECK_OK(qkv_model_config_to_json(&wc, json, sizeof json));
    CHECK(!strstr(json, "window"));
    qkv_model *wm = NULL;
    wc.image.window = 6;
    CHECK_OK(qkv_model_new(&wc, 1, &wm));
    CHECK(wm && wm->patch_w->shape[1] == 36); /* D = 6 x 6 x 1 */
    qkv_model_free(wm);
    /* token models write no image key (their files are unchanged) */
    qkv_model_config tok = qkv_model_default_config(QKV_ARCH_ENCODER, 8, 2, 1);
    tok.src_vocab = tok.tgt_vocab = 5;
    CHECK_OK(qkv_model_config_to_json(&tok, json, sizeof json));
    CHECK(!strstr(json, "image") && !qkv_model_is_image(&tok));
    CHECK_ERR(qkv_model_config_from_json(
                  "{\"arch\":\"encoder\",\"image\":{\"height\":8,\"patch\":2}}", &back),
              QKV_ERR_INVALID_ARG, "image.patch");
    CHECK_ERR(qkv_model_config_from_json("{\"arch\":\"encoder\",\"image\":[8,8]}", &back),
              QKV_ERR_INVALID_ARG, "\"image\" must be an object");
    /* each bad field is named */
    qkv_model_config e = c;
    e.image.patch_size = 3;
    CHECK_ERR(qkv_model_config_check(&e), QKV_ERR_INVALID_ARG,
              "image 8 x 8 is not divisible into 3 x 3 patches");
    e = c;
    e.image.window = 3;
    CHECK_ERR(qkv_model_config_check(&e), QKV_ERR_INVALID_ARG, "window 3 must be at least patch_size 2");
    e.image.window = 1;
    CHECK_ERR(qkv_model_config_check(&e), QKV_ERR_INVALID_ARG, "window 1");
    e.image.window = 8; /* 3 pixels of padding: past the neighbouring patches */
    CHECK_ERR(qkv_model_config_check(&e), QKV_ERR_INVALID_ARG, "window 8");
    e.image.window = 6;
    CHECK_OK(qkv_model_config_check(&e));
    e = c;
    e.image.width = 0;
    CHECK_ERR(qkv_model_config_check(&e), QKV_ERR_INVALID_ARG, "width 0");
    e = c;
    e.image.channels = -1;
    CHECK_ERR(qkv_model_config_check(&e), QKV_ERR_INVALID_ARG, "channels -1");
    e = c;
    e.src_vocab = 17;
    CHECK_ERR(qkv_model_config_check(&e), QKV_ERR_INVALID_ARG, "src_vocab must be 0");
    e = c;
    e.head = QKV_HEAD_TOKEN;
    CHECK_ERR(qkv_model_config_check(&e), QKV_ERR_INVALID_ARG, "head must be \"pooled\"");
    e = c;
    e.scale_embeddings = true;
    CHECK_ERR(qkv_model_config_check(&e), QKV_ERR_INVALID_ARG, "scale_embeddings");
    e = c;
    e.max_len = 16;
    CHECK_ERR(qkv_model_config_check(&e), QKV_ERR_INVALID_ARG,
              "17 tokens of an image (16 patches + [CLS])");
    e = c;
    e.d_model = 6; /* 2 heads of 3: fine for learned positions, not for sin-cos */
    CHECK_ERR(qkv_model_config_check(&e), QKV_ERR_INVALID_ARG, "sincos_2d needs d_model 6");
    e.pos = QKV_POS_LEARNED;
    CHECK_OK(qkv_model_config_check(&e));
    e = c;
    e.arch = QKV_ARCH_DECODER;
    e.n_encoder_layers = 2;
    CHECK_ERR(qkv_model_config_check(&e), QKV_ERR_INVALID_ARG, "encoder-only");
    tok.image.window = 4;
    CHECK_ERR(qkv_model_config_check(&tok), QKV_ERR_INVALID_ARG, "image.window 4 is set on a model that reads tokens");
    tok.image.window = 0;
    tok.pos = QKV_POS_SINCOS_2D;
    CHECK_ERR(qkv_model_config_check(&tok), QKV_ERR_INVALID_ARG, "sincos_2d is for image models");
    qkv_model *m = NULL;
    e = c;
    e.image.patch_size = 3;
    CHECK_ERR(qkv_model_new(&e, 1, &m), QKV_ERR_INVALID_ARG, "not divisible");
    CHECK(m == NULL);
}

TEST(image_model_bad_inputs_are_errors) {
    qkv_model *m = tiny_image_model(4, 2, true, QKV_POS_LEARNED);
    qkv_model_config tc = qkv_model_default_config(QKV_ARCH_ENCODER, 4, 2, 1);
    tc.src_vocab = 5;
    tc.tgt_vocab = 3;
    tc.head = QKV_HEAD_POOLED;
    qkv_model *tok = NULL;
    CHECK_OK(qkv_model_new(&tc, 1, &tok));
    if (!m || !tok) return;
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *wrong = qkv_tensor_zeros(ctx, QKV_REAL, 4, (int64_t[]){2, 4, 3, 1});
    TU_EXPECT_FAIL(ctx, qkv_model_classify_image(ctx, m, wrong, NULL), QKV_ERR_SHAPE,
                   "model_classify_image", "do not match the model's images (B, 4, 4, 1)");
    qkv_tensor *three = qkv_tensor_zeros(ctx, QKV_REAL, 3, (int64_t[]){2, 4, 4});
    TU_EXPECT_FAIL(ctx, qkv_model_classify_image(ctx, m, three, NULL), QKV_ERR_SHAPE,
                   "model_classify_image", "(2, 4, 4)");
    qkv_tensor *ints = qkv_tensor_zeros(ctx, QKV_I32, 4, (int64_t[]){2, 4, 4, 1});
    TU_EXPECT_FAIL(ctx, qkv_model_classify_image(ctx, m, ints, NULL), QKV_ERR_SHAPE,
                   "model_classify_image", "pixels");
    qkv_tensor *ids = qkv_tensor_zeros(ctx, QKV_I32, 2, (int64_t[]){2, 4});
    TU_EXPECT_FAIL(ctx, qkv_model_classify(ctx, m, ids, NULL), QKV_ERR_INVALID_ARG,
                   "model_classify", "qkv_model_classify_image");
    qkv_tensor *ok = qkv_tensor_zeros(ctx, QKV_REAL, 4, (int64_t[]){2, 4, 4, 1});
    TU_EXPECT_FAIL(ctx, qkv_model_classify_image(ctx, tok, ok, NULL), QKV_ERR_INVALID_ARG,
                   "model_classify_image", "needs an image model");
    TU_EXPECT_FAIL(
        ctx,
        qkv_model_classify_image(ctx, NULL,
                                 qkv_tensor_zeros(ctx, QKV_REAL, 4, (int64_t[]){1, 4, 4, 1}), NULL),
        QKV_ERR_INVALID_ARG, "model_classify_image", "image model");
    qkv_ctx_free(ctx);

    /* the trainer: pixel batches are checked against the model */
    qkv_train_config tcfg = qkv_train_default_config();
    qkv_trainer *t = NULL;
    CHECK_OK(qkv_trainer_new(m, &tcfg, &t));
    qkv_real pixels[2 * 16] = {0};
    int32_t labels[2] = {1, 2};
    qkv_train_batch b = {.batch = 2, .labels = labels};
    CHECK_ERR(qkv_trainer_step(t, &b, NULL), QKV_ERR_INVALID_ARG, "no pixels");
    b.pixels = pixels;
    b.image_shape[0] = 4, b.image_shape[1] = 2, b.image_shape[2] = 2;
    CHECK_ERR(qkv_trainer_step(t, &b, NULL), QKV_ERR_SHAPE,
              "batch images 4 x 2 x 2 do not match the model's 4 x 4 x 1");
    b.image_shape[1] = 4, b.image_shape[2] = 1;
    labels[1] = 3; /* 3 classes: 0 .. 2 */
    CHECK(qkv_trainer_step(t, &b, NULL) != QKV_OK);
    CHECK(qkv_trainer_steps(t) == 0);
    qkv_trainer_free(t);
    qkv_model_free(m);
    qkv_model_free(tok);
}

/* ---- gradients (double build) ------------------------------------------------------------ */

static qkv_tensor *image_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    return qkv_model_classify_image(ctx, user, in[0], NULL);
}

TEST(image_model_gradcheck_patch_path) {
    TU_NEED_DOUBLE();
    const struct {
        bool cls;
        qkv_abs_pos pos;
        int32_t window;
        const char *name;
    } cases[] = {{true, QKV_POS_LEARNED, 0, "image model, [CLS], learned positions"},
                 {false, QKV_POS_SINCOS_2D, 0, "image model, mean, sin-cos"},
                 {false, QKV_POS_SINCOS_2D, 4, "image model, 4 x 4 windows, mean, sin-cos"}};
    for (int k = 0; k < 3; k++) {
        /* a 4 x 6 two-channel image in 2 x 2 patches */
        qkv_model_config c = qkv_model_image_config(4, 6, 2, 2, 3, 4, 2, 1);
        c.image.class_token = cases[k].cls;
        c.image.window = cases[k].window;
        c.pos = cases[k].pos;
        c.dim_feedforward = 6;
        c.dropout = 0;
        qkv_model *m = NULL;
        CHECK_OK(qkv_model_new(&c, 11, &m));
        if (!m) continue;
        qkv_tensor *pixels = tu_rand(4, (int64_t[]){2, 4, 6, 2}, 0, 1, 13);
        qkv_tensor *in[8] = {pixels, m->patch_w, m->patch_b};
        int n = 3;
        if (m->class_token) in[n++] = m->class_token;
        if (m->pos_embedding) in[n++] = m->pos_embedding;
        in[n++] = m->out_w; /* the head sees the pooled vector */
        pixels->flags |= QKV_REQUIRES_GRAD;
        tu_gradcheck(cases[k].name, image_fn, in, n, m, NULL);
        tu_free(pixels);
        qkv_model_free(m);
    }
}

/* ---- the trainer on pixel batches --------------------------------------------------------- */

TEST(image_model_trainer_learns_a_toy_problem) {
    /* 4 x 4 images: class 0 has a bright top half, class 1 a bright bottom half, plus noise */
    qkv_model_config c = qkv_model_image_config(4, 4, 1, 2, 2, 8, 2, 1);
    c.dropout = 0.1;
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&c, 3, &m));
    if (!m) return;
    enum { B = 16 };
    qkv_real pixels[B * 16];
    int32_t labels[B];
    tu_fill_uniform(pixels, B * 16, 0, 0.3, 17);
    for (int b = 0; b < B; b++) {
        labels[b] = b % 2;
        for (int i = 0; i < 8; i++)
            pixels[b * 16 + (labels[b] ? 8 : 0) + i] += 0.7f;
    }
    qkv_train_config tc = qkv_train_default_config();
    tc.schedule = (qkv_lr_schedule){.kind = QKV_LR_CONSTANT, .base_lr = 1e-2};
    qkv_trainer *t = NULL;
    CHECK_OK(qkv_trainer_new(m, &tc, &t));
    qkv_train_batch b = {.batch = B, .labels = labels, .pixels = pixels, .image_shape = {4, 4, 1}};
    double first = 0, loss = 0;
    for (int s = 0; s < 40 && t; s++) {
        qkv_step_stats st;
        CHECK_OK(qkv_trainer_step(t, &b, &st));
        if (s == 0) first = st.loss;
        CHECK(st.tokens == B);
    }
    int64_t n = 0;
    CHECK_OK(qkv_trainer_eval_loss(t, &b, &loss, &n));
    CHECK_MSG(loss < 0.5 * first, "loss %g after 40 steps, %g at the first", loss, first);
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *pred = qkv_argmax(
        ctx, qkv_model_classify_image(
                 ctx, m, qkv_tensor_from(ctx, QKV_REAL, 4, (int64_t[]){B, 4, 4, 1}, pixels), NULL));
    CHECK_OK(qkv_ctx_status(ctx));
    int right = 0;
    for (int i = 0; pred && i < B; i++)
        right += ((int32_t *)pred->data)[i] == labels[i];
    CHECK_MSG(right == B, "%d of %d training images right", right, B);
    qkv_ctx_free(ctx);
    /* a checkpoint of the image model restores it into a fresh trainer */
    char path[] = "/tmp/qkv_vit_ckpt_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    qkv_model *m2 = NULL;
    qkv_trainer *t2 = NULL;
    CHECK_OK(qkv_trainer_save(t, path, 0, 0, 0));
    CHECK_OK(qkv_model_new(&c, 99, &m2));
    if (m2) CHECK_OK(qkv_trainer_new(m2, &tc, &t2));
    if (t2) CHECK_OK(qkv_trainer_load(t2, path, NULL, NULL, NULL));
    if (t2)
        CHECK(qkv_trainer_steps(t2) == 40 &&
              !memcmp(qkv_params_block(m->params, QKV_BLOCK_DATA),
                      qkv_params_block(m2->params, QKV_BLOCK_DATA),
                      sizeof(qkv_real) * (size_t)qkv_params_numel(m->params)));
    unlink(path);
    qkv_trainer_free(t2);
    qkv_model_free(m2);
    qkv_trainer_free(t);
    qkv_model_free(m);
}
