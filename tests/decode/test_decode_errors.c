/*
 * test_decode_errors.c: bad inputs to the decoders and the session give a non-zero status and a
 * message naming the problem, never a crash; the output is left empty.
 */
#include "decode_testutil.h"

TEST(decode_rejects_bad_arguments_and_parameters) {
    qkv_model *m = dt_seq2seq(&dt_variants[0], 9, 1, 300), *lm = dt_lm(&dt_variants[0], 9, 1, 301);
    if (!m || !lm) {
        qkv_model_free(m);
        qkv_model_free(lm);
        return;
    }
    const int32_t src[] = {3, 4, 5}, len[] = {3}, long_len[] = {17}, zero_len[] = {0},
                  bad_id[] = {3, 11, 5};
    qkv_hypotheses h;
    qkv_decode_params p = dt_params(QKV_DECODE_BEAM);
    CHECK_ERR(qkv_decode(NULL, src, len, 1, &p, &h), QKV_ERR_INVALID_ARG, "NULL");
    CHECK_ERR(qkv_decode(m, NULL, len, 1, &p, &h), QKV_ERR_INVALID_ARG, "NULL");
    CHECK_ERR(qkv_decode(m, src, len, 1, &p, NULL), QKV_ERR_INVALID_ARG, "NULL");
    CHECK_ERR(qkv_decode(lm, src, len, 1, &p, &h), QKV_ERR_INVALID_ARG, "encoder-decoder");
    CHECK_ERR(qkv_generate(m, src, len, 1, &p, &h), QKV_ERR_INVALID_ARG, "decoder-only");
    CHECK_ERR(qkv_decode(m, src, len, 0, &p, &h), QKV_ERR_INVALID_ARG, "batch 0");
    CHECK_ERR(qkv_decode(m, bad_id, len, 1, &p, &h), QKV_ERR_INVALID_ARG,
              "id 11 is outside the vocabulary");
    CHECK_ERR(qkv_decode(m, src, zero_len, 1, &p, &h), QKV_ERR_SHAPE, "length 0");
    CHECK_ERR(qkv_decode(m, src, long_len, 1, &p, &h), QKV_ERR_SHAPE, "length 17");
    CHECK(h.hyp == NULL && h.count == NULL && h.batch == 0);
#define BAD_PARAM(field_assign, needle)                                                            \
    do {                                                                                           \
        qkv_decode_params q = dt_params(QKV_DECODE_BEAM);                                          \
        field_assign;                                                                              \
        CHECK_ERR(qkv_decode(m, src, len, 1, &q, &h), QKV_ERR_INVALID_ARG, needle);                \
    } while (0)
    BAD_PARAM(q.strategy = (qkv_decode_strategy)7, "strategy 7");
    BAD_PARAM(q.beam_size = 0, "beam_size 0");
    BAD_PARAM((q.beam_size = 2, q.n_best = 3), "n_best 3");
    BAD_PARAM(q.n_best = 0, "n_best 0");
    BAD_PARAM((q.strategy = QKV_DECODE_GREEDY, q.n_best = 2), "greedy");
    BAD_PARAM(q.max_len = -1, "max_len -1");
    BAD_PARAM(q.length_penalty = (qkv_length_penalty)5, "length penalty 5");
    BAD_PARAM(q.alpha = -0.5, "alpha -0.5");
    BAD_PARAM(q.temperature = -1, "temperature -1");
    BAD_PARAM(q.top_k = -2, "top_k -2");
    BAD_PARAM(q.top_p = 0, "top_p 0");
    BAD_PARAM(q.top_p = 1.5, "top_p 1.5");
    BAD_PARAM(q.bos_id = 9, "bos_id 9");
    BAD_PARAM(q.eos_id = 9, "eos_id 9");
    BAD_PARAM(q.eos_id = DT_PAD, "padding id");
    BAD_PARAM(q.kernels = (qkv_kernels)4, "kernel set 4");
#undef BAD_PARAM
    p.max_len = 17; /* over the model's max_len 16 */
    CHECK_ERR(qkv_decode(m, src, len, 1, &p, &h), QKV_ERR_SHAPE, "max_len 17");
    const int32_t prompt[] = {3, 4, 5, 6, 7, 8, 3, 4, 5, 6, 7, 8}, plen[] = {12};
    p.max_len = 6; /* 12 + 6 - 1 > 16 */
    CHECK_ERR(qkv_generate(lm, prompt, plen, 1, &p, &h), QKV_ERR_SHAPE,
              "prompt length 12 + max_len 6");
    p.max_len = 5;
    CHECK_OK(qkv_generate(lm, prompt, plen, 1, &p, &h));
    qkv_hypotheses_free(&h);
    qkv_hypotheses_free(&h); /* a freed (zeroed) result frees again */
    qkv_hypotheses_free(NULL);
    qkv_model_free(m);
    qkv_model_free(lm);
}

TEST(session_rejects_bad_calls) {
    qkv_model *m = dt_seq2seq(&dt_variants[0], 9, 1, 310), *lm = dt_lm(&dt_variants[0], 9, 1, 311);
    if (!m || !lm) {
        qkv_model_free(m);
        qkv_model_free(lm);
        return;
    }
    qkv_session_params p = qkv_session_default_params();
    p.max_rows = 2;
    p.max_len = 4;
    p.max_src_len = 3;
    p.kernels = qkv_test_kernels;
    qkv_session *s = NULL;
    CHECK_ERR(qkv_session_new(m, NULL, &s), QKV_ERR_INVALID_ARG, "NULL");
    p.max_len = 17;
    CHECK_ERR(qkv_session_new(m, &p, &s), QKV_ERR_SHAPE, "max_len 17");
    p.max_len = 4;
    p.max_src_len = 0;
    CHECK_ERR(qkv_session_new(m, &p, &s), QKV_ERR_SHAPE, "max_src_len 0");
    p.max_src_len = 3;
    p.max_rows = 0;
    CHECK_ERR(qkv_session_new(m, &p, &s), QKV_ERR_INVALID_ARG, "max_rows 0");
    p.max_rows = 2;
    CHECK(s == NULL);
    CHECK_OK(qkv_session_new(m, &p, &s));
    qkv_tensor *logits = NULL;
    const int32_t tok[2] = {1, 1}, bad_tok[2] = {1, 9}, src[6] = {3, 4, 5, 6, 0, 0},
                  bad_src[3] = {3, 40, 2};
    if (s) {
        CHECK_ERR(qkv_session_step(s, tok, 1, &logits), QKV_ERR_STATE, "qkv_session_encode");
        CHECK_ERR(qkv_session_start(s, 2), QKV_ERR_INVALID_ARG, "qkv_session_encode");
        CHECK_ERR(qkv_session_encode(s, src, 3, 3), QKV_ERR_SHAPE, "batch 3");
        CHECK_ERR(qkv_session_encode(s, src, 1, 4), QKV_ERR_SHAPE, "source length 4");
        CHECK_ERR(qkv_session_encode(s, bad_src, 1, 3), QKV_ERR_INVALID_ARG, "src[0][1] = 40");
        CHECK_OK(qkv_session_encode(s, src, 2, 3));
        CHECK_ERR(qkv_session_step(s, bad_tok, 1, &logits), QKV_ERR_INVALID_ARG,
                  "token 9 of row 1");
        CHECK_ERR(qkv_session_step(s, tok, 0, &logits), QKV_ERR_SHAPE, "0 new positions");
        CHECK_ERR(qkv_session_gather(s, (const int32_t[]){0, 2}, 2), QKV_ERR_INVALID_ARG,
                  "rows[1] = 2");
        CHECK_ERR(qkv_session_gather(s, (const int32_t[]){0, 1, 1}, 3), QKV_ERR_SHAPE, "3 rows");
        for (int k = 0; k < 4; k++)
            CHECK_OK(qkv_session_step(s, tok, 1, &logits));
        CHECK_ERR(qkv_session_step(s, tok, 1, &logits), QKV_ERR_SHAPE, "max_len 4");
        CHECK(qkv_session_tokens(s, 2) == NULL && qkv_session_tokens(s, 1) != NULL);
        CHECK_OK(qkv_session_gather(s, NULL, 0)); /* every row dropped */
        CHECK(qkv_session_rows(s) == 0);
    }
    qkv_session_free(s);
    qkv_session *sl = NULL;
    CHECK_OK(qkv_session_new(lm, &p, &sl));
    if (sl) {
        CHECK_ERR(qkv_session_encode(sl, src, 1, 3), QKV_ERR_INVALID_ARG, "no encoder");
        CHECK_ERR(qkv_session_start(sl, 3), QKV_ERR_SHAPE, "3 rows");
        CHECK_OK(qkv_session_start(sl, 2));
        CHECK_OK(qkv_session_step(sl, tok, 1, &logits));
        CHECK(logits && logits->shape[0] == 2 && logits->shape[1] == 1 && logits->shape[2] == 9);
    }
    qkv_session_free(sl);
    qkv_session_free(NULL);
    qkv_model_free(m);
    qkv_model_free(lm);
}

/* The special ids come from the model (qkv_model_config.bos_id / eos_id): the defaults decode as
 * the model's own ids do, and ids the model was not trained with are refused, not decoded. */
TEST(decode_takes_the_special_ids_from_the_model) {
    qkv_model *m = dt_seq2seq(&dt_variants[0], 9, 2, 320);
    if (!m) return;
    const int32_t src[] = {3, 4, 5}, len[] = {3};
    qkv_decode_params own = dt_params(QKV_DECODE_BEAM), dflt = qkv_decode_default_params();
    dflt.kernels = qkv_test_kernels;
    CHECK(dflt.bos_id == QKV_DECODE_MODEL_ID && dflt.eos_id == QKV_DECODE_MODEL_ID);
    qkv_hypotheses a, b;
    CHECK_OK(qkv_decode(m, src, len, 1, &own, &a));
    CHECK_OK(qkv_decode(m, src, len, 1, &dflt, &b));
    CHECK_MSG(dt_same_bits(&a, &b), "the default ids decode differently from the model's (%d, %d)",
              DT_BOS, DT_EOS);
    CHECK(b.eos_id == DT_EOS); /* what a caller trims with */
    qkv_hypotheses_free(&a);
    qkv_hypotheses_free(&b);
    qkv_decode_params q = dflt;
    q.bos_id = 2, q.eos_id = 3; /* a qkv vocabulary's, not this model's */
    CHECK_ERR(qkv_decode(m, src, len, 1, &q, &a), QKV_ERR_INVALID_ARG, "bos_id 2 is not the model's (1)");
    q.bos_id = QKV_DECODE_MODEL_ID;
    CHECK_ERR(qkv_decode(m, src, len, 1, &q, &a), QKV_ERR_INVALID_ARG, "eos_id 3 is not the model's (2)");
    q.eos_id = -1; /* no end token: every hypothesis runs to max_len */
    q.max_len = 4;
    CHECK_OK(qkv_decode(m, src, len, 1, &q, &a));
    CHECK(a.hyp && a.hyp[0].length == 4 && a.eos_id == -1);
    qkv_hypotheses_free(&a);
    /* a model file written before the ids were stored records none: the caller must give them */
    m->cfg.bos_id = m->cfg.eos_id = -1;
    CHECK_ERR(qkv_decode(m, src, len, 1, &dflt, &a), QKV_ERR_INVALID_ARG, "does not record its bos_id");
    q = dflt;
    q.bos_id = DT_BOS;
    CHECK_ERR(qkv_decode(m, src, len, 1, &q, &a), QKV_ERR_INVALID_ARG, "does not record its eos_id");
    q.eos_id = DT_EOS;
    CHECK_OK(qkv_decode(m, src, len, 1, &q, &a));
    CHECK_OK(qkv_decode(m, src, len, 1, &own, &b));
    CHECK(dt_same_bits(&a, &b) && a.eos_id == DT_EOS);
    qkv_hypotheses_free(&a);
    qkv_hypotheses_free(&b);
    qkv_model_free(m);
}
