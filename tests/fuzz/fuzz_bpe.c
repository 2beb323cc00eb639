/*
 * fuzz_bpe.c: libFuzzer target for the byte-pair-encoding model file and tokenizer
 * (src/data/bpe_model.c, bpe_learn.c, tokenize_bpe.c).
 *
 * Input: an options byte. Its low bit 0: a model file up to the first NUL byte, then texts
 * separated by '\n'. Low bit 1: two more option bytes (merges; min_frequency, min_char_count and
 * byte fallback), then lines to learn from, separated by '\n'; the texts are those lines.
 *
 * Invariants: a model file is loaded or refused with QKV_ERR_FORMAT and a message naming the
 * line; a loaded model writes back to the same bytes (with a final newline); learning writes a
 * model that loads, with at most `merges` merges. Under a model, a text is cut or refused
 * (invalid UTF-8, QKV_ERR_FORMAT); its symbols tile it (each span after the previous, no gap), hold
 * no space, and are symbols of the model or, with byte fallback off, one character of the text;
 * joined, they give the text back.
 */
#include "fuzz_util.h"

#include "data/bpe.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

typedef struct symbols {
    const qkv__bpe *m;
    const char *text;
    size_t len, end;
    fz_symbols out;
} symbols;

static qkv_status take(void *ctx, size_t off, size_t len, const char *sym, size_t sym_len) {
    symbols *s = ctx;
    FZ_REQUIRE(off == s->end && len <= s->len - off);
    s->end = off + len;
    FZ_REQUIRE(sym_len > 0 && !memchr(sym, ' ', sym_len));
    if (qkv__strtab_find(&s->m->sym, sym, sym_len) < 0) /* a character outside the alphabet, as itself */
        FZ_REQUIRE(!s->m->byte_fallback && sym == s->text + off && sym_len == len &&
                   qkv__utf8_char_len((const unsigned char *)sym, sym_len) == (int)sym_len);
    fz_symbols_push(&s->out, sym, sym_len);
    return QKV_OK;
}

static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const int k = qkv__utf8_char_len((const unsigned char *)s + i, n - i);
        if (!k) return false;
        i += (size_t)k;
    }
    return true;
}

/* Split each '\n'-separated text of texts[0, len) and join it back. */
static void round_trips(const qkv__bpe *m, const char *texts, size_t len) {
    const qkv_tokenizer t = {&qkv__tokenizer_bpe, (void *)m};
    symbols s = {.m = m};
    fz_reader r = {(const uint8_t *)texts, len};
    while (r.n) {
        size_t n;
        const char *text = fz_field(&r, '\n', &n);
        s.text = text, s.len = n, s.end = 0, s.out.n = 0;
        const qkv_status st = qkv_tokenizer_split(&t, text, n, "text", take, &s);
        if (!valid_utf8(text, n)) {
            FZ_REQUIRE(st == QKV_ERR_FORMAT && strstr(qkv_last_error(), "invalid UTF-8"));
            continue;
        }
        FZ_REQUIRE(st == QKV_OK && s.end == n);
        char *got = malloc(n + 1);
        size_t got_len = 0;
        FZ_REQUIRE(got && qkv_tokenizer_join(&t, s.out.sym, s.out.len, s.out.n, got, n + 1, &got_len) == QKV_OK);
        FZ_REQUIRE(got_len == n && !memcmp(got, text, n));
        free(got);
    }
    fz_symbols_free(&s.out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    const uint8_t opts = fz_byte(&r);
    qkv__bpe m;
    if (!(opts & 1)) {
        size_t n;
        const char *text = fz_field(&r, 0, &n);
        const qkv_status st = qkv__bpe_parse(text, n, "fuzz.bpe", &m);
        if (st) {
            FZ_REQUIRE(st == QKV_ERR_FORMAT && strstr(qkv_last_error(), "BPE model fuzz.bpe:"));
            return 0;
        }
        FZ_REQUIRE(qkv__bpe_save(&m, fz_path("m.bpe")) == QKV_OK);
        size_t saved_len;
        char *saved = fz_read_file(fz_path("m.bpe"), &saved_len);
        FZ_REQUIRE(saved && (saved_len == n || (saved_len == n + 1 && saved[n] == '\n')) && !memcmp(saved, text, n));
        free(saved);
        round_trips(&m, (const char *)r.p, r.n);
        qkv__bpe_free(&m);
        return 0;
    }
    qkv_bpe_opts o = qkv_bpe_default_opts();
    o.merges = fz_byte(&r);
    const uint8_t b = fz_byte(&r);
    o.min_frequency = 1 + (b & 3);
    o.min_char_count = 1 + ((b >> 2) & 3);
    o.byte_fallback = !(b & 16);
    qkv_bpe_learner *l = NULL;
    FZ_REQUIRE(qkv_bpe_learner_new(&o, &l) == QKV_OK);
    fz_reader lines = r;
    while (lines.n) {
        size_t n;
        const char *line = fz_field(&lines, '\n', &n);
        const qkv_status st = qkv_bpe_learner_add(l, line, n, "line");
        FZ_REQUIRE(valid_utf8(line, n) ? st == QKV_OK : st == QKV_ERR_FORMAT);
    }
    int32_t merges = -1;
    FZ_REQUIRE(qkv_bpe_learner_save(l, fz_path("m.bpe"), &merges, NULL) == QKV_OK);
    qkv_bpe_learner_free(l);
    FZ_REQUIRE(merges >= 0 && merges <= o.merges);
    FZ_REQUIRE(qkv__bpe_load(fz_path("m.bpe"), &m) == QKV_OK && m.n_merges == merges);
    round_trips(&m, (const char *)r.p, r.n);
    qkv__bpe_free(&m);
    return 0;
}
