/* test_vocab.c: the vocabulary (src/data/vocab.c): reserved ids, add / find, sorting, the text
 * file format byte for byte, atomic saving, load errors with file:line, strict lookups, and
 * building from a corpus in first-seen and sorted order with a minimum count. */
#include "data_testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int32_t add(qkv_vocab *v, const char *s) {
    int32_t id = -2;
    CHECK_OK(qkv_vocab_add(v, s, strlen(s), &id));
    return id;
}

TEST(data_vocab_reserved_and_add) {
    qkv_vocab *v;
    CHECK_OK(qkv_vocab_new(&v));
    CHECK(qkv_vocab_size(v) == 4);
    CHECK(!strcmp(qkv_vocab_symbol(v, QKV_VOCAB_PAD), "<pad>"));
    CHECK(!strcmp(qkv_vocab_symbol(v, QKV_VOCAB_UNK), "<unk>"));
    CHECK(!strcmp(qkv_vocab_symbol(v, QKV_VOCAB_BOS), "<bos>"));
    CHECK(!strcmp(qkv_vocab_symbol(v, QKV_VOCAB_EOS), "<eos>"));
    CHECK(add(v, "b") == 4);
    CHECK(add(v, "a") == 5);
    CHECK(add(v, "b") == 4); /* present: same id, no growth */
    CHECK(add(v, "<eos>") == 3);
    CHECK(add(v, "a b\tc") == 6); /* spaces and TABs are part of a symbol */
    CHECK(add(v, "\xc3\xa9") == 7);
    CHECK(qkv_vocab_size(v) == 8);
    CHECK(qkv_vocab_find(v, "a", 1) == 5);
    CHECK(qkv_vocab_find(v, "ab", 1) == 5); /* length counts, not the NUL */
    CHECK(qkv_vocab_find(v, "z", 1) == -1);
    CHECK(qkv_vocab_find(v, "", 0) == -1);
    CHECK(qkv_vocab_symbol(v, 8) == NULL && qkv_vocab_symbol(v, -1) == NULL);
    /* invalid symbols */
    CHECK_ERR(qkv_vocab_add(v, "", 0, NULL), QKV_ERR_INVALID_ARG, "invalid symbol");
    CHECK_ERR(qkv_vocab_add(v, "a\nb", 3, NULL), QKV_ERR_INVALID_ARG, "invalid symbol 'a\\x0ab'");
    CHECK_ERR(qkv_vocab_add(v, "a\rb", 3, NULL), QKV_ERR_INVALID_ARG, "invalid symbol");
    CHECK_ERR(qkv_vocab_add(v, "a\0b", 3, NULL), QKV_ERR_INVALID_ARG, "invalid symbol");
    CHECK(qkv_vocab_size(v) == 8);
    qkv_vocab_free(v);
}

TEST(data_vocab_many_symbols) {
    /* grows the arrays and the hash table several times; every id stays findable */
    qkv_vocab *v;
    CHECK_OK(qkv_vocab_new(&v));
    char s[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(s, sizeof s, "sym%d", i);
        CHECK(add(v, s) == 4 + i);
    }
    int bad = 0;
    for (int i = 0; i < 5000; i++) {
        snprintf(s, sizeof s, "sym%d", i);
        bad += qkv_vocab_find(v, s, strlen(s)) != 4 + i;
        bad += strcmp(qkv_vocab_symbol(v, 4 + i), s) != 0;
    }
    CHECK(bad == 0);
    CHECK(qkv_vocab_size(v) == 5004);
    qkv_vocab_free(v);
}

TEST(data_vocab_sort) {
    qkv_vocab *v;
    CHECK_OK(qkv_vocab_new(&v));
    const char *in[] = {"zz", "a", "ab", "B", "\xc3\xa9", "aa"};
    for (int i = 0; i < 6; i++)
        add(v, in[i]);
    CHECK_OK(qkv_vocab_sort(v));
    /* byte order: 'B' (0x42) < 'a' < "aa" < "ab" < "zz" < 0xC3 */
    const char *want[] = {"<pad>", "<unk>", "<bos>", "<eos>", "B",
                          "a",     "aa",    "ab",    "zz",    "\xc3\xa9"};
    for (int i = 0; i < 10; i++) {
        CHECK_MSG(!strcmp(qkv_vocab_symbol(v, i), want[i]), "id %d: %s", i, qkv_vocab_symbol(v, i));
        CHECK(qkv_vocab_find(v, want[i], strlen(want[i])) == i);
    }
    qkv_vocab_free(v);
}

TEST(data_vocab_save_load_round_trip) {
    char *dir = dt_tmpdir();
    char *path = dt_join(dir, "v.txt");
    qkv_vocab *v, *w = NULL;
    CHECK_OK(qkv_vocab_new(&v));
    add(v, "b");
    add(v, "a b");
    add(v, "\t");
    add(v, "\xc3\xa9");
    CHECK_OK(qkv_vocab_save(v, path));
    DT_CHECK_FILE(dir, "v.txt", "<pad>\n<unk>\n<bos>\n<eos>\nb\na b\n\t\n\xc3\xa9\n");
    CHECK(dt_count_tmp(dir) == 0);
    CHECK_OK(qkv_vocab_load(path, &w));
    CHECK(w && qkv_vocab_size(w) == 8);
    for (int i = 0; w && i < 8; i++)
        CHECK(!strcmp(qkv_vocab_symbol(v, i), qkv_vocab_symbol(w, i)));
    if (w) CHECK(qkv_vocab_find(w, "a b", 3) == 5);
    /* overwrite in place (rename over the old file) */
    add(v, "c");
    CHECK_OK(qkv_vocab_save(v, path));
    qkv_vocab_free(w);
    CHECK_OK(qkv_vocab_load(path, &w));
    CHECK(w && qkv_vocab_size(w) == 9);
    CHECK(dt_count_tmp(dir) == 0);
    /* a file without the final newline reads the same */
    CHECK(dt_write(dir, "nonl.txt", "<pad>\n<unk>\n<bos>\n<eos>\nx", -1));
    qkv_vocab_free(w);
    char *p2 = dt_join(dir, "nonl.txt");
    CHECK_OK(qkv_vocab_load(p2, &w));
    CHECK(w && qkv_vocab_size(w) == 5 && qkv_vocab_find(w, "x", 1) == 4);
    free(p2);
    /* saving into a missing directory fails cleanly */
    char *bad = dt_join(dir, "missing/v.txt");
    CHECK_ERR(qkv_vocab_save(v, bad), QKV_ERR_IO, "missing/v.txt");
    free(bad);
    qkv_vocab_free(v);
    qkv_vocab_free(w);
    free(path);
    dt_rmtree(dir);
}

/* Load `text` and expect QKV_ERR_FORMAT with `needle` in the message. */
static void load_fails(const char *dir, const char *text, long len, const char *needle) {
    CHECK(dt_write(dir, "bad.txt", text, len));
    char *p = dt_join(dir, "bad.txt");
    qkv_vocab *v = (qkv_vocab *)(uintptr_t)1;
    CHECK_ERR(qkv_vocab_load(p, &v), QKV_ERR_FORMAT, needle);
    CHECK(v == NULL);
    free(p);
}

TEST(data_vocab_load_errors) {
    char *dir = dt_tmpdir();
    char want[512];
    snprintf(want, sizeof want,
             "%s/bad.txt:1: expected the reserved symbol '<pad>' (id 0), found 'a'", dir);
    load_fails(dir, "a\n<unk>\n<bos>\n<eos>\n", -1, want);
    snprintf(want, sizeof want, "%s/bad.txt:2: expected the reserved symbol '<unk>'", dir);
    load_fails(dir, "<pad>\n<bos>\n<unk>\n<eos>\n", -1, want);
    snprintf(want, sizeof want, "%s/bad.txt:4: missing the reserved symbol '<eos>'", dir);
    load_fails(dir, "<pad>\n<unk>\n<bos>\n", -1, want);
    snprintf(want, sizeof want, "%s/bad.txt:1: missing the reserved symbol '<pad>'", dir);
    load_fails(dir, "", 0, want);
    snprintf(want, sizeof want, "%s/bad.txt:7: duplicate symbol 'a' (also on line 5)", dir);
    load_fails(dir, "<pad>\n<unk>\n<bos>\n<eos>\na\nb\na\n", -1, want);
    snprintf(want, sizeof want, "%s/bad.txt:5: duplicate symbol '<pad>' (also on line 1)", dir);
    load_fails(dir, "<pad>\n<unk>\n<bos>\n<eos>\n<pad>\n", -1, want);
    snprintf(want, sizeof want, "%s/bad.txt:6: empty line", dir);
    load_fails(dir, "<pad>\n<unk>\n<bos>\n<eos>\na\n\nb\n", -1, want);
    snprintf(want, sizeof want, "%s/bad.txt:5: a carriage return", dir);
    load_fails(dir, "<pad>\n<unk>\n<bos>\n<eos>\na\r\n", -1, want);
    snprintf(want, sizeof want, "%s/bad.txt:5: a NUL byte in symbol 'a\\x00b'", dir);
    load_fails(dir, "<pad>\n<unk>\n<bos>\n<eos>\na\0b\n", 28, want);
    qkv_vocab *v;
    char *missing = dt_join(dir, "none.txt");
    CHECK_ERR(qkv_vocab_load(missing, &v), QKV_ERR_IO, "none.txt: cannot open");
    free(missing);
    dt_rmtree(dir);
}

TEST(data_vocab_lookup_strict) {
    qkv_vocab *v;
    CHECK_OK(qkv_vocab_new(&v));
    add(v, "AA");
    int32_t id = -5;
    CHECK_OK(qkv_vocab_lookup(v, "AA", 2, true, "f.tsv", 3, &id));
    CHECK(id == 4);
    CHECK_OK(qkv_vocab_lookup(v, "ZZ", 2, false, "f.tsv", 3, &id));
    CHECK(id == QKV_VOCAB_UNK);
    CHECK_ERR(qkv_vocab_lookup(v, "ZZ", 2, true, "data/x.tsv", 12345, &id), QKV_ERR_FORMAT,
              "data/x.tsv:12345: unknown symbol 'ZZ' (not among the 5 symbols of the vocabulary)");
    CHECK_ERR(qkv_vocab_lookup(v, "Z\tZ", 3, true, NULL, 7, &id), QKV_ERR_FORMAT,
              "<input>:7: unknown symbol 'Z\\tZ'");
    qkv_vocab_free(v);
}

TEST(data_vocab_build_from_corpus) {
    const char *text = "ba\tB AA\nab\tAA B\naab\tAA AA B\nc\tK\n";
    qkv_corpus *c;
    CHECK_OK(qkv_corpus_parse(QKV_CORPUS_PAIRS, text, strlen(text), "t.tsv", NULL, &c));
    qkv_vocab *v;
    /* first seen: b a c */
    CHECK_OK(qkv_vocab_build(c, QKV_FIELD_SRC, 1, false, &v));
    CHECK(qkv_vocab_size(v) == 7);
    CHECK(!strcmp(qkv_vocab_symbol(v, 4), "b") && !strcmp(qkv_vocab_symbol(v, 5), "a") &&
          !strcmp(qkv_vocab_symbol(v, 6), "c"));
    qkv_vocab_free(v);
    /* sorted */
    CHECK_OK(qkv_vocab_build(c, QKV_FIELD_SRC, 0, true, &v));
    CHECK(!strcmp(qkv_vocab_symbol(v, 4), "a") && !strcmp(qkv_vocab_symbol(v, 5), "b") &&
          !strcmp(qkv_vocab_symbol(v, 6), "c"));
    qkv_vocab_free(v);
    /* min count 2: counts a 4, b 3, c 1 -> c left out */
    CHECK_OK(qkv_vocab_build(c, QKV_FIELD_SRC, 2, false, &v));
    CHECK(qkv_vocab_size(v) == 6 && qkv_vocab_find(v, "c", 1) < 0);
    qkv_vocab_free(v);
    /* target: B AA K; AA 4, B 3, K 1 */
    CHECK_OK(qkv_vocab_build(c, QKV_FIELD_TGT, 4, false, &v));
    CHECK(qkv_vocab_size(v) == 5 && qkv_vocab_find(v, "AA", 2) == 4);
    qkv_vocab_free(v);
    CHECK_ERR(qkv_vocab_build(c, 2, 1, false, &v), QKV_ERR_INVALID_ARG, "field 2");
    qkv_corpus_free(c);
}
