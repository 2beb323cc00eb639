/* run_dir.h: loading what `qkv train` wrote into a run directory: the best model and the two
 * vocabularies. */
#ifndef QKV_TOOLS_RUN_DIR_H
#define QKV_TOOLS_RUN_DIR_H

#include "qkv/qkv.h"
#include "qkv/qkv_data.h"

typedef struct run_dir {
    qkv_model *model;
    qkv_vocab *src, *tgt;
} run_dir;

/* Load dir/model.safetensors (or dir itself when it names a .safetensors file, with the
 * vocabularies beside it), dir/src.vocab and dir/tgt.vocab; checks that the vocabularies fit the
 * model. Returns a status with qkv_last_error() set. */
qkv_status run_dir_load(const char *dir, run_dir *out);
void run_dir_free(run_dir *r);

/* Split one input line into source symbols (UTF-8 characters, or space-separated tokens) and look
 * them up in r->src: at most max ids into ids, their number in *len. An unknown symbol or a line
 * longer than max is an error naming file and line (qkv_last_error()). */
qkv_status run_dir_encode(const run_dir *r, const char *file, int64_t line_no, const char *text, bool tokens,
                          int32_t *ids, int64_t max, int64_t *len);

#endif
