/* run_dir.h: loading what `qkv train` wrote into a run directory: the best model, the two
 * vocabularies and task.conf (the run's task and how it reads inputs, task.h). */
#ifndef QKV_TOOLS_RUN_DIR_H
#define QKV_TOOLS_RUN_DIR_H

#include "config.h"
#include "qkv/qkv.h"
#include "qkv/qkv_data.h"

#include <stdio.h>

struct task_ops;

typedef struct run_dir {
    qkv_model *model;
    qkv_decoder *decoder; /* the model's decoder: keeps its session from one batch to the next */
    qkv_vocab *src, *tgt;
    char dir[1024];             /* where the run's files are */
    const struct task_ops *task; /* from task.conf; seq2seq when there is none */
    config conf;                /* task.conf (empty when there is none) */
    /* seq2seq: the tokenizers of task.conf (chars and tokens without one), with their model files */
    qkv_tokenizer *src_tokenizer, *tgt_tokenizer;
} run_dir;

/* Load dir/model.safetensors (or dir itself when it names a .safetensors file, with the
 * vocabularies beside it), dir/src.vocab (not for an image model or a decoder-only model: src stays
 * NULL), dir/tgt.vocab and dir/task.conf when present; checks
 * that the vocabularies fit the model and that task.conf names a task. Returns a status with
 * qkv_last_error() set. */
qkv_status run_dir_load(const char *dir, run_dir *out);
void run_dir_free(run_dir *r);

/* The tokenizer of the run's sources: data.src_tokenizer of task.conf, or tokens when `tokens`
 * (--tokens, for runs without a task.conf that says so; chars for a run of another task). */
const qkv_tokenizer *run_dir_src_tokenizer(const run_dir *r, bool tokens);

/* Cut one input line into source symbols with tok and look them up in r->src: at most max ids
 * into ids, their number in *len. An unknown symbol, a line the tokenizer refuses or one longer
 * than max is an error naming file and line (qkv_last_error()). */
qkv_status run_dir_encode(const run_dir *r, const char *file, int64_t line_no, const char *text,
                          const qkv_tokenizer *tok, int32_t *ids, int64_t max, int64_t *len);

/* The text of n symbols joined as tokenizer t joins them (malloc'd, NUL-terminated; NULL when out of
 * memory). */
char *join_symbols(const qkv_tokenizer *t, const char *const *syms, const size_t *lens, int64_t n);
/* The text of the symbols of ids[0, n) in v, up to the first <eos>, joined by t (as join_symbols). */
char *ids_text(const qkv_tokenizer *t, const qkv_vocab *v, const int32_t *ids, int64_t n);

/* The same for a target text (a forced prefix, allowed symbols): cut with the run's target
 * tokenizer, looked up in r->tgt. */
qkv_status run_dir_encode_target(const run_dir *r, const char *file, int64_t line_no, const char *text, int32_t *ids,
                                 int64_t max, int64_t *len);

/* Write the symbols of ids[0, n) in v, up to the first <eos>, to f, joined as tokenizer t joins
 * them (words, phones: one space between them; characters: nothing). */
void print_symbols(FILE *f, const qkv_tokenizer *t, const qkv_vocab *v, const int32_t *ids, int64_t n);
/* The same with the run's target vocabulary and tokenizer. */
void run_dir_print_target(FILE *f, const run_dir *r, const int32_t *ids, int64_t n);

#endif
