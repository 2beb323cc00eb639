/* test_metrics.c: edit distance, multi-reference WER / PER (docs/data.md section 4: closest
 * reference by edit distance, ties to the shorter one; WER = words with distance > 0 / words;
 * PER = sum of distances / sum of the closest references' lengths) on hand-computed cases, and
 * the accuracy counters. */
#include "data_testutil.h"

#include <stdlib.h>
#include <string.h>

/* A string as ids (its bytes). */
static int32_t *ids(const char *s, int64_t *n) {
    static int32_t buf[8][64];
    static int slot;
    int32_t *b = buf[slot++ % 8];
    *n = (int64_t)strlen(s);
    for (int64_t i = 0; i < *n; i++)
        b[i] = (unsigned char)s[i];
    return b;
}

static int64_t dist(const char *a, const char *b) {
    int64_t na, nb;
    int32_t *x = ids(a, &na), *y = ids(b, &nb);
    return qkv_edit_distance(x, na, y, nb);
}

TEST(data_edit_distance) {
    CHECK(dist("kitten", "sitting") == 3); /* k->s, e->i, +g */
    CHECK(dist("sitting", "kitten") == 3);
    CHECK(dist("flaw", "lawn") == 2); /* -f, +n */
    CHECK(dist("ab", "ba") == 2);     /* no transpositions */
    CHECK(dist("", "abc") == 3 && dist("abc", "") == 3 && dist("", "") == 0);
    CHECK(dist("abc", "abc") == 0);
    CHECK(dist("abc", "axc") == 1);
    /* long rows (heap path): 3 substitutions by a value absent from a, 1 deletion: each 99 costs
     * an edit and the length difference another, so exactly 4 */
    int32_t *a = malloc(300 * sizeof *a), *b = malloc(299 * sizeof *b);
    for (int i = 0; i < 300; i++)
        a[i] = i % 7;
    for (int i = 0, j = 0; i < 300; i++)
        if (i != 150) b[j++] = a[i];
    b[10] = b[100] = b[250] = 99;
    CHECK(qkv_edit_distance(a, 300, b, 299) == 4);
    CHECK(qkv_edit_distance(b, 299, a, 300) == 4);
    CHECK(qkv_edit_distance(a, 300, a, 300) == 0);
    CHECK(qkv_edit_distance(NULL, 2, b, 1) == -1 && qkv_edit_distance(a, -1, b, 1) == -1);
    CHECK(qkv_edit_distance(NULL, 0, NULL, 0) == 0);
    free(a);
    free(b);
}

TEST(data_wer_per_multi_reference) {
    qkv_wer_counts c = {0};
    int64_t closest = -9, n0;
    /* word 1: exact match with its only reference: distance 0, length 3 */
    int32_t *h = ids("ABC", &n0);
    const int32_t *r1[1];
    int64_t l1[1];
    r1[0] = ids("ABC", &l1[0]);
    CHECK_OK(qkv_wer_add(&c, h, n0, r1, l1, 1, &closest));
    CHECK(closest == 0);
    /* word 2: hyp AB; refs ABCD (distance 2) and AX (distance 1): the second, length 2 */
    h = ids("AB", &n0);
    const int32_t *r2[2];
    int64_t l2[2];
    r2[0] = ids("ABCD", &l2[0]);
    r2[1] = ids("AX", &l2[1]);
    CHECK_OK(qkv_wer_add(&c, h, n0, r2, l2, 2, &closest));
    CHECK(closest == 1);
    /* word 3: hyp AB; refs ABC and A both at distance 1: the shorter (A, length 1) */
    h = ids("AB", &n0);
    const int32_t *r3[3];
    int64_t l3[3];
    r3[0] = ids("ABC", &l3[0]);
    r3[1] = ids("A", &l3[1]);
    r3[2] = ids("B", &l3[2]); /* also distance 1, length 1: the first of the tie wins */
    CHECK_OK(qkv_wer_add(&c, h, n0, r3, l3, 3, &closest));
    CHECK(closest == 1);
    /* totals: 3 words, 2 wrong; distances 0 + 1 + 1; closest lengths 3 + 2 + 1 */
    CHECK(c.items == 3 && c.item_errors == 2 && c.edits == 2 && c.ref_len == 6);
    CHECK_NEAR(qkv_wer(&c), 2.0 / 3.0, 1e-15);
    CHECK_NEAR(qkv_per(&c), 2.0 / 6.0, 1e-15);
    /* an empty hypothesis against a reference of 4: distance 4 */
    qkv_wer_counts e = {0};
    const int32_t *r4[1];
    int64_t l4[1];
    r4[0] = ids("WXYZ", &l4[0]);
    CHECK_OK(qkv_wer_add(&e, NULL, 0, r4, l4, 1, NULL));
    CHECK(e.edits == 4 && e.ref_len == 4 && qkv_per(&e) == 1.0 && qkv_wer(&e) == 1.0);
    CHECK_ERR(qkv_wer_add(&e, NULL, 0, r4, l4, 0, NULL), QKV_ERR_INVALID_ARG, "0 references");
    qkv_wer_counts z = {0};
    CHECK(qkv_wer(&z) == 0.0 && qkv_per(&z) == 0.0);
}

TEST(data_wer_groups_from_dataset) {
    /* word a: references "A B" and "A X"; word b: "B" */
    const char *text = "a\tA B\na\tA X\nb\tB\n";
    qkv_corpus *c;
    CHECK_OK(qkv_corpus_parse(QKV_CORPUS_PAIRS, text, strlen(text), "g.tsv", NULL, &c));
    qkv_vocab *vs, *vt;
    CHECK_OK(qkv_vocab_build(c, QKV_FIELD_SRC, 1, true, &vs));
    CHECK_OK(qkv_vocab_build(c, QKV_FIELD_TGT, 1, true, &vt)); /* A 4, B 5, X 6 */
    qkv_dataset *d;
    CHECK_OK(qkv_dataset_encode(c, vs, vt, true, &d));
    qkv_groups g;
    CHECK_OK(qkv_corpus_groups(c, &g));
    CHECK(g.n == 2);
    qkv_wer_counts w = {0};
    int32_t hyp_a[] = {4, 6}; /* "A X": matches the second reference */
    int64_t closest = -1;
    CHECK_OK(qkv_wer_add_group(&w, d, &g, 0, hyp_a, 2, &closest));
    CHECK(closest == 1);
    CHECK_OK(qkv_wer_add_group(&w, d, &g, 1, NULL, 0, &closest)); /* empty for "B" */
    CHECK(w.items == 2 && w.item_errors == 1 && w.edits == 1 && w.ref_len == 3);
    CHECK_NEAR(qkv_wer(&w), 0.5, 1e-15);
    CHECK_NEAR(qkv_per(&w), 1.0 / 3.0, 1e-15);
    CHECK_ERR(qkv_wer_add_group(&w, d, &g, 2, hyp_a, 2, NULL), QKV_ERR_INVALID_ARG,
              "group 2 out of range");
    /* eos cutting of a decoded row */
    int32_t row[] = {4, 6, QKV_VOCAB_EOS, 5, QKV_VOCAB_PAD};
    CHECK(qkv_seq_length(row, 5, QKV_VOCAB_EOS) == 2);
    CHECK(qkv_seq_length(row, 2, QKV_VOCAB_EOS) == 2);
    CHECK(qkv_seq_length(row, 0, QKV_VOCAB_EOS) == 0);
    qkv_groups_free(&g);
    qkv_dataset_free(d);
    qkv_vocab_free(vs);
    qkv_vocab_free(vt);
    qkv_corpus_free(c);
}

TEST(data_accuracy) {
    qkv_accuracy a = {0};
    int32_t pred[] = {4, 5, 6, 7, 8, 9};
    int32_t gold[] = {4, 5, 0, 0, 9, 9}; /* 0 = pad: ignored */
    qkv_accuracy_add(&a, pred, gold, 6, QKV_VOCAB_PAD);
    CHECK(a.total == 4 && a.correct == 3);
    CHECK_NEAR(qkv_accuracy_rate(&a), 0.75, 1e-15);
    qkv_accuracy b = {0};
    qkv_accuracy_add(&b, pred, gold, 6, -1); /* count everything */
    CHECK(b.total == 6 && b.correct == 3);
    qkv_accuracy e = {0};
    CHECK(qkv_accuracy_rate(&e) == 0.0);
}
