/*
 * fuzz_tokenizer.c: libFuzzer target for the tokenizers (src/data/tokenizer.c, tokenize_cut.c):
 * qkv_tokenizer_split, qkv_tokenizer_count and qkv_tokenizer_join on any bytes.
 *
 * Input: one byte choosing the tokenizer (its value modulo the registry's count: chars, tokens,
 * words; bpe, which needs a model, is fuzz_bpe's), then the text (NUL bytes, invalid UTF-8, blanks
 * of every kind included).
 *
 * Invariants: a text is cut or refused with QKV_ERR_FORMAT and a message; every symbol is a
 * non-empty span of the text, after the previous one, spelled as the text spells it; chars gives
 * one whole UTF-8 character each and covers the text, tokens no space and words no space or TAB;
 * count agrees with split; joined, the symbols give the text back (chars, tokens) or the text
 * with its runs of blanks made single spaces and its ends trimmed (words), and a join into a
 * buffer too small is cut short but reports the whole length.
 */
#include "fuzz_util.h"

#include "data/data_internal.h" /* qkv__utf8_char_len */
#include "qkv/qkv_registry.h"
#include "qkv/qkv_tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

typedef struct symbols {
    const char *text;
    size_t len, end; /* end: where the previous symbol ended */
    qkv_tokenizer_kind kind;
    fz_symbols out;
} symbols;

static qkv_status take(void *ctx, size_t off, size_t len, const char *sym, size_t sym_len) {
    symbols *s = ctx;
    FZ_REQUIRE(len > 0 && off >= s->end && off <= s->len && len <= s->len - off);
    FZ_REQUIRE(sym == s->text + off && sym_len == len);
    for (size_t i = 0; i < len; i++) {
        FZ_REQUIRE(s->kind == QKV_TOKENIZER_CHARS || sym[i] != ' ');
        FZ_REQUIRE(s->kind != QKV_TOKENIZER_WORDS || sym[i] != '\t');
    }
    if (s->kind == QKV_TOKENIZER_CHARS)
        FZ_REQUIRE(off == s->end && qkv__utf8_char_len((const unsigned char *)sym, len) == (int)len);
    s->end = off + len;
    fz_symbols_push(&s->out, sym, len);
    return QKV_OK;
}

/* The text as words joins it: blanks runs made one space, the ends trimmed. */
static size_t words_text(const char *t, size_t n, char *out) {
    size_t k = 0;
    bool gap = false;
    for (size_t i = 0; i < n; i++) {
        const bool blank = t[i] == ' ' || t[i] == '\t';
        if (!blank && gap && k) out[k++] = ' ';
        gap = blank;
        if (!blank) out[k++] = t[i];
    }
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    const qkv_registry *reg = qkv_registry_get(QKV_REGISTRY_TOKENIZER);
    const qkv_tokenizer_kind kind = (qkv_tokenizer_kind)reg->entries[fz_byte(&r) % reg->count].value;
    if (qkv_tokenizer_takes_model(kind)) return 0; /* bpe: fuzz_bpe */
    const qkv_tokenizer *t = qkv_tokenizer_shared(kind);
    FZ_REQUIRE(t && qkv_tokenizer_kind_of(t) == kind);
    symbols s = {.text = (const char *)r.p, .len = r.n, .kind = kind};
    const qkv_status st = qkv_tokenizer_split(t, s.text, s.len, "text", take, &s);
    FZ_REQUIRE(st == QKV_OK || (st == QKV_ERR_FORMAT && qkv_last_error()[0] != '\0'));
    FZ_REQUIRE(qkv_tokenizer_count(t, s.text, s.len) == (st ? -1 : s.out.n));
    if (!st) {
        if (kind == QKV_TOKENIZER_CHARS) FZ_REQUIRE(s.end == s.len);
        char *want = malloc(s.len + 1), *got = malloc(s.len + 1);
        FZ_REQUIRE(want && got);
        const size_t want_len = kind == QKV_TOKENIZER_WORDS ? words_text(s.text, s.len, want) : s.len;
        if (kind != QKV_TOKENIZER_WORDS && s.len) memcpy(want, s.text, s.len);
        size_t got_len = 0;
        FZ_REQUIRE(qkv_tokenizer_join(t, s.out.sym, s.out.len, s.out.n, got, s.len + 1, &got_len) == QKV_OK);
        FZ_REQUIRE(got_len == want_len && !memcmp(got, want, want_len) && got[got_len] == '\0');
        if (want_len > 0) { /* too small a buffer: cut short, NUL-terminated, the whole length reported */
            const size_t small = 1 + want_len / 2;
            FZ_REQUIRE(qkv_tokenizer_join(t, s.out.sym, s.out.len, s.out.n, got, small, &got_len) == QKV_OK);
            FZ_REQUIRE(got_len == want_len && got[small - 1] == '\0' && !memcmp(got, want, small - 1));
        }
        free(want);
        free(got);
    }
    fz_symbols_free(&s.out);
    return 0;
}
