/* train_log.c: see train_log.h. */
#include "train_log.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

static void add(tlog_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(tlog_out *o, const char *fmt, ...) {
    if (o->overflow) return;
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(o->text + o->n, sizeof o->text - o->n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof o->text - o->n)
        o->overflow = true;
    else
        o->n += (size_t)k;
}

void tlog_start(tlog_out *o, const char *type, int64_t step) {
    o->n = 0;
    o->overflow = false;
    o->text[0] = '\0';
    if (type)
        add(o, "{\"type\":\"%s\",\"step\":%lld", type, (long long)step);
    else
        add(o, "{\"step\":%lld", (long long)step);
}

void tlog_int(tlog_out *o, const char *key, int64_t v) { add(o, ",\"%s\":%lld", key, (long long)v); }

void tlog_num(tlog_out *o, const char *key, double v, int digits) {
    if (!isfinite(v))
        add(o, ",\"%s\":null", key);
    else
        add(o, ",\"%s\":%.*g", key, digits, v);
}

void tlog_fixed(tlog_out *o, const char *key, double v, int decimals) {
    if (!isfinite(v))
        add(o, ",\"%s\":null", key);
    else if (fabs(v) >= 1e15)
        add(o, ",\"%s\":%.17g", key, v);
    else
        add(o, ",\"%s\":%.*f", key, decimals, v);
}

void tlog_str(tlog_out *o, const char *key, const char *s) {
    add(o, ",\"%s\":\"", key);
    for (const unsigned char *c = (const unsigned char *)s; *c && !o->overflow; c++) {
        if (*c == '"' || *c == '\\')
            add(o, "\\%c", *c);
        else if (*c < 0x20)
            add(o, "\\u%04x", *c);
        else
            add(o, "%c", *c);
    }
    add(o, "\"");
}

bool tlog_write(tlog_out *o, FILE *f) {
    add(o, "}\n");
    if (o->overflow) {
        errno = ENOBUFS;
        return false;
    }
    return fputs(o->text, f) >= 0 && fflush(f) == 0;
}
