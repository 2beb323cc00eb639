/*
 * fuzz_prepare.c: libFuzzer target for the `qkv data prepare` converters, each on a source
 * directory or file made from the input, writing into a scratch directory:
 *   qkv_prepare_g2p     CMUdict's index.js ("export const dictionary = {...}", recipes/prepare_g2p.c)
 *   qkv_prepare_brown   the Brown corpus: cats.txt and tagged files (recipes/prepare_brown.c)
 *   qkv_prepare_digits  the digits CSV (recipes/prepare_digits.c)
 *   qkv_prepare_spam    the SpamAssassin folders of messages (recipes/prepare_spam.c; the
 *                       message readers themselves have their own target, fuzz_mail)
 *
 * Input: one byte picking the converter (bits 0-1) and, for spam, the tokens kept (bits 2-7, + 1),
 * then its source: for g2p and digits the file; for Brown cats.txt and up to three tagged files
 * (ca00, cb37, ce99: the other 497 of the 500 files the converter requires stay empty),
 * NUL-separated; for spam up to five messages, NUL-separated, one in each folder (a folder left
 * without one gets a fixed short message).
 *
 * Invariants: the converter succeeds or fails with a message; after success every split file it
 * wrote reads back with the corpus reader of its format and holds what the counts say (G2P:
 * pronunciations and words; Brown: sentences and tokens, and the same sentences in the .txt;
 * digits: images with decimal pixels and labels; spam: messages and tokens written).
 */
#include "fuzz_util.h"

#include "qkv/qkv_data.h"
#include "recipes.h"

#define N_BROWN 500

static const char *const brown_fuzzed[3] = {"ca00", "cb37", "ce99"};
static const char *const spam_folders[5] = {"easy-ham-1", "easy-ham-2", "hard-ham-1", "spam-1", "spam-2"};

/* The 500 Brown files, empty: ca00 .. ce99 in name order (any c[a-r][0-9][0-9] counts). */
static void make_brown_dir(void) {
    mkdir(fz_path("brown"), 0777);
    for (int i = 0; i < N_BROWN; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/brown/c%c%02d", fz_dir(), 'a' + i / 100, i % 100);
        fz_write_file(path, "", 0);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    make_brown_dir();
    mkdir(fz_path("spam"), 0777);
    for (int f = 0; f < 5; f++) {
        char name[64];
        snprintf(name, sizeof name, "spam/%s", spam_folders[f]);
        mkdir(fz_path(name), 0777);
    }
    return 0;
}

/* A split file the converter wrote, read back (it must read). */
static qkv_corpus *read_split(qkv_corpus_kind kind, const char *name, const qkv_read_opts *o) {
    qkv_corpus *c = NULL;
    char rel[128];
    snprintf(rel, sizeof rel, "out/%s", name);
    qkv_status st = qkv_corpus_read(kind, fz_path(rel), o, &c);
    if (st) fprintf(stderr, "fuzz_prepare: %s\n", qkv_last_error());
    FZ_REQUIRE(st == QKV_OK);
    return c;
}

static int64_t symbols(const qkv_corpus *c, int field) {
    int64_t n = 0;
    for (int64_t i = 0; i < qkv_corpus_size(c); i++)
        n += qkv_corpus_length(c, i, field);
    return n;
}

static void check_g2p(const qkv_prepare_counts *k) {
    for (int s = 0; s < 3; s++) {
        const char *split = qkv_split_name((qkv_split)s);
        char name[64];
        snprintf(name, sizeof name, "cmudict.%s.tsv", split);
        qkv_corpus *c = read_split(QKV_CORPUS_PAIRS, name, NULL);
        FZ_REQUIRE(qkv_corpus_size(c) == k->units[s]);
        qkv_groups g = {0};
        FZ_REQUIRE(qkv_corpus_groups(c, &g) == QKV_OK && g.n == k->items[s]);
        qkv_groups_free(&g);
        qkv_corpus_free(c);
        snprintf(name, sizeof name, "cmudict.nostress.%s.tsv", split);
        c = read_split(QKV_CORPUS_PAIRS, name, NULL);
        FZ_REQUIRE(qkv_corpus_size(c) == k->units_ns[s]);
        FZ_REQUIRE(qkv_corpus_groups(c, &g) == QKV_OK && g.n == k->items[s]);
        qkv_groups_free(&g);
        qkv_corpus_free(c);
    }
}

static void check_brown(const qkv_prepare_counts *k) {
    for (int s = 0; s < 3; s++) {
        const char *split = qkv_split_name((qkv_split)s);
        char name[64];
        snprintf(name, sizeof name, "brown.%s.tsv", split);
        const qkv_read_opts universal = {.tag_column = 2};
        qkv_corpus *c = read_split(QKV_CORPUS_TAGGED, name, &universal);
        FZ_REQUIRE(qkv_corpus_size(c) == k->items[s] && symbols(c, QKV_FIELD_SRC) == k->units[s]);
        snprintf(name, sizeof name, "brown.%s.txt", split);
        const qkv_read_opts words = {.text_words = true};
        qkv_corpus *t = read_split(QKV_CORPUS_TEXT, name, &words);
        FZ_REQUIRE(qkv_corpus_size(t) == k->items[s] && symbols(t, QKV_FIELD_TGT) == k->units[s]);
        for (int64_t i = 0; i < qkv_corpus_size(c); i++)
            for (int64_t w = 0; w < qkv_corpus_length(c, i, QKV_FIELD_SRC); w++) {
                size_t la = 0, lb = 0;
                const char *a = qkv_corpus_symbol(c, i, QKV_FIELD_SRC, w, &la);
                const char *b = qkv_corpus_symbol(t, i, QKV_FIELD_TGT, w, &lb);
                FZ_REQUIRE(b && la == lb && !memcmp(a, b, la));
            }
        qkv_corpus_free(t);
        qkv_corpus_free(c);
    }
}

static void check_labeled(const char *prefix, const qkv_prepare_counts *k, bool decimal) {
    for (int s = 0; s < 3; s++) {
        char name[64];
        snprintf(name, sizeof name, "%s.%s.tsv", prefix, qkv_split_name((qkv_split)s));
        qkv_corpus *c = read_split(QKV_CORPUS_LABELED, name, NULL);
        FZ_REQUIRE(qkv_corpus_size(c) == k->items[s]);
        if (decimal) { /* digits: 64 pixels 0..16 and a label 0..9, all decimal ids */
            qkv_dataset *d = NULL;
            FZ_REQUIRE(qkv_dataset_encode(c, NULL, NULL, true, &d) == QKV_OK);
            for (int64_t i = 0; i < qkv_dataset_size(d); i++) {
                qkv_example e;
                FZ_REQUIRE(qkv_dataset_get(d, i, &e) == QKV_OK && e.src_len == 64 && e.tgt[0] <= 9);
                for (int p = 0; p < 64; p++)
                    FZ_REQUIRE(e.src[p] >= 0 && e.src[p] <= 16);
            }
            qkv_dataset_free(d);
        } else {
            FZ_REQUIRE(symbols(c, QKV_FIELD_SRC) == k->units[s]);
        }
        qkv_corpus_free(c);
    }
}

static void write_brown(fz_reader *r) {
    size_t len;
    const char *cats = fz_field(r, 0, &len);
    fz_write_file(fz_path("brown/cats.txt"), cats, len);
    for (int f = 0; f < 3; f++) {
        const char *text = "";
        len = 0;
        if (r->n) text = fz_field(r, 0, &len);
        char name[32];
        snprintf(name, sizeof name, "brown/%s", brown_fuzzed[f]);
        fz_write_file(fz_path(name), text, len);
    }
}

static void write_spam(fz_reader *r) {
    static const char filler[] = "Subject: hello\n\nsee you at lunch\n";
    for (int f = 0; f < 5; f++) {
        size_t len = 0;
        const char *msg = r->n ? fz_field(r, 0, &len) : NULL;
        char name[96];
        snprintf(name, sizeof name, "spam/%s/00001.%d.txt", spam_folders[f], f);
        fz_write_file(fz_path(name), msg ? msg : filler, msg ? len : sizeof filler - 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    const uint8_t opts = fz_byte(&r);
    const char *out = fz_path("out");
    qkv_prepare_counts k;
    memset(&k, 0xff, sizeof k);
    qkv_status st;
    switch (opts & 3) {
    case 0:
        fz_write_file(fz_path("index.js"), r.p, r.n);
        st = qkv_prepare_g2p(fz_path("index.js"), out, &k);
        break;
    case 1:
        write_brown(&r);
        st = qkv_prepare_brown(fz_path("brown"), out, &k);
        break;
    case 2:
        fz_write_file(fz_path("digits.csv"), r.p, r.n);
        st = qkv_prepare_digits(fz_path("digits.csv"), out, &k);
        break;
    default:
        write_spam(&r);
        st = qkv_prepare_spam(fz_path("spam"), out, 1 + (opts >> 2), &k);
        break;
    }
    FZ_REQUIRE(st == QKV_OK || qkv_last_error()[0] != '\0');
    if (!st) {
        switch (opts & 3) {
        case 0: check_g2p(&k); break;
        case 1: check_brown(&k); break;
        case 2: check_labeled("digits", &k, true); break;
        default:
            check_labeled("spam", &k, false);
            for (int s = 0; s < 3; s++)
                FZ_REQUIRE(k.per_class[s][0] + k.per_class[s][1] == k.items[s]);
            break;
        }
    }
    fz_rmtree(out);
    return 0;
}
