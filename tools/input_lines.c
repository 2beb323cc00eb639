/* input_lines.c: see input_lines.h. */
#include "input_lines.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char *p;
    size_t n, cap;
} line_buf;

/* The next line of in into b (NUL-terminated, its end of line removed). 1: a line, 0: the end,
 * -1: an error printed. */
static int read_line(const char *cmd, const char *name, int64_t line_no, FILE *in, line_buf *b) {
    b->n = 0;
    int c = EOF;
    while ((c = getc(in)) != EOF && c != '\n') {
        if (c == '\0') {
            fprintf(stderr, "qkv %s: %s:%lld: a NUL byte at column %zu: not a text file\n", cmd, name,
                    (long long)line_no, b->n + 1);
            return -1;
        }
        if (b->n + 1 > b->cap) {
            if (b->cap >= INPUT_LINE_MAX) {
                fprintf(stderr, "qkv %s: %s:%lld: line longer than %d bytes\n", cmd, name, (long long)line_no,
                        INPUT_LINE_MAX);
                return -1;
            }
            size_t cap = b->cap ? 2 * b->cap : 256;
            char *p = realloc(b->p, cap + 1);
            if (!p) {
                fprintf(stderr, "qkv %s: %s:%lld: out of memory\n", cmd, name, (long long)line_no);
                return -1;
            }
            b->p = p, b->cap = cap;
        }
        b->p[b->n++] = (char)c;
    }
    if (ferror(in)) {
        fprintf(stderr, "qkv %s: %s: read failed: %s\n", cmd, name, strerror(errno));
        return -1;
    }
    if (c == EOF && b->n == 0) return 0;
    if (!b->p && !(b->p = malloc(1))) {
        fprintf(stderr, "qkv %s: out of memory\n", cmd);
        return -1;
    }
    if (b->n && b->p[b->n - 1] == '\r') b->n--;
    b->p[b->n] = '\0';
    return 1;
}

/* files[f] opened for reading, or NULL with the problem printed. */
static FILE *open_input(const char *cmd, const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "qkv %s: %s: cannot open: %s\n", cmd, path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "qkv %s: %s: is a directory, not a file of input lines\n", cmd, path);
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "r");
    if (!f) {
        fprintf(stderr, "qkv %s: %s: cannot open: %s\n", cmd, path, strerror(errno));
        close(fd);
    }
    return f;
}

int input_for_each_line(const char *cmd, const char *const *files, int n_files, input_line_fn fn,
                        void *user) {
    line_buf b = {0};
    int rc = 0;
    for (int f = 0; f < (n_files ? n_files : 1) && rc == 0; f++) {
        const char *name = n_files ? files[f] : "<stdin>";
        FILE *in = n_files ? open_input(cmd, files[f]) : stdin;
        if (!in) {
            rc = 1;
            break;
        }
        for (int64_t line_no = 1; rc == 0; line_no++) {
            const int got = read_line(cmd, name, line_no, in, &b);
            if (got <= 0) {
                rc = got < 0;
                break;
            }
            rc = fn(user, name, line_no, b.p);
        }
        if (n_files) fclose(in);
    }
    free(b.p);
    return rc;
}

/* qkv_tokenizer_split's emit around the caller's: it tells the caller's errors from the
 * tokenizer's. */
typedef struct located_sink {
    qkv_symbol_fn emit;
    void *ctx;
    bool failed;
} located_sink;

static qkv_status located_symbol(void *ctx, size_t off, size_t len, const char *sym, size_t sym_len) {
    located_sink *k = ctx;
    const qkv_status st = k->emit(k->ctx, off, len, sym, sym_len);
    k->failed = st != QKV_OK;
    return st;
}

qkv_status input_line_split(const qkv_tokenizer *tok, const char *file, int64_t line_no, const char *text, size_t len,
                            const char *what, qkv_symbol_fn emit, void *ctx) {
    located_sink k = {emit, ctx, false};
    qkv_status st = qkv_tokenizer_split(tok, text, len, what, located_symbol, &k);
    if (st && !k.failed) st = qkv_set_error(st, "%s:%lld: %s", file, (long long)line_no, qkv_last_error());
    return st;
}
