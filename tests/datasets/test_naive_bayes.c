/* test_naive_bayes.c: the multinomial naive Bayes baseline (recipes/naive_bayes.c) on corpora
 * small enough for closed-form posteriors, its errors, and the precision / recall / F1 counters
 * (src/data/metrics.c). */
#include "data_testutil.h"
#include "recipes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static qkv_corpus *parse(const char *text) {
    qkv_corpus *c = NULL;
    CHECK_OK(qkv_corpus_parse(QKV_CORPUS_LABELED, text, strlen(text), "mini.tsv", NULL, &c));
    return c;
}

TEST(data_nb_closed_form) {
    /* class a: 2 documents, tokens x x y | x  -> n(x|a) 3, n(y|a) 1, n_a 4
     * class b: 1 document, tokens y z      -> n(y|b) 1, n(z|b) 1, n_b 2;   |V| = 3, alpha 1
     * P(x|a) = 4/7, P(z|a) = 1/7, P(x|b) = 1/5, P(z|b) = 2/5; P(a) = 2/3, P(b) = 1/3 */
    qkv_corpus *train = parse("a\tx x y\nb\ty z\na\tx\n");
    qkv_corpus *test = parse("a\tx z w\nb\tz z\nb\tw\n");
    qkv_nb *m;
    CHECK_OK(qkv_nb_train(train, 1.0, &m));
    CHECK(qkv_nb_num_classes(m) == 2 && qkv_nb_vocab_size(m) == 3);
    CHECK(!strcmp(qkv_nb_class_name(m, 0), "a") && !strcmp(qkv_nb_class_name(m, 1), "b"));
    CHECK(qkv_nb_class_name(m, 2) == NULL && qkv_nb_class_index(m, "b", 1) == 1 &&
          qkv_nb_class_index(m, "c", 1) == -1);
    int32_t label;
    double lp[2];
    /* "x z w" (w unseen, ignored): a 2/3 * 4/7 * 1/7 = 8/147, b 1/3 * 1/5 * 2/5 = 2/75
     * -> P(a | d) = 100/149 */
    CHECK_OK(qkv_nb_predict(m, test, 0, &label, lp));
    CHECK(label == 0);
    CHECK_NEAR(lp[0], log(100.0 / 149.0), 1e-12);
    CHECK_NEAR(lp[1], log(49.0 / 149.0), 1e-12);
    /* "z z": a 2/3 * 1/49 = 2/147, b 1/3 * 4/25 = 4/75 -> P(b | d) = 98/123 */
    CHECK_OK(qkv_nb_predict(m, test, 1, &label, lp));
    CHECK(label == 1);
    CHECK_NEAR(lp[1], log(98.0 / 123.0), 1e-12);
    CHECK_NEAR(lp[0], log(25.0 / 123.0), 1e-12);
    /* only unseen tokens: the prior */
    CHECK_OK(qkv_nb_predict(m, test, 2, &label, NULL));
    CHECK(label == 0);
    CHECK_OK(qkv_nb_predict(m, test, 2, &label, lp));
    CHECK_NEAR(lp[0], log(2.0 / 3.0), 1e-12);
    qkv_nb_free(m);
    /* alpha 0.5: P(x|a) = 3.5/5.5, P(z|a) = 0.5/5.5, P(x|b) = 0.5/3.5, P(z|b) = 1.5/3.5 */
    CHECK_OK(qkv_nb_train(train, 0.5, &m));
    CHECK_OK(qkv_nb_predict(m, test, 0, &label, lp));
    double sa = 2.0 / 3.0 * (3.5 / 5.5) * (0.5 / 5.5), sb = 1.0 / 3.0 * (0.5 / 3.5) * (1.5 / 3.5);
    CHECK_NEAR(lp[0], log(sa / (sa + sb)), 1e-12);
    qkv_nb_free(m);
    qkv_corpus_free(train);
    qkv_corpus_free(test);
}

TEST(data_nb_ties_and_order) {
    /* classes in byte order whatever the file order; equal scores go to the first class */
    qkv_corpus *train = parse("b\tx\na\ty\n");
    qkv_nb *m;
    CHECK_OK(qkv_nb_train(train, 1.0, &m));
    CHECK(!strcmp(qkv_nb_class_name(m, 0), "a"));
    int32_t label = -1;
    CHECK_OK(qkv_nb_predict(m, train, 0, &label, NULL)); /* "x": b */
    CHECK(label == 1);
    qkv_corpus *tie = parse("b\tw\n");
    CHECK_OK(qkv_nb_predict(m, tie, 0, &label, NULL)); /* unseen: priors 1/2, 1/2 */
    CHECK(label == 0);
    /* more classes than the predictor's stack buffer: 20 labels, each with its own token */
    char text[512] = "";
    for (int k = 0; k < 20; k++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "c%02d\tt%d t%d\n", k, k, k);
    qkv_corpus *many = parse(text);
    qkv_nb *mm;
    CHECK_OK(qkv_nb_train(many, 1.0, &mm));
    CHECK(qkv_nb_num_classes(mm) == 20);
    int ok = 0;
    for (int64_t i = 0; i < 20; i++) {
        CHECK_OK(qkv_nb_predict(mm, many, i, &label, NULL));
        ok += label == i;
    }
    CHECK(ok == 20);
    qkv_nb_free(mm);
    qkv_corpus_free(many);
    qkv_corpus_free(tie);
    qkv_nb_free(m);
    qkv_corpus_free(train);
}

TEST(data_nb_errors) {
    qkv_corpus *train = parse("a\tx\n");
    qkv_nb *m = NULL;
    CHECK(qkv_nb_train(train, 0.0, &m) == QKV_ERR_INVALID_ARG && m == NULL);
    CHECK(strstr(qkv_last_error(), "alpha is 0, must be positive"));
    CHECK(qkv_nb_train(train, NAN, &m) == QKV_ERR_INVALID_ARG);
    CHECK(qkv_nb_train(NULL, 1.0, &m) == QKV_ERR_INVALID_ARG);
    qkv_corpus *pairs = NULL;
    CHECK_OK(qkv_corpus_parse(QKV_CORPUS_PAIRS, "ab\tA B\n", 7, "p.tsv", NULL, &pairs));
    CHECK(qkv_nb_train(pairs, 1.0, &m) == QKV_ERR_INVALID_ARG);
    CHECK(strstr(qkv_last_error(), "p.tsv is not a labeled corpus"));
    /* a reserved label never reaches the classifier: the reader refuses it */
    qkv_corpus *reserved = NULL;
    CHECK_ERR(qkv_corpus_parse(QKV_CORPUS_LABELED, "a\tx\n<pad>\ty\n", 12, "mini.tsv", NULL, &reserved),
              QKV_ERR_FORMAT, "mini.tsv:2: '<pad>' in the label is a reserved symbol");
    CHECK(reserved == NULL);
    CHECK_OK(qkv_nb_train(train, 1.0, &m));
    int32_t label;
    CHECK(qkv_nb_predict(m, train, 1, &label, NULL) == QKV_ERR_INVALID_ARG);
    CHECK(qkv_nb_predict(m, pairs, 0, &label, NULL) == QKV_ERR_INVALID_ARG);
    qkv_nb_free(m);
    qkv_nb_free(NULL);
    qkv_corpus_free(reserved);
    qkv_corpus_free(pairs);
    qkv_corpus_free(train);
}

TEST(data_prf_counts) {
    /* positive 1: tp 2 (i 0, 3), fp 1 (i 1), fn 2 (i 2, 5); i 4 a true negative */
    const int32_t pred[6] = {1, 1, 0, 1, 0, 0}, gold[6] = {1, 0, 1, 1, 0, 1};
    qkv_prf m = {0};
    qkv_prf_add(&m, pred, gold, 6, 1);
    CHECK(m.tp == 2 && m.fp == 1 && m.fn == 2);
    CHECK_NEAR(qkv_precision(&m), 2.0 / 3.0, 1e-15);
    CHECK_NEAR(qkv_recall(&m), 0.5, 1e-15);
    CHECK_NEAR(qkv_f1(&m), 2.0 * (2.0 / 3.0) * 0.5 / (2.0 / 3.0 + 0.5), 1e-15);
    qkv_prf none = {0};
    qkv_prf_add(&none, pred, gold, 6, 7); /* no such class */
    CHECK(qkv_precision(&none) == 0 && qkv_recall(&none) == 0 && qkv_f1(&none) == 0);
}
