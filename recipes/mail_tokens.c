/*
 * mail_tokens.c: the tokenizer of the spam data set (docs/data.md, "Spam vs ham"): bytes of
 * message text (mail_text.c) -> lower-case ASCII tokens. A left-to-right scan; at each position
 * the first rule that applies takes its bytes:
 *
 *   <url>    "http://", "https://", "ftp://" or "www." (any case), not preceded by a letter or
 *            digit, and the printable ASCII that follows except < > " ' ` { } | \ ^ [ ]
 *   <email>  a run of [A-Za-z0-9._%+-] with a letter or digit, not preceded by such a character,
 *            then '@', then a domain [A-Za-z0-9][A-Za-z0-9.-]* whose trailing '.' and '-' are not
 *            part of it and which contains a '.'
 *   ! $ ?    one token per character, at most 3 for a run of the same character ("!!!!!" -> ! ! !)
 *   number   [0-9]+([.,][0-9]+)* not followed by [A-Za-z0-9']: a plain number of 1 or 2 digits is
 *            kept ("7", "42"), anything longer or with separators becomes <num> ("2002",
 *            "1,000", "3.5", "192.168.0.1")
 *   word     a run of [A-Za-z0-9'], lower-cased, leading and trailing apostrophes removed (dropped
 *            when nothing is left; all digits and 3 or more long: <num>)
 *   anything else (spaces, other punctuation, control and non-ASCII bytes) separates tokens.
 *
 * So tokens are made of [a-z0-9'] or are one of ! $ ? <url> <email> <num>: ASCII, no spaces, and
 * no token is empty; the output is valid input for the labeled-corpus reader.
 */
#include "mail.h"

static bool is_alnum(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
static bool is_digit(unsigned char c) {
    return c >= '0' && c <= '9';
}
static bool is_word(unsigned char c) {
    return is_alnum(c) || c == '\'';
}
static bool is_local(unsigned char c) { /* e-mail local part */
    return is_alnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-';
}
static bool is_url(unsigned char c) {
    if (c <= 0x20 || c >= 0x7f) return false;
    switch (c) {
    case '<':
    case '>':
    case '"':
    case '\'':
    case '`':
    case '{':
    case '}':
    case '|':
    case '\\':
    case '^':
    case '[':
    case ']':
        return false;
    default:
        return true;
    }
}

static unsigned char lower(unsigned char c) {
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

static size_t url_prefix(const unsigned char *s, size_t n) {
    static const char *const prefixes[] = {"http://", "https://", "ftp://", "www."};
    for (size_t k = 0; k < sizeof prefixes / sizeof prefixes[0]; k++) {
        size_t len = 0;
        const char *p = prefixes[k];
        while (p[len] && len < n && lower(s[len]) == (unsigned char)p[len])
            len++;
        if (!p[len]) return len;
    }
    return 0;
}

/* The e-mail address at s[0, n) (a local-part run starts here): its length, or 0. */
static size_t email_at(const unsigned char *s, size_t n) {
    size_t j = 0;
    bool alnum = false;
    while (j < n && is_local(s[j]))
        alnum |= is_alnum(s[j++]);
    if (!alnum || j + 1 >= n || s[j] != '@' || !is_alnum(s[j + 1])) return 0;
    size_t k = j + 1;
    while (k < n && (is_alnum(s[k]) || s[k] == '.' || s[k] == '-'))
        k++;
    while (s[k - 1] == '.' || s[k - 1] == '-')
        k--;
    for (size_t d = j + 1; d < k; d++)
        if (s[d] == '.') return k;
    return 0;
}

typedef struct emitter {
    qkv__buf *out;
    int64_t max, count;
} emitter;

static void emit(emitter *e, const void *tok, size_t len) {
    if (e->count < e->max) {
        if (e->count) qkv__buf_ch(e->out, ' ');
        qkv__buf_add(e->out, tok, len);
    }
    e->count++;
}

int64_t qkv_mail_tokens(const char *text, size_t n, int64_t max_tokens, qkv__buf *out) {
    const unsigned char *s = (const unsigned char *)text;
    emitter e = {out, max_tokens, 0};
    char word[64];
    for (size_t i = 0; i < n;) {
        unsigned char prev = i ? s[i - 1] : ' ';
        size_t len;
        if (!is_alnum(prev) && (len = url_prefix(s + i, n - i)) > 0) {
            for (i += len; i < n && is_url(s[i]); i++) {
            }
            emit(&e, "<url>", 5);
            continue;
        }
        if (is_local(s[i]) && (!i || !is_local(prev)) && (len = email_at(s + i, n - i)) > 0) {
            emit(&e, "<email>", 7);
            i += len;
            continue;
        }
        unsigned char c = s[i];
        if (c == '!' || c == '$' || c == '?') {
            size_t j = i;
            while (j < n && s[j] == c)
                j++;
            for (size_t k = 0; k < j - i && k < 3; k++)
                emit(&e, &c, 1);
            i = j;
            continue;
        }
        if (is_digit(c)) {
            size_t j = i;
            bool plain = true;
            while (j < n && is_digit(s[j]))
                j++;
            while (j + 1 < n && (s[j] == '.' || s[j] == ',') && is_digit(s[j + 1])) {
                plain = false;
                for (j++; j < n && is_digit(s[j]); j++) {
                }
            }
            if (j == n || !is_word(s[j])) {
                if (plain && j - i <= 2)
                    emit(&e, s + i, j - i);
                else
                    emit(&e, "<num>", 5);
                i = j;
                continue;
            }
        }
        if (is_word(c)) {
            size_t j = i;
            while (j < n && is_word(s[j]))
                j++;
            size_t a = i, b = j;
            i = j;
            while (a < b && s[a] == '\'')
                a++;
            while (b > a && s[b - 1] == '\'')
                b--;
            if (a == b) continue;
            bool digits = true;
            for (size_t k = a; k < b; k++)
                digits &= is_digit(s[k]);
            if (digits && b - a > 2) {
                emit(&e, "<num>", 5);
                continue;
            }
            if (e.count >= e.max) { /* counted, not written */
                e.count++;
                continue;
            }
            if (e.count) qkv__buf_ch(out, ' ');
            for (size_t k = a; k < b; k += sizeof word) {
                size_t m = b - k < sizeof word ? b - k : sizeof word;
                for (size_t t = 0; t < m; t++)
                    word[t] = (char)lower(s[k + t]);
                qkv__buf_add(out, word, m);
            }
            e.count++;
            continue;
        }
        i++;
    }
    return e.count;
}
