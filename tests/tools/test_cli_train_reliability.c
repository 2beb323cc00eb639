/*
 * test_cli_train_reliability.c: `qkv train` when things go wrong. A configuration that can only
 * give NaN is refused; a non-finite step stops the run with the last good checkpoint on disk, or
 * is skipped with train.nonfinite = skip; log.jsonl stays valid JSON throughout. Faults are
 * provoked at known steps through QKV_TRAIN_DEBUG (docs/cli.md).
 */
#include "testutil.h"
#include "cli_util.h"
#include "io/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const tiny_model =
    "model.d_model = 8\nmodel.heads = 2\nmodel.encoder_layers = 1\nmodel.decoder_layers = 1\nmodel.ff = 16\n"
    "train.max_tokens = 64\ntrain.warmup = 2\n";

/* The whole of a small file, NUL-terminated (NULL when it cannot be read). */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = 2 * cap + 8192;
            char *grown = realloc(buf, cap);
            if (!grown) break;
            buf = grown;
        }
        size_t k = fread(buf + n, 1, 4096, f);
        n += k;
        if (k == 0) break;
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

/* Every line of a run's log.jsonl is a JSON object with an integer "step"; returns the number of
 * lines (-1 on a failure, which is reported), and the largest step and the lines of `type` (NULL:
 * all) through the pointers (may be NULL). */
static int check_log(const char *run_dir, const char *type, int64_t *max_step, int *n_type) {
    char path[700];
    snprintf(path, sizeof path, "%s/log.jsonl", run_dir);
    char *text = slurp(path);
    CHECK_MSG(text, "cannot read %s", path);
    if (!text) return -1;
    int lines = 0, typed = 0;
    int64_t top = -1;
    bool ok = true;
    for (char *line = text, *next; *line; line = next) {
        char *nl = strchr(line, '\n');
        CHECK_MSG(nl, "%s: the last line has no newline: %s", path, line);
        if (!nl) {
            ok = false;
            break;
        }
        next = nl + 1;
        qkv_json_doc *doc = NULL;
        if (qkv_json_parse(line, (size_t)(nl - line), &doc, NULL) != QKV_OK) {
            CHECK_MSG(false, "%s line %d is not JSON (%s): %.*s", path, lines + 1, qkv_last_error(), (int)(nl - line), line);
            ok = false;
        } else {
            uint64_t step = 0;
            const qkv_json_value *t = qkv_json_get(qkv_json_root(doc), "type");
            CHECK_MSG(qkv_json_u64(qkv_json_get(qkv_json_root(doc), "step"), &step), "%s line %d has no step", path, lines + 1);
            if ((int64_t)step > top) top = (int64_t)step;
            if (!type || (t && t->type == QKV_JSON_STRING && !strcmp(t->str, type))) typed++;
        }
        qkv_json_free(doc);
        lines++;
    }
    free(text);
    if (max_step) *max_step = top;
    if (n_type) *n_type = typed;
    return ok ? lines : -1;
}

TEST(cli_train_refuses_eps_zero) {
    char cmd[4096], out[8192];
    cli_run r;
    CHECK(cli_run_seq2seq(&r, NULL, tiny_model));
    snprintf(cmd, sizeof cmd, "%s train %s --set train.steps=2 --set train.eps=0", QKV_CLI_PATH, r.conf);
    const int rc = cli_exec(cmd, out, sizeof out);
    CHECK_MSG(rc == 1 && strstr(out, "train.eps = 0 is outside"), "exit %d: %s", rc, out);
    cli_run_remove(&r);
}

/* A NaN loss at step 3 (evaluations and checkpoints every 2 steps): exit 1 with a message naming
 * the step and the loss, checkpoint.safetensors still that of step 2, no log line past it; the
 * run then resumes from there. */
TEST(cli_train_stops_on_a_nonfinite_loss_keeping_the_last_checkpoint) {
    char cmd[4096], out[16384];
    cli_run r;
    CHECK(cli_run_seq2seq(&r, NULL, tiny_model));
    snprintf(cmd, sizeof cmd, "QKV_TRAIN_DEBUG=nan@3 %s train %s --set train.steps=6 --set train.eval_every=2", QKV_CLI_PATH,
             r.conf);
    int rc = cli_exec(cmd, out, sizeof out);
    CHECK_MSG(rc == 1 && strstr(out, "step 3: the loss is nan; the step was not applied") && strstr(out, "holds step 2"),
              "exit %d: %s", rc, out);
    CHECK_MSG(!strstr(out, "eval step 4"), "trained on: %s", out);
    int64_t top = -1;
    CHECK(check_log(r.run_dir, NULL, &top, NULL) > 0 && top == 2);
    snprintf(cmd, sizeof cmd, "%s train %s --set train.steps=6 --set train.eval_every=2 --resume", QKV_CLI_PATH, r.conf);
    rc = cli_exec(cmd, out, sizeof out);
    CHECK_MSG(rc == 0 && strstr(out, "at step 2") && strstr(out, "eval step 6"), "resume: exit %d: %s", rc, out);
    CHECK(check_log(r.run_dir, NULL, &top, NULL) > 0 && top == 6);
    cli_run_remove(&r);
}

/* A weight that became NaN in an applied step (an overflow in an update whose gradients were
 * finite) is caught before the evaluation: nothing is evaluated or saved, so last.safetensors and
 * checkpoint.safetensors stay those of step 2, byte for byte. */
TEST(cli_train_never_saves_nonfinite_weights) {
    char cmd[4096], out[16384];
    cli_run r;
    CHECK(cli_run_seq2seq(&r, NULL, tiny_model));
    snprintf(cmd, sizeof cmd, "%s train %s --set train.steps=2 --set out.dir=%s/two", QKV_CLI_PATH, r.conf, r.dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "two steps: %s", out);
    snprintf(cmd, sizeof cmd, "QKV_TRAIN_DEBUG=nan-weights@4 %s train %s --set train.steps=6 --set train.eval_every=2",
             QKV_CLI_PATH, r.conf);
    const int rc = cli_exec(cmd, out, sizeof out);
    CHECK_MSG(rc == 1 && strstr(out, "is nan after step 4") && strstr(out, "holds step 2") && !strstr(out, "eval step 4"),
              "exit %d: %s", rc, out);
    const char *files[] = {"checkpoint.safetensors", "last.safetensors", "model.safetensors"};
    char two[600];
    snprintf(two, sizeof two, "%s/two", r.dir);
    const char *differs = cli_first_different(two, r.run_dir, files, 3);
    CHECK_MSG(!differs, "%s is not that of step 2", differs);
    cli_run_remove(&r);
}

/* train.nonfinite = skip: two NaN attempts at step 3 are skipped (logged, counted) and the run
 * reaches its last step; a step that never becomes finite stops it after 100 attempts. */
TEST(cli_train_skips_nonfinite_steps_when_asked) {
    char cmd[4096], out[16384];
    cli_run r;
    CHECK(cli_run_seq2seq(&r, NULL, tiny_model));
    snprintf(cmd, sizeof cmd,
             "QKV_TRAIN_DEBUG=nan@3:2 %s train %s --set train.steps=6 --set train.eval_every=3 --set train.nonfinite=skip",
             QKV_CLI_PATH, r.conf);
    int rc = cli_exec(cmd, out, sizeof out);
    const char *first = strstr(out, "step 3 skipped"), *second = first ? strstr(first + 1, "step 3 skipped") : NULL;
    CHECK_MSG(rc == 0 && first && second && !strstr(second + 14, "skipped:") && strstr(out, "trained 6 steps"), "exit %d: %s", rc,
              out);
    int64_t top = -1;
    int skips = 0;
    CHECK(check_log(r.run_dir, "skip", &top, &skips) > 0 && top == 6 && skips == 2);
    snprintf(cmd, sizeof cmd,
             "QKV_TRAIN_DEBUG=nan@2:1000 %s train %s --set train.steps=6 --set train.nonfinite=skip --set out.dir=%s/never",
             QKV_CLI_PATH, r.conf, r.dir);
    rc = cli_exec(cmd, out, sizeof out);
    CHECK_MSG(rc == 1 && strstr(out, "100 steps in a row were not finite") && strstr(out, "before a checkpoint was saved"),
              "exit %d: %s", rc, out);
    char run[600];
    snprintf(run, sizeof run, "%s/never", r.dir);
    CHECK(check_log(run, "skip", &top, &skips) == 99 && skips == 99 && top == 2);
    snprintf(cmd, sizeof cmd, "%s train %s --set train.nonfinite=sometimes", QKV_CLI_PATH, r.conf);
    rc = cli_exec(cmd, out, sizeof out);
    CHECK_MSG(rc == 1 && strstr(out, "train.nonfinite"), "exit %d: %s", rc, out);
    cli_run_remove(&r);
}

/* The lines of a log.jsonl without the members that depend on timing (elapsed_s, throughput),
 * each line ending with a newline; NULL when it cannot be read. */
static char *log_without_timing(const char *run_dir) {
    char path[700];
    snprintf(path, sizeof path, "%s/log.jsonl", run_dir);
    char *text = slurp(path);
    if (!text) return NULL;
    static const char *const timing[] = {",\"elapsed_s\":", ",\"throughput\":"};
    for (int k = 0; k < 2; k++)
        for (char *p; (p = strstr(text, timing[k]));) {
            char *end = p + strlen(timing[k]);
            while (*end && *end != ',' && *end != '}') end++;
            memmove(p, end, strlen(end) + 1);
        }
    return text;
}

/* The number of points of a report's series (its row in the table under the chart; -1: none). */
static int report_points(const char *html, const char *series) {
    char row[200];
    snprintf(row, sizeof row, "<tr><td>%s</td><td class=\"num\">", series);
    const char *p = strstr(html, row);
    return p ? atoi(p + strlen(row)) : -1;
}

/* The steps of the eval lines of a log, as "2 4 6 ". */
static void eval_steps(const char *log, char *out, size_t size) {
    out[0] = '\0';
    for (const char *p = log; (p = strstr(p, "\"step\":")); p++) {
        const char *line = p;
        while (line > log && line[-1] != '\n') line--;
        const char *nl = strchr(p, '\n');
        const bool eval = strstr(line, "\"dev_") && (!nl || strstr(line, "\"dev_") < nl);
        if (eval) snprintf(out + strlen(out), size - strlen(out), "%lld ", strtoll(p + 7, NULL, 10));
    }
}

/* Killed (SIGKILL) after the evaluation at step 4 was logged but before anything was saved: the
 * checkpoint holds step 2, and --resume cuts the log back to it (a line cut short by the kill
 * too), so the finished log has each evaluation once, with the dev scores of a run that never
 * stopped. */
TEST(cli_train_resume_cuts_the_log_back_to_the_checkpoint) {
    char cmd[4096], out[16384];
    cli_run r;
    CHECK(cli_run_seq2seq(&r, NULL, tiny_model));
    const char *set = "--set train.steps=6 --set train.eval_every=2 --set train.log_every=1";
    snprintf(cmd, sizeof cmd, "%s train %s %s --set out.dir=%s/straight", QKV_CLI_PATH, r.conf, set, r.dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "straight: %s", out);
    snprintf(cmd, sizeof cmd, "QKV_TRAIN_DEBUG=kill@4 %s train %s %s", QKV_CLI_PATH, r.conf, set);
    int rc = cli_exec(cmd, out, sizeof out);
    CHECK_MSG(rc == 137 || rc == -1, "killed run: exit %d: %s", rc, out);
    char *log = log_without_timing(r.run_dir), steps[64];
    if (log) eval_steps(log, steps, sizeof steps);
    CHECK_MSG(log && !strcmp(steps, "2 4 "), "killed run: evaluations at %s", log ? steps : "(no log)");
    free(log);
    /* the report of step 2's evaluation: a run in progress, which reloads itself */
    char report[700];
    snprintf(report, sizeof report, "%s/report.html", r.run_dir);
    char *html = slurp(report);
    CHECK_MSG(html && strstr(html, "<meta http-equiv=\"refresh\" content=\"10\">") && strstr(html, "running: step 2 of 6") &&
                  report_points(html, "train loss") == 2,
              "report of the killed run: %s", html ? html : "(none)");
    free(html);
    char path[700];
    snprintf(path, sizeof path, "%s/log.jsonl", r.run_dir);
    FILE *f = fopen(path, "a");
    if (f) fputs("{\"type\":\"eval\",\"st", f), fclose(f); /* a line the kill cut short */
    snprintf(cmd, sizeof cmd, "%s train %s %s --resume", QKV_CLI_PATH, r.conf, set);
    rc = cli_exec(cmd, out, sizeof out);
    CHECK_MSG(rc == 0 && strstr(out, "at step 2"), "resume: exit %d: %s", rc, out);
    CHECK(check_log(r.run_dir, NULL, NULL, NULL) > 0);
    char straight_dir[600], got[64], want[64];
    snprintf(straight_dir, sizeof straight_dir, "%s/straight", r.dir);
    char *a = log_without_timing(straight_dir), *b = log_without_timing(r.run_dir);
    CHECK(a && b);
    if (a && b) {
        eval_steps(a, want, sizeof want);
        eval_steps(b, got, sizeof got);
        CHECK_MSG(!strcmp(want, "2 4 6 ") && !strcmp(got, want), "evaluations at %s, expected %s", got, want);
        /* line for line the log of the run that never stopped, losses and dev scores included */
        CHECK_MSG(!strcmp(a, b), "the resumed log:\n%s\ndiffers from the uninterrupted one:\n%s", b, a);
    }
    free(a);
    free(b);
    /* the report, rebuilt from the kept log lines, draws the whole run */
    char ra[700], rb[700];
    snprintf(ra, sizeof ra, "%s/report.html", straight_dir);
    snprintf(rb, sizeof rb, "%s/report.html", r.run_dir);
    char *ha = slurp(ra), *hb = slurp(rb);
    CHECK(ha && hb);
    if (ha && hb) {
        static const char *const series[] = {"train loss", "learning rate", "gradient norm", "tok/s", "dev WER", "dev PER"};
        static const int points[] = {6, 6, 6, 6, 3, 3};
        for (int i = 0; i < 6; i++)
            CHECK_MSG(report_points(ha, series[i]) == points[i] && report_points(hb, series[i]) == points[i],
                      "%s: %d points straight, %d resumed, expected %d", series[i], report_points(ha, series[i]),
                      report_points(hb, series[i]), points[i]);
        CHECK(!strstr(hb, "http-equiv"));
    }
    free(ha);
    free(hb);
    cli_run_remove(&r);
}

/* Ctrl-C while optimiser step 4 runs, or during its evaluation (evaluations every 2 steps): the
 * evaluation of step 4, its log line and its saves are done, then the run stops there (exit 130);
 * --resume goes on to step 6 with every evaluation logged once. */
TEST(cli_train_interrupt_finishes_the_evaluation_of_its_step) {
    static const char *const events[] = {"sigint@4", "sigint-eval@4"};
    for (int e = 0; e < 2; e++) {
        char cmd[4096], out[16384], got[64];
        cli_run r;
        CHECK(cli_run_seq2seq(&r, NULL, tiny_model));
        const char *set = "--set train.steps=6 --set train.eval_every=2";
        snprintf(cmd, sizeof cmd, "QKV_TRAIN_DEBUG=%s %s train %s %s", events[e], QKV_CLI_PATH, r.conf, set);
        int rc = cli_exec(cmd, out, sizeof out);
        CHECK_MSG(rc == 130 && strstr(out, "eval step 4") && strstr(out, "interrupted at step 4"), "%s: exit %d: %s", events[e], rc,
                  out);
        char *log = log_without_timing(r.run_dir);
        if (log) eval_steps(log, got, sizeof got);
        CHECK_MSG(log && !strcmp(got, "2 4 "), "%s: evaluations at %s", events[e], log ? got : "(no log)");
        free(log);
        snprintf(cmd, sizeof cmd, "%s train %s %s --resume", QKV_CLI_PATH, r.conf, set);
        rc = cli_exec(cmd, out, sizeof out);
        CHECK_MSG(rc == 0 && strstr(out, "at step 4") && !strstr(out, "eval step 4") && strstr(out, "eval step 6"),
                  "%s: resume: exit %d: %s", events[e], rc, out);
        log = log_without_timing(r.run_dir);
        if (log) eval_steps(log, got, sizeof got);
        CHECK_MSG(log && !strcmp(got, "2 4 6 "), "%s: evaluations at %s", events[e], log ? got : "(no log)");
        free(log);
        cli_run_remove(&r);
    }
}

/* Whether directory dir holds a file whose name contains ".tmp." (a temporary left behind). */
static bool has_temporary(const char *dir) {
    char cmd[700], out[4096];
    snprintf(cmd, sizeof cmd, "ls -a %s", dir);
    cli_exec(cmd, out, sizeof out);
    return strstr(out, ".tmp.") != NULL;
}

/* A file size limit (ulimit -f) reached while saving: SIGXFSZ does not kill the trainer silently;
 * the save fails with a message naming the file (EFBIG), the temporary is removed and
 * the files of the previous save are intact. */
TEST(cli_train_file_size_limit_is_a_clear_error) {
    char cmd[4096], out[16384];
    cli_run r;
    CHECK(cli_run_seq2seq(&r, NULL, tiny_model));
    snprintf(cmd, sizeof cmd, "%s train %s --set train.steps=2 --set train.eval_every=2", QKV_CLI_PATH, r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
    snprintf(cmd, sizeof cmd, "mkdir %s/before && cp %s/*.safetensors %s/before/", r.dir, r.run_dir, r.dir);
    CHECK(system(cmd) == 0);
    /* 4 blocks (2 or 4 KiB: dash counts 512 bytes, bash 1024): the log still grows, a model does not fit */
    snprintf(cmd, sizeof cmd, "ulimit -f 4; %s train %s --set train.steps=4 --set train.eval_every=2 --resume", QKV_CLI_PATH,
             r.conf);
    const int rc = cli_exec(cmd, out, sizeof out);
    CHECK_MSG(rc == 1 && strstr(out, "File too large") && strstr(out, "last.safetensors"), "exit %d: %s", rc, out);
    CHECK_MSG(!has_temporary(r.run_dir), "a temporary file was left in %s", r.run_dir);
    const char *files[] = {"checkpoint.safetensors", "last.safetensors", "model.safetensors"};
    char before[600];
    snprintf(before, sizeof before, "%s/before", r.dir);
    const char *differs = cli_first_different(before, r.run_dir, files, 3);
    CHECK_MSG(!differs, "%s changed", differs);
    cli_run_remove(&r);
}

/* A process id that is not running: a child that has exited and been waited for. */
static long dead_pid(void) {
    const pid_t p = fork();
    if (p == 0) _exit(0);
    if (p > 0) waitpid(p, NULL, 0);
    return (long)p;
}

/* `qkv train` (fresh or --resume) first removes the temporaries "<name>.tmp.<pid>.<n>" that dead
 * processes left in out.dir, and says how many; those of a live process and other names stay. */
TEST(cli_train_removes_the_temporaries_of_dead_processes) {
    char cmd[4096], out[16384], path[700];
    cli_run r;
    CHECK(cli_run_seq2seq(&r, NULL, tiny_model));
    CHECK(mkdir(r.run_dir, 0777) == 0);
    const long dead = dead_pid(), live = (long)getpid();
    CHECK(dead > 0);
    const char *stale[] = {"checkpoint.safetensors.tmp.%ld.0", "report.html.tmp.%ld.17"};
    const char *kept[] = {"last.safetensors.tmp.%ld.3", "notes.tmp.%ld", "x.tmp.%ld.1a", ".tmp.%ld.0", "y.tmp.%ld..0"};
    for (int i = 0; i < 2; i++) {
        char name[200];
        snprintf(name, sizeof name, stale[i], dead);
        snprintf(path, sizeof path, "%s/%s", r.run_dir, name);
        cli_write_file(path, "partial");
    }
    for (int i = 0; i < 5; i++) {
        char name[200];
        snprintf(name, sizeof name, kept[i], i == 0 ? live : dead);
        snprintf(path, sizeof path, "%s/%s", r.run_dir, name);
        cli_write_file(path, "keep");
    }
    snprintf(cmd, sizeof cmd, "%s train %s --set train.steps=2 --set train.eval_every=2", QKV_CLI_PATH, r.conf);
    int rc = cli_exec(cmd, out, sizeof out);
    CHECK_MSG(rc == 0 && strstr(out, "removed 2 stale temporary files"), "exit %d: %s", rc, out);
    for (int i = 0; i < 2; i++) {
        char name[200];
        snprintf(name, sizeof name, stale[i], dead);
        snprintf(path, sizeof path, "%s/%s", r.run_dir, name);
        CHECK_MSG(!cli_exists(path), "%s is still there", path);
    }
    for (int i = 0; i < 5; i++) {
        char name[200];
        snprintf(name, sizeof name, kept[i], i == 0 ? live : dead);
        snprintf(path, sizeof path, "%s/%s", r.run_dir, name);
        CHECK_MSG(cli_exists(path), "%s was removed", path);
    }
    /* --resume too */
    snprintf(path, sizeof path, "%s/log.jsonl.tmp.%ld.4", r.run_dir, dead);
    cli_write_file(path, "partial");
    snprintf(cmd, sizeof cmd, "%s train %s --set train.steps=3 --set train.eval_every=2 --resume", QKV_CLI_PATH, r.conf);
    rc = cli_exec(cmd, out, sizeof out);
    CHECK_MSG(rc == 0 && strstr(out, "removed 1 stale temporary file ") && !cli_exists(path), "resume: exit %d: %s", rc, out);
    cli_run_remove(&r);
}

/* Every member of every train line of a log is there and a number (elapsed_s, throughput and the
 * gradient norm can be null only where JSON demands it: never here). */
static void check_train_members(const char *run_dir) {
    char path[700];
    snprintf(path, sizeof path, "%s/log.jsonl", run_dir);
    char *text = slurp(path);
    if (!text) return;
    static const char *const members[] = {"epoch", "loss", "lr", "grad_norm", "throughput", "elapsed_s", "skipped"};
    for (char *line = text, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        qkv_json_doc *doc = NULL;
        if (qkv_json_parse(line, (size_t)(nl - line), &doc, NULL) != QKV_OK) continue; /* check_log reports it */
        const qkv_json_value *root = qkv_json_root(doc), *t = qkv_json_get(root, "type");
        if (t && t->type == QKV_JSON_STRING && !strcmp(t->str, "train"))
            for (int i = 0; i < 7; i++) {
                const qkv_json_value *v = qkv_json_get(root, members[i]);
                CHECK_MSG(v && (v->type == QKV_JSON_INT || v->type == QKV_JSON_NUMBER), "%s: %s in %.*s", path, members[i],
                          (int)(nl - line), line);
            }
        qkv_json_free(doc);
    }
    free(text);
}

/* Every logged step is a train line of log.jsonl (log_every 1: all 12; log_every 5: steps 5, 10,
 * the evaluation steps 4, 8 and the last), and report.html draws them all: loss, learning rate,
 * gradient norm and throughput over every train line, the dev metrics over the evaluations. The
 * final report no longer reloads itself. */
TEST(cli_train_logs_every_step_and_reports_it) {
    char cmd[4096], out[16384], path[700];
    cli_run r;
    CHECK(cli_run_seq2seq(&r, NULL, tiny_model));
    snprintf(cmd, sizeof cmd, "%s train %s --set train.steps=12 --set train.eval_every=4 --set train.log_every=1", QKV_CLI_PATH,
             r.conf);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
    int64_t top = -1;
    int train = 0, eval = 0;
    CHECK(check_log(r.run_dir, "train", &top, &train) == 15 && top == 12 && train == 12);
    CHECK(check_log(r.run_dir, "eval", NULL, &eval) == 15 && eval == 3);
    check_train_members(r.run_dir);
    snprintf(path, sizeof path, "%s/report.html", r.run_dir);
    char *html = slurp(path);
    CHECK(html);
    if (html) {
        static const char *const series[] = {"train loss", "learning rate", "gradient norm", "tok/s", "dev WER", "dev PER"};
        static const int points[] = {12, 12, 12, 12, 3, 3};
        for (int i = 0; i < 6; i++)
            CHECK_MSG(report_points(html, series[i]) == points[i], "%s: %d points, expected %d", series[i],
                      report_points(html, series[i]), points[i]);
        /* the loss curve is one path through the 12 points */
        const char *chart = strstr(html, "<h2>training loss");
        const char *d = chart ? strstr(chart, "<path d=\"") : NULL;
        int moves = 0, lines = 0;
        for (const char *p = d ? d + 9 : ""; *p && *p != '"'; p++) moves += *p == 'M', lines += *p == 'L';
        CHECK_MSG(moves == 1 && lines == 11, "loss path: M %d, L %d", moves, lines);
        CHECK_MSG(!strstr(html, "http-equiv") && strstr(html, "finished: 12 steps"), "final report: %s", html);
    }
    free(html);
    snprintf(cmd, sizeof cmd, "%s train %s --set train.steps=12 --set train.eval_every=4 --set train.log_every=5 --set out.dir=%s/five",
             QKV_CLI_PATH, r.conf, r.dir);
    CHECK_MSG(cli_exec(cmd, out, sizeof out) == 0, "train: %s", out);
    char five[600];
    snprintf(five, sizeof five, "%s/five", r.dir);
    char *log = log_without_timing(five);
    CHECK(log && check_log(five, "train", NULL, &train) == 8 && train == 5);
    for (int i = 0, steps[5] = {4, 5, 8, 10, 12}; log && i < 5; i++) {
        char head[64];
        snprintf(head, sizeof head, "{\"type\":\"train\",\"step\":%d,", steps[i]);
        CHECK_MSG(strstr(log, head), "no train line at step %d: %s", steps[i], log);
    }
    free(log);
    cli_run_remove(&r);
}
