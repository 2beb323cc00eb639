/*
 * data_internal.h (internal): what the data layer's files share: a growable byte buffer, whole-file
 * reading, atomic file writing, directory creation, quoting of bad input for messages, strict
 * decimal parsing, the tokenizers' table, and the vocabulary's symbol table used by the converters.
 */
#ifndef QKV_DATA_INTERNAL_H
#define QKV_DATA_INTERNAL_H

#include "qkv/qkv_data.h"
#include "qkv/qkv_tokenizer.h"

#include "../core/internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- growable byte buffer: appends never fail; oom is sticky and checked once at the end ---- */

typedef struct qkv__buf {
    char *p;
    size_t n, cap;
    bool oom;
} qkv__buf;

void qkv__buf_add(qkv__buf *b, const void *data, size_t n);
void qkv__buf_str(qkv__buf *b, const char *s);
void qkv__buf_ch(qkv__buf *b, char c);
void qkv__buf_i64(qkv__buf *b, int64_t v);
void qkv__buf_free(qkv__buf *b);

/* ---- files ---- */

/* The whole file, NUL-terminated (*len excludes the NUL); malloc'd, caller frees. `who` starts
 * the message: "<who>: <path>: cannot open: <strerror>" (QKV_ERR_IO). */
qkv_status qkv__read_file(const char *who, const char *path, char **data, size_t *len);
/* mkdir -p (mode 0777 & ~umask). */
qkv_status qkv__mkdirs(const char *who, const char *path);
/* "dir/name" into a malloc'd string (NULL on OOM). */
char *qkv__path_join(const char *dir, const char *name);

/* The line of text[0, size) that starts at *pos (*pos < size): its length without the '\n' into
 * *len, *pos moved past its '\n'; returns its start. The last line may lack its '\n'. */
static inline const char *qkv__take_line(const char *text, size_t size, size_t *pos, size_t *len) {
    const char *s = text + *pos, *nl = memchr(s, '\n', size - *pos);
    *len = nl ? (size_t)(nl - s) : size - *pos;
    *pos += *len + 1;
    return s;
}

/* ---- messages ---- */

/* s[0, len) quoted for a message: control and non-ASCII bytes as \xNN, \t as \t, truncated to
 * about 40 characters with "...". buf holds at least 200 bytes. */
const char *qkv__quote(char *buf, size_t size, const char *s, size_t len);

/* The id (0 .. QKV_VOCAB_RESERVED - 1) of s[0, len) when it spells a reserved symbol ("<pad>",
 * "<unk>", "<bos>", "<eos>"), else -1 (vocab.c). */
int32_t qkv__vocab_reserved_id(const char *s, size_t len);

/* ---- parsing ---- */

/* s[0, len) is a decimal integer in [0, max] (no sign, no leading zeros except "0"). */
bool qkv__parse_uint(const char *s, size_t len, int64_t max, int64_t *out);
/* The value 0..63 of a base64 digit (RFC 4648's alphabet: A-Z a-z 0-9 + /, also that of dictd's
 * index numbers), -1 for any other byte. */
static inline int qkv__base64_digit(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}
/* Bytes of the UTF-8 character at s[0, n): 1..4, or 0 when it is malformed (overlong forms,
 * surrogates and code points above U+10FFFF are malformed). */
int qkv__utf8_char_len(const unsigned char *s, size_t n);

/* ---- tokenizers (tokenizer.c holds the table, one file per tokenizer) ---- */

/* What a tokenizer does. split follows qkv_tokenizer_split; `what` is never NULL there. */
typedef struct qkv__tokenizer_ops {
    qkv_tokenizer_kind kind;
    const char *unit;      /* its symbols in messages: "characters" */
    const char *separator; /* put between symbols by qkv_tokenizer_join, unless it has a join */
    qkv_status (*split)(const qkv_tokenizer *t, const char *text, size_t len, const char *what, qkv_symbol_fn emit,
                        void *ctx);
    /* The text of n symbols appended to out (NULL: the symbols with the separator between). */
    qkv_status (*join)(const qkv_tokenizer *t, const char *const *syms, const size_t *lens, int64_t n, qkv__buf *out);
    /* The symbols it spells unknown characters with, added to v (NULL: none). */
    qkv_status (*add_fallback)(const qkv_tokenizer *t, qkv_vocab *v);
    /* A tokenizer with a model file reads it into its state (NULL: one that takes none). */
    qkv_status (*load)(const char *path, void **state);
    void (*free_state)(void *state);
} qkv__tokenizer_ops;

struct qkv_tokenizer {
    const qkv__tokenizer_ops *ops;
    void *state; /* a learned tokenizer's model; NULL for those that only cut the text */
};

extern const qkv__tokenizer_ops qkv__tokenizer_chars, qkv__tokenizer_tokens, qkv__tokenizer_words, qkv__tokenizer_bpe;

#endif
