/*
 * harness.h: a small test harness. TEST(name) { ... } registers a test (constructor attribute);
 * CHECK* record failures with file:line and keep going; the runner prints one line per failing
 * test and ends with "N passed, N failed" (", N skipped" when some were skipped).
 *
 *   qkv_tests [--threads N] [--kernels ref|fast] [--list] [FILTER...]
 * FILTER is a substring of the test name; several are OR-ed.
 */
#ifndef QKV_TEST_HARNESS_H
#define QKV_TEST_HARNESS_H

#include "qkv/qkv.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef void (*qkv_test_fn)(void);
void qkv_test_register(const char *name, const char *file, qkv_test_fn fn);
void qkv_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void qkv_test_skip(const char *why);
/* For tests of the test tools: forget n failures that were expected (their lines still print). */
void qkv_test_expect_failures(int n);
/* Silence failure messages while a test provokes failures on purpose (calls nest). */
void qkv_test_quiet(bool on);
/* How many CHECKs failed so far in the running test. */
int qkv_test_failures(void);

#define TEST(name)                                                                                \
    static void test_##name(void);                                                                \
    __attribute__((constructor)) static void register_##name(void) {                              \
        qkv_test_register(#name, __FILE__, test_##name);                                          \
    }                                                                                             \
    static void test_##name(void)

#define CHECK(cond)                                                                               \
    do {                                                                                          \
        if (!(cond)) qkv_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                       \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                      \
    do {                                                                                          \
        if (!(cond)) qkv_test_fail(__FILE__, __LINE__, __VA_ARGS__);                              \
    } while (0)

/* |a - b| <= tol */
#define CHECK_NEAR(a, b, tol)                                                                     \
    do {                                                                                          \
        double qkv_a_ = (double)(a), qkv_b_ = (double)(b);                                        \
        if (!(fabs(qkv_a_ - qkv_b_) <= (double)(tol)))                                            \
            qkv_test_fail(__FILE__, __LINE__, "%s = %.10g, %s = %.10g, differ by more than %g",   \
                          #a, qkv_a_, #b, qkv_b_, (double)(tol));                                 \
    } while (0)

/* A call that must return QKV_OK. */
#define CHECK_OK(expr)                                                                            \
    do {                                                                                          \
        qkv_status qkv_st_ = (expr);                                                              \
        if (qkv_st_ != QKV_OK)                                                                    \
            qkv_test_fail(__FILE__, __LINE__, "%s returned %s: %s", #expr,                        \
                          qkv_status_str(qkv_st_), qkv_last_error());                             \
    } while (0)

/* A call that must fail with the given status and a message containing `needle`. */
#define CHECK_ERR(expr, status, needle)                                                           \
    do {                                                                                          \
        qkv_status qkv_st_ = (expr);                                                              \
        if (qkv_st_ != (status) || !strstr(qkv_last_error(), (needle)))                           \
            qkv_test_fail(__FILE__, __LINE__, "%s returned %s (%s), expected %s containing '%s'", \
                          #expr, qkv_status_str(qkv_st_), qkv_last_error(),                       \
                          qkv_status_str(status), (needle));                                      \
    } while (0)

/* A string that must equal `want` (NULL fails). */
#define CHECK_STR(got, want)                                                                      \
    do {                                                                                          \
        const char *got_ = (got), *want_ = (want);                                                \
        CHECK_MSG(got_ && !strcmp(got_, want_), "%s = '%s', expected '%s'", #got,                 \
                  got_ ? got_ : "(null)", want_);                                                 \
    } while (0)

#define SKIP(why)                                                                                 \
    do {                                                                                          \
        qkv_test_skip(why);                                                                       \
        return;                                                                                   \
    } while (0)

/* Options of the current run (set by the runner). */
extern int qkv_test_threads;
extern qkv_kernels qkv_test_kernels;
/* Directory of the committed fixtures (tests/data), from QKV_TEST_DATA or the build. */
const char *qkv_test_data_dir(void);

#endif
