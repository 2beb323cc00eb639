/*
 * fuzz_freedict.c: libFuzzer target for qkv_dict (recipes/dict_baseline.c), the reader of a
 * FreeDict dictionary in dictd's format and the word-for-word translation of
 * `qkv data baseline mt-dict`.
 *
 * Input: eng-spa.index, a NUL byte, eng-spa.dict, a NUL byte, a text to translate (missing parts
 * are empty), the first two written as files.
 *
 * Invariants: loading succeeds or fails with a message (and no dictionary); after success the
 * dictionary has headwords; the text translates exactly when it is valid UTF-8, into valid UTF-8
 * of the length given, the same twice, with no more words found than read; a text without
 * letters or digits comes back unchanged; every word of the text that is a headword as it
 * stands (lower-case ASCII) comes back as its translation.
 */
#include "fuzz_util.h"

#include "recipes.h"

/* Well-formed UTF-8 (Unicode's table 3-7: no overlong forms, surrogates or code points above
 * U+10FFFF), written apart from the library's reader. */
static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                             : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xC0) != 0x80) return false;
        unsigned char c1 = k > 1 ? (unsigned char)s[i + 1] : 0;
        if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) || (c == 0xF0 && c1 < 0x90) ||
            (c == 0xF4 && c1 >= 0x90))
            return false;
        i += k;
    }
    return true;
}

static bool has_word_char(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80)
            return true;
    }
    return false;
}

/* text is a single lower-case ASCII word */
static bool plain_word(const char *s, size_t n) {
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9'))) return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    size_t n_index, n_dict, n_text;
    const char *index = fz_field(&r, 0, &n_index);
    const char *dict = fz_field(&r, 0, &n_dict);
    const char *text = fz_field(&r, 0, &n_text);
    fz_write_file(fz_path("eng-spa.index"), index, n_index);
    fz_write_file(fz_path("eng-spa.dict"), dict, n_dict);
    qkv_dict *d = (qkv_dict *)&r;
    qkv_status st = qkv_dict_load(fz_path("eng-spa.index"), fz_path("eng-spa.dict"), &d);
    if (st) {
        FZ_REQUIRE(d == NULL && qkv_last_error()[0] != '\0');
        return 0;
    }
    FZ_REQUIRE(d != NULL && qkv_dict_size(d) >= 1);
    char *out = NULL, *again = NULL;
    size_t len = 0, len2 = 0;
    qkv_dict_counts k = {0};
    st = qkv_dict_translate(d, text, n_text, "fuzz", &out, &len, &k);
    FZ_REQUIRE((st == QKV_OK) == valid_utf8(text, n_text));
    if (!st) {
        FZ_REQUIRE(out != NULL && out[len] == '\0' && valid_utf8(out, len));
        FZ_REQUIRE(k.translated >= 0 && k.translated <= k.words);
        FZ_REQUIRE(qkv_dict_translate(d, text, n_text, "fuzz", &again, &len2, NULL) == QKV_OK);
        FZ_REQUIRE(len2 == len && !memcmp(out, again, len));
        if (!has_word_char(text, n_text)) FZ_REQUIRE(len == n_text && !memcmp(out, text, len));
        size_t tl = 0;
        const char *t = plain_word(text, n_text) ? qkv_dict_lookup(d, text, n_text, &tl) : NULL;
        if (t) {
            FZ_REQUIRE(k.words == 1 && k.translated == 1);
            FZ_REQUIRE(len == tl && !memcmp(out, t, tl));
        }
        free(again);
    } else {
        FZ_REQUIRE(out == NULL);
    }
    free(out);
    qkv_dict_free(d);
    return 0;
}
