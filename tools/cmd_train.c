/*
 * cmd_train.c: `qkv train CONFIG [--set key=value ...] [--resume]`: train a Transformer for one
 * of the task families of task.h (the `task` key: seq2seq, e.g. G2P; tagging; classify; image; lm)
 * from a configuration file (docs/cli.md lists every key). The loop is the same for every task.
 *
 * Every train.eval_every steps: the task scores the dev set (seq2seq: multi-reference WER / PER;
 * tagging, classify and image: accuracies; lm: cross-entropy, perplexity, bits per character), a
 * line goes to out.dir/log.jsonl ("dev_<metric>" members), the model is saved as last.safetensors,
 * and as model.safetensors when the task's selection metric is the best so far (with train.ema the
 * parameter average is scored and saved instead of the last step's weights); the trainer state
 * goes to checkpoint.safetensors so --resume continues bit-identically. On a terminal the progress
 * is a live bar; otherwise plain log lines.
 * Ctrl-C saves a checkpoint first.
 */
#include "commands.h"
#include "task.h"
#include "qkv/qkv_viz.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t interrupted = 0;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
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

/* The evaluations so far, for report.html: step, smoothed training loss and each dev metric. */
typedef struct {
    double *col[2 + TASK_MAX_METRICS]; /* step, loss, metrics */
    int n_metrics;
    const char *labels[TASK_MAX_METRICS];
    bool plain; /* the metrics are not percentages */
    int64_t n, cap;
} history;

static void history_add(history *h, double step, double loss, const task_metrics *m) {
    if (h->n == 0) {
        h->n_metrics = m->n;
        for (int i = 0; i < m->n; i++) h->labels[i] = m->m[i].label, h->plain = m->m[i].plain;
    }
    if (h->n == h->cap) {
        int64_t cap = h->cap ? 2 * h->cap : 64;
        for (int i = 0; i < 2 + h->n_metrics; i++) {
            double *grown = realloc(h->col[i], sizeof(double) * (size_t)cap);
            if (!grown) return; /* the report is optional: drop the point */
            h->col[i] = grown;
        }
        h->cap = cap;
    }
    h->col[0][h->n] = step, h->col[1][h->n] = loss;
    for (int i = 0; i < h->n_metrics; i++) h->col[2 + i][h->n] = i < m->n ? m->m[i].value : NAN;
    h->n++;
}

static void history_free(history *h) {
    for (int i = 0; i < 2 + TASK_MAX_METRICS; i++) free(h->col[i]);
}

static void write_report(const char *dir, const history *h, const char *config_path) {
    char path[1024], names[TASK_MAX_METRICS][64];
    if (task_path(path, sizeof path, dir, "report.html") || h->n == 0) return;
    qkv_series loss = {"train loss (smoothed)", h->col[0], h->col[1], h->n};
    qkv_series metrics[TASK_MAX_METRICS];
    for (int i = 0; i < h->n_metrics; i++) {
        snprintf(names[i], sizeof names[i], "dev %s", h->labels[i]);
        metrics[i] = (qkv_series){names[i], h->col[0], h->col[2 + i], h->n};
    }
    qkv_chart charts[2] = {{"loss", "step", "cross-entropy", true, &loss, 1},
                           {"dev metrics", "step", h->plain ? "" : "%", false, metrics, h->n_metrics}};
    const char *keys[] = {"configuration"};
    const char *values[] = {config_path};
    qkv_train_report r = {"qkv train", keys, values, 1, charts, 2};
    if (qkv_train_report_write(path, &r)) fprintf(stderr, "qkv train: report: %s\n", qkv_last_error());
}

static int fail(const char *what) {
    fprintf(stderr, "qkv train: %s%s%s\n", what, *qkv_last_error() ? ": " : "", qkv_last_error());
    return 1;
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
    bool ok = config_load(&cfg, config_path);
    for (int i = 0; ok && i < n_sets; i++) ok = config_set(&cfg, sets[i]);
    ok = ok && task_create(&cfg, &tk) && config_check_unused(&cfg);
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
    qkv_set_num_threads((int)s->threads);
    int rc = 1;
    qkv_batcher *batcher = NULL;
    qkv_model *model = NULL;
    qkv_trainer *trainer = NULL;
    FILE *log = NULL;
    history hist;
    memset(&hist, 0, sizeof hist);
    char path[1024], ckpt[1024], best_path[1024], last_path[1024];

    /* data and vocabularies: built from the training set on a fresh run, read back on resume */
    if (ops->prepare(tk, resume)) goto done_err;
    if (qkv_model_new(&s->model, s->train.seed, &model)) goto done_err;
    if (qkv_trainer_new(model, &s->train, &trainer)) goto done_err;
    if (qkv_batcher_new(tk->train, &tk->batch_opts, &batcher)) goto done_err;
    if (task_path(ckpt, sizeof ckpt, s->out_dir, "checkpoint.safetensors") ||
        task_path(best_path, sizeof best_path, s->out_dir, "model.safetensors") ||
        task_path(last_path, sizeof last_path, s->out_dir, "last.safetensors"))
        goto done_err;
    const bool lower = ops->lower_is_better;
    double best_value = lower ? INFINITY : -INFINITY;
    if (resume) {
        int64_t epoch = 0, batch = 0;
        uint64_t fingerprint = 0;
        if (qkv_trainer_load(trainer, ckpt, &epoch, &batch, &fingerprint)) goto done_err;
        /* the batcher refuses a position whose fingerprint differs: other data or batching options */
        if (qkv_batcher_seek(batcher, (qkv_batch_pos){(uint64_t)epoch, batch, fingerprint})) goto done_err;
        best_value = task_best_logged(s->out_dir, ops->select, lower);
        printf("resuming %s at step %lld (epoch %lld, batch %lld)\n", ckpt, (long long)qkv_trainer_steps(trainer),
               (long long)epoch, (long long)batch);
    }
    if (task_path(path, sizeof path, s->out_dir, "log.jsonl") || !(log = fopen(path, resume ? "a" : "w"))) {
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
    double smooth = NAN, tokens_since = 0, tokens_total = 0, t_since = start;
    double tok_rate = NAN; /* over the last second; the average since the start until then */
    const char *select_label = ops->select;
    const bool ema = qkv_trainer_has_ema(trainer);
    bool select_plain = false; /* the selection metric is not a percentage */
    const char *rate_unit = ops->rate_unit ? ops->rate_unit : "tok";
    /* Ctrl-C is honoured after an optimiser step: a checkpoint cannot hold half an accumulation. */
    while (qkv_trainer_steps(trainer) < s->steps) {
        qkv_batch b;
        qkv_train_batch tb;
        if (qkv_batcher_next(batcher, &b) || ops->batch(tk, &b, &tb)) goto done_err;
        qkv_step_stats st;
        if (qkv_trainer_step(trainer, &tb, &st)) goto done_err;
        smooth = isnan(smooth) ? st.loss : 0.98 * smooth + 0.02 * st.loss;
        tokens_since += (double)st.tokens;
        tokens_total += (double)st.tokens;
        if (!st.stepped) continue;
        if (interrupted) break;
        const int64_t step = qkv_trainer_steps(trainer);
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
        if (step % s->eval_every == 0 || step == s->steps) {
            task_metrics m;
            const double e0 = now();
            /* with train.ema the average is what is scored and saved (model, last) */
            if (ema && qkv_trainer_swap_ema(trainer)) goto done_err;
            if (ops->evaluate(tk, model, &m)) goto done_err;
            qkv_model_release_decode_memory(model); /* training steps do not need the decode caches */
            const double value = task_metrics_get(&m, ops->select);
            const bool best = lower ? value < best_value : value > best_value;
            if (tty) printf("\n");
            printf("eval step %lld: dev", (long long)step);
            for (int i = 0; i < m.n; i++)
                printf(m.m[i].plain ? "%s %s %.4f" : "%s %s %.2f%%", i ? " " : "", m.m[i].label, m.m[i].value);
            printf("  (%lld %s, %.1f s)%s\n", (long long)m.items, m.unit, now() - e0, best ? "  best so far" : "");
            fprintf(log, "{\"step\":%lld,\"epoch\":%llu,\"train_loss\":%.6f", (long long)step, (unsigned long long)pos.epoch,
                    smooth);
            for (int i = 0; i < m.n; i++) fprintf(log, ",\"dev_%s\":%.4f", m.m[i].key, m.m[i].value);
            fprintf(log, ",\"lr\":%.6g,\"elapsed_s\":%.1f}\n", st.lr, now() - start);
            fflush(log);
            history_add(&hist, (double)step, smooth, &m);
            for (int i = 0; i < m.n; i++)
                if (!strcmp(m.m[i].key, ops->select)) select_label = m.m[i].label, select_plain = m.m[i].plain;
            if (qkv_model_save(model, last_path)) goto done_err;
            if (best) {
                best_value = value;
                if (qkv_model_save(model, best_path)) goto done_err;
            }
            if (ema && qkv_trainer_swap_ema(trainer)) goto done_err;
            if (qkv_trainer_save(trainer, ckpt, (int64_t)pos.epoch, pos.batch, pos.fingerprint)) goto done_err;
            write_report(s->out_dir, &hist, config_path);
        }
    }
    if (tty) printf("\n");
    if (interrupted) {
        const qkv_batch_pos pos = qkv_batcher_tell(batcher);
        if (qkv_trainer_save(trainer, ckpt, (int64_t)pos.epoch, pos.batch, pos.fingerprint)) goto done_err;
        printf("interrupted at step %lld: checkpoint saved to %s (continue with --resume)\n",
               (long long)qkv_trainer_steps(trainer), ckpt);
        rc = 130;
        goto done;
    }
    char took[32];
    format_duration(now() - start, took, sizeof took);
    if (isfinite(best_value))
        printf(select_plain ? "trained %lld steps in %s; best dev %s %.4f; model: %s\n"
                            : "trained %lld steps in %s; best dev %s %.2f%%; model: %s\n",
               (long long)(qkv_trainer_steps(trainer) - first_step), took, select_label, best_value, best_path);
    else
        printf("trained %lld steps in %s (no evaluation ran)\n", (long long)(qkv_trainer_steps(trainer) - first_step), took);
    rc = 0;
    goto done;
done_err:
    fail("training stopped");
done:
    if (log) fclose(log);
    history_free(&hist);
    qkv_batcher_free(batcher);
    qkv_trainer_free(trainer);
    qkv_model_free(model);
    task_free(tk);
    config_free(&cfg);
    return rc;
}
