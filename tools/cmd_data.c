/*
 * cmd_data.c: `qkv data`: the data sets of docs/data.md.
 *
 *   qkv data prepare [g2p|brown|digits|spam|bible|all]... [--cache DIR] [--out DIR]
 *                    [--max-tokens N]
 *       Convert the sources fetched by scripts/fetch_data.sh (DIR data/cache) into the split
 *       files (DIR data: data/g2p, data/brown, data/digits, data/spam, data/bible) and print
 *       their counts. `all` (the default) is the first four: the Bible needs Debian's diatheke
 *       (scripts/setup.sh --bible) and is prepared only when named.
 *   qkv data baseline spam [--data DIR] [--alpha A]
 *   qkv data baseline TRAIN EVAL... [--alpha A] [--positive LABEL]
 *   qkv data baseline lm ...   (lm_baseline.c: the n-gram reference of task = lm)
 *   qkv data baseline mt-dict ...   (mt_dict_baseline.c: word-for-word English -> Spanish with
 *                                    the FreeDict dictionary, the floor of translation)
 *       Train a multinomial naive Bayes on a labeled file and print its accuracy (and precision,
 *       recall, F1 of the positive label) on each evaluation file: the reference figure of a
 *       classification task. `spam` means data/spam/spam.{train,dev,test}.tsv, positive spam.
 *   qkv data check pairs|tagged|labeled FILE...
 *       Read split files with the library's validating readers and print examples, symbols,
 *       distinct symbols and the longest example per field.
 *
 * Exit status: 0 on success, 1 when a source or file is missing or malformed, 2 for usage errors.
 */
#include "cli_args.h"
#include "commands.h"
#include "qkv/qkv.h"
#include "qkv/qkv_data.h"
#include "recipes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: qkv data prepare [g2p|brown|digits|spam|bible|all]... [--cache DIR]\n"
            "                        [--out DIR] [--max-tokens N]\n"
            "       qkv data baseline spam [--data DIR] [--alpha A]\n"
            "       qkv data baseline TRAIN EVAL... [--alpha A] [--positive LABEL]\n"
            "       qkv data baseline lm [TRAIN DEV EVAL...] (qkv data baseline lm --help)\n"
            "       qkv data baseline mt-dict [--dict DIR] [--field N] [FILE...]\n"
            "                                 (qkv data baseline mt-dict --help)\n"
            "       qkv data check pairs|tagged|labeled FILE...\n\n"
            "prepare: convert the sources that scripts/fetch_data.sh put in DIR (default\n"
            "  data/cache) into the train/dev/test files of docs/data.md under DIR (default\n"
            "  data): g2p/cmudict[.nostress].{train,dev,test}.tsv, brown/brown.{split}.tsv,\n"
            "  .ids and .txt, digits/digits.{split}.tsv, spam/spam.{split}.tsv and .ids (the first N\n"
            "  tokens of each message, --max-tokens, default %d). Splits follow\n"
            "  fnv1a32(key) %% 100. bible: DIR/bible/{kjv,sparv}.txt (diatheke's exports of the\n"
            "  King James Version and the Reina-Valera 1909) -> bible/bible.en-es.{split}.tsv,\n"
            "  bible.es-en.{split}.tsv and bible.{split}.ref, split by book (dev: Mark,\n"
            "  1 Corinthians; test: John, Romans, Hebrews). 'all', the default, is g2p, brown,\n"
            "  digits and spam: the Bible is prepared only when named (its fetch needs\n"
            "  diatheke: scripts/setup.sh --bible).\n"
            "baseline: multinomial naive Bayes (bag of words, Laplace smoothing alpha, default\n"
            "  1) trained on the labeled file TRAIN, scored on each EVAL file: accuracy, and\n"
            "  precision / recall / F1 of the positive label. 'spam' trains on\n"
            "  DIR/spam/spam.train.tsv (DIR default data) and scores dev and test.\n"
            "  'lm': the Kneser-Ney n-gram reference of a language model; 'mt-dict': the\n"
            "  word-for-word English -> Spanish translation with the FreeDict dictionary\n"
            "  (scripts/fetch_data.sh freedict), one output line per input line.\n"
            "check: read files with the validating readers (problems are reported as\n"
            "  FILE:LINE: problem) and print their examples and symbols.\n\n"
            "example:\n"
            "  $ scripts/fetch_data.sh g2p && qkv data prepare g2p\n"
            "  g2p: data/cache/cmudict/package/index.js -> data/g2p\n"
            "    135155 entries, 0 skipped, 22 comments removed\n"
            "                              train      dev     test\n"
            "    words                    110863     2537    12646\n"
            "    ...\n",
            QKV_SPAM_MAX_TOKENS);
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

static int prepare_one(const char *what, const char *cache, const char *out, int64_t max_tokens) {
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
    } else if (!strcmp(what, "spam")) {
        src = join(cache, "spam/package/data");
        dst = join(out, "spam");
        if (!src || !dst) goto oom;
        printf("spam: %s -> %s\n", src, dst);
        st = qkv_prepare_spam(src, dst, max_tokens, &c);
        if (!st) {
            printf("    %lld messages: %lld without any token (skipped), %lld duplicates dropped "
                   "(%lld with the other label), %lld cut to %lld tokens\n",
                   (long long)c.source_entries, (long long)c.skipped, (long long)c.duplicates,
                   (long long)c.dup_conflicts, (long long)c.truncated, (long long)max_tokens);
            printf("    %-24s %8s %8s %8s\n", "", "train", "dev", "test");
            row("messages", c.items);
            int64_t ham[3], spam[3];
            for (int s = 0; s < 3; s++)
                ham[s] = c.per_class[s][0], spam[s] = c.per_class[s][1];
            row("ham", ham);
            row("spam", spam);
            row("tokens", c.units);
            printf("    tokens per message before the cut: 10%% %lld, 25%% %lld, median %lld, "
                   "75%% %lld, 90%% %lld, 99%% %lld, longest %lld\n",
                   (long long)c.length_pct[0], (long long)c.length_pct[1],
                   (long long)c.length_pct[2], (long long)c.length_pct[3],
                   (long long)c.length_pct[4], (long long)c.length_pct[5],
                   (long long)c.max_src_len);
        }
    } else if (!strcmp(what, "bible")) {
        src = join(cache, "bible");
        dst = join(out, "bible");
        if (!src || !dst) goto oom;
        printf("bible: %s/{kjv,sparv}.txt -> %s\n", src, dst);
        st = qkv_prepare_bible(src, dst, &c);
        if (!st) {
            printf("    verses read: %lld English (KJV), %lld Spanish (RV1909)\n",
                   (long long)c.verses[0], (long long)c.verses[1]);
            printf("    dropped: %lld only in the English, %lld only in the Spanish, %lld empty in "
                   "the English, %lld empty in the Spanish, %lld in chapters of another verse "
                   "division, %lld first verses of psalms (titles)\n",
                   (long long)c.only_in[0], (long long)c.only_in[1], (long long)c.empty[0],
                   (long long)c.empty[1], (long long)c.versification, (long long)c.psalm_titles);
            printf("    %-24s %8s %8s %8s\n", "", "train", "dev", "test");
            row("verse pairs", c.items);
            row("English words", c.words[0]);
            row("Spanish words", c.words[1]);
            row("English characters", c.chars[0]);
            row("Spanish characters", c.chars[1]);
            printf("    longest verse: %lld English words, %lld Spanish words\n",
                   (long long)c.max_src_len, (long long)c.max_tgt_len);
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
        cli_print_error("qkv data prepare: ");
        if (st == QKV_ERR_IO)
            fprintf(stderr, "qkv data prepare: run %sscripts/fetch_data.sh %s first?\n",
                    strcmp(what, "bible") ? "" : "scripts/setup.sh --bible && ", what);
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
    int64_t max_tokens = QKV_SPAM_MAX_TOKENS;
    enum { N_SETS = 5, N_ALL = 4 }; /* `all`: the first N_ALL */
    bool want[N_SETS] = {false, false, false, false, false};
    static const char *const names[N_SETS] = {"g2p", "brown", "digits", "spam", "bible"};
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
        } else if (!strcmp(a, "--max-tokens")) {
            int v;
            if (!cli_int_option("qkv data prepare", argc, argv, &i, 1, 1000000, &v)) return 2;
            max_tokens = v;
        } else if (!strcmp(a, "all")) {
            for (int k = 0; k < N_ALL; k++)
                want[k] = true;
            n_want++;
        } else {
            int k = 0;
            while (k < N_SETS && strcmp(a, names[k]))
                k++;
            if (k == N_SETS) {
                fprintf(stderr, "qkv data prepare: unknown data set or option '%s'\n", a);
                usage(stderr);
                return 2;
            }
            want[k] = true;
            n_want++;
        }
    }
    if (!n_want)
        for (int k = 0; k < N_ALL; k++)
            want[k] = true;
    int rc = 0;
    for (int k = 0; k < N_SETS; k++)
        if (want[k] && prepare_one(names[k], cache, out, max_tokens)) rc = 1;
    return rc;
}

static int check_one(qkv_corpus_kind kind, const char *path) {
    qkv_corpus *c = NULL;
    if (qkv_corpus_read(kind, path, NULL, &c)) {
        cli_print_error("qkv data check: ");
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
            cli_print_error("qkv data check: ");
            qkv_corpus_free(c);
            return 1;
        }
        printf("  %-6s %10lld symbols, %7d distinct, longest example %lld\n", field[f],
               (long long)total, (int)(qkv_vocab_size(v) - QKV_VOCAB_RESERVED), (long long)longest);
        qkv_vocab_free(v);
    }
    if (kind == QKV_CORPUS_PAIRS) {
        /* G2P files keep a word's references on consecutive lines; translation pairs (the
         * Bible's repeated verses) may repeat a source anywhere: reported, not an error */
        qkv_groups g;
        if (qkv_corpus_groups(c, &g)) {
            printf("  sources not grouped: %s\n", qkv_last_error());
        } else {
            int64_t multi = 0;
            for (int64_t k = 0; k < g.n; k++)
                multi += g.start[k + 1] - g.start[k] > 1;
            printf("  %lld distinct sources, %lld with more than one target\n", (long long)g.n,
                   (long long)multi);
            qkv_groups_free(&g);
        }
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

/* Train on argv-given files and score; returns the exit status. */
static int baseline_run(const char *train_path, const char *const *eval, int n_eval, double alpha,
                        const char *positive) {
    qkv_corpus *train = NULL;
    qkv_nb *m = NULL;
    if (qkv_corpus_read(QKV_CORPUS_LABELED, train_path, NULL, &train) ||
        qkv_nb_train(train, alpha, &m)) {
        cli_print_error("qkv data baseline: ");
        qkv_corpus_free(train);
        return 1;
    }
    int32_t pos = -1;
    if (positive) {
        pos = qkv_nb_class_index(m, positive, strlen(positive));
        if (pos < 0) {
            fprintf(stderr, "qkv data baseline: --positive %s is not a label of %s\n", positive,
                    train_path);
            qkv_nb_free(m);
            qkv_corpus_free(train);
            return 1;
        }
    }
    printf("multinomial naive Bayes, alpha %g: %s: %lld examples, %d classes (", alpha, train_path,
           (long long)qkv_corpus_size(train), (int)qkv_nb_num_classes(m));
    for (int32_t k = 0; k < qkv_nb_num_classes(m); k++)
        printf("%s%s", k ? " " : "", qkv_nb_class_name(m, k));
    printf("), %d distinct tokens\n", (int)qkv_nb_vocab_size(m));
    qkv_corpus_free(train);
    int rc = 0;
    for (int f = 0; f < n_eval && !rc; f++) {
        qkv_corpus *c = NULL;
        if (qkv_corpus_read(QKV_CORPUS_LABELED, eval[f], NULL, &c)) {
            cli_print_error("qkv data baseline: ");
            rc = 1;
            break;
        }
        qkv_accuracy acc = {0};
        qkv_prf prf = {0};
        for (int64_t i = 0; i < qkv_corpus_size(c) && !rc; i++) {
            int32_t pred;
            size_t len;
            const char *label = qkv_corpus_symbol(c, i, QKV_FIELD_TGT, 0, &len);
            int32_t gold = qkv_nb_class_index(m, label, len); /* -1: a label unseen in training */
            if (qkv_nb_predict(m, c, i, &pred, NULL)) {
                cli_print_error("qkv data baseline: ");
                rc = 1;
            }
            qkv_accuracy_add(&acc, &pred, &gold, 1, -2);
            if (pos >= 0) qkv_prf_add(&prf, &pred, &gold, 1, pos);
        }
        if (!rc) {
            printf("  %s: %lld examples, accuracy %.2f%% (%lld correct)", eval[f],
                   (long long)acc.total, 100.0 * qkv_accuracy_rate(&acc), (long long)acc.correct);
            if (pos >= 0)
                printf("; %s: precision %.2f%% recall %.2f%% F1 %.2f%% (tp %lld, fp %lld, fn %lld)",
                       positive, 100.0 * qkv_precision(&prf), 100.0 * qkv_recall(&prf),
                       100.0 * qkv_f1(&prf), (long long)prf.tp, (long long)prf.fp,
                       (long long)prf.fn);
            printf("\n");
        }
        qkv_corpus_free(c);
    }
    qkv_nb_free(m);
    return rc;
}

static int cmd_baseline(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "lm")) return qkv_data_baseline_lm(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "mt-dict"))
        return qkv_data_baseline_mt_dict(argc - 1, argv + 1);
    const char *data = "data", *positive = NULL;
    double alpha = 1.0;
    const char **files = calloc((size_t)argc, sizeof *files);
    int n_files = 0;
    if (!files) {
        fprintf(stderr, "qkv data baseline: out of memory\n");
        return 1;
    }
    int rc = -1;
    for (int i = 1; i < argc && rc < 0; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            rc = 0;
        } else if (!strcmp(a, "--data") || !strcmp(a, "--positive") || !strcmp(a, "--alpha")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "qkv data baseline: %s needs a value\n", a);
                rc = 2;
            } else if (!strcmp(a, "--data")) {
                data = argv[++i];
            } else if (!strcmp(a, "--positive")) {
                positive = argv[++i];
            } else if (!cli_real_option("qkv data baseline", argc, argv, &i, 0, 1e6, true, &alpha)) {
                rc = 2;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "qkv data baseline: unknown option '%s'\n", a);
            rc = 2;
        } else {
            files[n_files++] = a;
        }
    }
    if (rc < 0 && n_files == 1 && !strcmp(files[0], "spam")) {
        char *p[3] = {join(data, "spam/spam.train.tsv"), join(data, "spam/spam.dev.tsv"),
                      join(data, "spam/spam.test.tsv")};
        if (p[0] && p[1] && p[2]) {
            const char *eval[2] = {p[1], p[2]};
            rc = baseline_run(p[0], eval, 2, alpha, positive ? positive : "spam");
        } else {
            fprintf(stderr, "qkv data baseline: out of memory\n");
            rc = 1;
        }
        for (int k = 0; k < 3; k++)
            free(p[k]);
    } else if (rc < 0 && n_files >= 2) {
        rc = baseline_run(files[0], files + 1, n_files - 1, alpha, positive);
    } else if (rc < 0) {
        fprintf(stderr, "qkv data baseline: give 'spam', or a training file and evaluation "
                        "files\n");
        usage(stderr);
        rc = 2;
    }
    free(files);
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
    if (!strcmp(sub, "baseline")) return cmd_baseline(argc - 1, argv + 1);
    fprintf(stderr, "qkv data: unknown subcommand '%s' (prepare, baseline, check)\n", sub);
    usage(stderr);
    return 2;
}
