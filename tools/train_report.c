/* train_report.c: see train_report.h. */
#include "train_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Room for one more row in columns cols[0 .. k) of *cap rows; false when memory runs out (the
 * report is optional: the point is dropped). */
static bool grow(double **cols, int k, int64_t n, int64_t *cap) {
    if (n < *cap) return true;
    const int64_t c = *cap ? 2 * *cap : 256;
    for (int i = 0; i < k; i++) {
        double *g = realloc(cols[i], sizeof(double) * (size_t)c);
        if (!g) return false;
        cols[i] = g;
    }
    *cap = c;
    return true;
}

void th_add_train(train_history *h, int64_t step, double loss, double lr, double grad_norm, double rate) {
    double *cols[5] = {h->step, h->loss, h->lr, h->grad_norm, h->rate};
    const bool ok = grow(cols, 5, h->n, &h->cap);
    h->step = cols[0], h->loss = cols[1], h->lr = cols[2], h->grad_norm = cols[3], h->rate = cols[4];
    if (!ok) return;
    h->step[h->n] = (double)step, h->loss[h->n] = loss, h->lr[h->n] = lr, h->grad_norm[h->n] = grad_norm,
    h->rate[h->n] = rate;
    h->n++;
}

/* The column of metric key (added when new; -1 when there is no room). */
static int metric_index(train_history *h, const char *key) {
    for (int i = 0; i < h->n_metrics; i++)
        if (!strcmp(h->keys[i], key)) return i;
    if (h->n_metrics == TASK_MAX_METRICS || strlen(key) >= sizeof h->keys[0]) return -1;
    const int i = h->n_metrics;
    double *col = malloc(sizeof(double) * (size_t)(h->ecap ? h->ecap : 1));
    if (!col) return -1;
    for (int64_t j = 0; j < h->ne; j++) col[j] = NAN; /* earlier evaluations did not score it */
    h->metric[i] = col;
    snprintf(h->keys[i], sizeof h->keys[i], "%s", key);
    snprintf(h->labels[i], sizeof h->labels[i], "%s", key);
    h->n_metrics++;
    return i;
}

/* A new evaluation row, its metrics NaN until set; false when there is no room. */
static bool eval_row(train_history *h, int64_t step, double train_loss) {
    double *cols[2 + TASK_MAX_METRICS] = {h->estep, h->etrain_loss};
    for (int i = 0; i < h->n_metrics; i++) cols[2 + i] = h->metric[i];
    int64_t cap = h->ecap;
    const bool ok = grow(cols, 2 + h->n_metrics, h->ne, &cap);
    h->estep = cols[0], h->etrain_loss = cols[1];
    for (int i = 0; i < h->n_metrics; i++) h->metric[i] = cols[2 + i];
    if (!ok) return false;
    h->ecap = cap;
    h->estep[h->ne] = (double)step, h->etrain_loss[h->ne] = train_loss;
    for (int i = 0; i < h->n_metrics; i++) h->metric[i][h->ne] = NAN;
    h->ne++;
    return true;
}

/* Metric i of the last evaluation row (metric_index allocates columns of ecap rows). */
static void set_metric(train_history *h, int i, double v) {
    if (i >= 0 && h->ne > 0) h->metric[i][h->ne - 1] = v;
}

void th_add_eval(train_history *h, int64_t step, double train_loss, const task_metrics *m) {
    if (!eval_row(h, step, train_loss)) return;
    for (int k = 0; k < m->n; k++) {
        const int i = metric_index(h, m->m[k].key);
        if (i < 0) continue;
        snprintf(h->labels[i], sizeof h->labels[i], "%s", m->m[k].label);
        h->plain_known = true, h->plain = m->m[k].plain;
        set_metric(h, i, m->m[k].value);
    }
}

void th_visit(void *user, const tlog_line *l) {
    train_history *h = user;
    const double elapsed = tlog_get(l, "elapsed_s");
    if (isfinite(elapsed) && elapsed > h->elapsed_s) h->elapsed_s = elapsed;
    if (!strcmp(l->type, "skip")) {
        h->skipped++;
    } else if (!strcmp(l->type, "train")) {
        th_add_train(h, l->step, tlog_get(l, "loss"), tlog_get(l, "lr"), tlog_get(l, "grad_norm"), tlog_get(l, "throughput"));
    } else if (!strcmp(l->type, "eval") && eval_row(h, l->step, tlog_get(l, "train_loss"))) {
        for (int k = 0; k < l->n; k++)
            if (!strncmp(l->m[k].key, "dev_", 4)) set_metric(h, metric_index(h, l->m[k].key + 4), l->m[k].value);
    }
}

void th_free(train_history *h) {
    free(h->step), free(h->loss), free(h->lr), free(h->grad_norm), free(h->rate);
    free(h->estep), free(h->etrain_loss);
    for (int i = 0; i < h->n_metrics; i++) free(h->metric[i]);
    memset(h, 0, sizeof *h);
}

static void format_elapsed(double s, char *buf, size_t size) {
    if (s >= 3600)
        snprintf(buf, size, "%dh%02dm%02ds", (int)(s / 3600), (int)(fmod(s, 3600) / 60), (int)fmod(s, 60));
    else if (s >= 60)
        snprintf(buf, size, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else
        snprintf(buf, size, "%.1fs", s);
}

void th_write_report(const train_history *h, const char *path, const char *config_path, const char *status,
                     const char *rate_unit, int refresh_s) {
    char names[TASK_MAX_METRICS][64], rate_label[48], elapsed[48];
    qkv_series loss = {"train loss", h->step, h->loss, h->n};
    qkv_series lr = {"learning rate", h->step, h->lr, h->n};
    qkv_series grad = {"gradient norm", h->step, h->grad_norm, h->n};
    snprintf(rate_label, sizeof rate_label, "%s/s", rate_unit);
    qkv_series rate = {rate_label, h->step, h->rate, h->n};
    qkv_series metrics[TASK_MAX_METRICS];
    for (int i = 0; i < h->n_metrics; i++) {
        snprintf(names[i], sizeof names[i], "dev %s", h->labels[i]);
        metrics[i] = (qkv_series){names[i], h->estep, h->metric[i], h->ne};
    }
    const qkv_chart charts[5] = {
        {"training loss (mean over the steps of each log line)", "step", "cross-entropy", true, &loss, 1},
        {"dev metrics", "step", h->plain_known ? (h->plain ? "" : "%") : NULL, false, metrics, h->n_metrics},
        {"learning rate", "step", NULL, false, &lr, 1},
        {"gradient norm (before clipping)", "step", NULL, true, &grad, 1},
        {"throughput", "step", rate_label, false, &rate, 1},
    };
    format_elapsed(h->elapsed_s, elapsed, sizeof elapsed);
    const char *keys[] = {"configuration", "status", "elapsed"};
    const char *values[] = {config_path, status, elapsed};
    const qkv_train_report r = {"qkv train", keys, values, 3, charts, 5, refresh_s};
    if (qkv_train_report_write(path, &r)) fprintf(stderr, "qkv train: report: %s\n", qkv_last_error());
}
