/*
 * mt_dict_baseline.c: `qkv data baseline mt-dict`: the word-for-word dictionary translation of
 * English text into Spanish (qkv_dict, recipes/dict_baseline.c), the floor of the translation
 * task beside Apertium (scripts/mt_baselines.sh scores both, RESULTS.md):
 *
 *   qkv data baseline mt-dict [--dict DIR] [--field N] [FILE...]
 *       DIR/eng-spa.index and DIR/eng-spa.dict (DIR default data/cache/freedict, written by
 *       scripts/fetch_data.sh freedict); each line of the FILEs (stdin without one), or its Nth
 *       TAB-separated field (--field 1: the English of a pairs file), translated onto one line of
 *       stdout. The words found / read go to stderr.
 */
#include "cli_args.h"
#include "commands.h"
#include "input_lines.h"
#include "qkv/qkv.h"
#include "recipes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "data baseline mt-dict"

static void usage(FILE *f) {
    fprintf(f,
            "usage: qkv data baseline mt-dict [--dict DIR] [--field N] [FILE...]\n\n"
            "Translate English into Spanish word for word with the FreeDict English-Spanish\n"
            "dictionary DIR/eng-spa.index + DIR/eng-spa.dict (dictd's format, the .dict\n"
            "gunzipped; DIR default data/cache/freedict: scripts/fetch_data.sh freedict).\n"
            "Each line of the FILEs (stdin without one), or its Nth TAB-separated field\n"
            "(--field 1: the source of a pairs file), gives one line on stdout: each word\n"
            "replaced by the first translation of its headword (lower-cased; plural, -ed,\n"
            "-ing, -eth, -est endings removed when the word itself is not a headword), the\n"
            "first letter upper case when the word's is; unknown words, blanks and\n"
            "punctuation kept. The count of words found goes to stderr.\n\n"
            "example:\n"
            "  $ echo 'In the beginning was the Word.' | qkv data baseline mt-dict\n"
            "  A el comienzo was el Palabra.\n");
}

typedef struct {
    const qkv_dict *d;
    int field; /* 0: the whole line */
    qkv_dict_counts counts;
    int64_t lines;
} mt_ctx;

static int on_line(void *user, const char *file, int64_t line_no, char *line) {
    mt_ctx *c = user;
    const char *s = line;
    size_t n = strlen(line);
    for (int f = 1; f < c->field; f++) {
        const char *tab = memchr(s, '\t', n);
        if (!tab) {
            fprintf(stderr, "qkv " CMD ": %s:%lld: no field %d (%d TAB-separated field%s)\n", file,
                    (long long)line_no, c->field, f, f == 1 ? "" : "s");
            return 1;
        }
        n -= (size_t)(tab + 1 - s);
        s = tab + 1;
    }
    if (c->field) {
        const char *tab = memchr(s, '\t', n);
        if (tab) n = (size_t)(tab - s);
    }
    char what[1100], *out = NULL;
    size_t len = 0;
    snprintf(what, sizeof what, "%s:%lld", file, (long long)line_no);
    if (qkv_dict_translate(c->d, s, n, what, &out, &len, &c->counts)) {
        cli_print_error("qkv " CMD ": ");
        return 1;
    }
    fwrite(out, 1, len, stdout);
    putchar('\n');
    free(out);
    c->lines++;
    return 0;
}

int qkv_data_baseline_mt_dict(int argc, char **argv) {
    const char *dir = "data/cache/freedict";
    const char **files = calloc((size_t)argc, sizeof *files);
    int n_files = 0, field = 0;
    if (!files) {
        fprintf(stderr, "qkv " CMD ": out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            free(files);
            return 0;
        } else if (!strcmp(a, "--dict")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "qkv " CMD ": --dict needs a directory\n");
                free(files);
                return 2;
            }
            dir = argv[++i];
        } else if (!strcmp(a, "--field")) {
            if (!cli_int_option("qkv " CMD, argc, argv, &i, 1, 1000, &field)) {
                free(files);
                return 2;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "qkv " CMD ": unknown option '%s'\n", a);
            usage(stderr);
            free(files);
            return 2;
        } else {
            files[n_files++] = a;
        }
    }
    size_t nd = strlen(dir) + 32;
    char *index = malloc(nd), *data = malloc(nd);
    qkv_dict *d = NULL;
    int rc = 0;
    if (!index || !data) {
        fprintf(stderr, "qkv " CMD ": out of memory\n");
        rc = 1;
    } else {
        snprintf(index, nd, "%s/eng-spa.index", dir);
        snprintf(data, nd, "%s/eng-spa.dict", dir);
        qkv_status st = qkv_dict_load(index, data, &d);
        if (st) {
            cli_print_error("qkv " CMD ": ");
            if (st == QKV_ERR_IO)
                fprintf(stderr, "qkv " CMD ": run scripts/fetch_data.sh freedict first, or give "
                                "--dict DIR\n");
            rc = 1;
        }
    }
    if (!rc) {
        mt_ctx c = {.d = d, .field = field};
        rc = input_for_each_line(CMD, files, n_files, on_line, &c);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "qkv " CMD ": cannot write the translation to stdout\n");
            rc = 1;
        }
        if (!rc)
            fprintf(stderr,
                    "mt-dict: %lld lines, %lld words, %lld found in the dictionary (%.1f%%), "
                    "%lld headwords\n",
                    (long long)c.lines, (long long)c.counts.words, (long long)c.counts.translated,
                    c.counts.words ? 100.0 * (double)c.counts.translated / (double)c.counts.words
                                   : 0.0,
                    (long long)qkv_dict_size(d));
    }
    qkv_dict_free(d);
    free(index);
    free(data);
    free(files);
    return rc;
}
