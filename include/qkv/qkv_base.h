/*
 * qkv_base.h: the base of the qkv API: export macro, version, status codes, error messages,
 * threads. Every other public header builds on it; include <qkv/qkv.h> to get them all.
 *
 * Every public call that can fail returns a qkv_status. The human-readable reason (which op,
 * which shapes, file:line inside the library) is kept in a thread-local buffer that
 * qkv_last_error() returns. The library never calls exit() or abort() on user input.
 *
 */
#ifndef QKV_BASE_H
#define QKV_BASE_H

#include "qkv_enums.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif


#if defined(_WIN32)
#define QKV_API __declspec(dllexport)
#elif defined(__GNUC__)
#define QKV_API __attribute__((visibility("default")))
#else
#define QKV_API
#endif

#define QKV_VERSION_MAJOR 0
#define QKV_VERSION_MINOR 1
#define QKV_VERSION_PATCH 0
#define QKV_VERSION_STRING "0.1.0"

typedef enum qkv_status {
    QKV_OK = 0,
    QKV_ERR_INVALID_ARG, /* a NULL pointer, a negative size, an unknown enum value */
    QKV_ERR_SHAPE,       /* shapes or dtypes that do not fit the op */
    QKV_ERR_OOM,         /* allocation failed or a size overflowed */
    QKV_ERR_IO,          /* open/read/write/rename failed */
    QKV_ERR_FORMAT,      /* a malformed file */
    QKV_ERR_UNSUPPORTED, /* valid request this build cannot serve */
    QKV_ERR_STATE,       /* call made in the wrong state (e.g. backward without a tape) */
    QKV_ERR_BACKEND,     /* BLAS / OpenMP / later CUDA, MPI */
    QKV_ERR_NONFINITE    /* a NaN or infinite value where a finite one is needed (logits of
                            inference, a training step's loss or gradient norm, parameters to
                            save) */
} qkv_status;

/* "0.1.0 (float, blas=openblas, openmp=on)" */
QKV_API const char *qkv_version(void);
/* BLAS kernels (src/core/blas_kernel.c). OpenBLAS picks its kernel set for the CPU once, when it
 * loads, and falls back to its generic SSE3 set ("Prescott") on a CPU its version does not know,
 * however wide its vector units (OpenBLAS 0.3.21 on Intel's Emerald Rapids: sgemm 4.8x slower).
 * The kernel set in use: OpenBLAS's core name ("SkylakeX", "Haswell", "Zen", ...), "cblas" for
 * another CBLAS, "none" in builds without BLAS. */
QKV_API const char *qkv_blas_kernel(void);
/* The OPENBLAS_CORETYPE value that serves this CPU better than OpenBLAS's own choice ("SkylakeX"
 * with AVX-512, "Haswell" with AVX2 and FMA), or NULL: only when an OpenBLAS built with
 * DYNAMIC_ARCH fell back to Prescott and OPENBLAS_CORETYPE is not set (a value the user set, even
 * an empty one, is theirs). */
QKV_API const char *qkv_blas_kernel_advice(void);
/* For the main of a program, before it reads input or writes output: when there is advice, set
 * OPENBLAS_CORETYPE and re-execute the program (Linux: /proc/self/exe, the same argv and
 * environment), so that OpenBLAS loads again with the advised kernels; the new process finds the
 * variable set and goes on (QKV_BLAS_REEXEC, also set, names the kernels OpenBLAS had chosen). Returns QKV_OK when there is nothing to do, or an error (exec failed;
 * not Linux; started through the dynamic loader) after which the program can go on with the
 * kernels it has. */
QKV_API qkv_status qkv_blas_reexec_with_advice(char **argv);
/* Short name of a status code: "shape error". */
QKV_API const char *qkv_status_str(qkv_status s);
/* The message of the last error raised on this thread ("" if none). Safe to print on a terminal:
 * control bytes (but the line feed), DEL, C1 controls and bytes that are not UTF-8, which a path
 * or value from a file may hold, are written as \xNN. */
QKV_API const char *qkv_last_error(void);
/* Forget the last error of this thread. */
QKV_API void qkv_clear_error(void);
/* Set this thread's error message (printf format) and return st: lets code built on qkv report
 * its own failures through the same channel as the library's. */
QKV_API qkv_status qkv_set_error(qkv_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Threads used by qkv's OpenMP loops and by BLAS (one shared OpenMP runtime). n <= 0: all cores.
 * Results do not depend on the thread count (see docs/design.md, "Determinism"). */
QKV_API void qkv_set_num_threads(int n);
QKV_API int qkv_get_num_threads(void);

#ifdef __cplusplus
}
#endif

#endif
