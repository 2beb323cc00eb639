/*
 * json.c: the strict JSON parser of json.h (RFC 8259), recursive descent.
 *
 * Memory: one block for every decoded string and number text, sized len + 2 up front (a token
 * of L source bytes needs at most L + 1 bytes with its NUL, and every token but the last is
 * followed by at least one byte that is not part of a token), so string pointers never move.
 * Values are built on a stack: when an array or object closes, its children are moved from the
 * stack to the end of the output array as one contiguous run, so `items` of a container is a
 * plain array. Pointers into the output array are fixed up once at the end.
 * Duplicate keys are found by sorting pointers to an object's members by key (n log n).
 */
#include "json.h"

#include "../core/internal.h"

#include <stdlib.h>

struct qkv_json_doc {
    qkv_json_value *values; /* children runs, then the root last */
    int64_t n;
    char *strings;
};

typedef struct {
    const unsigned char *s;
    size_t len, pos;
    char *strings; /* the doc's string block */
    size_t str_used;
    qkv_json_value *stack; /* values of unfinished containers */
    int64_t n_stack, cap_stack;
    qkv_json_value *out; /* finished children runs */
    int64_t n_out, cap_out;
    const qkv_json_value **sort; /* scratch for the duplicate-key check */
    int64_t cap_sort;
    bool oom;
    qkv_json_error err;
} parser;

static bool fail_at(parser *P, size_t offset, const char *msg) {
    if (!P->err.message[0]) { /* keep the innermost (first) error */
        P->err.offset = offset;
        snprintf(P->err.message, sizeof P->err.message, "%s", msg);
    }
    return false;
}

static bool oom(parser *P) {
    P->oom = true;
    return fail_at(P, P->pos, "out of memory");
}

static bool grow(parser *P, void **arr, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return true;
    int64_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *p = realloc(*arr, (size_t)c * elem);
    if (!p) return oom(P);
    *arr = p;
    *cap = c;
    return true;
}

static qkv_json_value *push(parser *P, qkv_json_type type, size_t offset) {
    if (!grow(P, (void **)&P->stack, &P->cap_stack, P->n_stack + 1, sizeof *P->stack)) return NULL;
    qkv_json_value *v = &P->stack[P->n_stack++];
    memset(v, 0, sizeof *v);
    v->type = type;
    v->offset = offset;
    v->first_ = -1;
    return v;
}

static void skip_ws(parser *P) {
    while (P->pos < P->len) {
        unsigned char c = P->s[P->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        P->pos++;
    }
}

/* ---- strings -------------------------------------------------------------------------------- */

static int hex4(const unsigned char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the valid UTF-8 sequence starting at s[0] (a byte >= 0x80), 0 if invalid.
 * Rejects overlong forms, UTF-16 surrogates (U+D800..U+DFFF) and code points over U+10FFFF. */
static size_t utf8_seq(const unsigned char *s, size_t avail) {
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c == 0xE0)
        n = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC)
        n = 3;
    else if (c == 0xED)
        n = 3, hi = 0x9F;
    else if (c >= 0xEE && c <= 0xEF)
        n = 3;
    else if (c == 0xF0)
        n = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3)
        n = 4;
    else if (c == 0xF4)
        n = 4, hi = 0x8F;
    else
        return 0;
    if (avail < n || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return n;
}

/* P->pos is at the opening quote. Decodes into the string block; out and out_len get the text. */
static bool parse_string(parser *P, const char **out, size_t *out_len) {
    char *o = P->strings + P->str_used, *start = o;
    P->pos++; /* opening quote */
    for (;;) {
        if (P->pos >= P->len) return fail_at(P, P->pos, "unterminated string");
        unsigned char c = P->s[P->pos];
        if (c == '"') {
            P->pos++;
            break;
        }
        if (c < 0x20) return fail_at(P, P->pos, "control character in string (must be escaped)");
        if (c == '\\') {
            size_t at = P->pos;
            if (P->pos + 1 >= P->len) return fail_at(P, P->pos, "unterminated string");
            unsigned char e = P->s[P->pos + 1];
            P->pos += 2;
            switch (e) {
            case '"':
                *o++ = '"';
                break;
            case '\\':
                *o++ = '\\';
                break;
            case '/':
                *o++ = '/';
                break;
            case 'b':
                *o++ = '\b';
                break;
            case 'f':
                *o++ = '\f';
                break;
            case 'n':
                *o++ = '\n';
                break;
            case 'r':
                *o++ = '\r';
                break;
            case 't':
                *o++ = '\t';
                break;
            case 'u': {
                int u = P->pos + 4 <= P->len ? hex4(P->s + P->pos) : -1;
                if (u < 0) return fail_at(P, at, "\\u must be followed by 4 hex digits");
                P->pos += 4;
                uint32_t cp = (uint32_t)u;
                if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return fail_at(P, at, "unpaired low surrogate in \\u escape");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    int lo = -1;
                    if (P->pos + 6 <= P->len && P->s[P->pos] == '\\' && P->s[P->pos + 1] == 'u')
                        lo = hex4(P->s + P->pos + 2);
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return fail_at(P, at,
                                       "high surrogate in \\u escape not followed by a "
                                       "low surrogate");
                    P->pos += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                }
                o += put_utf8(o, cp);
                break;
            }
            default:
                return fail_at(P, at, "invalid escape in string");
            }
            continue;
        }
        if (c < 0x80) {
            *o++ = (char)c;
            P->pos++;
            continue;
        }
        size_t n = utf8_seq(P->s + P->pos, P->len - P->pos);
        if (!n) return fail_at(P, P->pos, "invalid UTF-8 in string");
        memcpy(o, P->s + P->pos, n);
        o += n;
        P->pos += n;
    }
    *o++ = '\0';
    *out = start;
    *out_len = (size_t)(o - start) - 1;
    P->str_used += (size_t)(o - start);
    return true;
}

/* ---- numbers and literals ------------------------------------------------------------------- */

static bool is_digit(unsigned char c) {
    return c >= '0' && c <= '9';
}

static bool parse_number(parser *P) {
    size_t start = P->pos;
    bool neg = false, overflow = false, integer = true;
    uint64_t mag = 0;
    if (P->s[P->pos] == '-') {
        neg = true;
        P->pos++;
    }
    if (P->pos >= P->len || !is_digit(P->s[P->pos]))
        return fail_at(P, P->pos, "expected a digit in number");
    if (P->s[P->pos] == '0') {
        P->pos++;
        if (P->pos < P->len && is_digit(P->s[P->pos]))
            return fail_at(P, start, "leading zeros are not allowed in numbers");
    } else {
        while (P->pos < P->len && is_digit(P->s[P->pos])) {
            unsigned d = P->s[P->pos++] - '0';
            if (mag > (UINT64_MAX - d) / 10)
                overflow = true;
            else
                mag = mag * 10 + d;
        }
    }
    if (P->pos < P->len && P->s[P->pos] == '.') {
        integer = false;
        P->pos++;
        if (P->pos >= P->len || !is_digit(P->s[P->pos]))
            return fail_at(P, P->pos, "expected a digit after the decimal point");
        while (P->pos < P->len && is_digit(P->s[P->pos]))
            P->pos++;
    }
    if (P->pos < P->len && (P->s[P->pos] == 'e' || P->s[P->pos] == 'E')) {
        integer = false;
        P->pos++;
        if (P->pos < P->len && (P->s[P->pos] == '+' || P->s[P->pos] == '-')) P->pos++;
        if (P->pos >= P->len || !is_digit(P->s[P->pos]))
            return fail_at(P, P->pos, "expected a digit in the exponent");
        while (P->pos < P->len && is_digit(P->s[P->pos]))
            P->pos++;
    }
    if (integer && overflow) return fail_at(P, start, "integer out of range (above 2^64-1)");
    qkv_json_value *v = push(P, integer ? QKV_JSON_INT : QKV_JSON_NUMBER, start);
    if (!v) return false;
    v->negative = neg;
    v->magnitude = integer ? mag : 0;
    size_t n = P->pos - start;
    char *o = P->strings + P->str_used;
    memcpy(o, P->s + start, n);
    o[n] = '\0';
    v->str = o;
    v->len = n;
    P->str_used += n + 1;
    return true;
}

static bool parse_literal(parser *P, const char *word, qkv_json_type type, bool b) {
    size_t n = strlen(word);
    if (P->len - P->pos < n || memcmp(P->s + P->pos, word, n) != 0)
        return fail_at(P, P->pos, "invalid literal (expected true, false or null)");
    qkv_json_value *v = push(P, type, P->pos);
    if (!v) return false;
    v->boolean = b;
    P->pos += n;
    return true;
}

/* ---- containers ------------------------------------------------------------------------------ */

static int by_key(const void *a, const void *b) {
    const qkv_json_value *x = *(const qkv_json_value *const *)a,
                         *y = *(const qkv_json_value *const *)b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    if (c) return c;
    if (x->key_len != y->key_len) return x->key_len < y->key_len ? -1 : 1;
    return x->offset < y->offset ? -1 : (x->offset > y->offset);
}

static bool check_duplicates(parser *P, int64_t base, int64_t count) {
    if (count < 2) return true;
    if (!grow(P, (void **)&P->sort, &P->cap_sort, count, sizeof *P->sort)) return false;
    for (int64_t i = 0; i < count; i++)
        P->sort[i] = &P->stack[base + i];
    qsort(P->sort, (size_t)count, sizeof *P->sort, by_key);
    for (int64_t i = 1; i < count; i++) {
        const qkv_json_value *a = P->sort[i - 1], *b = P->sort[i];
        if (a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0) {
            char msg[160];
            snprintf(msg, sizeof msg, "duplicate key \"%.100s\"", b->key);
            return fail_at(P, b->offset, msg);
        }
    }
    return true;
}

/* Move stack[base ..] to the output as one run and replace them by the container value. */
static bool close_container(parser *P, int64_t base, qkv_json_type type, size_t offset) {
    int64_t count = P->n_stack - base;
    if (type == QKV_JSON_OBJECT && !check_duplicates(P, base, count)) return false;
    if (!grow(P, (void **)&P->out, &P->cap_out, P->n_out + count, sizeof *P->out)) return false;
    if (count) memcpy(P->out + P->n_out, P->stack + base, (size_t)count * sizeof *P->out);
    int64_t first = P->n_out;
    P->n_out += count;
    P->n_stack = base;
    qkv_json_value *v = push(P, type, offset);
    if (!v) return false;
    v->count = count;
    v->first_ = first;
    return true;
}

static bool parse_value(parser *P, int depth);

static bool parse_array(parser *P, int depth) {
    size_t offset = P->pos;
    int64_t base = P->n_stack;
    P->pos++; /* '[' */
    skip_ws(P);
    if (P->pos < P->len && P->s[P->pos] == ']') {
        P->pos++;
        return close_container(P, base, QKV_JSON_ARRAY, offset);
    }
    for (;;) {
        if (!parse_value(P, depth + 1)) return false;
        skip_ws(P);
        if (P->pos >= P->len) return fail_at(P, P->pos, "unterminated array");
        unsigned char c = P->s[P->pos++];
        if (c == ']') break;
        if (c != ',') return fail_at(P, P->pos - 1, "expected ',' or ']' in array");
        skip_ws(P);
    }
    return close_container(P, base, QKV_JSON_ARRAY, offset);
}

static bool parse_object(parser *P, int depth) {
    size_t offset = P->pos;
    int64_t base = P->n_stack;
    P->pos++; /* '{' */
    skip_ws(P);
    if (P->pos < P->len && P->s[P->pos] == '}') {
        P->pos++;
        return close_container(P, base, QKV_JSON_OBJECT, offset);
    }
    for (;;) {
        if (P->pos >= P->len) return fail_at(P, P->pos, "unterminated object");
        if (P->s[P->pos] != '"') return fail_at(P, P->pos, "expected a string key in object");
        size_t key_offset = P->pos;
        const char *key;
        size_t key_len;
        if (!parse_string(P, &key, &key_len)) return false;
        skip_ws(P);
        if (P->pos >= P->len || P->s[P->pos] != ':')
            return fail_at(P, P->pos, "expected ':' after key in object");
        P->pos++;
        skip_ws(P);
        if (!parse_value(P, depth + 1)) return false;
        qkv_json_value *v = &P->stack[P->n_stack - 1];
        v->key = key;
        v->key_len = key_len;
        v->offset = key_offset;
        skip_ws(P);
        if (P->pos >= P->len) return fail_at(P, P->pos, "unterminated object");
        unsigned char c = P->s[P->pos++];
        if (c == '}') break;
        if (c != ',') return fail_at(P, P->pos - 1, "expected ',' or '}' in object");
        skip_ws(P);
    }
    return close_container(P, base, QKV_JSON_OBJECT, offset);
}

static bool parse_value(parser *P, int depth) {
    if (P->pos >= P->len) return fail_at(P, P->pos, "unexpected end of input (expected a value)");
    unsigned char c = P->s[P->pos];
    if ((c == '[' || c == '{') && depth >= QKV_JSON_MAX_DEPTH) {
        char msg[96];
        snprintf(msg, sizeof msg, "nesting deeper than %d levels", QKV_JSON_MAX_DEPTH);
        return fail_at(P, P->pos, msg);
    }
    switch (c) {
    case '{':
        return parse_object(P, depth);
    case '[':
        return parse_array(P, depth);
    case '"': {
        size_t offset = P->pos;
        const char *s;
        size_t n;
        if (!parse_string(P, &s, &n)) return false;
        qkv_json_value *v = push(P, QKV_JSON_STRING, offset);
        if (!v) return false;
        v->str = s;
        v->len = n;
        return true;
    }
    case 't':
        return parse_literal(P, "true", QKV_JSON_BOOL, true);
    case 'f':
        return parse_literal(P, "false", QKV_JSON_BOOL, false);
    case 'n':
        return parse_literal(P, "null", QKV_JSON_NULL, false);
    default:
        if (c == '-' || is_digit(c)) return parse_number(P);
        return fail_at(P, P->pos, "unexpected character (expected a value)");
    }
}

/* ---- public --------------------------------------------------------------------------------- */

static void fix_items(qkv_json_value *values, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        values[i].items = values[i].first_ >= 0 ? values + values[i].first_ : NULL;
}

qkv_status qkv_json_parse(const char *text, size_t len, qkv_json_doc **out, qkv_json_error *err) {
    if (out) *out = NULL;
    if (err) memset(err, 0, sizeof *err);
    if (!out || (!text && len))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "qkv_json_parse: NULL argument");
    if (len > SIZE_MAX - 2) return QKV_ERROR(QKV_ERR_OOM, "qkv_json_parse: input too large");
    parser P;
    memset(&P, 0, sizeof P);
    P.s = (const unsigned char *)text;
    P.len = len;
    P.strings = malloc(len + 2);
    qkv_json_doc *doc = calloc(1, sizeof *doc);
    bool ok = P.strings && doc;
    if (!ok) oom(&P);
    if (ok) {
        skip_ws(&P);
        ok = parse_value(&P, 0);
    }
    if (ok) {
        skip_ws(&P);
        if (P.pos != P.len) ok = fail_at(&P, P.pos, "unexpected characters after the JSON value");
    }
    if (ok) { /* the root goes last in the output array */
        ok = grow(&P, (void **)&P.out, &P.cap_out, P.n_out + 1, sizeof *P.out);
        if (ok) P.out[P.n_out++] = P.stack[0];
    }
    free(P.stack);
    free(P.sort);
    if (!ok) {
        free(P.out);
        free(P.strings);
        free(doc);
        if (err) *err = P.err;
        return QKV_ERROR(P.oom ? QKV_ERR_OOM : QKV_ERR_FORMAT, "JSON: %s at byte %zu",
                         P.err.message, P.err.offset);
    }
    fix_items(P.out, P.n_out);
    doc->values = P.out;
    doc->n = P.n_out;
    doc->strings = P.strings;
    *out = doc;
    return QKV_OK;
}

void qkv_json_free(qkv_json_doc *doc) {
    if (!doc) return;
    free(doc->values);
    free(doc->strings);
    free(doc);
}

const qkv_json_value *qkv_json_root(const qkv_json_doc *doc) {
    return doc && doc->n ? &doc->values[doc->n - 1] : NULL;
}

const qkv_json_value *qkv_json_get(const qkv_json_value *obj, const char *key) {
    if (!obj || obj->type != QKV_JSON_OBJECT || !key) return NULL;
    size_t n = strlen(key);
    for (int64_t i = 0; i < obj->count; i++)
        if (obj->items[i].key_len == n && memcmp(obj->items[i].key, key, n) == 0)
            return &obj->items[i];
    return NULL;
}

bool qkv_json_utf8_valid(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t n = p[i] < 0x80 ? 1 : utf8_seq(p + i, len - i);
        if (!n) return false;
        i += n;
    }
    return true;
}

bool qkv_json_u64(const qkv_json_value *v, uint64_t *out) {
    if (!v || v->type != QKV_JSON_INT || (v->negative && v->magnitude != 0)) return false;
    *out = v->magnitude;
    return true;
}

const char *qkv_json_type_name(qkv_json_type t) {
    switch (t) {
    case QKV_JSON_NULL:
        return "null";
    case QKV_JSON_BOOL:
        return "boolean";
    case QKV_JSON_INT:
        return "integer";
    case QKV_JSON_NUMBER:
        return "number";
    case QKV_JSON_STRING:
        return "string";
    case QKV_JSON_ARRAY:
        return "array";
    case QKV_JSON_OBJECT:
        return "object";
    }
    return "?";
}
