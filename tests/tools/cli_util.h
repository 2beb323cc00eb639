/*
 * cli_util.h: helpers of the tests that run the built `qkv` binary (QKV_CLI_PATH) as a user does:
 * run a shell command capturing its output, write and compare files, a temporary run directory,
 * read a number out of the output. Static: each test file gets its own copy.
 */
#ifndef QKV_TESTS_CLI_UTIL_H
#define QKV_TESTS_CLI_UTIL_H

#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef QKV_CLI_PATH
#define QKV_CLI_PATH "build/release/qkv"
#endif

/* Run a shell command, capture stdout + stderr (the end when it is longer than the buffer);
 * return the exit status (-1 when it did not exit normally). */
static inline int run(const char *cmd, char *out, size_t size) {
    char full[4096 + 16]; /* the callers' commands are at most 4096 bytes */
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t n = 0, k;
    char chunk[4096];
    while ((k = fread(chunk, 1, sizeof chunk, p)) > 0) {
        if (n + k > size - 1) { /* keep the last part */
            const size_t drop = n + k - (size - 1) < n ? n + k - (size - 1) : n;
            memmove(out, out + drop, n - drop);
            n -= drop;
            if (k > size - 1 - n) k = size - 1 - n;
        }
        memcpy(out + n, chunk, k);
        n += k;
    }
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static inline void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Whether two files exist and hold the same bytes. */
static inline bool same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* A temporary directory for one run: train.tsv, dev.tsv, run.conf and the run directory run/. */
typedef struct {
    char dir[32], train[64], dev[64], conf[64], run_dir[64];
} tmp_run;

/* Create the directory (name: "/tmp/<prefix>_XXXXXX", prefix at most 8 bytes) and the paths. */
static inline bool tmp_run_init(tmp_run *r, const char *prefix) {
    snprintf(r->dir, sizeof r->dir, "/tmp/%.8s_XXXXXX", prefix);
    if (!mkdtemp(r->dir)) return false;
    snprintf(r->train, sizeof r->train, "%s/train.tsv", r->dir);
    snprintf(r->dev, sizeof r->dev, "%s/dev.tsv", r->dir);
    snprintf(r->conf, sizeof r->conf, "%s/run.conf", r->dir);
    snprintf(r->run_dir, sizeof r->run_dir, "%s/run", r->dir);
    return true;
}

static inline void tmp_run_cleanup(const tmp_run *r) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", r->dir);
    CHECK(system(cmd) == 0);
}

/* The number after `what` in text (NAN when absent). */
static inline double number_after(const char *text, const char *what) {
    const char *p = strstr(text, what);
    return p ? strtod(p + strlen(what), NULL) : NAN;
}

#endif
