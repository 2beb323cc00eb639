/* test_word_features.c: the spelling features of words (src/data/word_features.c) against values
 * written out by hand from their definitions (spaCy's lower / prefix / suffix / word_shape), the
 * names, UTF-8 characters, and bad arguments. */
#include "data_testutil.h"

#include <string.h>

static void expect(qkv_word_feature f, const char *word, const char *want) {
    char out[256];
    size_t n = 99;
    CHECK_OK(qkv_word_feature_of(f, word, strlen(word), out, sizeof out, &n));
    CHECK_MSG(!strcmp(out, want) && n == strlen(want), "%s('%s') = '%s', expected '%s'",
              qkv_word_feature_name(f), word, out, want);
}

TEST(data_word_features_by_hand) {
    expect(QKV_FEAT_LOWER, "Atlanta's", "atlanta's");
    expect(QKV_FEAT_LOWER, "U.S.", "u.s.");
    expect(QKV_FEAT_PREFIX1, "Fulton", "f");
    expect(QKV_FEAT_PREFIX2, "Fulton", "fu");
    expect(QKV_FEAT_PREFIX3, "Fulton", "ful");
    expect(QKV_FEAT_PREFIX3, "an", "an"); /* shorter than N: the whole word */
    expect(QKV_FEAT_SUFFIX1, "irregularities", "s");
    expect(QKV_FEAT_SUFFIX2, "irregularities", "es");
    expect(QKV_FEAT_SUFFIX3, "irregularities", "ies");
    expect(QKV_FEAT_SUFFIX4, "irregularities", "ties");
    expect(QKV_FEAT_SUFFIX3, "Atlanta's", "a's");
    expect(QKV_FEAT_SUFFIX4, "The", "the");
    expect(QKV_FEAT_SUFFIX1, ".", ".");
    /* shapes (spaCy's word_shape) */
    expect(QKV_FEAT_SHAPE, "Atlanta's", "Xxxxx'x");
    expect(QKV_FEAT_SHAPE, "1960's", "dddd'x");
    expect(QKV_FEAT_SHAPE, "U.S.", "X.X.");
    expect(QKV_FEAT_SHAPE, "September-October", "Xxxxx-Xxxxx");
    expect(QKV_FEAT_SHAPE, "NATO", "XXXX");
    expect(QKV_FEAT_SHAPE, "UNESCO", "XXXX");
    expect(QKV_FEAT_SHAPE, "1,000,000", "d,ddd,ddd");
    expect(QKV_FEAT_SHAPE, "3.14159", "d.dddd");
    expect(QKV_FEAT_SHAPE, "......", "....");
    expect(QKV_FEAT_SHAPE, "``", "``");
    expect(QKV_FEAT_SHAPE, "iPhone", "xXxxxx");
    expect(QKV_FEAT_SHAPE, "a", "x");
}

TEST(data_word_features_utf8_and_long_words) {
    /* "café" = c a f \xc3\xa9: characters, not bytes */
    expect(QKV_FEAT_SUFFIX1, "Caf\xc3\xa9", "\xc3\xa9");
    expect(QKV_FEAT_SUFFIX2, "Caf\xc3\xa9", "f\xc3\xa9");
    expect(QKV_FEAT_PREFIX3, "\xc3\x89t\xc3\xa9",
           "\xc3\x89t\xc3\xa9"); /* not lower-cased: not ASCII */
    expect(QKV_FEAT_SHAPE, "Caf\xc3\xa9", "Xxx\xc3\xa9");
    expect(QKV_FEAT_SHAPE, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9",
           "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
    char w[120];
    memset(w, 'a', sizeof w - 1);
    w[99] = '\0'; /* 99 characters: a shape */
    expect(QKV_FEAT_SHAPE, w, "xxxx");
    w[99] = 'a';
    w[100] = '\0'; /* 100: LONG */
    expect(QKV_FEAT_SHAPE, w, "LONG");
}

TEST(data_word_features_names_and_errors) {
    for (int f = 0; f < QKV_FEAT_COUNT; f++)
        CHECK(qkv_word_feature_from_name(qkv_word_feature_name((qkv_word_feature)f)) == f);
    CHECK(!strcmp(qkv_word_feature_name(QKV_FEAT_SUFFIX3), "suffix3"));
    CHECK(qkv_word_feature_name(QKV_FEAT_COUNT) == NULL);
    CHECK(qkv_word_feature_from_name("suffix5") == -1 && qkv_word_feature_from_name(NULL) == -1);
    char out[8];
    size_t n;
    CHECK_ERR(qkv_word_feature_of(QKV_FEAT_LOWER, "", 0, out, sizeof out, &n), QKV_ERR_INVALID_ARG,
              "empty");
    CHECK_ERR(qkv_word_feature_of(QKV_FEAT_LOWER, "abcdefgh", 8, out, sizeof out, &n),
              QKV_ERR_INVALID_ARG, "needs 9");
    CHECK_ERR(qkv_word_feature_of(QKV_FEAT_COUNT, "a", 1, out, sizeof out, &n), QKV_ERR_INVALID_ARG,
              "unknown");
    CHECK_OK(qkv_word_feature_of(QKV_FEAT_SHAPE, "abcdefg", 7, out, sizeof out, &n));
    CHECK(n == 4 && !strcmp(out, "xxxx"));
}
