/*
 * cmd_data.c: `qkv data`: the data sets of docs/data.md.
 *
 *   qkv data prepare [g2p|brown|digits|all]... [--cache DIR] [--out DIR]
 *       Convert the sources fetched by scripts/fetch_data.sh (DIR data/cache) into the split
 *       files (DIR data: data/g2p, data/brown, data/digits) and print their counts.
 *   qkv data check pairs|tagged|labeled FILE...
 *       Read split files with the library's validating readers and print examples, symbols,
 *       distinct symbols and the longest example per field.
 *
 * Exit status: 0 on success, 1 when a source or file is missing or malformed, 2 for usage errors.
 */
#include "commands.h"
#include "qkv/qkv.h"
#include "qkv/qkv_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: qkv data prepare [g2p|brown|digits|all]... [--cache DIR] [--out DIR]\n"
               "       qkv data check pairs|tagged|labeled FILE...\n\n"
               "prepare: convert the sources that scripts/fetch_data.sh put in DIR (default\n"
               "  data/cache) into the train/dev/test files of docs/data.md under DIR (default\n"
               "  data): g2p/cmudict[.nostress].{train,dev,test}.tsv, brown/brown.{split}.tsv and\n"
               "  .ids, digits/digits.{split}.tsv. Splits follow fnv1a32(key) %% 100.\n"
               "check: read files with the validating readers (problems are reported as\n"
               "  FILE:LINE: problem) and print their examples and symbols.\n\n"
               "example:\n"
               "  $ scripts/fetch_data.sh g2p && qkv data prepare g2p\n"
               "  g2p: data/cache/cmudict/package/index.js -> data/g2p\n"
               "    135155 entries, 0 skipped, 22 comments removed\n"
               "                              train      dev     test\n"
               "    words                    110863     2537    12646\n"
               "    ...\n");
}

/* The library's message without its " [file.c:line]" suffix. */
static void print_error(const char *prefix) {
    const char *msg = qkv_last_error();
    size_t n = strlen(msg);
    const char *at = strstr(msg, " [");
    for (const char *q = at; q; q = strstr(q + 2, " ["))
        at = q;
    if (at && n && msg[n - 1] == ']') n = (size_t)(at - msg);
    fprintf(stderr, "%s%.*s\n", prefix, (int)n, msg);
}

static void row(const char *what, const int64_t v[3]) {
    printf("    %-24s %8lld %8lld %8lld\n", what, (long long)v[0], (long long)v[1],
           (long long)v[2]);
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

static int prepare_one(const char *what, const char *cache, const char *out) {
    qkv_prepare_counts c;
    qkv_status st;
    char *src = NULL, *dst = NULL;
    if (!strcmp(what, "g2p")) {
        src = join(cache, "cmudict/package/index.js");
        dst = join(out, "g2p");
        if (!src || !dst) goto oom;
        printf("g2p: %s -> %s\n", src, dst);
        st = qkv_prepare_g2p(src, dst, &c);
        if (!st) {
            printf("    %lld entries, %lld skipped, %lld comments removed\n",
                   (long long)c.source_entries, (long long)c.skipped, (long long)c.comments);
            printf("    %-24s %8s %8s %8s\n", "", "train", "dev", "test");
            row("words", c.items);
            row("pronunciations", c.units);
            row("pronunciations, no stress", c.units_ns);
            row("words >1 ref, no stress", c.multi_ns);
            printf("    %lld graphemes, %lld phones (%lld without stress); longest word %lld, "
                   "longest pronunciation %lld\n",
                   (long long)c.n_src_symbols, (long long)c.n_tgt_symbols,
                   (long long)c.n_tgt_symbols_ns, (long long)c.max_src_len,
                   (long long)c.max_tgt_len);
        }
    } else if (!strcmp(what, "brown")) {
        src = join(cache, "brown/package");
        dst = join(out, "brown");
        if (!src || !dst) goto oom;
        printf("brown: %s -> %s (not for redistribution: docs/data.md)\n", src, dst);
        st = qkv_prepare_brown(src, dst, &c);
        if (!st) {
            printf("    %-24s %8s %8s %8s\n", "", "train", "dev", "test");
            row("sentences", c.items);
            row("tokens", c.units);
            printf("    %lld files, %lld distinct words, %lld full tags, %lld universal tags, "
                   "longest sentence %lld\n",
                   (long long)c.source_entries, (long long)c.n_src_symbols,
                   (long long)c.n_tgt_symbols, (long long)c.n_tgt_symbols_ns,
                   (long long)c.max_src_len);
        }
    } else {
        src = join(cache, "digits.csv");
        dst = join(out, "digits");
        if (!src || !dst) goto oom;
        printf("digits: %s -> %s\n", src, dst);
        st = qkv_prepare_digits(src, dst, &c);
        if (!st) {
            printf("    %-24s %8s %8s %8s\n", "", "train", "dev", "test");
            row("images", c.items);
            for (int s = 0; s < 3; s++) {
                printf("    %-5s per class:", qkv_split_name((qkv_split)s));
                for (int k = 0; k < 10; k++)
                    printf(" %lld", (long long)c.per_class[s][k]);
                printf("\n");
            }
        }
    }
    free(src);
    free(dst);
    if (st) {
        print_error("qkv data prepare: ");
        if (st == QKV_ERR_IO)
            fprintf(stderr, "qkv data prepare: run scripts/fetch_data.sh %s first?\n", what);
        return 1;
    }
    return 0;
oom:
    free(src);
    free(dst);
    fprintf(stderr, "qkv data prepare: out of memory\n");
    return 1;
}

static int cmd_prepare(int argc, char **argv) {
    const char *cache = "data/cache", *out = "data";
    bool want[3] = {false, false, false};
    static const char *const names[3] = {"g2p", "brown", "digits"};
    int n_want = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--cache") || !strcmp(a, "--out")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "qkv data prepare: %s needs a directory\n", a);
                return 2;
            }
            if (!strcmp(a, "--cache"))
                cache = argv[++i];
            else
                out = argv[++i];
        } else if (!strcmp(a, "all")) {
            want[0] = want[1] = want[2] = true;
            n_want++;
        } else {
            int k = 0;
            while (k < 3 && strcmp(a, names[k]))
                k++;
            if (k == 3) {
                fprintf(stderr, "qkv data prepare: unknown data set or option '%s'\n", a);
                usage(stderr);
                return 2;
            }
            want[k] = true;
            n_want++;
        }
    }
    if (!n_want) want[0] = want[1] = want[2] = true;
    int rc = 0;
    for (int k = 0; k < 3; k++)
        if (want[k] && prepare_one(names[k], cache, out)) rc = 1;
    return rc;
}

static int check_one(qkv_corpus_kind kind, const char *path) {
    qkv_corpus *c = NULL;
    if (qkv_corpus_read(kind, path, NULL, &c)) {
        print_error("qkv data check: ");
        return 1;
    }
    printf("%s: %lld examples\n", path, (long long)qkv_corpus_size(c));
    static const char *const field[2] = {"source", "target"};
    for (int f = 0; f < 2; f++) {
        int64_t total = 0, longest = 0;
        for (int64_t i = 0; i < qkv_corpus_size(c); i++) {
            int64_t n = qkv_corpus_length(c, i, f);
            total += n;
            if (n > longest) longest = n;
        }
        qkv_vocab *v = NULL;
        if (qkv_vocab_build(c, f, 1, true, &v)) {
            print_error("qkv data check: ");
            qkv_corpus_free(c);
            return 1;
        }
        printf("  %-6s %10lld symbols, %7d distinct, longest example %lld\n", field[f],
               (long long)total, (int)(qkv_vocab_size(v) - QKV_VOCAB_RESERVED), (long long)longest);
        qkv_vocab_free(v);
    }
    if (kind == QKV_CORPUS_PAIRS) {
        qkv_groups g;
        if (qkv_corpus_groups(c, &g)) {
            print_error("qkv data check: ");
            qkv_corpus_free(c);
            return 1;
        }
        int64_t multi = 0;
        for (int64_t k = 0; k < g.n; k++)
            multi += g.start[k + 1] - g.start[k] > 1;
        printf("  %lld distinct sources, %lld with more than one target\n", (long long)g.n,
               (long long)multi);
        qkv_groups_free(&g);
    }
    qkv_corpus_free(c);
    return 0;
}

static int cmd_check(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 3) {
        usage(stderr);
        return 2;
    }
    qkv_corpus_kind kind;
    if (!strcmp(argv[1], "pairs"))
        kind = QKV_CORPUS_PAIRS;
    else if (!strcmp(argv[1], "tagged"))
        kind = QKV_CORPUS_TAGGED;
    else if (!strcmp(argv[1], "labeled"))
        kind = QKV_CORPUS_LABELED;
    else {
        fprintf(stderr, "qkv data check: unknown kind '%s' (pairs, tagged or labeled)\n", argv[1]);
        return 2;
    }
    int rc = 0;
    for (int i = 2; i < argc; i++)
        if (check_one(kind, argv[i])) rc = 1;
    return rc;
}

int qkv_cmd_data(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(sub, "prepare")) return cmd_prepare(argc - 1, argv + 1);
    if (!strcmp(sub, "check")) return cmd_check(argc - 1, argv + 1);
    fprintf(stderr, "qkv data: unknown subcommand '%s' (prepare, check)\n", sub);
    usage(stderr);
    return 2;
}
