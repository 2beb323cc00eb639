/*
 * seq2seq_task.h: what `qkv train`, `qkv eval` and `qkv decode` share for sequence-to-sequence
 * tasks (G2P: characters -> phones; any "source<TAB>t1 t2 ..." pairs file): reading the
 * configuration into model, training and decoding settings, the vocabularies, the data sets, and
 * the multi-reference WER / PER evaluation with batched beam or greedy decoding.
 *
 * A run directory (out.dir) holds src.vocab, tgt.vocab, model.safetensors (best on dev),
 * last.safetensors, checkpoint.safetensors (resume), log.jsonl and report.html.
 */
#ifndef QKV_TOOLS_SEQ2SEQ_TASK_H
#define QKV_TOOLS_SEQ2SEQ_TASK_H

#include "config.h"
#include "task.h"
#include "qkv/qkv.h"
#include "qkv/qkv_data.h"
#include "qkv/qkv_decode.h"

typedef struct seq2seq_settings {
    const char *train_path, *dev_path, *test_path, *out_dir;
    qkv_tokenizer_kind src_tokenizer; /* data.src_tokenizer (chars; data.src_tokens = true: tokens) */
    qkv_tokenizer_kind tgt_tokenizer; /* data.tgt_tokenizer (tokens) */
    /* data.src_tokenizer_model, data.tgt_tokenizer_model: the model files of tokenizers that take
     * one (bpe), NULL for the others; in a run's task.conf, relative to the run directory */
    const char *src_tokenizer_model, *tgt_tokenizer_model;
    int64_t max_src_len, max_tgt_len;
    qkv_model_config model;
    qkv_train_config train;
    int64_t steps, max_tokens, eval_every, log_every, eval_max_items, threads, keep_checkpoints;
    qkv_decode_params decode;
    int64_t eval_batch;
    bool bleu; /* eval.metric = bleu: translation, scored and selected by BLEU (else G2P's WER) */
} seq2seq_settings;

/* Read every setting (defaults documented in docs/cli.md). False with cfg->error on a bad value. */
bool seq2seq_read_settings(config *cfg, seq2seq_settings *s);
/* data.src_tokenizer (data.src_tokens = true is its older spelling of tokens),
 * data.tgt_tokenizer and their model files (data.src_tokenizer_model, data.tgt_tokenizer_model:
 * required by a tokenizer that takes one, refused by the others): from the training
 * configuration, or from a run's task.conf. */
bool seq2seq_read_tokenizers(config *cfg, seq2seq_settings *s);

/* The two tokenizers of a run, loaded from their model files (a relative path is relative to dir
 * when dir is not NULL). */
typedef struct seq2seq_tokenizers {
    qkv_tokenizer *src, *tgt;
} seq2seq_tokenizers;
qkv_status seq2seq_tokenizers_open(const seq2seq_settings *s, const char *dir, seq2seq_tokenizers *out);
void seq2seq_tokenizers_free(seq2seq_tokenizers *t);

/* How the pairs files are read: the length limits and the two tokenizers. */
qkv_read_opts seq2seq_read_opts(const seq2seq_settings *s, const qkv_tokenizer *src, const qkv_tokenizer *tgt);

/* The evaluation data of a split: its corpus encoded with the run's vocabularies, and the groups
 * of references: one item per word, whose lines must be consecutive (G2P), or, per_line
 * (translation, eval.metric = bleu), one item per line with its one reference, as sacreBLEU pairs
 * line i of the hypotheses with line i of the references. */
typedef struct seq2seq_eval_set {
    qkv_corpus *corpus;
    qkv_dataset *data;
    qkv_groups groups;
} seq2seq_eval_set;

qkv_status seq2seq_eval_set_load(const char *path, const qkv_read_opts *ro, bool per_line, const qkv_vocab *src,
                                 const qkv_vocab *tgt, seq2seq_eval_set *out);
void seq2seq_eval_set_free(seq2seq_eval_set *e);

/* Decode the first example of each group (up to max_items; 0: all) and score it against the
 * group's references. When hyp_out is given, it receives the best hypothesis per item (malloc'd,
 * to free with seq2seq_free_hyps). */
typedef struct seq2seq_hyps {
    int64_t n;
    int32_t **tokens;
    int64_t *len;
} seq2seq_hyps;
qkv_status seq2seq_evaluate(const qkv_model *m, const seq2seq_eval_set *e, const qkv_decode_params *p,
                            int64_t batch, int64_t max_items, qkv_wer_counts *counts, seq2seq_hyps *hyp_out);
/* eval.metric of a configuration or task.conf: whether it is bleu. */
bool seq2seq_read_metric(config *cfg, bool *bleu);
/* Corpus BLEU and chrF (sacreBLEU's defaults, qkv_mt_metrics.h) of the hypotheses h of e's first
 * h->n items: each hypothesis, and every reference of its item (the targets of its group: one
 * with per_line groups), joined into text with the target tokenizer tok. */
qkv_status seq2seq_text_scores(const seq2seq_eval_set *e, const seq2seq_hyps *h, const qkv_vocab *tgt,
                               const qkv_tokenizer *tok, qkv_bleu_stats *bleu, qkv_chrf_stats *chrf);
void seq2seq_free_hyps(seq2seq_hyps *h);

/* Non-autoregressive runs (model.nat): the decoder's mask token is the symbol "<mask>" of the
 * target vocabulary, added after the data symbols when the vocabulary is built (add: an error when
 * the data already use it) and found again in a saved tgt.vocab (!add: an error when absent);
 * its id goes to *mask_id (qkv_model_config.mask_id). */
#define SEQ2SEQ_MASK "<mask>"
qkv_status seq2seq_nat_mask(qkv_vocab *tgt, bool add, int32_t *mask_id);

/* `qkv eval` on a seq2seq run (seq2seq_run.c; task_ops.eval_run). */
struct run_dir;
int seq2seq_eval_run(struct run_dir *r, const char *data, const task_run_opts *o);
/* `qkv decode` on a seq2seq run (seq2seq_run.c; task_ops.decode_run). */
int seq2seq_decode_run(struct run_dir *r, const char *const *files, int n_files, const task_run_opts *o);
/* `qkv attn` on a seq2seq run (seq2seq_attn.c; task_ops.attn_run). */
int seq2seq_attn_run(struct run_dir *r, const char *input, const task_run_opts *o);

#endif
