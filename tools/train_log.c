/* train_log.c: see train_log.h. */
#include "train_log.h"

#include "../src/io/json.h" /* the library's strict JSON parser */
#include "qkv/qkv_io.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* ---- reading back ---------------------------------------------------------------------------- */

double tlog_get(const tlog_line *l, const char *key) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->m[i].key, key)) return l->m[i].value;
    return NAN;
}

/* line[0, n) as a tlog_line: a JSON object with a non-negative integer "step". */
static bool read_line(const char *line, size_t n, tlog_visit visit, void *user, int64_t max_step) {
    qkv_json_doc *doc = NULL;
    if (qkv_json_parse(line, n, &doc, NULL) != QKV_OK) return false;
    const qkv_json_value *root = qkv_json_root(doc);
    uint64_t step = 0;
    bool ok = root->type == QKV_JSON_OBJECT && qkv_json_u64(qkv_json_get(root, "step"), &step) &&
              step <= (uint64_t)max_step;
    if (ok && visit) {
        tlog_line l = {.type = "eval", .step = (int64_t)step};
        for (int64_t i = 0; i < root->count; i++) {
            const qkv_json_value *v = &root->items[i];
            if (!strcmp(v->key, "type") && v->type == QKV_JSON_STRING) l.type = v->str;
            if (!strcmp(v->key, "step") || l.n == TLOG_MAX_MEMBERS) continue;
            double x;
            if (v->type == QKV_JSON_NULL)
                x = NAN;
            else if (v->type == QKV_JSON_INT)
                x = (v->negative ? -1.0 : 1.0) * (double)v->magnitude;
            else if (v->type == QKV_JSON_NUMBER)
                x = strtod(v->str, NULL);
            else
                continue;
            l.m[l.n++] = (tlog_member){v->key, x};
        }
        visit(user, &l);
    }
    qkv_json_free(doc);
    return ok;
}

qkv_status tlog_filter(const char *text, size_t len, int64_t max_step, tlog_visit visit, void *user,
                       char **kept, size_t *kept_len, int64_t *n_kept, int64_t *n_dropped) {
    /* every kept line ends with '\n', the last one too when the text lacks it: len + 1 bytes at
     * most, and the NUL */
    *kept = malloc(len + 2);
    *kept_len = 0;
    *n_kept = *n_dropped = 0;
    if (!*kept) return qkv_set_error(QKV_ERR_OOM, "log.jsonl: out of memory (%zu bytes)", len);
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        const size_t end = nl ? (size_t)(nl - text) : len;
        if (end > at && read_line(text + at, end - at, visit, user, max_step)) {
            memcpy(*kept + *kept_len, text + at, end - at);
            *kept_len += end - at;
            (*kept)[(*kept_len)++] = '\n';
            ++*n_kept;
        } else if (end > at) {
            ++*n_dropped;
        }
        at = end + 1;
    }
    (*kept)[*kept_len] = '\0';
    return QKV_OK;
}

/* The whole of a regular file into *text (malloc'd); *missing when it does not exist. */
static qkv_status read_all(const char *path, char **text, size_t *len, bool *missing) {
    *text = NULL, *len = 0;
    *missing = access(path, F_OK) != 0 && errno == ENOENT;
    return *missing ? QKV_OK : qkv_file_read(path, TLOG_MAX_BYTES, text, len);
}

qkv_status tlog_resume(const char *path, int64_t max_step, tlog_visit visit, void *user, int64_t *n_kept,
                       int64_t *n_dropped) {
    char *text = NULL, *kept = NULL;
    size_t len = 0, kept_len = 0;
    bool missing = false;
    *n_kept = *n_dropped = 0;
    qkv_status st = read_all(path, &text, &len, &missing);
    if (!st && !missing) st = tlog_filter(text, len, max_step, visit, user, &kept, &kept_len, n_kept, n_dropped);
    if (!st && !missing && kept_len != len) st = qkv_file_write_atomic(path, kept, kept_len);
    free(text);
    free(kept);
    return st;
}
