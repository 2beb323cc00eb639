/* task.c: the task registry and what the task families share (task.h). */
#include "task.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const task_ops *const all_tasks[] = {&seq2seq_task_ops};
#define N_TASKS (int)(sizeof all_tasks / sizeof *all_tasks)

void task_metrics_add(task_metrics *m, const char *key, const char *label, double value) {
    if (m->n < TASK_MAX_METRICS) m->m[m->n++] = (task_metric){key, label, value};
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

bool task_create(config *cfg, task **out) {
    *out = NULL;
    const char *names[N_TASKS];
    for (int i = 0; i < N_TASKS; i++)
        names[i] = all_tasks[i]->name;
    int k = 0;
    if (!config_enum(cfg, "task", 0, names, N_TASKS, &k)) return false;
    return all_tasks[k]->create(cfg, out);
}

void task_free(task *t) {
    if (t) t->ops->free(t);
}

qkv_status task_path(char *buf, size_t size, const char *dir, const char *name) {
    int n = snprintf(buf, size, "%s/%s", dir, name);
    if (n > 0 && (size_t)n < size) return QKV_OK;
    return qkv_set_error(QKV_ERR_INVALID_ARG, "%s/%s: path longer than %zu bytes", dir, name,
                         size - 1);
}

qkv_status task_write_conf(const char *dir, const char *name, const char *const *lines, int n) {
    char path[1024], tmp[1100];
    qkv_status st = task_path(path, sizeof path, dir, "task.conf");
    if (st) return st;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return qkv_set_error(QKV_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    fprintf(f, "# written by qkv train: how qkv eval, decode and attn read inputs for this run\n");
    fprintf(f, "task = %s\n", name);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\n", lines[i]);
    bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        const int e = errno;
        unlink(tmp);
        return qkv_set_error(QKV_ERR_IO, "cannot write %s: %s", path, strerror(e));
    }
    return QKV_OK;
}
