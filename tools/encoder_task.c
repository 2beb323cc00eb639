/* encoder_task.c: see encoder_task.h. */
#include "encoder_task.h"

#include <stdio.h>
#include <string.h>

qkv_status enc_set_load(enc_set *t, qkv_corpus_kind kind, const char *path, const qkv_read_opts *ro,
                        const enc_input *in, const qkv_vocab *tgt) {
    memset(t, 0, sizeof *t);
    qkv_status st = qkv_corpus_read(kind, path, ro, &t->corpus);
    return st ? st : enc_set_encode(t, in, tgt);
}

qkv_status enc_set_encode(enc_set *t, const enc_input *in, const qkv_vocab *tgt) {
    qkv_status st = qkv_dataset_encode(t->corpus, in->words, tgt, false, &t->data);
    return st ? st : enc_input_encode(in, t->corpus, &t->feats);
}

void enc_set_free(enc_set *t) {
    enc_feats_free(&t->feats);
    qkv_dataset_free(t->data);
    qkv_corpus_free(t->corpus);
    memset(t, 0, sizeof *t);
}

bool enc_task_check_max_len(config *cfg, const qkv_model_config *m, int64_t max_len) {
    if (m->max_len >= max_len) return true;
    return config_fail(cfg, "model.max_len",
                       "model.max_len = %d is shorter than data.max_src_len = %lld", m->max_len,
                       (long long)max_len);
}

qkv_status enc_task_vocabs(enc_input *in, const enc_input_settings *is, const qkv_corpus *train,
                           bool resume, bool sort_tgt, const char *dir, const char *name,
                           const char *const *lines, int n, qkv_vocab **tgt) {
    char path[1024];
    qkv_status st;
    if (resume) {
        if ((st = enc_input_load(in, is, dir, NULL)) ||
            (st = task_path(path, sizeof path, dir, "tgt.vocab")) ||
            (st = qkv_vocab_load(path, tgt)))
            return st;
        return QKV_OK;
    }
    if ((st = enc_input_build(in, is, train, dir)) ||
        (st = qkv_vocab_build(train, QKV_FIELD_TGT, 1, sort_tgt, tgt)) ||
        (st = task_path(path, sizeof path, dir, "tgt.vocab")) || (st = qkv_vocab_save(*tgt, path)))
        return st;
    return task_write_conf(dir, name, lines, n);
}

qkv_status enc_task_encode_train(enc_input *in, const enc_input_settings *is, enc_set *train,
                                 const qkv_vocab *tgt) {
    in->s.word_dropout = is->word_dropout; /* a training setting: from the configuration */
    qkv_status st = enc_set_encode(train, in, tgt);
    return st ? st : enc_input_count_words(in, train->data);
}

void enc_task_finish_prepare(task *t, const enc_input *in, const qkv_vocab *tgt,
                             const enc_set *train, int64_t bucket_width) {
    task_settings *s = &t->s;
    s->model.src_vocab = qkv_vocab_size(in->words);
    s->model.tgt_vocab = qkv_vocab_size(tgt);
    s->model.n_features = in->s.n_features;
    for (int k = 0; k < in->s.n_features; k++)
        s->model.feature_vocab[k] = qkv_vocab_size(in->feat[k]);
    t->train = train->data;
    t->batch_opts = qkv_batch_default_opts(s->max_tokens);
    t->batch_opts.seed = s->train.seed;
    t->batch_opts.bucket_width = bucket_width;
}

void enc_task_describe_features(const enc_input *in, FILE *f) {
    for (int k = 0; k < in->s.n_features; k++)
        fprintf(f, "%s %s %d", k ? "," : " | features:", qkv_word_feature_name(in->s.features[k]),
                qkv_vocab_size(in->feat[k]));
}
