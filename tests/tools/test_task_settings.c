/*
 * test_task_settings.c: the configuration readers of the task families (tools/task.c,
 * seq2seq_task.c, encoder_input.c): seq2seq reads the shared keys through task.c's readers and
 * adds the decoder's (every key set, every default); the task key picks the family;
 * model.features parses names and rejects unknown and repeated ones with the file and line; word
 * dropout is a pure function of the batch position, drops rare words more often than frequent
 * ones, and takes the `lower` feature along.
 */
#include "testutil.h"

#include "encoder_input.h"
#include "seq2seq_task.h"
#include "task.h"

#include <stdio.h>
#include <unistd.h>

static bool load_text(config *cfg, const char *text) {
    char path[] = "/tmp/qkv_task_conf_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return false;
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    const bool ok = config_load(cfg, path);
    unlink(path);
    return ok;
}

static const char *shared_keys =
    "data.max_src_len = 90\ntrain.steps = 1234\ntrain.max_tokens = 777\ntrain.lr = "
    "3e-4\ntrain.warmup = 55\n"
    "train.min_lr = 2e-6\ntrain.schedule = cosine\ntrain.weight_decay = 0.05\ntrain.clip = 2.5\n"
    "train.label_smoothing = 0.2\ntrain.accum = 3\ntrain.seed = 99\ntrain.eval_every = 17\n"
    "train.log_every = 5\ntrain.threads = 1\nmodel.d_model = 48\nmodel.heads = 6\n"
    "model.encoder_layers = 2\nmodel.ff = 100\nmodel.dropout = 0.3\nmodel.norm_first = true\n"
    "model.pos = learned\nmodel.activation = gelu\nmodel.max_len = 90\n"
    "model.attention.score = cosine\nmodel.attention.relpos = t5\n"
    "model.attention.relpos_buckets = 12\n";

/* seq2seq reads the keys every task has through task.c's readers (so they cannot drift apart) and
 * adds the decoder's: every key set, then every default. */
TEST(tools_seq2seq_settings_add_the_decoder_keys) {
    for (int with_keys = 0; with_keys < 2; with_keys++) {
        config c;
        char text[4096];
        snprintf(text, sizeof text, "%s%s", with_keys ? shared_keys : "",
                 with_keys ? "model.decoder_layers = 4\nmodel.cross_attention.score = dot\n"
                             "model.tie_embeddings = true\ntrain.ss = linear\n"
                             "data.max_tgt_len = 20\n"
                           : "");
        CHECK(load_text(&c, text));
        seq2seq_settings s;
        CHECK_MSG(seq2seq_read_settings(&c, &s), "%s", c.error);
        const qkv_model_config *m = &s.model;
        CHECK(m->arch == QKV_ARCH_ENCODER_DECODER && m->pad_id == QKV_VOCAB_PAD && !m->nat);
        CHECK(m->dec_self_attn.score == m->self_attn.score &&
              m->dec_self_attn.relpos == m->self_attn.relpos &&
              !m->dec_self_attn.relpos_bidirectional && m->cross_attn.norm == m->self_attn.norm);
        if (with_keys) {
            CHECK(m->d_model == 48 && m->n_heads == 6 && m->n_encoder_layers == 2 &&
                  m->n_decoder_layers == 4 && m->dim_feedforward == 100 && m->dropout == 0.3 &&
                  m->norm_first && m->pos == QKV_POS_LEARNED && m->activation == QKV_ACT_GELU &&
                  m->max_len == 90 && m->tie_embeddings);
            CHECK(m->self_attn.score == QKV_SCORE_COSINE && m->self_attn.relpos == QKV_RELPOS_T5 &&
                  m->self_attn.relpos_buckets == 12 && m->dec_self_attn.relpos_buckets == 12);
            CHECK(m->cross_attn.score == QKV_SCORE_DOT && m->cross_attn.relpos == QKV_RELPOS_T5);
            CHECK(s.steps == 1234 && s.max_tokens == 777 && s.eval_every == 17 &&
                  s.log_every == 5 && s.threads == 1 && s.max_src_len == 90 && s.max_tgt_len == 20);
            CHECK(s.train.schedule.kind == QKV_LR_WARMUP_COSINE && s.train.optim.lr == 3e-4 &&
                  s.train.accum_steps == 3 && s.train.seed == 99 &&
                  s.train.ss_kind == QKV_SS_LINEAR);
        } else {
            const qkv_model_config d =
                qkv_model_default_config(QKV_ARCH_ENCODER_DECODER, 256, 4, 3);
            CHECK(m->d_model == d.d_model && m->n_heads == d.n_heads &&
                  m->n_encoder_layers == d.n_encoder_layers &&
                  m->n_decoder_layers == d.n_decoder_layers &&
                  m->dim_feedforward == d.dim_feedforward && m->dropout == d.dropout &&
                  m->norm_first == d.norm_first && m->pos == d.pos &&
                  m->activation == d.activation && m->max_len == 65 && !m->tie_embeddings);
            CHECK(!memcmp(&m->self_attn, &d.self_attn, sizeof d.self_attn));
            CHECK(s.steps == 2000 && s.max_tokens == 4096 && s.train.ss_kind == QKV_SS_NONE &&
                  s.decode.strategy == QKV_DECODE_BEAM && s.decode.max_len == 65);
        }
        config_free(&c);
    }
}

TEST(tools_task_key_and_encoder_keys) {
    config c;
    task *t = NULL;
    CHECK(load_text(&c, "model.d_model = 8\ntask = ranking\n"));
    CHECK(!task_create(&c, &t) &&
          strstr(c.error, ":2: task = 'ranking' is not one of: seq2seq, tagging, classify"));
    task_free(t);
    config_free(&c);
    /* seq2seq-only keys are unknown to an encoder-only task */
    CHECK(load_text(&c, "task = classify\nmodel.decoder_layers = 2\n"));
    CHECK(task_create(&c, &t));
    if (t)
        CHECK(t->ops == &classify_task_ops && t->s.model.head == QKV_HEAD_POOLED &&
              t->s.model.max_len == 512);
    CHECK(!config_check_unused(&c) && strstr(c.error, ":2: unknown key 'model.decoder_layers'"));
    task_free(t);
    config_free(&c);
    /* the model must accept the longest sentence read */
    CHECK(load_text(&c, "task = tagging\ndata.max_src_len = 100\nmodel.max_len = 50\n"));
    CHECK(!task_create(&c, &t) &&
          strstr(c.error, ":3: model.max_len = 50 is shorter than data.max_src_len = 100"));
    task_free(t);
    config_free(&c);
}

TEST(tools_model_features_key) {
    config c;
    enc_input_settings s;
    CHECK(load_text(&c, "model.features = suffix3, shape prefix1\n"));
    CHECK(enc_input_read_settings(&c, false, &s));
    CHECK(s.n_features == 3 && s.features[0] == QKV_FEAT_SUFFIX3 &&
          s.features[1] == QKV_FEAT_SHAPE && s.features[2] == QKV_FEAT_PREFIX1);
    char line[256];
    enc_input_features_line(&s, line, sizeof line);
    CHECK(!strcmp(line, "model.features = suffix3 shape prefix1"));
    config_free(&c);
    CHECK(load_text(&c, "\nmodel.features = suffix3 sufix2\n"));
    CHECK(!enc_input_read_settings(&c, false, &s) &&
          strstr(c.error, ":2: model.features: unknown feature 'sufix2'"));
    config_free(&c);
    CHECK(load_text(&c, "model.features = shape shape\n"));
    CHECK(!enc_input_read_settings(&c, false, &s) &&
          strstr(c.error, ":1: model.features: 'shape' is listed twice"));
    config_free(&c);
    CHECK(load_text(&c, ""));
    CHECK(enc_input_read_settings(&c, true, &s) && s.n_features == 0 && s.min_count == 1 &&
          s.word_dropout == 0);
    config_free(&c);
}

/* Word dropout over a batch of one row: w4 seen once, w5 seen 1000 times; alpha 1 drops them with
 * probabilities 1/2 and 1/1001. */
TEST(tools_word_dropout_is_a_function_of_the_batch) {
    enum { S = 2000 };
    enc_input in;
    memset(&in, 0, sizeof in);
    in.s.word_dropout = 1;
    in.s.n_features = 2;
    in.s.features[0] = QKV_FEAT_SHAPE;
    in.s.features[1] = QKV_FEAT_LOWER;
    int64_t counts[6] = {0, 0, 0, 0, 1, 1000};
    in.word_count = counts;
    static int32_t src[S], fids[S * 2], tgt[S];
    int64_t start[2] = {0, S}, example = 0;
    int32_t len = S;
    for (int i = 0; i < S; i++) {
        src[i] = i % 2 ? 5 : 4;
        fids[2 * i] = 7, fids[2 * i + 1] = 9;
    }
    enc_feats f = {1, start, fids};
    qkv_batch b = {.epoch = 3,
                   .index = 11,
                   .rows = 1,
                   .src_cols = S,
                   .tgt_cols = S,
                   .src = src,
                   .tgt = tgt,
                   .src_len = &len,
                   .example = &example};
    enc_batch_buf buf1, buf2;
    memset(&buf1, 0, sizeof buf1);
    memset(&buf2, 0, sizeof buf2);
    const uint64_t seed = 5;
    const int32_t *s1, *f1, *s2, *f2;
    CHECK_OK(enc_input_batch(&in, &f, &b, &seed, &buf1, &s1, &f1));
    CHECK_OK(enc_input_batch(&in, &f, &b, &seed, &buf2, &s2, &f2));
    CHECK(!memcmp(s1, s2, sizeof src) &&
          !memcmp(f1, f2, sizeof fids)); /* the same batch: the same coins */
    int dropped[2] = {0, 0};
    bool lower_follows = true;
    for (int i = 0; i < S; i++) {
        const bool d = s1[i] == QKV_VOCAB_UNK;
        dropped[i % 2] += d;
        lower_follows &= f1[2 * i] == 7 && f1[2 * i + 1] == (d ? QKV_VOCAB_UNK : 9);
    }
    CHECK(lower_follows);
    CHECK_MSG(dropped[0] > 430 && dropped[0] < 570,
              "rare word dropped %d of 1000 times (expected ~500)", dropped[0]);
    CHECK_MSG(dropped[1] < 8, "frequent word dropped %d of 1000 times (expected ~1)", dropped[1]);
    b.index = 12; /* another batch: other coins */
    CHECK_OK(enc_input_batch(&in, &f, &b, &seed, &buf2, &s2, &f2));
    CHECK(memcmp(s1, s2, sizeof src) != 0);
    CHECK_OK(enc_input_batch(&in, &f, &b, NULL, &buf2, &s2, &f2)); /* evaluation: no dropout */
    CHECK(!memcmp(s2, src, sizeof src));
    in.word_count = NULL;
    enc_batch_buf_free(&buf1);
    enc_batch_buf_free(&buf2);
}
