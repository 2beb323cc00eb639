/*
 * task.h: what `qkv train` needs from a task family, so its training loop (cmd_train.c) is the
 * same for all of them. The configuration key `task` picks the family:
 *
 *   seq2seq   pairs "source<TAB>t1 t2 ...": encoder-decoder, dev WER / PER (seq2seq_task.c)
 *   tagging   token-per-line tagged sentences: encoder-only, token head, token accuracy
 *             (tagging_task.c)
 *   classify  "label<TAB>t1 t2 ...": encoder-only, pooled head, accuracy (classify_task.c)
 *   image     "label<TAB>p1 p2 ...": pixels of fixed-size images, a ViT-style encoder,
 *             accuracy (image_task.c)
 *   lm        plain text, one text per line: decoder-only language model, dev cross-entropy,
 *             perplexity and bits per character (lm_task.c)
 *
 * A task reads its keys, loads the training and dev data with its vocabularies (built and saved
 * into the run directory on a fresh run, read back from it on --resume), turns each batch of the
 * batcher into a trainer batch, and evaluates a model on the dev set into named metrics. One of
 * them (ops->select) picks the best checkpoint (model.safetensors); the training log has one
 * "dev_<key>" member per metric.
 *
 * Every task writes task.conf into the run directory: the `task` key and the keys `qkv eval`,
 * `qkv decode` and `qkv attn` need to read inputs the way training did (a run without task.conf
 * is a seq2seq run: the runs written before tasks existed).
 */
#ifndef QKV_TOOLS_TASK_H
#define QKV_TOOLS_TASK_H

#include "config.h"
#include "qkv/qkv.h"
#include "qkv/qkv_data.h"
#include "qkv/qkv_train.h"
#include "qkv/qkv_viz.h"

#include <stdio.h>

#define TASK_MAX_METRICS 8

typedef struct task_metric {
    const char *key;   /* log.jsonl member "dev_<key>" (e.g. "wer", "accuracy") */
    const char *label; /* printed name (e.g. "WER", "accuracy") */
    double value;      /* in percent (plain: as it is) */
    bool plain;        /* not a percentage (e.g. a cross-entropy) */
} task_metric;

typedef struct task_metrics {
    int n;
    task_metric m[TASK_MAX_METRICS];
    int64_t items;    /* what was scored */
    const char *unit; /* "words", "tokens", "texts" */
} task_metrics;

/* Append a metric (ignored past TASK_MAX_METRICS); the value of key (NAN when absent). */
void task_metrics_add(task_metrics *m, const char *key, const char *label, double value);
/* The same for a value that is not a percentage. */
void task_metrics_add_plain(task_metrics *m, const char *key, const char *label, double value);
double task_metrics_get(const task_metrics *m, const char *key);

/* The settings every task has: what the training loop reads. */
typedef struct task_settings {
    const char *train_path, *dev_path, *test_path, *out_dir;
    qkv_model_config model;
    qkv_train_config train;
    int64_t steps, max_tokens, eval_every, log_every, threads;
    int64_t keep_checkpoints; /* train.keep_checkpoints: step-<S>.safetensors of the last N evaluations */
} task_settings;

typedef struct task task;
struct run_dir;

/* The command-line options of `qkv eval / decode / attn` that reach a task's inference. */
typedef struct task_run_opts {
    const char *run; /* the RUN argument (a directory or a model file) */
    int show;        /* eval --show N */
    bool stream;     /* decode --stream: each input as soon as it is read */
    const char *out_dir;
    bool terminal;
    int layer, head;                        /* attn filters; negative: none */
    int kind;                               /* attn --kind: a qkv_attn_kind; negative: any */
    const struct qkv_decode_params *decode; /* eval, decode: the search options (tasks that generate) */
    bool strategy_set;                      /* a search option (--greedy, --beam, ...) was given */
    bool src_tokens;                        /* --tokens: space-separated source tokens */
    const char *allow;                      /* decode --allow FILE: the target symbols allowed */
    bool prefix;                            /* decode --prefix: source<TAB>forced target prefix */
} task_run_opts;

typedef struct task_ops {
    const char *name;     /* the value of the `task` key */
    const char *summary;  /* one line: its data, model and metric (`qkv list task`) */
    const char *select;   /* key of the metric that picks model.safetensors */
    bool lower_is_better; /* of that metric */
    /* Read every key of the task (after `task`) into a new task; false with cfg->error. */
    bool (*create)(config *cfg, task **out);
    /* Read the training and dev data; build the vocabularies and save them with task.conf into
     * out_dir (fresh run) or load them from it (resume). Fills the vocabulary sizes of
     * t->s.model, t->train and t->batch_opts. qkv_last_error() on failure. */
    qkv_status (*prepare)(task *t, bool resume);
    /* The trainer batch of a batcher batch; its arrays stay valid until the next call. */
    qkv_status (*batch)(task *t, const qkv_batch *b, qkv_train_batch *out);
    /* Score m on the dev set. */
    qkv_status (*evaluate)(task *t, const qkv_model *m, task_metrics *out);
    /* One line about the data (sizes, vocabularies), without the newline. */
    void (*describe)(const task *t, FILE *f);
    void (*free)(task *t);
    /* `qkv eval`, `qkv decode` and `qkv attn` on a run of this task (exit statuses, messages on
     * stderr). */
    int (*eval_run)(struct run_dir *r, const char *data, const task_run_opts *o);
    int (*decode_run)(struct run_dir *r, const char *const *files, int n_files,
                      const task_run_opts *o);
    int (*attn_run)(struct run_dir *r, const char *input, const task_run_opts *o);
    bool generates; /* decode_run reads the search options of `qkv decode` (o->decode) */
    /* Its runs transduce source sequences into target sequences (an encoder-decoder): eval_run
     * decodes with the search options of `qkv eval` (o->decode), and `qkv eval / decode / attn`
     * take --tokens (o->src_tokens), --mask-predict and --length-beam; other tasks refuse them */
    bool transduces;
    /* What the training rate counts: the trainer's weighted targets per second, one per target
     * token, or one per text / image for tasks with one label an input ("texts", "images");
     * NULL: "tok". */
    const char *rate_unit;
    /* Its models read images (pixels), not tokens: `qkv eval / decode / attn` refuse a run whose
     * model and task disagree. */
    bool reads_images;
    /* Optional: read what the task's inference needs from a run's task.conf (r->conf; empty for
     * a run without one) into r, e.g. seq2seq's tokenizers; an error names the file. */
    qkv_status (*open_run)(struct run_dir *r);
} task_ops;

/* The part of a task the training loop sees; implementations embed it as their first member. */
struct task {
    const task_ops *ops;
    /* The metric that picks model.safetensors: ops->select and ops->lower_is_better unless the
     * task's settings chose another (seq2seq's eval.metric = bleu); task_create sets it. */
    const char *select;
    bool lower_is_better;
    task_settings s;
    const qkv_dataset *train;  /* set by prepare */
    qkv_batch_opts batch_opts; /* set by prepare (max_tokens and seed from s) */
};

extern const task_ops seq2seq_task_ops, tagging_task_ops, classify_task_ops, image_task_ops, lm_task_ops;

/* The task family called name; NULL when there is none. */
const task_ops *task_find(const char *name);
/* The task families, in the order `qkv list task` prints them: i < task_count(). */
int task_count(void);
const task_ops *task_at(int i);
/* What a task's runs can do, as the commands ask: task_ops.generates and task_ops.transduces. */
typedef enum task_ability { TASK_GENERATES, TASK_TRANSDUCES } task_ability;
bool task_can(const task_ops *t, task_ability a);
/* Whether task t takes a command-line option (NULL: none given) that applies to the tasks that
 * can `a`. When it does not, prints "qkv CMD: OPTION applies to seq2seq and lm runs; RUN is a T
 * run". */
bool task_takes_option(const char *cmd, const task_ops *t, const char *option, task_ability a, const char *run);
/* Read the `task` key (default seq2seq) and create that task; false with cfg->error. */
bool task_create(config *cfg, task **out);
void task_free(task *t); /* accepts NULL */

/* The steps S of the files step-<S>.safetensors in dir (train.keep_checkpoints), the latest first:
 * at most cap of them into steps; their number, or -1 (qkv_last_error()) when dir cannot be read. */
int task_step_models(const char *dir, long long *steps, int cap);

/* "<dir>/<name>" into buf; QKV_ERR_INVALID_ARG (qkv_last_error()) when it does not fit. */
qkv_status task_path(char *buf, size_t size, const char *dir, const char *name);

/* Shared readers of every task (seq2seq_read_settings adds the decoder's keys):
 * data.train, data.dev, data.test, out.dir and the train.* keys but scheduled sampling, guided
 * attention and the nat length loss; the encoder model keys (model.d_model, heads,
 * encoder_layers, ff, dropout, norm_first, pos, activation, max_len, attention.*) into an
 * encoder-only configuration with the given head; the attention keys <prefix>.score, norm,
 * relpos, relpos_max_distance, relpos_buckets over the defaults in a. False with cfg->error. */
bool task_read_common(config *cfg, task_settings *s);
bool task_read_encoder_model(config *cfg, qkv_head_kind head, int64_t default_max_len,
                             qkv_model_config *m);
bool task_read_attention(config *cfg, const char *prefix, qkv_mha_config *a);


/* `qkv attn` for one stack of self-attention layers (the encoder of tagging / classify, the causal
 * stack of a language model): n_layers weight tensors (1, H, rows, cols) become the maps of every
 * layer and head, written with the page's title and tokens into out_dir (NULL: RUN/attn, or ./attn
 * when RUN is a model file); a line "N attention maps (L <stack> layers x H heads):
 * DIR/index.html"; with terminal, the maps picked by layer / head (negative: any; neither given:
 * every head of the last layer) printed shaded. Returns the exit status (messages on stderr). */
typedef struct task_attn {
    const char *run, *out_dir;
    const char *stack; /* "encoder", "decoder" */
    qkv_attn_kind kind;
    qkv_tensor *const *weights;
    int64_t n_layers, n_heads, rows, cols;
    const char *const *row_labels, *const *col_labels;
    qkv_attn_page page; /* title and tokens (its maps are filled in) */
    bool terminal;
    int layer, head;
} task_attn;
int task_attn_write(const task_attn *a);


/* Write task.conf into dir: "task = <name>" and the n lines of `lines` ("key = value"). */
qkv_status task_write_conf(const char *dir, const char *name, const char *const *lines, int n);

#endif
