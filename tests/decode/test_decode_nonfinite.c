/*
 * test_decode_nonfinite.c: a model whose output holds a NaN or an infinity (broken weights, or a
 * configuration value that overflows float arithmetic) makes every inference entry point fail
 * with QKV_ERR_NONFINITE and a message naming where, never decode to empty or arbitrary tokens.
 * Training's forward (gradients on) is left to its loss check and still returns the logits.
 */
#include "decode_testutil.h"

#include <math.h>

/* Output row `token` of the model's projection gets `value` in its first weight: that token's
 * logit is NaN (or +-inf) at every position. */
static void poison_output_row(qkv_model *m, int32_t token, qkv_real value) {
    qkv_real *w = m->out_w->data;
    w[(int64_t)token * m->out_w->shape[1]] = value;
}

TEST(decode_refuses_a_model_whose_logits_are_not_finite) {
    qkv_model *m = dt_seq2seq(&dt_variants[0], 9, 1, 420);
    if (!m) return;
    poison_output_row(m, 5, (qkv_real)NAN);
    const int32_t src[] = {3, 4, 5}, len[] = {3};
    const qkv_decode_strategy strategies[] = {QKV_DECODE_GREEDY, QKV_DECODE_BEAM, QKV_DECODE_SAMPLE};
    for (int k = 0; k < 3; k++)
        for (int cache = 0; cache < 2; cache++) {
            qkv_decode_params p = dt_params(strategies[k]);
            p.use_cache = cache;
            qkv_hypotheses h;
            /* the cached step, or without the cache the full forward (model_decode) */
            CHECK_ERR(qkv_decode(m, src, len, 1, &p, &h), QKV_ERR_NONFINITE, cache ? "decode step" : "model_decode");
            CHECK_MSG(strstr(qkv_last_error(), "output holds NaN") && strstr(qkv_last_error(), ", 5)"),
                      "strategy %d, cache %d: '%s' names neither NaN nor token 5", k, cache,
                      qkv_last_error());
            CHECK(h.hyp == NULL && h.batch == 0);
        }
    qkv_model_free(m);
}

TEST(generate_refuses_infinite_logits) {
    qkv_model *lm = dt_lm(&dt_variants[0], 9, 1, 421);
    if (!lm) return;
    poison_output_row(lm, 7, (qkv_real)INFINITY); /* inf x a positive input: +inf, x 0: NaN */
    const int32_t prompt[] = {3, 4}, len[] = {2};
    qkv_decode_params p = dt_params(QKV_DECODE_GREEDY);
    qkv_hypotheses h;
    CHECK_ERR(qkv_generate(lm, prompt, len, 1, &p, &h), QKV_ERR_NONFINITE, "decode step");
    CHECK_MSG(strstr(qkv_last_error(), "inf") || strstr(qkv_last_error(), "NaN"), "%s", qkv_last_error());
    qkv_model_free(lm);
}

TEST(model_forward_checks_its_output_in_inference_only) {
    qkv_model *m = dt_seq2seq(&dt_variants[0], 9, 1, 422);
    if (!m) return;
    poison_output_row(m, 4, (qkv_real)NAN);
    qkv_ctx *ctx = tu_ctx();
    const int32_t src_ids[] = {3, 4, 5, 6}, tgt_ids[] = {1, 3};
    for (int grad = 0; grad < 2; grad++) {
        qkv_ctx_reset(ctx);
        qkv_ctx_set_grad_enabled(ctx, grad);
        qkv_tensor *src = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){2, 2}, src_ids);
        qkv_tensor *tgt = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){2, 1}, tgt_ids);
        qkv_tensor *logits = qkv_model_decode(ctx, m, tgt, qkv_model_encode(ctx, m, src, NULL), src, NULL, NULL);
        if (grad) {
            CHECK_OK(qkv_ctx_status(ctx));
            CHECK(logits && isnan(((const qkv_real *)logits->data)[4]));
        } else {
            CHECK(logits == NULL);
            CHECK_ERR(qkv_ctx_status(ctx), QKV_ERR_NONFINITE, "model_decode: the output holds NaN at (0, 0, 4)");
        }
    }
    qkv_ctx_free(ctx);
    qkv_model_free(m);

    qkv_model_config c = qkv_model_default_config(QKV_ARCH_ENCODER, 8, 2, 1);
    c.src_vocab = 8;
    c.tgt_vocab = 3;
    c.dim_feedforward = 16;
    c.head = QKV_HEAD_POOLED;
    qkv_model *enc = NULL;
    CHECK_OK(qkv_model_new(&c, 423, &enc));
    if (!enc) return;
    poison_output_row(enc, 2, (qkv_real)NAN);
    ctx = tu_ctx();
    qkv_ctx_set_grad_enabled(ctx, false);
    qkv_tensor *src = qkv_tensor_from(ctx, QKV_I32, 2, (int64_t[]){2, 2}, src_ids);
    CHECK(qkv_model_classify(ctx, enc, src, NULL) == NULL);
    CHECK_ERR(qkv_ctx_status(ctx), QKV_ERR_NONFINITE, "model_classify: the output holds NaN at (0, 2)");
    qkv_ctx_free(ctx);
    qkv_model_free(enc);
}
