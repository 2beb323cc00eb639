/*
 * tokenize_cut.c: the tokenizers that cut a text without rewriting it (qkv_tokenizer.h): chars
 * (UTF-8 characters), tokens (single-space-separated, already tokenized) and words (runs of
 * non-blanks). Each symbol is the span of text it covers.
 */
#include "data_internal.h"

static qkv_status split_chars(const qkv_tokenizer *t, const char *s, size_t len, const char *what,
                              qkv_symbol_fn emit, void *ctx) {
    (void)t;
    for (size_t i = 0; i < len;) {
        const int k = qkv__utf8_char_len((const unsigned char *)s + i, len - i);
        if (k == 0) return QKV_ERROR(QKV_ERR_FORMAT, "invalid UTF-8 at byte %zu of the %s", i + 1, what);
        qkv_status st = emit(ctx, i, (size_t)k, s + i, (size_t)k);
        if (st) return st;
        i += (size_t)k;
    }
    return QKV_OK;
}

static qkv_status split_tokens(const qkv_tokenizer *t, const char *s, size_t len, const char *what,
                               qkv_symbol_fn emit, void *ctx) {
    (void)t;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != ' ') continue;
        if (i == start)
            return QKV_ERROR(QKV_ERR_FORMAT,
                             "empty token in the %s (two spaces in a row, or a leading or trailing space)", what);
        qkv_status st = emit(ctx, start, i - start, s + start, i - start);
        if (st) return st;
        start = i + 1;
    }
    return QKV_OK;
}

static qkv_status split_words(const qkv_tokenizer *t, const char *s, size_t len, const char *what,
                              qkv_symbol_fn emit, void *ctx) {
    (void)t, (void)what;
    for (size_t i = 0;;) {
        while (i < len && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i == len) return QKV_OK;
        size_t k = 0;
        while (i + k < len && s[i + k] != ' ' && s[i + k] != '\t')
            k++;
        qkv_status st = emit(ctx, i, k, s + i, k);
        if (st) return st;
        i += k;
    }
}

const qkv__tokenizer_ops qkv__tokenizer_chars = {.kind = QKV_TOKENIZER_CHARS, .unit = "characters", .separator = "",
                                                  .split = split_chars};
const qkv__tokenizer_ops qkv__tokenizer_tokens = {.kind = QKV_TOKENIZER_TOKENS, .unit = "tokens", .separator = " ",
                                                   .split = split_tokens};
const qkv__tokenizer_ops qkv__tokenizer_words = {.kind = QKV_TOKENIZER_WORDS, .unit = "words", .separator = " ",
                                                  .split = split_words};
