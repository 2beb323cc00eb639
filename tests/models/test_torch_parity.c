/*
 * test_torch_parity.c: qkv against PyTorch 1.13 on the fixtures of scripts/gen_reference.py
 * (computed in float64): nn.MultiheadAttention with key-padding and causal masks (outputs, every
 * head's weights, gradients of parameters and inputs), nn.TransformerEncoderLayer and
 * nn.TransformerDecoderLayer (post-LN and pre-LN), LayerNorm, GELU (erf, tanh), cross-entropy
 * with ignore_index and label smoothing, and 10 AdamW steps of a small tagger.
 *
 * Tolerance: |qkv - torch| <= tol * max(1, |torch|), tol = 1e-5 in the float build, 1e-10 in the
 * double build (which sees the same float64 numbers as torch).
 */
#include "fixture.h"

TEST(torch_parity_multihead_attention) {
    fixture f;
    if (!fixture_open(&f, "ref_mha.safetensors")) return;
    qkv_params *p = NULL;
    CHECK_OK(qkv_params_new(&p));
    qkv_mha mha;
    qkv_mha_config cfg = qkv_mha_default_config(8, 2);
    CHECK_OK(qkv_mha_init(&mha, &cfg, p, ""));
    CHECK_OK(qkv_params_finalize(p));
    fixture_params(&f, p, "param.");
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *q = fixture_tensor(ctx, &f, "input.q", QKV_REAL);
    qkv_tensor *kv = fixture_tensor(ctx, &f, "input.kv", QKV_REAL);
    qkv_tensor_requires_grad(q);
    qkv_tensor_requires_grad(kv);
    qkv_mask pad_self = qkv_mask_none(), causal = qkv_mask_none(), pad_cross = qkv_mask_none();
    pad_self.key_padding = fixture_tensor(ctx, &f, "input.pad_self", QKV_I32);
    pad_cross.key_padding = fixture_tensor(ctx, &f, "input.pad_cross", QKV_I32);
    causal.causal = true;
    qkv_tensor *w_pad, *w_causal, *w_cross;
    qkv_tensor *y_pad = qkv_mha_forward(ctx, &mha, q, q, q, &pad_self, &w_pad);
    qkv_tensor *y_causal = qkv_mha_forward(ctx, &mha, q, q, q, &causal, &w_causal);
    qkv_tensor *y_cross = qkv_mha_forward(ctx, &mha, q, kv, kv, &pad_cross, &w_cross);
    CHECK_OK(qkv_ctx_status(ctx));
    if (!qkv_ctx_status(ctx)) {
        expect_close(&f, "mha self, key padding", y_pad->data, "out.self_pad", qkv_tensor_numel(y_pad));
        expect_close(&f, "mha self, causal", y_causal->data, "out.self_causal", qkv_tensor_numel(y_causal));
        expect_close(&f, "mha cross, key padding", y_cross->data, "out.cross", qkv_tensor_numel(y_cross));
        expect_close(&f, "weights self pad", w_pad->data, "out.weights_self_pad", qkv_tensor_numel(w_pad));
        expect_close(&f, "weights causal", w_causal->data, "out.weights_causal", qkv_tensor_numel(w_causal));
        expect_close(&f, "weights cross", w_cross->data, "out.weights_cross", qkv_tensor_numel(w_cross));
        qkv_tensor *loss = dot_loss(ctx, &f, NULL, y_pad, "dout.self_pad");
        loss = dot_loss(ctx, &f, loss, y_causal, "dout.self_causal");
        loss = dot_loss(ctx, &f, loss, y_cross, "dout.cross");
        loss = dot_loss(ctx, &f, loss, w_pad, "dout.weights_self_pad");
        loss = dot_loss(ctx, &f, loss, w_causal, "dout.weights_causal");
        loss = dot_loss(ctx, &f, loss, w_cross, "dout.weights_cross");
        CHECK_OK(qkv_backward(ctx, loss));
        expect_param_grads(&f, p, "mha");
        expect_close(&f, "mha grad q", q->grad, "grad.input.q", qkv_tensor_numel(q));
        expect_close(&f, "mha grad kv", kv->grad, "grad.input.kv", qkv_tensor_numel(kv));
    }
    /* The fused path (no weights requested) gives the same outputs. */
    qkv_ctx_reset(ctx);
    qkv_ctx_set_grad_enabled(ctx, false);
    q = fixture_tensor(ctx, &f, "input.q", QKV_REAL);
    pad_self.key_padding = fixture_tensor(ctx, &f, "input.pad_self", QKV_I32);
    qkv_tensor *fused_pad = qkv_mha_forward(ctx, &mha, q, q, q, &pad_self, NULL);
    qkv_tensor *fused_causal = qkv_mha_forward(ctx, &mha, q, q, q, &causal, NULL);
    CHECK_OK(qkv_ctx_status(ctx));
    if (!qkv_ctx_status(ctx)) {
        expect_close(&f, "fused mha self, key padding", fused_pad->data, "out.self_pad", qkv_tensor_numel(fused_pad));
        expect_close(&f, "fused mha self, causal", fused_causal->data, "out.self_causal", qkv_tensor_numel(fused_causal));
    }
    qkv_ctx_free(ctx);
    qkv_params_free(p);
    qkv_st_close(f.file);
}

static void layer_case(const char *file, bool decoder, bool norm_first) {
    fixture f;
    if (!fixture_open(&f, file)) return;
    qkv_params *p = NULL;
    CHECK_OK(qkv_params_new(&p));
    qkv_layer layer;
    qkv_layer_config cfg = qkv_layer_default_config(8, 2, 16);
    cfg.norm_first = norm_first;
    cfg.dropout = 0;
    cfg.self_attn.dropout = cfg.cross_attn.dropout = 0;
    CHECK_OK(decoder ? qkv_decoder_layer_init(&layer, &cfg, p, "") : qkv_encoder_layer_init(&layer, &cfg, p, ""));
    CHECK_OK(qkv_params_finalize(p));
    CHECK_MSG(qkv_params_count(p) == (decoder ? 18 : 12), "%s: %lld parameters registered", file,
              (long long)qkv_params_count(p));
    fixture_params(&f, p, "param.");
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = fixture_tensor(ctx, &f, "input.x", QKV_REAL);
    qkv_tensor_requires_grad(x);
    qkv_mask self_mask = qkv_mask_none(), cross_mask = qkv_mask_none();
    self_mask.key_padding = fixture_tensor(ctx, &f, "input.pad", QKV_I32);
    qkv_tensor *memory = NULL, *y;
    if (decoder) {
        memory = fixture_tensor(ctx, &f, "input.memory", QKV_REAL);
        qkv_tensor_requires_grad(memory);
        self_mask.causal = true;
        cross_mask.key_padding = fixture_tensor(ctx, &f, "input.memory_pad", QKV_I32);
        y = qkv_decoder_layer_forward(ctx, &layer, x, memory, &self_mask, &cross_mask, NULL, NULL);
    } else {
        y = qkv_encoder_layer_forward(ctx, &layer, x, &self_mask, NULL);
    }
    CHECK_OK(qkv_ctx_status(ctx));
    if (!qkv_ctx_status(ctx)) {
        expect_close(&f, file, y->data, "out.y", qkv_tensor_numel(y));
        CHECK_OK(qkv_backward(ctx, dot_loss(ctx, &f, NULL, y, "dout.y")));
        expect_param_grads(&f, p, file);
        expect_close(&f, "grad x", x->grad, "grad.input.x", qkv_tensor_numel(x));
        if (memory) expect_close(&f, "grad memory", memory->grad, "grad.input.memory", qkv_tensor_numel(memory));
    }
    qkv_ctx_free(ctx);
    qkv_params_free(p);
    qkv_st_close(f.file);
}

TEST(torch_parity_encoder_layer_post_ln) { layer_case("ref_encoder_layer_post.safetensors", false, false); }
TEST(torch_parity_encoder_layer_pre_ln) { layer_case("ref_encoder_layer_pre.safetensors", false, true); }
TEST(torch_parity_decoder_layer_post_ln) { layer_case("ref_decoder_layer_post.safetensors", true, false); }
TEST(torch_parity_decoder_layer_pre_ln) { layer_case("ref_decoder_layer_pre.safetensors", true, true); }

TEST(torch_parity_layernorm_gelu_cross_entropy) {
    fixture f;
    if (!fixture_open(&f, "ref_ops.safetensors")) return;
    qkv_params *p = NULL;
    CHECK_OK(qkv_params_new(&p));
    qkv_tensor *w, *b;
    CHECK_OK(qkv_params_add(p, "weight", 1, (int64_t[]){7}, &w));
    CHECK_OK(qkv_params_add(p, "bias", 1, (int64_t[]){7}, &b));
    CHECK_OK(qkv_params_finalize(p));
    fixture_params(&f, p, "param.");
    qkv_ctx *ctx = tu_ctx();
    qkv_tensor *x = fixture_tensor(ctx, &f, "input.x", QKV_REAL);
    qkv_tensor *g = fixture_tensor(ctx, &f, "input.g", QKV_REAL);
    qkv_tensor *logits = fixture_tensor(ctx, &f, "input.logits", QKV_REAL);
    qkv_tensor *targets = fixture_tensor(ctx, &f, "input.targets", QKV_I32);
    qkv_tensor_requires_grad(x);
    qkv_tensor_requires_grad(g);
    qkv_tensor_requires_grad(logits);
    qkv_tensor *ln = qkv_layernorm(ctx, x, w, b, 1e-5);
    qkv_tensor *ge = qkv_gelu(ctx, g, QKV_GELU_ERF);
    qkv_tensor *gt = qkv_gelu(ctx, g, QKV_GELU_TANH);
    qkv_tensor *ces = qkv_cross_entropy(ctx, logits, targets, -100, 0.1);
    qkv_tensor *cep = qkv_cross_entropy(ctx, logits, targets, -100, 0.0);
    CHECK_OK(qkv_ctx_status(ctx));
    if (!qkv_ctx_status(ctx)) {
        expect_close(&f, "layernorm", ln->data, "out.layernorm", qkv_tensor_numel(ln));
        expect_close(&f, "gelu erf", ge->data, "out.gelu_erf", qkv_tensor_numel(ge));
        expect_close(&f, "gelu tanh", gt->data, "out.gelu_tanh", qkv_tensor_numel(gt));
        expect_close(&f, "cross entropy, smoothing 0.1", ces->data, "out.ce_smooth", 1);
        expect_close(&f, "cross entropy", cep->data, "out.ce_plain", 1);
        qkv_tensor *loss = dot_loss(ctx, &f, NULL, ln, "dout.layernorm");
        loss = dot_loss(ctx, &f, loss, ge, "dout.gelu_erf");
        loss = dot_loss(ctx, &f, loss, gt, "dout.gelu_tanh");
        loss = dot_loss(ctx, &f, loss, ces, "dout.ce_smooth");
        loss = dot_loss(ctx, &f, loss, cep, "dout.ce_plain");
        CHECK_OK(qkv_backward(ctx, loss));
        expect_param_grads(&f, p, "layernorm");
        expect_close(&f, "grad x", x->grad, "grad.input.x", qkv_tensor_numel(x));
        expect_close(&f, "grad g", g->grad, "grad.input.g", qkv_tensor_numel(g));
        expect_close(&f, "grad logits", logits->grad, "grad.input.logits", qkv_tensor_numel(logits));
    }
    qkv_ctx_free(ctx);
    qkv_params_free(p);
    qkv_st_close(f.file);
}

/* 10 AdamW steps of embedding -> post-LN encoder layer -> linear, trained with mean cross-entropy:
 * the loss at every step and the final parameters match torch.optim.AdamW. */
TEST(torch_parity_adamw_ten_steps) {
    fixture f;
    if (!fixture_open(&f, "ref_adamw.safetensors")) return;
    enum { V = 10, C = 8, H = 2, FF = 16, K = 5, B = 3, T = 6, STEPS = 10 };
    qkv_params *p = NULL;
    CHECK_OK(qkv_params_new(&p));
    qkv_tensor *embed, *head_w, *head_b;
    qkv_layer layer;
    qkv_layer_config cfg = qkv_layer_default_config(C, H, FF);
    cfg.dropout = cfg.self_attn.dropout = 0;
    CHECK_OK(qkv_params_add(p, "embed.weight", 2, (int64_t[]){V, C}, &embed));
    CHECK_OK(qkv_encoder_layer_init(&layer, &cfg, p, "layer."));
    CHECK_OK(qkv_params_add(p, "head.weight", 2, (int64_t[]){K, C}, &head_w));
    CHECK_OK(qkv_params_add(p, "head.bias", 1, (int64_t[]){K}, &head_b));
    CHECK_OK(qkv_params_finalize(p));
    fixture_params(&f, p, "init.");
    qkv_optim_config opt = qkv_optim_default(QKV_OPTIM_ADAMW);
    opt.lr = 1e-2;
    opt.beta1 = 0.9;
    opt.beta2 = 0.98;
    opt.eps = 1e-9;
    opt.weight_decay = 0.01;
    qkv_real losses[STEPS];
    qkv_ctx *ctx = tu_ctx();
    for (int step = 1; step <= STEPS; step++) {
        qkv_ctx_reset(ctx);
        qkv_ctx_set_training(ctx, true);
        qkv_tensor *ids = fixture_tensor(ctx, &f, "input.ids", QKV_I32);
        qkv_tensor *labels = fixture_tensor(ctx, &f, "input.labels", QKV_I32);
        qkv_tensor *h = qkv_encoder_layer_forward(ctx, &layer, qkv_embedding(ctx, embed, ids), NULL, NULL);
        qkv_tensor *logits = qkv_reshape(ctx, qkv_linear(ctx, h, head_w, head_b), 2, (int64_t[]){B * T, K});
        qkv_tensor *flat = qkv_reshape(ctx, labels, 1, (int64_t[]){B * T});
        qkv_tensor *loss = qkv_cross_entropy(ctx, logits, flat, -100, 0);
        CHECK_OK(qkv_ctx_status(ctx));
        if (qkv_ctx_status(ctx)) break;
        losses[step - 1] = ((qkv_real *)loss->data)[0];
        qkv_params_zero_grad(p);
        CHECK_OK(qkv_backward(ctx, loss));
        CHECK_OK(qkv_optim_step(p, &opt, step, opt.lr));
    }
    expect_close(&f, "AdamW loss trajectory", losses, "out.losses", STEPS);
    for (int64_t i = 0; i < qkv_params_count(p); i++) {
        qkv_tensor *t = qkv_params_get(p, i);
        char key[256], label[300];
        snprintf(key, sizeof key, "final.%s", t->name);
        snprintf(label, sizeof label, "after 10 AdamW steps: %s", t->name);
        if (t == layer.self_attn.in_proj_bias) {
            /* The key third of in_proj_bias has an exactly zero gradient (softmax ignores a constant
             * added to a row of scores), so torch's float64 run leaves it at 0. Here its gradient
             * is rounding noise, which Adam with eps = 1e-9 amplifies by up to lr / eps = 1e7 a
             * step: in float (noise ~1e-8) into full steps of size lr, as float32 PyTorch drifts
             * too, so the float build leaves the key third out; in double (noise below ~1e-15 for
             * these O(1) values) into at most ~1e-8 a step, 1e-7 over the ten (a wrong gradient
             * would move it by ~lr a step). Compare the query and value thirds at PARITY_TOL. */
            qkv_real *want = malloc(sizeof(qkv_real) * 3 * C);
            if (fixture_read(&f, key, want, 3 * C, QKV_REAL)) {
                const qkv_real *got = t->data;
                CHECK(tu_max_rel_diff(got, want, C) <= PARITY_TOL);
                CHECK(tu_max_rel_diff(got + 2 * C, want + 2 * C, C) <= PARITY_TOL);
                if (sizeof(qkv_real) == sizeof(double))
                    CHECK_MSG(tu_max_rel_diff(got + C, want + C, C) <= 1e-7,
                              "the key third of in_proj_bias drifted by %.3g",
                              tu_max_rel_diff(got + C, want + C, C));
            }
            free(want);
            continue;
        }
        expect_close(&f, label, t->data, key, qkv_tensor_numel(t));
    }
    qkv_ctx_free(ctx);
    qkv_params_free(p);
    qkv_st_close(f.file);
}
