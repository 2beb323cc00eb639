/* test_dict_baseline.c: qkv_dict (recipes/dict_baseline.c), the word-for-word translation with a
 * FreeDict dictionary, on a hand-made dictionary in dictd's format (tests/data/freedict/
 * eng-spa.{index,dict}: a metadata entry, two entries for "the" and for "a" (The Hague's and a
 * truncated multi-word one, both to be passed over), numbered senses, annotations, an entry with
 * annotations only in its first sense, one without pronunciation, a multi-word headword):
 * translations byte for byte, de-inflection, punctuation and case; then corrupt files, each
 * refused with its file and line. The CLI's test is in test_cli_data.c. */
#include "data_testutil.h"
#include "recipes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static qkv_dict *load_test_dict(void) {
    char *dir = dt_join(QKV_TEST_DATA_DIR, "freedict");
    char *index = dt_join(dir, "eng-spa.index"), *dict = dt_join(dir, "eng-spa.dict");
    qkv_dict *d = NULL;
    CHECK_OK(qkv_dict_load(index, dict, &d));
    free(index);
    free(dict);
    free(dir);
    return d;
}

/* text translated with d is want (and counts the words). */
static void check_translation(const qkv_dict *d, const char *text, const char *want,
                              int64_t words, int64_t found) {
    char *out = NULL;
    size_t len = 0;
    qkv_dict_counts k = {0};
    CHECK_OK(qkv_dict_translate(d, text, strlen(text), "t", &out, &len, &k));
    CHECK_MSG(out && !strcmp(out, want) && len == strlen(want), "'%s' -> '%s', want '%s'", text,
              out ? out : "(null)", want);
    CHECK_MSG(k.words == words && k.translated == found, "'%s': %lld words, %lld found", text,
              (long long)k.words, (long long)k.translated);
    free(out);
}

static void check_lookup(const qkv_dict *d, const char *key, const char *want) {
    size_t n = 0;
    const char *t = qkv_dict_lookup(d, key, strlen(key), &n);
    if (!want)
        CHECK_MSG(!t, "'%s' is a headword", key);
    else
        CHECK_MSG(t && n == strlen(want) && !memcmp(t, want, n), "'%s' -> '%.*s', want '%s'", key,
                  t ? (int)n : 6, t ? t : "(none)", want);
}

TEST(dict_baseline_entries) {
    qkv_dict *d = load_test_dict();
    if (!d) return;
    CHECK(qkv_dict_size(d) == 20); /* 23 index lines: the metadata, two "the", two "a" */
    check_lookup(d, "the", "el");        /* the entry written "the", not "The" (La Haya) */
    check_lookup(d, "a", "un");          /* the shortest pronunciation, "(indef.)" removed */
    check_lookup(d, "word", "palabra");  /* first sense, first translation, "<f>" removed */
    check_lookup(d, "only", "s\xc3\xb3lo"); /* the first sense has annotations only */
    check_lookup(d, "god", "Dios");
    check_lookup(d, "success", "\xc3\xa9xito"); /* no pronunciation */
    check_lookup(d, "xrays", "rayos X");
    check_lookup(d, "in front of", "delante de");
    check_lookup(d, "00databaseinfo", NULL);
    check_lookup(d, "The", NULL); /* keys are lower case */
    check_lookup(d, "cities", NULL); /* lookup is exact: de-inflection is translation's */
    qkv_dict_free(d);
}

TEST(dict_baseline_translate) {
    qkv_dict *d = load_test_dict();
    if (!d) return;
    /* case: the first letter follows the word's; the key is lower case */
    check_translation(d, "The word of God.", "El palabra de Dios.", 4, 4);
    check_translation(d, "THE Word OF god", "El Palabra De Dios", 4, 4);
    check_translation(d, "Success and Only.", "\xc3\x89xito and S\xc3\xb3lo.", 3, 2);
    /* de-inflection: -ies, -es, -ied, -ed, -ed -> -e, doubled consonants, -ing -> -e, -eth,
     * -est; unknown words kept */
    check_translation(d, "A city; two cities, the boxes!", "Un ciudad; two ciudad, el caja!", 6,
                      5);
    check_translation(d,
                      "He carried, walked, loved, stopped, making, running, goes, cometh, "
                      "walkest.",
                      "He llevar, andar, amar, parar, hacer, correr, ir, venir, andar.", 10, 9);
    check_translation(d, "walks loves stops", "andar amar parar", 3, 3);
    check_translation(d, "ss bs es", "ss bs es", 3, 0); /* no stem under 2 bytes */
    /* apostrophes inside a word join it (the key drops them); at its end they are punctuation;
     * a hyphen separates words */
    check_translation(d, "God's light\xe2\x80\x99s X-rays", "Dios luz X-rays", 4, 2);
    check_translation(d, "boxes' light'", "caja' luz'", 2, 2);
    /* blanks, punctuation, other characters and letters outside the dictionary kept as they are */
    check_translation(d, "Jud\xc3\xa6" "a\xe2\x80\x99 caf\xc3\xa9 \xc3\x97", "Jud\xc3\xa6" "a\xe2\x80\x99 caf\xc3\xa9 \xc3\x97", 2, 0);
    check_translation(d, "the\t  word  \r", "el\t  palabra  \r", 2, 2);
    check_translation(d, "", "", 0, 0);
    check_translation(d, "(of)[the]{a}", "(de)[el]{un}", 3, 3);
    /* multi-word headwords are not matched: word for word */
    check_translation(d, "in front of", "in front de", 3, 1);
    /* invalid UTF-8 is refused with the place */
    char *out = (char *)"x";
    CHECK_ERR(qkv_dict_translate(d, "the caf\xe9", 8, "in.txt:3", &out, NULL, NULL),
              QKV_ERR_FORMAT, "in.txt:3: invalid UTF-8 (byte 0xE9 at column 8)");
    CHECK(out == NULL);
    /* control characters are kept, and do not end the check (found by fuzz_freedict) */
    check_translation(d, "the\001word", "el\001palabra", 2, 2);
    CHECK_ERR(qkv_dict_translate(d, "a\001b \xc9\xe0", 6, "in.txt:4", &out, NULL, NULL),
              QKV_ERR_FORMAT, "in.txt:4: invalid UTF-8 (byte 0xC9 at column 5)");
    qkv_dict_free(d);
}

/* The index and dict given, loading fails with status and a message containing needle, where
 * "%1$s" is the index path and "%2$s" the dict path. */
static void dict_fails(const char *index, long index_len, const char *dict, qkv_status status,
                       const char *needle) {
    char *dir = dt_tmpdir();
    CHECK(dt_write(dir, "eng-spa.index", index, index_len));
    CHECK(dt_write(dir, "eng-spa.dict", dict, -1));
    char *ip = dt_join(dir, "eng-spa.index"), *dp = dt_join(dir, "eng-spa.dict");
    char want[1024];
    snprintf(want, sizeof want, needle, ip, dp);
    qkv_dict *d = (qkv_dict *)ip;
    CHECK_ERR(qkv_dict_load(ip, dp, &d), status, want);
    CHECK(d == NULL);
    free(ip);
    free(dp);
    dt_rmtree(dir);
}

TEST(dict_baseline_corrupt) {
    /* the dict: "the /ð/\nel\n" at 0 (12 bytes: ð is two), "word\npalabra\n" at 12 (13 bytes) */
    static const char *const dict = "the /\xc3\xb0/\nel\nword\npalabra\n";
    static const struct {
        const char *index, *dict, *needle;
    } bad[] = {
        {"the\tA\tM\nword\n", NULL,
         "%1$s:2: expected 'headword<TAB>offset<TAB>length' (dictd's index), got 'word'"},
        {"the\tA\tM\n\tM\tN\n", NULL, "%1$s:2: expected 'headword<TAB>offset<TAB>length'"},
        {"the\tA\tM\n\n", NULL, "%1$s:2: expected 'headword<TAB>offset<TAB>length'"},
        {"the\tA\tM\nword\tM!\tN\n", NULL,
         "%1$s:2: offset or length of 'word' is not a dictd base64 number"},
        {"the\tA\t\n", NULL, "%1$s:1: offset or length of 'the' is not a dictd base64 number"},
        {"the\tAAAAAAAAAAA\tM\n", NULL, "is not a dictd base64 number"}, /* 11 digits */
        {"the\tA\tM\nword\tM\tO\n", NULL,
         "%1$s:2: the entry of 'word' (offset 12, length 14) is past the end of %2$s (25 bytes)"},
        {"the\t////\tB\n", NULL, "%1$s:1: the entry of 'the' (offset 16777215, length 1) is past"},
        {"the\tA\tA\n", NULL, "%1$s:1: the entry of 'the' (offset 0, length 0) is empty in"},
        {"the\tA\tM\nword\tA\tN\n", NULL,
         "%1$s:2: the entry of 'word' (offset 0, length 13) starts with 'the /\\xc3\\xb0/' at "
         "%2$s:1, another headword"},
        {"the\tA\tI\n", NULL, "%1$s:1: the entry of 'the' at %2$s:1 has no translation"},
        {"word\tM\tF\n", NULL, "%1$s:1: the entry of 'word' at %2$s:3 has no translation"},
        {"the\tA\tM\nw\xe9rd\tM\tN\n", NULL, "%1$s:2: invalid UTF-8 (byte 0xE9 at column 2)"},
        {"the\tA\tM\nwo\001rd\tM\tN\n", NULL, "%1$s:2: control character (byte 0x01 at column 3)"},
        {"word\tA\tM\n", "word\nalbah\xe1\n", "%2$s:2: invalid UTF-8 (byte 0xE1 at column 6) in the "
                                              "entry of 'word' (%1$s:1)"},
        {"word\tA\tN\n", "word\npala\033ra\n", "%2$s:2: control character (byte 0x1B at column 5) in the entry of 'word' (%1$s:1)"},
        {"", NULL, "%1$s: no headword with a translation"},
        {"00databaseinfo\tA\tM\n", NULL, "%1$s: no headword with a translation"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        dict_fails(bad[i].index, -1, bad[i].dict ? bad[i].dict : dict, QKV_ERR_FORMAT,
                   bad[i].needle);
    /* a good pair of these files loads; an index field after the length is ignored */
    char *dir = dt_tmpdir();
    CHECK(dt_write(dir, "eng-spa.index", "the\tA\tM\nword\tM\tN\tWord\n", -1));
    CHECK(dt_write(dir, "eng-spa.dict", dict, -1));
    char *ip = dt_join(dir, "eng-spa.index"), *dp = dt_join(dir, "eng-spa.dict");
    qkv_dict *d = NULL;
    CHECK_OK(qkv_dict_load(ip, dp, &d));
    CHECK(qkv_dict_size(d) == 2);
    check_lookup(d, "word", "palabra");
    qkv_dict_free(d);
    /* a missing file is an I/O error naming it */
    char want[1024], *missing = dt_join(dir, "nothing.dict");
    snprintf(want, sizeof want, "%s: cannot open", missing);
    CHECK_ERR(qkv_dict_load(ip, missing, &d), QKV_ERR_IO, want);
    CHECK_ERR(qkv_dict_load(missing, dp, &d), QKV_ERR_IO, want);
    CHECK_ERR(qkv_dict_load(NULL, dp, &d), QKV_ERR_INVALID_ARG, "NULL argument");
    free(missing);
    free(ip);
    free(dp);
    dt_rmtree(dir);
}
