/*
 * cmd_train.c: `qkv train CONFIG [--set key=value ...] [--resume]`: train a Transformer for one
 * of the task families of task.h (the `task` key: seq2seq, e.g. G2P; tagging; classify; image; lm)
 * from a configuration file (docs/cli.md lists every key). The loop is the same for every task.
 *
 * Every train.log_every steps a "train" line goes to out.dir/log.jsonl (train_log.h: loss,
 * learning rate, gradient norm, throughput). Every train.eval_every steps: the task scores the dev
 * set (seq2seq: multi-reference WER / PER; tagging, classify and image: accuracies; lm:
 * cross-entropy, perplexity, bits per character), an "eval" line goes to log.jsonl ("dev_<metric>"
 * members), the model is saved as last.safetensors, and as model.safetensors when the task's
 * selection metric is the best so far (with train.ema the parameter average is scored and saved
 * instead of the last step's weights); the trainer state goes to checkpoint.safetensors so
 * --resume continues bit-identically; report.html draws the log (train_report.h). On a terminal
 * the progress is a live bar; otherwise plain log lines.
 * A step whose loss or gradient norm is not finite is never applied: the run stops, keeping the
 * last checkpoint, or skips it (train.nonfinite). Ctrl-C finishes the step under way (its log
 * line, evaluation and saves) and saves a checkpoint first. --resume cuts log.jsonl back to the
 * checkpoint's step, so the steps that run again are logged once, and removes the temporaries of
 * dead processes.
 */
#include "commands.h"
#include "task.h"
#include "train_log.h"
#include "train_report.h"
#include "qkv/qkv_viz.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t interrupted = 0;
/* The first Ctrl-C asks the loop to stop after the step under way (with its evaluation and saves)
 * and to save a checkpoint; a second one stops the process at once, as SIGINT does by default
 * (signal() is async-signal-safe). */
static void on_sigint(int sig) {
    interrupted = 1;
    signal(sig, SIG_DFL);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void format_duration(double s, char *buf, size_t size) {
    if (!(s >= 0) || s > 1e7) snprintf(buf, size, "--");
    else if (s >= 3600) snprintf(buf, size, "%dh%02dm", (int)(s / 3600), (int)(fmod(s, 3600) / 60));
    else if (s >= 60) snprintf(buf, size, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, size, "%.0fs", s);
}

static void usage(FILE *f) {
    fprintf(f, "usage: qkv train CONFIG [--set key=value ...] [--resume]\n\n"
               "Train a Transformer from a configuration file of `key = value` lines (docs/cli.md lists every key):\n"
               "task = seq2seq (default; e.g. grapheme-to-phoneme), tagging (e.g. POS tags), classify, image or lm. Writes\n"
               "the run into out.dir: task.conf, src.vocab, tgt.vocab, model.safetensors (best dev WER, accuracy or loss),\n"
               "last.safetensors, checkpoint.safetensors, log.jsonl, report.html.\n\n"
               "options:\n"
               "  --set key=value   override a configuration key (repeatable)\n"
               "  --resume          continue from out.dir/checkpoint.safetensors, bit-identically\n\n"
               "example:\n"
               "  qkv train examples/g2p.conf --set train.steps=500 --set out.dir=runs/g2p-small\n");
}

/* What --resume reads back from the lines of log.jsonl up to the checkpoint's step. */
typedef struct {
    char member[80];       /* "dev_<selection metric>" */
    bool lower;            /* lower is better */
    double best;           /* the best value logged (+-INFINITY: none), so a resumed run keeps
                              comparing against the model it saved before it stopped */
    train_history *hist;   /* the report's history */
} resume_state;

static void resume_visit(void *user, const tlog_line *l) {
    resume_state *r = user;
    th_visit(r->hist, l);
    if (strcmp(l->type, "eval")) return;
    const double v = tlog_get(l, r->member);
    if (isfinite(v)) r->best = r->lower ? fmin(r->best, v) : fmax(r->best, v);
}

/* The training loop's log: the window of the next "train" line (the optimiser steps since the
 * previous one), the steps since the previous evaluation, and the report's history. */
typedef struct {
    FILE *f;
    train_history hist;
    double win_loss, win_tokens, win_t0; /* sum of the steps' losses, targets, start time */
    int64_t win_steps;
    double eval_loss; /* sum of the steps' losses since the previous evaluation */
    int64_t eval_steps;
    int64_t line_step;          /* the step of the last train line */
    double start, elapsed_base; /* this process's start; the time logged before it (--resume) */
    double report_t;            /* when report.html was last written */
    int64_t skipped;            /* skipped non-finite steps (skip lines) */
} run_log;

static double run_elapsed(const run_log *r) { return r->elapsed_base + (now() - r->start); }

/* The "train" line of step `step`: the mean loss of the steps since the previous line, the step's
 * learning rate and gradient norm, the throughput since the previous line. */
static bool log_train_line(run_log *r, int64_t step, uint64_t epoch, double lr, double grad_norm) {
    const double t = now(), loss = r->win_steps ? r->win_loss / (double)r->win_steps : NAN;
    const double rate = t > r->win_t0 ? r->win_tokens / (t - r->win_t0) : NAN;
    r->hist.elapsed_s = run_elapsed(r);
    tlog_out o;
    tlog_start(&o, "train", step);
    tlog_int(&o, "epoch", (int64_t)epoch);
    tlog_num(&o, "loss", loss, 7);
    tlog_num(&o, "lr", lr, 6);
    tlog_num(&o, "grad_norm", grad_norm, 6);
    tlog_fixed(&o, "throughput", rate, 1);
    tlog_fixed(&o, "elapsed_s", r->hist.elapsed_s, 1);
    tlog_int(&o, "skipped", r->skipped);
    if (!tlog_write(&o, r->f)) return false;
    th_add_train(&r->hist, step, loss, lr, grad_norm, rate);
    r->win_loss = r->win_tokens = 0, r->win_steps = 0, r->win_t0 = t;
    r->line_step = step;
    return true;
}

/* The process id of a temporary file name as the library's atomic writer makes them,
 * "<name>.tmp.<pid>.<n>" (src/core/fileio.c: name not empty, pid and n decimal); 0 for any other
 * name. */
static long temporary_pid(const char *e) {
    size_t i = strlen(e), j;
    for (j = i; j > 0 && e[j - 1] >= '0' && e[j - 1] <= '9'; j--) {}
    if (j == i || j == 0 || e[j - 1] != '.') return 0; /* <n> */
    i = j - 1;
    for (j = i; j > 0 && e[j - 1] >= '0' && e[j - 1] <= '9'; j--) {}
    if (j == i || i - j > 9 || j <= 5 || strncmp(e + j - 5, ".tmp.", 5)) return 0; /* <pid>, a name before .tmp. */
    return strtol(e + j, NULL, 10);
}

/* Remove the temporaries in dir that processes no longer running left behind (a kill during a
 * save): a file whose pid is not a live process (kill(pid, 0) fails with ESRCH). A live process
 * with that pid, even an unrelated one, keeps its files. Prints how many were removed. */
static void remove_stale_temporaries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const long pid = temporary_pid(e->d_name);
        if (pid <= 0 || pid > INT_MAX || !(kill((pid_t)pid, 0) == -1 && errno == ESRCH)) continue;
        char path[2048];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (unlink(path) == 0)
            removed++;
        else
            fprintf(stderr, "qkv train: cannot remove the stale temporary %s: %s\n", path, strerror(errno));
    }
    closedir(d);
    if (removed) printf("removed %d stale temporary file%s of stopped processes from %s\n", removed, removed > 1 ? "s" : "", dir);
}

static int fail(const char *what) {
    fprintf(stderr, "qkv train: %s%s%s\n", what, *qkv_last_error() ? ": " : "", qkv_last_error());
    return 1;
}

/* train.nonfinite: what a step whose loss or gradient norm is NaN or infinite does (the trainer
 * never applies it). After MAX_SKIPS skipped steps in a row the run stops anyway. */
enum { NONFINITE_STOP, NONFINITE_SKIP };
#define MAX_SKIPS 100

/* report.html while the run goes on: rewritten at every evaluation and, at most every
 * REPORT_EVERY_S seconds, with the log lines; the page reloads itself every REPORT_REFRESH_S. */
#define REPORT_EVERY_S 5.0
#define REPORT_REFRESH_S 10

/* QKV_TRAIN_DEBUG: events that tests provoke at known steps, a comma-separated list
 * (docs/cli.md): "nan@S" or "nan@S:K" sets the first element of every parameter to NaN for the
 * first (K) attempts at optimiser step S and restores it after each; "sigint@S" raises SIGINT
 * once step S is applied (before its log line, evaluation and saves), "sigint-eval@S" just before
 * the evaluation of step S, "kill@S" raises SIGKILL once the evaluation of step S is logged,
 * before its saves; "nan-weights@S" sets the first element of the first parameter to NaN once
 * step S is applied, for good. */
typedef struct {
    int64_t nan_step, nan_count, sigint_step, sigint_eval_step, kill_step, nan_weights_step;
} debug_events;

static bool parse_debug(const char *text, debug_events *d) {
    d->nan_step = d->sigint_step = d->sigint_eval_step = d->kill_step = d->nan_weights_step = -1;
    d->nan_count = 0;
    if (!text) return true;
    static const char *const names[] = {"nan", "sigint", "sigint-eval", "kill", "nan-weights"};
    int64_t *steps[] = {&d->nan_step, &d->sigint_step, &d->sigint_eval_step, &d->kill_step, &d->nan_weights_step};
    for (const char *p = text; *p;) {
        const char *at = strchr(p, '@');
        int e = -1;
        for (int i = 0; at && i < 5; i++)
            if ((size_t)(at - p) == strlen(names[i]) && !strncmp(p, names[i], strlen(names[i]))) e = i;
        long long step = 0, count = 1;
        int used = 0;
        if (e < 0 || sscanf(at, "@%lld%n", &step, &used) != 1 || step < 1) {
            fprintf(stderr, "qkv train: QKV_TRAIN_DEBUG='%s': cannot read '%s' (EVENT@STEP, EVENT one of nan, sigint, "
                            "sigint-eval, kill, nan-weights)\n", text, p);
            return false;
        }
        p = at + used;
        if (e == 0 && *p == ':' && sscanf(p, ":%lld%n", &count, &used) == 1) p += used;
        *steps[e] = step;
        if (e == 0) d->nan_count = count;
        if (*p == ',') p++;
        else if (*p) {
            fprintf(stderr, "qkv train: QKV_TRAIN_DEBUG='%s': unexpected '%s'\n", text, p);
            return false;
        }
    }
    return true;
}

/* The first element of every parameter: NaN (saved into kept[]) or restored from kept[]. */
static void poison_params(qkv_model *m, qkv_real *kept, bool restore) {
    for (int64_t i = 0, n = qkv_params_count(m->params); i < n; i++) {
        qkv_real *x = (qkv_real *)qkv_params_get(m->params, i)->data;
        if (restore)
            x[0] = kept[i];
        else
            kept[i] = x[0], x[0] = (qkv_real)NAN;
    }
}

/* One `qkv train` run: its configuration and task, the objects it trains with, the files it
 * writes, and what the loop carries from one step to the next. */
typedef struct train_run {
    const char *config_path;
    config cfg;
    task *tk;
    int nonfinite; /* train.nonfinite: NONFINITE_STOP or NONFINITE_SKIP */
    debug_events debug;
    qkv_model *model;
    qkv_trainer *trainer;
    qkv_batcher *batcher;
    qkv_real *poisoned; /* QKV_TRAIN_DEBUG nan: the values it replaced */
    run_log lg;
    char log_path[1024], ckpt[1024], best_path[1024], last_path[1024], report_path[1024];
    char status[256];   /* the report's last line: how the run stands or ended */
    bool looping;       /* the training loop started: report.html is written on every way out */
    bool lower;         /* the selection metric: lower is better */
    int64_t saved_step; /* the step of checkpoint.safetensors (-1: none yet) */
    double best_value;  /* the best selection metric so far (+-INFINITY: none) */
    /* the loop's progress */
    bool tty;
    double start, t_since, tokens_since, tokens_total;
    double tok_rate; /* over the last second; the average since the start until then */
    int64_t first_step;
    const char *select_label; /* the selection metric's label, as the evaluation names it */
    bool select_plain;        /* it is not a percentage */
    const char *rate_unit;
    qkv_step_stats st; /* of the last batch */
} train_run;

/* How a part of the run ended: on to the next part, or out with a message printed (stopped), a
 * library error still to print (error), or a log line that could not be written (log_error). */
typedef enum { RUN_GO, RUN_STOPPED, RUN_ERROR, RUN_LOG_ERROR } run_outcome;

/* The command line: -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, train_run *r, bool *resume, char **sets, int *n_sets) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--resume")) {
            *resume = true;
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc && *n_sets < 256) {
            sets[(*n_sets)++] = argv[++i];
        } else if (argv[i][0] != '-' && !r->config_path) {
            r->config_path = argv[i];
        } else {
            fprintf(stderr, "qkv train: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!r->config_path) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* The configuration file, the --set overrides, the task: false with the message printed. */
static bool read_config(train_run *r, char **sets, int n_sets) {
    bool ok = config_load(&r->cfg, r->config_path);
    for (int i = 0; ok && i < n_sets; i++) ok = config_set(&r->cfg, sets[i]);
    ok = ok && task_create(&r->cfg, &r->tk) &&
         config_switch(&r->cfg, "train.nonfinite", SWITCH_NONFINITE, NONFINITE_STOP, &r->nonfinite) &&
         config_check_unused(&r->cfg);
    if (ok && (!r->tk->s.train_path || !r->tk->s.dev_path || !r->tk->s.out_dir)) {
        snprintf(r->cfg.error, sizeof r->cfg.error, "%s: data.train, data.dev and out.dir are required", r->config_path);
        ok = false;
    }
    if (!ok) fprintf(stderr, "qkv train: %s\n", r->cfg.error);
    return ok;
}

/* --resume: the trainer and the batcher where the checkpoint left them, log.jsonl cut back to it
 * (the steps after it run again), and the report's history and best value read back from the
 * kept lines. */
static run_outcome resume_run(train_run *r) {
    int64_t epoch = 0, batch = 0;
    uint64_t fingerprint = 0;
    if (qkv_trainer_load(r->trainer, r->ckpt, &epoch, &batch, &fingerprint)) return RUN_ERROR;
    /* the batcher refuses a position whose fingerprint differs: other data or batching options */
    if (qkv_batcher_seek(r->batcher, (qkv_batch_pos){(uint64_t)epoch, batch, fingerprint})) return RUN_ERROR;
    r->saved_step = qkv_trainer_steps(r->trainer);
    resume_state rs = {.lower = r->lower, .best = r->best_value, .hist = &r->lg.hist};
    snprintf(rs.member, sizeof rs.member, "dev_%s", r->tk->select);
    int64_t kept = 0, dropped = 0;
    if (tlog_resume(r->log_path, r->saved_step, resume_visit, &rs, &kept, &dropped)) return RUN_ERROR;
    r->best_value = rs.best;
    if (dropped)
        printf("%s: kept %lld lines up to step %lld, dropped %lld (later steps, or cut short)\n", r->log_path,
               (long long)kept, (long long)r->saved_step, (long long)dropped);
    printf("resuming %s at step %lld (epoch %lld, batch %lld)\n", r->ckpt, (long long)qkv_trainer_steps(r->trainer),
           (long long)epoch, (long long)batch);
    return RUN_GO;
}

/* Everything the loop needs: out.dir, the data and vocabularies (built from the training set on a
 * fresh run, read back on resume), the model, trainer and batcher, the paths, the log. */
static run_outcome open_run(train_run *r, bool resume) {
    const task_settings *s = &r->tk->s;
    const task_ops *ops = r->tk->ops;
    if (mkdir(s->out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "qkv train: cannot create %s: %s\n", s->out_dir, strerror(errno));
        return RUN_STOPPED;
    }
    remove_stale_temporaries(s->out_dir);
    qkv_set_num_threads((int)s->threads);
    if (ops->prepare(r->tk, resume) || qkv_model_new(&s->model, s->train.seed, &r->model) ||
        qkv_trainer_new(r->model, &s->train, &r->trainer))
        return RUN_ERROR;
    if (r->debug.nan_count > 0 &&
        !(r->poisoned = malloc(sizeof(qkv_real) * (size_t)qkv_params_count(r->model->params))))
        return RUN_ERROR;
    if (qkv_batcher_new(r->tk->train, &r->tk->batch_opts, &r->batcher) ||
        task_path(r->ckpt, sizeof r->ckpt, s->out_dir, "checkpoint.safetensors") ||
        task_path(r->best_path, sizeof r->best_path, s->out_dir, "model.safetensors") ||
        task_path(r->last_path, sizeof r->last_path, s->out_dir, "last.safetensors") ||
        task_path(r->report_path, sizeof r->report_path, s->out_dir, "report.html") ||
        task_path(r->log_path, sizeof r->log_path, s->out_dir, "log.jsonl"))
        return RUN_ERROR;
    r->lower = r->tk->lower_is_better;
    r->best_value = r->lower ? INFINITY : -INFINITY;
    run_outcome o = resume ? resume_run(r) : RUN_GO;
    if (o != RUN_GO) return o;
    if (!(r->lg.f = fopen(r->log_path, resume ? "a" : "w"))) {
        fprintf(stderr, "qkv train: cannot open %s: %s\n", r->log_path, strerror(errno));
        return RUN_STOPPED;
    }
    printf("qkv %s | %s | ", qkv_version(), ops->name);
    ops->describe(r->tk, stdout);
    printf(" | %lld parameters\n", (long long)qkv_params_numel(r->model->params));
    return RUN_GO;
}

/* Where the last checkpoint stands, after a stop. */
static void report_stop(const train_run *r, const char *hint) {
    if (r->saved_step >= 0)
        fprintf(stderr, "qkv train: training stopped; %s holds step %lld (--resume continues from it)%s\n", r->ckpt,
                (long long)r->saved_step, hint);
    else
        fprintf(stderr, "qkv train: training stopped before a checkpoint was saved%s\n", hint);
}

/* A step whose loss or gradient norm was not finite (nothing was applied): stop with the last
 * checkpoint on disk, or skip the step with a "skip" line. */
static run_outcome on_nonfinite(train_run *r, int64_t attempt, int *skips_in_row) {
    const qkv_step_stats *st = &r->st;
    const char *what = st->nonfinite == QKV_NONFINITE_GRAD ? "gradient norm" : "loss";
    if (r->tty) printf("\n");
    if (r->nonfinite == NONFINITE_STOP || ++*skips_in_row >= MAX_SKIPS) {
        fprintf(stderr, "qkv train: %s\n", qkv_last_error());
        if (r->nonfinite == NONFINITE_SKIP) fprintf(stderr, "qkv train: %d steps in a row were not finite\n", MAX_SKIPS);
        report_stop(r, r->nonfinite == NONFINITE_STOP ? "; train.nonfinite = skip skips such steps" : "");
        snprintf(r->status, sizeof r->status, "stopped at step %lld: the %s was not finite", (long long)attempt, what);
        return RUN_STOPPED;
    }
    r->lg.skipped++;
    printf("step %lld skipped: %s\n", (long long)attempt, qkv_last_error());
    const qkv_batch_pos at = qkv_batcher_tell(r->batcher);
    tlog_out lo;
    tlog_start(&lo, "skip", attempt);
    tlog_int(&lo, "epoch", (int64_t)at.epoch);
    tlog_str(&lo, "what", what);
    tlog_num(&lo, "loss", st->loss, 7);
    tlog_num(&lo, "grad_norm", st->grad_norm, 7);
    tlog_int(&lo, "skipped", r->lg.skipped);
    return tlog_write(&lo, r->lg.f) ? RUN_GO : RUN_LOG_ERROR;
}

/* The live bar on a terminal, or a plain line every train.log_every steps. */
static void show_progress(train_run *r, int64_t step, uint64_t epoch) {
    const task_settings *s = &r->tk->s;
    const double t = now();
    if (t - r->t_since > 1.0) {
        r->tok_rate = r->tokens_since / (t - r->t_since);
        r->tokens_since = 0;
        r->t_since = t;
    }
    const double rate =
        isnan(r->tok_rate) ? r->tokens_total / (t - r->start > 1e-9 ? t - r->start : 1e-9) : r->tok_rate;
    const double per_step = (t - r->start) / (double)(step - r->first_step);
    char eta[32];
    format_duration(per_step * (double)(s->steps - step), eta, sizeof eta);
    /* shown: the mean loss of the steps since the last train line, what the next one logs */
    const double smooth = r->lg.win_loss / (double)r->lg.win_steps;
    if (r->tty) {
        const int width = 24, filled = (int)((double)width * (double)step / (double)s->steps);
        printf("\r[%.*s%*s] step %lld/%lld  epoch %llu  loss %.4f  %6.0f %s/s  lr %.2e  ETA %s   ", filled,
               "========================", width - filled, "", (long long)step, (long long)s->steps,
               (unsigned long long)epoch, smooth, rate, r->rate_unit, r->st.lr, eta);
        fflush(stdout);
    } else if (step % s->log_every == 0 || step == s->steps) {
        printf("step %lld/%lld epoch %llu loss %.4f %s/s %.0f lr %.3e eta %s\n", (long long)step, (long long)s->steps,
               (unsigned long long)epoch, smooth, r->rate_unit, rate, r->st.lr, eta);
        fflush(stdout);
    }
}

/* The "eval" line of step `step`: the mean training loss since the previous evaluation and the
 * dev metrics. */
static bool log_eval_line(train_run *r, int64_t step, uint64_t epoch, const task_metrics *m, double *train_loss) {
    run_log *lg = &r->lg;
    *train_loss = lg->eval_steps ? lg->eval_loss / (double)lg->eval_steps : NAN;
    lg->eval_loss = 0, lg->eval_steps = 0;
    lg->hist.elapsed_s = run_elapsed(lg);
    tlog_out lo;
    tlog_start(&lo, "eval", step);
    tlog_int(&lo, "epoch", (int64_t)epoch);
    tlog_fixed(&lo, "train_loss", *train_loss, 6);
    for (int i = 0; i < m->n; i++) {
        char key[80];
        snprintf(key, sizeof key, "dev_%s", m->m[i].key);
        tlog_fixed(&lo, key, m->m[i].value, 4);
    }
    tlog_num(&lo, "lr", r->st.lr, 6);
    tlog_fixed(&lo, "elapsed_s", lg->hist.elapsed_s, 1);
    return tlog_write(&lo, lg->f);
}

/* The evaluation of step `step`: score the dev set, log it, save the model (last, and best when
 * the selection metric is the best so far) and the checkpoint, rewrite the report. With
 * train.ema the average is what is scored and saved. A model with a NaN or infinite weight (an
 * overflow in an update whose gradients were finite) is neither evaluated nor saved: the files
 * on disk stay the last good ones. */
/* train.keep_checkpoints = N: the model of this evaluation as step-<S>.safetensors, and only the
 * last N such files kept (listed from the directory, so a resumed run prunes the files of the
 * run it continues). */
static bool keep_step_model(train_run *r, int64_t step) {
    const task_settings *s = &r->tk->s;
    char name[64], path[1200];
    snprintf(name, sizeof name, "step-%lld.safetensors", (long long)step);
    if (task_path(path, sizeof path, s->out_dir, name) || qkv_model_save(r->model, path)) return false;
    long long steps[1024];
    const int n = task_step_models(s->out_dir, steps, 1024);
    if (n < 0) return false;
    for (int i = (int)s->keep_checkpoints; i < n; i++) {
        snprintf(name, sizeof name, "step-%lld.safetensors", steps[i]);
        if (task_path(path, sizeof path, s->out_dir, name)) return false;
        if (remove(path) != 0 && errno != ENOENT)
            return qkv_set_error(QKV_ERR_IO, "%s: cannot remove: %s", path, strerror(errno)), false;
    }
    return true;
}

static run_outcome evaluate_and_save(train_run *r, int64_t step, qkv_batch_pos pos) {
    const task_ops *ops = r->tk->ops;
    if (qkv_trainer_check_finite(r->trainer)) {
        fprintf(stderr, "qkv train: %s\n", qkv_last_error());
        report_stop(r, "");
        snprintf(r->status, sizeof r->status, "stopped at step %lld: a parameter was not finite", (long long)step);
        return RUN_STOPPED;
    }
    const bool ema = qkv_trainer_has_ema(r->trainer);
    task_metrics m;
    const double e0 = now();
    if (ema && qkv_trainer_swap_ema(r->trainer)) return RUN_ERROR;
    if (step == r->debug.sigint_eval_step) raise(SIGINT);
    if (ops->evaluate(r->tk, r->model, &m)) return RUN_ERROR;
    const double value = task_metrics_get(&m, r->tk->select);
    const bool best = r->lower ? value < r->best_value : value > r->best_value;
    if (r->tty) printf("\n");
    printf("eval step %lld: dev", (long long)step);
    for (int i = 0; i < m.n; i++)
        printf(m.m[i].plain ? "%s %s %.4f" : "%s %s %.2f%%", i ? " " : "", m.m[i].label, m.m[i].value);
    printf("  (%lld %s, %.1f s)%s\n", (long long)m.items, m.unit, now() - e0, best ? "  best so far" : "");
    double train_loss;
    if (!log_eval_line(r, step, pos.epoch, &m, &train_loss)) return RUN_LOG_ERROR;
    if (step == r->debug.kill_step) raise(SIGKILL);
    th_add_eval(&r->lg.hist, step, train_loss, &m);
    for (int i = 0; i < m.n; i++)
        if (!strcmp(m.m[i].key, r->tk->select)) r->select_label = m.m[i].label, r->select_plain = m.m[i].plain;
    if (qkv_model_save(r->model, r->last_path)) return RUN_ERROR;
    if (r->tk->s.keep_checkpoints > 0 && !keep_step_model(r, step)) return RUN_ERROR;
    if (best) {
        r->best_value = value;
        if (qkv_model_save(r->model, r->best_path)) return RUN_ERROR;
    }
    if (ema && qkv_trainer_swap_ema(r->trainer)) return RUN_ERROR;
    if (qkv_trainer_save(r->trainer, r->ckpt, (int64_t)pos.epoch, pos.batch, pos.fingerprint)) return RUN_ERROR;
    r->saved_step = step;
    snprintf(r->status, sizeof r->status, "running: step %lld of %lld", (long long)step, (long long)r->tk->s.steps);
    th_write_report(&r->lg.hist, r->report_path, r->config_path, r->status, r->rate_unit, REPORT_REFRESH_S);
    r->lg.report_t = now();
    return RUN_GO;
}

/* What follows an applied optimiser step: the progress, the train line (and a cheap report at
 * most every REPORT_EVERY_S seconds), the evaluation and saves when due. */
static run_outcome after_step(train_run *r, int64_t step) {
    const task_settings *s = &r->tk->s;
    if (step == r->debug.sigint_step) raise(SIGINT);
    if (step == r->debug.nan_weights_step) ((qkv_real *)qkv_params_get(r->model->params, 0)->data)[0] = (qkv_real)NAN;
    const qkv_batch_pos pos = qkv_batcher_tell(r->batcher);
    const bool eval_due = step % s->eval_every == 0 || step == s->steps;
    const bool line_due = step % s->log_every == 0 || step == s->steps || eval_due;
    show_progress(r, step, pos.epoch);
    if (line_due) {
        if (!log_train_line(&r->lg, step, pos.epoch, r->st.lr, r->st.grad_norm)) return RUN_LOG_ERROR;
        if (!eval_due && now() - r->lg.report_t >= REPORT_EVERY_S) {
            snprintf(r->status, sizeof r->status, "running: step %lld of %lld", (long long)step, (long long)s->steps);
            th_write_report(&r->lg.hist, r->report_path, r->config_path, r->status, r->rate_unit, REPORT_REFRESH_S);
            r->lg.report_t = now();
        }
    }
    return eval_due ? evaluate_and_save(r, step, pos) : RUN_GO;
}

/* The training loop: batches until train.steps optimiser steps are applied (several batches per
 * step with gradient accumulation), or Ctrl-C. Ctrl-C is honoured after an optimiser step (a
 * checkpoint cannot hold half an accumulation) and whatever that step logs, evaluates and saves. */
static run_outcome train_loop(train_run *r) {
    signal(SIGINT, on_sigint);
    r->tty = isatty(fileno(stdout));
    r->start = r->t_since = now();
    r->tok_rate = NAN;
    r->first_step = qkv_trainer_steps(r->trainer);
    r->lg.start = r->lg.win_t0 = r->lg.report_t = r->start;
    r->lg.elapsed_base = r->lg.hist.elapsed_s;
    r->lg.skipped = r->lg.hist.skipped;
    r->lg.line_step = r->first_step;
    r->select_label = r->tk->select;
    r->rate_unit = r->tk->ops->rate_unit ? r->tk->ops->rate_unit : "tok";
    int batch_in_step = 0; /* batches of the accumulation under way */
    double step_loss = 0;  /* the sum of their losses */
    int skips_in_row = 0;  /* non-finite steps skipped since the last applied one */
    r->looping = true;
    while (qkv_trainer_steps(r->trainer) < r->tk->s.steps) {
        qkv_batch b;
        qkv_train_batch tb;
        if (qkv_batcher_next(r->batcher, &b) || r->tk->ops->batch(r->tk, &b, &tb)) return RUN_ERROR;
        const int64_t attempt = qkv_trainer_steps(r->trainer) + 1;
        const bool poison =
            r->poisoned && attempt == r->debug.nan_step && r->debug.nan_count > 0 && batch_in_step == 0;
        if (poison) poison_params(r->model, r->poisoned, false), r->debug.nan_count--;
        const qkv_status step_st = qkv_trainer_step(r->trainer, &tb, &r->st);
        if (poison) poison_params(r->model, r->poisoned, true);
        if (step_st == QKV_ERR_NONFINITE) {
            batch_in_step = 0, step_loss = 0;
            const run_outcome o = on_nonfinite(r, attempt, &skips_in_row);
            if (o != RUN_GO) return o;
            continue;
        }
        if (step_st) return RUN_ERROR;
        r->tokens_since += (double)r->st.tokens;
        r->tokens_total += (double)r->st.tokens;
        r->lg.win_tokens += (double)r->st.tokens;
        step_loss += r->st.loss;
        batch_in_step++;
        if (!r->st.stepped) continue;
        /* the step's loss: the mean over its batches, as its gradient is */
        const double loss = step_loss / batch_in_step;
        batch_in_step = 0, step_loss = 0, skips_in_row = 0;
        r->lg.win_loss += loss, r->lg.win_steps++;
        r->lg.eval_loss += loss, r->lg.eval_steps++;
        const run_outcome o = after_step(r, qkv_trainer_steps(r->trainer));
        if (o != RUN_GO) return o;
        if (interrupted) break;
    }
    return RUN_GO;
}

/* After the loop: an interrupted run logs its last steps and saves a checkpoint (exit 130); a
 * finished one says how it went (exit 0). */
static run_outcome end_run(train_run *r, int *rc) {
    const task_settings *s = &r->tk->s;
    if (r->tty) printf("\n");
    const int64_t steps_done = qkv_trainer_steps(r->trainer);
    if (interrupted && steps_done < s->steps) {
        const qkv_batch_pos pos = qkv_batcher_tell(r->batcher);
        /* the steps since the last train line get theirs, so the log covers every step */
        if (r->lg.line_step != steps_done && !log_train_line(&r->lg, steps_done, pos.epoch, r->st.lr, r->st.grad_norm))
            return RUN_LOG_ERROR;
        if (r->saved_step != steps_done &&
            qkv_trainer_save(r->trainer, r->ckpt, (int64_t)pos.epoch, pos.batch, pos.fingerprint))
            return RUN_ERROR;
        r->saved_step = steps_done;
        printf("interrupted at step %lld: checkpoint saved to %s (continue with --resume)\n", (long long)steps_done,
               r->ckpt);
        snprintf(r->status, sizeof r->status, "interrupted at step %lld of %lld (continue with --resume)",
                 (long long)steps_done, (long long)s->steps);
        *rc = 130;
        return RUN_GO;
    }
    char took[32];
    format_duration(now() - r->start, took, sizeof took);
    if (isfinite(r->best_value))
        printf(r->select_plain ? "trained %lld steps in %s; best dev %s %.4f; model: %s\n"
                               : "trained %lld steps in %s; best dev %s %.2f%%; model: %s\n",
               (long long)(steps_done - r->first_step), took, r->select_label, r->best_value, r->best_path);
    else
        printf("trained %lld steps in %s (no evaluation ran)\n", (long long)(steps_done - r->first_step), took);
    snprintf(r->status, sizeof r->status, "finished: %lld steps", (long long)steps_done);
    *rc = 0;
    return RUN_GO;
}

int qkv_cmd_train(int argc, char **argv) {
    train_run r;
    memset(&r, 0, sizeof r);
    r.saved_step = -1;
    snprintf(r.status, sizeof r.status, "stopped by an error");
    bool resume = false;
    char *sets[256];
    int n_sets = 0;
    int rc = parse_args(argc, argv, &r, &resume, sets, &n_sets);
    if (rc >= 0) return rc;
    if (!parse_debug(getenv("QKV_TRAIN_DEBUG"), &r.debug)) return 2;
    rc = 1;
    if (read_config(&r, sets, n_sets)) {
        run_outcome o = open_run(&r, resume);
        if (o == RUN_GO) o = train_loop(&r);
        if (o == RUN_GO) o = end_run(&r, &rc);
        if (o == RUN_LOG_ERROR) fprintf(stderr, "qkv train: cannot write %s: %s\n", r.log_path, strerror(errno));
        if (o == RUN_ERROR) {
            fail("training stopped");
            if (r.trainer)
                snprintf(r.status, sizeof r.status, "stopped by an error after step %lld",
                         (long long)qkv_trainer_steps(r.trainer));
        }
        if (o != RUN_GO) rc = 1;
    }
    if (r.looping) { /* the final report: no longer reloading itself */
        r.lg.hist.elapsed_s = run_elapsed(&r.lg);
        th_write_report(&r.lg.hist, r.report_path, r.config_path, r.status, r.rate_unit, 0);
    }
    if (r.lg.f) fclose(r.lg.f);
    free(r.poisoned);
    th_free(&r.lg.hist);
    qkv_batcher_free(r.batcher);
    qkv_trainer_free(r.trainer);
    qkv_model_free(r.model);
    task_free(r.tk);
    config_free(&r.cfg);
    return rc;
}
