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
