/* task.c: the task registry and what the task families share (task.h). */
#include "task.h"

#include "qkv/qkv_io.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const task_ops *const all_tasks[] = {&seq2seq_task_ops, &tagging_task_ops,
                                            &classify_task_ops, &image_task_ops, &lm_task_ops};
#define N_TASKS (int)(sizeof all_tasks / sizeof *all_tasks)

void task_metrics_add(task_metrics *m, const char *key, const char *label, double value) {
    if (m->n < TASK_MAX_METRICS) m->m[m->n++] = (task_metric){key, label, value, false};
}

void task_metrics_add_plain(task_metrics *m, const char *key, const char *label, double value) {
    if (m->n < TASK_MAX_METRICS) m->m[m->n++] = (task_metric){key, label, value, true};
}

double task_metrics_get(const task_metrics *m, const char *key) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->m[i].key, key)) return m->m[i].value;
    return NAN;
}

const task_ops *task_find(const char *name) {
    for (int i = 0; i < N_TASKS; i++)
        if (!strcmp(all_tasks[i]->name, name)) return all_tasks[i];
    return NULL;
}

int task_count(void) { return N_TASKS; }
const task_ops *task_at(int i) { return i >= 0 && i < N_TASKS ? all_tasks[i] : NULL; }

bool task_can(const task_ops *t, task_ability a) {
    return a == TASK_GENERATES ? t->generates : t->transduces;
}

bool task_takes_option(const char *cmd, const task_ops *t, const char *option, task_ability a, const char *run) {
    if (!option || task_can(t, a)) return true;
    const char *names[N_TASKS]; /* the tasks it applies to: "a", "a and b", "a, b and c" */
    int n = 0;
    for (int i = 0; i < N_TASKS; i++)
        if (task_can(all_tasks[i], a)) names[n++] = all_tasks[i]->name;
    char list[256] = "";
    for (int i = 0, len = 0; i < n && len < (int)sizeof list; i++) {
        const int k = snprintf(list + len, sizeof list - (size_t)len, "%s%s", i == 0 ? "" : i + 1 == n ? " and " : ", ",
                               names[i]);
        if (k > 0) len += k;
    }
    fprintf(stderr, "qkv %s: %s applies to %s runs; %s is a %s run\n", cmd, option, list, run, t->name);
    return false;
}

bool task_create(config *cfg, task **out) {
    *out = NULL;
    const char *names[N_TASKS];
    for (int i = 0; i < N_TASKS; i++)
        names[i] = all_tasks[i]->name;
    int k = 0;
    if (!config_enum(cfg, "task", 0, names, N_TASKS, &k) || !all_tasks[k]->create(cfg, out)) return false;
    if (!(*out)->select) {
        (*out)->select = all_tasks[k]->select;
        (*out)->lower_is_better = all_tasks[k]->lower_is_better;
    }
    return true;
}

void task_free(task *t) {
    if (t) t->ops->free(t);
}

static int by_step_descending(const void *a, const void *b) {
    const long long x = *(const long long *)a, y = *(const long long *)b;
    return (x < y) - (x > y);
}

int task_step_models(const char *dir, long long *steps, int cap) {
    DIR *d = opendir(dir);
    if (!d) return qkv_set_error(QKV_ERR_IO, "%s: cannot list: %s", dir, strerror(errno)), -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < cap;) {
        long long v;
        char again[64];
        if (sscanf(e->d_name, "step-%lld.safetensors", &v) == 1 && v >= 0 &&
            snprintf(again, sizeof again, "step-%lld.safetensors", v) > 0 && !strcmp(again, e->d_name))
            steps[n++] = v;
    }
    closedir(d);
    qsort(steps, (size_t)n, sizeof *steps, by_step_descending);
    return n;
}

qkv_status task_path(char *buf, size_t size, const char *dir, const char *name) {
    int n = snprintf(buf, size, "%s/%s", dir, name);
    if (n > 0 && (size_t)n < size) return QKV_OK;
    return qkv_set_error(QKV_ERR_INVALID_ARG, "%s/%s: path longer than %zu bytes", dir, name,
                         size - 1);
}

int task_attn_write(const task_attn *a) {
    const int64_t L = a->n_layers, H = a->n_heads, cells = a->rows * a->cols;
    qkv_attn_map *maps = calloc((size_t)(L * H), sizeof *maps);
    if (!maps) {
        fprintf(stderr, "qkv attn: out of memory\n");
        return 1;
    }
    for (int64_t l = 0; l < L; l++)
        for (int64_t h = 0; h < H; h++)
            maps[l * H + h] = (qkv_attn_map){.stack = a->stack,
                                             .layer = (int)l,
                                             .head = (int)h,
                                             .kind = a->kind,
                                             .rows = a->rows,
                                             .cols = a->cols,
                                             .dtype = QKV_REAL,
                                             .weights = (const qkv_real *)a->weights[l]->data +
                                                        h * cells, /* (1, H, rows, cols) */
                                             .row_labels = a->row_labels,
                                             .col_labels = a->col_labels};
    char dir[1024];
    const size_t n = strlen(a->run);
    const bool file = n > 12 && !strcmp(a->run + n - 12, ".safetensors");
    snprintf(dir, sizeof dir, "%s%s",
             a->out_dir ? a->out_dir
             : file     ? "attn"
                        : a->run,
             a->out_dir || file ? "" : "/attn");
    qkv_attn_page page = a->page;
    page.maps = maps;
    page.n_maps = L * H;
    mkdir(dir, 0777);
    qkv_status st = qkv_attn_export(dir, &page, NULL);
    if (!st)
        printf("%lld attention maps (%lld %s layers x %lld heads): %s/index.html\n",
               (long long)(L * H), (long long)L, a->stack, (long long)H, dir);
    for (int64_t i = 0; !st && a->terminal && i < L * H; i++) {
        const bool filtered = a->layer >= 0 || a->head >= 0;
        const bool pick = filtered ? (a->layer < 0 || maps[i].layer == a->layer) &&
                                         (a->head < 0 || maps[i].head == a->head)
                                   : maps[i].layer == L - 1;
        if (!pick) continue;
        printf("\n");
        st = qkv_attn_terminal(stdout, &maps[i], NULL);
    }
    if (st) fprintf(stderr, "qkv attn: %s\n", qkv_last_error());
    free(maps);
    return st ? 1 : 0;
}

qkv_status task_write_conf(const char *dir, const char *name, const char *const *lines, int n) {
    char path[1024];
    qkv_status st = task_path(path, sizeof path, dir, "task.conf");
    if (st) return st;
    size_t size = 128 + strlen(name);
    for (int i = 0; i < n; i++) size += strlen(lines[i]) + 1;
    char *text = malloc(size);
    if (!text) return qkv_set_error(QKV_ERR_OOM, "%s: out of memory", path);
    int len = snprintf(text, size, "# written by qkv train: how qkv eval, decode and attn read inputs for this run\n"
                                   "task = %s\n", name);
    for (int i = 0; i < n; i++) len += snprintf(text + len, size - (size_t)len, "%s\n", lines[i]);
    st = qkv_file_write_atomic(path, text, (size_t)len);
    free(text);
    return st;
}

/* ---- shared readers ---------------------------------------------------------------------------
 */

#define N(a) a, (int)(sizeof a / sizeof *a)

bool task_read_attention(config *cfg, const char *prefix, qkv_mha_config *a) {
    char key[96];
    int e = 0;
    int64_t v = 0;
#define KEY(name) (snprintf(key, sizeof key, "%s.%s", prefix, name), key)
    if (!config_registry(cfg, KEY("score"), QKV_REGISTRY_SCORE, a->score, &e)) return false;
    a->score = (qkv_score_kind)e;
    if (!config_registry(cfg, KEY("norm"), QKV_REGISTRY_NORM, a->norm, &e)) return false;
    a->norm = (qkv_attn_norm)e;
    if (!config_registry(cfg, KEY("relpos"), QKV_REGISTRY_RELPOS, a->relpos, &e)) return false;
    a->relpos = (qkv_relpos_kind)e;
    if (!config_int(cfg, KEY("relpos_max_distance"), a->relpos_max_distance, 0, 100000, &v))
        return false;
    a->relpos_max_distance = (int32_t)v;
    if (!config_int(cfg, KEY("relpos_buckets"), a->relpos_buckets, 1, 100000, &v)) return false;
    a->relpos_buckets = (int32_t)v;
    /* which implementation computes scaled dot + softmax attention (qkv_mha_config) */
    if (!config_switch(cfg, KEY("path"), SWITCH_ATTENTION_PATH, a->use_fused ? (a->fused_always ? 1 : 0) : 2, &e))
        return false;
    a->use_fused = e != 2;
    a->fused_always = e == 1;
#undef KEY
    return true;
}

bool task_read_common(config *cfg, task_settings *s) {
    if (!config_str(cfg, "data.train", NULL, &s->train_path) ||
        !config_str(cfg, "data.dev", NULL, &s->dev_path) ||
        !config_str(cfg, "data.test", NULL, &s->test_path) ||
        !config_str(cfg, "out.dir", NULL, &s->out_dir))
        return false;
    qkv_train_config *t = &s->train;
    *t = qkv_train_default_config();
    double lr, min_lr;
    int64_t warmup, v;
    int e;
    if (!config_int(cfg, "train.steps", 2000, 1, INT64_C(1) << 40, &s->steps) ||
        !config_int(cfg, "train.max_tokens", 4096, 1, INT64_C(1) << 30, &s->max_tokens) ||
        !config_double(cfg, "train.lr", 1e-3, 0, 10, &lr) ||
        !config_int(cfg, "train.warmup", 400, 0, INT64_C(1) << 40, &warmup) ||
        !config_double(cfg, "train.min_lr", 1e-5, 0, 10, &min_lr) ||
        !config_registry(cfg, "train.schedule", QKV_REGISTRY_LR_SCHEDULE, QKV_LR_INV_SQRT, &e))
        return false;
    t->schedule = (qkv_lr_schedule){.kind = (qkv_lr_kind)e,
                                    .base_lr = lr,
                                    .warmup_steps = warmup,
                                    .total_steps = s->steps,
                                    .min_lr = min_lr};
    t->optim.lr = lr;
    if (!config_double(cfg, "train.weight_decay", t->optim.weight_decay, 0, 10,
                       &t->optim.weight_decay) ||
        !config_double(cfg, "train.clip", 1.0, 0, 1e9, &t->clip_norm) ||
        !config_double(cfg, "train.label_smoothing", 0.1, 0, 1, &t->label_smoothing) ||
        !config_double(cfg, "train.ema", 0, 0, 0.999999, &t->ema_decay) ||
        !config_double(cfg, "train.beta2", t->optim.beta2, 0, 0.999999, &t->optim.beta2) ||
        !config_double(cfg, "train.eps", t->optim.eps, 1e-30, 1, &t->optim.eps) ||
        !config_int(cfg, "train.accum", 1, 1, 1 << 20, &v))
        return false;
    t->accum_steps = (int32_t)v;
    if (!config_int(cfg, "train.seed", 1, 0, INT64_MAX, &v)) return false;
    t->seed = (uint64_t)v;
    return config_int(cfg, "train.eval_every", 500, 1, INT64_C(1) << 40, &s->eval_every) &&
           config_int(cfg, "train.log_every", 50, 1, INT64_C(1) << 40, &s->log_every) &&
           config_int(cfg, "train.threads", 0, 0, 4096, &s->threads) &&
           config_int(cfg, "train.keep_checkpoints", 0, 0, 1000, &s->keep_checkpoints);
}

bool task_read_encoder_model(config *cfg, qkv_head_kind head, int64_t default_max_len,
                             qkv_model_config *m) {
    int64_t d_model, heads, layers, v;
    int e;
    if (!config_int(cfg, "model.d_model", 256, 1, 65536, &d_model) ||
        !config_int(cfg, "model.heads", 4, 1, 1024, &heads) ||
        !config_int(cfg, "model.encoder_layers", 3, 1, 1000, &layers))
        return false;
    *m = qkv_model_default_config(QKV_ARCH_ENCODER, (int32_t)d_model, (int32_t)heads,
                                  (int32_t)layers);
    m->head = head;
    if (!config_int(cfg, "model.ff", 4 * d_model, 1, 1 << 20, &v)) return false;
    m->dim_feedforward = (int32_t)v;
    if (!config_double(cfg, "model.dropout", 0.1, 0, 0.99, &m->dropout) ||
        !config_bool(cfg, "model.norm_first", false, &m->norm_first) ||
        !config_registry(cfg, "model.pos", QKV_REGISTRY_POS, QKV_POS_SINUSOIDAL, &e))
        return false;
    m->pos = (qkv_abs_pos)e;
    if (!config_registry(cfg, "model.activation", QKV_REGISTRY_ACTIVATION, QKV_ACT_RELU, &e)) return false;
    m->activation = (qkv_activation)e;
    if (!config_int(cfg, "model.max_len", default_max_len, 1, 1 << 20, &v)) return false;
    m->max_len = (int32_t)v;
    m->pad_id = QKV_VOCAB_PAD;
    return task_read_attention(cfg, "model.attention", &m->self_attn);
}
