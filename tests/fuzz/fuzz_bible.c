/*
 * fuzz_bible.c: libFuzzer target for qkv_prepare_bible (recipes/prepare_bible.c), the converter of
 * diatheke's exports of the King James Version and the Reina-Valera 1909 into verse pairs.
 *
 * Input: kjv.txt, a NUL byte, sparv.txt (without the NUL both exports are the input), written
 * into a scratch cache directory; the converter writes into a scratch output directory.
 *
 * Invariants: the converter succeeds or fails with a message, and a failure writes nothing. After
 * success every reference is counted once (written, in one export only, empty on a side, dropped
 * with its chapter, a psalm's first verse); the six pair files read back as pairs of words with
 * the counts' lines and words per language; the es-en files are the en-es lines with their two
 * fields swapped; the .ref files have a line per pair.
 */
#include "fuzz_util.h"

#include "qkv/qkv_data.h"
#include "qkv/qkv_tokenizer.h"
#include "recipes.h"

#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    mkdir(fz_path("cache"), 0777);
    return 0;
}

static char *read_out(const char *name, size_t *len) {
    char rel[96];
    snprintf(rel, sizeof rel, "out/%s", name);
    char *s = fz_read_file(fz_path(rel), len);
    FZ_REQUIRE(s != NULL);
    return s;
}

static int64_t count_lines(const char *s, size_t n) {
    int64_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '\n';
    return k;
}

/* b is a with the fields of every line swapped. */
static bool swapped(const char *a, size_t na, const char *b, size_t nb) {
    if (na != nb) return false;
    for (size_t i = 0; i < na;) {
        const char *nl = memchr(a + i, '\n', na - i), *tab = memchr(a + i, '\t', na - i);
        if (!nl || !tab || tab > nl) return false;
        size_t l1 = (size_t)(tab - (a + i)), l2 = (size_t)(nl - tab - 1);
        if (memcmp(b + i, tab + 1, l2) || b[i + l2] != '\t' || memcmp(b + i + l2 + 1, a + i, l1) ||
            b[i + l1 + l2 + 1] != '\n')
            return false;
        i += l1 + l2 + 2;
    }
    return true;
}

static void check_outputs(const qkv_prepare_counts *k) {
    const int64_t refs = k->verses[0] + k->only_in[1];
    FZ_REQUIRE(refs == k->verses[1] + k->only_in[0]);
    FZ_REQUIRE(refs == k->items[0] + k->items[1] + k->items[2] + k->only_in[0] + k->only_in[1] +
                           k->empty[0] + k->empty[1] + k->versification + k->psalm_titles);
    const qkv_tokenizer *words = qkv_tokenizer_shared(QKV_TOKENIZER_WORDS);
    const qkv_read_opts o = {.src_tokenizer = words, .tgt_tokenizer = words};
    for (int s = 0; s < 3; s++) {
        const char *split = qkv_split_name((qkv_split)s);
        char name[2][64], rel[96];
        size_t n[2];
        char *text[2];
        for (int d = 0; d < 2; d++) {
            snprintf(name[d], sizeof name[d], "bible.%s.%s.tsv", d ? "es-en" : "en-es", split);
            text[d] = read_out(name[d], &n[d]);
            qkv_corpus *c = NULL;
            snprintf(rel, sizeof rel, "out/%s", name[d]);
            qkv_status st = qkv_corpus_read(QKV_CORPUS_PAIRS, fz_path(rel), &o, &c);
            if (st) fprintf(stderr, "fuzz_bible: %s\n", qkv_last_error());
            FZ_REQUIRE(st == QKV_OK && qkv_corpus_size(c) == k->items[s]);
            int64_t w[2] = {0, 0};
            for (int64_t i = 0; i < qkv_corpus_size(c); i++) {
                w[0] += qkv_corpus_length(c, i, QKV_FIELD_SRC);
                w[1] += qkv_corpus_length(c, i, QKV_FIELD_TGT);
                FZ_REQUIRE(qkv_corpus_length(c, i, QKV_FIELD_SRC) <=
                           (d ? k->max_tgt_len : k->max_src_len));
            }
            FZ_REQUIRE(w[d] == k->words[0][s] && w[1 - d] == k->words[1][s]);
            qkv_corpus_free(c);
        }
        FZ_REQUIRE(swapped(text[0], n[0], text[1], n[1]));
        free(text[0]);
        free(text[1]);
        snprintf(name[0], sizeof name[0], "bible.%s.ref", split);
        char *ref = read_out(name[0], &n[0]);
        FZ_REQUIRE(count_lines(ref, n[0]) == k->items[s]);
        free(ref);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    size_t n_kjv, n_sparv;
    const char *kjv = fz_field(&r, 0, &n_kjv);
    const bool two = memchr(data, 0, size) != NULL;
    const char *sparv = two ? (const char *)r.p : kjv;
    n_sparv = two ? r.n : n_kjv;
    fz_write_file(fz_path("cache/kjv.txt"), kjv, n_kjv);
    fz_write_file(fz_path("cache/sparv.txt"), sparv, n_sparv);
    const char *out = fz_path("out");
    qkv_prepare_counts k;
    memset(&k, 0xff, sizeof k);
    qkv_status st = qkv_prepare_bible(fz_path("cache"), out, &k);
    FZ_REQUIRE(st == QKV_OK || qkv_last_error()[0] != '\0');
    if (st) {
        struct stat sb;
        FZ_REQUIRE(stat(out, &sb) != 0); /* nothing written */
    } else {
        check_outputs(&k);
    }
    fz_rmtree(out);
    return 0;
}
