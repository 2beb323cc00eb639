/* data_testutil.c: see data_testutil.h. */
#include "data_testutil.h"
#include "qkv/qkv_tokenizer.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *dt_tmpdir(void) {
    char *d = malloc(64);
    snprintf(d, 64, "/tmp/qkv_test_data_XXXXXX");
    if (!mkdtemp(d)) {
        fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
        exit(2);
    }
    return d;
}

static void rmtree(const char *path) {
    struct stat s;
    if (lstat(path, &s) != 0) return;
    if (S_ISDIR(s.st_mode)) {
        DIR *dir = opendir(path);
        if (dir) {
            struct dirent *e;
            while ((e = readdir(dir))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char *p = dt_join(path, e->d_name);
                rmtree(p);
                free(p);
            }
            closedir(dir);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

void dt_rmtree(char *path) {
    if (!path) return;
    rmtree(path);
    free(path);
}

char *dt_join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

bool dt_write(const char *dir, const char *name, const char *data, long len) {
    char *p = dt_join(dir, name);
    FILE *f = fopen(p, "wb");
    free(p);
    if (!f) return false;
    size_t n = len < 0 ? strlen(data) : (size_t)len;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

char *dt_read(const char *dir, const char *name, size_t *len) {
    char *p = name ? dt_join(dir, name) : strdup(dir);
    FILE *f = fopen(p, "rb");
    free(p);
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

void dt_check_file(const char *file, int line, const char *dir, const char *name,
                   const char *want) {
    size_t n;
    char *got = dt_read(dir, name, &n);
    if (!got) {
        qkv_test_fail(file, line, "cannot read %s/%s", dir, name);
        return;
    }
    size_t m = strlen(want), i = 0;
    while (i < n && i < m && got[i] == want[i])
        i++;
    if (i < n || i < m)
        qkv_test_fail(
            file, line,
            "%s: differs at byte %zu (got %zu bytes, want %zu)\n--- got:\n%s--- want:\n%s", name, i,
            n, m, got, want);
    free(got);
}

const char *dt_repo_root(void) {
    static char root[4096];
    if (!root[0]) snprintf(root, sizeof root, "%s/../..", qkv_test_data_dir());
    return root;
}

int dt_count_tmp(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

qkv_status dt_read_word_pairs(const char *dir, const char *name, qkv_corpus **out) {
    char *p = dt_join(dir, name);
    const qkv_tokenizer *words = qkv_tokenizer_shared(QKV_TOKENIZER_WORDS);
    qkv_read_opts o = {.src_tokenizer = words, .tgt_tokenizer = words};
    *out = NULL;
    qkv_status st = qkv_corpus_read(QKV_CORPUS_PAIRS, p, &o, out);
    free(p);
    return st;
}
