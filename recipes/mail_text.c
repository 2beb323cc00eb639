/*
 * mail_text.c: the readable text of an e-mail message, for the spam data set (docs/data.md,
 * "Spam vs ham"): its Subject, then the decoded text of its body, with the MIME structure undone.
 * Everything else in the header block (addresses, routing, dates, mailer names) is dropped.
 *
 *   message   header block, an empty line, body; CRLF line ends are read as LF
 *   header    "Name: value" fields; a line starting with a space or TAB continues the previous
 *             field (unfolded by removing the line break); names compare case-insensitively, the
 *             first field of a name counts
 *   Subject   RFC 2047 encoded words "=?charset?Q?...?=" ('_' is a space, =XX a byte) and
 *             "=?charset?B?...?=" (base64) decoded, whitespace between two of them removed; the
 *             charset is not interpreted (the tokenizer treats non-ASCII bytes as separators)
 *   body, by Content-Type (RFC 2045, 2046; no Content-Type means text/plain):
 *     multipart/... with a boundary B: the parts between delimiter lines "--B" (optionally followed
 *       by spaces or TABs) up to the close line "--B--..."; preamble and epilogue dropped. Each
 *       part is an entity (headers, body) handled by these rules, nested at most 8 deep.
 *       multipart/alternative keeps one part: the first text/plain one, else the first.
 *     message/rfc822: the enclosed message's body (its headers are dropped too)
 *     text/html: transfer-decoded, then converted to text (below)
 *     other text/..., a multipart without boundary or without any delimiter line: transfer-decoded
 *     anything else (images, applications, signatures, delivery reports): nothing
 *   transfer encodings: quoted-printable ("=" + spaces/TABs + line break removed, =XX a byte),
 *     base64 (characters outside the alphabet skipped, decoding stops at the first '='); 7bit,
 *     8bit, binary and unknown ones as they are
 *   HTML -> text: "<!-- ... -->" comments and <script> / <style> elements with their contents
 *     removed; a tag ('<' then a letter, '/', '!' or '?', up to the next '>') becomes a space;
 *     character references &#N; &#xH; (ASCII code points; others become a space) and &amp;
 *     &lt; &gt; &quot; &apos; &nbsp; decoded, other named references become a space
 *
 * The output is the Subject and each text part, each followed by '\n'. Pure bytes in, bytes out:
 * charsets are never converted, nothing is lost but markup, and the result is deterministic.
 * scripts/spam_reference.py implements the same rules independently (regular expressions).
 *
 * References: RFC 5322 (message format), RFC 2045 (transfer encodings), RFC 2046 (multipart),
 * RFC 2047 (encoded words), HTML 4.01 section 5.3 (character references).
 */
#include "mail.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 8

typedef struct span {
    const char *p;
    size_t n;
} span;

static bool is_ws(char c) { /* Python's bytes whitespace: the reference strips the same set */
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static char lower(char c) {
    return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* s[0, n) starts with the ASCII word w, case-insensitively. */
static bool starts_ci(const char *s, size_t n, const char *w) {
    size_t k = strlen(w);
    if (n < k) return false;
    for (size_t i = 0; i < k; i++)
        if (lower(s[i]) != w[i]) return false;
    return true;
}

static span trim(span s) {
    while (s.n && is_ws(s.p[0]))
        s.p++, s.n--;
    while (s.n && is_ws(s.p[s.n - 1]))
        s.n--;
    return s;
}

static bool span_is(span s, const char *w) { /* s equals lower-case w, case-insensitively */
    return s.n == strlen(w) && starts_ci(s.p, s.n, w);
}

/* ---- entities and headers -------------------------------------------------------------------- */

/* Header block and body: the header block ends at the first empty line; without one, the whole
 * entity is headers and the body is empty. */
static void split_entity(span e, span *head, span *body) {
    size_t s = 0;
    for (;;) {
        const char *nl = memchr(e.p + s, '\n', e.n - s);
        size_t end = nl ? (size_t)(nl - e.p) : e.n;
        if (end == s) {
            size_t b = end < e.n ? end + 1 : e.n;
            *head = (span){e.p, s};
            *body = (span){e.p + b, e.n - b};
            return;
        }
        if (!nl) {
            *head = e;
            *body = (span){e.p + e.n, 0};
            return;
        }
        s = end + 1;
    }
}

enum { H_SUBJECT, H_CTYPE, H_CTE, N_HEADERS };

typedef struct headers {
    bool has[N_HEADERS];
    qkv__buf value[N_HEADERS]; /* unfolded values (after the ':') */
} headers;

static void headers_free(headers *h) {
    for (int k = 0; k < N_HEADERS; k++)
        qkv__buf_free(&h->value[k]);
}

/* The first Subject, Content-Type and Content-Transfer-Encoding fields of a header block. */
static void parse_headers(span head, headers *h, qkv__buf *field) {
    static const char *const names[N_HEADERS] = {"subject", "content-type",
                                                 "content-transfer-encoding"};
    memset(h, 0, sizeof *h);
    size_t pos = 0;
    while (pos < head.n) {
        /* one field: a line, then the lines that start with a space or TAB */
        field->n = 0;
        do {
            const char *nl = memchr(head.p + pos, '\n', head.n - pos);
            size_t end = nl ? (size_t)(nl - head.p) : head.n;
            qkv__buf_add(field, head.p + pos, end - pos);
            pos = end + 1;
        } while (pos < head.n && (head.p[pos] == ' ' || head.p[pos] == '\t'));
        const char *colon = field->n ? memchr(field->p, ':', field->n) : NULL;
        if (!colon || colon == field->p) continue;
        span name = trim((span){field->p, (size_t)(colon - field->p)});
        for (int k = 0; k < N_HEADERS; k++)
            if (!h->has[k] && span_is(name, names[k])) {
                h->has[k] = true;
                size_t at = (size_t)(colon - field->p) + 1;
                qkv__buf_add(&h->value[k], field->p + at, field->n - at);
                if (field->oom) h->value[k].oom = true;
            }
    }
}

static span value_of(const headers *h, int k) {
    return h->has[k] ? (span){h->value[k].p ? h->value[k].p : "", h->value[k].n} : (span){"", 0};
}

/* The media type of a Content-Type value, lower-cased into t (text/plain when absent), and its
 * boundary parameter (the first "; boundary = B" with B quoted or a run of characters other than
 * whitespace and ';'); an empty boundary means none. */
static void content_type(const headers *h, char *t, size_t tsize, span *boundary) {
    *boundary = (span){"", 0};
    if (!h->has[H_CTYPE]) {
        snprintf(t, tsize, "text/plain");
        return;
    }
    span v = value_of(h, H_CTYPE);
    const char *semi = memchr(v.p, ';', v.n);
    span type = trim((span){v.p, semi ? (size_t)(semi - v.p) : v.n});
    size_t k = 0;
    for (; k < type.n && k + 1 < tsize; k++)
        t[k] = lower(type.p[k]);
    t[k] = '\0';
    for (size_t i = 0; i < v.n; i++) {
        if (v.p[i] != ';') continue;
        size_t j = i + 1;
        while (j < v.n && is_ws(v.p[j]))
            j++;
        if (!starts_ci(v.p + j, v.n - j, "boundary")) continue;
        j += 8;
        while (j < v.n && is_ws(v.p[j]))
            j++;
        if (j >= v.n || v.p[j] != '=') continue;
        j++;
        while (j < v.n && is_ws(v.p[j]))
            j++;
        if (j < v.n && v.p[j] == '"') {
            const char *q = memchr(v.p + j + 1, '"', v.n - j - 1);
            if (q) {
                *boundary = (span){v.p + j + 1, (size_t)(q - (v.p + j + 1))};
                return;
            }
        }
        size_t e = j;
        while (e < v.n && !is_ws(v.p[e]) && v.p[e] != ';')
            e++;
        if (e > j) {
            *boundary = (span){v.p + j, e - j};
            return;
        }
    }
}

/* ---- decoders -------------------------------------------------------------------------------- */

static void decode_qp(span s, qkv__buf *out) {
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] == '=') {
            size_t j = i + 1;
            while (j < s.n && (s.p[j] == ' ' || s.p[j] == '\t'))
                j++;
            if (j < s.n && s.p[j] == '\n') { /* soft line break */
                i = j;
                continue;
            }
            if (i + 2 < s.n && hex_value(s.p[i + 1]) >= 0 && hex_value(s.p[i + 2]) >= 0) {
                qkv__buf_ch(out, (char)(hex_value(s.p[i + 1]) * 16 + hex_value(s.p[i + 2])));
                i += 2;
                continue;
            }
        }
        qkv__buf_ch(out, s.p[i]);
    }
}

static void decode_base64(span s, qkv__buf *out) {
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < s.n && s.p[i] != '='; i++) {
        int v = qkv__base64_digit(s.p[i]);
        if (v < 0) continue;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            qkv__buf_ch(out, (char)((acc >> bits) & 0xFF));
        }
    }
}

/* RFC 2047 encoded word at s[0, n): its length, or 0. *enc = 'q' or 'b', *text its payload. */
static size_t encoded_word(const char *s, size_t n, char *enc, span *text) {
    if (n < 2 || s[0] != '=' || s[1] != '?') return 0;
    size_t i = 2;
    while (i < n && s[i] != '?' && !is_ws(s[i]))
        i++;
    if (i == 2 || i + 2 >= n || s[i] != '?') return 0;
    char e = lower(s[i + 1]);
    if ((e != 'q' && e != 'b') || s[i + 2] != '?') return 0;
    size_t t = i + 3, j = t;
    while (j < n && s[j] != '?' && !is_ws(s[j]))
        j++;
    if (j + 1 >= n || s[j] != '?' || s[j + 1] != '=') return 0;
    *enc = e;
    *text = (span){s + t, j - t};
    return j + 2;
}

static void decode_subject(span s, qkv__buf *out) {
    for (size_t i = 0; i < s.n;) {
        char enc;
        span text;
        size_t len = encoded_word(s.p + i, s.n - i, &enc, &text);
        if (!len) {
            qkv__buf_ch(out, s.p[i++]);
            continue;
        }
        if (enc == 'b') {
            decode_base64(text, out);
        } else {
            for (size_t k = 0; k < text.n; k++) {
                if (text.p[k] == '_') {
                    qkv__buf_ch(out, ' ');
                } else if (text.p[k] == '=' && k + 2 < text.n && hex_value(text.p[k + 1]) >= 0 &&
                           hex_value(text.p[k + 2]) >= 0) {
                    qkv__buf_ch(out,
                                (char)(hex_value(text.p[k + 1]) * 16 + hex_value(text.p[k + 2])));
                    k += 2;
                } else {
                    qkv__buf_ch(out, text.p[k]);
                }
            }
        }
        i += len;
        /* whitespace between two encoded words is not part of the text */
        size_t j = i;
        while (j < s.n && (s.p[j] == ' ' || s.p[j] == '\t'))
            j++;
        if (j > i && encoded_word(s.p + j, s.n - j, &enc, &text)) i = j;
    }
}

/* ---- HTML ------------------------------------------------------------------------------------ */

/* First position >= from of w (lower case) in s, case-insensitively; s.n when absent. */
static size_t find_ci(span s, size_t from, const char *w) {
    size_t k = strlen(w);
    for (size_t i = from; i + k <= s.n; i++)
        if (starts_ci(s.p + i, s.n - i, w)) return i;
    return s.n;
}

/* A character reference at s[0, n) ("&...;"): its length and *c the byte it stands for (a space
 * for code points outside ASCII, NUL and unknown names); 0 when it is none. */
static size_t char_ref(const char *s, size_t n, char *c) {
    static const struct {
        const char *name;
        char c;
    } named[] = {{"amp", '&'},  {"lt", '<'},    {"gt", '>'},
                 {"quot", '"'}, {"apos", '\''}, {"nbsp", ' '}};
    size_t i = 1;
    if (i < n && s[i] == '#') {
        bool hex = i + 1 < n && (s[i + 1] == 'x' || s[i + 1] == 'X');
        size_t d = i + 1 + hex, j = d;
        uint32_t cp = 0;
        while (j < n && j - d < (hex ? 6u : 7u) &&
               (hex ? hex_value(s[j]) >= 0 : s[j] >= '0' && s[j] <= '9')) {
            cp = cp * (hex ? 16 : 10) + (uint32_t)(hex ? hex_value(s[j]) : s[j] - '0');
            j++;
        }
        if (j == d || j >= n || s[j] != ';') return 0;
        *c = cp > 0 && cp < 128 ? (char)cp : ' ';
        return j + 1;
    }
    size_t j = i;
    while (j < n && j - i < 32 &&
           ((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
            (j > i && s[j] >= '0' && s[j] <= '9')))
        j++;
    if (j == i || j >= n || s[j] != ';') return 0;
    *c = ' ';
    for (size_t k = 0; k < sizeof named / sizeof named[0]; k++)
        if (strlen(named[k].name) == j - i && !memcmp(named[k].name, s + i, j - i)) *c = named[k].c;
    return j + 1;
}

static void html_to_text(span s, qkv__buf *out) {
    size_t no_gt = s.n + 1; /* no '>' at or after this position (keeps "<a <a <a ..." linear) */
    for (size_t i = 0; i < s.n;) {
        char c = s.p[i];
        if (c == '<') {
            if (starts_ci(s.p + i, s.n - i, "<!--")) {
                size_t j = find_ci(s, i + 4, "-->");
                i = j < s.n ? j + 3 : s.n;
                qkv__buf_ch(out, ' ');
                continue;
            }
            const char *elem = starts_ci(s.p + i, s.n - i, "<script")  ? "</script"
                               : starts_ci(s.p + i, s.n - i, "<style") ? "</style"
                                                                       : NULL;
            size_t after = elem ? strlen(elem) - 1 : 0; /* "<script" is "</script" less the '/' */
            if (elem && i + after < s.n &&
                (is_ws(s.p[i + after]) || s.p[i + after] == '>' || s.p[i + after] == '/')) {
                size_t j = find_ci(s, i, elem);
                const char *gt = j < s.n ? memchr(s.p + j, '>', s.n - j) : NULL;
                i = gt ? (size_t)(gt - s.p) + 1 : s.n;
                qkv__buf_ch(out, ' ');
                continue;
            }
            char d = i + 1 < s.n ? s.p[i + 1] : '\0';
            if ((d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') || d == '/' || d == '!' ||
                d == '?') {
                const char *gt = i < no_gt ? memchr(s.p + i, '>', s.n - i) : NULL;
                if (!gt && i < no_gt) no_gt = i;
                if (gt) {
                    qkv__buf_ch(out, ' ');
                    i = (size_t)(gt - s.p) + 1;
                    continue;
                }
            }
        } else if (c == '&') {
            char r;
            size_t len = char_ref(s.p + i, s.n - i, &r);
            if (len) {
                qkv__buf_ch(out, r);
                i += len;
                continue;
            }
        }
        qkv__buf_ch(out, c);
        i++;
    }
}

/* ---- MIME walk ------------------------------------------------------------------------------- */

static void entity_text(span e, int depth, qkv__buf *out);

/* Body bytes decoded by the entity's transfer encoding, HTML converted, appended to out + '\n'. */
static void leaf_text(const headers *h, span body, bool html, qkv__buf *out) {
    span cte = trim(value_of(h, H_CTE));
    bool qp = span_is(cte, "quoted-printable"), b64 = span_is(cte, "base64");
    if (!html) {
        if (qp)
            decode_qp(body, out);
        else if (b64)
            decode_base64(body, out);
        else
            qkv__buf_add(out, body.p, body.n);
    } else {
        qkv__buf tmp = {0};
        if (qp) decode_qp(body, &tmp);
        if (b64) decode_base64(body, &tmp);
        html_to_text(qp || b64 ? (span){tmp.p ? tmp.p : "", tmp.n} : body, out);
        if (tmp.oom) out->oom = true;
        qkv__buf_free(&tmp);
    }
    qkv__buf_ch(out, '\n');
}

/* The line of s starting at `at` is a delimiter of boundary b: 1 "--b" + spaces/TABs, 2 the close
 * delimiter "--b--...", 0 neither. *next gets the start of the following line (s.n at the end). */
static int delimiter(span s, size_t at, span b, size_t *next) {
    const char *nl = memchr(s.p + at, '\n', s.n - at);
    size_t end = nl ? (size_t)(nl - s.p) : s.n;
    *next = nl ? end + 1 : s.n;
    size_t len = end - at;
    if (len < 2 + b.n || s.p[at] != '-' || s.p[at + 1] != '-' || memcmp(s.p + at + 2, b.p, b.n))
        return 0;
    size_t r = at + 2 + b.n;
    if (end - r >= 2 && s.p[r] == '-' && s.p[r + 1] == '-') return 2;
    while (r < end && (s.p[r] == ' ' || s.p[r] == '\t'))
        r++;
    return r == end ? 1 : 0;
}

/* The parts of a multipart body with boundary b, in order, into a malloc'd array (*n of them;
 * NULL when there are none). *seen: a delimiter line was found. false on out-of-memory. */
static bool split_parts(span body, span b, span **parts, size_t *n, bool *seen) {
    *parts = NULL;
    *n = 0;
    *seen = false;
    size_t cap = 0, start = 0;
    bool open = false;
    for (size_t pos = 0; pos < body.n;) {
        size_t next;
        int d = delimiter(body, pos, b, &next);
        if (d) {
            *seen = true;
            if (open) { /* the part ends before the line break that precedes the delimiter */
                if (*n == cap) {
                    cap = cap ? 2 * cap : 8;
                    span *q = realloc(*parts, cap * sizeof *q);
                    if (!q) return false;
                    *parts = q;
                }
                (*parts)[(*n)++] = (span){body.p + start, pos > start ? pos - 1 - start : 0};
            }
            if (d == 2) return true;
            open = true;
            start = next;
        }
        pos = next;
    }
    if (open) { /* no close delimiter: the last part runs to the end */
        if (*n == cap) {
            span *q = realloc(*parts, (cap + 1) * sizeof *q);
            if (!q) return false;
            *parts = q;
        }
        (*parts)[(*n)++] = (span){body.p + start, body.n - start};
    }
    return true;
}

static void body_text(const headers *h, span body, int depth, qkv__buf *out) {
    char type[64];
    span b;
    content_type(h, type, sizeof type, &b);
    bool multipart = !strncmp(type, "multipart/", 10);
    if (multipart && b.n) {
        span *parts;
        size_t n;
        bool seen;
        if (!split_parts(body, b, &parts, &n, &seen)) {
            out->oom = true;
            free(parts);
            return;
        }
        if (seen) {
            size_t first = 0, count = n;
            if (!strcmp(type, "multipart/alternative") && n) {
                /* one rendering of the same content: the first text/plain part, else the first */
                count = 1;
                for (size_t k = 0; k < n; k++) {
                    span ph, pb;
                    split_entity(parts[k], &ph, &pb);
                    headers hk;
                    qkv__buf field = {0};
                    parse_headers(ph, &hk, &field);
                    char tk[64];
                    span bk;
                    content_type(&hk, tk, sizeof tk, &bk);
                    if (field.oom) out->oom = true;
                    qkv__buf_free(&field);
                    headers_free(&hk);
                    if (!strcmp(tk, "text/plain")) {
                        first = k;
                        break;
                    }
                }
            }
            for (size_t k = first; k < first + count; k++)
                entity_text(parts[k], depth + 1, out);
            free(parts);
            return;
        }
        free(parts);
    }
    if (multipart) {
        leaf_text(h, body, false, out); /* no boundary or no delimiter: read it as plain text */
    } else if (!strcmp(type, "message/rfc822")) {
        entity_text(body, depth + 1, out);
    } else if (!strncmp(type, "text/", 5)) {
        leaf_text(h, body, !strcmp(type, "text/html"), out);
    }
}

static void entity_text(span e, int depth, qkv__buf *out) {
    if (depth > MAX_DEPTH) return;
    span head, body;
    split_entity(e, &head, &body);
    headers h;
    qkv__buf field = {0};
    parse_headers(head, &h, &field);
    body_text(&h, body, depth, out);
    for (int k = 0; k < N_HEADERS; k++)
        if (h.value[k].oom) out->oom = true;
    if (field.oom) out->oom = true;
    qkv__buf_free(&field);
    headers_free(&h);
}

void qkv_mail_text(const char *msg, size_t len, qkv__buf *out) {
    /* CRLF -> LF (and a final CR dropped), once for the whole message */
    qkv__buf m = {0};
    size_t from = 0;
    for (size_t i = 0; i < len; i++)
        if (msg[i] == '\r' && (i + 1 == len || msg[i + 1] == '\n')) {
            qkv__buf_add(&m, msg + from, i - from);
            from = i + 1;
        }
    qkv__buf_add(&m, msg + from, len - from);
    if (m.oom) {
        out->oom = true;
        qkv__buf_free(&m);
        return;
    }
    span e = {m.p ? m.p : "", m.n}, head, body;
    split_entity(e, &head, &body);
    headers h;
    qkv__buf field = {0};
    parse_headers(head, &h, &field);
    if (h.has[H_SUBJECT]) {
        decode_subject(value_of(&h, H_SUBJECT), out);
        qkv__buf_ch(out, '\n');
    }
    body_text(&h, body, 0, out);
    for (int k = 0; k < N_HEADERS; k++)
        if (h.value[k].oom) out->oom = true;
    if (field.oom) out->oom = true;
    qkv__buf_free(&field);
    headers_free(&h);
    qkv__buf_free(&m);
}
