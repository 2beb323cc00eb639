/*
 * test_model_config_ranges.c: every numeric value of a model configuration is range-checked
 * where the configuration enters the library (qkv_model_config_check: the JSON of a model file,
 * qkv_model_new, qkv_mha_init), so a file whose header says cos_scale_init = 1e308 is refused at
 * load with a message naming the key, instead of decoding to NaN. And the pad id must be an id of
 * every vocabulary that pads with it.
 */
#include "testutil.h"
#include "qkv/qkv_data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static qkv_model_config small_seq2seq(void) {
    qkv_model_config c = qkv_model_default_config(QKV_ARCH_ENCODER_DECODER, 8, 2, 1);
    c.src_vocab = 11;
    c.tgt_vocab = 13;
    c.dim_feedforward = 16;
    c.dropout = 0;
    return c;
}

/* The configuration must be refused by qkv_model_config_check and by qkv_model_new, each with
 * `needle` in the message (the JSON of a model file: the last test). */
#define CHECK_REFUSED(c, needle)                                                                   \
    do {                                                                                           \
        qkv_model_config bad_ = (c);                                                               \
        CHECK_ERR(qkv_model_config_check(&bad_), QKV_ERR_INVALID_ARG, needle);                     \
        qkv_model *m_ = NULL;                                                                      \
        CHECK_ERR(qkv_model_new(&bad_, 1, &m_), QKV_ERR_INVALID_ARG, needle);                      \
        CHECK(m_ == NULL);                                                                         \
    } while (0)

TEST(model_config_refuses_out_of_range_attention_values) {
    qkv_model_config c = small_seq2seq();
    CHECK_OK(qkv_model_config_check(&c));
    c.self_attn.score = QKV_SCORE_COSINE;
    c.self_attn.cos_scale_learnable = false;
    c.self_attn.cos_scale_init = 1e308; /* (float)1e308 is inf: every score inf or NaN */
    CHECK_REFUSED(c, "self_attn: cos_scale_init 1e+308");
    c.self_attn.cos_scale_init = NAN;
    CHECK_REFUSED(c, "cos_scale_init nan");
    c.self_attn.cos_scale_init = 0;
    CHECK_REFUSED(c, "cos_scale_init 0");
    c.self_attn.cos_scale_init = -3;
    CHECK_REFUSED(c, "cos_scale_init -3");
    c.self_attn.cos_scale_init = 10;
    CHECK_OK(qkv_model_config_check(&c));

    c = small_seq2seq();
    c.dec_self_attn.relpos = QKV_RELPOS_ROPE;
    c.dec_self_attn.rope_base = 0;
    CHECK_REFUSED(c, "dec_self_attn: rope_base 0");
    c.dec_self_attn.rope_base = INFINITY;
    CHECK_REFUSED(c, "rope_base inf");
    c.dec_self_attn.rope_base = 1e-300; /* angles p * base^(-2i/D) overflow: sin(inf) is NaN */
    CHECK_REFUSED(c, "rope_base 1e-300");
    c.dec_self_attn.rope_base = 500000;
    CHECK_OK(qkv_model_config_check(&c));

    c = small_seq2seq();
    c.cross_attn.score = QKV_SCORE_ADDITIVE;
    c.cross_attn.additive_dim = -1;
    CHECK_REFUSED(c, "cross_attn: additive_dim -1");
    c.cross_attn.additive_dim = 1 << 30;
    CHECK_REFUSED(c, "additive_dim 1073741824");

    c = small_seq2seq();
    c.self_attn.relpos = QKV_RELPOS_SHAW;
    c.self_attn.relpos_max_distance = -5;
    CHECK_REFUSED(c, "relpos_max_distance -5");
    c.self_attn.relpos_max_distance = 1 << 30; /* a (2K + 1, D) table of 2^31 rows */
    CHECK_REFUSED(c, "relpos_max_distance 1073741824");

    c = small_seq2seq();
    c.self_attn.relpos = QKV_RELPOS_T5;
    c.self_attn.relpos_buckets = 0;
    CHECK_REFUSED(c, "relpos_buckets 0");
    c.self_attn.relpos_buckets = 3; /* bidirectional: 1 bucket a side, max_exact 0 */
    CHECK_REFUSED(c, "max_exact");
    c.self_attn.relpos_buckets = 32;
    c.self_attn.relpos_max_distance = 8; /* not past max_exact 8 */
    CHECK_REFUSED(c, "max_exact");
    c.self_attn.relpos_max_distance = 128;
    CHECK_OK(qkv_model_config_check(&c));
}

TEST(model_config_refuses_out_of_range_model_values) {
    qkv_model_config c = small_seq2seq();
    c.layer_norm_eps = INFINITY;
    CHECK_REFUSED(c, "layer_norm_eps inf");
    c.layer_norm_eps = 2;
    CHECK_REFUSED(c, "layer_norm_eps 2");
    c = small_seq2seq();
    c.dropout = NAN;
    CHECK_REFUSED(c, "dropout nan");
    c = small_seq2seq();
    c.d_model = 1 << 30;
    c.n_heads = 1;
    CHECK_REFUSED(c, "d_model 1073741824");
    c = small_seq2seq();
    c.dim_feedforward = INT32_MAX;
    CHECK_REFUSED(c, "dim_feedforward 2147483647");
    c = small_seq2seq();
    c.tgt_vocab = INT32_MAX;
    CHECK_REFUSED(c, "tgt_vocab 2147483647");
    c = small_seq2seq();
    c.n_heads = 16; /* d_model 8: heads of no width */
    CHECK_REFUSED(c, "n_heads 16");
}

TEST(model_config_pad_id_must_be_in_every_vocabulary_it_pads) {
    qkv_model_config c = small_seq2seq();
    c.src_vocab = 4;
    c.pad_id = 6; /* a target id, but the sources have ids 0 .. 3 only */
    CHECK_REFUSED(c, "pad_id 6 outside the source vocabulary (4)");
    c.pad_id = 1;
    CHECK_OK(qkv_model_config_check(&c));
    c.pad_id = 3; /* the default eos_id: it would never be generated */
    CHECK_REFUSED(c, "other than pad_id 3");
    c.pad_id = 13;
    CHECK_REFUSED(c, "pad_id 13 outside the target vocabulary (13)");
}

/* The decoder's special ids live in the model and its file; decoding takes them from there. */
TEST(model_config_holds_the_special_ids_of_its_decoder) {
    qkv_model_config c = small_seq2seq();
    CHECK(c.bos_id == QKV_VOCAB_BOS && c.eos_id == QKV_VOCAB_EOS); /* every qkv_vocab's */
    c.bos_id = 13;
    CHECK_REFUSED(c, "bos_id 13 and eos_id 3 must be target ids in 0 .. 12");
    c.bos_id = 5, c.eos_id = 6;
    char json[4096];
    CHECK_OK(qkv_model_config_to_json(&c, json, sizeof json));
    qkv_model_config back;
    CHECK_OK(qkv_model_config_from_json(json, &back));
    CHECK(back.bos_id == 5 && back.eos_id == 6);
    /* a file written before the ids were stored: not recorded (decoding asks the caller) */
    CHECK_OK(qkv_model_config_from_json("{\"arch\":\"decoder\",\"tgt_vocab\":9,\"d_model\":8,\"n_heads\":2}", &back));
    CHECK(back.bos_id == -1 && back.eos_id == -1);
    CHECK_OK(qkv_model_config_to_json(&back, json, sizeof json));
    CHECK(!strstr(json, "bos_id") && !strstr(json, "eos_id"));
}

/* The JSON of a model file: each out-of-range value is refused at load, naming the key. */
TEST(model_config_json_refuses_out_of_range_values) {
    qkv_model_config c = small_seq2seq();
    c.self_attn.score = QKV_SCORE_COSINE;
    char json[4096], edited[4096];
    CHECK_OK(qkv_model_config_to_json(&c, json, sizeof json));
    const char *at = strstr(json, "\"cos_scale_init\":10");
    CHECK(at != NULL);
    if (!at) return;
    snprintf(edited, sizeof edited, "%.*s\"cos_scale_init\":1e308%s", (int)(at - json), json,
             at + strlen("\"cos_scale_init\":10"));
    qkv_model_config back;
    CHECK_ERR(qkv_model_config_from_json(edited, &back), QKV_ERR_INVALID_ARG,
              "self_attn: cos_scale_init 1e+308");
    at = strstr(json, "\"layer_norm_eps\":");
    const char *end = at ? strchr(at, ',') : NULL;
    CHECK(end != NULL);
    if (!end) return;
    snprintf(edited, sizeof edited, "%.*s\"layer_norm_eps\":1e999%s", (int)(at - json), json, end);
    CHECK_ERR(qkv_model_config_from_json(edited, &back), QKV_ERR_INVALID_ARG, "layer_norm_eps");
}
