/* harness.c: the runner behind harness.h. */
#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name, *file;
    qkv_test_fn fn;
} test_case;

static test_case *tests;
static int n_tests, cap_tests;
static int current_failures;
static const char *current_name;
static const char *skip_reason;
static int quiet; /* > 0 while failures are expected: count them, print nothing */

int qkv_test_threads = 0;
qkv_kernels qkv_test_kernels = QKV_KERNELS_FAST;

void qkv_test_register(const char *name, const char *file, qkv_test_fn fn) {
    if (n_tests == cap_tests) {
        cap_tests = cap_tests ? 2 * cap_tests : 256;
        tests = realloc(tests, (size_t)cap_tests * sizeof *tests);
        if (!tests) {
            fprintf(stderr, "test harness: out of memory\n");
            exit(2);
        }
    }
    tests[n_tests++] = (test_case){name, file, fn};
}

void qkv_test_fail(const char *file, int line, const char *fmt, ...) {
    if (current_failures < 10 && !quiet) { /* the first few failures of a test tell the story */
        fprintf(stdout, "  check %s (%s:%d): ", current_name, file, line);
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stdout, fmt, ap);
        va_end(ap);
        fputc('\n', stdout);
    }
    current_failures++;
}

void qkv_test_skip(const char *why) { skip_reason = why; }
void qkv_test_expect_failures(int n) { current_failures -= n; }
void qkv_test_quiet(bool on) { quiet += on ? 1 : -1; }
int qkv_test_failures(void) { return current_failures; }

const char *qkv_test_data_dir(void) {
    const char *env = getenv("QKV_TEST_DATA");
    if (env && env[0]) return env;
#ifdef QKV_TEST_DATA_DIR
    return QKV_TEST_DATA_DIR;
#else
    return "tests/data";
#endif
}

static int by_name(const void *a, const void *b) {
    const test_case *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : strcmp(x->name, y->name);
}

int main(int argc, char **argv) {
    /* The OpenBLAS kernels the CLI runs (it re-executes itself the same way), so the tests that
     * compare the library's results in this process with the CLI's see the same bits. */
    if (qkv_blas_reexec_with_advice(argv) != QKV_OK) fprintf(stderr, "qkv_tests: %s\n", qkv_last_error());
    const char *filters[64];
    int n_filters = 0;
    int list = 0, verbose = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            qkv_test_threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) {
            const char *k = argv[++i];
            qkv_test_kernels = !strcmp(k, "ref") ? QKV_KERNELS_REF : QKV_KERNELS_FAST;
        } else if (!strcmp(argv[i], "--list")) {
            list = 1;
        } else if (!strcmp(argv[i], "-v")) {
            verbose = 1;
        } else if (n_filters < 64) {
            filters[n_filters++] = argv[i];
        }
    }
    if (qkv_test_threads > 0) qkv_set_num_threads(qkv_test_threads);
    qsort(tests, (size_t)n_tests, sizeof *tests, by_name);
    int passed = 0, failed = 0, skipped = 0;
    printf("qkv %s, %d thread(s)\n", qkv_version(), qkv_get_num_threads());
    for (int t = 0; t < n_tests; t++) {
        int match = n_filters == 0;
        for (int f = 0; f < n_filters && !match; f++) match = strstr(tests[t].name, filters[f]) != NULL;
        if (!match) continue;
        if (list) {
            printf("%s\n", tests[t].name);
            continue;
        }
        current_name = tests[t].name;
        current_failures = 0;
        skip_reason = NULL;
        qkv_clear_error();
        tests[t].fn();
        if (current_failures) {
            failed++;
            printf("FAILED %s (%d check(s))\n", tests[t].name, current_failures);
        } else if (skip_reason) {
            skipped++;
            if (verbose) printf("skipped %s: %s\n", tests[t].name, skip_reason);
        } else {
            passed++;
            if (verbose) printf("ok %s\n", tests[t].name);
        }
        fflush(stdout);
    }
    if (list) return 0;
    if (skipped)
        printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else
        printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
