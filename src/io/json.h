/*
 * json.h (internal): a small strict JSON parser (RFC 8259) for safetensors headers.
 *
 * The whole document is parsed into a tree owned by a qkv_json_doc. Strict means:
 *   - exactly one value, surrounded only by JSON whitespace (space, \t, \n, \r);
 *   - strings must be valid UTF-8 with no raw control characters; escapes (\" \\ \/ \b \f \n
 *     \r \t \uXXXX) are decoded to UTF-8, a \uD800-\uDBFF high surrogate must be followed by a
 *     \uDC00-\uDFFF low surrogate (the pair becomes one 4-byte character), lone surrogates are
 *     errors;
 *   - numbers follow the grammar (no leading zeros, no '+', no bare '.'); a number without
 *     fraction or exponent is an INT holding its magnitude exactly (0 .. 2^64-1) and its sign;
 *     a larger integer literal is an error, not a silent conversion to floating point. Other
 *     numbers are NUMBER values that keep their text (no float conversion is needed here and
 *     strtod would depend on the locale);
 *   - duplicate keys in one object are errors;
 *   - nesting deeper than QKV_JSON_MAX_DEPTH arrays/objects is an error (bounded recursion).
 * Errors carry a message and the byte offset of the offending character.
 */
#ifndef QKV_IO_JSON_H
#define QKV_IO_JSON_H

#include "qkv/qkv.h"

#include <stdbool.h>

#define QKV_JSON_MAX_DEPTH 64

typedef enum qkv_json_type {
    QKV_JSON_NULL,
    QKV_JSON_BOOL,
    QKV_JSON_INT,    /* integer literal: negative + magnitude */
    QKV_JSON_NUMBER, /* number with a fraction or an exponent: text only */
    QKV_JSON_STRING,
    QKV_JSON_ARRAY,
    QKV_JSON_OBJECT
} qkv_json_type;

typedef struct qkv_json_value {
    qkv_json_type type;
    bool boolean;       /* BOOL */
    bool negative;      /* INT: the literal had a minus sign ("-0" too) */
    uint64_t magnitude; /* INT: |value| */
    const char *str;    /* STRING: decoded UTF-8; NUMBER: the literal. NUL-terminated. */
    size_t len;         /* bytes of str (a STRING may contain NUL bytes from \u0000) */
    const char *key;    /* members of an OBJECT: the decoded key, NUL-terminated; else NULL */
    size_t key_len;
    const struct qkv_json_value *items; /* ARRAY / OBJECT: the children in document order */
    int64_t count;                      /* ARRAY / OBJECT: number of children */
    size_t offset;                      /* byte offset of the value (of the key for members) */
    int64_t first_;                     /* private: index of items while parsing */
} qkv_json_value;

typedef struct qkv_json_doc qkv_json_doc;

typedef struct qkv_json_error {
    size_t offset;     /* byte offset of the error in the input */
    char message[160]; /* "unterminated string" (without the offset) */
} qkv_json_error;

/* Parse text[0, len). On success *out owns the tree; on failure *out is NULL, err (may be NULL)
 * says what and where, qkv_last_error() reads "JSON: <message> at byte <offset>", and the status
 * is QKV_ERR_FORMAT (or QKV_ERR_OOM). */
qkv_status qkv_json_parse(const char *text, size_t len, qkv_json_doc **out, qkv_json_error *err);
void qkv_json_free(qkv_json_doc *doc); /* accepts NULL */
const qkv_json_value *qkv_json_root(const qkv_json_doc *doc);

/* The member of an object with the given key (NULL when absent or obj is not an object). */
const qkv_json_value *qkv_json_get(const qkv_json_value *obj, const char *key);
/* A non-negative INT ("-0" counts) as uint64. False for anything else. */
bool qkv_json_u64(const qkv_json_value *v, uint64_t *out);
/* Whether s[0, len) is well-formed UTF-8 by the rules strings are checked with. */
bool qkv_json_utf8_valid(const char *s, size_t len);
/* "null", "boolean", "integer", "number", "string", "array", "object" */
const char *qkv_json_type_name(qkv_json_type t);

#endif
