/*
 * buf.c: the growable output buffer every writer of src/viz appends to (sticky out-of-memory
 * flag, checked once when the result is handed over).
 */
#include "viz_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool reserve(vz_buf *b, size_t extra) {
    if (b->oom) return false;
    if (extra <= b->cap - b->n) return true;
    if (extra > SIZE_MAX / 2 - b->n) {
        b->oom = true;
        return false;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->n < extra)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void vz_put(vz_buf *b, const void *s, size_t n) {
    if (!n || !reserve(b, n)) return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

void vz_puts(vz_buf *b, const char *s) {
    vz_put(b, s, strlen(s));
}

void vz_putc(vz_buf *b, char c) {
    if (!reserve(b, 1)) return;
    b->p[b->n++] = c;
}

void vz_printf(vz_buf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (k < 0) {
        b->oom = true; /* an encoding error: never for the formats used here */
        return;
    }
    if ((size_t)k < sizeof small) {
        vz_put(b, small, (size_t)k);
        return;
    }
    if (!reserve(b, (size_t)k + 1)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

void vz_free(vz_buf *b) {
    free(b->p);
    *b = (vz_buf){0};
}

qkv_status vz_finish(vz_buf *b, const char *fn, char **out, size_t *len) {
    vz_putc(b, '\0');
    if (b->oom) {
        vz_free(b);
        return QKV_ERROR(QKV_ERR_OOM, "%s: out of memory", fn);
    }
    *out = b->p;
    if (len) *len = b->n - 1;
    *b = (vz_buf){0};
    return QKV_OK;
}

void qkv_viz_free(void *p) {
    free(p);
}
