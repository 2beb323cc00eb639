/*
 * mt_text.c: text as sacreBLEU's Python sees it. Lines are decoded from UTF-8 into code points
 * (Python's str), lower-cased as str.lower() does and split as str.split() does, from tables that
 * scripts/mt_unicode_tables.py reads off Python itself (mt_unicode_tables.h, Unicode 14.0).
 *
 * str.lower(): each code point by its lower-case mapping, but U+0130 (to "i" U+0307) and
 * U+03A3, which becomes the final sigma U+03C2 in the Final_Sigma context of Unicode's section
 * 3.13 (as CPython's handle_capital_sigma): a cased character before it and none after it, skipping
 * case-ignorable characters both ways; U+03C3 otherwise.
 */
#include "mt_internal.h"

#include <stdlib.h>
#include <string.h>

#include "mt_unicode_tables.h"

void mt_cps_append(mt_cps *b, const uint32_t *c, size_t n) {
    if (b->oom || n == 0) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) {
            if (cap > SIZE_MAX / 2 / sizeof *b->p) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        uint32_t *p = realloc(b->p, cap * sizeof *p);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, c, n * sizeof *c);
    b->n += n;
}

void mt_cps_push(mt_cps *b, uint32_t c) {
    mt_cps_append(b, &c, 1);
}

void mt_cps_free(mt_cps *b) {
    free(b->p);
    *b = (mt_cps){0};
}

qkv_status mt_check_sentence(const char *who, const char *hyp, size_t hyp_len, const char *const *refs,
                             const size_t *ref_lens, int64_t n_refs) {
    if ((!hyp && hyp_len) || (n_refs > 0 && (!refs || !ref_lens)))
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: NULL hypothesis or references", who);
    if (n_refs < 1)
        return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: %lld references (at least one)", who, (long long)n_refs);
    return QKV_OK;
}

qkv_status mt_decode(const char *who, const char *what, const char *s, size_t len, mt_cps *out) {
    out->n = 0;
    if (!s && len) return QKV_ERROR(QKV_ERR_INVALID_ARG, "%s: %s is NULL", who, what);
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        const int k = qkv__utf8_char_len(u + i, len - i);
        if (k == 0) {
            char q[200];
            return QKV_ERROR(QKV_ERR_FORMAT,
                             "%s: %s is not UTF-8: byte %zu (0x%02X) starts no character: %s", who,
                             what, i, u[i], qkv__quote(q, sizeof q, s, len));
        }
        uint32_t c = k == 1 ? u[i] : k == 2 ? u[i] & 0x1Fu : k == 3 ? u[i] & 0x0Fu : u[i] & 0x07u;
        for (int j = 1; j < k; j++)
            c = c << 6 | (u[i + j] & 0x3Fu);
        mt_cps_push(out, c);
        i += (size_t)k;
    }
    if (out->oom) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory decoding %s", who, what);
    return QKV_OK;
}

void mt_encode(const uint32_t *c, size_t n, qkv__buf *out) {
    for (size_t i = 0; i < n; i++) {
        unsigned char b[4];
        size_t k;
        const uint32_t x = c[i];
        if (x < 0x80)
            b[0] = (unsigned char)x, k = 1;
        else if (x < 0x800)
            b[0] = (unsigned char)(0xC0 | x >> 6), b[1] = (unsigned char)(0x80 | (x & 0x3F)), k = 2;
        else if (x < 0x10000)
            b[0] = (unsigned char)(0xE0 | x >> 12), b[1] = (unsigned char)(0x80 | (x >> 6 & 0x3F)),
            b[2] = (unsigned char)(0x80 | (x & 0x3F)), k = 3;
        else
            b[0] = (unsigned char)(0xF0 | x >> 18), b[1] = (unsigned char)(0x80 | (x >> 12 & 0x3F)),
            b[2] = (unsigned char)(0x80 | (x >> 6 & 0x3F)),
            b[3] = (unsigned char)(0x80 | (x & 0x3F)), k = 4;
        qkv__buf_add(out, b, k);
    }
}

static bool in_ranges(const mt_range *r, size_t n, uint32_t c) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (c < r[mid].first)
            hi = mid;
        else if (c > r[mid].last)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

bool mt_is_space(uint32_t c) {
    if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
    return in_ranges(mt_space, COUNT(mt_space), c);
}

static uint32_t lower1(uint32_t c) {
    if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
    size_t lo = 0, hi = COUNT(mt_lower_runs);
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        const mt_lower_run *r = &mt_lower_runs[mid];
        if (c < r->first)
            hi = mid;
        else if (c > r->last)
            lo = mid + 1;
        else
            return (c - r->first) % r->stride == 0 ? (uint32_t)((int64_t)c + r->delta) : c;
    }
    return c;
}

static bool ignorable(uint32_t c) {
    return in_ranges(mt_ignorable, COUNT(mt_ignorable), c);
}

static bool cased(uint32_t c) {
    return in_ranges(mt_cased, COUNT(mt_cased), c);
}

/* CPython's handle_capital_sigma: \p{cased} \p{case-ignorable}* U+03A3 !(\p{case-ignorable}*
 * \p{cased}). */
static uint32_t lower_sigma(const uint32_t *t, size_t n, size_t i) {
    size_t j = i;
    while (j > 0 && ignorable(t[j - 1]))
        j--;
    if (j == 0 || !cased(t[j - 1])) return 0x3C3;
    j = i + 1;
    while (j < n && ignorable(t[j]))
        j++;
    return j == n || !cased(t[j]) ? 0x3C2 : 0x3C3;
}

void mt_lower(const uint32_t *in, size_t n, mt_cps *out) {
    out->n = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i] == 0x130) {
            mt_cps_push(out, 'i');
            mt_cps_push(out, 0x307);
        } else {
            mt_cps_push(out, in[i] == 0x3A3 ? lower_sigma(in, n, i) : lower1(in[i]));
        }
    }
}

bool mt_split(const uint32_t *t, size_t n, mt_span **words, size_t *n_words, size_t *cap) {
    for (size_t i = 0; i < n;) {
        while (i < n && mt_is_space(t[i]))
            i++;
        if (i == n) break;
        const size_t s = i;
        while (i < n && !mt_is_space(t[i]))
            i++;
        if (*n_words == *cap) {
            const size_t c = *cap ? *cap * 2 : 64;
            mt_span *w = realloc(*words, c * sizeof *w);
            if (!w) return false;
            *words = w;
            *cap = c;
        }
        (*words)[(*n_words)++] = (mt_span){s, i - s};
    }
    return true;
}
