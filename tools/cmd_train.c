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

int qkv_cmd_train(int argc, char **argv) {
    const char *config_path = NULL;
    bool resume = false;
    config cfg;
    memset(&cfg, 0, sizeof cfg);
    char *sets[256];
    int n_sets = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--resume")) {
            resume = true;
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc && n_sets < 256) {
            sets[n_sets++] = argv[++i];
        } else if (argv[i][0] != '-' && !config_path) {
            config_path = argv[i];
        } else {
            fprintf(stderr, "qkv train: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!config_path) {
        usage(stderr);
        return 2;
    }
    task *tk = NULL;
    static const char *const nonfinite_names[] = {"stop", "skip"};
    int nonfinite = NONFINITE_STOP;
    debug_events debug;
    if (!parse_debug(getenv("QKV_TRAIN_DEBUG"), &debug)) return 2;
    bool ok = config_load(&cfg, config_path);
    for (int i = 0; ok && i < n_sets; i++) ok = config_set(&cfg, sets[i]);
    ok = ok && task_create(&cfg, &tk) && config_enum(&cfg, "train.nonfinite", NONFINITE_STOP, nonfinite_names, 2, &nonfinite) &&
         config_check_unused(&cfg);
    if (ok && (!tk->s.train_path || !tk->s.dev_path || !tk->s.out_dir)) {
        snprintf(cfg.error, sizeof cfg.error, "%s: data.train, data.dev and out.dir are required", config_path);
        ok = false;
    }
    if (!ok) {
        fprintf(stderr, "qkv train: %s\n", cfg.error);
        task_free(tk);
        config_free(&cfg);
        return 1;
    }
    const task_settings *s = &tk->s;
    const task_ops *ops = tk->ops;
    if (mkdir(s->out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "qkv train: cannot create %s: %s\n", s->out_dir, strerror(errno));
        task_free(tk);
        config_free(&cfg);
        return 1;
    }
    remove_stale_temporaries(s->out_dir);
    qkv_set_num_threads((int)s->threads);
    int rc = 1;
    qkv_batcher *batcher = NULL;
    qkv_model *model = NULL;
    qkv_real *poisoned = NULL; /* QKV_TRAIN_DEBUG nan: the values it replaced */
    qkv_trainer *trainer = NULL;
    run_log lg;
    memset(&lg, 0, sizeof lg);
    char path[1024], ckpt[1024], best_path[1024], last_path[1024], report_path[1024], status[256];
    bool looping = false; /* the training loop started: report.html is written on every way out */
    snprintf(status, sizeof status, "stopped by an error");

    /* data and vocabularies: built from the training set on a fresh run, read back on resume */
    if (ops->prepare(tk, resume)) goto done_err;
    if (qkv_model_new(&s->model, s->train.seed, &model)) goto done_err;
    if (qkv_trainer_new(model, &s->train, &trainer)) goto done_err;
    if (debug.nan_count > 0 && !(poisoned = malloc(sizeof(qkv_real) * (size_t)qkv_params_count(model->params))))
        goto done_err;
    if (qkv_batcher_new(tk->train, &tk->batch_opts, &batcher)) goto done_err;
    if (task_path(ckpt, sizeof ckpt, s->out_dir, "checkpoint.safetensors") ||
        task_path(best_path, sizeof best_path, s->out_dir, "model.safetensors") ||
        task_path(last_path, sizeof last_path, s->out_dir, "last.safetensors") ||
        task_path(report_path, sizeof report_path, s->out_dir, "report.html") ||
        task_path(path, sizeof path, s->out_dir, "log.jsonl"))
        goto done_err;
    const bool lower = ops->lower_is_better;
    int64_t saved_step = -1; /* the step of checkpoint.safetensors (-1: none yet) */
    double best_value = lower ? INFINITY : -INFINITY;
    if (resume) {
        int64_t epoch = 0, batch = 0;
        uint64_t fingerprint = 0;
        if (qkv_trainer_load(trainer, ckpt, &epoch, &batch, &fingerprint)) goto done_err;
        /* the batcher refuses a position whose fingerprint differs: other data or batching options */
        if (qkv_batcher_seek(batcher, (qkv_batch_pos){(uint64_t)epoch, batch, fingerprint})) goto done_err;
        saved_step = qkv_trainer_steps(trainer);
        /* the log is cut back to the checkpoint (the steps after it run again), and the report's
         * history read back from the kept lines */
        resume_state rs = {.lower = lower, .best = best_value, .hist = &lg.hist};
        snprintf(rs.member, sizeof rs.member, "dev_%s", ops->select);
        int64_t kept = 0, dropped = 0;
        if (tlog_resume(path, saved_step, resume_visit, &rs, &kept, &dropped)) goto done_err;
        best_value = rs.best;
        if (dropped)
            printf("%s: kept %lld lines up to step %lld, dropped %lld (later steps, or cut short)\n", path, (long long)kept,
                   (long long)saved_step, (long long)dropped);
        printf("resuming %s at step %lld (epoch %lld, batch %lld)\n", ckpt, (long long)qkv_trainer_steps(trainer),
               (long long)epoch, (long long)batch);
    }
    if (!(lg.f = fopen(path, resume ? "a" : "w"))) {
        fprintf(stderr, "qkv train: cannot open %s: %s\n", path, strerror(errno));
        goto done;
    }
    printf("qkv %s | %s | ", qkv_version(), ops->name);
    ops->describe(tk, stdout);
    printf(" | %lld parameters\n", (long long)qkv_params_numel(model->params));

    signal(SIGINT, on_sigint);
    const bool tty = isatty(fileno(stdout));
    const double start = now();
    const int64_t first_step = qkv_trainer_steps(trainer);
    lg.start = lg.win_t0 = lg.report_t = start;
    lg.elapsed_base = lg.hist.elapsed_s;
    lg.skipped = lg.hist.skipped;
    lg.line_step = first_step;
    double tokens_since = 0, tokens_total = 0, t_since = start;
    double tok_rate = NAN; /* over the last second; the average since the start until then */
    const char *select_label = ops->select;
    const bool ema = qkv_trainer_has_ema(trainer);
    bool select_plain = false; /* the selection metric is not a percentage */
    const char *rate_unit = ops->rate_unit ? ops->rate_unit : "tok";
    int batch_in_step = 0;    /* batches of the accumulation under way */
    double step_loss = 0;     /* the sum of their losses */
    int skips_in_row = 0;     /* non-finite steps skipped since the last applied one */
    qkv_step_stats st;        /* of the last batch */
    memset(&st, 0, sizeof st);
    looping = true;
    /* Ctrl-C is honoured after an optimiser step (a checkpoint cannot hold half an accumulation)
     * and whatever that step logs, evaluates and saves. */
    while (qkv_trainer_steps(trainer) < s->steps) {
        qkv_batch b;
        qkv_train_batch tb;
        if (qkv_batcher_next(batcher, &b) || ops->batch(tk, &b, &tb)) goto done_err;
        const int64_t attempt = qkv_trainer_steps(trainer) + 1;
        const bool poison = poisoned && attempt == debug.nan_step && debug.nan_count > 0 && batch_in_step == 0;
        if (poison) poison_params(model, poisoned, false), debug.nan_count--;
        const qkv_status step_st = qkv_trainer_step(trainer, &tb, &st);
        if (poison) poison_params(model, poisoned, true);
        if (step_st == QKV_ERR_NONFINITE) {
            /* nothing was applied: stop with the last checkpoint on disk, or skip the step */
            batch_in_step = 0, step_loss = 0;
            if (tty) printf("\n");
            const char *hint = nonfinite == NONFINITE_STOP ? "; train.nonfinite = skip skips such steps" : "";
            if (nonfinite == NONFINITE_STOP || ++skips_in_row >= MAX_SKIPS) {
                fprintf(stderr, "qkv train: %s\n", qkv_last_error());
                if (nonfinite == NONFINITE_SKIP) fprintf(stderr, "qkv train: %d steps in a row were not finite\n", MAX_SKIPS);
                if (saved_step >= 0)
                    fprintf(stderr, "qkv train: training stopped; %s holds step %lld (--resume continues from it)%s\n", ckpt,
                            (long long)saved_step, hint);
                else
                    fprintf(stderr, "qkv train: training stopped before a checkpoint was saved%s\n", hint);
                snprintf(status, sizeof status, "stopped at step %lld: the %s was not finite", (long long)attempt,
                         st.nonfinite == QKV_NONFINITE_GRAD ? "gradient norm" : "loss");
                goto done;
            }
            lg.skipped++;
            printf("step %lld skipped: %s\n", (long long)attempt, qkv_last_error());
            const qkv_batch_pos at = qkv_batcher_tell(batcher);
            tlog_out lo;
            tlog_start(&lo, "skip", attempt);
            tlog_int(&lo, "epoch", (int64_t)at.epoch);
            tlog_str(&lo, "what", st.nonfinite == QKV_NONFINITE_GRAD ? "gradient norm" : "loss");
            tlog_num(&lo, "loss", st.loss, 7);
            tlog_num(&lo, "grad_norm", st.grad_norm, 7);
            tlog_int(&lo, "skipped", lg.skipped);
            if (!tlog_write(&lo, lg.f)) goto log_err;
            continue;
        }
        if (step_st) goto done_err;
        tokens_since += (double)st.tokens;
        tokens_total += (double)st.tokens;
        lg.win_tokens += (double)st.tokens;
        step_loss += st.loss;
        batch_in_step++;
        if (!st.stepped) continue;
        /* the step's loss: the mean over its batches, as its gradient is */
        const double loss = step_loss / batch_in_step;
        batch_in_step = 0, step_loss = 0, skips_in_row = 0;
        lg.win_loss += loss, lg.win_steps++;
        lg.eval_loss += loss, lg.eval_steps++;
        const int64_t step = qkv_trainer_steps(trainer);
        if (step == debug.sigint_step) raise(SIGINT);
        if (step == debug.nan_weights_step) ((qkv_real *)qkv_params_get(model->params, 0)->data)[0] = (qkv_real)NAN;
        const double t = now();
        if (t - t_since > 1.0) {
            tok_rate = tokens_since / (t - t_since);
            tokens_since = 0;
            t_since = t;
        }
        const double rate = isnan(tok_rate) ? tokens_total / (t - start > 1e-9 ? t - start : 1e-9) : tok_rate;
        const double per_step = (t - start) / (double)(step - first_step);
        char eta[32];
        format_duration(per_step * (double)(s->steps - step), eta, sizeof eta);
        const qkv_batch_pos pos = qkv_batcher_tell(batcher);
        const bool eval_due = step % s->eval_every == 0 || step == s->steps;
        const bool line_due = step % s->log_every == 0 || step == s->steps || eval_due;
        /* shown: the mean loss of the steps since the last train line, what the next one logs */
        const double smooth = lg.win_loss / (double)lg.win_steps;
        if (tty) {
            const int width = 24, filled = (int)((double)width * (double)step / (double)s->steps);
            printf("\r[%.*s%*s] step %lld/%lld  epoch %llu  loss %.4f  %6.0f %s/s  lr %.2e  ETA %s   ", filled,
                   "========================", width - filled, "", (long long)step, (long long)s->steps,
                   (unsigned long long)pos.epoch, smooth, rate, rate_unit, st.lr, eta);
            fflush(stdout);
        } else if (step % s->log_every == 0 || step == s->steps) {
            printf("step %lld/%lld epoch %llu loss %.4f %s/s %.0f lr %.3e eta %s\n", (long long)step, (long long)s->steps,
                   (unsigned long long)pos.epoch, smooth, rate_unit, rate, st.lr, eta);
            fflush(stdout);
        }
        if (line_due) {
            if (!log_train_line(&lg, step, pos.epoch, st.lr, st.grad_norm)) goto log_err;
            /* the page of a run in progress, cheaply: at most every REPORT_EVERY_S seconds */
            if (!eval_due && now() - lg.report_t >= REPORT_EVERY_S) {
                snprintf(status, sizeof status, "running: step %lld of %lld", (long long)step, (long long)s->steps);
                th_write_report(&lg.hist, report_path, config_path, status, rate_unit, REPORT_REFRESH_S);
                lg.report_t = now();
            }
        }
        if (eval_due) {
            /* a model with a NaN or infinite weight (an overflow in an update whose gradients were
             * finite) is neither evaluated nor saved: the files on disk stay the last good ones */
            if (qkv_trainer_check_finite(trainer)) {
                fprintf(stderr, "qkv train: %s\n", qkv_last_error());
                if (saved_step >= 0)
                    fprintf(stderr, "qkv train: training stopped; %s holds step %lld (--resume continues from it)\n", ckpt,
                            (long long)saved_step);
                else
                    fprintf(stderr, "qkv train: training stopped before a checkpoint was saved\n");
                snprintf(status, sizeof status, "stopped at step %lld: a parameter was not finite", (long long)step);
                goto done;
            }
            task_metrics m;
            const double e0 = now();
            /* with train.ema the average is what is scored and saved (model, last) */
            if (ema && qkv_trainer_swap_ema(trainer)) goto done_err;
            if (step == debug.sigint_eval_step) raise(SIGINT);
            if (ops->evaluate(tk, model, &m)) goto done_err;
            const double value = task_metrics_get(&m, ops->select);
            const bool best = lower ? value < best_value : value > best_value;
            if (tty) printf("\n");
            printf("eval step %lld: dev", (long long)step);
            for (int i = 0; i < m.n; i++)
                printf(m.m[i].plain ? "%s %s %.4f" : "%s %s %.2f%%", i ? " " : "", m.m[i].label, m.m[i].value);
            printf("  (%lld %s, %.1f s)%s\n", (long long)m.items, m.unit, now() - e0, best ? "  best so far" : "");
            /* train_loss: the mean loss of the steps since the previous evaluation */
            const double train_loss = lg.eval_steps ? lg.eval_loss / (double)lg.eval_steps : NAN;
            lg.eval_loss = 0, lg.eval_steps = 0;
            lg.hist.elapsed_s = run_elapsed(&lg);
            tlog_out lo;
            tlog_start(&lo, "eval", step);
            tlog_int(&lo, "epoch", (int64_t)pos.epoch);
            tlog_fixed(&lo, "train_loss", train_loss, 6);
            for (int i = 0; i < m.n; i++) {
                char key[80];
                snprintf(key, sizeof key, "dev_%s", m.m[i].key);
                tlog_fixed(&lo, key, m.m[i].value, 4);
            }
            tlog_num(&lo, "lr", st.lr, 6);
            tlog_fixed(&lo, "elapsed_s", lg.hist.elapsed_s, 1);
            if (!tlog_write(&lo, lg.f)) goto log_err;
            if (step == debug.kill_step) raise(SIGKILL);
            th_add_eval(&lg.hist, step, train_loss, &m);
            for (int i = 0; i < m.n; i++)
                if (!strcmp(m.m[i].key, ops->select)) select_label = m.m[i].label, select_plain = m.m[i].plain;
            if (qkv_model_save(model, last_path)) goto done_err;
            if (best) {
                best_value = value;
                if (qkv_model_save(model, best_path)) goto done_err;
            }
            if (ema && qkv_trainer_swap_ema(trainer)) goto done_err;
            if (qkv_trainer_save(trainer, ckpt, (int64_t)pos.epoch, pos.batch, pos.fingerprint)) goto done_err;
            saved_step = step;
            snprintf(status, sizeof status, "running: step %lld of %lld", (long long)step, (long long)s->steps);
            th_write_report(&lg.hist, report_path, config_path, status, rate_unit, REPORT_REFRESH_S);
            lg.report_t = now();
        }
        /* Ctrl-C is honoured once the step's log line, evaluation and saves are done */
        if (interrupted) break;
    }
    if (tty) printf("\n");
    const int64_t steps_done = qkv_trainer_steps(trainer);
    if (interrupted && steps_done < s->steps) {
        const qkv_batch_pos pos = qkv_batcher_tell(batcher);
        /* the steps since the last train line get theirs, so the log covers every step */
        if (lg.line_step != steps_done && !log_train_line(&lg, steps_done, pos.epoch, st.lr, st.grad_norm)) goto log_err;
        if (saved_step != steps_done && qkv_trainer_save(trainer, ckpt, (int64_t)pos.epoch, pos.batch, pos.fingerprint))
            goto done_err;
        saved_step = steps_done;
        printf("interrupted at step %lld: checkpoint saved to %s (continue with --resume)\n", (long long)steps_done, ckpt);
        snprintf(status, sizeof status, "interrupted at step %lld of %lld (continue with --resume)", (long long)steps_done,
                 (long long)s->steps);
        rc = 130;
        goto done;
    }
    char took[32];
    format_duration(now() - start, took, sizeof took);
    if (isfinite(best_value))
        printf(select_plain ? "trained %lld steps in %s; best dev %s %.4f; model: %s\n"
                            : "trained %lld steps in %s; best dev %s %.2f%%; model: %s\n",
               (long long)(steps_done - first_step), took, select_label, best_value, best_path);
    else
        printf("trained %lld steps in %s (no evaluation ran)\n", (long long)(steps_done - first_step), took);
    snprintf(status, sizeof status, "finished: %lld steps", (long long)steps_done);
    rc = 0;
    goto done;
log_err:
    fprintf(stderr, "qkv train: cannot write %s: %s\n", path, strerror(errno));
    goto done;
done_err:
    fail("training stopped");
    if (trainer) snprintf(status, sizeof status, "stopped by an error after step %lld", (long long)qkv_trainer_steps(trainer));
done:
    /* the final report: no longer reloading itself */
    if (looping) {
        lg.hist.elapsed_s = run_elapsed(&lg);
        th_write_report(&lg.hist, report_path, config_path, status, ops->rate_unit ? ops->rate_unit : "tok", 0);
    }
    if (lg.f) fclose(lg.f);
    free(poisoned);
    th_free(&lg.hist);
    qkv_batcher_free(batcher);
    qkv_trainer_free(trainer);
    qkv_model_free(model);
    task_free(tk);
    config_free(&cfg);
    return rc;
}
