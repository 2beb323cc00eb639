/*
 * encoder_task.h: what the encoder-only task families (tagging_task.c, classify_task.c) share
 * to train and evaluate: a data file encoded for a run, the check of model.max_len against the
 * longest input read, the vocabularies of a run (built from the training corpus and saved with
 * task.conf on a fresh run, read back from the run directory on --resume), the encoded training
 * set, the model's vocabulary sizes and the batching options, and the features part of the data
 * description. What differs (the corpus format, the labels, the metrics) stays in the task's file.
 */
#ifndef QKV_TOOLS_ENCODER_TASK_H
#define QKV_TOOLS_ENCODER_TASK_H

#include "encoder_input.h"
#include "task.h"

/* A data file of an encoder-only task encoded for a run: the corpus, its examples (src: word ids,
 * tgt: tags or labels) and the feature ids of every token. */
typedef struct enc_set {
    qkv_corpus *corpus;
    qkv_dataset *data;
    enc_feats feats;
} enc_set;

/* Read path (a corpus of the given kind, options ro) and encode it (enc_set_encode). */
qkv_status enc_set_load(enc_set *t, qkv_corpus_kind kind, const char *path, const qkv_read_opts *ro,
                        const enc_input *in, const qkv_vocab *tgt);
/* Encode t->corpus with the run's inputs and target vocabulary. */
qkv_status enc_set_encode(enc_set *t, const enc_input *in, const qkv_vocab *tgt);
void enc_set_free(enc_set *t);

/* model.max_len must hold data.max_src_len = max_len tokens; false with cfg->error. */
bool enc_task_check_max_len(config *cfg, const qkv_model_config *m, int64_t max_len);

/* The vocabularies of a run in dir: on resume load the word and feature vocabularies and
 * tgt.vocab; on a fresh run build them from the training corpus (tgt.vocab sorted, or in
 * first-seen order), save them and write task.conf ("task = name" and the n lines). */
qkv_status enc_task_vocabs(enc_input *in, const enc_input_settings *is, const qkv_corpus *train,
                           bool resume, bool sort_tgt, const char *dir, const char *name,
                           const char *const *lines, int n, qkv_vocab **tgt);

/* Encode the training set (its corpus read) and count its words for word dropout, whose alpha
 * comes from the configuration, also on resume. */
qkv_status enc_task_encode_train(enc_input *in, const enc_input_settings *is, enc_set *train,
                                 const qkv_vocab *tgt);

/* The end of prepare: the model's vocabulary and feature-table sizes, the training set and the
 * batching options (max_tokens and seed of the settings, the given bucket width). */
void enc_task_finish_prepare(task *t, const enc_input *in, const qkv_vocab *tgt,
                             const enc_set *train, int64_t bucket_width);

/* " | features: suffix3 812, shape 40" (nothing without features). */
void enc_task_describe_features(const enc_input *in, FILE *f);

#endif
