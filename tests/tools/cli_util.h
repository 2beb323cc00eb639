/*
 * cli_util.h: helpers of the tests that run the built `qkv` binary (QKV_CLI_PATH) as a user does:
 * run a shell command capturing its output, write and compare files, read a number out of the
 * output. Static: each test file gets its own copy.
 */
#ifndef QKV_TESTS_CLI_UTIL_H
#define QKV_TESTS_CLI_UTIL_H

#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <sys/wait.h>

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

/* The number after `what` in text (NAN when absent). */
static inline double number_after(const char *text, const char *what) {
    const char *p = strstr(text, what);
    return p ? strtod(p + strlen(what), NULL) : NAN;
}

#endif
