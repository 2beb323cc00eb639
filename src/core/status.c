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

static void set_message(const char *file, int line, const char *fmt, va_list ap) {
    int n = vsnprintf(qkv_msg, QKV_MSG_SIZE, fmt, ap);
    if (n < 0) n = 0;
    if (n >= QKV_MSG_SIZE) n = QKV_MSG_SIZE - 1;
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
    int n = fmt ? vsnprintf(qkv_msg, QKV_MSG_SIZE, fmt, ap) : -1;
    va_end(ap);
    if (n < 0) qkv_msg[0] = '\0';
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
