/*
 * status.c: status names, the thread-local error message, version string, thread count.
 */
#include "internal.h"

#include <stdlib.h>

#ifdef QKV_WITH_OPENMP
#include <omp.h>
#endif
#ifdef QKV_WITH_OPENBLAS
void openblas_set_num_threads(int n);
#endif

#define QKV_MSG_SIZE 1024
static _Thread_local char qkv_msg[QKV_MSG_SIZE];

const char *qkv_status_str(qkv_status s) {
    switch (s) {
    case QKV_OK: return "ok";
    case QKV_ERR_INVALID_ARG: return "invalid argument";
    case QKV_ERR_SHAPE: return "shape error";
    case QKV_ERR_OOM: return "out of memory";
    case QKV_ERR_IO: return "I/O error";
    case QKV_ERR_FORMAT: return "format error";
    case QKV_ERR_UNSUPPORTED: return "unsupported";
    case QKV_ERR_STATE: return "invalid state";
    case QKV_ERR_BACKEND: return "backend error";
    case QKV_ERR_NONFINITE: return "non-finite value";
    }
    return "unknown status";
}

const char *qkv_last_error(void) { return qkv_msg; }
void qkv_clear_error(void) { qkv_msg[0] = '\0'; }

/* msg into qkv_msg with every byte a terminal could act on written as \xNN: C0 controls but the
 * line feed, DEL, the UTF-8 encodings of the C1 controls (U+0080 .. U+009F: CSI is U+009B) and
 * bytes that are not UTF-8. Messages echo paths, keys and values from files and command lines;
 * an escape sequence in them must not reach the terminal that prints the message. Returns the
 * length written. */
static int escape_into_message(const char *msg) {
    const unsigned char *s = (const unsigned char *)msg;
    int k = 0;
    for (size_t i = 0; s[i] && k + 5 < QKV_MSG_SIZE;) {
        const unsigned c = s[i];
        int len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        for (int t = 1; t < len; t++)
            if ((s[i + t] & 0xC0) != 0x80) len = 0;
        const bool control = (len == 1 && ((c < 0x20 && c != '\n') || c == 0x7f)) || (len == 2 && c == 0xC2 && s[i + 1] < 0xA0);
        if (len == 0 || control) {
            k += snprintf(qkv_msg + k, (size_t)(QKV_MSG_SIZE - k), "\\x%02x", c);
            i++;
            continue;
        }
        if (k + len >= QKV_MSG_SIZE) break;
        memcpy(qkv_msg + k, s + i, (size_t)len);
        k += len, i += (size_t)len;
    }
    qkv_msg[k] = '\0';
    return k;
}

static void set_message(const char *file, int line, const char *fmt, va_list ap) {
    char raw[QKV_MSG_SIZE];
    if (vsnprintf(raw, sizeof raw, fmt, ap) < 0) raw[0] = '\0';
    const int n = escape_into_message(raw);
    /* strip the directories of file: "src/ops/dense.c" -> "ops/dense.c" reads fine */
    const char *short_file = strstr(file, "src/");
    snprintf(qkv_msg + n, (size_t)(QKV_MSG_SIZE - n), " [%s:%d]", short_file ? short_file + 4 : file,
             line);
}

void *qkv__fail(qkv_ctx *ctx, qkv_status st, const char *file, int line, const char *fmt, ...) {
    if (ctx && ctx->status != QKV_OK) return NULL; /* keep the first error */
    va_list ap;
    va_start(ap, fmt);
    set_message(file, line, fmt, ap);
    va_end(ap);
    if (ctx) ctx->status = st;
    return NULL;
}

qkv_status qkv__error(qkv_status st, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_message(file, line, fmt, ap);
    va_end(ap);
    return st;
}

qkv_status qkv_set_error(qkv_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char raw[QKV_MSG_SIZE];
    int n = fmt ? vsnprintf(raw, sizeof raw, fmt, ap) : -1;
    va_end(ap);
    if (n < 0) raw[0] = '\0';
    escape_into_message(raw);
    return st;
}

void qkv__assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "qkv: internal error: assertion '%s' failed at %s:%d\n", cond, file, line);
    abort();
}

const char *qkv_version(void) {
    return QKV_VERSION_STRING " ("
#ifdef QKV_DOUBLE
           "double"
#else
           "float"
#endif
#if defined(QKV_WITH_OPENBLAS)
           ", blas=openblas"
#elif defined(QKV_WITH_BLAS)
           ", blas=cblas"
#else
           ", blas=off (blocked fallback)"
#endif
#ifdef QKV_WITH_OPENMP
           ", openmp=on"
#else
           ", openmp=off"
#endif
           ")";
}

void qkv_set_num_threads(int n) {
#ifdef QKV_WITH_OPENMP
    if (n <= 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
#ifdef QKV_WITH_OPENBLAS
    openblas_set_num_threads(n);
#endif
#else
    (void)n;
#endif
}

int qkv_get_num_threads(void) {
#ifdef QKV_WITH_OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}
