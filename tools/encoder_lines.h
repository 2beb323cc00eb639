/*
 * encoder_lines.h: free text through an encoder-only run (tagging, classify): `qkv decode`
 * reads one input per line (space-separated tokens), looks the tokens up (unknown words are
 * <unk>, with their spelling features), runs the model on batches of 64 lines and hands each
 * batch's logits to the task's printer; `qkv attn` runs one input keeping the self-attention
 * weights of every layer and head and writes them as pictures (qkv_viz.h).
 *
 * A line longer than the model's max_len tokens is an error naming file and line; an empty line
 * gives an empty output line, so outputs stay aligned with inputs. Also here: opening such a run
 * from its task.conf, and the whole `qkv decode` / `qkv attn` drivers the tasks share (a task
 * passes its head, whether its own task.conf keys read, and its printer). The attention maps are
 * written by task_attn_write (task.h), which image runs use too (image_task.c: one token per
 * patch).
 */
#ifndef QKV_TOOLS_ENCODER_LINES_H
#define QKV_TOOLS_ENCODER_LINES_H

#include "encoder_input.h"
#include "run_dir.h"
#include "task.h"

typedef struct enc_lines {
    int64_t n;        /* lines */
    char **text;      /* each line (its tokens point into it) */
    int64_t *start;   /* n + 1 token offsets */
    const char **tok; /* token k: tok[k][0, tok_len[k]) (NUL-terminated in place) */
    int64_t *tok_len;
    int32_t *words, *feats; /* per token; feats F per token */
    int64_t *row;           /* the batch row of each line, -1 for an empty line (no row) */
    int64_t cap_lines, cap_tokens;
} enc_lines;

/* Split text into tokens and look them up; error "FILE:LINE: ..." past max_len tokens. */
qkv_status enc_lines_add(enc_lines *l, const enc_input *in, const char *file, int64_t line_no,
                         const char *text, int64_t max_len);
void enc_lines_clear(enc_lines *l);
void enc_lines_free(enc_lines *l);

/* The logits of the lines, one padded (B, S) batch of the non-empty lines (l->row), in ctx;
 * weights_out as qkv_model_classify. NULL without a non-empty line (and without an error). */
qkv_tensor *enc_lines_logits(qkv_ctx *ctx, const qkv_model *m, enc_lines *l,
                             qkv_tensor **weights_out);

/* Print the outputs of a batch: logits (B, S, K) or (B, K), row l->row[i] for line i (NULL when
 * every line is empty). */
typedef void (*enc_print_fn)(void *user, const enc_lines *l, const qkv_tensor *logits);

/* Open the inputs of an encoder-only run whose task settings (is) were read from task.conf:
 * check that the model is the encoder with the given head and the feature tables task.conf
 * describes, and load the feature vocabularies. False after a message on stderr naming cmd. */
bool enc_open_run(const run_dir *r, const char *cmd, qkv_head_kind head,
                  const enc_input_settings *is, enc_input *in);

/* enc_open_run for `qkv CMD` after the task read its own keys of the run's task.conf (keys_ok
 * false: that failed, r->conf.error says why): model.features, no other key, then the checks and
 * vocabularies of enc_open_run. False after a message on stderr. */
bool enc_open_run_conf(run_dir *r, const char *cmd, qkv_head_kind head, bool keys_ok,
                       enc_input *in);

/* `qkv decode` and `qkv attn` on an encoder-only run: enc_open_run_conf, then enc_decode_files
 * or enc_attn with the options o. The exit status. */
int enc_decode_run(run_dir *r, qkv_head_kind head, bool keys_ok, const char *const *files,
                   int n_files, const task_run_opts *o, enc_print_fn print, void *user);
int enc_attn_run(run_dir *r, qkv_head_kind head, bool keys_ok, const char *input,
                 const task_run_opts *o);

/* `qkv decode` for an encoder-only run: every line of the files (stdin when n_files is 0), in
 * batches of 64 lines, or each line as soon as it is read with stream. Returns the exit status
 * (messages on stderr). */
int enc_decode_files(const run_dir *r, const enc_input *in, const char *const *files, int n_files,
                     bool stream, enc_print_fn print, void *user);

/* `qkv attn` for an encoder-only run: the self-attention maps of every layer and head for one
 * input, with the model's outputs (tags or the label) above them; files into out_dir (NULL:
 * RUN/attn), and with terminal the maps picked by layer / head (negative: all; by default every
 * head of the last layer) printed shaded. Returns the exit status. */
int enc_attn(const run_dir *r, const char *run, const enc_input *in, const char *input,
             const char *out_dir, bool terminal, int layer, int head);

#endif
