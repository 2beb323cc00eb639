/*
 * fuzz_corpus.c: libFuzzer target for the corpus readers and what is built on a corpus: the four
 * formats of qkv_corpus_parse / qkv_corpus_read (G2P pairs, tagged sentences, label + tokens
 * lines as in the classification and image data, plain text), vocabularies built from them,
 * datasets with vocabularies or with decimal ids (the digits / image pixels), the batcher (plans,
 * batches, positions: tell, format, parse, seek), G2P grouping, the spelling features, the Brown
 * universal tags, and the two baselines (naive Bayes on labeled data, the n-gram LM on text).
 *
 * Input: four bytes of options, then the file's text.
 *   byte 0  bits 0-1 kind (pairs, tagged, labeled, text); bits 2-3 the tokenizers (below);
 *           bit 4 shuffle; bit 5 decoder arrays; bit 6 strict vocabulary lookups; bit 7 sorted
 *           vocabularies
 *   byte 1  max_src_len (low 4 bits; 0: none), max_tgt_len (high 4 bits)
 *   byte 2  tag_column (bits 0-1), text_chunk (bits 2-4), vocabulary min_count (bits 5-6),
 *           decimal source ids instead of a vocabulary (bit 7)
 *   byte 3  max_tokens of the batcher (+ 1), and the seek position's batch
 *
 * The tokenizers (qkv_tokenizer.h): bit 2 is src_tokens and bit 3 text_words, which set the
 * defaults they name; where a kind has no use for one of them it sets a tokenizer instead: bit 3
 * a pairs target or a labeled line's tokens of words, bit 2 a text of tokens.
 *
 * Invariants: the text is parsed or refused with a "FILE:LINE" message; a parsed corpus reads the
 * same from a file as from memory; its examples respect the limits and the format (symbols
 * non-empty, inside the text, whole UTF-8 characters, one each where the symbols are
 * characters, no line break or NUL, no TAB but inside a text's characters or tokens; a label is
 * one symbol); joined as their tokenizer joins them, the symbols of a field cut by chars or
 * tokens give back its text as written (qkv_corpus_key); a vocabulary
 * holds the reserved ids and finds every symbol it was built from; a dataset's ids lie in its
 * vocabularies; every batch stays within its token budget, is padded, and with the others of its
 * epoch holds every example exactly once; a position formats, parses back and seeks to the same
 * batch; a refused seek leaves the batcher where it was.
 */
#include "fuzz_util.h"

#include "qkv/qkv.h"
#include "data/data_internal.h" /* qkv__utf8_char_len */
#include "qkv/qkv_data.h"
#include "recipes.h"

#include <math.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

static unsigned sink; /* every byte of every symbol is read into it: ASan sees any overrun */

/* The tokenizer that cut a field (the header's table); NULL for a tagged file or a label. */
static const qkv_tokenizer *tokenizer_of(qkv_corpus_kind kind, int field, const qkv_read_opts *o) {
    if (kind == QKV_CORPUS_TAGGED || (kind == QKV_CORPUS_LABELED && field == QKV_FIELD_TGT)) return NULL;
    if (field == QKV_FIELD_SRC) return o->src_tokenizer ? o->src_tokenizer
                                       : qkv_tokenizer_shared(kind == QKV_CORPUS_PAIRS && !o->src_tokens ? QKV_TOKENIZER_CHARS
                                                                                                        : QKV_TOKENIZER_TOKENS);
    if (o->tgt_tokenizer) return o->tgt_tokenizer;
    if (kind != QKV_CORPUS_TEXT) return qkv_tokenizer_shared(QKV_TOKENIZER_TOKENS);
    return qkv_tokenizer_shared(o->text_words ? QKV_TOKENIZER_WORDS : QKV_TOKENIZER_CHARS);
}

/* Joining the symbols of the field that qkv_corpus_key spells gives the key back (chars and
 * tokens cut without dropping anything). */
static void check_join(const qkv_corpus *c, int64_t i, int field, const qkv_tokenizer *t) {
    size_t kl = 0;
    const char *key = qkv_corpus_key(c, i, &kl);
    const int64_t n = qkv_corpus_length(c, i, field);
    const char **syms = malloc(sizeof *syms * (size_t)(n + 1));
    size_t *lens = malloc(sizeof *lens * (size_t)(n + 1)), len = 0;
    char *out = malloc(kl + 1);
    FZ_REQUIRE(key && syms && lens && out);
    for (int64_t k = 0; k < n; k++)
        syms[k] = qkv_corpus_symbol(c, i, field, k, &lens[k]);
    FZ_REQUIRE(qkv_tokenizer_join(t, syms, lens, n, out, kl + 1, &len) == QKV_OK);
    FZ_REQUIRE(len == kl && !memcmp(out, key, kl) && out[kl] == '\0');
    free(syms);
    free(lens);
    free(out);
}

static void check_corpus(const qkv_corpus *c, const char *text, size_t len, const qkv_read_opts *o) {
    const qkv_corpus_kind kind = qkv_corpus_kind_of(c);
    int64_t last_line = 0;
    for (int64_t i = 0; i < qkv_corpus_size(c); i++) {
        const int64_t line = qkv_corpus_line(c, i);
        FZ_REQUIRE(line >= 1 && line >= last_line);
        last_line = line;
        for (int field = 0; field < 2; field++) {
            const int64_t n = qkv_corpus_length(c, i, field);
            FZ_REQUIRE(n >= 0);
            const qkv_tokenizer *t = tokenizer_of(kind, field, o);
            const int64_t max = field == QKV_FIELD_SRC ? o->max_src_len : o->max_tgt_len;
            if (max && !(kind == QKV_CORPUS_TEXT && o->text_chunk)) FZ_REQUIRE(n <= max);
            if (kind == QKV_CORPUS_TEXT && o->text_chunk && field == QKV_FIELD_TGT) FZ_REQUIRE(n <= o->text_chunk);
            if (kind == QKV_CORPUS_LABELED && field == QKV_FIELD_TGT) FZ_REQUIRE(n == 1);
            if (kind == QKV_CORPUS_TEXT && field == QKV_FIELD_SRC) FZ_REQUIRE(n == 0);
            for (int64_t k = 0; k < n; k++) {
                size_t sl = 0;
                const char *s = qkv_corpus_symbol(c, i, field, k, &sl);
                FZ_REQUIRE(s && sl > 0);
                for (size_t b = 0; b < sl; b++) {
                    sink += (unsigned char)s[b];
                    FZ_REQUIRE(s[b] != '\n' && s[b] != '\r' && s[b] != '\0');
                    if (kind != QKV_CORPUS_TEXT || qkv_tokenizer_kind_of(t) == QKV_TOKENIZER_WORDS)
                        FZ_REQUIRE(s[b] != '\t');
                }
                /* whole UTF-8 characters; one each where the symbols are characters */
                int chars = 0;
                for (size_t b = 0; b < sl; chars++) {
                    const int cl = qkv__utf8_char_len((const unsigned char *)s + b, sl - b);
                    FZ_REQUIRE(cl > 0);
                    b += (size_t)cl;
                }
                if (t && qkv_tokenizer_kind_of(t) == QKV_TOKENIZER_CHARS) FZ_REQUIRE(chars == 1);
            }
            FZ_REQUIRE(qkv_corpus_symbol(c, i, field, n, NULL) == NULL);
            const bool keyed = (kind == QKV_CORPUS_TEXT) == (field == QKV_FIELD_TGT) && kind != QKV_CORPUS_TAGGED;
            if (keyed && qkv_tokenizer_kind_of(t) != QKV_TOKENIZER_WORDS) check_join(c, i, field, t);
        }
        size_t kl = 0;
        const char *key = qkv_corpus_key(c, i, &kl);
        FZ_REQUIRE((key == NULL) == (kind == QKV_CORPUS_TAGGED));
        for (size_t b = 0; key && b < kl; b++)
            sink += (unsigned char)key[b];
    }
    FZ_REQUIRE(qkv_corpus_line(c, qkv_corpus_size(c)) == 0);
    (void)text, (void)len;
}

/* The same corpus read from a file: the same examples and symbols. */
static void check_same(const qkv_corpus *a, const qkv_corpus *b) {
    FZ_REQUIRE(qkv_corpus_size(a) == qkv_corpus_size(b));
    for (int64_t i = 0; i < qkv_corpus_size(a); i++) {
        FZ_REQUIRE(qkv_corpus_line(a, i) == qkv_corpus_line(b, i));
        for (int field = 0; field < 2; field++) {
            const int64_t n = qkv_corpus_length(a, i, field);
            FZ_REQUIRE(n == qkv_corpus_length(b, i, field));
            for (int64_t k = 0; k < n; k++) {
                size_t la = 0, lb = 0;
                const char *sa = qkv_corpus_symbol(a, i, field, k, &la), *sb = qkv_corpus_symbol(b, i, field, k, &lb);
                FZ_REQUIRE(la == lb && !memcmp(sa, sb, la));
            }
        }
    }
}

static void check_vocab(const qkv_vocab *v, const qkv_corpus *c, int field, int64_t min_count) {
    fz_require_vocab_table(v);
    for (int64_t i = 0; i < qkv_corpus_size(c); i++)
        for (int64_t k = 0; k < qkv_corpus_length(c, i, field); k++) {
            size_t len = 0;
            const char *s = qkv_corpus_symbol(c, i, field, k, &len);
            const int32_t id = qkv_vocab_find(v, s, len);
            FZ_REQUIRE(id >= 0 || min_count > 1);
            int32_t got = -1;
            FZ_REQUIRE(qkv_vocab_lookup(v, s, len, false, NULL, 0, &got) == QKV_OK);
            FZ_REQUIRE(got == (id >= 0 ? id : QKV_VOCAB_UNK));
        }
}

/* The spelling features of a word: into a heap buffer of exactly the promised size. */
static void check_features(const char *s, size_t len) {
    const size_t size = (len > 4 ? len : 4) + 1;
    char *out = malloc(size);
    FZ_REQUIRE(out != NULL);
    for (int f = 0; f < QKV_FEAT_COUNT; f++) {
        size_t n = 0;
        FZ_REQUIRE(qkv_word_feature_of((qkv_word_feature)f, s, len, out, size, &n) == QKV_OK);
        FZ_REQUIRE(n < size && out[n] == '\0' && (f == QKV_FEAT_SHAPE || n <= len));
    }
    free(out);
}

static void check_batch(const qkv_batch *b, const qkv_batch_opts *o, const qkv_dataset *d, unsigned char *seen) {
    FZ_REQUIRE(b->rows >= 1 && b->tokens <= o->max_tokens);
    if (o->max_rows) FZ_REQUIRE(b->rows <= o->max_rows);
    FZ_REQUIRE((b->dec_in != NULL) == o->decoder && (b->dec_cols == (o->decoder ? b->tgt_cols + 1 : 0)));
    for (int64_t r = 0; r < b->rows; r++) {
        const int64_t i = b->example[r];
        FZ_REQUIRE(i >= 0 && i < qkv_dataset_size(d) && !seen[i]);
        seen[i] = 1;
        qkv_example e;
        FZ_REQUIRE(qkv_dataset_get(d, i, &e) == QKV_OK);
        FZ_REQUIRE(b->src_len[r] == e.src_len && b->tgt_len[r] == e.tgt_len);
        for (int64_t c = 0; c < b->src_cols; c++)
            FZ_REQUIRE(b->src[r * b->src_cols + c] == (c < e.src_len ? e.src[c] : o->pad_id));
        for (int64_t c = 0; c < b->tgt_cols; c++)
            FZ_REQUIRE(b->tgt[r * b->tgt_cols + c] == (c < e.tgt_len ? e.tgt[c] : o->pad_id));
        for (int64_t c = 0; c < b->dec_cols; c++) {
            FZ_REQUIRE(b->dec_in[r * b->dec_cols + c] == (c == 0 ? o->bos_id : c <= e.tgt_len ? e.tgt[c - 1] : o->pad_id));
            FZ_REQUIRE(b->dec_out[r * b->dec_cols + c] ==
                       (c < e.tgt_len ? e.tgt[c] : c == e.tgt_len ? o->eos_id : o->pad_id));
        }
    }
}

static bool same_batch(const qkv_batch *a, const qkv_batch *b) {
    if (a->rows != b->rows || a->epoch != b->epoch || a->index != b->index) return false;
    for (int64_t r = 0; r < a->rows; r++)
        if (a->example[r] != b->example[r]) return false;
    return true;
}

static void check_batcher(const qkv_dataset *d, uint8_t o0, uint8_t o3) {
    qkv_batch_opts o = qkv_batch_default_opts(1 + (o3 & 63));
    o.shuffle = (o0 >> 4) & 1;
    o.decoder = (o0 >> 5) & 1;
    o.bucket_width = o3 >> 6;
    o.max_rows = (o3 >> 5) & 1 ? 3 : 0;
    qkv_batcher *b = NULL;
    qkv_status st = qkv_batcher_new(d, &o, &b);
    FZ_REQUIRE((st == QKV_OK) == (b != NULL) && (st == QKV_OK || qkv_last_error()[0] != '\0'));
    if (st) return;
    const int64_t n = qkv_dataset_size(d);
    unsigned char *seen = calloc((size_t)n, 1);
    FZ_REQUIRE(seen != NULL);
    for (int epoch = 0; epoch < 2; epoch++) {
        memset(seen, 0, (size_t)n);
        const int64_t nb = qkv_batcher_num_batches(b);
        FZ_REQUIRE(nb >= 1 && nb <= n);
        for (int64_t k = 0; k < nb; k++) {
            const qkv_batch_pos pos = qkv_batcher_tell(b);
            FZ_REQUIRE(pos.epoch == (uint64_t)epoch && pos.batch == k);
            char text[128];
            qkv_batch_pos_format(pos, text, sizeof text);
            qkv_batch_pos back;
            FZ_REQUIRE(qkv_batch_pos_parse(text, &back) == QKV_OK);
            FZ_REQUIRE(back.epoch == pos.epoch && back.batch == pos.batch && back.fingerprint == pos.fingerprint);
            qkv_batch x;
            FZ_REQUIRE(qkv_batcher_next(b, &x) == QKV_OK);
            check_batch(&x, &o, d, seen);
            if (k == (int64_t)(o3 % (uint64_t)nb)) { /* seek back to it: the same batch again */
                qkv_batch keep = x;
                int64_t *rows = malloc((size_t)x.rows * sizeof *rows);
                FZ_REQUIRE(rows != NULL);
                memcpy(rows, x.example, (size_t)x.rows * sizeof *rows);
                keep.example = rows;
                FZ_REQUIRE(qkv_batcher_seek(b, back) == QKV_OK);
                FZ_REQUIRE(qkv_batcher_next(b, &x) == QKV_OK && same_batch(&keep, &x));
                free(rows);
            }
        }
        for (int64_t i = 0; i < n; i++)
            FZ_REQUIRE(seen[i]);
    }
    /* positions outside the epoch, or of other data, are refused and change nothing */
    const qkv_batch_pos here = qkv_batcher_tell(b);
    const qkv_batch_pos bad[3] = {{here.epoch, qkv_batcher_num_batches(b) + 1 + o3, here.fingerprint},
                                  {here.epoch, -1 - (int64_t)o3, 0},
                                  {(uint64_t)o3 << 40, 0, here.fingerprint ^ 1}};
    for (int k = 0; k < 3; k++) {
        FZ_REQUIRE(qkv_batcher_seek(b, bad[k]) != QKV_OK && qkv_last_error()[0] != '\0');
        const qkv_batch_pos now = qkv_batcher_tell(b);
        FZ_REQUIRE(now.epoch == here.epoch && now.batch == here.batch);
    }
    /* a far epoch plans as well as the first */
    FZ_REQUIRE(qkv_batcher_seek(b, (qkv_batch_pos){(uint64_t)o3 << 56, 0, 0}) == QKV_OK);
    qkv_batch x;
    FZ_REQUIRE(qkv_batcher_next(b, &x) == QKV_OK && x.rows >= 1 && x.tokens <= o.max_tokens);
    free(seen);
    qkv_batcher_free(b);
}

static void check_dataset(const qkv_corpus *c, const qkv_vocab *sv, const qkv_vocab *tv, bool strict, uint8_t o0,
                          uint8_t o3) {
    qkv_dataset *d = NULL;
    qkv_status st = qkv_dataset_encode(c, sv, tv, strict, &d);
    FZ_REQUIRE((st == QKV_OK) == (d != NULL) && (st == QKV_OK || qkv_last_error()[0] != '\0'));
    if (st) return;
    FZ_REQUIRE(qkv_dataset_size(d) == qkv_corpus_size(c));
    for (int64_t i = 0; i < qkv_dataset_size(d); i++) {
        qkv_example e;
        FZ_REQUIRE(qkv_dataset_get(d, i, &e) == QKV_OK);
        FZ_REQUIRE(e.src_len == qkv_corpus_length(c, i, QKV_FIELD_SRC) && e.tgt_len == qkv_corpus_length(c, i, QKV_FIELD_TGT));
        for (int64_t k = 0; k < e.src_len; k++)
            FZ_REQUIRE(e.src[k] >= 0 && (!sv || e.src[k] < qkv_vocab_size(sv)));
        for (int64_t k = 0; k < e.tgt_len; k++)
            FZ_REQUIRE(e.tgt[k] >= 0 && (!tv || e.tgt[k] < qkv_vocab_size(tv)));
    }
    if (qkv_dataset_size(d) > 0) check_batcher(d, o0, o3);
    qkv_dataset_free(d);
}

static void check_baselines(const qkv_corpus *c, uint8_t o2) {
    const qkv_corpus_kind kind = qkv_corpus_kind_of(c);
    if (kind == QKV_CORPUS_LABELED && qkv_corpus_size(c) > 0) {
        qkv_nb *m = NULL;
        qkv_status st = qkv_nb_train(c, 1.0, &m);
        FZ_REQUIRE(st == QKV_OK || qkv_last_error()[0] != '\0');
        if (!st) {
            double *post = calloc((size_t)qkv_nb_num_classes(m), sizeof *post);
            FZ_REQUIRE(post != NULL);
            for (int64_t i = 0; i < qkv_corpus_size(c) && i < 64; i++) {
                int32_t label = -1;
                FZ_REQUIRE(qkv_nb_predict(m, c, i, &label, post) == QKV_OK);
                FZ_REQUIRE(label >= 0 && label < qkv_nb_num_classes(m));
                for (int32_t k = 0; k < qkv_nb_num_classes(m); k++)
                    FZ_REQUIRE(!isnan(post[k]) && post[k] <= 1e-9);
            }
            free(post);
        }
        qkv_nb_free(m);
    }
    if (kind == QKV_CORPUS_TEXT && qkv_corpus_size(c) > 0) {
        qkv_ngram *m = NULL;
        qkv_status st = qkv_ngram_train(c, 1 + (o2 & 3), &m);
        FZ_REQUIRE(st == QKV_OK || qkv_last_error()[0] != '\0');
        if (!st) {
            double nats = 0;
            int64_t events = 0;
            FZ_REQUIRE(qkv_ngram_score(m, c, &nats, &events) == QKV_OK);
            FZ_REQUIRE(isfinite(nats) && nats >= 0 && events >= qkv_corpus_size(c));
        }
        qkv_ngram_free(m);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    const uint8_t o0 = fz_byte(&r), o1 = fz_byte(&r), o2 = fz_byte(&r), o3 = fz_byte(&r);
    const qkv_corpus_kind kind = (qkv_corpus_kind)(o0 & 3);
    const bool bit2 = (o0 >> 2) & 1, bit3 = (o0 >> 3) & 1;
    const qkv_tokenizer *words = qkv_tokenizer_shared(QKV_TOKENIZER_WORDS);
    const qkv_read_opts opts = {
        .max_src_len = o1 & 15,
        .max_tgt_len = o1 >> 4,
        .tag_column = o2 & 3,
        .src_tokens = bit2,
        .text_words = bit3,
        .text_chunk = (o2 >> 2) & 7,
        .src_tokenizer = kind == QKV_CORPUS_LABELED && bit3 ? words : NULL,
        .tgt_tokenizer = kind == QKV_CORPUS_PAIRS && bit3   ? words
                         : kind == QKV_CORPUS_TEXT && bit2 && !bit3 ? qkv_tokenizer_shared(QKV_TOKENIZER_TOKENS)
                                                                     : NULL};
    const bool strict = (o0 >> 6) & 1, sorted = o0 >> 7, decimal_src = o2 >> 7;
    const int64_t min_count = 1 + ((o2 >> 5) & 3);
    const char *text = (const char *)r.p;
    qkv_corpus *c = NULL;
    qkv_status st = qkv_corpus_parse(kind, text, r.n, "fuzz.tsv", &opts, &c);
    FZ_REQUIRE((st == QKV_OK) == (c != NULL));
    FZ_REQUIRE(st == QKV_OK || (st == QKV_ERR_FORMAT && qkv_last_error()[0] != '\0'));
    const char *path = fz_path("corpus.tsv");
    fz_write_file(path, text, r.n);
    qkv_corpus *from_file = NULL;
    qkv_status st2 = qkv_corpus_read(kind, path, &opts, &from_file);
    FZ_REQUIRE(st2 == st);
    remove(path);
    if (st) return 0;
    check_corpus(c, text, r.n, &opts);
    check_same(c, from_file);
    qkv_corpus_free(from_file);

    qkv_vocab *sv = NULL, *tv = NULL;
    FZ_REQUIRE(qkv_vocab_build(c, QKV_FIELD_SRC, min_count, sorted, &sv) == QKV_OK);
    FZ_REQUIRE(qkv_vocab_build(c, QKV_FIELD_TGT, min_count, sorted, &tv) == QKV_OK);
    check_vocab(sv, c, QKV_FIELD_SRC, min_count);
    check_vocab(tv, c, QKV_FIELD_TGT, min_count);
    check_dataset(c, decimal_src ? NULL : sv, tv, strict, o0, o3);
    if (kind == QKV_CORPUS_LABELED) check_dataset(c, NULL, NULL, true, o0, o3); /* digits: ids as numbers */

    if (kind == QKV_CORPUS_PAIRS) {
        qkv_groups g = {0};
        st = qkv_corpus_groups(c, &g);
        FZ_REQUIRE(st == QKV_OK || (st == QKV_ERR_FORMAT && qkv_last_error()[0] != '\0'));
        if (!st) {
            FZ_REQUIRE(g.n <= qkv_corpus_size(c) && g.start[0] == 0 && g.start[g.n] == qkv_corpus_size(c));
            for (int64_t k = 0; k < g.n; k++)
                FZ_REQUIRE(g.start[k] < g.start[k + 1]);
        }
        qkv_groups_free(&g);
    }
    for (int64_t i = 0; i < qkv_corpus_size(c) && i < 16; i++)
        for (int64_t k = 0; k < qkv_corpus_length(c, i, QKV_FIELD_SRC) && k < 16; k++) {
            size_t len = 0;
            const char *s = qkv_corpus_symbol(c, i, QKV_FIELD_SRC, k, &len);
            check_features(s, len);
        }
    if (kind == QKV_CORPUS_TAGGED)
        for (int64_t i = 0; i < qkv_corpus_size(c) && i < 16; i++)
            for (int64_t k = 0; k < qkv_corpus_length(c, i, QKV_FIELD_TGT) && k < 16; k++) {
                size_t len = 0;
                const char *s = qkv_corpus_symbol(c, i, QKV_FIELD_TGT, k, &len);
                char *tag = fz_strndup(s, len);
                FZ_REQUIRE(qkv_brown_universal_tag(tag) != NULL);
                free(tag);
            }
    check_baselines(c, o2);
    qkv_vocab_free(sv);
    qkv_vocab_free(tv);
    qkv_corpus_free(c);
    return 0;
}
