/* cli_util.c: see cli_util.h. */
#include "cli_util.h"

#include "harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

int cli_execf(char *out, size_t size, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof cmd) {
        snprintf(out, size, "cli_execf: the command is longer than %zu bytes", sizeof cmd);
        return -1;
    }
    return cli_exec(cmd, out, size);
}

int cli_exec(const char *cmd, char *out, size_t size) {
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    const size_t head = (size - 1) / 2;
    size_t n = fread(out, 1, size - 1, p);
    char chunk[4096];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, p)) > 0) { /* keep the tail after the head */
        const size_t tail = size - 1 - head;
        const size_t keep = k >= tail ? 0 : tail - k;
        memmove(out + head, out + (size - 1) - keep, keep);
        memcpy(out + head + keep, chunk + (k > tail ? k - tail : 0), k > tail ? tail : k);
        n = size - 1;
    }
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void cli_write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

bool cli_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

bool cli_same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        const int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

double cli_number_after(const char *text, const char *what) {
    const char *p = strstr(text, what);
    return p ? strtod(p + strlen(what), NULL) : NAN;
}

void cli_write_pairs(const char *path, int first, int n) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    const char *words[] = {"ab",   "abc",  "bad",  "cab",  "dab",  "ace",
                           "bead", "deed", "cede", "face", "fade", "bee"};
    for (int i = first; i < first + n; i++) {
        const char *w = words[i % 12];
        fprintf(f, "%s\t", w);
        for (const char *c = w; *c; c++)
            fprintf(f, "%s%c", c == w ? "" : " ", *c - 32);
        fprintf(f, "\n");
    }
    fclose(f);
}

bool cli_run_new(cli_run *r) {
    snprintf(r->dir, sizeof r->dir, "/tmp/qkv_cli_XXXXXX");
    if (!mkdtemp(r->dir)) return false;
    snprintf(r->train, sizeof r->train, "%s/train.tsv", r->dir);
    snprintf(r->dev, sizeof r->dev, "%s/dev.tsv", r->dir);
    snprintf(r->conf, sizeof r->conf, "%s/run.conf", r->dir);
    snprintf(r->run_dir, sizeof r->run_dir, "%s/run", r->dir);
    return true;
}

bool cli_run_seq2seq(cli_run *r, const char *dev_text, const char *extra) {
    if (!cli_run_new(r)) return false;
    cli_write_pairs(r->train, 0, 12);
    if (dev_text) cli_write_file(r->dev, dev_text);
    char text[2048];
    snprintf(text, sizeof text,
             "data.train = %s\ndata.dev = %s\nout.dir = %s\neval.strategy = greedy\n%s", r->train,
             dev_text ? r->dev : r->train, r->run_dir, extra);
    cli_write_file(r->conf, text);
    return true;
}

void cli_run_remove(const cli_run *r) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", r->dir);
    CHECK(system(cmd) == 0);
}

bool cli_train_straight_and_resumed(const cli_run *r, int half_steps, char *out, size_t size) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s train %s --set out.dir=%s/straight", QKV_CLI_PATH, r->conf,
             r->dir);
    if (cli_exec(cmd, out, size) != 0) return false;
    snprintf(cmd, sizeof cmd, "%s train %s --set train.steps=%d", QKV_CLI_PATH, r->conf,
             half_steps);
    if (cli_exec(cmd, out, size) != 0) return false;
    snprintf(cmd, sizeof cmd, "%s train %s --resume", QKV_CLI_PATH, r->conf);
    return cli_exec(cmd, out, size) == 0;
}

const char *cli_first_different(const char *a, const char *b, const char *const *files, int n) {
    for (int i = 0; i < n; i++) {
        char pa[512], pb[512];
        snprintf(pa, sizeof pa, "%s/%s", a, files[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, files[i]);
        if (!cli_same_file(pa, pb)) return files[i];
    }
    return NULL;
}
