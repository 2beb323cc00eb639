/*
 * bpe.h (internal): what the byte-pair-encoding files share (bpe_model.c: the model and its file;
 * bpe_learn.c: learning; tokenize_bpe.c: applying it as a tokenizer). docs/data.md, section
 * "Subwords", has the rules; in short:
 *
 *   words    a text is cut before every space; each word starts with the marker "▁" (U+2581)
 *            standing for that space, and the first word's for the start of the text
 *            ("a b" -> ▁a ▁b; " a" -> ▁ ▁a). Joining the symbols back turns each marker into a
 *            space and drops the first: the round trip join(split(x)) = x is exact.
 *   symbols  the characters of the alphabet (those seen at least min_char_count times while
 *            learning, and the marker), the results of merges, and 256 byte symbols "<0x00>" ..
 *            "<0xFF>" that spell, one UTF-8 byte each, a character outside the alphabet (byte
 *            fallback) and always a literal "▁" of the text. Byte symbols never merge, and no
 *            merge may spell one, so no other symbol reads as a byte.
 *   merges   learned as subword-nmt learns them (Sennrich et al. 2016, learn_bpe.py): repeatedly
 *            the most frequent adjacent pair of symbols inside words, counted over the corpus'
 *            words (ties: the greater pair, comparing the left then the right symbol's UTF-8
 *            bytes), until `merges` of them or until the best pair occurs fewer than
 *            min_frequency times. Applied as apply_bpe.py applies them: in each word, every
 *            occurrence (left to right, not overlapping) of the present pair of lowest rank,
 *            then again, until no present pair has a rank.
 */
#ifndef QKV_DATA_BPE_H
#define QKV_DATA_BPE_H

#include "data_internal.h"

/* The marker of a word's leading space: U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's. */
#define QKV_BPE_MARKER "\xe2\x96\x81"
#define QKV_BPE_MARKER_LEN 3
/* Ids 0 .. 255 are the byte symbols "<0xHH>". */
#define QKV_BPE_BYTES 256

/* ---- strings <-> dense ids (open addressing, FNV-1a, load <= 1/2) ---- */

typedef struct qkv__strtab {
    qkv__buf text;      /* every string, back to back, each NUL-terminated */
    size_t *off;        /* (n) start of string id in text */
    uint32_t *len;      /* (n) */
    int32_t n, cap;
    int32_t *slot;      /* (mask + 1): an id, or -1 */
    uint32_t mask;
} qkv__strtab;

/* The id of s[0, len), or -1. */
int32_t qkv__strtab_find(const qkv__strtab *t, const char *s, size_t len);
/* The id of s[0, len), added when absent; -1 when out of memory. */
int32_t qkv__strtab_add(qkv__strtab *t, const char *s, size_t len);
static inline const char *qkv__strtab_str(const qkv__strtab *t, int32_t id, size_t *len) {
    *len = t->len[id];
    return t->text.p + t->off[id];
}
void qkv__strtab_free(qkv__strtab *t);

/* ---- pairs of ids -> an int32 value ---- */

typedef struct qkv__pairmap {
    uint64_t *key; /* (mask + 1): left << 32 | right, or UINT64_MAX for an empty slot */
    int32_t *val;
    uint32_t mask;
    int32_t n;
} qkv__pairmap;

static inline uint64_t qkv__pair_key(int32_t left, int32_t right) {
    return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}
/* The value of (left, right), or -1. */
int32_t qkv__pairmap_get(const qkv__pairmap *m, int32_t left, int32_t right);
/* Set (left, right) to val (>= 0); false when out of memory. */
bool qkv__pairmap_put(qkv__pairmap *m, int32_t left, int32_t right, int32_t val);
void qkv__pairmap_free(qkv__pairmap *m);

/* ---- the model ---- */

typedef struct qkv__bpe {
    qkv__strtab sym;    /* ids: 256 byte symbols, the alphabet, then what merges made */
    int32_t n_alphabet; /* ids 256 .. 256 + n_alphabet - 1, in UTF-8 byte order */
    int32_t marker;     /* the id of "▁" */
    bool byte_fallback; /* characters outside the alphabet: byte symbols (else themselves) */
    int32_t n_merges;
    int32_t *merge;     /* (n_merges, 3): left, right, result; row r has rank r */
    qkv__pairmap rank;  /* (left, right) -> rank */
} qkv__bpe;

/* An empty model: the byte symbols and the marker. */
qkv_status qkv__bpe_init(qkv__bpe *m, bool byte_fallback);
void qkv__bpe_free(qkv__bpe *m);
/* Add a character of the alphabet (calls in UTF-8 byte order, before any merge). */
qkv_status qkv__bpe_add_char(qkv__bpe *m, const char *c, size_t len);
/* Add the merge of rank n_merges: left + right, both existing symbols that are not bytes. */
qkv_status qkv__bpe_add_merge(qkv__bpe *m, int32_t left, int32_t right);
/* Whether s[0, len) spells a byte symbol "<0xHH>" (HH two upper-case hex digits); its value. */
bool qkv__bpe_is_byte(const char *s, size_t len, unsigned *byte);
/* Whether the character c[0, k) is spelled as bytes whatever the alphabet: a literal marker,
 * '\r', NUL (never characters of an alphabet). */
static inline bool qkv__bpe_always_bytes(const char *c, int k) {
    return c[0] == '\r' || c[0] == '\0' || (k == QKV_BPE_MARKER_LEN && !memcmp(c, QKV_BPE_MARKER, QKV_BPE_MARKER_LEN));
}
/* The id of the character c[0, k) in m's alphabet, or -1 (outside it, or a literal marker). */
static inline int32_t qkv__bpe_char_id(const qkv__bpe *m, const char *c, int k) {
    const int32_t id = qkv__strtab_find(&m->sym, c, (size_t)k);
    return id == m->marker || id >= QKV_BPE_BYTES + m->n_alphabet ? -1 : id;
}

/* The model file (bpe_model.c: the format is in its header comment). */
qkv_status qkv__bpe_save(const qkv__bpe *m, const char *path);
qkv_status qkv__bpe_load(const char *path, qkv__bpe *m);
qkv_status qkv__bpe_parse(const char *text, size_t len, const char *name, qkv__bpe *m);

/* The words of text[0, len) (the rules above): for each, the span [off, off + n) of its
 * characters (after the space it starts with, if any) and whether it starts with a space
 * (off - 1). */
typedef qkv_status (*qkv__bpe_word_fn)(void *ctx, size_t off, size_t n, bool after_space);
qkv_status qkv__bpe_words(const char *text, size_t len, qkv__bpe_word_fn fn, void *ctx);

#endif
