/*
 * cmd_train.c: `qkv train CONFIG [--set key=value ...] [--resume]`: train a sequence-to-sequence
 * Transformer (G2P or any pairs file) from a configuration file (docs/cli.md lists every key).
 *
 * Every train.eval_every steps: the dev set is decoded and scored (multi-reference WER / PER), a
 * line goes to out.dir/log.jsonl, the model is saved as last.safetensors, and as
 * model.safetensors when its dev WER is the best so far; the trainer state goes to
 * checkpoint.safetensors so --resume continues bit-identically. On a terminal the progress is a
 * live bar; otherwise plain log lines. Ctrl-C saves a checkpoint first.
 */
#include "commands.h"
#include "seq2seq_task.h"
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
               "Train a sequence-to-sequence Transformer (e.g. grapheme-to-phoneme) from a configuration file of\n"
               "`key = value` lines (docs/cli.md lists every key). Writes the run into out.dir: src.vocab, tgt.vocab,\n"
               "model.safetensors (best dev WER), last.safetensors, checkpoint.safetensors, log.jsonl, report.html.\n\n"
               "options:\n"
               "  --set key=value   override a configuration key (repeatable)\n"
               "  --resume          continue from out.dir/checkpoint.safetensors, bit-identically\n\n"
               "example:\n"
               "  qkv train examples/g2p.conf --set train.steps=500 --set out.dir=runs/g2p-small\n");
}

typedef struct {
    double *step, *train_loss, *dev_wer, *dev_per;
    int64_t n, cap;
} history;

static void history_add(history *h, double step, double loss, double wer, double per) {
    if (h->n == h->cap) {
        int64_t cap = h->cap ? 2 * h->cap : 64;
        double **arrays[4] = {&h->step, &h->train_loss, &h->dev_wer, &h->dev_per};
        for (int i = 0; i < 4; i++) {
            double *grown = realloc(*arrays[i], sizeof(double) * (size_t)cap);
            if (!grown) return; /* the report is optional: drop the point */
            *arrays[i] = grown;
        }
        h->cap = cap;
    }
    h->step[h->n] = step, h->train_loss[h->n] = loss, h->dev_wer[h->n] = wer, h->dev_per[h->n] = per;
    h->n++;
}

static void history_free(history *h) {
    free(h->step), free(h->train_loss), free(h->dev_wer), free(h->dev_per);
}

static void write_report(const char *dir, const history *h, const char *config_path) {
    char path[1024];
    if (!seq2seq_path(path, sizeof path, dir, "report.html") || h->n == 0) return;
    qkv_series loss = {"train loss (smoothed)", h->step, h->train_loss, h->n};
    qkv_series wer = {"dev WER", h->step, h->dev_wer, h->n}, per = {"dev PER", h->step, h->dev_per, h->n};
    qkv_series metrics[2] = {wer, per};
    qkv_chart charts[2] = {{"loss", "step", "cross-entropy", true, &loss, 1}, {"dev error rates", "step", "%", false, metrics, 2}};
    const char *keys[] = {"configuration"};
    const char *values[] = {config_path};
    qkv_train_report r = {"qkv train", keys, values, 1, charts, 2};
    if (qkv_train_report_write(path, &r)) fprintf(stderr, "qkv train: report: %s\n", qkv_last_error());
}

/* The best dev WER recorded in a run's log.jsonl (INFINITY when none): a resumed run keeps
 * comparing against the model it saved before it stopped. */
static double best_logged_wer(const char *dir) {
    char path[1024], line[1024];
    double best = INFINITY;
    if (!seq2seq_path(path, sizeof path, dir, "log.jsonl")) return best;
    FILE *f = fopen(path, "r");
    if (!f) return best;
    while (fgets(line, sizeof line, f)) {
        const char *k = strstr(line, "\"dev_wer\":");
        if (!k) continue;
        char *end = NULL;
        double v = strtod(k + 10, &end);
        if (end != k + 10 && v < best) best = v;
    }
    fclose(f);
    return best;
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
    seq2seq_settings s;
    bool ok = config_load(&cfg, config_path);
    for (int i = 0; ok && i < n_sets; i++) ok = config_set(&cfg, sets[i]);
    ok = ok && seq2seq_read_settings(&cfg, &s) && config_check_unused(&cfg);
    if (ok && (!s.train_path || !s.dev_path || !s.out_dir)) {
        snprintf(cfg.error, sizeof cfg.error, "%s: data.train, data.dev and out.dir are required", config_path);
        ok = false;
    }
    if (!ok) {
        fprintf(stderr, "qkv train: %s\n", cfg.error);
        config_free(&cfg);
        return 1;
    }
    if (mkdir(s.out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "qkv train: cannot create %s: %s\n", s.out_dir, strerror(errno));
        config_free(&cfg);
        return 1;
    }
    qkv_set_num_threads((int)s.threads);
    int rc = 1;
    qkv_corpus *train_corpus = NULL;
    qkv_vocab *src_vocab = NULL, *tgt_vocab = NULL;
    qkv_dataset *train = NULL;
    seq2seq_eval_set dev;
    memset(&dev, 0, sizeof dev);
    qkv_batcher *batcher = NULL;
    qkv_model *model = NULL;
    qkv_trainer *trainer = NULL;
    FILE *log = NULL;
    history hist;
    memset(&hist, 0, sizeof hist);
    char path[1024], ckpt[1024], best_path[1024], last_path[1024];
    qkv_read_opts ro = {.max_src_len = s.max_src_len, .max_tgt_len = s.max_tgt_len, .src_tokens = s.src_tokens};

    /* data and vocabularies: built from the training set on a fresh run, read back on resume */
    if (qkv_corpus_read(QKV_CORPUS_PAIRS, s.train_path, &ro, &train_corpus)) goto done_err;
    if (resume) {
        if (!seq2seq_path(path, sizeof path, s.out_dir, "src.vocab") || qkv_vocab_load(path, &src_vocab)) goto done_err;
        if (!seq2seq_path(path, sizeof path, s.out_dir, "tgt.vocab") || qkv_vocab_load(path, &tgt_vocab)) goto done_err;
        if (s.model.nat && seq2seq_nat_mask(tgt_vocab, false, &s.model.mask_id)) goto done_err;
    } else {
        if (qkv_vocab_build(train_corpus, QKV_FIELD_SRC, 1, true, &src_vocab) ||
            qkv_vocab_build(train_corpus, QKV_FIELD_TGT, 1, true, &tgt_vocab))
            goto done_err;
        if (s.model.nat && seq2seq_nat_mask(tgt_vocab, true, &s.model.mask_id)) goto done_err;
        if (!seq2seq_path(path, sizeof path, s.out_dir, "src.vocab") || qkv_vocab_save(src_vocab, path)) goto done_err;
        if (!seq2seq_path(path, sizeof path, s.out_dir, "tgt.vocab") || qkv_vocab_save(tgt_vocab, path)) goto done_err;
    }
    if (qkv_dataset_encode(train_corpus, src_vocab, tgt_vocab, true, &train)) goto done_err;
    if (seq2seq_eval_set_load(s.dev_path, &s, src_vocab, tgt_vocab, &dev)) goto done_err;
    s.model.src_vocab = qkv_vocab_size(src_vocab);
    s.model.tgt_vocab = qkv_vocab_size(tgt_vocab);

    if (qkv_model_new(&s.model, s.train.seed, &model)) goto done_err;
    if (qkv_trainer_new(model, &s.train, &trainer)) goto done_err;
    qkv_batch_opts bo = qkv_batch_default_opts(s.max_tokens);
    bo.decoder = true;
    bo.seed = s.train.seed;
    bo.bucket_width = 2;
    if (qkv_batcher_new(train, &bo, &batcher)) goto done_err;
    if (!seq2seq_path(ckpt, sizeof ckpt, s.out_dir, "checkpoint.safetensors") ||
        !seq2seq_path(best_path, sizeof best_path, s.out_dir, "model.safetensors") ||
        !seq2seq_path(last_path, sizeof last_path, s.out_dir, "last.safetensors"))
        goto done_err;
    double best_wer = INFINITY;
    if (resume) {
        int64_t epoch = 0, batch = 0;
        uint64_t fingerprint = 0;
        if (qkv_trainer_load(trainer, ckpt, &epoch, &batch, &fingerprint)) goto done_err;
        /* the batcher refuses a position whose fingerprint differs: other data or batching options */
        if (qkv_batcher_seek(batcher, (qkv_batch_pos){(uint64_t)epoch, batch, fingerprint})) goto done_err;
        best_wer = best_logged_wer(s.out_dir);
        printf("resuming %s at step %lld (epoch %lld, batch %lld)\n", ckpt, (long long)qkv_trainer_steps(trainer),
               (long long)epoch, (long long)batch);
    }
    if (!seq2seq_path(path, sizeof path, s.out_dir, "log.jsonl") || !(log = fopen(path, resume ? "a" : "w"))) {
        fprintf(stderr, "qkv train: cannot open %s: %s\n", path, strerror(errno));
        goto done;
    }
    printf("qkv %s | %lld training pairs, %lld dev words | vocab %d -> %d | %lld parameters\n", qkv_version(),
           (long long)qkv_dataset_size(train), (long long)dev.groups.n, qkv_vocab_size(src_vocab), qkv_vocab_size(tgt_vocab),
           (long long)qkv_params_numel(model->params));

    signal(SIGINT, on_sigint);
    const bool tty = isatty(fileno(stdout));
    const double start = now();
    const int64_t first_step = qkv_trainer_steps(trainer);
    double smooth = NAN, tokens_since = 0, tokens_total = 0, t_since = start;
    double tok_rate = NAN; /* over the last second; the average since the start until then */
    /* Ctrl-C is honoured after an optimiser step: a checkpoint cannot hold half an accumulation. */
    while (qkv_trainer_steps(trainer) < s.steps) {
        qkv_batch b;
        if (qkv_batcher_next(batcher, &b)) goto done_err;
        qkv_train_batch tb = {.batch = (int32_t)b.rows, .src_len = (int32_t)b.src_cols, .tgt_len = (int32_t)b.dec_cols,
                              .src = b.src, .tgt_in = b.dec_in, .tgt_out = b.dec_out};
        if (s.model.nat) tb.tgt_in = NULL, tb.tgt_out = b.tgt, tb.tgt_len = (int32_t)b.tgt_cols; /* the target alone */
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
        format_duration(per_step * (double)(s.steps - step), eta, sizeof eta);
        const qkv_batch_pos pos = qkv_batcher_tell(batcher);
        if (tty) {
            const int width = 24, filled = (int)((double)width * (double)step / (double)s.steps);
            printf("\r[%.*s%*s] step %lld/%lld  epoch %llu  loss %.4f  %6.0f tok/s  lr %.2e  ETA %s   ", filled,
                   "========================", width - filled, "", (long long)step, (long long)s.steps,
                   (unsigned long long)pos.epoch, smooth, rate, st.lr, eta);
            fflush(stdout);
        } else if (step % s.log_every == 0 || step == s.steps) {
            printf("step %lld/%lld epoch %llu loss %.4f tok/s %.0f lr %.3e eta %s\n", (long long)step, (long long)s.steps,
                   (unsigned long long)pos.epoch, smooth, rate, st.lr, eta);
            fflush(stdout);
        }
        if (step % s.eval_every == 0 || step == s.steps) {
            qkv_wer_counts wc;
            const double e0 = now();
            if (seq2seq_evaluate(model, &dev, &s.decode, s.eval_batch, s.eval_max_items, &wc, NULL)) goto done_err;
            const double wer = 100 * qkv_wer(&wc), per = 100 * qkv_per(&wc);
            const bool best = wer < best_wer;
            if (tty) printf("\n");
            printf("eval step %lld: dev WER %.2f%%  PER %.2f%%  (%lld words, %.1f s)%s\n", (long long)step, wer, per,
                   (long long)wc.items, now() - e0, best ? "  best so far" : "");
            fprintf(log, "{\"step\":%lld,\"epoch\":%llu,\"train_loss\":%.6f,\"dev_wer\":%.4f,\"dev_per\":%.4f,\"lr\":%.6g,\"elapsed_s\":%.1f}\n",
                    (long long)step, (unsigned long long)pos.epoch, smooth, wer, per, st.lr, now() - start);
            fflush(log);
            history_add(&hist, (double)step, smooth, wer, per);
            if (qkv_model_save(model, last_path)) goto done_err;
            if (best) {
                best_wer = wer;
                if (qkv_model_save(model, best_path)) goto done_err;
            }
            if (qkv_trainer_save(trainer, ckpt, (int64_t)pos.epoch, pos.batch, pos.fingerprint)) goto done_err;
            write_report(s.out_dir, &hist, config_path);
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
    if (isfinite(best_wer))
        printf("trained %lld steps in %s; best dev WER %.2f%%; model: %s\n",
               (long long)(qkv_trainer_steps(trainer) - first_step), took, best_wer, best_path);
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
    seq2seq_eval_set_free(&dev);
    qkv_dataset_free(train);
    qkv_vocab_free(src_vocab);
    qkv_vocab_free(tgt_vocab);
    qkv_corpus_free(train_corpus);
    config_free(&cfg);
    return rc;
}
