/*
 * fuzz_util.h: what the libFuzzer targets of tests/fuzz share (header only: every
 * tests/<area>/fuzz_<name>.c is a target of its own, and the test binaries leave out every
 * "/fuzz_" file).
 *
 *   FZ_REQUIRE(cond)   an invariant: when it fails, the message goes to stderr and the target
 *                      aborts, which libFuzzer reports as a crash and saves the input
 *   fz_path(name)      a file in the process's scratch directory (the same pointer for the same
 *                      name); the directory is made on first use under $TMPDIR (scripts/fuzz.sh
 *                      points it at a tmpfs such as /dev/shm, where the readers' fsyncs cost
 *                      nothing) and removed at exit
 *   fz_write_file      the input (or a part of it) as a file, for the readers that take a path
 *   fz_reader          cuts an input into a few bytes of options and text fields
 */
#ifndef QKV_FUZZ_UTIL_H
#define QKV_FUZZ_UTIL_H

#define _XOPEN_SOURCE 700 /* nftw */

#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qkv/qkv_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FZ_REQUIRE(cond)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);          \
            abort();                                                                              \
        }                                                                                         \
    } while (0)

static char fz_scratch[512];

static int fz_unlink_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* Remove path and everything under it (nothing when it does not exist). */
static inline void fz_rmtree(const char *path) {
    nftw(path, fz_unlink_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void fz_scratch_remove(void) {
    if (fz_scratch[0]) fz_rmtree(fz_scratch);
}

/* The scratch directory of this process (made on first use). */
static inline const char *fz_dir(void) {
    if (!fz_scratch[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(fz_scratch, sizeof fz_scratch, "%s/qkv-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(fz_scratch)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fz_scratch_remove);
    }
    return fz_scratch;
}

/* "<scratch>/<name>": a pointer that stays valid and the same for each name (a small table of
 * the names a target uses). */
static inline const char *fz_path(const char *name) {
    static struct {
        char name[96];
        char path[700];
    } table[128];
    static int used;
    for (int i = 0; i < used; i++)
        if (!strcmp(table[i].name, name)) return table[i].path;
    if (used == 128 || strlen(name) >= sizeof table[0].name) {
        fprintf(stderr, "fuzz: too many or too long scratch names (%s)\n", name);
        abort();
    }
    snprintf(table[used].name, sizeof table[0].name, "%s", name);
    snprintf(table[used].path, sizeof table[0].path, "%s/%s", fz_dir(), name);
    return table[used++].path;
}

static inline void fz_write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

/* The whole file (malloc'd, NUL-terminated), NULL when it cannot be read. */
static inline char *fz_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t n = 0, cap = 4096;
    char *p = malloc(cap);
    size_t got;
    while (p && (got = fread(p + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            char *q = realloc(p, cap *= 2);
            if (!q) free(p);
            p = q;
        }
    }
    fclose(f);
    if (p) p[n] = '\0';
    if (size) *size = n;
    return p;
}

/* The symbols a tokenizer hands out, collected in order for qkv_tokenizer_join (each spelling as the
 * tokenizer gives it: into the text, or into its model). */
typedef struct fz_symbols {
    const char **sym;
    size_t *len;
    int64_t n, cap;
} fz_symbols;

static inline void fz_symbols_push(fz_symbols *s, const char *sym, size_t len) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->sym = realloc(s->sym, sizeof *s->sym * (size_t)s->cap);
        s->len = realloc(s->len, sizeof *s->len * (size_t)s->cap);
        FZ_REQUIRE(s->sym && s->len);
    }
    s->sym[s->n] = sym;
    s->len[s->n++] = len;
}

static inline void fz_symbols_free(fz_symbols *s) {
    free(s->sym);
    free(s->len);
}

/* Cutting an input: bytes of options from the front, then fields up to a separator byte. */
typedef struct fz_reader {
    const uint8_t *p;
    size_t n;
} fz_reader;

static inline uint8_t fz_byte(fz_reader *r) {
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

/* The next field up to (not including) sep, or the rest; *len its length. Never NULL. */
static inline const char *fz_field(fz_reader *r, uint8_t sep, size_t *len) {
    const uint8_t *at = memchr(r->p, sep, r->n);
    const char *s = (const char *)r->p;
    *len = at ? (size_t)(at - r->p) : r->n;
    r->p += *len + (at != NULL);
    r->n -= *len + (at != NULL);
    return s;
}

/* What every vocabulary holds: the reserved symbols at ids 0 .. 3, then non-empty symbols that
 * are found again at their own id. */
static inline void fz_require_vocab_table(const qkv_vocab *v) {
    static const char *const reserved[QKV_VOCAB_RESERVED] = {"<pad>", "<unk>", "<bos>", "<eos>"};
    FZ_REQUIRE(qkv_vocab_size(v) >= QKV_VOCAB_RESERVED);
    for (int32_t k = 0; k < QKV_VOCAB_RESERVED; k++)
        FZ_REQUIRE(!strcmp(qkv_vocab_symbol(v, k), reserved[k]));
    for (int32_t id = 0; id < qkv_vocab_size(v); id++) {
        const char *s = qkv_vocab_symbol(v, id);
        FZ_REQUIRE(s && *s && qkv_vocab_find(v, s, strlen(s)) == id);
    }
}

/* A NUL-terminated malloc'd copy of data[0, len). */
static inline char *fz_strndup(const void *data, size_t len) {
    char *s = malloc(len + 1);
    if (!s) abort();
    memcpy(s, data, len);
    s[len] = '\0';
    return s;
}

#endif
