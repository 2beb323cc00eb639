/*
 * test_nat_model.c: the non-autoregressive encoder-decoder (qkv_model_config.nat). It matches
 * PyTorch (scripts/gen_reference_nat.py: no causal mask, mean-pooled length head, masked loss
 * plus length loss) in logits, length logits, both loss terms and every parameter gradient; its
 * decoder has no causal mask (a change at a later target position changes earlier outputs, while
 * the autoregressive twin with the same weights keeps them); the length logits equal a hand
 * computation and ignore source padding; gradients of the length head and the masked loss pass
 * finite differences; qkv_nat_loss equals a hand-computed loss for a fixed mask; the configuration
 * round-trips and bad ones are clear errors.
 */
#include "fixture.h"
#include "testutil.h"

#include <stdio.h>
#include <unistd.h>

enum { VS = 11, VT = 13, MASK = 12, MAXLEN = 16 };

static qkv_model_config nat_config(bool norm_first) {
    qkv_model_config c = qkv_model_default_config(QKV_ARCH_ENCODER_DECODER, 8, 2, 2);
    c.src_vocab = VS;
    c.tgt_vocab = VT;
    c.dim_feedforward = 16;
    c.dropout = 0;
    c.norm_first = norm_first;
    c.max_len = MAXLEN;
    c.nat = true;
    c.mask_id = MASK;
    return c;
}

static qkv_model *nat_model(bool norm_first, uint64_t seed) {
    qkv_model_config c = nat_config(norm_first);
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&c, seed, &m));
    return m;
}

static void nat_parity(const char *file, bool norm_first) {
    fixture f;
    if (!fixture_open(&f, file)) return;
    qkv_model *m = nat_model(norm_first, 1);
    if (!m) return;
    CHECK(qkv_params_find(m->params, "length_head.weight") &&
          qkv_params_find(m->params, "length_head.bias"));
    CHECK(m->length_w && m->length_w->shape[0] == MAXLEN + 1 && m->length_w->shape[1] == 8);
    fixture_params(&f, m->params, "param.");
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_training(ctx, true); /* dropout 0 */
    qkv_tensor *src = fixture_tensor(ctx, &f, "input.src", QKV_I32);
    qkv_tensor *tgt = fixture_tensor(ctx, &f, "input.tgt", QKV_I32);
    qkv_tensor *mk = fixture_tensor(ctx, &f, "input.masked", QKV_I32);
    bool masked[10];
    for (int i = 0; i < 10 && mk; i++)
        masked[i] = ((int32_t *)mk->data)[i] != 0;
    qkv_tensor *token_ce = NULL, *length_ce = NULL;
    qkv_tensor *loss = qkv_nat_loss(ctx, m, src, tgt, masked, 0.1, 0.1, &token_ce, &length_ce);
    /* the two forward outputs, recomputed on the same inputs */
    qkv_tensor *tgt_in = qkv_tensor_from(ctx, QKV_I32, 2, tgt->shape, tgt->data);
    for (int i = 0; i < 10; i++)
        if (masked[i]) ((int32_t *)tgt_in->data)[i] = MASK;
    qkv_tensor *memory = qkv_model_encode(ctx, m, src, NULL);
    qkv_tensor *logits = qkv_model_decode(ctx, m, tgt_in, memory, src, NULL, NULL);
    qkv_tensor *length_logits = qkv_model_length_logits(ctx, m, memory, src);
    CHECK_OK(qkv_ctx_status(ctx));
    if (!qkv_ctx_status(ctx)) {
        expect_close(&f, "NAT logits", logits->data, "out.logits", qkv_tensor_numel(logits));
        expect_close(&f, "NAT length logits", length_logits->data, "out.length_logits",
                     2 * (MAXLEN + 1));
        expect_close(&f, "NAT token loss", token_ce->data, "out.token_ce", 1);
        expect_close(&f, "NAT length loss", length_ce->data, "out.length_ce", 1);
        expect_close(&f, "NAT loss", loss->data, "out.loss", 1);
        CHECK_OK(qkv_backward(ctx, loss));
        expect_param_grads(&f, m->params, file);
    }
    /* save + load: the same length logits */
    qkv_model *back = tu_model_roundtrip(m);
    if (back && length_logits) {
        CHECK(back->cfg.nat && back->cfg.mask_id == MASK);
        qkv_ctx_reset(ctx);
        qkv_ctx_set_grad_enabled(ctx, false);
        src = fixture_tensor(ctx, &f, "input.src", QKV_I32);
        qkv_tensor *again =
            qkv_model_length_logits(ctx, back, qkv_model_encode(ctx, back, src, NULL), src);
        CHECK_OK(qkv_ctx_status(ctx));
        if (again)
            expect_close(&f, "length logits after save + load", again->data, "out.length_logits",
                         2 * (MAXLEN + 1));
    }
    qkv_model_free(back);
    qkv_ctx_free(ctx);
    qkv_model_free(m);
    qkv_st_close(f.file);
}

TEST(nat_model_matches_pytorch_post_ln) {
    nat_parity("ref_nat_post.safetensors", false);
}
TEST(nat_model_matches_pytorch_pre_ln) {
    nat_parity("ref_nat_pre.safetensors", true);
}

/* The decoder of a nat model attends to later positions; the autoregressive model with the same
 * weights (the length head is registered last, so every other parameter is identical) does not. */
TEST(nat_decoder_has_no_causal_mask) {
    qkv_model *nat = nat_model(false, 4);
    qkv_model_config ar_cfg = nat_config(false);
    ar_cfg.nat = false;
    ar_cfg.mask_id = -1;
    qkv_model *ar = NULL;
    CHECK_OK(qkv_model_new(&ar_cfg, 4, &ar));
    if (!nat || !ar) return;
    CHECK(qkv_params_numel(nat->params) == qkv_params_numel(ar->params) + (MAXLEN + 1) * 9);
    CHECK(memcmp(qkv_params_block(nat->params, QKV_BLOCK_DATA),
                 qkv_params_block(ar->params, QKV_BLOCK_DATA),
                 sizeof(qkv_real) * (size_t)qkv_params_numel(ar->params)) == 0);
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *src = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, 4}, (int32_t[]){5, 3, 9, 2});
    qkv_tensor *a =
        qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, 5}, (int32_t[]){4, MASK, 7, MASK, 10});
    qkv_tensor *b =
        qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, 5}, (int32_t[]){4, MASK, 7, MASK, 6});
    for (int k = 0; k < 2; k++) {
        const qkv_model *m = k ? ar : nat;
        qkv_tensor *mem = qkv_model_encode(ctx, m, src, NULL);
        qkv_tensor *ya = qkv_model_decode(ctx, m, a, mem, src, NULL, NULL);
        qkv_tensor *yb = qkv_model_decode(ctx, m, b, mem, src, NULL, NULL);
        CHECK_OK(qkv_ctx_status(ctx));
        if (!ya || !yb) break;
        for (int t = 0; t < 4; t++) {
            const bool same = memcmp((qkv_real *)ya->data + t * VT, (qkv_real *)yb->data + t * VT,
                                     sizeof(qkv_real) * VT) == 0;
            CHECK_MSG(same == (k == 1),
                      "%s decoder: position %d %s when the last input token changes",
                      k ? "autoregressive" : "nat", t, same ? "did not change" : "changed");
        }
    }
    qkv_ctx_free(ctx);
    qkv_model_free(nat);
    qkv_model_free(ar);
}

/* length_logits[b] = W mean_{s < S_b} memory[b, s] + c, by hand in double; padding the source
 * further changes nothing beyond rounding. */
TEST(nat_length_logits_are_the_pooled_linear_head) {
    qkv_model *m = nat_model(true, 2);
    if (!m) return;
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *src = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){2, 5},
                                      (int32_t[]){5, 3, 9, 2, 7, 4, 8, 0, 0, 0});
    qkv_tensor *mem = qkv_model_encode(ctx, m, src, NULL);
    qkv_tensor *len = qkv_model_length_logits(ctx, m, mem, src);
    CHECK_OK(qkv_ctx_status(ctx));
    if (!len) return;
    CHECK(len->ndim == 2 && len->shape[0] == 2 && len->shape[1] == MAXLEN + 1);
    const qkv_real *M = mem->data, *W = m->length_w->data, *c = m->length_b->data;
    const int n_tok[2] = {5, 2};
    for (int b = 0; b < 2; b++)
        for (int k = 0; k <= MAXLEN; k++) {
            double y = c[k];
            for (int ch = 0; ch < 8; ch++) {
                double mean = 0;
                for (int s = 0; s < n_tok[b]; s++)
                    mean += M[(b * 5 + s) * 8 + ch];
                y += W[k * 8 + ch] * mean / n_tok[b];
            }
            CHECK_NEAR(((qkv_real *)len->data)[b * (MAXLEN + 1) + k], y,
                       sizeof(qkv_real) == 4 ? 1e-5 : 1e-12);
        }
    /* row 1 alone, unpadded */
    qkv_tensor *src1 = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, 2}, (int32_t[]){4, 8});
    qkv_tensor *len1 = qkv_model_length_logits(ctx, m, qkv_model_encode(ctx, m, src1, NULL), src1);
    CHECK_OK(qkv_ctx_status(ctx));
    if (len1)
        CHECK(tu_max_rel_diff((qkv_real *)len->data + MAXLEN + 1, len1->data, MAXLEN + 1) <
              (sizeof(qkv_real) == 4 ? 1e-5 : 1e-12));
    /* errors */
    qkv_tensor *bad = qkv_tensor_zeros(ctx, QKV_REAL, 3, (int64_t[]){2, 4, 8});
    TU_EXPECT_FAIL(ctx, qkv_model_length_logits(ctx, m, bad, src), QKV_ERR_SHAPE,
                   "model_length_logits", "(2, 4, 8)");
    qkv_model_config ar_cfg = nat_config(true);
    ar_cfg.nat = false, ar_cfg.mask_id = -1;
    qkv_model *ar = NULL;
    CHECK_OK(qkv_model_new(&ar_cfg, 2, &ar));
    src = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){1, 2}, (int32_t[]){4, 8});
    mem = qkv_tensor_zeros(ctx, QKV_REAL, 3, (int64_t[]){1, 2, 8});
    TU_EXPECT_FAIL(ctx, qkv_model_length_logits(ctx, ar, mem, src), QKV_ERR_INVALID_ARG,
                   "model_length_logits", "nat");
    qkv_model_free(ar);
    qkv_ctx_free(ctx);
    qkv_model_free(m);
}

/* The loss of a fixed mask, by hand from the model's own logits and encoder states: label-smoothed
 * cross-entropy (1 - eps) (-log p_y) + eps mean_v (-log p_v) averaged over the masked positions,
 * plus 0.3 x the mean of -log softmax(length logits)[L_b] with the length logits from a hand
 * pooling. */
TEST(nat_loss_equals_a_hand_computation) {
    qkv_model *m = nat_model(false, 3);
    if (!m) return;
    enum { B = 2, S = 4, T = 5 };
    const int32_t src_ids[B * S] = {5, 3, 9, 2, 4, 8, 0, 0};
    const int32_t tgt_ids[B * T] = {10, 4, 7, 11, 3, 6, 11, 3, 0, 0};
    const bool masked[B * T] = {1, 0, 1, 1, 0, 0, 1, 1, 0, 0};
    const int lengths[B] = {5, 3}, src_len[B] = {4, 2};
    const double eps = 0.2, lw = 0.3;
    qkv_ctx *ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *src = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, S}, src_ids);
    qkv_tensor *tgt = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, T}, tgt_ids);
    qkv_tensor *tok = NULL, *len = NULL;
    qkv_tensor *loss = qkv_nat_loss(ctx, m, src, tgt, masked, eps, lw, &tok, &len);
    int32_t in_ids[B * T];
    for (int i = 0; i < B * T; i++)
        in_ids[i] = masked[i] ? MASK : tgt_ids[i];
    qkv_tensor *mem = qkv_model_encode(ctx, m, src, NULL);
    qkv_tensor *logits = qkv_model_decode(
        ctx, m, qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, T}, in_ids), mem, src, NULL, NULL);
    CHECK_OK(qkv_ctx_status(ctx));
    if (!loss || !logits) return;
    double tok_sum = 0;
    int n_masked = 0;
    for (int i = 0; i < B * T; i++) {
        if (!masked[i]) continue;
        const qkv_real *z = (qkv_real *)logits->data + i * VT;
        double mx = -INFINITY, se = 0, mean_z = 0;
        for (int v = 0; v < VT; v++)
            mx = fmax(mx, z[v]);
        for (int v = 0; v < VT; v++)
            se += exp(z[v] - mx), mean_z += z[v] / VT;
        const double lse = mx + log(se);
        tok_sum += (1 - eps) * (lse - z[tgt_ids[i]]) + eps * (lse - mean_z);
        n_masked++;
    }
    double len_sum = 0;
    for (int b = 0; b < B; b++) {
        double y[MAXLEN + 1], mx = -INFINITY, se = 0;
        for (int k = 0; k <= MAXLEN; k++) {
            y[k] = ((qkv_real *)m->length_b->data)[k];
            for (int ch = 0; ch < 8; ch++) {
                double mean = 0;
                for (int s = 0; s < src_len[b]; s++)
                    mean += ((qkv_real *)mem->data)[(b * S + s) * 8 + ch];
                y[k] += ((qkv_real *)m->length_w->data)[k * 8 + ch] * mean / src_len[b];
            }
            mx = fmax(mx, y[k]);
        }
        for (int k = 0; k <= MAXLEN; k++)
            se += exp(y[k] - mx);
        len_sum += mx + log(se) - y[lengths[b]];
    }
    const double tol = sizeof(qkv_real) == 4 ? 1e-5 : 1e-12;
    CHECK_NEAR(((qkv_real *)tok->data)[0], tok_sum / n_masked, tol);
    CHECK_NEAR(((qkv_real *)len->data)[0], len_sum / B, tol);
    CHECK_NEAR(((qkv_real *)loss->data)[0], tok_sum / n_masked + lw * len_sum / B, tol);
    /* malformed targets and masks */
    bool pad_masked[B * T];
    memcpy(pad_masked, masked, sizeof pad_masked);
    pad_masked[9] = true;
    TU_EXPECT_FAIL(ctx, qkv_nat_loss(ctx, m, src, tgt, pad_masked, eps, lw, NULL, NULL),
                   QKV_ERR_INVALID_ARG, "nat_loss", "masks padding position 4");
    const int32_t holey[B * T] = {10, 0, 7, 11, 3, 6, 11, 3, 0, 0};
    src = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, S}, src_ids);
    tgt = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, T}, holey);
    TU_EXPECT_FAIL(ctx, qkv_nat_loss(ctx, m, src, tgt, masked, eps, lw, NULL, NULL),
                   QKV_ERR_INVALID_ARG, "row 0", "token after padding");
    const int32_t with_mask[B * T] = {10, MASK, 7, 11, 3, 6, 11, 3, 0, 0};
    src = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, S}, src_ids);
    tgt = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){B, T}, with_mask);
    TU_EXPECT_FAIL(ctx, qkv_nat_loss(ctx, m, src, tgt, masked, eps, lw, NULL, NULL),
                   QKV_ERR_INVALID_ARG, "nat_loss", "holds mask_id 12");
    qkv_ctx_free(ctx);
    qkv_model_free(m);
}

/* d(loss)/d(every parameter) by finite differences, the length head and the masked loss included
 * (GELU, so no ReLU kink sits within eps of the point). */
static qkv_tensor *nat_loss_fn(qkv_ctx *ctx, qkv_tensor **in, void *user) {
    (void)in;
    const qkv_model *m = user;
    static const bool masked[10] = {0, 1, 1, 0, 1, 1, 0, 1, 0, 0};
    qkv_tensor *src =
        qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){2, 4}, (int32_t[]){5, 3, 9, 2, 4, 8, 1, 0});
    qkv_tensor *tgt = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){2, 5},
                                      (int32_t[]){10, 4, 7, 11, 3, 6, 11, 3, 0, 0});
    return qkv_nat_loss(ctx, m, src, tgt, masked, 0.1, 0.5, NULL, NULL);
}

TEST(nat_loss_gradcheck) {
    TU_NEED_DOUBLE();
    qkv_model_config c = nat_config(true);
    c.activation = QKV_ACT_GELU;
    c.n_encoder_layers = c.n_decoder_layers = 1;
    c.d_model = 4;
    c.dim_feedforward = 6;
    qkv_model *m = NULL;
    CHECK_OK(qkv_model_new(&c, 5, &m));
    if (!m) return;
    qkv_tensor *in[64];
    int n = 0;
    for (int64_t i = 0; i < qkv_params_count(m->params) && n < 64; i++)
        in[n++] = qkv_params_get(m->params, i);
    CHECK(in[n - 2] == m->length_w && in[n - 1] == m->length_b);
    tu_gradcheck("NAT masked + length loss", nat_loss_fn, in, n, m, NULL);
    qkv_model_free(m);
}

TEST(nat_config_round_trip_and_errors) {
    qkv_model_config c = nat_config(false);
    char json[4096];
    CHECK_OK(qkv_model_config_to_json(&c, json, sizeof json));
    CHECK(strstr(json, "\"nat\":true,\"mask_id\":12") != NULL);
    qkv_model_config back;
    CHECK_OK(qkv_model_config_from_json(json, &back));
    CHECK(back.nat && back.mask_id == MASK);
    /* an autoregressive configuration says nothing about nat (its JSON is what it was before) */
    c.nat = false, c.mask_id = -1;
    CHECK_OK(qkv_model_config_to_json(&c, json, sizeof json));
    CHECK(strstr(json, "nat") == NULL && strstr(json, "mask_id") == NULL);
    CHECK_OK(qkv_model_config_from_json(json, &back));
    CHECK(!back.nat && back.mask_id == -1);
    qkv_model *m = NULL;
    c = nat_config(false);
    c.mask_id = 0; /* the padding id */
    CHECK_ERR(qkv_model_new(&c, 1, &m), QKV_ERR_INVALID_ARG, "mask_id 0");
    c.mask_id = VT;
    CHECK_ERR(qkv_model_new(&c, 1, &m), QKV_ERR_INVALID_ARG,
              "mask_id 13 must be a target id in 0 .. 12");
    c.nat = false, c.mask_id = 5;
    CHECK_ERR(qkv_model_new(&c, 1, &m), QKV_ERR_INVALID_ARG, "nat is false");
    c = nat_config(false);
    c.pos = QKV_POS_NONE; /* an all-mask input would give every position the same output */
    c.dec_self_attn.relpos = QKV_RELPOS_T5;
    CHECK_ERR(qkv_model_new(&c, 1, &m), QKV_ERR_INVALID_ARG, "nat needs absolute positions");
    c.dec_self_attn.relpos = QKV_RELPOS_SHAW; /* relative values tell the positions apart */
    CHECK_OK(qkv_model_new(&c, 1, &m));
    qkv_model_free(m);
    m = NULL;
    qkv_model_config lm = qkv_model_default_config(QKV_ARCH_DECODER, 8, 2, 1);
    lm.tgt_vocab = VT;
    lm.nat = true, lm.mask_id = MASK;
    CHECK_ERR(qkv_model_new(&lm, 1, &m), QKV_ERR_INVALID_ARG,
              "nat (non-autoregressive decoding) needs an encoder-decoder");
    qkv_model_config enc = qkv_model_default_config(QKV_ARCH_ENCODER, 8, 2, 1);
    enc.src_vocab = enc.tgt_vocab = VT;
    enc.nat = true, enc.mask_id = MASK;
    CHECK_ERR(qkv_model_new(&enc, 1, &m), QKV_ERR_INVALID_ARG, "encoder-only");
    CHECK(m == NULL);
    CHECK_ERR(
        qkv_model_config_from_json(
            "{\"arch\":\"encoder-decoder\",\"src_vocab\":5,\"tgt_vocab\":5,\"nat\":1}", &back),
        QKV_ERR_INVALID_ARG, "\"nat\" must be true or false");
    CHECK_ERR(
        qkv_model_config_from_json(
            "{\"arch\":\"encoder-decoder\",\"src_vocab\":5,\"tgt_vocab\":5,\"nat\":true}", &back),
        QKV_ERR_INVALID_ARG, "mask_id -1");
}
