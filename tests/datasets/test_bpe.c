/* test_bpe.c: the byte-pair-encoding tokenizer (src/data/bpe_*.c, tokenize_bpe.c): learning
 * worked by hand on Sennrich et al.'s example words, the pass order of apply_bpe.py when one symbol
 * has two merges, a model learned by the C code against the independent implementation of
 * scripts/bpe_reference.py (the same merges, the same symbols for every eval line), byte fallback,
 * the round trip join(split(x)) = x over random texts, and every refusal of a bad model file. */
#include "data_testutil.h"

#include <stdlib.h>
#include <string.h>

#define M "\xe2\x96\x81" /* the marker */

typedef struct symbols {
    char text[8192];
    size_t n;
    int count;
    size_t covered; /* bytes of text the spans covered, in order without gaps */
    bool gap;
} symbols;

static qkv_status add_symbol(void *ctx, size_t off, size_t len, const char *sym, size_t sym_len) {
    symbols *s = ctx;
    if (off != s->covered) s->gap = true;
    s->covered = off + len;
    if (s->n + sym_len + 2 > sizeof s->text) return qkv_set_error(QKV_ERR_SHAPE, "too many symbols");
    if (s->count++) s->text[s->n++] = ' ';
    memcpy(s->text + s->n, sym, sym_len);
    s->n += sym_len;
    s->text[s->n] = '\0';
    return QKV_OK;
}

/* The symbols of text, space-separated ("ERR" when the split fails). */
static const char *encode(const qkv_tokenizer *t, const char *text, symbols *s) {
    memset(s, 0, sizeof *s);
    if (qkv_tokenizer_split(t, text, strlen(text), NULL, add_symbol, s)) return "ERR";
    CHECK_MSG(!s->gap && s->covered == strlen(text), "the spans of '%s' do not tile it", text);
    return s->text;
}

static qkv_tokenizer *load_model(const char *dir, const char *name, const char *text) {
    qkv_tokenizer *t = NULL;
    char *path = dt_join(dir, name);
    if (!dt_write(dir, name, text, -1)) CHECK(false);
    else CHECK_OK(qkv_tokenizer_new(QKV_TOKENIZER_BPE, path, &t));
    free(path);
    return t;
}

static qkv_tokenizer *learn(const char *dir, const char *const *lines, int n, qkv_bpe_opts o, int32_t *merges) {
    qkv_bpe_learner *l = NULL;
    qkv_tokenizer *t = NULL;
    char *path = dt_join(dir, "learned.bpe");
    CHECK_OK(qkv_bpe_learner_new(&o, &l));
    for (int i = 0; l && i < n; i++)
        CHECK_OK(qkv_bpe_learner_add(l, lines[i], strlen(lines[i]), NULL));
    if (l && !qkv_bpe_learner_save(l, path, merges, NULL)) CHECK_OK(qkv_tokenizer_new(QKV_TOKENIZER_BPE, path, &t));
    qkv_bpe_learner_free(l);
    free(path);
    return t;
}

TEST(data_bpe_learn_by_hand) {
    /* Sennrich et al. (2016), section 3.2: low x5, lower x2, newest x6, widest x3. As ▁-words the
     * pair counts are (e,s) = (s,t) = 9; (w,e) = 8; (▁,l) = (l,o) = (o,w) = 7; (▁,n) = (n,e) =
     * (e,w) = 6; ... Ties go to the greater pair (UTF-8 bytes: "▁" = E2 96 81 sorts after the
     * letters): s t, e st, ▁ l, ▁l o, ▁lo w, ▁ n, ▁n e, ▁ne w, ▁new est, ▁ w, ▁w i, ▁wi d,
     * ▁wid est, ▁low e, ▁lower. */
    char *dir = dt_tmpdir();
    const char *lines[] = {"low low low low low", "lower lower", "newest newest newest newest newest newest",
                           "widest widest widest"};
    qkv_bpe_opts o = qkv_bpe_default_opts();
    int32_t merges = -1;
    qkv_tokenizer *t = learn(dir, lines, 4, o, &merges);
    CHECK(merges == 15);
    DT_CHECK_FILE(dir, "learned.bpe",
                  "#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: deilnorstw\n#merges: 15\n"
                  "s t\ne st\n" M " l\n" M "l o\n" M "lo w\n" M " n\n" M "n e\n" M "ne w\n" M "new est\n" M
                  " w\n" M "w i\n" M "wi d\n" M "wid est\n" M "low e\n" M "lowe r\n");
    symbols s;
    if (t) {
        CHECK_STR(encode(t, "lowest newer", &s), M "low est " M "new e r");
        CHECK_STR(encode(t, "widest  low", &s), M "widest " M " " M "low");
        CHECK(qkv_tokenizer_count(t, "lower", 5) == 1);
        CHECK_STR(qkv_tokenizer_name(t), "bpe");
        CHECK_STR(qkv_tokenizer_unit(t), "subwords");
    }
    qkv_tokenizer_free(t);
    /* merges caps the count; min_frequency 3 stops before the pairs of count 2 */
    o.merges = 4;
    t = learn(dir, lines, 4, o, &merges);
    CHECK(merges == 4);
    if (t) CHECK_STR(encode(t, "lower", &s), M "lo w e r");
    qkv_tokenizer_free(t);
    o = qkv_bpe_default_opts();
    o.min_frequency = 3;
    t = learn(dir, lines, 4, o, &merges);
    CHECK(merges == 13);
    qkv_tokenizer_free(t);
    /* the order of the lines does not matter */
    const char *shuffled[] = {"widest newest widest", "lower newest low low", "newest low newest newest",
                              "low widest lower newest low"};
    t = learn(dir, shuffled, 4, qkv_bpe_default_opts(), &merges);
    CHECK(merges == 15);
    DT_CHECK_FILE(dir, "learned.bpe",
                  "#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: deilnorstw\n#merges: 15\n"
                  "s t\ne st\n" M " l\n" M "l o\n" M "lo w\n" M " n\n" M "n e\n" M "ne w\n" M "new est\n" M
                  " w\n" M "w i\n" M "wi d\n" M "wid est\n" M "low e\n" M "lowe r\n");
    qkv_tokenizer_free(t);
    dt_rmtree(dir);
}

TEST(data_bpe_pass_order) {
    /* "abc" is made twice: by ab + c (rank 2) and by a + bc (rank 4); abc + a has rank 3. On
     * "abcabc": rank 0 gives a bc a bc; the pass of rank 4 merges both a bc (apply_bpe.py merges
     * every occurrence of the pair before looking for the next), giving abc abc, and no a is left
     * for rank 3. Merging abc + a as soon as it appeared would give abca bc. */
    char *dir = dt_tmpdir();
    qkv_tokenizer *t = load_model(dir, "m.bpe",
                                  "#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: abc\n#merges: 5\n"
                                  "b c\na b\nab c\nabc a\na bc\n");
    symbols s;
    if (t) {
        CHECK_STR(encode(t, "abcabc", &s), M " abc abc");
        CHECK_STR(encode(t, "ab", &s), M " ab");
        CHECK_STR(encode(t, "abca", &s), M " abca"); /* ab c, then abc a */
        CHECK_STR(encode(t, "aaa", &s), M " a a a");
        CHECK_STR(encode(t, "", &s), "");
    }
    qkv_tokenizer_free(t);
    dt_rmtree(dir);
}

TEST(data_bpe_bytes) {
    char *dir = dt_tmpdir();
    /* the alphabet has a, b and TAB; é (C3 A9), ☃ (E2 98 83), a literal ▁ (E2 96 81), '\r' and NUL
     * are byte symbols; with byte fallback off, é stays itself, but ▁ and '\r' are bytes still */
    qkv_tokenizer *t = load_model(dir, "m.bpe", "#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: \tab\n#merges: 1\na b\n");
    qkv_tokenizer *k = load_model(dir, "k.bpe", "#qkv-bpe 1\n#byte-fallback: no\n#alphabet: \tab\n#merges: 1\na b\n");
    symbols s;
    if (t && k) {
        CHECK_STR(encode(t, "ab\xc3\xa9", &s), M " ab <0xC3> <0xA9>");
        CHECK_STR(encode(t, "a\tb \xe2\x98\x83", &s), M " a \t b " M " <0xE2> <0x98> <0x83>");
        CHECK_STR(encode(k, "ab\xc3\xa9", &s), M " ab \xc3\xa9");
        CHECK_STR(encode(k, M "a\r", &s), M " <0xE2> <0x96> <0x81> a <0x0D>");
        const char nul[] = {'a', '\0', 'b'};
        memset(&s, 0, sizeof s);
        CHECK_OK(qkv_tokenizer_split(t, nul, 3, NULL, add_symbol, &s));
        CHECK_STR(s.text, M " a <0x00> b");
        CHECK_ERR(qkv_tokenizer_split(t, "a\xc3", 2, "source", add_symbol, &s), QKV_ERR_FORMAT,
                  "invalid UTF-8 at byte 2 of the source");
        /* join: markers to spaces, the first dropped; bytes to bytes; broken bytes to U+FFFD */
        const char *syms[] = {M "ab", "<0xC3>", "<0xA9>", M, M "x", "<0xE2>", "<0x41>"};
        size_t lens[7];
        for (int i = 0; i < 7; i++)
            lens[i] = strlen(syms[i]);
        char out[64];
        size_t n;
        CHECK_OK(qkv_tokenizer_join(t, syms, lens, 7, out, sizeof out, &n));
        CHECK_STR(out, "ab\xc3\xa9  x\xef\xbf\xbd" "A");
        CHECK(n == strlen(out));
        CHECK_OK(qkv_tokenizer_join(t, syms + 4, lens + 4, 1, out, sizeof out, &n)); /* continuation first */
        CHECK_STR(out, "x");
        CHECK_OK(qkv_tokenizer_join(t, syms + 1, lens + 1, 1, out, sizeof out, &n));
        CHECK_STR(out, "\xef\xbf\xbd");
        CHECK_OK(qkv_tokenizer_join(t, syms, lens, 7, out, 4, &n)); /* truncated, whole length */
        CHECK_STR(out, "ab\xc3");
        CHECK(n == 11);
    }
    qkv_tokenizer_free(t);
    qkv_tokenizer_free(k);
    dt_rmtree(dir);
}

/* The C learner and tokenizer against scripts/bpe_reference.py's fixture. */
TEST(data_bpe_reference) {
    char *dir = dt_tmpdir();
    char *train = dt_read(QKV_TEST_DATA_DIR "/bpe_train.txt", NULL, NULL);
    char *evals = dt_read(QKV_TEST_DATA_DIR "/bpe_eval.txt", NULL, NULL);
    char *want = dt_read(QKV_TEST_DATA_DIR "/bpe_reference.tsv", NULL, NULL);
    char *model = dt_read(QKV_TEST_DATA_DIR "/bpe_reference.model", NULL, NULL);
    qkv_bpe_learner *l = NULL;
    qkv_tokenizer *t = NULL;
    if (!train || !evals || !want || !model) {
        CHECK_MSG(false, "the fixture tests/data/bpe_* is missing (scripts/bpe_reference.py fixture tests/data)");
        goto done;
    }
    qkv_bpe_opts o = qkv_bpe_default_opts();
    o.merges = 60, o.min_frequency = 2, o.min_char_count = 2;
    CHECK_OK(qkv_bpe_learner_new(&o, &l));
    for (char *p = train, *nl; l && (nl = strchr(p, '\n')); p = nl + 1)
        CHECK_OK(qkv_bpe_learner_add(l, p, (size_t)(nl - p), "train"));
    char *path = dt_join(dir, "learned.bpe");
    int32_t merges = 0, chars = 0;
    if (l) CHECK_OK(qkv_bpe_learner_save(l, path, &merges, &chars));
    CHECK(merges == 60 && chars == 24); /* 23 characters and the marker */
    DT_CHECK_FILE(dir, "learned.bpe", model);
    CHECK_OK(qkv_tokenizer_new(QKV_TOKENIZER_BPE, path, &t));
    free(path);
    int line = 0;
    for (char *p = evals, *w = want, *nl, *wnl; t && (nl = strchr(p, '\n')) && (wnl = strchr(w, '\n'));
         p = nl + 1, w = wnl + 1) {
        line++;
        *nl = *wnl = '\0';
        symbols s;
        const char *tab = strchr(w, '\t');
        CHECK_MSG(tab && !strcmp(encode(t, p, &s), tab + 1), "eval line %d: '%s', expected '%s'", line, s.text,
                  tab ? tab + 1 : "?");
    }
    CHECK(line == 64);
done:
    qkv_tokenizer_free(t);
    qkv_bpe_learner_free(l);
    free(train), free(evals), free(want), free(model);
    dt_rmtree(dir);
}

/* join(split(x)) = x, for random texts from an alphabet with spaces, TABs, multi-byte characters,
 * a literal marker, '\r' and NUL, under a model learned from other random texts. */
TEST(data_bpe_round_trip) {
    static const char *const pieces[] = {"a", "b", "c", "ab", " ", " ", "  ", "\t", "\xc3\xa9", "\xe2\x98\x83",
                                         M, "\r", "<0x41>", "<0x", "\xf0\x9f\x98\x80", "x", "y"};
    const int n_pieces = (int)(sizeof pieces / sizeof *pieces);
    char *dir = dt_tmpdir();
    uint64_t state = 42;
    char lines[200][160];
    const char *train[200];
    for (int i = 0; i < 200; i++) {
        size_t n = 0;
        lines[i][0] = '\0';
        for (int k = 0; k < 30; k++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            const char *p = pieces[(state >> 33) % (uint64_t)(i < 100 ? n_pieces - 3 : n_pieces)];
            n += (size_t)snprintf(lines[i] + n, sizeof lines[i] - n, "%s", p);
        }
        train[i] = lines[i];
    }
    for (int fallback = 0; fallback < 2; fallback++) {
        qkv_bpe_opts o = qkv_bpe_default_opts();
        o.merges = 200, o.byte_fallback = fallback, o.min_char_count = 3;
        int32_t merges = 0;
        qkv_tokenizer *t = learn(dir, train, 100, o, &merges); /* the texts without ☺, x, y */
        CHECK(merges > 20);
        for (int i = 0; t && i < 200; i++) {
            symbols s;
            const char *text = lines[i];
            if (!strcmp(encode(t, text, &s), "ERR")) {
                CHECK_MSG(false, "line %d does not split", i);
                continue;
            }
            /* back to a list of symbols: they never hold a space */
            const char *syms[1024];
            size_t lens[1024];
            int n = 0;
            for (char *p = s.text; *p && n < 1024;) {
                char *sp = strchr(p, ' ');
                syms[n] = p;
                lens[n++] = sp ? (size_t)(sp - p) : strlen(p);
                if (!sp) break;
                p = sp + 1;
            }
            char out[512];
            size_t len;
            CHECK_OK(qkv_tokenizer_join(t, syms, lens, n, out, sizeof out, &len));
            CHECK_MSG(len == strlen(text) && !strcmp(out, text), "line %d (byte fallback %d) comes back as '%s'", i,
                      fallback, out);
        }
        qkv_tokenizer_free(t);
    }
    dt_rmtree(dir);
}

TEST(data_bpe_bad_model) {
    char *dir = dt_tmpdir();
    static const struct {
        const char *text, *needle;
    } cases[] = {
        {"", ":1: not a BPE model of qkv"},
        {"#version: 0.2\na b\n", ":1: not a BPE model of qkv"},
        {"#qkv-bpe 2\n", ":1: not a BPE model"},
        {"#qkv-bpe 1\n#byte-fallback: maybe\n", ":2: expected '#byte-fallback: yes'"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n", ":3: expected '#alphabet: '"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: aba\n", ":3: the alphabet has 'a' twice"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: a b\n", ":3: the alphabet has ' '"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: a" M "\n", "which is never a character of it"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: a\xc3\n", ":3: invalid UTF-8 in the alphabet, at its byte 2"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n", ":4: expected '#merges: N'"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n#merges: -1\n", ":4: expected '#merges: N'"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n#merges: 99999999999\n", ":4: expected '#merges: N'"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n#merges: 2\na b\n", ":6: the file ends after 1 of its 2 merges"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n#merges: 1\na b\nb a\n", ":6: more lines than the 1 merges"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n#merges: 1\nab\n", ":5: expected a merge: two symbols"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n#merges: 1\na  b\n", ":5: a space at byte 3 of the merge"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n#merges: 1\na b\r\n", ":5: a carriage return"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n#merges: 1\na c\n", ":5: 'c' is neither a character"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n#merges: 1\nab a\n", ":5: 'ab' is neither a character"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n#merges: 2\na b\na b\n", ":6: the merge 'a b' is given twice"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n#merges: 1\n<0x41> a\n", ":5: '<0x41>' is a byte symbol"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: <0x4A>\n#merges: 5\n< 0\n<0 x\n<0x 4\n<0x4 A\n<0x4A >\n",
         ":9: the merge spells a byte symbol (<0x4A>)"},
        {"#qkv-bpe 1\n#byte-fallback: yes\n#alphabet: ab\n#merges: 1\na \xff\n", ":5: invalid UTF-8 at byte 3 of the merge"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        qkv_tokenizer *t = NULL;
        char *path = dt_join(dir, "bad.bpe");
        CHECK(dt_write(dir, "bad.bpe", cases[i].text, -1));
        CHECK_ERR(qkv_tokenizer_new(QKV_TOKENIZER_BPE, path, &t), QKV_ERR_FORMAT, cases[i].needle);
        CHECK(t == NULL);
        free(path);
    }
    qkv_tokenizer *t = NULL;
    char *missing = dt_join(dir, "missing.bpe");
    CHECK_ERR(qkv_tokenizer_new(QKV_TOKENIZER_BPE, missing, &t), QKV_ERR_IO, "missing.bpe");
    CHECK_ERR(qkv_tokenizer_new(QKV_TOKENIZER_BPE, NULL, &t), QKV_ERR_INVALID_ARG, "needs its model file");
    CHECK_ERR(qkv_tokenizer_from_name("bpe", NULL, &t), QKV_ERR_INVALID_ARG, "needs its model file");
    CHECK(qkv_tokenizer_shared(QKV_TOKENIZER_BPE) == NULL && qkv_tokenizer_takes_model(QKV_TOKENIZER_BPE) &&
          !qkv_tokenizer_takes_model(QKV_TOKENIZER_CHARS));
    free(missing);
    /* the learner */
    qkv_bpe_learner *l = NULL;
    qkv_bpe_opts o = qkv_bpe_default_opts();
    o.min_frequency = 0;
    CHECK_ERR(qkv_bpe_learner_new(&o, &l), QKV_ERR_INVALID_ARG, "min_frequency (0)");
    o = qkv_bpe_default_opts();
    o.merges = -1;
    CHECK_ERR(qkv_bpe_learner_new(&o, &l), QKV_ERR_INVALID_ARG, "merges -1");
    CHECK_OK(qkv_bpe_learner_new(NULL, &l));
    if (l) {
        CHECK_ERR(qkv_bpe_learner_add(l, "ok \xc3(", 5, "target"), QKV_ERR_FORMAT, "invalid UTF-8 at byte 4 of the target");
        CHECK_ERR(qkv_bpe_learner_add(l, "a\nb", 3, NULL), QKV_ERR_FORMAT, "a newline in the text");
        char *nodir = dt_join(dir, "no/such/dir/m.bpe");
        CHECK_ERR(qkv_bpe_learner_save(l, nodir, NULL, NULL), QKV_ERR_IO, "no/such/dir");
        free(nodir);
        /* nothing counted: an empty model, which loads and splits every text into characters */
        char *path = dt_join(dir, "empty.bpe");
        int32_t merges = -1, chars = -1;
        CHECK_OK(qkv_bpe_learner_save(l, path, &merges, &chars));
        CHECK(merges == 0 && chars == 1);
        CHECK_OK(qkv_tokenizer_new(QKV_TOKENIZER_BPE, path, &t));
        symbols s;
        if (t) CHECK_STR(encode(t, "hi", &s), M " <0x68> <0x69>");
        qkv_tokenizer_free(t);
        free(path);
    }
    qkv_bpe_learner_free(l);
    CHECK(dt_count_tmp(dir) == 0);
    dt_rmtree(dir);
}
