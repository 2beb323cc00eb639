/*
 * text.c: labels and numbers as the writers print them.
 *
 * Labels: strict UTF-8 decoding (RFC 3629: no overlong forms, no surrogates, nothing above
 * U+10FFFF; every bad byte becomes U+FFFD), controls made visible (U+2400 control pictures), a
 * column count (East Asian wide characters take two, combining marks none; an approximation of
 * wcwidth that needs no locale), cutting with an ellipsis, and XML escaping.
 * Numbers: the shortest round-trip decimal of a weight, and printf formats with the decimal point
 * fixed to '.' whatever LC_NUMERIC says.
 */
#include "viz_internal.h"

#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define REPLACEMENT 0xFFFDu

uint32_t vz_utf8_next(const char *str, size_t *i) {
    const unsigned char *s = (const unsigned char *)str + *i;
    unsigned c = s[0];
    if (c < 0x80) {
        *i += 1;
        return c;
    }
    int n;                         /* continuation bytes */
    unsigned lo = 0x80, hi = 0xBF; /* range of the first continuation byte */
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 1, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 2, cp = c & 0x0F;
        if (c == 0xE0) lo = 0xA0; /* overlong */
        if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 3, cp = c & 0x07;
        if (c == 0xF0) lo = 0x90; /* overlong */
        if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else {
        *i += 1;
        return REPLACEMENT;
    }
    for (int k = 1; k <= n; k++) {
        unsigned d = s[k]; /* a NUL stops here: it is no continuation byte */
        unsigned dlo = k == 1 ? lo : 0x80, dhi = k == 1 ? hi : 0xBF;
        if (d < dlo || d > dhi) {
            *i += 1;
            return REPLACEMENT;
        }
        cp = cp << 6 | (d & 0x3F);
    }
    *i += (size_t)n + 1;
    return cp;
}

uint32_t vz_visible(uint32_t cp) {
    if (cp < 0x20) return 0x2400 + cp;
    if (cp == 0x7F) return 0x2421;
    if ((cp >= 0x80 && cp <= 0x9F) || cp == 0xFFFE || cp == 0xFFFF) return REPLACEMENT;
    return cp;
}

int vz_cp_width(uint32_t c) {
    if ((c >= 0x0300 && c <= 0x036F) || (c >= 0x1AB0 && c <= 0x1AFF) ||
        (c >= 0x1DC0 && c <= 0x1DFF) || (c >= 0x20D0 && c <= 0x20FF) ||
        (c >= 0xFE20 && c <= 0xFE2F) || (c >= 0xFE00 && c <= 0xFE0F) ||
        (c >= 0x200B && c <= 0x200F) || (c >= 0x202A && c <= 0x202E) ||
        (c >= 0x2060 && c <= 0x2064) || (c >= 0x2066 && c <= 0x2069) || c == 0xFEFF ||
        (c >= 0xE0100 && c <= 0xE01EF))
        return 0;
    if ((c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0x303E) ||
        (c >= 0x3041 && c <= 0x33FF) || (c >= 0x3400 && c <= 0x4DBF) ||
        (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xA000 && c <= 0xA4CF) ||
        (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
        (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
        (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) ||
        (c >= 0x1F900 && c <= 0x1F9FF) || (c >= 0x20000 && c <= 0x3FFFD))
        return 2;
    return 1;
}

static int cols_of(uint32_t visible, vz_text_mode mode) {
    return mode == VZ_TERM_ASCII ? 1 : vz_cp_width(visible);
}

static void put_utf8(vz_buf *b, uint32_t c) {
    char u[4];
    size_t n;
    if (c < 0x80) {
        u[0] = (char)c, n = 1;
    } else if (c < 0x800) {
        u[0] = (char)(0xC0 | c >> 6), u[1] = (char)(0x80 | (c & 0x3F)), n = 2;
    } else if (c < 0x10000) {
        u[0] = (char)(0xE0 | c >> 12), u[1] = (char)(0x80 | (c >> 6 & 0x3F));
        u[2] = (char)(0x80 | (c & 0x3F)), n = 3;
    } else {
        u[0] = (char)(0xF0 | c >> 18), u[1] = (char)(0x80 | (c >> 12 & 0x3F));
        u[2] = (char)(0x80 | (c >> 6 & 0x3F)), u[3] = (char)(0x80 | (c & 0x3F)), n = 4;
    }
    vz_put(b, u, n);
}

static void put_visible(vz_buf *b, uint32_t c, vz_text_mode mode) {
    if (mode == VZ_TERM_ASCII) {
        vz_putc(b, c >= 0x20 && c < 0x7F ? (char)c : '?');
        return;
    }
    if (mode == VZ_XML) {
        switch (c) {
        case '&':
            vz_puts(b, "&amp;");
            return;
        case '<':
            vz_puts(b, "&lt;");
            return;
        case '>':
            vz_puts(b, "&gt;");
            return;
        case '"':
            vz_puts(b, "&quot;");
            return;
        case '\'':
            vz_puts(b, "&#39;");
            return;
        }
    }
    put_utf8(b, c);
}

/* The longest prefix of s (in bytes) that shows in at most `limit` columns and at most
 * 4 * limit + 8 code points (a bound on the work for strings of zero-width characters);
 * *whole tells whether that is all of s, *cols its width. */
static size_t fit(const char *s, int limit, vz_text_mode mode, int *cols, bool *whole) {
    size_t i = 0;
    int w = 0;
    long n = 0;
    while (s[i]) {
        size_t j = i;
        int cw = cols_of(vz_visible(vz_utf8_next(s, &j)), mode);
        if (w + cw > limit || n >= 4L * limit + 8) {
            *whole = false;
            *cols = w;
            return i;
        }
        w += cw;
        n++;
        i = j;
    }
    *whole = true;
    *cols = w;
    return i;
}

/* Shared by vz_put_text (b != NULL) and vz_text_cols (b == NULL). */
static int text(vz_buf *b, const char *s, int max_cols, vz_text_mode mode) {
    if (!s || max_cols <= 0) return 0;
    int cols;
    bool whole;
    size_t n = fit(s, max_cols, mode, &cols, &whole);
    bool cut = !whole;
    if (cut) n = fit(s, max_cols - 1, mode, &cols, &whole); /* room for the ellipsis */
    if (b)
        for (size_t i = 0; i < n;)
            put_visible(b, vz_visible(vz_utf8_next(s, &i)), mode);
    if (!cut) return cols;
    if (b) vz_puts(b, mode == VZ_TERM_ASCII ? "~" : "\xE2\x80\xA6"); /* U+2026 */
    return cols + 1;
}

int vz_put_text(vz_buf *b, const char *s, int max_cols, vz_text_mode mode) {
    return text(b, s, max_cols, mode);
}

int vz_text_cols(const char *s, int max_cols, vz_text_mode mode) {
    return text(NULL, s, max_cols, mode);
}

/* ---- numbers --------------------------------------------------------------------------------- */

/* Replace the locale's decimal point in buf (NUL-terminated, room for 64 bytes) by '.'. */
static void fix_decimal_point(char *buf) {
    const char *dp = localeconv()->decimal_point;
    if (!dp || !dp[0] || !strcmp(dp, ".")) return;
    char *at = strstr(buf, dp);
    if (!at) return;
    size_t k = strlen(dp);
    *at = '.';
    memmove(at + 1, at + k, strlen(at + k) + 1);
}

const char *vz_fmt_exact(char *buf, double v, bool single) {
    if (isnan(v)) return strcpy(buf, "NaN");
    if (isinf(v)) return strcpy(buf, v > 0 ? "inf" : "-inf");
    int max_prec = single ? 9 : 17; /* enough digits to round-trip any float / double */
    for (int p = 1; p <= max_prec; p++) {
        snprintf(buf, 32, "%.*g", p, v);
        bool same = single ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v;
        if (same) break;
    }
    fix_decimal_point(buf);
    return buf;
}

const char *vz_fmt(char *buf, double v, int prec, char conv) {
    char f[8] = "%.*g";
    f[3] = conv;
    snprintf(buf, 64, f, prec, v);
    fix_decimal_point(buf);
    return buf;
}

void vz_put_coord(vz_buf *b, double v) {
    if (!(v > -1e14)) v = -1e14; /* also NaN: callers never pass one */
    if (v > 1e14) v = 1e14;
    long long t = llround(v * 10.0);
    long long a = t < 0 ? -t : t;
    if (a % 10)
        vz_printf(b, "%s%lld.%lld", t < 0 ? "-" : "", a / 10, a % 10);
    else
        vz_printf(b, "%s%lld", t < 0 ? "-" : "", a / 10);
}
