/*
 * test_task_settings.c: the configuration readers of the task families (tools/task.c,
 * seq2seq_task.c, encoder_input.c): seq2seq and the encoder-only tasks read the shared train.*
 * and model keys into the same configurations (the readers are separate, the keys and defaults
 * must not drift apart); the task key picks the family; model.features parses names and rejects
 * unknown and repeated ones with the file and line; word dropout is a pure function of the batch
 * position, drops rare words more often than frequent ones, and takes the `lower` feature along.
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
    "train.label_smoothing = 0.2\ntrain.ema = 0.99\ntrain.beta2 = 0.995\ntrain.eps = 1e-7\n"
    "train.accum = 3\ntrain.seed = 99\ntrain.eval_every = 17\n"
    "train.log_every = 5\ntrain.threads = 1\nmodel.d_model = 48\nmodel.heads = 6\n"
    "model.encoder_layers = 2\nmodel.ff = 100\nmodel.dropout = 0.3\nmodel.norm_first = true\n"
    "model.pos = learned\nmodel.activation = gelu\nmodel.max_len = 90\n"
    "model.attention.score = cosine\nmodel.attention.relpos = t5\n"
    "model.attention.relpos_buckets = 12\n";

static void expect_same_train(const qkv_train_config *a, const qkv_train_config *b) {
    CHECK(a->schedule.kind == b->schedule.kind && a->schedule.base_lr == b->schedule.base_lr &&
          a->schedule.warmup_steps == b->schedule.warmup_steps &&
          a->schedule.total_steps == b->schedule.total_steps &&
          a->schedule.min_lr == b->schedule.min_lr);
    CHECK(a->optim.lr == b->optim.lr && a->optim.weight_decay == b->optim.weight_decay &&
          a->optim.beta2 == b->optim.beta2 && a->optim.eps == b->optim.eps);
    CHECK(a->clip_norm == b->clip_norm && a->label_smoothing == b->label_smoothing &&
          a->accum_steps == b->accum_steps && a->seed == b->seed && a->ema_decay == b->ema_decay);
}

TEST(tools_task_readers_agree_with_seq2seq) {
    for (int with_keys = 0; with_keys < 2; with_keys++) { /* every key set, then every default */
        config c1, c2;
        char text[4096];
        snprintf(text, sizeof text, "%s", with_keys ? shared_keys : "");
        CHECK(load_text(&c1, text));
        snprintf(text, sizeof text, "task = tagging\n%s", with_keys ? shared_keys : "");
        CHECK(load_text(&c2, text));
        seq2seq_settings s;
        CHECK(seq2seq_read_settings(&c1, &s));
        task *t = NULL;
        CHECK_MSG(task_create(&c2, &t), "%s", c2.error);
        if (t) {
            CHECK(t->ops == &tagging_task_ops);
            expect_same_train(&s.train, &t->s.train);
            CHECK(s.steps == t->s.steps && s.max_tokens == t->s.max_tokens &&
                  s.eval_every == t->s.eval_every && s.log_every == t->s.log_every &&
                  s.threads == t->s.threads);
            const qkv_model_config *a = &s.model, *b = &t->s.model;
            CHECK(b->arch == QKV_ARCH_ENCODER && b->head == QKV_HEAD_TOKEN);
            CHECK(a->d_model == b->d_model && a->n_heads == b->n_heads &&
                  a->n_encoder_layers == b->n_encoder_layers &&
                  a->dim_feedforward == b->dim_feedforward && a->dropout == b->dropout &&
                  a->norm_first == b->norm_first && a->pos == b->pos &&
                  a->activation == b->activation);
            CHECK(!memcmp(&a->self_attn, &b->self_attn, sizeof a->self_attn));
            if (with_keys)
                CHECK(b->max_len == 90 && b->self_attn.score == QKV_SCORE_COSINE &&
                      b->self_attn.relpos_buckets == 12 && t->s.train.ema_decay == 0.99 &&
                      t->s.train.optim.beta2 == 0.995 && t->s.train.optim.eps == 1e-7);
        }
        task_free(t);
        config_free(&c1);
        config_free(&c2);
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
