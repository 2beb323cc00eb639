/* test_split.c: the FNV-1a split rule (src/data/split.c) against published FNV test vectors and
 * values computed from the formula, and the shipped split files (data/g2p, data/digits, data/spam)
 * against the counts of docs/data.md sections "Counts" and "Spam vs ham" and the split rule. */
#include "data_testutil.h"

#include <stdlib.h>
#include <string.h>

TEST(data_fnv1a32_known_values) {
    /* Offset basis, and the FNV-1a 32 test vectors of the FNV reference suite. */
    CHECK(qkv_fnv1a32("", 0) == 0x811C9DC5u);
    CHECK(qkv_fnv1a32("a", 1) == 0xE40C292Cu);
    CHECK(qkv_fnv1a32("foobar", 6) == 0xBF9CF968u);
    /* "a" by hand: (0x811C9DC5 ^ 0x61) * 0x01000193 mod 2^32 */
    uint32_t h = (0x811C9DC5u ^ 0x61u) * 0x01000193u;
    CHECK(h == 0xE40C292Cu);
    /* keys of the three data sets (computed with the formula of docs/data.md) */
    CHECK(qkv_fnv1a32("ca01.0", 6) == 0x5C7E0740u);
    CHECK(qkv_fnv1a32("1796", 4) == 0xB2D4926Au); /* the last digits row: bucket 62, train */
    CHECK(qkv_fnv1a32("10", 2) == 0x1BEB2A44u);
    /* bytes, not characters: a NUL inside the key counts */
    CHECK(qkv_fnv1a32("a\0b", 3) == 0x10F3ABD2u);
    /* bytes >= 0x80 are taken unsigned: 0xFF ^ basis */
    CHECK(qkv_fnv1a32("\xff", 1) == (uint32_t)((0x811C9DC5u ^ 0xFFu) * 0x01000193u));
}

TEST(data_split_of_boundaries) {
    /* buckets: "" 61, "a" 20, "or" 88, "us" 89, "do" 92, "ca01.1" 83, "3" 82, "16" 74 */
    CHECK(qkv_split_of("", 0, 88, 90) == QKV_SPLIT_TRAIN);
    CHECK(qkv_split_of("a", 1, 88, 90) == QKV_SPLIT_TRAIN);
    CHECK(qkv_split_of("or", 2, 88, 90) == QKV_SPLIT_DEV);
    CHECK(qkv_split_of("us", 2, 88, 90) == QKV_SPLIT_DEV);
    CHECK(qkv_split_of("do", 2, 88, 90) == QKV_SPLIT_TEST);
    CHECK(qkv_split_of("or", 2, 89, 90) == QKV_SPLIT_TRAIN); /* bucket 88 < 89 */
    CHECK(qkv_split_of("ca01.1", 6, 80, 90) == QKV_SPLIT_DEV);
    CHECK(qkv_split_of("3", 1, 70, 80) == QKV_SPLIT_TEST);
    CHECK(qkv_split_of("16", 2, 70, 80) == QKV_SPLIT_DEV);
    CHECK(qkv_split_of("a", 1, 0, 0) == QKV_SPLIT_TEST);
    CHECK(qkv_split_of("a", 1, 100, 100) == QKV_SPLIT_TRAIN);
    CHECK(!strcmp(qkv_split_name(QKV_SPLIT_TRAIN), "train"));
    CHECK(!strcmp(qkv_split_name(QKV_SPLIT_DEV), "dev"));
    CHECK(!strcmp(qkv_split_name(QKV_SPLIT_TEST), "test"));
}

/* Read a shipped file; SKIP-worthy only if the checkout lacks data/ (never in this repo). */
static qkv_corpus *shipped(qkv_corpus_kind kind, const char *rel) {
    char *p = dt_join(dt_repo_root(), rel);
    qkv_corpus *c = NULL;
    CHECK_OK(qkv_corpus_read(kind, p, NULL, &c));
    free(p);
    return c;
}

TEST(data_shipped_g2p_splits) {
    /* docs/data.md "Counts": no-stress pronunciations 118,578 / 2,734 / 13,540, words 110,863 /
     * 2,537 / 12,646, words with > 1 reference 7,159 / 183 / 833 */
    static const char *const files[3] = {"data/g2p/cmudict.nostress.train.tsv",
                                         "data/g2p/cmudict.nostress.dev.tsv",
                                         "data/g2p/cmudict.nostress.test.tsv"};
    const int64_t prons[3] = {118578, 2734, 13540}, words[3] = {110863, 2537, 12646},
                  multi[3] = {7159, 183, 833};
    for (int s = 0; s < 3; s++) {
        qkv_corpus *c = shipped(QKV_CORPUS_PAIRS, files[s]);
        if (!c) continue;
        CHECK(qkv_corpus_size(c) == prons[s]);
        qkv_groups g;
        CHECK_OK(qkv_corpus_groups(c, &g));
        CHECK(g.n == words[s]);
        int64_t m = 0, outside = 0, unsorted = 0, longest_w = 0, longest_p = 0;
        for (int64_t k = 0; k < g.n; k++) {
            m += g.start[k + 1] - g.start[k] > 1;
            size_t len, plen = 0;
            const char *w = qkv_corpus_key(c, g.start[k], &len);
            outside += qkv_split_of(w, len, 88, 90) != (qkv_split)s;
            if (k) {
                const char *p = qkv_corpus_key(c, g.start[k - 1], &plen);
                size_t n = len < plen ? len : plen;
                int cmp = memcmp(p, w, n);
                unsorted += cmp > 0 || (cmp == 0 && plen > len);
            }
            if ((int64_t)len > longest_w) longest_w = (int64_t)len;
        }
        for (int64_t i = 0; i < qkv_corpus_size(c); i++)
            if (qkv_corpus_length(c, i, QKV_FIELD_TGT) > longest_p)
                longest_p = qkv_corpus_length(c, i, QKV_FIELD_TGT);
        CHECK_MSG(m == multi[s], "%s: %lld multi-reference words", files[s], (long long)m);
        CHECK_MSG(outside == 0, "%s: %lld words outside the split", files[s], (long long)outside);
        CHECK_MSG(unsorted == 0, "%s: %lld words out of order", files[s], (long long)unsorted);
        if (s == 0) CHECK(longest_w == 28 && longest_p == 28); /* both maxima are in train */
        /* 29 characters, 39 phones (train holds them all) */
        qkv_vocab *vs, *vt;
        CHECK_OK(qkv_vocab_build(c, QKV_FIELD_SRC, 1, true, &vs));
        CHECK_OK(qkv_vocab_build(c, QKV_FIELD_TGT, 1, true, &vt));
        if (s == 0) CHECK(qkv_vocab_size(vs) == 4 + 29 && qkv_vocab_size(vt) == 4 + 39);
        qkv_vocab_free(vs);
        qkv_vocab_free(vt);
        qkv_groups_free(&g);
        qkv_corpus_free(c);
    }
    char *lic = dt_read(dt_repo_root(), "data/g2p/LICENSE.cmudict", NULL);
    CHECK(lic && strstr(lic, "Copyright (C) 1993-2015 Carnegie Mellon University"));
    free(lic);
}

TEST(data_shipped_digits_splits) {
    static const char *const files[3] = {"data/digits/digits.train.tsv",
                                         "data/digits/digits.dev.tsv",
                                         "data/digits/digits.test.tsv"};
    const int64_t images[3] = {1257, 189, 351};
    const int64_t per_class[3][10] = {{126, 133, 137, 129, 126, 122, 128, 119, 123, 114},
                                      {14, 18, 17, 24, 19, 23, 15, 22, 12, 25},
                                      {38, 31, 23, 30, 36, 37, 38, 38, 39, 41}};
    for (int s = 0; s < 3; s++) {
        qkv_corpus *c = shipped(QKV_CORPUS_LABELED, files[s]);
        if (!c) continue;
        qkv_dataset *d;
        CHECK_OK(qkv_dataset_encode(c, NULL, NULL, true, &d)); /* integers: ids as they are */
        CHECK(qkv_dataset_size(d) == images[s]);
        int64_t count[10] = {0}, bad = 0;
        for (int64_t i = 0; i < qkv_dataset_size(d); i++) {
            qkv_example e;
            CHECK_OK(qkv_dataset_get(d, i, &e));
            bad += e.src_len != 64 || e.tgt_len != 1 || e.tgt[0] > 9;
            for (int k = 0; k < e.src_len; k++)
                bad += e.src[k] > 16;
            if (e.tgt_len == 1 && e.tgt[0] <= 9) count[e.tgt[0]]++;
        }
        CHECK(bad == 0);
        for (int k = 0; k < 10; k++)
            CHECK_MSG(count[k] == per_class[s][k], "%s: class %d: %lld images", files[s], k,
                      (long long)count[k]);
        qkv_dataset_free(d);
        qkv_corpus_free(c);
    }
    char *lic = dt_read(dt_repo_root(), "data/digits/LICENSE.digits", NULL);
    CHECK(lic && strstr(lic, "BSD-3-Clause") && strstr(lic, "Scikit-Learn Developers"));
    free(lic);
}

/* A spam-file token: [a-z0-9']+ or one of ! $ ? <url> <email> <num> (docs/data.md). */
static bool spam_token_ok(const char *t, size_t n) {
    if (n == 1 && (t[0] == '!' || t[0] == '$' || t[0] == '?')) return true;
    if ((n == 5 && !memcmp(t, "<url>", 5)) || (n == 7 && !memcmp(t, "<email>", 7)) ||
        (n == 5 && !memcmp(t, "<num>", 5)))
        return true;
    for (size_t k = 0; k < n; k++)
        if (!((t[k] >= 'a' && t[k] <= 'z') || (t[k] >= '0' && t[k] <= '9') || t[k] == '\''))
            return false;
    return n > 0 && t[0] != '\'' && t[n - 1] != '\'';
}

TEST(data_shipped_spam_splits) {
    /* docs/data.md "Spam vs ham": messages 4,692 / 562 / 594, of which ham 3,282 / 406 / 417;
     * tokens 740,870 / 87,789 / 97,009; at most 256 tokens; no text twice in the three files */
    static const char *const files[3] = {"data/spam/spam.train.tsv", "data/spam/spam.dev.tsv",
                                         "data/spam/spam.test.tsv"};
    const int64_t messages[3] = {4692, 562, 594}, ham[3] = {3282, 406, 417},
                  tokens[3] = {740870, 87789, 97009};
    qkv_vocab *texts;
    CHECK_OK(qkv_vocab_new(&texts));
    int64_t dups = 0;
    for (int s = 0; s < 3; s++) {
        qkv_corpus *c = shipped(QKV_CORPUS_LABELED, files[s]);
        if (!c) continue;
        int64_t n_ham = 0, n_spam = 0, n_tok = 0, longest = 0, bad = 0;
        for (int64_t i = 0; i < qkv_corpus_size(c); i++) {
            size_t len;
            const char *label = qkv_corpus_symbol(c, i, QKV_FIELD_TGT, 0, &len);
            n_ham += len == 3 && !memcmp(label, "ham", 3);
            n_spam += len == 4 && !memcmp(label, "spam", 4);
            int64_t n = qkv_corpus_length(c, i, QKV_FIELD_SRC);
            n_tok += n;
            if (n > longest) longest = n;
            for (int64_t k = 0; k < n; k++) {
                const char *t = qkv_corpus_symbol(c, i, QKV_FIELD_SRC, k, &len);
                bad += !spam_token_ok(t, len);
            }
            const char *text = qkv_corpus_key(c, i, &len);
            int32_t before = qkv_vocab_size(texts);
            CHECK_OK(qkv_vocab_add(texts, text, len, NULL));
            dups += qkv_vocab_size(texts) == before;
        }
        CHECK_MSG(qkv_corpus_size(c) == messages[s] && n_ham == ham[s] &&
                      n_spam == messages[s] - ham[s],
                  "%s: %lld messages, %lld ham, %lld spam", files[s], (long long)qkv_corpus_size(c),
                  (long long)n_ham, (long long)n_spam);
        CHECK_MSG(n_tok == tokens[s], "%s: %lld tokens", files[s], (long long)n_tok);
        CHECK(longest == 256 && bad == 0);
        qkv_corpus_free(c);
    }
    CHECK_MSG(dups == 0, "%lld texts appear twice", (long long)dups);
    qkv_vocab_free(texts);
    char *lic = dt_read(dt_repo_root(), "data/spam/LICENSE.spam", NULL);
    CHECK(lic && strstr(lic, "Public Domain") && strstr(lic, "Creative Commons Zero v1.0"));
    free(lic);
}
