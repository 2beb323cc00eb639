/*
 * textio.c: the data layer's plumbing: growable buffers, whole-file reads (regular files only, of
 * their size at open: qkv__open_regular), atomic writes (temporary file + fsync + rename, the
 * same protocol as the safetensors writer), mkdir -p, message quoting, strict decimal and UTF-8
 * parsing.
 */
#include "data_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- buffer -------------------------------------------------------------------------------- */

void qkv__buf_add(qkv__buf *b, const void *data, size_t n) {
    if (b->oom || n == 0) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void qkv__buf_str(qkv__buf *b, const char *s) {
    qkv__buf_add(b, s, strlen(s));
}
void qkv__buf_ch(qkv__buf *b, char c) {
    qkv__buf_add(b, &c, 1);
}

void qkv__buf_i64(qkv__buf *b, int64_t v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)v);
    qkv__buf_add(b, tmp, (size_t)n);
}

void qkv__buf_free(qkv__buf *b) {
    free(b->p);
    *b = (qkv__buf){0};
}

/* ---- files --------------------------------------------------------------------------------- */

qkv_status qkv__read_file(const char *who, const char *path, char **data, size_t *len) {
    return qkv__read_regular(who, path, QKV_DATA_FILE_MAX, data, len);
}

qkv_status qkv__mkdirs(const char *who, const char *path) {
    size_t n = strlen(path);
    char *p = malloc(n + 1);
    if (!p) return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", who);
    memcpy(p, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char keep = p[i];
        p[i] = '\0';
        struct stat s;
        if (stat(p, &s) != 0) {
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                int e = errno;
                qkv_status st = QKV_ERROR(QKV_ERR_IO, "%s: cannot create directory %s: %s", who, p,
                                          strerror(e));
                free(p);
                return st;
            }
        } else if (!S_ISDIR(s.st_mode)) {
            qkv_status st = QKV_ERROR(QKV_ERR_IO, "%s: %s is not a directory", who, p);
            free(p);
            return st;
        }
        p[i] = keep;
    }
    free(p);
    return QKV_OK;
}

char *qkv__path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

/* ---- messages ------------------------------------------------------------------------------ */

const char *qkv__quote(char *buf, size_t size, const char *s, size_t len) {
    size_t k = 0;
    const size_t shown = 40;
    if (size < 16) {
        if (size) buf[0] = '\0';
        return buf;
    }
    buf[k++] = '\'';
    for (size_t i = 0; i < len && i < shown && k + 8 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\t') {
            buf[k++] = '\\';
            buf[k++] = 't';
        } else if (c < 0x20 || c >= 0x7f || c == '\\') {
            k += (size_t)snprintf(buf + k, size - k, "\\x%02x", c);
        } else {
            buf[k++] = (char)c;
        }
    }
    buf[k++] = '\'';
    if (len > shown && k + 4 < size) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
    return buf;
}

/* ---- parsing ------------------------------------------------------------------------------- */

bool qkv__parse_uint(const char *s, size_t len, int64_t max, int64_t *out) {
    if (len == 0 || len > 19) return false;
    if (s[0] == '0' && len > 1) return false;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        int d = s[i] - '0';
        if (v > max / 10 || (v == max / 10 && d > max % 10)) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

int qkv__utf8_char_len(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, cp = c & 0x07;
    else
        return 0; /* continuation byte, C0/C1 overlong lead, or > U+10FFFF */
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    return len;
}
