/* test_ngram_lm.c: the plain-text corpus reader (QKV_CORPUS_TEXT: characters, words, pieces of
 * long lines) and the interpolated Kneser-Ney n-gram baseline (recipes/ngram_lm.c): a bigram
 * model small enough to compute by hand, probabilities that sum to one over the vocabulary for
 * every history, and the figures of scripts/ngram_reference.py (an independent Python
 * implementation) on its synthetic text, orders 1 to 5. */
#include "data_testutil.h"
#include "recipes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static qkv_corpus *parse_text(const char *text, const qkv_read_opts *o) {
    qkv_corpus *c = NULL;
    CHECK_OK(qkv_corpus_parse(QKV_CORPUS_TEXT, text, strlen(text), "t.txt", o, &c));
    return c;
}

static bool symbol_is(const qkv_corpus *c, int64_t i, int64_t k, const char *want) {
    size_t len = 0;
    const char *s = qkv_corpus_symbol(c, i, QKV_FIELD_TGT, k, &len);
    return s && len == strlen(want) && !memcmp(s, want, len);
}

TEST(data_text_corpus_characters_words_and_pieces) {
    /* characters: every UTF-8 character, spaces and TABs included; a blank line is an empty text */
    qkv_corpus *c = parse_text("a b\n\nh\xC3\xA9\tx\n", NULL);
    CHECK(qkv_corpus_size(c) == 3);
    CHECK(qkv_corpus_length(c, 0, QKV_FIELD_TGT) == 3 &&
          qkv_corpus_length(c, 0, QKV_FIELD_SRC) == 0);
    CHECK(symbol_is(c, 0, 1, " ") && qkv_corpus_length(c, 1, QKV_FIELD_TGT) == 0);
    CHECK(qkv_corpus_length(c, 2, QKV_FIELD_TGT) == 4 && symbol_is(c, 2, 1, "\xC3\xA9") &&
          symbol_is(c, 2, 2, "\t"));
    CHECK(qkv_corpus_line(c, 1) == 2 && qkv_corpus_line(c, 2) == 3);
    size_t kl = 0;
    const char *key = qkv_corpus_key(c, 2, &kl);
    CHECK(key && kl == 5 && !memcmp(key, "h\xC3\xA9\tx", 5));
    qkv_corpus_free(c);
    /* words: runs of bytes other than space and TAB */
    c = parse_text("  the  cat\tsat \n \n", &(qkv_read_opts){.text_words = true});
    CHECK(qkv_corpus_size(c) == 2 && qkv_corpus_length(c, 0, QKV_FIELD_TGT) == 3);
    CHECK(symbol_is(c, 0, 0, "the") && symbol_is(c, 0, 1, "cat") && symbol_is(c, 0, 2, "sat"));
    CHECK(qkv_corpus_length(c, 1, QKV_FIELD_TGT) == 0);
    qkv_corpus_free(c);
    /* pieces: 7 characters in pieces of 3 -> 3 + 3 + 1, all on line 2, keys their text */
    c = parse_text("ab\nabcdefg\nxyz\n", &(qkv_read_opts){.text_chunk = 3});
    CHECK(qkv_corpus_size(c) == 5);
    const int64_t lens[5] = {2, 3, 3, 1, 3}, lines[5] = {1, 2, 2, 2, 3};
    for (int64_t i = 0; i < 5; i++)
        CHECK_MSG(qkv_corpus_length(c, i, QKV_FIELD_TGT) == lens[i] &&
                      qkv_corpus_line(c, i) == lines[i],
                  "example %lld", (long long)i);
    key = qkv_corpus_key(c, 2, &kl);
    CHECK(key && kl == 3 && !memcmp(key, "def", 3) && symbol_is(c, 3, 0, "g"));
    qkv_corpus_free(c);
    c = parse_text("one two three four five\n",
                   &(qkv_read_opts){.text_words = true, .text_chunk = 2});
    CHECK(qkv_corpus_size(c) == 3 && symbol_is(c, 1, 0, "three") && symbol_is(c, 2, 0, "five"));
    key = qkv_corpus_key(c, 1, &kl);
    CHECK(key && kl == 10 && !memcmp(key, "three four", 10));
    qkv_corpus_free(c);
    /* errors: over-long line without pieces, invalid UTF-8, CR */
    c = NULL;
    const char *text = "ok\ntoo long\n";
    CHECK_ERR(qkv_corpus_parse(QKV_CORPUS_TEXT, text, strlen(text), "t.txt",
                               &(qkv_read_opts){.max_tgt_len = 4}, &c),
              QKV_ERR_FORMAT, "t.txt:2: the text has 8 characters, more than the maximum 4");
    text = "ok\nbad \xC3(\n";
    CHECK_ERR(qkv_corpus_parse(QKV_CORPUS_TEXT, text, strlen(text), "t.txt", NULL, &c),
              QKV_ERR_FORMAT, "t.txt:2: invalid UTF-8 at column 5");
    text = "crlf\r\n";
    CHECK_ERR(qkv_corpus_parse(QKV_CORPUS_TEXT, text, strlen(text), "t.txt", NULL, &c),
              QKV_ERR_FORMAT, "t.txt:1:");
    CHECK(c == NULL);
}

/* ln P(w | history) of m with the history given as symbols ("<bos>" for <bos>). */
static double logp(const qkv_ngram *m, const char *const *hist, int n, const char *w) {
    const qkv_vocab *v = qkv_ngram_vocab(m);
    int32_t ids[8];
    for (int i = 0; i < n; i++)
        ids[i] = qkv_vocab_find(v, hist[i], strlen(hist[i]));
    double lp = NAN;
    CHECK_OK(qkv_ngram_logprob(m, ids, n, qkv_vocab_find(v, w, strlen(w)), &lp));
    return lp;
}

TEST(data_ngram_closed_form) {
    /* lines "ab" and "b": events (<bos> a) (a b) (b <eos>) (<bos> b) (b <eos>); V = 4
     * (<unk> <eos> a b). Order 1: raw counts a 1, b 2, <eos> 2 -> D = 1 / (1 + 2 * 2) = 0.2,
     * P(a) = (0.8 + 0.2 * 3 / 4) / 5 = 0.19, P(b) = P(<eos>) = 0.39, P(<unk>) = 0.03. */
    qkv_corpus *train = parse_text("ab\nb\n", NULL);
    qkv_ngram *m = NULL;
    CHECK_OK(qkv_ngram_train(train, 1, &m));
    CHECK(qkv_ngram_vocab_size(m) == 4 && qkv_ngram_order(m) == 1);
    CHECK_NEAR(qkv_ngram_discount(m, 1), 0.2, 1e-15);
    const char *bos[] = {"<bos>"}, *a[] = {"a"}, *b[] = {"b"};
    CHECK_NEAR(logp(m, NULL, 0, "a"), log(0.19), 1e-14);
    CHECK_NEAR(logp(m, a, 1, "b"), log(0.39), 1e-14); /* the history does not matter */
    CHECK_NEAR(logp(m, NULL, 0, "<eos>"), log(0.39), 1e-14);
    CHECK_NEAR(logp(m, NULL, 0, "<unk>"), log(0.03), 1e-14);
    qkv_ngram_free(m);
    /* Order 2: bigrams (raw) <bos>a 1, ab 1, b<eos> 2, <bos>b 1 -> D2 = 3 / 5; unigrams
     * (continuation counts) a 1, b 2, <eos> 1 -> D1 = 2 / 4. P1(a) = (0.5 + 0.5 * 3 / 4) / 4 =
     * 0.21875, P1(b) = 0.46875, P1(<eos>) = 0.21875, P1(<unk>) = 0.09375;
     * P(b | a) = 0.4 + 0.6 P1(b) = 0.68125; P(a | <bos>) = (0.4 + 0.6 * 2 * P1(a)) / 2 = 0.33125;
     * P(b | <bos>) = (0.4 + 1.2 P1(b)) / 2 = 0.48125; P(<eos> | b) = (1.4 + 0.6 P1(<eos>)) / 2 =
     * 0.765625; an unseen context (<unk>) falls back to P1. */
    CHECK_OK(qkv_ngram_train(train, 2, &m));
    CHECK_NEAR(qkv_ngram_discount(m, 2), 0.6, 1e-15);
    CHECK_NEAR(qkv_ngram_discount(m, 1), 0.5, 1e-15);
    CHECK_NEAR(logp(m, a, 1, "b"), log(0.68125), 1e-14);
    CHECK_NEAR(logp(m, bos, 1, "a"), log(0.33125), 1e-14);
    CHECK_NEAR(logp(m, bos, 1, "b"), log(0.48125), 1e-14);
    CHECK_NEAR(logp(m, b, 1, "<eos>"), log(0.765625), 1e-14);
    CHECK_NEAR(logp(m, b, 1, "a"), log(0.6 * 0.21875 / 2), 1e-14);
    const char *unk[] = {"<unk>"};
    CHECK_NEAR(logp(m, unk, 1, "b"), log(0.46875), 1e-14);
    double nats = 0;
    int64_t events = 0;
    CHECK_OK(qkv_ngram_score(m, train, &nats, &events));
    CHECK(events == 5);
    CHECK_NEAR(nats, -log(0.33125 * 0.68125 * 0.765625 * 0.48125 * 0.765625), 1e-12);
    qkv_ngram_free(m);
    /* errors */
    qkv_corpus *pairs = NULL;
    CHECK_OK(qkv_corpus_parse(QKV_CORPUS_PAIRS, "a\tb\n", 4, "p.tsv", NULL, &pairs));
    CHECK_ERR(qkv_ngram_train(pairs, 2, &m), QKV_ERR_INVALID_ARG, "not a text corpus");
    CHECK_ERR(qkv_ngram_train(train, 0, &m), QKV_ERR_INVALID_ARG, "order 0");
    qkv_corpus_free(pairs);
    qkv_corpus_free(train);
}

static qkv_corpus *read_fixture(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", qkv_test_data_dir(), name);
    qkv_corpus *c = NULL;
    CHECK_OK(qkv_corpus_read(QKV_CORPUS_TEXT, path, NULL, &c));
    return c;
}

TEST(data_ngram_matches_python_reference_and_normalises) {
    qkv_corpus *train = read_fixture("ngram_train.txt"), *eval = read_fixture("ngram_eval.txt");
    char path[1024], line[1024];
    snprintf(path, sizeof path, "%s/ngram_reference.tsv", qkv_test_data_dir());
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f || !train || !eval) return;
    int orders = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        char *p = line;
        const int order = (int)strtol(p, &p, 10);
        const long long want_events = strtoll(p, &p, 10);
        const double want_nats = strtod(p, &p);
        qkv_ngram *m = NULL;
        CHECK_OK(qkv_ngram_train(train, order, &m));
        for (int k = 1; k <= order; k++)
            CHECK_NEAR(qkv_ngram_discount(m, k), strtod(p, &p), 1e-15);
        double nats = 0;
        int64_t events = 0;
        CHECK_OK(qkv_ngram_score(m, eval, &nats, &events));
        CHECK_MSG(events == want_events, "order %d: %lld events, Python %lld", order,
                  (long long)events, want_events);
        CHECK_MSG(fabs(nats - want_nats) <= 1e-10 * want_nats, "order %d: %.17g nats, Python %.17g",
                  order, nats, want_nats);
        /* every history of the eval text: the probabilities of the V symbols sum to 1 */
        const qkv_vocab *v = qkv_ngram_vocab(m);
        int32_t hist[64];
        for (int64_t i = 0; i < qkv_corpus_size(eval) && i < 12; i++) {
            int64_t n = 0;
            hist[n++] = QKV_VOCAB_BOS;
            for (int64_t k = 0; k < qkv_corpus_length(eval, i, QKV_FIELD_TGT) && n < 64; k++) {
                size_t len = 0;
                const char *s = qkv_corpus_symbol(eval, i, QKV_FIELD_TGT, k, &len);
                const int32_t id = qkv_vocab_find(v, s, len);
                hist[n++] = id < QKV_VOCAB_RESERVED ? QKV_VOCAB_UNK : id;
            }
            for (int64_t j = 1; j <= n; j++) {
                double sum = 0, lp = 0;
                for (int32_t w = QKV_VOCAB_UNK; w < qkv_vocab_size(v); w++) {
                    if (w == QKV_VOCAB_BOS) continue;
                    CHECK_OK(qkv_ngram_logprob(m, hist, j, w, &lp));
                    sum += exp(lp);
                }
                CHECK_MSG(fabs(sum - 1) < 1e-12, "order %d, line %lld, history %lld: sum %.17g",
                          order, (long long)i, (long long)j, sum);
            }
        }
        qkv_ngram_free(m);
        orders++;
    }
    fclose(f);
    CHECK(orders == 5);
    qkv_corpus_free(train);
    qkv_corpus_free(eval);
}
