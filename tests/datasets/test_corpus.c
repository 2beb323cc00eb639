/* test_corpus.c: the readers (src/data/corpus.c) of pairs, tagged and labeled files: symbols and
 * line numbers of well-formed input, every malformed-line check with its "FILE:LINE: problem"
 * message, length limits, grouping of G2P variants, and encoding into ids (src/data/dataset.c)
 * with strict and lenient vocabularies and with integer symbols. */
#include "data_testutil.h"

#include <stdlib.h>
#include <string.h>

static qkv_corpus *parse(qkv_corpus_kind kind, const char *text, const qkv_read_opts *o) {
    qkv_corpus *c = NULL;
    CHECK_OK(qkv_corpus_parse(kind, text, strlen(text), "in.tsv", o, &c));
    return c;
}

/* Symbol k of field f of example i equals want. */
static bool sym_is(const qkv_corpus *c, int64_t i, int f, int64_t k, const char *want) {
    size_t len;
    const char *s = qkv_corpus_symbol(c, i, f, k, &len);
    return s && len == strlen(want) && memcmp(s, want, len) == 0;
}

/* Parsing text[0, len) fails with QKV_ERR_FORMAT and a message containing needle. */
static void fails(qkv_corpus_kind kind, const char *text, long len, const qkv_read_opts *o,
                  const char *needle) {
    qkv_corpus *c = (qkv_corpus *)(uintptr_t)1;
    size_t n = len < 0 ? strlen(text) : (size_t)len;
    CHECK_ERR(qkv_corpus_parse(kind, text, n, "in.tsv", o, &c), QKV_ERR_FORMAT, needle);
    CHECK(c == NULL);
}

TEST(data_corpus_pairs) {
    /* UTF-8 characters, a last line without '\n', line numbers */
    const char *text = "ab\tAA B\nn\xc3\xa9\tN EY1\nx-y.'z\tK\n\xe2\x82\xac\tY UW R OW";
    qkv_corpus *c = parse(QKV_CORPUS_PAIRS, text, NULL);
    if (!c) return;
    CHECK(qkv_corpus_size(c) == 4);
    CHECK(qkv_corpus_kind_of(c) == QKV_CORPUS_PAIRS && !strcmp(qkv_corpus_name(c), "in.tsv"));
    CHECK(qkv_corpus_length(c, 0, QKV_FIELD_SRC) == 2 &&
          qkv_corpus_length(c, 0, QKV_FIELD_TGT) == 2);
    CHECK(sym_is(c, 0, 0, 0, "a") && sym_is(c, 0, 0, 1, "b"));
    CHECK(sym_is(c, 0, 1, 0, "AA") && sym_is(c, 0, 1, 1, "B"));
    CHECK(qkv_corpus_length(c, 1, QKV_FIELD_SRC) == 2 && sym_is(c, 1, 0, 1, "\xc3\xa9"));
    CHECK(qkv_corpus_length(c, 2, QKV_FIELD_SRC) == 6 && sym_is(c, 2, 0, 4, "'"));
    CHECK(qkv_corpus_length(c, 3, QKV_FIELD_SRC) == 1 && sym_is(c, 3, 0, 0, "\xe2\x82\xac"));
    CHECK(qkv_corpus_length(c, 3, QKV_FIELD_TGT) == 4 && sym_is(c, 3, 1, 3, "OW"));
    for (int i = 0; i < 4; i++)
        CHECK(qkv_corpus_line(c, i) == i + 1);
    size_t len;
    const char *k = qkv_corpus_key(c, 1, &len);
    CHECK(k && len == 3 && !memcmp(k, "n\xc3\xa9", 3));
    /* out of range */
    CHECK(qkv_corpus_symbol(c, 0, 0, 2, &len) == NULL &&
          qkv_corpus_symbol(c, 4, 0, 0, &len) == NULL);
    CHECK(qkv_corpus_length(c, 0, 2) == -1 && qkv_corpus_line(c, 9) == 0);
    qkv_corpus_free(c);
    /* source as tokens */
    qkv_read_opts o = {.src_tokens = true};
    c = parse(QKV_CORPUS_PAIRS, "the cat\tle chat\n", &o);
    if (c) CHECK(qkv_corpus_length(c, 0, 0) == 2 && sym_is(c, 0, 0, 1, "cat"));
    qkv_corpus_free(c);
    /* empty file: no examples */
    c = parse(QKV_CORPUS_PAIRS, "", NULL);
    if (c) CHECK(qkv_corpus_size(c) == 0);
    qkv_corpus_free(c);
}

TEST(data_corpus_pairs_malformed) {
    const qkv_corpus_kind P = QKV_CORPUS_PAIRS;
    fails(P, "ab\tA B\nab A B\n", -1, NULL,
          "in.tsv:2: no TAB between source and target in 'ab A B'");
    fails(P, "ab\tA\tB\n", -1, NULL, "in.tsv:1: more than one TAB");
    fails(P, "a\tA\n\tA B\n", -1, NULL, "in.tsv:2: empty source before the TAB");
    fails(P, "ab\t\n", -1, NULL, "in.tsv:1: empty target after the TAB");
    fails(P, "ab\tA  B\n", -1, NULL, "in.tsv:1: empty token in the target");
    fails(P, "ab\t A B\n", -1, NULL, "in.tsv:1: empty token in the target");
    fails(P, "ab\tA B \n", -1, NULL, "in.tsv:1: empty token in the target");
    fails(P, "a\tA\n\nb\tB\n", -1, NULL, "in.tsv:2: blank line");
    fails(P, "a\tA\r\n", -1, NULL, "in.tsv:1: carriage return");
    fails(P, "a\tA\nb\0\tB\n", 8, NULL, "in.tsv:2: NUL byte at column 2");
    fails(P, "a\tA\nb\xff\tB\n", -1, NULL, "in.tsv:2: invalid UTF-8 at column 2");
    fails(P, "\xc3\tB\n", -1, NULL, "in.tsv:1: invalid UTF-8 at column 1");     /* truncated */
    fails(P, "\xc0\xaf\tB\n", -1, NULL, "in.tsv:1: invalid UTF-8 at column 1"); /* overlong */
    fails(P, "\xed\xa0\x80\tB\n", -1, NULL, "invalid UTF-8");                   /* surrogate */
    qkv_read_opts o = {.max_src_len = 3, .max_tgt_len = 2};
    qkv_corpus *c = parse(P, "abc\tA B\n", &o);
    CHECK(c && qkv_corpus_size(c) == 1);
    qkv_corpus_free(c);
    fails(P, "abc\tA B\nabcd\tA\n", -1, &o,
          "in.tsv:2: the source has 4 characters, more than the maximum 3");
    fails(P, "abc\tA B C\n", -1, &o, "in.tsv:1: the target has 3 tokens, more than the maximum 2");
    o = (qkv_read_opts){.max_src_len = -1};
    CHECK_ERR(qkv_corpus_parse(P, "", 0, NULL, &o, &c), QKV_ERR_INVALID_ARG, "negative option");
    CHECK_ERR(qkv_corpus_parse((qkv_corpus_kind)7, "", 0, NULL, NULL, &c), QKV_ERR_INVALID_ARG,
              "unknown corpus kind");
    CHECK_ERR(qkv_corpus_read(P, "/nonexistent/x.tsv", NULL, &c), QKV_ERR_IO,
              "/nonexistent/x.tsv: cannot open");
}

TEST(data_corpus_tagged) {
    /* Brown layout: word, full tag, universal tag; no blank line after the last sentence */
    const char *text = "The\tAT\tDET\ncat\tNN\tNOUN\n\n1/2\tCD\tNUM\n\nA b\tNP\tNOUN\n.\t.\t.";
    qkv_corpus *c = parse(QKV_CORPUS_TAGGED, text, NULL);
    if (!c) return;
    CHECK(qkv_corpus_size(c) == 3);
    CHECK(qkv_corpus_length(c, 0, 0) == 2 && qkv_corpus_length(c, 0, 1) == 2);
    CHECK(sym_is(c, 0, 0, 1, "cat") && sym_is(c, 0, 1, 1, "NN"));
    CHECK(sym_is(c, 1, 0, 0, "1/2") && sym_is(c, 1, 1, 0, "CD"));
    CHECK(sym_is(c, 2, 0, 0, "A b") && sym_is(c, 2, 1, 1, "."));
    CHECK(qkv_corpus_line(c, 0) == 1 && qkv_corpus_line(c, 1) == 4 && qkv_corpus_line(c, 2) == 6);
    CHECK(qkv_corpus_key(c, 0, NULL) == NULL);
    qkv_corpus_free(c);
    /* the second tag column */
    qkv_read_opts o = {.tag_column = 2};
    c = parse(QKV_CORPUS_TAGGED, text, &o);
    if (c) CHECK(sym_is(c, 0, 1, 0, "DET") && sym_is(c, 2, 1, 0, "NOUN"));
    qkv_corpus_free(c);
}

TEST(data_corpus_tagged_malformed) {
    const qkv_corpus_kind T = QKV_CORPUS_TAGGED;
    fails(T, "\nThe\tAT\n\n", -1, NULL, "in.tsv:1: empty sentence (a blank line at the start");
    fails(T, "The\tAT\n\n\nx\tNN\n", -1, NULL,
          "in.tsv:3: empty sentence (a blank line after another blank line)");
    fails(T, "The AT\n", -1, NULL, "in.tsv:1: no TAB");
    fails(T, "The\tAT\tDET\ncat\tNN\n", -1, NULL,
          "in.tsv:2: 2 columns, but the first token line (line 1) has 3");
    fails(T, "The\tAT\n\ncat\tNN\tX\n", -1, NULL, "in.tsv:3: 3 columns");
    fails(T, "\tAT\n", -1, NULL, "in.tsv:1: empty word before the first TAB");
    fails(T, "a\tAT\nb\t\n", -1, NULL, "in.tsv:2: empty tag in column 2");
    fails(T, "a\tAT\t\n", -1, NULL, "in.tsv:1: empty tag in column 3");
    fails(T, "a\tAT\r\n", -1, NULL, "in.tsv:1: carriage return");
    qkv_read_opts o = {.tag_column = 3};
    fails(T, "a\tAT\tDET\n", -1, &o, "in.tsv:1: tag column 3 asked for, but the lines have 2 tag");
    o = (qkv_read_opts){.max_src_len = 2};
    fails(T, "a\tX\nb\tX\n\nc\tX\nd\tX\ne\tX\nf\tX\n", -1, &o,
          "in.tsv:6: the sentence has 3 tokens, more than the maximum 2");
}

TEST(data_corpus_labeled) {
    const char *text = "7\t0 3 16\n10\t5\n";
    qkv_corpus *c = parse(QKV_CORPUS_LABELED, text, NULL);
    if (!c) return;
    CHECK(qkv_corpus_size(c) == 2);
    CHECK(qkv_corpus_length(c, 0, 0) == 3 && sym_is(c, 0, 0, 2, "16"));
    CHECK(qkv_corpus_length(c, 0, 1) == 1 && sym_is(c, 0, 1, 0, "7"));
    CHECK(sym_is(c, 1, 1, 0, "10") && qkv_corpus_line(c, 1) == 2);
    size_t len;
    const char *k = qkv_corpus_key(c, 0, &len);
    CHECK(k && len == 6 && !memcmp(k, "0 3 16", 6));
    qkv_corpus_free(c);
    const qkv_corpus_kind L = QKV_CORPUS_LABELED;
    fails(L, "7 0 3\n", -1, NULL, "in.tsv:1: no TAB between label and tokens");
    fails(L, "7\t0\t3\n", -1, NULL, "in.tsv:1: more than one TAB");
    fails(L, "\t0 3\n", -1, NULL, "in.tsv:1: empty label");
    fails(L, "7\t\n", -1, NULL, "in.tsv:1: no tokens after the TAB");
    fails(L, "7\t0  3\n", -1, NULL, "in.tsv:1: empty token in the tokens");
    fails(L, "7\t0\n\n", -1, NULL, "in.tsv:2: blank line");
    qkv_read_opts o = {.max_src_len = 64};
    char line[400] = "3\t";
    for (int i = 0; i < 65; i++)
        strcat(line, i ? " 1" : "1");
    strcat(line, "\n");
    fails(L, line, -1, &o, "in.tsv:1: the token list has 65 tokens, more than the maximum 64");
}

TEST(data_corpus_groups) {
    /* a with 2 variants, b with 1, c with 3 */
    const char *text = "a\tA\na\tEY\nb\tB IY\nc\tS IY\nc\tK\nc\tCH\n";
    qkv_corpus *c = parse(QKV_CORPUS_PAIRS, text, NULL);
    if (!c) return;
    qkv_groups g;
    CHECK_OK(qkv_corpus_groups(c, &g));
    CHECK(g.n == 3);
    if (g.n == 3) CHECK(g.start[0] == 0 && g.start[1] == 2 && g.start[2] == 3 && g.start[3] == 6);
    qkv_groups_free(&g);
    CHECK(g.start == NULL && g.n == 0);
    qkv_corpus_free(c);
    /* a word that comes back after another one */
    c = parse(QKV_CORPUS_PAIRS, "a\tA\nb\tB\na\tEY\n", NULL);
    CHECK_ERR(qkv_corpus_groups(c, &g), QKV_ERR_FORMAT,
              "in.tsv:3: word 'a' already seen at line 1");
    qkv_corpus_free(c);
    /* words spelled like reserved symbols are words like any other */
    c = parse(QKV_CORPUS_PAIRS, "<pad>\tP\n<unk>\tU\n<pad>\tQ\n", NULL);
    CHECK_ERR(qkv_corpus_groups(c, &g), QKV_ERR_FORMAT,
              "in.tsv:3: word '<pad>' already seen at line 1");
    qkv_corpus_free(c);
    c = parse(QKV_CORPUS_PAIRS, "<pad>\tP\n<pad>\tQ\n<unk>\tU\n", NULL);
    CHECK_OK(qkv_corpus_groups(c, &g));
    CHECK(g.n == 2);
    qkv_groups_free(&g);
    qkv_corpus_free(c);
    c = parse(QKV_CORPUS_TAGGED, "a\tX\n", NULL);
    CHECK_ERR(qkv_corpus_groups(c, &g), QKV_ERR_INVALID_ARG, "needs a pairs corpus");
    qkv_corpus_free(c);
}

TEST(data_dataset_encode) {
    const char *text = "ab\tAA B\nba\tB\ncz\tZZ AA\n";
    qkv_corpus *c = parse(QKV_CORPUS_PAIRS, text, NULL);
    if (!c) return;
    qkv_vocab *vs, *vt;
    CHECK_OK(qkv_vocab_new(&vs));
    CHECK_OK(qkv_vocab_new(&vt));
    CHECK_OK(qkv_vocab_add(vs, "a", 1, NULL));  /* 4 */
    CHECK_OK(qkv_vocab_add(vs, "b", 1, NULL));  /* 5 */
    CHECK_OK(qkv_vocab_add(vs, "c", 1, NULL));  /* 6 */
    CHECK_OK(qkv_vocab_add(vt, "B", 1, NULL));  /* 4 */
    CHECK_OK(qkv_vocab_add(vt, "AA", 2, NULL)); /* 5 */
    qkv_dataset *d;
    CHECK_OK(qkv_dataset_encode(c, vs, vt, false, &d));
    CHECK(qkv_dataset_size(d) == 3 && !strcmp(qkv_dataset_name(d), "in.tsv"));
    qkv_example e;
    CHECK_OK(qkv_dataset_get(d, 0, &e));
    CHECK(e.src_len == 2 && e.src[0] == 4 && e.src[1] == 5);
    CHECK(e.tgt_len == 2 && e.tgt[0] == 5 && e.tgt[1] == 4 && e.line == 1);
    CHECK_OK(qkv_dataset_get(d, 2, &e));
    CHECK(e.src[1] == QKV_VOCAB_UNK && e.tgt[0] == QKV_VOCAB_UNK && e.tgt[1] == 5 && e.line == 3);
    CHECK(qkv_dataset_unknowns(d, QKV_FIELD_SRC) == 1 &&
          qkv_dataset_unknowns(d, QKV_FIELD_TGT) == 1);
    CHECK_ERR(qkv_dataset_get(d, 3, &e), QKV_ERR_INVALID_ARG, "example 3 out of range");
    qkv_dataset_free(d);
    /* strict: the unknown symbol with file and line */
    d = (qkv_dataset *)(uintptr_t)1;
    CHECK_ERR(qkv_dataset_encode(c, vs, vt, true, &d), QKV_ERR_FORMAT,
              "in.tsv:3: unknown symbol 'z' (not among the 7 symbols");
    CHECK(d == NULL);
    qkv_corpus_free(c);
    /* tagged: the line of the token itself */
    c = parse(QKV_CORPUS_TAGGED, "a\tB\nb\tB\n\nc\tB\nz\tB\n", NULL);
    CHECK_ERR(qkv_dataset_encode(c, vs, vt, true, &d), QKV_ERR_FORMAT,
              "in.tsv:5: unknown symbol 'z'");
    qkv_corpus_free(c);
    /* integer symbols without a vocabulary */
    c = parse(QKV_CORPUS_LABELED, "7\t0 3 16\n2\t2147483647\n", NULL);
    CHECK_OK(qkv_dataset_encode(c, NULL, NULL, true, &d));
    CHECK_OK(qkv_dataset_get(d, 0, &e));
    CHECK(e.src_len == 3 && e.src[2] == 16 && e.tgt_len == 1 && e.tgt[0] == 7);
    CHECK_OK(qkv_dataset_get(d, 1, &e));
    CHECK(e.src[0] == 2147483647);
    qkv_dataset_free(d);
    qkv_corpus_free(c);
    const char *bad[] = {"7\t0 x\n", "7\t0 -1\n", "7\t0 2147483648\n", "7\t0 03\n", "x\t0\n"};
    const char *needle[] = {"in.tsv:1: source symbol 'x' is not a decimal integer",
                            "source symbol '-1'", "source symbol '2147483648'",
                            "source symbol '03'", "in.tsv:1: target symbol 'x'"};
    for (int i = 0; i < 5; i++) {
        c = parse(QKV_CORPUS_LABELED, bad[i], NULL);
        CHECK_ERR(qkv_dataset_encode(c, NULL, NULL, false, &d), QKV_ERR_FORMAT, needle[i]);
        qkv_corpus_free(c);
    }
    qkv_vocab_free(vs);
    qkv_vocab_free(vt);
}

TEST(data_corpus_read_file) {
    char *dir = dt_tmpdir();
    CHECK(dt_write(dir, "x.tsv", "ab\tA B\nab\tA\n", -1));
    char *p = dt_join(dir, "x.tsv");
    qkv_corpus *c = NULL;
    CHECK_OK(qkv_corpus_read(QKV_CORPUS_PAIRS, p, NULL, &c));
    CHECK(c && qkv_corpus_size(c) == 2 && !strcmp(qkv_corpus_name(c), p));
    qkv_corpus_free(c);
    CHECK(dt_write(dir, "x.tsv", "ab\tA B\nab A\n", -1));
    char want[300];
    snprintf(want, sizeof want, "%s:2: no TAB", p);
    CHECK_ERR(qkv_corpus_read(QKV_CORPUS_PAIRS, p, NULL, &c), QKV_ERR_FORMAT, want);
    free(p);
    dt_rmtree(dir);
}
