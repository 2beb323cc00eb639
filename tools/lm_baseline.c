/*
 * lm_baseline.c: `qkv data baseline lm`: the reference figure of the language-model task, an
 * interpolated Kneser-Ney n-gram model (qkv_ngram, recipes/ngram_lm.c) over characters (or
 * words), its order chosen on the dev file:
 *
 *   qkv data baseline lm [--data DIR] [--max-order N] [--unit char|word]
 *       DIR/brown/brown.{train,dev,test}.txt (DIR default data)
 *   qkv data baseline lm TRAIN DEV [EVAL...] [--max-order N] [--unit char|word]
 *
 * For each order 1 .. N (default 8) it trains on TRAIN and prints the dev cross-entropy; the
 * order with the lowest one is then scored on each EVAL file (brown: test). Bits per character
 * count the line ends as characters, as `qkv eval` does for task = lm (lm_text.h), so the two
 * figures compare directly.
 */
#include "cli_args.h"
#include "commands.h"
#include "qkv/qkv.h"
#include "qkv/qkv_data.h"
#include "recipes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: qkv data baseline lm [--data DIR] [--max-order N] [--unit char|word]\n"
            "       qkv data baseline lm TRAIN DEV [EVAL...] [--max-order N] [--unit char|word]\n\n"
            "Interpolated Kneser-Ney n-gram language model of each order 1 .. N (default 8) "
            "trained on\n"
            "TRAIN (one text per line; symbols: characters, or words with --unit word), scored on "
            "DEV; the\n"
            "best order is scored on each EVAL file. Without files: "
            "DIR/brown/brown.{train,dev,test}.txt\n"
            "(DIR default data; `qkv data prepare brown` writes them). Bits per character count "
            "each line\n"
            "end as a character, as `qkv eval` on an lm run does.\n");
}

static int fail(void) {
    fprintf(stderr, "qkv data baseline lm: %s\n", qkv_last_error());
    return 1;
}

/* Score c with an order-n model of train: *bits per event, *events. */
static qkv_status score(const qkv_corpus *train, int n, const qkv_corpus *c, double *bits,
                        int64_t *events, int64_t *ngrams) {
    qkv_ngram *m = NULL;
    double nats = 0;
    qkv_status st = qkv_ngram_train(train, n, &m);
    if (!st) st = qkv_ngram_score(m, c, &nats, events);
    if (!st) *bits = nats / (double)*events / log(2), *ngrams = qkv_ngram_count(m);
    qkv_ngram_free(m);
    return st;
}

int qkv_data_baseline_lm(int argc, char **argv) {
    const char *data = "data", *files[64];
    int n_files = 0, max_order = 8;
    bool words = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool has = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--data") && has) {
            data = argv[++i];
        } else if (!strcmp(a, "--max-order")) {
            if (!cli_int_option("qkv data baseline lm", argc, argv, &i, 1, 64, &max_order)) return 2;
        } else if (!strcmp(a, "--unit") && has) {
            const char *u = argv[++i];
            if (strcmp(u, "char") && strcmp(u, "word")) {
                fprintf(stderr, "qkv data baseline lm: --unit is char or word, not '%s'\n", u);
                return 2;
            }
            words = !strcmp(u, "word");
        } else if (a[0] == '-' || n_files == 64) {
            fprintf(stderr, "qkv data baseline lm: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        } else {
            files[n_files++] = a;
        }
    }
    if (n_files == 1) {
        fprintf(
            stderr,
            "qkv data baseline lm: give TRAIN and DEV (and EVAL files), or no file for Brown\n");
        usage(stderr);
        return 2;
    }
    char paths[3][1024];
    if (n_files == 0) {
        static const char *const split[3] = {"train", "dev", "test"};
        for (int k = 0; k < 3; k++) {
            snprintf(paths[k], sizeof paths[k], "%s/brown/brown.%s.txt", data, split[k]);
            files[n_files++] = paths[k];
        }
    }
    qkv_corpus *c[64] = {NULL};
    const qkv_read_opts ro = {.text_words = words};
    int rc = 0;
    for (int f = 0; f < n_files && !rc; f++)
        if (qkv_corpus_read(QKV_CORPUS_TEXT, files[f], &ro, &c[f])) rc = fail();
    const char *unit = words ? "word" : "char";
    int best = 0;
    double best_bits = INFINITY;
    if (!rc)
        printf("interpolated Kneser-Ney %s n-grams: %s (%lld lines) -> %s (%lld lines)\n", unit,
               files[0], (long long)qkv_corpus_size(c[0]), files[1],
               (long long)qkv_corpus_size(c[1]));
    for (int n = 1; n <= max_order && !rc; n++) {
        double bits = 0;
        int64_t events = 0, ngrams = 0;
        const clock_t t0 = clock();
        if (score(c[0], n, c[1], &bits, &events, &ngrams)) {
            rc = fail();
            break;
        }
        printf("  order %2d: dev %.4f bits/%s (%lld events), %lld n-grams, %.1f s\n", n, bits, unit,
               (long long)events, (long long)ngrams, (double)(clock() - t0) / CLOCKS_PER_SEC);
        fflush(stdout);
        if (bits < best_bits) best_bits = bits, best = n;
    }
    if (!rc) printf("best order on dev: %d (%.4f bits/%s)\n", best, best_bits, unit);
    for (int f = 2; f < n_files && !rc; f++) {
        double bits = 0;
        int64_t events = 0, ngrams = 0;
        if (score(c[0], best, c[f], &bits, &events, &ngrams))
            rc = fail();
        else
            printf("  %s: %.4f bits/%s, perplexity %.4f (%lld events, order %d)\n", files[f], bits,
                   unit, exp2(bits), (long long)events, best);
    }
    for (int f = 0; f < n_files; f++)
        qkv_corpus_free(c[f]);
    return rc;
}
