/*
 * gemm_floor.c: how much of a training step the matrix products alone take, with the BLAS qkv
 * links against: the floor no change outside GEMM can go below.
 *
 *   LD_PRELOAD=build/release/libgemm_floor.so GEMM_FLOOR_STEPS=1 \
 *       build/release/bench_train --config S --threads 2 --steps 1 --warmup 0
 *
 * An LD_PRELOAD shim in front of cblas_sgemm: every call is passed on to the real one (found with
 * dlsym(RTLD_NEXT)) and tallied by its shape (transposes, M, N, K, leading dimensions, beta = 0
 * or not) and by where it was made (the main thread with BLAS threads, or inside one of qkv's
 * OpenMP regions, where OpenBLAS's OpenMP build runs single-threaded: the batched per-head
 * products). At exit it replays every shape in isolation: operands of the same sizes and leading
 * dimensions, filled once, two warm-up calls, then the median of repeated timed calls; a shape
 * called from the main thread runs with the process's thread count (GEMM_FLOOR_THREADS, default
 * 2), one called inside an OpenMP region with one thread and its time divided by that count (the
 * region's threads share those calls; an ideal split). The table it prints to stderr:
 *
 *   calls per step, shape, where, in-run ms per call, isolated ms per call, GFLOP/s, share;
 *   total: GEMM seconds per step (isolated replay, and as measured in the run), GEMM GFLOP per
 * step.
 *
 * GEMM_FLOOR_STEPS (default 1) divides the tallies: run bench_train with --warmup 0 --steps N
 * and the same N here (bench_train's model set-up makes no GEMM call). The in-run times include
 * cache misses the isolated replay does not have; the isolated sum is the floor to quote.
 * A benchmark tool: built only with OpenBLAS in the float build (CMakeLists.txt).
 */
#define _GNU_SOURCE
#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void (*sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE,
                         const enum CBLAS_TRANSPOSE, const int, const int, const int, const float,
                         const float *, const int, const float *, const int, const float, float *,
                         const int);
void openblas_set_num_threads(int n);

typedef struct shape {
    int order, ta, tb, m, n, k, lda, ldb, ldc, accumulate, in_parallel;
    long calls;
    double run_seconds; /* wall time of the calls in the run */
} shape;

enum { MAX_SHAPES = 512 };
static shape shapes[MAX_SHAPES];
static int n_shapes;
static long dropped_calls;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sgemm_fn real_sgemm;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static sgemm_fn resolve(void) {
    if (!real_sgemm) real_sgemm = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
    if (!real_sgemm) {
        fprintf(stderr, "gemm_floor: no cblas_sgemm after this library (%s)\n", dlerror());
        _exit(127); /* a benchmark shim, not the library: there is no call to pass on */
    }
    return real_sgemm;
}

static void tally(const shape *key, double seconds) {
    pthread_mutex_lock(&lock);
    int i = 0;
    for (; i < n_shapes; i++) {
        const shape *s = &shapes[i];
        if (s->order == key->order && s->ta == key->ta && s->tb == key->tb && s->m == key->m &&
            s->n == key->n && s->k == key->k && s->lda == key->lda && s->ldb == key->ldb &&
            s->ldc == key->ldc && s->accumulate == key->accumulate &&
            s->in_parallel == key->in_parallel)
            break;
    }
    if (i == n_shapes) {
        if (n_shapes == MAX_SHAPES) {
            dropped_calls++;
            pthread_mutex_unlock(&lock);
            return;
        }
        shapes[n_shapes++] = *key;
    }
    shapes[i].calls++;
    shapes[i].run_seconds += seconds;
    pthread_mutex_unlock(&lock);
}

void cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta,
                 const enum CBLAS_TRANSPOSE tb, const int m, const int n, const int k,
                 const float alpha, const float *a, const int lda, const float *b, const int ldb,
                 const float beta, float *c, const int ldc) {
    const sgemm_fn f = resolve();
    const shape key = {.order = order,
                       .ta = ta,
                       .tb = tb,
                       .m = m,
                       .n = n,
                       .k = k,
                       .lda = lda,
                       .ldb = ldb,
                       .ldc = ldc,
                       .accumulate = beta != 0,
                       .in_parallel = omp_in_parallel()};
    const double t0 = now();
    f(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    tally(&key, now() - t0);
}

/* Rows x columns of an operand as stored (row- or column-major, transposed or not). */
static size_t stored_elems(int order, int trans, int rows, int cols, int ld) {
    const int row_major = order == CblasRowMajor;
    const int outer = (row_major != (trans == CblasTrans)) ? rows : cols; /* lines of length ld */
    return (size_t)outer * (size_t)ld;
}

static float *filled(size_t n, unsigned seed) {
    float *x = malloc(n * sizeof *x);
    if (!x) return NULL;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 9) & 0xffff) / 65536.0f - 0.5f;
    }
    return x;
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Median seconds of one call of s, alone, at `threads` BLAS threads. */
static double replay(const shape *s, int threads) {
    const size_t na = stored_elems(s->order, s->ta, s->m, s->k, s->lda);
    const size_t nb = stored_elems(s->order, s->tb, s->k, s->n, s->ldb);
    const size_t nc = stored_elems(s->order, CblasNoTrans, s->m, s->n, s->ldc);
    float *a = filled(na, 1), *b = filled(nb, 2), *c = filled(nc, 3);
    double med = -1;
    if (a && b && c) {
        openblas_set_num_threads(threads);
        const float beta = s->accumulate ? 1.0f : 0.0f;
        for (int w = 0; w < 2; w++)
            real_sgemm(s->order, s->ta, s->tb, s->m, s->n, s->k, 1, a, s->lda, b, s->ldb, beta, c,
                       s->ldc);
        enum { SAMPLES = 7 };
        double t[SAMPLES];
        for (int r = 0; r < SAMPLES; r++) {
            /* each sample repeats the call for about 20 ms (at least once) */
            int reps = 0;
            const double t0 = now();
            double t1 = t0;
            do {
                real_sgemm(s->order, s->ta, s->tb, s->m, s->n, s->k, 1, a, s->lda, b, s->ldb, beta,
                           c, s->ldc);
                reps++;
                t1 = now();
            } while (t1 - t0 < 0.02);
            t[r] = (t1 - t0) / reps;
        }
        qsort(t, SAMPLES, sizeof t[0], cmp_double);
        med = t[SAMPLES / 2];
    }
    free(a);
    free(b);
    free(c);
    return med;
}

static int by_time(const void *x, const void *y) {
    const double a = ((const shape *)x)->run_seconds, b = ((const shape *)y)->run_seconds;
    return (a < b) - (a > b);
}

__attribute__((destructor)) static void report(void) {
    if (!n_shapes) return;
    resolve();
    const char *e = getenv("GEMM_FLOOR_STEPS");
    const double steps = e && atof(e) > 0 ? atof(e) : 1;
    e = getenv("GEMM_FLOOR_THREADS");
    const int threads = e && atoi(e) > 0 ? atoi(e) : 2;
    qsort(shapes, (size_t)n_shapes, sizeof shapes[0], by_time);
    double total_iso = 0, total_run = 0, flop = 0, calls = 0;
    fprintf(
        stderr,
        "gemm_floor: %d shapes, %g step(s), %d thread(s); times per step, 'omp' = called inside an "
        "OpenMP region (1 BLAS thread each, time / %d)\n",
        n_shapes, steps, threads, threads);
    fprintf(stderr, "%8s  %2s %2s %6s %6s %6s  %4s  %4s  %10s %10s %8s %7s\n", "calls", "tA", "tB",
            "M", "N", "K", "beta", "where", "run ms", "alone ms", "GFLOP/s", "share");
    double *iso = malloc((size_t)n_shapes * sizeof *iso);
    if (!iso) return;
    for (int i = 0; i < n_shapes; i++) {
        const shape *s = &shapes[i];
        const double per_call = replay(s, s->in_parallel ? 1 : threads);
        const double div = s->in_parallel ? threads : 1;
        iso[i] = per_call * (double)s->calls / steps / div;
        total_iso += iso[i];
        total_run += s->run_seconds / steps / div;
        flop += 2.0 * s->m * s->n * (double)s->k * (double)s->calls / steps;
        calls += (double)s->calls / steps;
    }
    for (int i = 0; i < n_shapes; i++) {
        const shape *s = &shapes[i];
        const double div = s->in_parallel ? threads : 1;
        const double f = 2.0 * s->m * s->n * (double)s->k * (double)s->calls / steps;
        fprintf(stderr, "%8.1f  %2s %2s %6d %6d %6d  %4s  %5s %10.3f %10.3f %8.1f %6.1f%%\n",
                (double)s->calls / steps, s->ta == CblasTrans ? "T" : "N",
                s->tb == CblasTrans ? "T" : "N", s->m, s->n, s->k, s->accumulate ? "1" : "0",
                s->in_parallel ? "omp" : "main", 1e3 * s->run_seconds / steps / div, 1e3 * iso[i],
                iso[i] > 0 ? f / iso[i] * 1e-9 : 0, 100 * iso[i] / total_iso);
    }
    free(iso);
    fprintf(stderr,
            "gemm_floor: %.0f calls, %.3f GFLOP per step; GEMM time per step: %.4f s alone (%.1f "
            "GFLOP/s), "
            "%.4f s in the run%s\n",
            calls, flop * 1e-9, total_iso, flop / total_iso * 1e-9, total_run,
            dropped_calls ? " (some calls not tallied: more than 512 shapes)" : "");
}
