/*
 * word_features.c: the spelling features of a word (qkv_data.h), the inputs that let a tagger
 * guess the tag of a word it never saw: its lower-cased form, prefixes and suffixes of the
 * lower-cased form, and its shape. These are the lexical attributes of spaCy's MultiHashEmbed
 * (NORM, PREFIX, SUFFIX, SHAPE; spacy/lang/lex_attrs.py) and the spelling features of Huang, Xu
 * & Yu 2015 ("Bidirectional LSTM-CRF Models for Sequence Tagging", section 4.1).
 *
 *   lower        ASCII letters A-Z lower-cased, every other byte kept
 *   prefixN      the first N characters (UTF-8 code points) of lower; all of it when shorter
 *   suffixN      the last N characters of lower; all of it when shorter
 *   shape        spaCy's word_shape: each character mapped to X (ASCII upper-case letter),
 *                x (lower-case letter), d (digit) or itself, runs of one class cut after 4;
 *                "LONG" for words of 100 characters or more. "Atlanta's" -> "Xxxxx'x",
 *                "1960's" -> "dddd'x", "U.S." -> "X.X.". (spaCy classifies Unicode letters and
 *                digits too; here only ASCII ones are, other characters stand for themselves.)
 */
#include "data_internal.h"

static const char *const feature_names[QKV_FEAT_COUNT] = {
    "lower", "prefix1", "prefix2", "prefix3", "suffix1", "suffix2", "suffix3", "suffix4", "shape"};

const char *qkv_word_feature_name(qkv_word_feature f) {
    return (unsigned)f < QKV_FEAT_COUNT ? feature_names[f] : NULL;
}

int qkv_word_feature_from_name(const char *name) {
    for (int i = 0; name && i < QKV_FEAT_COUNT; i++)
        if (!strcmp(name, feature_names[i])) return i;
    return -1;
}

static bool is_continuation(unsigned char c) {
    return (c & 0xC0) == 0x80;
}

/* The byte length of the first n characters of s[0, len). */
static size_t first_chars(const char *s, size_t len, int n) {
    size_t i = 0;
    for (int k = 0; k < n && i < len; k++) {
        i++;
        while (i < len && is_continuation((unsigned char)s[i]))
            i++;
    }
    return i;
}

/* The byte offset where the last n characters of s[0, len) start. */
static size_t last_chars(const char *s, size_t len, int n) {
    size_t i = len;
    for (int k = 0; k < n && i > 0; k++) {
        i--;
        while (i > 0 && is_continuation((unsigned char)s[i]))
            i--;
    }
    return i;
}

static size_t shape_of(const char *w, size_t len, char *out) {
    size_t chars = 0;
    for (size_t i = 0; i < len; i++)
        chars += !is_continuation((unsigned char)w[i]);
    if (chars >= 100) {
        memcpy(out, "LONG", 4);
        return 4;
    }
    size_t n = 0, i = 0;
    const char *last = NULL; /* the class of the previous character: a class letter or its bytes */
    size_t last_len = 0;
    int seq = 0;
    while (i < len) {
        size_t k = 1;
        while (i + k < len && is_continuation((unsigned char)w[i + k]))
            k++;
        const unsigned char c = (unsigned char)w[i];
        const char *cls = c >= 'A' && c <= 'Z'   ? "X"
                          : c >= 'a' && c <= 'z' ? "x"
                          : c >= '0' && c <= '9' ? "d"
                                                 : w + i;
        const size_t cls_len = cls == w + i ? k : 1;
        if (last && cls_len == last_len && !memcmp(cls, last, cls_len)) {
            seq++;
        } else {
            seq = 0;
            last = cls;
            last_len = cls_len;
        }
        if (seq < 4) {
            memcpy(out + n, cls, cls_len);
            n += cls_len;
        }
        i += k;
    }
    return n;
}

qkv_status qkv_word_feature_of(qkv_word_feature f, const char *word, size_t len, char *out,
                               size_t size, size_t *out_len) {
    if (!word || !out || !out_len)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_word_feature_of: NULL argument");
    if ((unsigned)f >= QKV_FEAT_COUNT)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_word_feature_of: unknown feature %d", (int)f);
    if (len == 0) return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_word_feature_of: empty word");
    if (size < len + 1 || size < 5)
        return QKV_ERROR(QKV_ERR_INVALID_ARG,
                         "qkv_word_feature_of: output of %zu bytes for a word of %zu (needs %zu)",
                         size, len, (len > 4 ? len : 4) + 1);
    size_t n = 0;
    if (f == QKV_FEAT_SHAPE) {
        n = shape_of(word, len, out);
    } else {
        size_t from = 0, to = len;
        if (f >= QKV_FEAT_PREFIX1 && f <= QKV_FEAT_PREFIX3)
            to = first_chars(word, len, (int)(f - QKV_FEAT_PREFIX1) + 1);
        else if (f >= QKV_FEAT_SUFFIX1 && f <= QKV_FEAT_SUFFIX4)
            from = last_chars(word, len, (int)(f - QKV_FEAT_SUFFIX1) + 1);
        for (size_t i = from; i < to; i++) {
            const char c = word[i];
            out[n++] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
        }
    }
    out[n] = '\0';
    *out_len = n;
    return QKV_OK;
}
