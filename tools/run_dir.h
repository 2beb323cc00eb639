/* run_dir.h: loading what `qkv train` wrote into a run directory: the best model, the two
 * vocabularies and task.conf (the run's task and how it reads inputs, task.h). */
#ifndef QKV_TOOLS_RUN_DIR_H
#define QKV_TOOLS_RUN_DIR_H

#include "config.h"
#include "qkv/qkv.h"
#include "qkv/qkv_data.h"

struct task_ops;

typedef struct run_dir {
    qkv_model *model;
    qkv_decoder *decoder; /* the model's decoder: keeps its session from one batch to the next */
    qkv_vocab *src, *tgt;
    char dir[1024];             /* where the run's files are */
    const struct task_ops *task; /* from task.conf; seq2seq when there is none */
    config conf;                /* task.conf (empty when there is none) */
    bool src_tokens;            /* seq2seq: data.src_tokens of task.conf (space-separated sources) */
} run_dir;

/* Load dir/model.safetensors (or dir itself when it names a .safetensors file, with the
 * vocabularies beside it), dir/src.vocab (not for an image model or a decoder-only model: src stays
 * NULL), dir/tgt.vocab and dir/task.conf when present; checks
 * that the vocabularies fit the model and that task.conf names a task. Returns a status with
 * qkv_last_error() set. */
qkv_status run_dir_load(const char *dir, run_dir *out);
void run_dir_free(run_dir *r);

/* Split one input line into source symbols (UTF-8 characters, or space-separated tokens when
 * tokens or r->src_tokens is set) and look
 * them up in r->src: at most max ids into ids, their number in *len. An unknown symbol or a line
 * longer than max is an error naming file and line (qkv_last_error()). */
qkv_status run_dir_encode(const run_dir *r, const char *file, int64_t line_no, const char *text, bool tokens,
                          int32_t *ids, int64_t max, int64_t *len);

#endif
