/* test_tokenizer.c: the tokenizers (src/data/tokenizer.c, tokenize_cut.c): the symbols and spans of
 * chars, tokens and words on hand-made texts, their errors, join as the inverse of split (a
 * property over random texts, against a direct re-statement of each rule), and the corpus reader
 * with tokenizers set per field, including one that rewrites its symbols (kept beside the text). */
#include "data_testutil.h"
#include "data/data_internal.h"

#include "qkv/qkv_registry.h"

#include <stdlib.h>
#include <string.h>

#define MAX_SYMS 256

typedef struct collected {
    int n;
    size_t off[MAX_SYMS], len[MAX_SYMS];
    const char *sym[MAX_SYMS];
    size_t sym_len[MAX_SYMS];
} collected;

static qkv_status collect(void *ctx, size_t off, size_t len, const char *sym, size_t sym_len) {
    collected *c = ctx;
    if (c->n == MAX_SYMS) return qkv_set_error(QKV_ERR_SHAPE, "too many symbols");
    c->off[c->n] = off, c->len[c->n] = len, c->sym[c->n] = sym, c->sym_len[c->n] = sym_len;
    c->n++;
    return QKV_OK;
}

static qkv_tokenizer *make(qkv_tokenizer_kind kind) {
    qkv_tokenizer *t = NULL;
    CHECK_OK(qkv_tokenizer_new(kind, NULL, &t));
    return t;
}

/* The symbols of text, "|"-joined, into out ("ERR" when the split fails). */
static const char *symbols(const qkv_tokenizer *t, const char *text, char *out, size_t size) {
    collected c = {0};
    if (qkv_tokenizer_split(t, text, strlen(text), "source", collect, &c)) return "ERR";
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < c.n; i++) {
        if (c.sym[i] != text + c.off[i] || c.sym_len[i] != c.len[i]) return "NOT A SPAN";
        n += (size_t)snprintf(out + n, size - n, "%s%.*s", i ? "|" : "", (int)c.sym_len[i], c.sym[i]);
    }
    return out;
}

TEST(data_tokenizer_symbols) {
    qkv_tokenizer *chars = make(QKV_TOKENIZER_CHARS), *tokens = make(QKV_TOKENIZER_TOKENS),
                  *words = make(QKV_TOKENIZER_WORDS);
    if (!chars || !tokens || !words) goto done;
    char buf[256];
    CHECK_STR(symbols(chars, "a \xc3\xa9\tb", buf, sizeof buf), "a| |\xc3\xa9|\t|b");
    CHECK_STR(symbols(tokens, "the cat\tsat", buf, sizeof buf), "the|cat\tsat"); /* only spaces cut */
    CHECK_STR(symbols(words, "  the\t cat  sat ", buf, sizeof buf), "the|cat|sat");
    CHECK_STR(symbols(words, " \t ", buf, sizeof buf), "");
    CHECK_STR(symbols(chars, "", buf, sizeof buf), "");
    CHECK(qkv_tokenizer_count(chars, "n\xc3\xa9", 3) == 2 && qkv_tokenizer_count(tokens, "a b c", 5) == 3 &&
          qkv_tokenizer_count(words, "a\t\tb", 4) == 2);
    /* errors name the problem and the field */
    collected c = {0};
    CHECK_ERR(qkv_tokenizer_split(tokens, "a  b", 4, "target", collect, &c), QKV_ERR_FORMAT,
              "empty token in the target (two spaces in a row");
    CHECK_ERR(qkv_tokenizer_split(tokens, " a", 2, NULL, collect, &c), QKV_ERR_FORMAT, "empty token in the text");
    CHECK_ERR(qkv_tokenizer_split(chars, "ab\xc3", 3, "source", collect, &c), QKV_ERR_FORMAT,
              "invalid UTF-8 at byte 3 of the source");
    CHECK(qkv_tokenizer_count(tokens, "a ", 2) == -1);
    /* a sink's error stops the split and comes back */
    c.n = MAX_SYMS;
    CHECK_ERR(qkv_tokenizer_split(words, "x y", 3, NULL, collect, &c), QKV_ERR_SHAPE, "too many symbols");
    /* names, units, the registry */
    CHECK_STR(qkv_tokenizer_name(chars), "chars");
    CHECK_STR(qkv_tokenizer_unit(words), "words");
    CHECK(qkv_tokenizer_kind_of(tokens) == QKV_TOKENIZER_TOKENS);
    qkv_tokenizer *t = NULL;
    CHECK_OK(qkv_tokenizer_from_name("words", NULL, &t));
    CHECK(t && qkv_tokenizer_kind_of(t) == QKV_TOKENIZER_WORDS);
    qkv_tokenizer_free(t);
    CHECK_ERR(qkv_tokenizer_from_name("unigram", NULL, &t), QKV_ERR_INVALID_ARG,
              "unknown tokenizer 'unigram' (one of: chars, tokens, words, bpe)");
    CHECK(t == NULL);
    CHECK_ERR(qkv_tokenizer_new(QKV_TOKENIZER_CHARS, "merges.txt", &t), QKV_ERR_INVALID_ARG,
              "tokenizer 'chars' takes no model file");
    CHECK_ERR(qkv_tokenizer_new((qkv_tokenizer_kind)7, NULL, &t), QKV_ERR_INVALID_ARG, "unknown tokenizer kind 7");
    const qkv_registry *r = qkv_registry_get(QKV_REGISTRY_TOKENIZER);
    CHECK(r && r->count == 4);
    for (int i = 0; r && i < r->count; i++) { /* every kind without a model can be made and names itself */
        if (qkv_tokenizer_takes_model((qkv_tokenizer_kind)r->entries[i].value)) continue; /* test_bpe.c */
        CHECK_OK(qkv_tokenizer_new((qkv_tokenizer_kind)r->entries[i].value, NULL, &t));
        if (t) CHECK_STR(qkv_tokenizer_name(t), r->entries[i].name);
        qkv_tokenizer_free(t);
    }
done:
    qkv_tokenizer_free(chars);
    qkv_tokenizer_free(tokens);
    qkv_tokenizer_free(words);
}

/* What joining the symbols of a valid text gives: the text itself (chars, tokens), or its
 * blank runs collapsed to one space and trimmed (words). */
static size_t expected_join(qkv_tokenizer_kind kind, const char *s, size_t n, char *out) {
    if (kind != QKV_TOKENIZER_WORDS) {
        memcpy(out, s, n);
        return n;
    }
    size_t k = 0;
    bool gap = false;
    for (size_t i = 0; i < n; i++) {
        const bool blank = s[i] == ' ' || s[i] == '\t';
        if (!blank && gap && k) out[k++] = ' ';
        gap = blank;
        if (!blank) out[k++] = s[i];
    }
    return k;
}

TEST(data_tokenizer_join_inverts_split) {
    static const char *const pieces[] = {"a", "b", "\xc3\xa9", "\xe2\x82\xac", " ", " ", "\t", "xy"};
    uint64_t rng = 0x9E3779B97F4A7C15u;
    for (int kind = 0; kind < 3; kind++) {
        qkv_tokenizer *t = make((qkv_tokenizer_kind)kind);
        if (!t) return;
        int checked = 0;
        for (int trial = 0; trial < 400; trial++) {
            char text[128], want[128], got[128];
            size_t n = 0;
            const int parts = (int)(rng % 12);
            for (int p = 0; p < parts; p++) {
                rng = rng * 6364136223846793005u + 1442695040888963407u;
                const char *piece = pieces[(rng >> 33) % 8];
                memcpy(text + n, piece, strlen(piece));
                n += strlen(piece);
            }
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            collected c = {0};
            if (qkv_tokenizer_split(t, text, n, NULL, collect, &c)) {
                /* only the tokens tokenizer refuses: an empty token */
                CHECK(kind == QKV_TOKENIZER_TOKENS && (n == 0 || text[0] == ' ' || text[n - 1] == ' ' || strstr(text, "  ")));
                continue;
            }
            const char *syms[64];
            size_t lens[64], got_len = 0;
            for (int i = 0; i < c.n; i++)
                syms[i] = c.sym[i], lens[i] = c.sym_len[i];
            CHECK_OK(qkv_tokenizer_join(t, syms, lens, c.n, got, sizeof got, &got_len));
            const size_t want_len = expected_join((qkv_tokenizer_kind)kind, text, n, want);
            CHECK_MSG(got_len == want_len && !memcmp(got, want, want_len) && got[got_len] == '\0',
                      "%s: join(split('%.*s')) = '%s'", qkv_tokenizer_name(t), (int)n, text, got);
            checked++;
        }
        CHECK(checked > 100);
        qkv_tokenizer_free(t);
    }
}

TEST(data_tokenizer_join_truncates) {
    qkv_tokenizer *t = make(QKV_TOKENIZER_WORDS);
    if (!t) return;
    const char *syms[] = {"the", "cat", "sat"};
    const size_t lens[] = {3, 3, 3};
    char out[6];
    size_t n = 0;
    CHECK_OK(qkv_tokenizer_join(t, syms, lens, 3, out, sizeof out, &n));
    CHECK(n == 11 && !strcmp(out, "the c"));
    CHECK_OK(qkv_tokenizer_join(t, syms, lens, 0, out, sizeof out, &n));
    CHECK(n == 0 && out[0] == '\0');
    CHECK_OK(qkv_tokenizer_join(t, syms, lens, 3, NULL, 0, &n));
    CHECK(n == 11);
    CHECK_ERR(qkv_tokenizer_join(t, syms, lens, -1, out, sizeof out, &n), QKV_ERR_INVALID_ARG, "bad argument");
    qkv_tokenizer_free(t);
}

/* A tokenizer that rewrites: every word upper-cased, as a subword tokenizer spells its own
 * symbols. Its symbols are not spans of the text, so the corpus must keep copies. */
static qkv_status split_upper(const qkv_tokenizer *t, const char *s, size_t len, const char *what, qkv_symbol_fn emit,
                              void *ctx) {
    (void)t, (void)what;
    char word[64];
    for (size_t i = 0; i < len;) {
        size_t k = 0;
        while (i + k < len && s[i + k] != ' ' && k < sizeof word) {
            const char ch = s[i + k];
            word[k++] = ch >= 'a' && ch <= 'z' ? (char)(ch - 32) : ch;
        }
        qkv_status st = emit(ctx, i, k, word, k); /* word is overwritten by the next symbol */
        if (st) return st;
        i += k + 1;
    }
    return QKV_OK;
}

static const qkv__tokenizer_ops upper_ops = {.kind = QKV_TOKENIZER_WORDS, .unit = "words", .separator = " ", .split = split_upper};

TEST(data_tokenizer_in_the_corpus) {
    qkv_tokenizer *chars = make(QKV_TOKENIZER_CHARS), *words = make(QKV_TOKENIZER_WORDS);
    if (!chars || !words) goto done;
    qkv_corpus *c = NULL;
    /* a pairs target cut into characters, a source into words */
    qkv_read_opts o = {.src_tokenizer = words, .tgt_tokenizer = chars};
    const char *text = "the  cat\tle chat\n";
    CHECK_OK(qkv_corpus_parse(QKV_CORPUS_PAIRS, text, strlen(text), "in.tsv", &o, &c));
    if (c) {
        size_t n;
        CHECK(qkv_corpus_length(c, 0, QKV_FIELD_SRC) == 2 && qkv_corpus_length(c, 0, QKV_FIELD_TGT) == 7);
        const char *s = qkv_corpus_symbol(c, 0, QKV_FIELD_TGT, 2, &n);
        CHECK(s && n == 1 && *s == ' ');
    }
    qkv_corpus_free(c);
    c = NULL;
    /* a field in which the tokenizer finds nothing, and the unit in the length limit */
    CHECK_ERR(qkv_corpus_parse(QKV_CORPUS_PAIRS, " \tA\n", 4, "in.tsv", &o, &c), QKV_ERR_FORMAT,
              "in.tsv:1: the source has no words (only blanks)");
    o.max_tgt_len = 3;
    CHECK_ERR(qkv_corpus_parse(QKV_CORPUS_PAIRS, "a\tabcd\n", 7, "in.tsv", &o, &c), QKV_ERR_FORMAT,
              "in.tsv:1: the target has 4 characters, more than the maximum 3");
    /* a text cut by the tokens tokenizer keeps its rule */
    const qkv_read_opts strict = {.tgt_tokenizer = make(QKV_TOKENIZER_TOKENS)};
    CHECK_ERR(qkv_corpus_parse(QKV_CORPUS_TEXT, "a b\nc  d\n", 9, "lm.txt", &strict, &c), QKV_ERR_FORMAT,
              "lm.txt:2: empty token in the text");
    qkv_tokenizer_free((qkv_tokenizer *)strict.tgt_tokenizer);
    /* rewritten symbols live beside the text; keys stay the text as written */
    const qkv_tokenizer upper = {&upper_ops, NULL};
    const qkv_read_opts up = {.tgt_tokenizer = &upper, .text_chunk = 2};
    text = "the cat sat\nno\n";
    CHECK_OK(qkv_corpus_parse(QKV_CORPUS_TEXT, text, strlen(text), "lm.txt", &up, &c));
    if (c) {
        CHECK(qkv_corpus_size(c) == 3); /* "the cat", "sat", "no" */
        const char *want[3][2] = {{"THE", "CAT"}, {"SAT", NULL}, {"NO", NULL}};
        const char *keys[3] = {"the cat", "sat", "no"};
        for (int i = 0; i < 3; i++) {
            size_t n;
            const char *k = qkv_corpus_key(c, i, &n);
            CHECK(k && n == strlen(keys[i]) && !memcmp(k, keys[i], n));
            for (int j = 0; j < 2 && want[i][j]; j++) {
                const char *s = qkv_corpus_symbol(c, i, QKV_FIELD_TGT, j, &n);
                CHECK_MSG(s && n == strlen(want[i][j]) && !memcmp(s, want[i][j], n), "example %d symbol %d", i, j);
            }
        }
        qkv_vocab *v = NULL; /* the copies are symbols like any other */
        CHECK_OK(qkv_vocab_build(c, QKV_FIELD_TGT, 1, true, &v));
        CHECK(v && qkv_vocab_size(v) == QKV_VOCAB_RESERVED + 4 && qkv_vocab_find(v, "SAT", 3) >= 0);
        qkv_vocab_free(v);
    }
    qkv_corpus_free(c);
done:
    qkv_tokenizer_free(chars);
    qkv_tokenizer_free(words);
}
