/*
 * train_report.h: the history of a training run and its report.html. The history holds every
 * "train" line of log.jsonl (step, loss, learning rate, gradient norm, throughput) and every
 * "eval" line (step, training loss, dev metrics); `qkv train` adds to it as it logs, and on
 * --resume reads it back from the kept lines of the log (th_visit), so the report of a resumed
 * run draws the whole run.
 */
#ifndef QKV_TOOLS_TRAIN_REPORT_H
#define QKV_TOOLS_TRAIN_REPORT_H

#include "task.h"
#include "train_log.h"

typedef struct train_history {
    int64_t n, cap; /* train lines */
    double *step, *loss, *lr, *grad_norm, *rate;
    int64_t ne, ecap; /* evaluations */
    double *estep, *etrain_loss, *metric[TASK_MAX_METRICS];
    int n_metrics;
    char keys[TASK_MAX_METRICS][48];   /* "wer": log.jsonl's "dev_wer" */
    char labels[TASK_MAX_METRICS][48]; /* "WER" once an evaluation named it; the key until then */
    bool plain_known, plain;           /* the metrics are not percentages */
    double elapsed_s;                  /* the largest elapsed_s logged */
    int64_t skipped;                   /* skip lines */
} train_history;

void th_add_train(train_history *h, int64_t step, double loss, double lr, double grad_norm, double rate);
void th_add_eval(train_history *h, int64_t step, double train_loss, const task_metrics *m);
/* A tlog_visit (user: the train_history) that adds a line read back from log.jsonl. */
void th_visit(void *user, const tlog_line *l);
void th_free(train_history *h);

/* Write the report to path: the settings table (configuration, status, elapsed time), then the
 * charts: training loss, dev metrics, learning rate, gradient norm, throughput (rate_unit per
 * second). refresh_s > 0 while the run goes on: the page reloads itself in a browser. A failure
 * is a warning on stderr (the report is not needed to resume). */
void th_write_report(const train_history *h, const char *path, const char *config_path, const char *status,
                     const char *rate_unit, int refresh_s);

#endif
